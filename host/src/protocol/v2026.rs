//! What is particular to MCP 2026-07-28 (the stateless revision): which messages belong to
//! it, the per-request envelope and its validation ladder (first failure wins), the errors it
//! defines, `resultType` and caching hints on results, `server/discover`, and the shapes of
//! `subscriptions/listen` and input requests.

use base64::Engine as _;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::error::{ErrorObject, INVALID_PARAMS, RESOURCE_NOT_FOUND};
use super::mcp::{ListenFilter, LogLevel};
use super::request::{Method, RequestMeta, TypedRequest};
use super::result::{SERVER_INFO, ServerCapabilities};
use super::v2025;

/// The revision.
pub const VERSION: &str = "2026-07-28";

/// Header and body disagree, or a required header is missing.
pub const HEADER_MISMATCH: i32 = -32020;
/// The request needs a client capability the client did not declare.
pub const MISSING_CAPABILITY: i32 = -32021;
/// The protocol version is not served.
pub const UNSUPPORTED_VERSION: i32 = -32022;

/// What every `Mcp-Param-{NAME}` header's name begins with (header names are compared
/// lower-cased).
pub const PARAM_HEADER_PREFIX: &str = "mcp-param-";
/// The most `Mcp-Param-*` headers one request may carry, and the most `x-mcp-header`
/// annotations one tool's input schema may make. Every one a request carries is read; a
/// request with more is refused (400, [`HEADER_MISMATCH`]), as is one repeating a
/// `Mcp-Param-*` header or sending a value that is not UTF-8.
pub const MAX_PARAM_HEADERS: usize = 64;

/// The `_meta` key tagging listen-stream notifications with their subscription.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The `_meta` key carrying the server's name and version on results.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Every version this endpoint answers: this revision, then the handshake versions (so a
/// dual-era client that gets -32022 knows it can fall back to `initialize`).
pub fn supported_versions() -> Vec<&'static str> {
    std::iter::once(VERSION).chain(v2025::VERSIONS).collect()
}

/// Whether a message belongs to this revision: its `_meta` carries the version key, or the
/// transport's `MCP-Protocol-Version` header names a version that is not a handshake one.
/// Everything else is a 2025-11-25 (or older) message.
pub fn is_v2026(meta: &RequestMeta, header_version: Option<&str>) -> bool {
    meta.has_version_key() || header_version.is_some_and(|v| !v2025::is_handshake_version(v))
}

/// The HTTP headers that mirror the body, as the transport read them (stdio has none).
#[derive(Debug, Default, Clone)]
pub struct MirrorHeaders {
    /// `MCP-Protocol-Version`.
    pub protocol_version: Option<String>,
    /// `Mcp-Method`.
    pub method: Option<String>,
    /// `Mcp-Name`.
    pub name: Option<String>,
    /// Every `Mcp-Param-{NAME}` header: `NAME` lower-cased, and the value as sent.
    pub params: Vec<(String, String)>,
}

/// A tool argument a client mirrors into an `Mcp-Param-{header}` header: a top-level property
/// of the tool's input schema annotated `"x-mcp-header": "{header}"` (SEP-2243).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// The property (the argument's name).
    pub property: String,
    /// The header's name after `Mcp-Param-`, as the schema writes it.
    pub header: String,
}

/// The `x-mcp-header` annotations of a tool's input schema: each on a top-level property whose
/// type is `string`, `integer` or `boolean`, a non-empty HTTP token (no spaces, colons,
/// control or non-ASCII characters), unique without regard to case, at most
/// [`MAX_PARAM_HEADERS`] of them. Anything else is the reason the tool cannot be served.
pub fn header_params(schema: &Value) -> Result<Vec<HeaderParam>, String> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<HeaderParam> = Vec::new();
    for (property, definition) in properties {
        let Some(annotation) = definition.get("x-mcp-header") else {
            continue;
        };
        let why = |what: &str| format!("its input schema's `x-mcp-header` on `{property}` {what}");
        let Some(header) = annotation.as_str() else {
            return Err(why("is not a string"));
        };
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if header.is_empty() || !header.chars().all(token) {
            return Err(why(&format!(
                "is `{}`: a header name is a non-empty token of ASCII letters, digits and !#$%&'*+-.^_`|~",
                header.escape_debug()
            )));
        }
        let primitive = matches!(
            definition.get("type").and_then(Value::as_str),
            Some("string" | "integer" | "boolean")
        );
        if !primitive {
            return Err(why(
                "is on a property that is not of type string, integer or boolean",
            ));
        }
        if let Some(other) = out.iter().find(|p| p.header.eq_ignore_ascii_case(header)) {
            return Err(why(&format!(
                "names the header `{header}`, as `{}` does (without regard to case)",
                other.property
            )));
        }
        if out.len() == MAX_PARAM_HEADERS {
            return Err(format!(
                "its input schema makes more than {MAX_PARAM_HEADERS} `x-mcp-header` annotations \
                 (a request carries at most {MAX_PARAM_HEADERS} Mcp-Param headers)"
            ));
        }
        out.push(HeaderParam {
            property: property.clone(),
            header: header.to_owned(),
        });
    }
    Ok(out)
}

