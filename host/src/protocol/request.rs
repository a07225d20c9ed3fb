//! Client requests decoded once: the method as an exhaustive [`Method`] enum (unknown names
//! kept as such), the per-request `_meta` as [`RequestMeta`], and the params as a typed
//! [`ClientRequest`]. This is the only place where a method name is compared as a string.
//!
//! Params are parsed leniently (absent params are `{}`, unknown keys are ignored); a params
//! failure is kept as the -32602 to send, so the revision's validation ladder can run first.

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::ErrorObject;
use super::jsonrpc::{Notification, Request, RequestId};
use super::mcp::{
    CallToolParams, CancelledParams, CompleteParams, GetPromptParams, InitializeParams, ListParams,
    ListenParams, ReadDirectoryParams, ReadResourceParams, SetLevelParams, TaskParams,
    UpdateTaskParams, parse_params,
};

/// The `_meta` key naming the protocol revision of a 2026-07-28 request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key holding a 2026-07-28 client's capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The `_meta` key holding a 2026-07-28 client's name and version.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The `_meta` key opting a 2026-07-28 request into log messages.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";

/// Every method a client may call, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// `initialize` (2025-11-25 and older).
    Initialize,
    /// `ping` (2025-11-25 and older).
    Ping,
    /// `server/discover` (2026-07-28).
    Discover,
    /// `subscriptions/listen` (2026-07-28).
    Listen,
    /// `tools/list`.
    ListTools,
    /// `tools/call`.
    CallTool,
    /// `prompts/list`.
    ListPrompts,
    /// `prompts/get`.
    GetPrompt,
    /// `resources/list`.
    ListResources,
    /// `resources/templates/list`.
    ListResourceTemplates,
    /// `resources/read`.
    ReadResource,
    /// `resources/subscribe` (2025-11-25 and older).
    Subscribe,
    /// `resources/unsubscribe` (2025-11-25 and older).
    Unsubscribe,
    /// `completion/complete`.
    Complete,
    /// `logging/setLevel` (2025-11-25 and older).
    SetLevel,
    /// `skills/list` (the skills extension).
    ListSkills,
    /// `skills/get` (the skills extension).
    GetSkill,
    /// `resources/directory/read` (the skills extension).
    ReadDirectory,
    /// `tasks/get` (the tasks extension, 2026-07-28).
    GetTask,
    /// `tasks/update` (the tasks extension, 2026-07-28).
    UpdateTask,
    /// `tasks/cancel` (the tasks extension, 2026-07-28).
    CancelTask,
    /// Any other name.
    Unknown(String),
}

impl Method {
    /// The method called `name`.
    pub fn from_name(name: &str) -> Self {
        match name {
            "initialize" => Self::Initialize,
            "ping" => Self::Ping,
            "server/discover" => Self::Discover,
            "subscriptions/listen" => Self::Listen,
            "tools/list" => Self::ListTools,
            "tools/call" => Self::CallTool,
            "prompts/list" => Self::ListPrompts,
            "prompts/get" => Self::GetPrompt,
            "resources/list" => Self::ListResources,
            "resources/templates/list" => Self::ListResourceTemplates,
            "resources/read" => Self::ReadResource,
            "resources/subscribe" => Self::Subscribe,
            "resources/unsubscribe" => Self::Unsubscribe,
            "completion/complete" => Self::Complete,
            "logging/setLevel" => Self::SetLevel,
            "skills/list" => Self::ListSkills,
            "skills/get" => Self::GetSkill,
            "resources/directory/read" => Self::ReadDirectory,
            "tasks/get" => Self::GetTask,
            "tasks/update" => Self::UpdateTask,
            "tasks/cancel" => Self::CancelTask,
            other => Self::Unknown(other.to_owned()),
        }
    }

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Unknown(name) => name,
            known => known.label(),
        }
    }

    /// The wire name of a known method, `other` for any other (a bounded label for metrics
    /// and spans: a client cannot grow the set).
    pub fn label(&self) -> &'static str {
        match self {
            Self::Initialize => "initialize",
            Self::Ping => "ping",
            Self::Discover => "server/discover",
            Self::Listen => "subscriptions/listen",
            Self::ListTools => "tools/list",
            Self::CallTool => "tools/call",
            Self::ListPrompts => "prompts/list",
            Self::GetPrompt => "prompts/get",
            Self::ListResources => "resources/list",
            Self::ListResourceTemplates => "resources/templates/list",
            Self::ReadResource => "resources/read",
            Self::Subscribe => "resources/subscribe",
            Self::Unsubscribe => "resources/unsubscribe",
            Self::Complete => "completion/complete",
            Self::SetLevel => "logging/setLevel",
            Self::ListSkills => "skills/list",
            Self::GetSkill => "skills/get",
            Self::ReadDirectory => "resources/directory/read",
            Self::GetTask => "tasks/get",
            Self::UpdateTask => "tasks/update",
            Self::CancelTask => "tasks/cancel",
            Self::Unknown(_) => "other",
        }
    }

    /// Whether a 2025-11-25 session must handle it in arrival order, before reading on: it
    /// changes the session's state.
    pub fn changes_session(&self) -> bool {
        matches!(
            self,
            Self::Initialize | Self::SetLevel | Self::Subscribe | Self::Unsubscribe
        )
    }

    /// The params key naming the request's target (`Mcp-Name` on HTTP), if it has one.
    pub fn name_param(&self) -> Option<&'static str> {
        match self {
            Self::CallTool | Self::GetPrompt => Some("name"),
            Self::ReadResource => Some("uri"),
            Self::GetTask | Self::UpdateTask | Self::CancelTask => Some("taskId"),
            _ => None,
        }
    }
}

