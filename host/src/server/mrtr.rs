//! Input requests for 2026-07-28 clients (multi-round-trip requests, MRTR): a plugin asks the
//! client something (`elicit`, `sample`, `list-roots`) and the host, instead of sending a
//! request, ends the round with `input_required`. The client retries with the answers and the
//! `requestState` it was given; the host runs the plugin again in a fresh instance and answers
//! its questions from what was gathered.
//!
//! `requestState` is attacker input. It is `base64url(JSON) "." base64url(HMAC-SHA256)` under
//! the process's [`StateKey`], binding the method, the target and the params (a digest of
//! their canonical JSON), the answers gathered so far, and an expiry. Anything that fails
//! verification is -32602 naming what was wrong.
//!
//! Questions are keyed: a plugin may name the key with `_meta["mcpbox/inputKey"]` in the
//! request it passes (the host removes it before asking); otherwise the key is the kind and
//! the question's position (`elicitation-1`, `sampling-2`, `roots-3`), stable as long as the
//! plugin asks in the same order.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::context::ClientRequest;
use crate::protocol::ErrorObject;
use crate::protocol::request::{Method, RetryParams};

type HmacSha256 = Hmac<Sha256>;

/// The most questions one round sends the client.
pub const MAX_QUESTIONS_PER_ROUND: usize = 16;
/// The most bytes of questions one round sends the client.
pub const MAX_QUESTION_BYTES_PER_ROUND: usize = 1 << 20;

/// The `_meta` key a plugin may use to name its question's key.
pub const INPUT_KEY_META: &str = "mcpbox/inputKey";

/// The secret that signs `requestState`. Replicas that share it accept each other's state.
#[derive(Clone)]
pub struct StateKey(Vec<u8>);

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(…)")
    }
}

impl StateKey {
    /// A key from an operator's secret (any non-empty string).
    pub fn from_secret(secret: &str) -> Self {
        Self(secret.as_bytes().to_vec())
    }

    /// A random key, good for this process only.
    pub fn random() -> Self {
        let mut bytes = Vec::with_capacity(32);
        bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        bytes.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
        Self(bytes)
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length.
        <HmacSha256 as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!())
    }
}

/// What a `requestState` carries.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    /// Method and target: `tools/call test_x`.
    on: String,
    /// SHA-256 of the params' canonical JSON (without `_meta` and the retry fields).
    params: String,
    /// Answers gathered so far, by key.
    answers: Map<String, Value>,
    /// Expiry, in milliseconds since the Unix epoch.
    expires: u64,
}

/// What binds a state to its request.
pub struct Binding {
    on: String,
    params: String,
}

