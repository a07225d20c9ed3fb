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
//!
//! A call that needs the caller to link an account first ([`PluginFailure::LinkRequired`]) is
//! -32042 (URL elicitation required, with `data.elicitations`) for a 2025-11-25 client that
//! can open URLs and may retry once the user has; otherwise a result with `isError: true`
//! naming the URL to open (a tool, a task), or -32603 with the same text. The URL is never
//! logged (it starts a link for this caller).

use serde_json::json;

use super::convert::{bounded, error_result, resource_not_found};
use super::link::LinkPrompt;
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
    /// The caller must link an account with a provider before the call can act as them.
    #[error("needs the caller's {display} account")]
    LinkRequired {
        /// The link to open.
        prompt: LinkPrompt,
        /// The provider's display name.
        display: String,
        /// Answer -32042 (a 2025-11-25 client that can open URLs and retries once the user
        /// has); otherwise the URL goes in the message.
        protocol_error: bool,
    },
    /// Linking the caller's account with a provider failed.
    #[error("could not link your {display} account: {why}")]
    LinkFailed {
        /// The provider's display name.
        display: String,
        /// Why (never a token).
        why: String,
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
            Self::LinkRequired {
                prompt,
                display,
                protocol_error,
            } => return link_required(plugin, request, &prompt, &display, protocol_error),
            failed @ Self::LinkFailed { .. } => {
                let message = failed.to_string();
                tracing::info!(plugin, ?request, "{}", log_line(&message, 4096));
                return match request {
                    Request::Tool | Request::TaskTool => error_result(&message),
                    _ => Err(ErrorObject::internal(message)),
                };
            }
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

/// The answer to a request of `plugin` that needs the caller to open `prompt`'s URL first.
fn link_required(
    plugin: &str,
    request: Request<'_>,
    prompt: &LinkPrompt,
    display: &str,
    protocol_error: bool,
) -> MethodResult {
    tracing::info!(
        plugin,
        provider = %prompt.provider,
        protocol_error,
        "the caller has yet to link their account"
    );
    if protocol_error {
        return Err(ErrorObject::url_elicitation_required(
            format!(
                "This request needs your {display} account: open the URL to link it, then retry"
            ),
            json!([{
                "mode": "url",
                "elicitationId": prompt.elicitation_id,
                "url": prompt.url,
                "message": prompt.message,
            }]),
        ));
    }
    let message = format!(
        "This needs your {display} account. Open {} to link it, then try again.",
        prompt.url
    );
    match request {
        Request::Tool | Request::TaskTool => error_result(&message),
        _ => Err(ErrorObject::internal(message)),
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

    fn prompt() -> LinkPrompt {
        LinkPrompt {
            provider: "github".to_owned(),
            elicitation_id: "el-1".to_owned(),
            url: "https://mcp.example.com/oauth/link/start?ticket=T".to_owned(),
            message: "Link your GitHub account".to_owned(),
        }
    }

    #[test]
    fn a_needed_link_is_32042_or_a_result_naming_the_url() {
        let needed = |protocol_error| PluginFailure::LinkRequired {
            prompt: prompt(),
            display: "GitHub".to_owned(),
            protocol_error,
        };
        let e = needed(true).into_mcp("gh", Request::Tool).unwrap_err();
        assert_eq!(e.code, crate::protocol::error::URL_ELICITATION_REQUIRED);
        assert_eq!(e.code, -32042);
        assert_eq!(
            e.data.unwrap(),
            json!({"elicitations": [{
                "mode": "url",
                "elicitationId": "el-1",
                "url": "https://mcp.example.com/oauth/link/start?ticket=T",
                "message": "Link your GitHub account",
            }]})
        );
        let text = "This needs your GitHub account. Open \
                    https://mcp.example.com/oauth/link/start?ticket=T to link it, then try again.";
        for request in [Request::Tool, Request::TaskTool] {
            let r = result(needed(false).into_mcp("gh", request));
            assert_eq!(r["isError"], true);
            assert_eq!(r["content"][0]["text"], text);
        }
        let e = needed(false).into_mcp("gh", Request::Prompt).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32603, text));

        let failed = PluginFailure::LinkFailed {
            display: "GitHub".to_owned(),
            why: "denied at the provider".to_owned(),
        };
        let r = result(failed.into_mcp("gh", Request::Tool));
        assert_eq!(
            r["content"][0]["text"],
            "could not link your GitHub account: denied at the provider"
        );
    }
}
