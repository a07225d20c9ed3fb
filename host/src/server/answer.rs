//! What a request's answer is: the encoded reply and the [`Status`] it earns on a transport
//! with statuses (HTTP), the refusals (`forbidden`, a panic, over budget), and the JSON-RPC
//! error of a request refused for lack of scopes ([`INSUFFICIENT_SCOPE`]).

use super::{MethodResult, OverBudget, Revision};
use crate::protocol::error::{INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::protocol::jsonrpc::encode_error;
use crate::protocol::v2026::{HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION};
use crate::protocol::{ErrorObject, Reply, RequestId};

/// How a transport with statuses (HTTP) should answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 200.
    Ok,
    /// 400: the request was refused (bad input, envelope, headers, version, capability).
    BadRequest,
    /// 404: no such method (2026-07-28).
    NotFound,
    /// 503 with `Retry-After`: refused at a global bound (try again later).
    Unavailable,
    /// 403: the caller lacks the scopes of the plugin the request would reach.
    Forbidden,
    /// 429 with `Retry-After`: the caller is over one of its budgets.
    TooMany,
}

/// A reply and the status it earns.
#[derive(Debug)]
pub struct Answer {
    /// The encoded reply.
    pub reply: Reply,
    /// Its HTTP status class.
    pub status: Status,
    /// It is an error.
    pub failed: bool,
    /// With [`Status::Forbidden`]: the scopes the caller lacks.
    pub missing_scopes: Vec<String>,
    /// With [`Status::TooMany`]: when to try again, in seconds.
    pub retry_after: u64,
}

impl Answer {
    pub(super) fn ok(reply: Reply) -> Self {
        Self {
            reply,
            status: Status::Ok,
            failed: false,
            missing_scopes: Vec::new(),
            retry_after: 0,
        }
    }

    /// A refusal with `status`.
    pub(super) fn refused(reply: Reply, status: Status) -> Self {
        Self {
            reply,
            status,
            failed: true,
            missing_scopes: Vec::new(),
            retry_after: 0,
        }
    }

    /// The refusal of request `id`, whose caller lacks the `missing` scopes.
    pub(super) fn forbidden(id: &RequestId, missing: Vec<String>) -> Self {
        let error = insufficient_scope(&missing);
        Self {
            reply: encode_error(Some(id), &error),
            status: Status::Forbidden,
            failed: true,
            missing_scopes: missing,
            retry_after: 0,
        }
    }

    /// The answer to request `id` (of `method`) whose handling panicked: an internal error
    /// for the client (no details, which stay in the log) and the panic's message logged.
    pub(super) fn panicked(
        id: &RequestId,
        method: &str,
        panic: &(dyn std::any::Any + Send),
    ) -> Self {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_owned());
        tracing::error!(
            %id,
            method,
            panic = %message,
            "a defect in mcpbox failed this request (answered with an internal error; still serving)"
        );
        let error = ErrorObject::internal(
            "internal error: mcpbox failed while handling this request; its log says why, \
             and it keeps serving other requests",
        );
        Self::refused(encode_error(Some(id), &error), Status::Ok)
    }

    /// The refusal of request `id`, whose caller is `over` one of its budgets.
    pub(super) fn over_budget(id: &RequestId, over: &OverBudget) -> Self {
        Self {
            reply: encode_error(Some(id), &over.error()),
            status: Status::TooMany,
            failed: true,
            missing_scopes: Vec::new(),
            retry_after: over.retry_after,
        }
    }
}

/// The JSON-RPC error of a request refused for lack of scopes: [`INSUFFICIENT_SCOPE`], naming
/// them (in `data.missingScopes` too).
pub fn insufficient_scope(missing: &[String]) -> ErrorObject {
    ErrorObject::new(
        INSUFFICIENT_SCOPE,
        format!(
            "insufficient scope: this needs {} (ask the authorization server for it)",
            missing.join(" ")
        ),
    )
    .with_data(serde_json::json!({ "missingScopes": missing }))
}

/// The JSON-RPC error code of a request refused for lack of scopes (a server error of the
/// implementation-defined range; over HTTP the request is answered 403 before any of this).
pub const INSUFFICIENT_SCOPE: i32 = -32003;

/// The answer to a request: its result, or its error with the status the error earns (on
/// HTTP, 2026-07-28 errors have statuses of their own; 2025-11-25 errors travel under 200).
pub(super) fn answer(id: &RequestId, outcome: MethodResult, revision: Revision) -> Answer {
    match outcome {
        Ok(output) => Answer::ok(crate::protocol::jsonrpc::encode_result(id, &output.body)),
        Err(error) => {
            tracing::debug!(%id, code = error.code, "{}", error.message);
            let status = match error.code {
                _ if revision == Revision::V2025 => Status::Ok,
                INVALID_PARAMS | HEADER_MISMATCH | MISSING_CAPABILITY | UNSUPPORTED_VERSION => {
                    Status::BadRequest
                }
                METHOD_NOT_FOUND => Status::NotFound,
                _ => Status::Ok,
            };
            Answer::refused(encode_error(Some(id), &error), status)
        }
    }
}
