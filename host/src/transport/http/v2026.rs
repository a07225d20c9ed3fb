//! 2026-07-28 Streamable HTTP: stateless POSTs to `/mcp`, all served by one stateless
//! session. The mirror headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) go with the
//! request to be checked against its body; errors carry their statuses (400, 404). The answer
//! is one JSON object, unless the request sends notifications first (then an event stream
//! carrying them and then the answer). Closing the response cancels the request; a client a
//! whole queue behind on its stream is dropped, which cancels it too.
//!
//! Handlers here sit behind the gate ([`super::gate`]) and do not check it themselves.

use std::sync::Arc;
use std::task::Poll;

use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::reply::{accepts_sse, json_response, rpc_error, sse, too_many};
use super::streams::LIVE_QUEUE;
use super::{App, VERSION_HEADER};
use crate::principal::Principal;
use crate::protocol::error::{INTERNAL_ERROR, INVALID_REQUEST};
use crate::protocol::jsonrpc::{Decoded, encode_error};
use crate::protocol::request::{Method, RequestMeta};
use crate::protocol::v2026::{self, MirrorHeaders};
use crate::protocol::{ErrorObject, Message, Reply};
use crate::server::{Answer, Backend, Cancellation, Status};

/// Whether a POST belongs to 2026-07-28 (the routing rule of [`v2026::is_v2026`]), judged
/// by its body and its `MCP-Protocol-Version` header.
pub(super) fn is_v2026(decoded: &Decoded, headers: &HeaderMap) -> bool {
    let header_version = headers
        .get(VERSION_HEADER)
        .map(|v| String::from_utf8_lossy(v.as_bytes()));
    let header_version = header_version.as_deref();
    match decoded {
        Decoded::Single(Ok(Message::Request(request))) => {
            v2026::is_v2026(&request.meta, header_version)
        }
        Decoded::Single(_) => v2026::is_v2026(&RequestMeta::default(), header_version),
        Decoded::Batch(_) => false,
    }
}

/// The mirror headers, every `Mcp-Param-*` one included. The gate has refused a request that
/// repeats one, carries more than [`v2026::MAX_PARAM_HEADERS`] or sends a value that is not
/// UTF-8, so nothing here is dropped or read lossily.
fn mirror_headers(headers: &HeaderMap) -> MirrorHeaders {
    let get = |name: &str| {
        headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    // Header names arrive lower-cased.
    let params = headers
        .iter()
        .filter_map(|(name, value)| {
            let suffix = name.as_str().strip_prefix(v2026::PARAM_HEADER_PREFIX)?;
            Some((
                suffix.to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            ))
        })
        .collect();
    MirrorHeaders {
        protocol_version: get(VERSION_HEADER),
        method: get("mcp-method"),
        name: get("mcp-name"),
        params,
    }
}

fn status_of(status: Status) -> StatusCode {
    match status {
        Status::Ok => StatusCode::OK,
        Status::BadRequest => StatusCode::BAD_REQUEST,
        Status::NotFound => StatusCode::NOT_FOUND,
        Status::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Status::Forbidden => StatusCode::FORBIDDEN,
        Status::TooMany => StatusCode::TOO_MANY_REQUESTS,
    }
}

/// Cancels a request when dropped (the client went away), unless disarmed (it was answered).
struct CancelOnDrop(Option<Arc<Cancellation>>);

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(cancellation) = self.0.take() {
            cancellation.cancel();
        }
    }
}

