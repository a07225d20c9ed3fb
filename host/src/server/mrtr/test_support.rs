//! Helpers of the input requests' unit tests: requests as a client sends them, and rounds
//! begun and ended over them.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{Binding, InputRound, RoundEnd, StateKey};
use crate::protocol::jsonrpc::{Decoded, decode};
use crate::protocol::request::TypedRequest;
use crate::protocol::{ErrorObject, Message};

pub(super) fn typed(line: &str) -> TypedRequest {
    let Decoded::Single(Ok(Message::Request(r))) = decode(line.as_bytes()) else {
        panic!("{line}")
    };
    *r
}

pub(super) fn raw(v: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).unwrap()
}

pub(super) fn begin(
    r: &TypedRequest,
    caps: &Map<String, Value>,
    key: &StateKey,
) -> Result<InputRound, ErrorObject> {
    InputRound::begin(
        &r.retry,
        || binding(r),
        serde_json::value::to_raw_value(caps).ok(),
        key,
        8,
    )
}

pub(super) fn binding(r: &TypedRequest) -> Result<Binding, ErrorObject> {
    Binding::new(
        &r.method,
        r.target.as_ref(),
        r.params.as_deref(),
        &crate::principal::Principal::local(),
    )
}

/// The state of an `input_required` result, and the state's body as JSON.
pub(super) fn state_of(end: RoundEnd) -> (String, Value) {
    let RoundEnd::InputRequired(result) = end else {
        panic!("expected input_required")
    };
    let state = result["requestState"].as_str().unwrap().to_owned();
    let body = B64.decode(state.split_once('.').unwrap().0).unwrap();
    (state, serde_json::from_slice(&body).unwrap())
}

pub(super) fn call(arguments: &str, extra: &str) -> TypedRequest {
    typed(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{arguments}{extra}}}}}"#
    ))
}

pub(super) fn retry(arguments: &str, state: &str, responses: &Value) -> TypedRequest {
    call(
        arguments,
        &format!(r#","requestState":"{state}","inputResponses":{responses}"#),
    )
}

pub(super) const ACCEPT: &str = r#"{"action":"accept","content":{"ok":true}}"#;

pub(super) fn question(text: &str) -> Box<RawValue> {
    raw(&json!({"message": text, "_meta": {"mcpbox/inputKey": "confirm"}}))
}

pub(super) fn caps() -> Map<String, Value> {
    json!({"elicitation": {}, "sampling": {}})
        .as_object()
        .unwrap()
        .clone()
}

pub(super) fn retry_line(state: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"t","arguments":{arguments},"requestState":"{state}"}}}}"#
    )
}
