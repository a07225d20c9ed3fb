//! The answers every HTTP route builds: plain-text refusals, JSON-RPC errors and replies as
//! JSON with their statuses, 503 with `Retry-After` at a global bound, and event streams.
//!
//! Nothing here decides anything: it only shapes responses.

use std::convert::Infallible;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use tokio_stream::wrappers::ReceiverStream;

use crate::protocol::jsonrpc::encode_error;
use crate::protocol::{ErrorObject, Reply, RequestId};
use crate::server::{AtLimit, OverBudget, RETRY_AFTER_SECS};

/// A request turned away before it reaches a session.
pub(super) type Refused = Box<Response>;

/// A plain-text answer.
pub(super) fn plain(status: StatusCode, message: &'static str) -> Response {
    (status, message).into_response()
}

/// A JSON-RPC error without an id, as JSON with `status`.
pub(super) fn rpc_error(status: StatusCode, code: i32, message: &str) -> Response {
    json_response(status, encode_error(None, &ErrorObject::new(code, message)))
}

/// `reply` as JSON with `status` (a 503 says when to retry).
pub(super) fn json_response(status: StatusCode, reply: Reply) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        reply.0,
    )
        .into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    }
    response
}

/// The answer to a request refused at a global bound: 503 with `Retry-After` and the
/// JSON-RPC error naming the limit.
pub(super) fn at_limit(refused: &AtLimit) -> Response {
    let mut response = json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        encode_error(None, &refused.error()),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    response
}

/// The answer to a request whose caller is over one of its budgets: 429 with `Retry-After`
/// and `reply` (the JSON-RPC error naming the limit and the caller's budget).
pub(super) fn too_many(reply: Reply, retry_after: u64) -> Response {
    let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, reply);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    response
}

/// [`too_many`] for a refusal before a request reaches its session (a session, a stream, a
/// body): answering `id`, the request's, when it could be read.
pub(super) fn over_budget(id: Option<&RequestId>, refused: &OverBudget) -> Response {
    too_many(encode_error(id, &refused.error()), refused.retry_after)
}

/// Whether the client takes an event stream.
pub(super) fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains("text/event-stream")))
}

/// Whether the client takes a JSON answer: `application/json`, `application/*` or `*/*` in
/// its `Accept` (clients of Streamable HTTP list it beside `text/event-stream`).
pub(super) fn accepts_json(headers: &HeaderMap) -> bool {
    headers.get_all(header::ACCEPT).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',').any(|range| {
                let range = range.split(';').next().unwrap_or_default().trim();
                range.eq_ignore_ascii_case("application/json")
                    || range.eq_ignore_ascii_case("application/*")
                    || range == "*/*"
            })
        })
    })
}

/// An SSE response fed by `rx`, holding `share` (a place among the listen streams, and its
/// caller's budget of them) for as
/// long as the stream is open.
pub(super) fn sse<T: Send + Sync + 'static>(rx: mpsc::Receiver<Event>, share: T) -> Response {
    let stream = ReceiverStream::new(rx).map(move |event| {
        let _held = &share;
        Ok::<_, Infallible>(event)
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn json_is_accepted_by_its_type_or_a_wildcard_and_not_by_a_lookalike() {
        for taken in [
            "application/json, text/event-stream",
            "text/event-stream, Application/JSON;q=0.9",
            "*/*",
            "application/*",
        ] {
            assert!(accepts_json(&accept(taken)), "{taken}");
        }
        for refused in ["text/event-stream", "application/jsonl", "text/json", ""] {
            assert!(!accepts_json(&accept(refused)), "{refused}");
        }
        assert!(!accepts_json(&HeaderMap::new()));
    }
}