/// A progress token: a string or an integer, kept as the client wrote it.
pub type ProgressToken = Box<RawValue>;

/// The parts of a request's `_meta` the server reads. Parsed leniently: a malformed value is
/// treated as absent here, and the revision decides whether absence is an error.
#[derive(Debug, Default, Clone)]
pub struct RequestMeta {
    /// Whether `params._meta` was present at all.
    pub present: bool,
    /// `progressToken`, if a string or an integer.
    pub progress_token: Option<ProgressToken>,
    /// `io.modelcontextprotocol/protocolVersion`: `Some` when the key is present (the value
    /// is `None` when it is not a string).
    pub protocol_version: Option<Option<String>>,
    /// `io.modelcontextprotocol/clientCapabilities`, if an object, as sent (parsed only when
    /// a capability must be looked up: when the request asks the client something).
    pub client_capabilities: Option<Box<RawValue>>,
    /// `io.modelcontextprotocol/clientInfo`, as sent.
    pub client_info: Option<Box<RawValue>>,
    /// `io.modelcontextprotocol/logLevel`, as sent.
    pub log_level: Option<Box<RawValue>>,
    /// W3C trace context: `traceparent` and `tracestate`, when strings.
    pub trace: Option<(String, Option<String>)>,
}

/// The `_meta` fields the server reads, borrowed from the request's text.
#[derive(Deserialize)]
struct MetaFields<'a> {
    #[serde(borrow, default, rename = "progressToken")]
    progress_token: Option<&'a RawValue>,
    #[serde(
        borrow,
        default,
        rename = "io.modelcontextprotocol/protocolVersion",
        deserialize_with = "present"
    )]
    protocol_version: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/clientCapabilities")]
    client_capabilities: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/clientInfo")]
    client_info: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "io.modelcontextprotocol/logLevel")]
    log_level: Option<&'a RawValue>,
    #[serde(borrow, default)]
    traceparent: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tracestate: Option<&'a RawValue>,
}

impl RequestMeta {
    /// Read a `_meta` object (absent: `None`).
    fn from_raw(meta: Option<&RawValue>) -> Self {
        let Some(meta) = meta else {
            return Self::default();
        };
        let Ok(fields) = serde_json::from_str::<MetaFields<'_>>(meta.get()) else {
            return Self {
                present: meta.get() != "null",
                ..Self::default()
            };
        };
        let progress_token = fields.progress_token.filter(|token| {
            match serde_json::from_str::<Value>(token.get()) {
                Ok(Value::String(_)) => true,
                Ok(Value::Number(n)) => n.is_i64() || n.is_u64(),
                _ => false,
            }
        });
        let object = |raw: &&RawValue| raw.get().starts_with('{');
        Self {
            present: true,
            progress_token: progress_token.map(ToOwned::to_owned),
            protocol_version: fields
                .protocol_version
                .map(|v| serde_json::from_str::<String>(v.get()).ok()),
            client_capabilities: fields
                .client_capabilities
                .filter(object)
                .map(ToOwned::to_owned),
            client_info: fields.client_info.map(ToOwned::to_owned),
            log_level: fields.log_level.map(ToOwned::to_owned),
            trace: fields
                .traceparent
                .and_then(|v| serde_json::from_str::<String>(v.get()).ok())
                .map(|parent| {
                    let state = fields
                        .tracestate
                        .and_then(|v| serde_json::from_str::<String>(v.get()).ok());
                    (parent, state)
                }),
        }
    }

    /// Whether the request carries the 2026-07-28 envelope's version key.
    pub fn has_version_key(&self) -> bool {
        self.protocol_version.is_some()
    }
}

