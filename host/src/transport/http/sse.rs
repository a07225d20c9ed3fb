//! The HTTP+SSE transport of 2024-11-05 clients: `GET /sse` opens a session whose
//! every message travels on that one stream (the first event names where to POST), and
//! `POST /messages?session_id=…` hands the session a message, answered 202 (its reply goes on
//! the stream). A session answers only the caller that opened it (another gets 404).
//!
//! Shares the session table of [`super::v2025`]. Handlers here sit behind the gate
//! ([`super::gate`]) and do not check it themselves.

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::sse::Event;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::Shared;
use super::gate::Admitted;
use super::post::decode_body;
use super::reply::{at_limit, over_budget, plain, sse};
use super::streams::LIVE_QUEUE;
use crate::server::{Backend, Budgeted};

/// `GET /sse`: opens a session whose every message travels on this stream; the first event
/// names the endpoint to POST messages to.
pub(super) async fn get_sse<B: Backend>(State(app): Shared<B>, admitted: Admitted) -> Response {
    let own = match app
        .config
        .session
        .budgets
        .take(&admitted.caller, Budgeted::ListenStreams, 1)
    {
        Ok(held) => held,
        Err(over) => return over_budget(None, &over),
    };
    let stream = match app.config.session.limits.listen_streams.take(1) {
        Ok(share) => (share, own),
        Err(refused) => return at_limit(&refused),
    };
    let (id, http, _busy) = match app.create_session(&admitted.caller, None).await {
        Ok(created) => created,
        Err(refused) => return *refused,
    };
    let (live, rx) = mpsc::channel(LIVE_QUEUE);
    let endpoint = Event::default()
        .event("endpoint")
        .data(format!("/messages?session_id={id}"));
    let _ = live.try_send(endpoint);
    http.streams().attach_standalone(live);
    sse(rx, stream)
}

#[derive(serde::Deserialize)]
pub(super) struct SseQuery {
    session_id: String,
}

/// `POST /messages`: a message for the session; its reply goes on the session's SSE stream.
pub(super) async fn post_messages<B: Backend>(
    State(app): Shared<B>,
    admitted: Admitted,
    Query(query): Query<SseQuery>,
    body: Bytes,
) -> Response {
    let Some((http, busy)) = app.owned_session(&query.session_id, &admitted.caller) else {
        return plain(StatusCode::NOT_FOUND, "unknown session");
    };
    http.touch();
    let decoded = decode_body(body).await;
    let pending = http
        .session
        .accept(decoded, None, &http.standalone, &admitted.caller)
        .await;
    if let Some(refusal) = pending.as_ref().and_then(|p| p.refusal.clone()) {
        return app.refusal(refusal);
    }
    if let Some(pending) = pending {
        tokio::spawn(async move {
            let _busy = busy;
            if let Some(answer) = pending.work.await {
                let _ = http.standalone.send(answer.reply).await;
            }
        });
    }
    StatusCode::ACCEPTED.into_response()
}