/// Check the `Mcp-Param-*` headers a `tools/call` was sent with against its `arguments` (the
/// body): for each of the tool's [`HeaderParam`]s, a value in the body needs the header, and
/// the header (trimmed, a `=?base64?…?=` value decoded strictly) must equal the value's text;
/// a header without a value in the body is a mismatch too. Refused: 400 with -32020.
pub fn check_params(
    params: &[HeaderParam],
    arguments: Option<&serde_json::Map<String, Value>>,
    sent: &[(String, String)],
) -> Result<(), Refused> {
    for param in params {
        let name = format!("Mcp-Param-{}", param.header);
        let header = sent
            .iter()
            .find(|(suffix, _)| suffix.eq_ignore_ascii_case(&param.header))
            .map(|(_, value)| value.as_str());
        let body = arguments
            .and_then(|a| a.get(&param.property))
            .filter(|v| !v.is_null());
        match (header, body) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(Refused::bad(header_mismatch(format!(
                    "missing `{name}` header: argument `{}` is in the body, and the tool's schema \
                     says it is mirrored there",
                    param.property
                ))));
            }
            (Some(_), None) => {
                return Err(Refused::bad(header_mismatch(format!(
                    "`{name}` header is sent, but argument `{}` is not in the body",
                    param.property
                ))));
            }
            (Some(header), Some(body)) => {
                let expected = match body {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                check_header(&name, Some(header), &expected)?;
            }
        }
    }
    Ok(())
}

/// How a refusal maps onto HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 400: envelope, header, version or capability errors.
    BadRequest,
    /// 404: unknown or removed methods.
    NotFound,
}

/// A request refused before it ran, with the HTTP status class it earns.
#[derive(Debug)]
pub struct Refused {
    /// The error to send.
    pub error: ErrorObject,
    /// How HTTP answers it.
    pub refusal: Refusal,
}

impl Refused {
    fn bad(error: ErrorObject) -> Self {
        Self {
            error,
            refusal: Refusal::BadRequest,
        }
    }
}

/// A validated request envelope: what the client declared for this one request (its
/// capabilities stay in the request's `_meta`, read when needed).
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// The minimum level of log messages the request opted into; `None` means no logs.
    pub log_level: Option<LogLevel>,
}

