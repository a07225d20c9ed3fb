//! `POST /mcp`, before the revision is known: the request's trace span, the body decoded
//! (off the workers when large), the balancer's call id read (`--call-id-header`), and then
//! the choice between 2026-07-28 ([`super::v2026`]) and 2025-11-25 ([`super::v2025`]),
//! with the caller the gate admitted (the session checks its scopes).
//!
//! Sits behind the gate ([`super::gate`]) and does not check it itself.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use tracing::Instrument as _;

use super::gate::Admitted;
use super::reply::{Refused, rpc_error};
use super::{App, HttpConfig, Shared, v2025, v2026};
use crate::protocol::ErrorObject;
use crate::protocol::error::INVALID_REQUEST;
use crate::protocol::jsonrpc::{Decoded, decode, encode_error};
use crate::server::Backend;

/// `POST /mcp`.
pub(super) async fn post_mcp<B: Backend>(
    State(app): Shared<B>,
    admitted: Admitted,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let span = http_span(&headers, "/mcp");
    post_mcp_in(app, admitted, headers, body)
        .instrument(span)
        .await
}

async fn post_mcp_in<B: Backend>(
    app: Arc<App<B>>,
    admitted: Admitted,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let decoded = decode_body(body).await;
    let call_id = match call_id(&app.config, &headers) {
        Ok(call_id) => call_id,
        Err(refused) => return *refused,
    };
    if v2026::is_v2026(&decoded, &headers) {
        return v2026::post_v2026(&app, &headers, decoded, call_id, &admitted.caller).await;
    }
    v2025::post_session(&app, &headers, decoded, call_id, &admitted.caller).await
}

/// The trace span of an HTTP request (exported only with `--otlp-endpoint`), parented on its
/// `traceparent` header.
fn http_span(headers: &HeaderMap, route: &'static str) -> tracing::Span {
    let span = tracing::trace_span!(
        target: crate::telemetry::TARGET,
        "mcp.http",
        otel.name = %format_args!("POST {route}"),
        http.request.method = "POST",
        http.route = route,
    );
    if let Some(parent) = headers.get("traceparent").and_then(|v| v.to_str().ok()) {
        let state = headers.get("tracestate").and_then(|v| v.to_str().ok());
        crate::telemetry::set_parent(&span, parent, state);
    }
    span
}

/// Bodies this large or larger are decoded on a blocking thread, not on a worker that every
/// request shares.
const OFF_THE_WORKERS_BYTES: usize = 256 << 10;

/// Decode a body, on a blocking thread when it is large.
pub(super) async fn decode_body(body: Bytes) -> Decoded {
    if body.len() < OFF_THE_WORKERS_BYTES {
        return decode(&body);
    }
    match tokio::task::spawn_blocking(move || decode(&body)).await {
        Ok(decoded) => decoded,
        Err(e) => {
            tracing::error!("decoding a request body failed: {e}");
            Decoded::Single(Err(encode_error(
                None,
                &ErrorObject::internal("the request could not be decoded"),
            )))
        }
    }
}

/// The id the balancer gave this request, when `--call-id-header` is set and it sent one
/// (absent: the request runs unrecorded); an unusable one is refused (400).
fn call_id(config: &HttpConfig, headers: &HeaderMap) -> Result<Option<Arc<str>>, Refused> {
    let Some(name) = &config.call_id_header else {
        return Ok(None);
    };
    let mut values = headers.get_all(name).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return match headers.get(name) {
            None => Ok(None),
            Some(_) => Err(Box::new(rpc_error(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                &format!("the request carries more than one {name} header"),
            ))),
        };
    };
    let id = value.to_str().unwrap_or_default();
    match crate::kv::calls::check_call_id(id) {
        Ok(()) => Ok(Some(Arc::from(id))),
        Err(problem) => Err(Box::new(rpc_error(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            &format!("invalid {name} header: {problem}"),
        ))),
    }
}