/// A 2026-07-28 POST: no session. The answer is one JSON object, unless the request sends
/// notifications first (progress, logs, a listen stream): then it is an SSE stream carrying
/// them and then the answer. Closing the response cancels the request.
pub(super) async fn post_v2026<B: Backend>(
    app: &Arc<App<B>>,
    headers: &HeaderMap,
    decoded: Decoded,
    call_id: Option<Arc<str>>,
    caller: &Principal,
) -> Response {
    let mirror = mirror_headers(headers);
    let streams = accepts_sse(headers);
    if !streams
        && let Decoded::Single(Ok(Message::Request(request))) = &decoded
        && request.method == Method::Listen
    {
        // A listen stream is a stream: without SSE it could only hang.
        return json_response(
            StatusCode::NOT_ACCEPTABLE,
            encode_error(
                Some(&request.id),
                &ErrorObject::new(
                    INVALID_REQUEST,
                    "subscriptions/listen answers with an event stream: send Accept: text/event-stream",
                ),
            ),
        );
    }
    let (outbound, mut sent) = mpsc::channel::<Reply>(LIVE_QUEUE);
    let Some(pending) = app
        .v2026
        .accept_call(decoded, Some(mirror), call_id, &outbound, caller)
        .await
    else {
        return StatusCode::ACCEPTED.into_response();
    };
    if let Some(refusal) = pending.refusal {
        return app.refusal(refusal);
    }
    drop(outbound);
    let mut guard = CancelOnDrop(pending.cancellation);
    let mut work = pending.work;
    // Polled here once first: work that finishes at once (a plugin call that neither waits on
    // the host nor reaches an epoch tick) and sent nothing before its answer is answered
    // without a hand-off to another task. Other work goes on in a task of its own.
    let mut work = match futures::poll!(&mut work) {
        Poll::Ready(answer) if sent.is_empty() => {
            guard.disarm();
            return answer_response(Ok(answer));
        }
        Poll::Ready(answer) => tokio::spawn(std::future::ready(answer)),
        Poll::Pending => tokio::spawn(work),
    };
    let mut open = true;
    loop {
        tokio::select! {
            biased;
            message = sent.recv(), if open => match message {
                Some(first) if streams => return v2026_stream(first, sent, work, guard),
                // A client that takes JSON only gets the answer alone.
                Some(_) => {}
                None => open = false,
            },
            joined = &mut work => {
                guard.disarm();
                return answer_response(joined);
            }
        }
    }
}

/// The JSON response to a request's answer (or to its task's failure).
fn answer_response(joined: Result<Option<Answer>, tokio::task::JoinError>) -> Response {
    match joined {
        Ok(Some(answer)) if answer.status == Status::TooMany => {
            too_many(answer.reply, answer.retry_after)
        }
        Ok(Some(answer)) => json_response(status_of(answer.status), answer.reply),
        Ok(None) => StatusCode::ACCEPTED.into_response(),
        Err(e) => {
            tracing::error!("a request task failed: {e}");
            rpc_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                INTERNAL_ERROR,
                "the request failed",
            )
        }
    }
}

/// The SSE answer of a 2026-07-28 request: `first`, what else it sends, then its answer.
fn v2026_stream(
    first: Reply,
    mut sent: mpsc::Receiver<Reply>,
    mut work: tokio::task::JoinHandle<Option<Answer>>,
    mut guard: CancelOnDrop,
) -> Response {
    let (live, rx) = mpsc::channel::<Event>(LIVE_QUEUE);
    tokio::spawn(async move {
        if live.send(Event::default().data(first.0)).await.is_err() {
            return;
        }
        loop {
            tokio::select! {
                biased;
                // The client closed the stream: that is the cancellation (the guard fires).
                () = live.closed() => return,
                message = sent.recv() => match message {
                    // A client a whole queue behind is not reading: the stream is dropped
                    // (which cancels the request) rather than backlogged without bound.
                    Some(reply) => {
                        if live.try_send(Event::default().data(reply.0)).is_err() {
                            tracing::debug!("dropped a stream whose client is not reading it");
                            return;
                        }
                    }
                    None => break,
                },
                joined = &mut work => {
                    while let Ok(reply) = sent.try_recv() {
                        let _ = live.send(Event::default().data(reply.0)).await;
                    }
                    guard.disarm();
                    if let Ok(Some(answer)) = joined {
                        let _ = live.send(Event::default().data(answer.reply.0)).await;
                    }
                    return;
                }
            }
        }
        let joined = tokio::select! {
            () = live.closed() => return,
            joined = &mut work => joined,
        };
        guard.disarm();
        if let Ok(Some(answer)) = joined {
            let _ = live.send(Event::default().data(answer.reply.0)).await;
        }
    });
    sse(rx, ())
}
