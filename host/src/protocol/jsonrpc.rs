//! JSON-RPC 2.0 framing: decoding one message (or a batch) from bytes, and encoding replies.
//!
//! Decoding is two-staged so that every failure gets the error the spec asks for: bytes that
//! are not JSON (or not UTF-8) are a parse error (-32700, id `null`); JSON that is not a valid
//! message is an invalid request (-32600), echoing the id when one could be read. Fields are
//! borrowed as raw JSON first, so `params` is never parsed into a tree here; a request's params
//! are then decoded once, by its method, into a [`TypedRequest`] that every later step reads
//! (the transport's routing, the session, the revision), and tool arguments reach plugins as
//! the client's own text.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::error::{ErrorObject, INVALID_REQUEST, PARSE_ERROR};
use super::request::TypedRequest;

/// A request id: a string or an integer, echoed back exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id (any value that fits `i64` or `u64`).
    Number(serde_json::Number),
    /// A string id.
    String(String),
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A request as framed: it has an id and gets exactly one reply. Decoding makes it a
/// [`TypedRequest`] at once.
#[derive(Debug)]
pub struct Request {
    /// The id to echo.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The params, unparsed (an object or an array, or absent).
    pub params: Option<Box<RawValue>>,
}

/// A notification: it has no id and is never answered.
#[derive(Debug)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The params, unparsed.
    pub params: Option<Box<RawValue>>,
}

/// A response the client sent to a request of ours.
#[derive(Debug)]
pub struct Response {
    /// The id of our request.
    pub id: RequestId,
    /// The result, or the error the client reported.
    pub outcome: Result<Box<RawValue>, ErrorObject>,
}

/// One decoded message.
#[derive(Debug)]
pub enum Message {
    /// A request, its params decoded by its method.
    Request(Box<TypedRequest>),
    /// A notification.
    Notification(Notification),
    /// A response to a request the server sent.
    Response(Response),
}

/// What one line of input decoded to.
#[derive(Debug)]
pub enum Decoded {
    /// A single message, or the error reply for an invalid one.
    Single(Result<Message, Reply>),
    /// A batch: each element decoded on its own. Never empty (an empty batch is `Single(Err)`).
    Batch(Vec<Result<Message, Reply>>),
}

/// An encoded reply, ready to write: one JSON object as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply(pub String);

/// The raw fields of a message, borrowed from the input without parsing their values.
/// A field that is present is `Some`, even when it holds `null` (`"id": null` is invalid,
/// `"result": null` is a valid result).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Decode one line of input.
pub fn decode(input: &[u8]) -> Decoded {
    let text = match std::str::from_utf8(input) {
        Ok(text) => text,
        Err(e) => return parse_error(format!("message is not valid UTF-8: {e}")),
    };
    let value: &RawValue = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => return parse_error(format!("message is not valid JSON: {e}")),
    };
    let raw = value.get().trim_start();
    if raw.starts_with('[') {
        let elements: Vec<&RawValue> = match serde_json::from_str(raw) {
            Ok(elements) => elements,
            Err(e) => return parse_error(format!("message is not valid JSON: {e}")),
        };
        if elements.is_empty() {
            return Decoded::Single(Err(invalid_request(None, "empty batch")));
        }
        return Decoded::Batch(elements.into_iter().map(decode_message).collect());
    }
    Decoded::Single(decode_message(value))
}

fn parse_error(message: String) -> Decoded {
    Decoded::Single(Err(encode_error(
        None,
        &ErrorObject::new(PARSE_ERROR, message),
    )))
}

fn invalid_request(id: Option<&RequestId>, why: &str) -> Reply {
    encode_error(
        id,
        &ErrorObject::new(INVALID_REQUEST, format!("invalid request: {why}")),
    )
}