/// Run the validation ladder on `request` (steps 1–4 and the log level): the envelope, the
/// mirror headers (HTTP only), the version, the method. `served` says which methods this
/// server offers (a method whose capability is not declared is not found).
pub fn check(
    request: &TypedRequest,
    headers: Option<&MirrorHeaders>,
    served: &dyn Fn(&Method) -> bool,
) -> Result<Envelope, Refused> {
    let meta = &request.meta;
    // 1. The envelope.
    let missing = if !meta.present {
        Some("`params._meta`")
    } else if !meta.has_version_key() {
        Some("`_meta.io.modelcontextprotocol/protocolVersion`")
    } else if meta.client_capabilities.is_none() {
        Some("`_meta.io.modelcontextprotocol/clientCapabilities` (an object)")
    } else {
        None
    };
    if let Some(missing) = missing {
        return Err(Refused::bad(ErrorObject::new(
            INVALID_PARAMS,
            format!("a {VERSION} request needs {missing}"),
        )));
    }
    let version = meta.protocol_version.clone().flatten().unwrap_or_default();
    // 2. The headers that mirror the body.
    if let Some(headers) = headers {
        check_header(
            "MCP-Protocol-Version",
            headers.protocol_version.as_deref(),
            &version,
        )?;
        check_header(
            "Mcp-Method",
            headers.method.as_deref(),
            request.method.as_str(),
        )?;
        if request.method.name_param().is_some() {
            let target = match &request.target {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            check_header("Mcp-Name", headers.name.as_deref(), &target)?;
        }
    }
    // 3. The version.
    if version != VERSION {
        return Err(Refused::bad(unsupported_version(&version)));
    }
    // 4. The method.
    if !is_method_of_this_revision(&request.method) || !served(&request.method) {
        return Err(Refused {
            error: ErrorObject::method_not_found(request.method.as_str()),
            refusal: Refusal::NotFound,
        });
    }
    let log_level = match &meta.log_level {
        None => None,
        Some(level) => Some(serde_json::from_str::<LogLevel>(level.get()).map_err(|_| {
            Refused::bad(ErrorObject::invalid_params(format!(
                "unknown log level {} in `_meta.io.modelcontextprotocol/logLevel`; expected one of debug, info, notice, warning, error, critical, alert, emergency",
                level.get()
            )))
        })?),
    };
    Ok(Envelope { log_level })
}

/// Whether the revision has `method` at all (`initialize`, `ping`, `logging/setLevel` and
/// resource subscriptions were removed).
fn is_method_of_this_revision(method: &Method) -> bool {
    !matches!(
        method,
        Method::Initialize
            | Method::Ping
            | Method::SetLevel
            | Method::Subscribe
            | Method::Unsubscribe
            | Method::Unknown(_)
    )
}

/// Compare a mirror header with the body, after trimming and decoding a Base64 sentinel.
fn check_header(name: &str, header: Option<&str>, body: &str) -> Result<(), Refused> {
    let Some(header) = header else {
        return Err(Refused::bad(header_mismatch(format!(
            "missing `{name}` header (it must mirror the request body)"
        ))));
    };
    let value = decode_header_value(header.trim()).ok_or_else(|| {
        Refused::bad(header_mismatch(format!(
            "`{name}` header holds an invalid Base64 value"
        )))
    })?;
    if value != body {
        return Err(Refused::bad(header_mismatch(format!(
            "`{name}` header `{value}` does not match the request body (`{body}`)"
        ))));
    }
    Ok(())
}

/// A header value, with `=?base64?…?=` decoded.
fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(value.to_owned()),
    }
}

/// -32020.
pub fn header_mismatch(message: String) -> ErrorObject {
    ErrorObject::new(HEADER_MISMATCH, message)
}

/// -32022 naming the versions served.
pub fn unsupported_version(requested: &str) -> ErrorObject {
    ErrorObject::new(
        UNSUPPORTED_VERSION,
        format!(
            "unsupported protocol version `{requested}`; this server speaks {}",
            supported_versions().join(", ")
        ),
    )
    .with_data(json!({ "supported": supported_versions(), "requested": requested }))
}

/// -32021 naming the capabilities (a ClientCapabilities object) the request needed.
pub fn missing_capabilities(capabilities: &Map<String, Value>) -> ErrorObject {
    let names: Vec<&str> = capabilities.keys().map(String::as_str).collect();
    ErrorObject::new(
        MISSING_CAPABILITY,
        format!(
            "this request needs the client capability {} , which the request's _meta did not declare",
            names.join(", ")
        )
        .replace(" ,", ","),
    )
    .with_data(json!({ "requiredCapabilities": capabilities }))
}

/// A backend error in this revision's terms: resource not found is -32602 with `data.uri`.
pub fn map_error(mut error: ErrorObject) -> ErrorObject {
    if error.code == RESOURCE_NOT_FOUND {
        error.code = INVALID_PARAMS;
    }
    error
}

/// How long clients may cache a result, and who may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHints {
    /// `ttlMs`.
    pub ttl_ms: u64,
    /// `cacheScope`: `true` for `public`, `false` for `private`.
    pub public: bool,
}

