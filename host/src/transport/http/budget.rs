//! The request-bytes budget (`--max-request-bytes-in-flight`): a POST reserves its bytes
//! before its body is read and holds them while it is served, to the end of its event stream
//! when it answers with one ([`reserve_request_bytes`]). A layer over the gated routes,
//! outside the gate: a POST is reserved for and its body read (413 past `--max-body-bytes`)
//! before the gate looks at it, as when each handler read its body and then checked.
//!
//! Depends on `server` (the process's bounds); knows nothing of sessions or of the gate.

use std::time::Duration;

use axum::RequestExt as _;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest as _, Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use tokio_stream::StreamExt as _;

use super::Shared;
use super::reply::at_limit;
use crate::server::Backend;

/// Reserve a POST's bytes in the global budget before its body is read — its declared
/// length, or the most a body may be when it declares none — read the body, and hold the
/// bytes while the request is served (to the end of its event stream, when it answers with
/// one). Past the budget: 503 with `Retry-After`. Other methods pass untouched.
pub(super) async fn reserve_request_bytes<B: Backend>(
    State(app): Shared<B>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let most = app.config.max_body_bytes.max(1);
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let amount = declared.unwrap_or(most).clamp(1, most);
    let share = match app.config.modern.limits.request_bytes.take(amount) {
        Ok(share) => share,
        Err(refused) => {
            discard_body(request.into_body(), amount);
            return at_limit(&refused);
        }
    };
    let request = match read_body(request).await {
        Ok(request) => request,
        Err(refused) => return refused,
    };
    hold_while_streaming(next.run(request).await, share)
}

/// `response`, holding `held` to the end of its body when it is an event stream (dropped at
/// once otherwise, the response being complete).
pub(super) fn hold_while_streaming<T: Send + Sync + 'static>(
    response: Response,
    held: T,
) -> Response {
    let streaming = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streaming {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _held = &held;
        chunk
    }));
    Response::from_parts(parts, body)
}

/// Read the whole body of `request` within the route's body limit, exactly as the `Bytes`
/// extractor does (the same 413 and messages), and hand it on already read.
async fn read_body(request: Request) -> Result<Request, Response> {
    let (parts, body) = request.with_limited_body().into_parts();
    // The body is already limited: the probe must not add axum's default limit on top.
    let mut probe = Request::new(body);
    DefaultBodyLimit::disable().apply(&mut probe);
    match Bytes::from_request(probe, &()).await {
        Ok(bytes) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Err(rejection) => Err(rejection.into_response()),
    }
}

/// How long the body of a refused request is read and thrown away.
const DISCARD_TIME: Duration = Duration::from_secs(10);

/// Read and throw away the body of a request refused before it was read, at most `most`
/// bytes for at most [`DISCARD_TIME`], holding nothing. A client still sending its body then
/// reads the refusal (and its `Retry-After`); closing on unread bytes would reset the
/// connection under it, and it would see a broken pipe instead.
fn discard_body(body: Body, most: usize) {
    tokio::spawn(async move {
        let mut chunks = body.into_data_stream();
        let mut read = 0usize;
        let _ = tokio::time::timeout(DISCARD_TIME, async {
            while let Some(Ok(chunk)) = chunks.next().await {
                read = read.saturating_add(chunk.len());
                if read > most {
                    break;
                }
            }
        })
        .await;
    });
}