/// Decode one message (a batch element, or the whole input).
fn decode_message(value: &RawValue) -> Result<Message, Reply> {
    if !value.get().trim_start().starts_with('{') {
        return Err(invalid_request(None, "a message must be a JSON object"));
    }
    let envelope: Envelope<'_> = serde_json::from_str(value.get())
        .map_err(|e| invalid_request(None, &format!("unreadable message: {e}")))?;
    let id = match envelope.id {
        None => None,
        Some(raw) => Some(
            decode_id(raw)
                .ok_or_else(|| invalid_request(None, "`id` must be a string or an integer"))?,
        ),
    };
    let id_ref = id.as_ref();
    match envelope
        .jsonrpc
        .map(|v| serde_json::from_str::<String>(v.get()))
    {
        Some(Ok(version)) if version == "2.0" => {}
        Some(_) => return Err(invalid_request(id_ref, "`jsonrpc` must be \"2.0\"")),
        None => return Err(invalid_request(id_ref, "missing `jsonrpc: \"2.0\"`")),
    }
    if let Some(method) = envelope.method {
        let method: String = serde_json::from_str(method.get())
            .map_err(|_| invalid_request(id_ref, "`method` must be a string"))?;
        let params = match envelope.params {
            None => None,
            Some(p) if is_null(p) => None,
            Some(p) if p.get().starts_with(['{', '[']) => Some(p.to_owned()),
            Some(_) => {
                return Err(invalid_request(
                    id_ref,
                    "`params` must be an object or an array",
                ));
            }
        };
        return Ok(match id {
            Some(id) => Message::Request(Box::new(TypedRequest::decode(Request {
                id,
                method,
                params,
            }))),
            None => Message::Notification(Notification { method, params }),
        });
    }
    let Some(id) = id else {
        return Err(invalid_request(
            None,
            "a message needs a `method` (or is a response with an `id`)",
        ));
    };
    let outcome = match (envelope.result, envelope.error) {
        (Some(result), None) => Ok(result.to_owned()),
        (None, Some(error)) => Err(serde_json::from_str::<ErrorObject>(error.get())
            .map_err(|_| invalid_request(Some(&id), "`error` must be a JSON-RPC error object"))?),
        _ => {
            return Err(invalid_request(
                Some(&id),
                "a response needs exactly one of `result` and `error`",
            ));
        }
    };
    Ok(Message::Response(Response { id, outcome }))
}

fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

fn decode_id(raw: &RawValue) -> Option<RequestId> {
    match serde_json::from_str::<serde_json::Value>(raw.get()).ok()? {
        serde_json::Value::String(s) => Some(RequestId::String(s)),
        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => Some(RequestId::Number(n)),
        _ => None,
    }
}