impl Binding {
    /// The binding of a request for `method` on `target` with `params`.
    pub fn new(method: &Method, target: Option<&Value>, params: Option<&RawValue>) -> Self {
        let target = match target {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let mut params: Map<String, Value> = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        for key in ["_meta", "inputResponses", "requestState"] {
            params.remove(key);
        }
        let mut canonical = String::new();
        write_canonical(&Value::Object(params), &mut canonical);
        Self {
            on: format!("{} {target}", method.as_str()),
            params: hex(&Sha256::digest(canonical.as_bytes())),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// JSON with object keys sorted, so equal values always give equal text.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl StateKey {
    fn sign(&self, state: &State) -> String {
        let body = B64.encode(serde_json::to_vec(state).unwrap_or_default());
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        let tag = B64.encode(mac.finalize().into_bytes());
        format!("{body}.{tag}")
    }

    fn verify(&self, text: &str, binding: &Binding) -> Result<State, String> {
        let (body, tag) = text
            .split_once('.')
            .ok_or("it is not a state this server issued")?;
        let tag = B64
            .decode(tag)
            .map_err(|_| "its signature is not valid base64url")?;
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        mac.verify_slice(&tag)
            .map_err(|_| "its signature does not match (tampered, or issued under another key)")?;
        let bytes = B64.decode(body).map_err(|_| "its body is not base64url")?;
        let state: State =
            serde_json::from_slice(&bytes).map_err(|_| "its body is not a request state")?;
        if state.expires < now_ms() {
            return Err("it has expired; start the request again without it".to_owned());
        }
        if state.on != binding.on || state.params != binding.params {
            return Err(format!(
                "it was issued for `{}` with other params",
                state.on
            ));
        }
        Ok(state)
    }
}

/// One round of a request that may ask the client for input. Its binding is computed only
/// when a state is verified or issued: a call that asks nothing costs nothing more.
pub struct InputRound {
    answers: Map<String, Value>,
    /// The request's declared capabilities, as sent; parsed at the first question.
    capabilities: Option<Box<RawValue>>,
    inner: Mutex<Asked>,
}

#[derive(Default)]
struct Asked {
    count: usize,
    /// The size of the questions recorded so far.
    bytes: usize,
    requests: Map<String, Value>,
    refused: Map<String, Value>,
    invalid: Option<String>,
}

/// How a round ended.
pub enum RoundEnd {
    /// The plugin asked nothing it did not have an answer for: send its result.
    Complete,
    /// Ask the client: the `input_required` result to send.
    InputRequired(Value),
    /// The plugin failed after being refused capabilities the client did not declare.
    MissingCapabilities(Map<String, Value>),
    /// An answer the client gave does not fit the question.
    InvalidAnswer(String),
}

impl InputRound {
    /// Begin a round of `request`: verify its state, if any, and gather the answers.
    pub fn begin(
        retry: &RetryParams,
        binding: impl FnOnce() -> Binding,
        capabilities: Option<Box<RawValue>>,
        key: &StateKey,
    ) -> Result<Self, ErrorObject> {
        let mut answers = Map::new();
        if let Some(state) = &retry.request_state {
            let Value::String(state) = state else {
                return Err(ErrorObject::invalid_params(
                    "`requestState` must be the string the server returned",
                ));
            };
            let state = key.verify(state, &binding()).map_err(|why| {
                ErrorObject::invalid_params(format!("invalid `requestState`: {why}"))
            })?;
            answers = state.answers;
        }
        match &retry.input_responses {
            None => {}
            Some(Value::Object(given)) => {
                for (k, v) in given {
                    answers.insert(k.clone(), v.clone());
                }
            }
            Some(other) => {
                return Err(ErrorObject::invalid_params(format!(
                    "`inputResponses` must be an object of answers by key, not {other}"
                )));
            }
        }
        Ok(Self {
            answers,
            capabilities,
            inner: Mutex::new(Asked::default()),
        })
    }

    fn asked(&self) -> std::sync::MutexGuard<'_, Asked> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The plugin asks the client: the answer when the client already gave it, else an error
    /// for the plugin (the question is recorded for `input_required`).
    pub fn ask(&self, kind: ClientRequest, params: &RawValue) -> Result<Box<RawValue>, String> {
        let mut params: Map<String, Value> = serde_json::from_str(params.get())
            .map_err(|_| "the request must be a JSON object".to_owned())?;
        let named = params
            .get_mut("_meta")
            .and_then(Value::as_object_mut)
            .and_then(|meta| meta.remove(INPUT_KEY_META))
            .and_then(|k| k.as_str().map(str::to_owned));
        if params
            .get("_meta")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            params.remove("_meta");
        }
        let mut asked = self.asked();
        asked.count += 1;
        let key = named.unwrap_or_else(|| format!("{}-{}", kind.key_prefix(), asked.count));
        if let Some(answer) = self.answers.get(&key) {
            if let Err(why) = kind.check_answer(answer) {
                let problem = format!("`inputResponses.{key}` {why}");
                asked.invalid.get_or_insert(problem.clone());
                return Err(problem);
            }
            return serde_json::value::to_raw_value(answer).map_err(|e| e.to_string());
        }
        let capabilities: Map<String, Value> = self
            .capabilities
            .as_deref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or_default();
        if let Some(missing) = kind.missing_capability(&capabilities, &params) {
            let (name, value) = missing;
            asked.refused.insert(name.to_owned(), value);
            return Err(format!(
                "the client did not declare the `{name}` capability, so {} is not available",
                kind.method()
            ));
        }
        // What a round can ask is bounded: a plugin asking in a loop costs the host (and the
        // client) no more than this.
        let size = serde_json::to_string(&params).map_or(usize::MAX, |t| t.len());
        if asked.requests.len() >= MAX_QUESTIONS_PER_ROUND
            || asked.bytes.saturating_add(size) > MAX_QUESTION_BYTES_PER_ROUND
        {
            return Err(format!(
                "too many questions in one round: at most {MAX_QUESTIONS_PER_ROUND} (and {MAX_QUESTION_BYTES_PER_ROUND} bytes) are sent to the client at once"
            ));
        }
        asked.bytes += size;
        let request = if kind == ClientRequest::Roots && params.is_empty() {
            json!({ "method": kind.method() })
        } else {
            json!({ "method": kind.method(), "params": params })
        };
        asked.requests.insert(key.clone(), request);
        Err(format!(
            "input required: the client is asked ({key}) and the call runs again with its answer"
        ))
    }

    /// End the round. `failed` says whether the plugin's outcome was a failure.
    pub fn end(
        self,
        binding: impl FnOnce() -> Binding,
        failed: bool,
        key: &StateKey,
        lifetime: Duration,
    ) -> RoundEnd {
        let asked = std::mem::take(&mut *self.asked());
        if let Some(problem) = asked.invalid {
            return RoundEnd::InvalidAnswer(problem);
        }
        if !asked.requests.is_empty() {
            let binding = binding();
            let state = State {
                on: binding.on,
                params: binding.params,
                answers: self.answers,
                expires: now_ms()
                    .saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX)),
            };
            let token = key.sign(&state);
            return RoundEnd::InputRequired(crate::protocol::v2026::input_required(
                &asked.requests,
                &token,
            ));
        }
        if failed && !asked.refused.is_empty() {
            return RoundEnd::MissingCapabilities(asked.refused);
        }
        RoundEnd::Complete
    }
}

