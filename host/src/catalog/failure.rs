//! Every way a request can fail at a plugin, as one type ([`PluginFailure`]) from the engine
//! up, and the one function that maps it to MCP ([`PluginFailure::into_mcp`]).
//!
//! The rule: in `tools/call` every failure is a result with `isError: true` and a one-line
//! message naming the plugin (the model can read it and try again), except that a call run as
//! a task that produced no result at all (a trap, a limit, an invalid result) fails the task
//! with -32603; elsewhere (prompts,
//! resources, completion) the plugin's own "invalid params" and "not found" are -32602 (and,
//! for a resource, -32002 with `data.uri`), and everything else is -32603. Messages from
//! plugins are cut to a bounded size, and what reaches mcpbox's log is escaped.

use serde_json::json;

use super::convert::{bounded, error_result, resource_not_found};
use crate::engine::{CallError, GuestError, log_line};
use crate::protocol::ErrorObject;
use crate::server::MethodResult;

/// Why a request failed at a plugin.
#[derive(Debug, thiserror::Error)]
pub enum PluginFailure {
    /// The plugin's own error (its `error` result).
    #[error("{0:?}")]
    Guest(GuestError),
    /// Running it failed: a limit fired, it trapped or panicked.
    #[error("{0}")]
    Run(#[from] CallError),
    /// The tool's arguments do not match its input schema (the model's to fix).
    #[error("{0}")]
    InvalidArguments(String),
    /// What it returned breaks the contract (structured content, output schema).
    #[error("{0}")]
    InvalidOutput(String),
    /// Its result is over its size limit.
    #[error("returned a result of {size} bytes, over its limit of {limit} bytes")]
    TooLarge {
        /// The result's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

/// The request that failed.
#[derive(Debug, Clone, Copy)]
pub enum Request<'a> {
    /// `tools/call`.
    Tool,
    /// `tools/call` run as a task: the plugin's own refusals and invalid arguments stay
    /// `isError` results (the task completes), anything that kept it from producing a result
    /// is -32603 (the task failed).
    TaskTool,
    /// `prompts/get`.
    Prompt,
    /// `resources/read` of this URI.
    Resource(&'a str),
    /// `completion/complete`.
    Completion,
}

impl From<GuestError> for PluginFailure {
    fn from(error: GuestError) -> Self {
        Self::Guest(error)
    }
}

impl PluginFailure {
    /// The MCP answer for this failure of `plugin` during `request`, logged once here.
    pub fn into_mcp(self, plugin: &str, request: Request<'_>) -> MethodResult {
        let message = match self {
            Self::Guest(GuestError::InvalidParams(m) | GuestError::NotFound(m))
                if matches!(request, Request::Tool | Request::TaskTool) =>
            {
                return error_result(&bounded(m));
            }
            Self::Guest(GuestError::InvalidParams(m)) => {
                return Err(ErrorObject::invalid_params(bounded(m)));
            }
            Self::Guest(GuestError::NotFound(m)) => {
                return Err(match request {
                    Request::Resource(uri) => resource_not_found(uri)
                        .with_data(json!({ "uri": uri, "reason": bounded(m) })),
                    _ => ErrorObject::invalid_params(bounded(m)),
                });
            }
            Self::InvalidArguments(problem) => return error_result(&problem),
            Self::Guest(GuestError::Internal(m)) => {
                format!("plugin `{plugin}` failed: {}", bounded(m))
            }
            other @ (Self::Run(_) | Self::InvalidOutput(_) | Self::TooLarge { .. }) => {
                format!("plugin `{plugin}` {other}")
            }
        };
        tracing::warn!(plugin, ?request, "{}", log_line(&message, 4096));
        match request {
            Request::Tool => error_result(&message),
            // A task that produced no result failed; the client reads the error in its status.
            _ => Err(ErrorObject::internal(message)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn result(outcome: MethodResult) -> Value {
        let output = outcome.unwrap();
        let body: Value = serde_json::from_str(output.body.get()).unwrap();
        assert_eq!(output.is_error, body["isError"] == true);
        body
    }

    #[test]
    fn tool_failures_are_error_results_and_others_are_protocol_errors() {
        let r = result(
            PluginFailure::Run(CallError::OutOfFuel { budget: 5 }).into_mcp("p", Request::Tool),
        );
        assert_eq!(r["isError"], true);
        assert_eq!(
            r["content"][0]["text"],
            "plugin `p` ran out of fuel after 5 units"
        );

        let e = PluginFailure::Guest(GuestError::NotFound("gone".into()))
            .into_mcp("p", Request::Resource("x://y"))
            .unwrap_err();
        assert_eq!(e.code, -32002);
        assert_eq!(e.data.unwrap()["uri"], "x://y");

        let e = PluginFailure::TooLarge { size: 9, limit: 8 }
            .into_mcp("p", Request::Prompt)
            .unwrap_err();
        assert_eq!(e.code, -32603);
        assert_eq!(
            e.message,
            "plugin `p` returned a result of 9 bytes, over its limit of 8 bytes"
        );

        let e = PluginFailure::Guest(GuestError::InvalidParams("no".into()))
            .into_mcp("p", Request::Completion)
            .unwrap_err();
        assert_eq!(e.code, -32602);
    }
}
