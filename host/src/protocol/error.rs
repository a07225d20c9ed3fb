//! JSON-RPC error objects and the codes MCP uses.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The input was not JSON (or not UTF-8).
pub const PARSE_ERROR: i32 = -32700;
/// The JSON was not a valid request.
pub const INVALID_REQUEST: i32 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// The params were wrong: unknown tool or prompt, missing argument, bad cursor.
pub const INVALID_PARAMS: i32 = -32602;
/// The server failed.
pub const INTERNAL_ERROR: i32 = -32603;
/// MCP: no resource at that URI.
pub const RESOURCE_NOT_FOUND: i32 = -32002;
/// mcpbox: a request the balancer retried names a tool call that may already have run (its
/// replica went away, or its result was not kept): it was not run again.
pub const CALL_NOT_REPEATED: i32 = -32030;
/// MCP 2025-11-25: the request needs the user to open a URL first (URL-mode elicitation);
/// `data.elicitations` lists them. The client retries once the user has.
pub const URL_ELICITATION_REQUIRED: i32 = -32042;

/// A JSON-RPC error: code, message and optional data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// One of the codes above (or the client's own, in responses from the client).
    pub code: i32,
    /// A sentence naming what was wrong.
    pub message: String,
    /// Extra detail, such as the URI that was not found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with no data.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attach data.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// -32602 with this message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// -32603 with this message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// -32042 with this message and `elicitations` (each
    /// `{"mode":"url","elicitationId":…,"url":…,"message":…}`) as `data.elicitations`.
    pub fn url_elicitation_required(message: impl Into<String>, elicitations: Value) -> Self {
        let mut data = serde_json::Map::new();
        data.insert("elicitations".to_owned(), elicitations);
        Self::new(URL_ELICITATION_REQUIRED, message).with_data(Value::Object(data))
    }

    /// -32601 for `method`.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("method not found: `{method}`"))
    }
}
