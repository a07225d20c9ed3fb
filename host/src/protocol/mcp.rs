//! MCP message shapes both revisions share: the params of each method the server handles,
//! and log levels.
//!
//! Params are parsed leniently (unknown keys are ignored, optional parts may be absent) and
//! answered strictly. Values that are opaque to the host (tool arguments, `_meta`) stay raw.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::error::ErrorObject;

/// Parse `params` into `T`; absent params parse as `{}`. A failure is -32602 naming the method.
pub fn parse_params<'a, T: Deserialize<'a>>(
    method: &str,
    params: Option<&'a RawValue>,
) -> Result<T, ErrorObject> {
    let text = params.map_or("{}", RawValue::get);
    serde_json::from_str(text)
        .map_err(|e| ErrorObject::invalid_params(format!("invalid params for `{method}`: {e}")))
}

/// A log severity (RFC 5424), as `logging/setLevel` and `notifications/message` use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detailed debugging information.
    Debug,
    /// Informational messages.
    Info,
    /// Normal but significant events.
    Notice,
    /// Warning conditions.
    Warning,
    /// Error conditions.
    Error,
    /// Critical conditions.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// 1 (debug) to 8 (emergency).
    pub fn rank(self) -> u8 {
        self as u8 + 1
    }

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }
}

/// `logging/setLevel` params.
#[derive(Debug, Deserialize)]
pub struct SetLevelParams {
    /// The minimum level to send.
    pub level: LogLevel,
}

/// `notifications/cancelled` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledParams {
    /// The request to cancel.
    pub request_id: serde_json::Value,
    /// Why, for the log.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `initialize` params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The version the client asks for.
    pub protocol_version: String,
    /// What the client supports (kept raw; read by later features).
    #[serde(default)]
    pub capabilities: Option<Box<RawValue>>,
    /// Who the client is.
    #[serde(default)]
    pub client_info: Option<Implementation>,
}

/// A client's or server's name and version.
#[derive(Debug, Deserialize)]
pub struct Implementation {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its version.
    #[serde(default)]
    pub version: String,
}

/// Params of every paginated list method.
#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    /// The `nextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `tools/call` params.
#[derive(Debug, Deserialize)]
pub struct CallToolParams {
    /// The tool's name.
    pub name: String,
    /// The arguments, raw; absent means `{}`.
    #[serde(default)]
    pub arguments: Option<Box<RawValue>>,
}

/// `subscriptions/listen` params (2026-07-28).
#[derive(Debug, Default, Deserialize)]
pub struct ListenParams {
    /// What the client wants to hear about.
    #[serde(default)]
    pub notifications: ListenFilter,
}

/// The notifications a `subscriptions/listen` asks for.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tools_list_changed: bool,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompts_list_changed: bool,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resources_list_changed: bool,
    /// `notifications/resources/updated` for these URIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_subscriptions: Vec<String>,
}

/// `prompts/get` params.
#[derive(Debug, Deserialize)]
pub struct GetPromptParams {
    /// The prompt's name.
    pub name: String,
    /// Argument values by name.
    #[serde(default)]
    pub arguments: Option<BTreeMap<String, serde_json::Value>>,
}

/// `resources/read` params.
#[derive(Debug, Deserialize)]
pub struct ReadResourceParams {
    /// The resource's URI.
    pub uri: String,
}

/// `resources/directory/read` params (the skills extension).
#[derive(Debug, Deserialize)]
pub struct ReadDirectoryParams {
    /// The directory's URI.
    pub uri: String,
    /// The `nextCursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// `tasks/get` and `tasks/cancel` params (the tasks extension).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskParams {
    /// The task's id, as `tools/call` returned it.
    pub task_id: String,
}

/// `tasks/update` params: answers to a task's input requests.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// The task's id.
    pub task_id: String,
    /// The answers, by the keys of the task's `inputRequests` (unknown keys are ignored).
    #[serde(default)]
    pub input_responses: serde_json::Map<String, serde_json::Value>,
}

/// `completion/complete` params.
#[derive(Debug, Deserialize)]
pub struct CompleteParams {
    /// What is being completed.
    #[serde(rename = "ref")]
    pub reference: CompletionReference,
    /// The argument being completed.
    pub argument: CompletionArgument,
    /// Arguments already filled in.
    #[serde(default)]
    pub context: Option<CompletionContext>,
}

/// The `ref` of a completion request.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub enum CompletionReference {
    /// A prompt's argument.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name.
        name: String,
    },
    /// A resource template's variable.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The template's URI template.
        uri: String,
    },
}

/// The argument of a completion request.
#[derive(Debug, Deserialize)]
pub struct CompletionArgument {
    /// The argument's name.
    pub name: String,
    /// What has been typed so far.
    pub value: String,
}

/// The context of a completion request.
#[derive(Debug, Default, Deserialize)]
pub struct CompletionContext {
    /// Arguments already filled in.
    #[serde(default)]
    pub arguments: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_levels_parse_and_rank() {
        let level: SetLevelParams = serde_json::from_str(r#"{"level":"warning"}"#).unwrap();
        assert_eq!(level.level, LogLevel::Warning);
        assert!(LogLevel::Debug.rank() < LogLevel::Emergency.rank());
        assert!(serde_json::from_str::<SetLevelParams>(r#"{"level":"loud"}"#).is_err());
    }

    #[test]
    fn absent_params_parse_as_empty_object() {
        let params: ListParams = parse_params("tools/list", None).unwrap();
        assert!(params.cursor.is_none());
    }

    #[test]
    fn bad_params_are_invalid_params() {
        let raw = RawValue::from_string(r#"{"name": 5}"#.to_owned()).unwrap();
        let err = parse_params::<CallToolParams>("tools/call", Some(&raw)).unwrap_err();
        assert_eq!(err.code, -32602);
        assert!(err.message.contains("tools/call"), "{}", err.message);
    }
}