/// The params of `tools/call`, `prompts/get` and `resources/read` retries (2026-07-28 input
/// requests): the client's answers and the state it echoes, as sent (JSON text, parsed only by
/// the input round that uses them, within its bounds).
#[derive(Debug, Default, Clone)]
pub struct RetryParams {
    /// `inputResponses`: `Some` when the key is present, holding its value as sent.
    pub input_responses: Option<Box<RawValue>>,
    /// `requestState`: `Some` when the key is present, holding its value as sent.
    pub request_state: Option<Box<RawValue>>,
}

/// The fields of params every request may carry, borrowed in one pass: `_meta`, the retry
/// fields, and the target (`name` or `uri`).
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Common<'a> {
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    input_responses: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    request_state: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    uri: Option<&'a RawValue>,
    #[serde(borrow, default)]
    task_id: Option<&'a RawValue>,
}

/// A field that is present is `Some`, even when it holds `null`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn value(raw: Option<&RawValue>) -> Option<Value> {
    raw.map(|r| serde_json::from_str(r.get()).unwrap_or(Value::Null))
}

/// A request's params, typed by method.
#[derive(Debug)]
pub enum ClientRequest {
    /// `initialize`.
    Initialize(InitializeParams),
    /// `ping`.
    Ping,
    /// `server/discover`.
    Discover,
    /// `subscriptions/listen`.
    Listen(ListenParams),
    /// `tools/list`.
    ListTools(ListParams),
    /// `tools/call`.
    CallTool(CallToolParams),
    /// `prompts/list`.
    ListPrompts(ListParams),
    /// `prompts/get`.
    GetPrompt(GetPromptParams),
    /// `resources/list`.
    ListResources(ListParams),
    /// `resources/templates/list`.
    ListResourceTemplates(ListParams),
    /// `resources/read`.
    ReadResource(ReadResourceParams),
    /// `resources/subscribe`.
    Subscribe(ReadResourceParams),
    /// `resources/unsubscribe`.
    Unsubscribe(ReadResourceParams),
    /// `completion/complete`.
    Complete(CompleteParams),
    /// `logging/setLevel`.
    SetLevel(SetLevelParams),
    /// `skills/list`.
    ListSkills(ListParams),
    /// `skills/get`.
    GetSkill(ReadResourceParams),
    /// `resources/directory/read`.
    ReadDirectory(ReadDirectoryParams),
    /// `tasks/get`.
    GetTask(TaskParams),
    /// `tasks/update`.
    UpdateTask(UpdateTaskParams),
    /// `tasks/cancel`.
    CancelTask(TaskParams),
    /// A method this server does not know.
    Unknown(String),
}

/// A request decoded once: its id, method, `_meta`, retry fields and typed params.
#[derive(Debug)]
pub struct TypedRequest {
    /// The id to echo.
    pub id: RequestId,
    /// The method.
    pub method: Method,
    /// The `_meta` fields the server reads.
    pub meta: RequestMeta,
    /// Input-request retry fields (2026-07-28).
    pub retry: RetryParams,
    /// The target named by `params.name` or `params.uri`, for `Mcp-Name` checks.
    pub target: Option<Value>,
    /// The typed params, or the -32602 they earn.
    pub body: Result<ClientRequest, ErrorObject>,
    /// The params as sent (what input-request state is bound to).
    pub params: Option<Box<RawValue>>,
}