/// The `id` of a message from its first bytes, when the rest cannot be read (a message over
/// the size limit): the value of the top-level `"id"` key, if it is a string or an integer and
/// appears in `head`. Used only to address the error reply.
pub fn sniff_id(head: &[u8]) -> Option<RequestId> {
    let text = String::from_utf8_lossy(head);
    let bytes = text.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let end = string_end(bytes, i)?;
                let key = &text[i..=end];
                i = end + 1;
                if depth == 1 && key == "\"id\"" {
                    let rest = text[i..].trim_start().strip_prefix(':')?.trim_start();
                    let mut stream =
                        serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
                    return match stream.next()?.ok()? {
                        serde_json::Value::String(s) => Some(RequestId::String(s)),
                        serde_json::Value::Number(n) if n.is_i64() || n.is_u64() => {
                            Some(RequestId::Number(n))
                        }
                        _ => None,
                    };
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote closing the string that opens at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// `json` (valid JSON text) with no line break: the whitespace between its tokens removed if
/// it has a line break, else as it is (strings are untouched: in valid JSON they cannot hold a
/// raw line break). JSON a plugin supplies is passed through as text, and a line break in it
/// would end a stdio message or an SSE field early.
pub fn without_line_breaks(json: &str) -> std::borrow::Cow<'_, str> {
    if !json.bytes().any(|b| b == b'\n' || b == b'\r') {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `raw` with no line break (see [`without_line_breaks`]).
pub fn flat_raw(raw: Box<RawValue>) -> Box<RawValue> {
    match without_line_breaks(raw.get()) {
        std::borrow::Cow::Borrowed(_) => raw,
        // Removing whitespace between the tokens of valid JSON leaves valid JSON.
        std::borrow::Cow::Owned(flat) => RawValue::from_string(flat).unwrap_or(raw),
    }
}

#[derive(Serialize)]
struct Outgoing<'a> {
    jsonrpc: &'static str,
    id: Option<&'a RequestId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

/// Encode a successful reply carrying `result` (JSON text).
pub fn encode_result(id: &RequestId, result: &RawValue) -> Reply {
    encode(&Outgoing {
        jsonrpc: "2.0",
        id: Some(id),
        result: Some(result),
        error: None,
    })
}

/// Encode an error reply. `id` is `None` (sent as `null`) when the request's id is unknown.
pub fn encode_error(id: Option<&RequestId>, error: &ErrorObject) -> Reply {
    encode(&Outgoing {
        jsonrpc: "2.0",
        id,
        result: None,
        error: Some(error),
    })
}

/// Encode a notification from the server.
pub fn encode_notification(method: &str, params: Option<&RawValue>) -> Reply {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a RawValue>,
    }
    encode(&Out {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// Encode a request from the server to the client.
pub fn encode_request(id: &RequestId, method: &str, params: Option<&RawValue>) -> Reply {
    #[derive(Serialize)]
    struct Out<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a RawValue>,
    }
    encode(&Out {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// Encode a batch of replies as one JSON array.
pub fn encode_batch(replies: &[Reply]) -> Reply {
    let mut out = String::with_capacity(replies.iter().map(|r| r.0.len() + 1).sum::<usize>() + 2);
    out.push('[');
    for (i, reply) in replies.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&reply.0);
    }
    out.push(']');
    Reply(out)
}

fn encode(message: &impl Serialize) -> Reply {
    // Serialising these structs cannot fail: every field is a string, a number or valid
    // raw JSON. Keep a well-formed fallback rather than a panic all the same.
    Reply(serde_json::to_string(message).unwrap_or_else(|e| {
        format!(
            r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"could not encode reply: {}"}}}}"#,
            e.to_string().replace(['"', '\\'], "'")
        )
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn line_breaks_leave_plugin_json_and_nothing_else_changes() {
        use super::without_line_breaks;
        let pretty = "{\n  \"a\": [1, 2],\r\n  \"s\": \"x \\\" \\n y\"\n}";
        let flat = without_line_breaks(pretty);
        assert_eq!(flat, r#"{"a":[1,2],"s":"x \" \n y"}"#);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&flat).unwrap(),
            serde_json::from_str::<serde_json::Value>(pretty).unwrap()
        );
        // Without a line break, byte for byte (a schema's spacing and key order survive).
        let kept = r#"{"b": 1, "a": {"x": "y z"}}"#;
        assert!(matches!(without_line_breaks(kept), std::borrow::Cow::Borrowed(k) if k == kept));
    }

    use serde_json::{Value, json};

    use super::*;

    fn single(input: &str) -> Result<Message, Value> {
        match decode(input.as_bytes()) {
            Decoded::Single(result) => result.map_err(|reply| parse(&reply)),
            Decoded::Batch(_) => panic!("expected a single message"),
        }
    }

    fn parse(reply: &Reply) -> Value {
        serde_json::from_str(&reply.0).expect("replies are JSON")
    }

    fn error_code(input: &str) -> (i64, Value) {
        let reply = single(input).expect_err("expected an error");
        (
            reply["error"]["code"].as_i64().expect("a code"),
            reply["id"].clone(),
        )
    }

    #[test]
    fn garbage_is_a_parse_error_with_null_id() {
        assert_eq!(error_code("not json"), (-32700, Value::Null));
        assert_eq!(
            error_code(r#"{"jsonrpc":"2.0","id":1,"method":"x""#),
            (-32700, Value::Null)
        );
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let Decoded::Single(Err(reply)) =
            decode(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}")
        else {
            panic!("expected an error");
        };
        assert_eq!(parse(&reply)["error"]["code"], -32700);
    }

    #[test]
    fn wrong_jsonrpc_version_is_invalid_request_with_id() {
        assert_eq!(
            error_code(r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#),
            (-32600, json!(7))
        );
        assert_eq!(
            error_code(r#"{"id":"a","method":"ping"}"#),
            (-32600, json!("a"))
        );
        assert_eq!(
            error_code(r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#),
            (-32600, json!(1))
        );
    }

    #[test]
    fn non_object_messages_are_invalid_requests() {
        assert_eq!(error_code("1"), (-32600, Value::Null));
        assert_eq!(error_code(r#""ping""#), (-32600, Value::Null));
        assert_eq!(error_code("null"), (-32600, Value::Null));
    }

    #[test]
    fn bad_ids_methods_and_params_are_invalid_requests() {
        assert_eq!(
            error_code(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).0,
            -32600
        );
        assert_eq!(
            error_code(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#).0,
            -32600
        );
        assert_eq!(
            error_code(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#).0,
            -32600
        );
        assert_eq!(
            error_code(r#"{"jsonrpc":"2.0","id":3,"method":5}"#),
            (-32600, json!(3))
        );
        assert_eq!(
            error_code(r#"{"jsonrpc":"2.0","id":3,"method":"x","params":"s"}"#),
            (-32600, json!(3))
        );
        assert_eq!(error_code(r#"{"jsonrpc":"2.0"}"#), (-32600, Value::Null));
    }

    #[test]
    fn ids_are_kept_exactly() {
        for id in [
            json!(0),
            json!(-5),
            json!(u64::MAX),
            json!("x-1"),
            json!(""),
        ] {
            let input = json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string();
            let Ok(Message::Request(request)) = single(&input) else {
                panic!("expected a request")
            };
            let reply = encode_result(
                &request.id,
                &RawValue::from_string("{}".into()).expect("json"),
            );
            assert_eq!(parse(&reply)["id"], id);
        }
    }

    #[test]
    fn notifications_have_no_id() {
        let Ok(Message::Notification(n)) =
            single(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        else {
            panic!("expected a notification")
        };
        assert_eq!(n.method, "notifications/initialized");
    }

    #[test]
    fn params_are_passed_through_unparsed() {
        let input = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"b": 1.50, "a":[ ]}}"#;
        let Ok(Message::Request(request)) = single(input) else {
            panic!("expected a request")
        };
        assert_eq!(
            request.params.expect("params").get(),
            r#"{"b": 1.50, "a":[ ]}"#
        );
    }

    #[test]
    fn responses_are_recognised() {
        let Ok(Message::Response(r)) = single(r#"{"jsonrpc":"2.0","id":4,"result":{"ok":true}}"#)
        else {
            panic!("expected a response")
        };
        assert!(r.outcome.is_ok());
        let Ok(Message::Response(r)) =
            single(r#"{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}"#)
        else {
            panic!("expected a response")
        };
        assert_eq!(r.outcome.expect_err("an error").code, -1);
    }

    #[test]
    fn empty_batch_is_one_invalid_request() {
        assert_eq!(error_code("[]"), (-32600, Value::Null));
        assert_eq!(error_code(" [ ] "), (-32600, Value::Null));
    }

    #[test]
    fn batch_elements_decode_independently() {
        let Decoded::Batch(items) = decode(
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}, 5, {"jsonrpc":"2.0","method":"n"}]"#,
        ) else {
            panic!("expected a batch")
        };
        assert_eq!(items.len(), 3);
        assert!(matches!(items[0], Ok(Message::Request(_))));
        assert!(items[1].is_err());
        assert!(matches!(items[2], Ok(Message::Notification(_))));
    }

    #[test]
    fn ids_are_sniffed_from_the_head_of_a_message() {
        assert_eq!(
            sniff_id(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"#),
            Some(RequestId::Number(7.into()))
        );
        assert_eq!(
            sniff_id(br#"{"params":{"id":1,"s":"\"id\":2"},"id":"a-\"b","method":"#),
            Some(RequestId::String("a-\"b".to_owned()))
        );
        assert_eq!(sniff_id(br#"{"method":"x","params":{"id":3,"#), None);
        assert_eq!(sniff_id(b"garbage"), None);
    }

    #[test]
    fn batches_encode_as_arrays() {
        let a = encode_error(None, &ErrorObject::new(-32600, "x"));
        let batch = encode_batch(&[a.clone(), a]);
        assert_eq!(parse(&batch).as_array().map(Vec::len), Some(2));
    }
}