/// `result` as a complete result of this revision: `resultType: "complete"`, and the caching
/// hints when given. The fields are spliced into the JSON text (results are objects), so
/// pre-serialised pages are not parsed again.
pub fn complete(result: &RawValue, cache: Option<CacheHints>) -> Box<RawValue> {
    let text = result.get();
    let body = text.trim_start().strip_prefix('{').unwrap_or("}");
    let mut out = String::with_capacity(text.len() + 64);
    out.push_str(r#"{"resultType":"complete""#);
    if let Some(cache) = cache {
        out.push_str(r#","ttlMs":"#);
        out.push_str(&cache.ttl_ms.to_string());
        out.push_str(if cache.public {
            r#","cacheScope":"public""#
        } else {
            r#","cacheScope":"private""#
        });
    }
    if !body.trim_start().starts_with('}') {
        out.push(',');
    }
    out.push_str(body);
    RawValue::from_string(out).unwrap_or_else(|_| result.to_owned())
}

/// The `server/discover` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// `complete`.
    pub result_type: &'static str,
    /// Every version this endpoint answers.
    pub supported_versions: Vec<&'static str>,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// How long the answer may be cached.
    pub ttl_ms: u64,
    /// `public`.
    pub cache_scope: &'static str,
    /// The server's name and version.
    #[serde(rename = "_meta")]
    pub meta: Value,
}

impl DiscoverResult {
    /// The answer for a server offering `capabilities`.
    pub fn new(capabilities: ServerCapabilities, ttl_ms: u64) -> Self {
        Self {
            result_type: "complete",
            supported_versions: supported_versions(),
            capabilities,
            ttl_ms,
            cache_scope: "public",
            meta: json!({ META_SERVER_INFO: SERVER_INFO }),
        }
    }
}

/// `_meta` tagging a listen-stream message with its subscription.
pub fn subscription_meta(id: &impl Serialize) -> Value {
    json!({ META_SUBSCRIPTION_ID: id })
}

/// `notifications/subscriptions/acknowledged` params: the filter the server honours.
pub fn acknowledgement(id: &impl Serialize, honoured: &ListenFilter) -> Value {
    json!({ "_meta": subscription_meta(id), "notifications": honoured })
}

/// `notifications/subscriptions/acknowledged`.
pub const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The result that ends a listen stream from the server's side.
pub fn listen_closed(id: &impl Serialize) -> Value {
    json!({ "resultType": "complete", "_meta": subscription_meta(id) })
}

/// An `input_required` result: the questions by key, and the state to echo.
pub fn input_required(requests: &Map<String, Value>, state: &str) -> Value {
    json!({
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": state,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jsonrpc::{Decoded, decode};
    use crate::protocol::{Message, request::TypedRequest};

    fn typed(line: &str) -> TypedRequest {
        let Decoded::Single(Ok(Message::Request(r))) = decode(line.as_bytes()) else {
            panic!("{line}")
        };
        *r
    }

    fn all(_: &Method) -> bool {
        true
    }

    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

    fn headers(version: &str, method: &str, name: Option<&str>) -> MirrorHeaders {
        MirrorHeaders {
            protocol_version: Some(version.to_owned()),
            method: Some(method.to_owned()),
            name: name.map(str::to_owned),
            params: Vec::new(),
        }
    }

    #[test]
    fn custom_headers_are_read_from_schemas_and_checked_against_the_body() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "query": {"type": "string"}
        }});
        let params = header_params(&schema).unwrap();
        assert_eq!(params.len(), 2);
        for (bad, why) in [
            (
                serde_json::json!({"a": {"type": "string", "x-mcp-header": ""}}),
                "token",
            ),
            (
                serde_json::json!({"a": {"type": "string", "x-mcp-header": "My Region"}}),
                "token",
            ),
            (
                serde_json::json!({"a": {"type": "string", "x-mcp-header": "Région"}}),
                "token",
            ),
            (
                serde_json::json!({"a": {"type": "number", "x-mcp-header": "A"}}),
                "type",
            ),
            (
                serde_json::json!({"a": {"type": "object", "x-mcp-header": "A"}}),
                "type",
            ),
            (
                serde_json::json!({"a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}),
                "as `a` does",
            ),
        ] {
            let error = header_params(&serde_json::json!({"properties": bad})).unwrap_err();
            assert!(error.contains(why), "{error}");
        }
        // As many annotations as a request may carry headers, and no more (#55).
        let many = |n: usize| {
            let properties: Map<String, Value> = (0..n)
                .map(|i| {
                    let header = format!("P{i}");
                    (
                        header.clone(),
                        json!({"type": "string", "x-mcp-header": header}),
                    )
                })
                .collect();
            json!({ "properties": properties })
        };
        assert_eq!(
            header_params(&many(MAX_PARAM_HEADERS)).unwrap().len(),
            MAX_PARAM_HEADERS
        );
        let error = header_params(&many(MAX_PARAM_HEADERS + 1)).unwrap_err();
        assert!(error.contains("more than 64"), "{error}");
        let body = serde_json::json!({"region": "Hello", "priority": 0, "query": "q"});
        let arguments = body.as_object();
        let sent = |region: &str| {
            vec![
                ("region".to_owned(), region.to_owned()),
                ("priority".to_owned(), "0".to_owned()),
            ]
        };
        assert!(check_params(&params, arguments, &sent("Hello")).is_ok());
        assert!(check_params(&params, arguments, &sent("  Hello ")).is_ok());
        assert!(check_params(&params, arguments, &sent("=?base64?SGVsbG8=?=")).is_ok());
        for bad in ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "Bye"] {
            let refused = check_params(&params, arguments, &sent(bad)).unwrap_err();
            assert_eq!(refused.error.code, HEADER_MISMATCH, "{bad}");
            assert_eq!(refused.refusal, Refusal::BadRequest);
        }
        // A value without the wrapper is literal, even when it looks like Base64.
        let literal = serde_json::json!({"region": "SGVsbG8=", "priority": 0});
        assert!(check_params(&params, literal.as_object(), &sent("SGVsbG8=")).is_ok());
        // Missing: the value is in the body, the header is not.
        let missing = vec![("priority".to_owned(), "0".to_owned())];
        assert!(check_params(&params, arguments, &missing).is_err());
        // Neither: fine; the header without the value: refused.
        let only = serde_json::json!({"query": "q"});
        assert!(check_params(&params, only.as_object(), &[]).is_ok());
        assert!(check_params(&params, only.as_object(), &sent("Hello")).is_err());
    }

    #[test]
    fn the_ladder_reports_the_first_failure() {
        let no_meta = typed(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#);
        let refused = check(&no_meta, None, &all).unwrap_err();
        assert_eq!(
            (refused.error.code, refused.refusal),
            (-32602, Refusal::BadRequest)
        );

        let line = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t",{META}}}}}"#
        );
        let call = typed(&line);
        assert!(check(&call, None, &all).is_ok());
        let h = headers("2026-07-28", "tools/call", Some(" t "));
        assert!(check(&call, Some(&h), &all).is_ok());
        let h = headers("2026-07-28", "tools/call", Some("=?base64?dA==?="));
        assert!(check(&call, Some(&h), &all).is_ok());
        for h in [
            headers("2026-07-28", "tools/call", Some("u")),
            headers("2026-07-28", "tools/call", None),
            headers("2026-07-28", "TOOLS/CALL", Some("t")),
            headers("2025-11-25", "tools/call", Some("t")),
        ] {
            assert_eq!(check(&call, Some(&h), &all).unwrap_err().error.code, -32020);
        }

        let line = r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v9","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let refused = check(&typed(line), None, &all).unwrap_err();
        assert_eq!(refused.error.code, -32022);
        assert_eq!(refused.error.data.unwrap()["requested"], "v9");

        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{{META}}}}}"#);
        let refused = check(&typed(&line), None, &all).unwrap_err();
        assert_eq!(
            (refused.error.code, refused.refusal),
            (-32601, Refusal::NotFound)
        );
    }

    #[test]
    fn complete_splices_fields_into_objects() {
        let raw = RawValue::from_string(r#"{"tools":[]}"#.to_owned()).unwrap();
        let out = complete(
            &raw,
            Some(CacheHints {
                ttl_ms: 5,
                public: true,
            }),
        );
        let v: Value = serde_json::from_str(out.get()).unwrap();
        assert_eq!(
            v,
            json!({"resultType":"complete","ttlMs":5,"cacheScope":"public","tools":[]})
        );
        let empty = RawValue::from_string("{}".to_owned()).unwrap();
        assert_eq!(complete(&empty, None).get(), r#"{"resultType":"complete"}"#);
    }

    #[test]
    fn routing_follows_the_version_key_or_a_2026_header() {
        let bare = RequestMeta::default();
        assert!(!is_v2026(&bare, None));
        assert!(!is_v2026(&bare, Some("2025-11-25")));
        assert!(is_v2026(&bare, Some("2026-07-28")));
        assert!(is_v2026(&bare, Some("v999.0.0")));
    }
}