impl ClientRequest {
    fn key_prefix(self) -> &'static str {
        match self {
            Self::Sampling => "sampling",
            Self::Elicitation => "elicitation",
            Self::Roots => "roots",
        }
    }

    /// The capability (name and ClientCapabilities value) this request needs and the client
    /// lacks, if any.
    fn missing_capability(
        self,
        capabilities: &Map<String, Value>,
        params: &Map<String, Value>,
    ) -> Option<(&'static str, Value)> {
        let name = self.capability();
        let declared = capabilities.get(name).filter(|v| !v.is_null());
        let Some(declared) = declared else {
            return Some((name, json!({})));
        };
        if self == Self::Elicitation
            && params.get("mode").and_then(Value::as_str) == Some("url")
            && declared.get("url").is_none()
        {
            return Some((name, json!({ "url": {} })));
        }
        if self == Self::Sampling && params.contains_key("tools") && declared.get("tools").is_none()
        {
            return Some((name, json!({ "tools": {} })));
        }
        None
    }

    /// Whether `answer` has the shape of this request's result.
    fn check_answer(self, answer: &Value) -> Result<(), String> {
        let object = answer
            .as_object()
            .ok_or_else(|| format!("must be a {} result object, not {answer}", self.method()))?;
        match self {
            Self::Elicitation => match object.get("action").and_then(Value::as_str) {
                Some("accept" | "decline" | "cancel") => Ok(()),
                _ => Err("must have `action` accept, decline or cancel".to_owned()),
            },
            Self::Sampling => {
                if object.contains_key("role") && object.contains_key("content") {
                    Ok(())
                } else {
                    Err("must be a sampling result with `role` and `content`".to_owned())
                }
            }
            Self::Roots => match object.get("roots") {
                Some(Value::Array(_)) => Ok(()),
                _ => Err("must be a roots/list result with a `roots` array".to_owned()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Message;
    use crate::protocol::jsonrpc::{Decoded, decode};
    use crate::protocol::request::TypedRequest;

    fn typed(line: &str) -> TypedRequest {
        let Decoded::Single(Ok(Message::Request(r))) = decode(line.as_bytes()) else {
            panic!("{line}")
        };
        TypedRequest::decode(r)
    }

    fn raw(v: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(v).unwrap()
    }

    fn begin(
        r: &TypedRequest,
        caps: &Map<String, Value>,
        key: &StateKey,
    ) -> Result<InputRound, ErrorObject> {
        InputRound::begin(
            &r.retry,
            || binding(r),
            serde_json::value::to_raw_value(caps).ok(),
            key,
        )
    }

    fn binding(r: &TypedRequest) -> Binding {
        Binding::new(&r.method, r.target.as_ref(), r.params.as_deref())
    }

    fn caps() -> Map<String, Value> {
        json!({"elicitation": {}, "sampling": {}})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn a_question_without_an_answer_ends_the_round_with_signed_state() {
        let key = StateKey::random();
        let first = typed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#,
        );
        let round = begin(&first, &caps(), &key).unwrap();
        let ask = json!({"message": "who?", "_meta": {"mcpbox/inputKey": "user_name"}});
        assert!(round.ask(ClientRequest::Elicitation, &raw(&ask)).is_err());
        let end = round.end(|| binding(&first), true, &key, Duration::from_secs(60));
        let RoundEnd::InputRequired(result) = end else {
            panic!("expected input_required")
        };
        assert_eq!(
            result["inputRequests"]["user_name"]["method"],
            "elicitation/create"
        );
        assert!(
            result["inputRequests"]["user_name"]["params"]
                .get("_meta")
                .is_none()
        );
        let state = result["requestState"].as_str().unwrap().to_owned();

        let retry = typed(&format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"t","arguments":{{"a":1}},"inputResponses":{{"user_name":{{"action":"accept","content":{{"n":"A"}}}}}},"requestState":"{state}"}}}}"#
        ));
        let round = begin(&retry, &caps(), &key).unwrap();
        let answer = round.ask(ClientRequest::Elicitation, &raw(&ask)).unwrap();
        assert!(answer.get().contains("accept"));
        assert!(matches!(
            round.end(|| binding(&retry), false, &key, Duration::from_secs(60)),
            RoundEnd::Complete
        ));

        // Tampered, for other arguments, or under another key: refused.
        let other_key = StateKey::random();
        for (line, verifier) in [
            (retry_line(&format!("{state}x"), r#"{"a":1}"#), &key),
            (retry_line(&state, r#"{"a":2}"#), &key),
            (retry_line(&state, r#"{"a":1}"#), &other_key),
        ] {
            let error = begin(&typed(&line), &caps(), verifier).err().unwrap();
            assert_eq!(error.code, -32602, "{}", error.message);
            assert!(error.message.contains("requestState"), "{}", error.message);
        }
    }

    fn retry_line(state: &str, arguments: &str) -> String {
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"t","arguments":{arguments},"requestState":"{state}"}}}}"#
        )
    }

    #[test]
    fn a_round_asks_a_bounded_number_of_questions() {
        let key = StateKey::random();
        let request =
            typed(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#);
        let round = begin(&request, &caps(), &key).unwrap();
        for _ in 0..10_000 {
            let _ = round.ask(
                ClientRequest::Elicitation,
                &raw(&json!({"message": "again?"})),
            );
        }
        let error = round
            .ask(
                ClientRequest::Elicitation,
                &raw(&json!({"message": "once more"})),
            )
            .unwrap_err();
        assert!(error.contains("too many questions"), "{error}");
        let RoundEnd::InputRequired(result) =
            round.end(|| binding(&request), true, &key, Duration::from_secs(1))
        else {
            panic!("expected input_required")
        };
        assert_eq!(
            result["inputRequests"].as_object().unwrap().len(),
            MAX_QUESTIONS_PER_ROUND
        );
    }

    #[test]
    fn undeclared_capabilities_are_refused_and_bad_answers_named() {
        let key = StateKey::random();
        let request = typed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":{"roots-1":5}}}"#,
        );
        let round = begin(&request, &Map::new(), &key).unwrap();
        let error = round
            .ask(ClientRequest::Sampling, &raw(&json!({})))
            .unwrap_err();
        assert!(error.contains("`sampling`"), "{error}");
        let end = round.end(|| binding(&request), true, &key, Duration::from_secs(1));
        let RoundEnd::MissingCapabilities(missing) = end else {
            panic!()
        };
        assert_eq!(Value::Object(missing), json!({"sampling": {}}));

        let round = begin(&request, &caps(), &key).unwrap();
        assert!(round.ask(ClientRequest::Roots, &raw(&json!({}))).is_err());
        assert!(matches!(
            round.end(|| binding(&request), false, &key, Duration::from_secs(1)),
            RoundEnd::InvalidAnswer(_)
        ));

        let null = typed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":null}}"#,
        );
        assert_eq!(begin(&null, &caps(), &key).err().unwrap().code, -32602);
    }
}