impl TypedRequest {
    /// Decode `request`'s method and params.
    pub fn decode(request: Request) -> Self {
        let Request { id, method, params } = request;
        let method = Method::from_name(&method);
        let raw = params.as_deref();
        let common = raw
            .and_then(|p| serde_json::from_str::<Common<'_>>(p.get()).ok())
            .unwrap_or_default();
        let meta = RequestMeta::from_raw(common.meta);
        let retry = RetryParams {
            input_responses: common.input_responses.map(ToOwned::to_owned),
            request_state: common.request_state.map(ToOwned::to_owned),
        };
        let target = match method.name_param() {
            Some("name") => value(common.name),
            Some("taskId") => value(common.task_id),
            Some(_) => value(common.uri),
            None => None,
        };
        let body = decode_body(&method, raw);
        Self {
            id,
            method,
            meta,
            retry,
            target,
            body,
            params,
        }
    }
}

fn decode_body(method: &Method, params: Option<&RawValue>) -> Result<ClientRequest, ErrorObject> {
    let name = method.as_str();
    Ok(match method {
        Method::Initialize => ClientRequest::Initialize(parse_params(name, params)?),
        Method::Ping => ClientRequest::Ping,
        Method::Discover => ClientRequest::Discover,
        Method::Listen => ClientRequest::Listen(parse_params(name, params)?),
        Method::ListTools => ClientRequest::ListTools(parse_params(name, params)?),
        Method::CallTool => ClientRequest::CallTool(parse_params(name, params)?),
        Method::ListPrompts => ClientRequest::ListPrompts(parse_params(name, params)?),
        Method::GetPrompt => ClientRequest::GetPrompt(parse_params(name, params)?),
        Method::ListResources => ClientRequest::ListResources(parse_params(name, params)?),
        Method::ListResourceTemplates => {
            ClientRequest::ListResourceTemplates(parse_params(name, params)?)
        }
        Method::ReadResource => ClientRequest::ReadResource(parse_params(name, params)?),
        Method::Subscribe => ClientRequest::Subscribe(parse_params(name, params)?),
        Method::Unsubscribe => ClientRequest::Unsubscribe(parse_params(name, params)?),
        Method::Complete => ClientRequest::Complete(parse_params(name, params)?),
        Method::SetLevel => ClientRequest::SetLevel(parse_params(name, params)?),
        Method::ListSkills => ClientRequest::ListSkills(parse_params(name, params)?),
        Method::GetSkill => ClientRequest::GetSkill(parse_params(name, params)?),
        Method::ReadDirectory => ClientRequest::ReadDirectory(parse_params(name, params)?),
        Method::GetTask => ClientRequest::GetTask(parse_params(name, params)?),
        Method::UpdateTask => ClientRequest::UpdateTask(parse_params(name, params)?),
        Method::CancelTask => ClientRequest::CancelTask(parse_params(name, params)?),
        Method::Unknown(name) => ClientRequest::Unknown(name.clone()),
    })
}

/// A notification from the client, typed by method.
#[derive(Debug)]
pub enum ClientNotification {
    /// `notifications/initialized`.
    Initialized,
    /// `notifications/cancelled`, with its params (`None` when malformed).
    Cancelled(Option<CancelledParams>),
    /// `notifications/roots/list_changed`.
    RootsListChanged,
    /// Anything else.
    Other(String),
}

impl ClientNotification {
    /// Decode `notification`.
    pub fn decode(notification: &Notification) -> Self {
        match notification.method.as_str() {
            "notifications/initialized" => Self::Initialized,
            "notifications/cancelled" => Self::Cancelled(
                parse_params(&notification.method, notification.params.as_deref()).ok(),
            ),
            "notifications/roots/list_changed" => Self::RootsListChanged,
            other => Self::Other(other.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(line: &str) -> TypedRequest {
        let super::super::jsonrpc::Decoded::Single(Ok(super::super::Message::Request(r))) =
            super::super::jsonrpc::decode(line.as_bytes())
        else {
            panic!("not a request: {line}")
        };
        *r
    }

    #[test]
    fn methods_round_trip_and_unknown_names_are_kept() {
        for name in [
            "initialize",
            "ping",
            "server/discover",
            "subscriptions/listen",
            "tools/list",
            "tools/call",
            "prompts/list",
            "prompts/get",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "resources/subscribe",
            "resources/unsubscribe",
            "completion/complete",
            "logging/setLevel",
            "skills/list",
            "skills/get",
            "resources/directory/read",
            "tools/explode",
        ] {
            assert_eq!(Method::from_name(name).as_str(), name);
        }
        assert_eq!(Method::from_name("x/y"), Method::Unknown("x/y".to_owned()));
    }

    #[test]
    fn meta_is_read_leniently() {
        let r = request(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":7,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}},"io.modelcontextprotocol/logLevel":"info"}}}"#,
        );
        assert!(r.meta.present);
        assert_eq!(
            r.meta.progress_token.as_deref().map(RawValue::get),
            Some("7")
        );
        assert_eq!(r.meta.protocol_version, Some(Some("2026-07-28".to_owned())));
        assert_eq!(
            r.meta.client_capabilities.as_deref().map(RawValue::get),
            Some(r#"{"sampling":{}}"#)
        );
        assert_eq!(r.target, Some(Value::String("t".to_owned())));
        assert!(matches!(r.body, Ok(ClientRequest::CallTool(_))));

        let r = request(r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":5}}"#);
        assert!(r.meta.present && !r.meta.has_version_key());
        let r = request(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":1.5}}}"#,
        );
        assert!(r.meta.progress_token.is_none());
    }

    #[test]
    fn bad_params_are_kept_as_the_error_to_send() {
        let r = request(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}"#);
        assert_eq!(r.body.unwrap_err().code, -32602);
        assert_eq!(r.method, Method::CallTool);
    }

    #[test]
    fn retry_fields_are_seen() {
        let r = request(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":null,"requestState":"s"}}"#,
        );
        assert_eq!(
            r.retry.input_responses.as_deref().map(RawValue::get),
            Some("null")
        );
        assert_eq!(
            r.retry.request_state.as_deref().map(RawValue::get),
            Some(r#""s""#)
        );
    }
}
