//! Input requests for 2026-07-28 clients (multi-round-trip requests, MRTR): a plugin asks the
//! client something (`elicit`, `sample`, `list-roots`) and the host, instead of sending a
//! request, ends the round with `input_required`. The client retries with the answers and the
//! `requestState` it was given; the host runs the plugin again in a fresh instance and answers
//! its questions from what was gathered.
//!
//! `requestState` is attacker input. It is `base64url(JSON) "." base64url(HMAC-SHA256)` under
//! the process's [`StateKey`], and it binds everything the client was shown and answered:
//!
//! - the method, the target and the params: a digest of the params' canonical JSON without
//!   `_meta` and the retry fields. Params that cannot be read as a JSON tree (nested deeper than
//!   serde's limit of 128, a number out of range) cannot be bound, and a request carrying them
//!   that would need a state is refused with -32602: nothing is ever bound as "no params";
//! - the plugin that asked: the digest of its component and policy. After a reload, answers
//!   to the old version's questions are refused (-32602; the client starts again and is asked
//!   anew), never applied to the new version's questions;
//! - each answer with the digest of the question it answers. An answer is used only for the
//!   same question; answers to questions that were not asked are dropped, never signed into
//!   the next state;
//! - the round: a request asks the client in at most [`ModernSettings::max_input_rounds`]
//!   rounds (8 by default); past that, the plugin's questions fail as unanswerable;
//! - an expiry.
//!
//! Anything that fails verification is -32602 naming what was wrong.
//!
//! Questions are keyed: a plugin may name the key with `_meta["mcpbox/inputKey"]` in the
//! request it passes (the host removes it before asking); otherwise the key is the kind and
//! the question's position (`elicitation-1`, `sampling-2`, `roots-3`), stable as long as the
//! plugin asks in the same order. A first request may carry answers by key with no state (the
//! client knows the question's key): they are used for whatever the plugin asks under that key.
//!
//! [`ModernSettings::max_input_rounds`]: super::ModernSettings::max_input_rounds

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::de::{MapAccess, Visitor};
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
/// The most entries one request's `inputResponses` may have (a round asks at most
/// [`MAX_QUESTIONS_PER_ROUND`]; the rest is room for keys a client sends unasked).
pub const MAX_INPUT_RESPONSES: usize = 64;
/// The most bytes one request's `inputResponses` may have.
pub const MAX_INPUT_RESPONSE_BYTES: usize = 1 << 20;
/// The most bytes of `requestState` accepted (the server never issues more: its answers are
/// bounded by the two limits above).
pub const MAX_REQUEST_STATE_BYTES: usize = 4 << 20;

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

/// An answer, with the digest of the question it answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Answered {
    /// SHA-256 of the question's canonical JSON (`{method, params}` as sent to the client).
    q: String,
    /// The client's answer.
    a: Value,
}

/// What a `requestState` carries.
#[derive(Debug, Serialize, Deserialize)]
struct State {
    /// Method and target: `tools/call test_x`.
    on: String,
    /// SHA-256 of the params' canonical JSON (without `_meta` and the retry fields).
    params: String,
    /// The digest of the plugin (component and policy) whose questions these are.
    plugin: String,
    /// How many rounds have ended with `input_required`, this one included.
    round: u32,
    /// The questions this state's round asked, by key: the digest of each.
    asked: BTreeMap<String, String>,
    /// Answers gathered in earlier rounds, by key.
    answers: BTreeMap<String, Answered>,
    /// Expiry, in milliseconds since the Unix epoch.
    expires: u64,
}

/// What binds a state to its request.
pub struct Binding {
    on: String,
    params: String,
}

impl Binding {
    /// The binding of a request for `method` on `target` with `params`; -32602 when the params
    /// cannot be read as a JSON tree (they could not be bound, so no state may cover them).
    pub fn new(
        method: &Method,
        target: Option<&Value>,
        params: Option<&RawValue>,
    ) -> Result<Self, ErrorObject> {
        let target = match target {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let mut params: Map<String, Value> = match params {
            None => Map::new(),
            Some(p) => serde_json::from_str(p.get()).map_err(|e| {
                ErrorObject::invalid_params(format!(
                    "the params cannot be bound to an input request's state ({e}): send JSON \
                     nested at most 128 deep, with numbers within the range of a 64-bit float"
                ))
            })?,
        };
        for key in ["_meta", "inputResponses", "requestState"] {
            params.remove(key);
        }
        Ok(Self {
            on: format!("{} {target}", method.as_str()),
            params: digest(&Value::Object(params)),
        })
    }
}

/// SHA-256 of `value`'s canonical JSON, in hex.
fn digest(value: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
    hex(&Sha256::digest(canonical.as_bytes()))
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

/// An answer the client gave in this request.
struct Given {
    /// The digest of the question it answers (`None`: given by key alone, with no state).
    question: Option<String>,
    answer: Value,
}

/// One round of a request that may ask the client for input. Its binding is computed only
/// when a state is verified or issued: a call that asks nothing costs nothing more.
pub struct InputRound {
    answers: BTreeMap<String, Given>,
    /// Rounds that ended with `input_required` before this one.
    round: u32,
    /// The plugin whose questions the state's answers answer (`None`: no state).
    plugin: Option<String>,
    /// The most rounds a request may ask the client in.
    max_rounds: u32,
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
    /// The digest of each question in `requests`.
    digests: BTreeMap<String, String>,
    /// Answers used in this round, each with the question it answered.
    used: BTreeMap<String, Answered>,
    refused: Map<String, Value>,
    invalid: Option<String>,
    /// The digest of the plugin this round runs.
    plugin: Option<String>,
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
    /// The request cannot be given a state (its params cannot be bound).
    Refused(ErrorObject),
}

/// `inputResponses` read within its bounds: an object of at most [`MAX_INPUT_RESPONSES`]
/// entries, each kept as sent; the count is checked while reading, before anything is built.
struct Responses(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Responses {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Responses;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of answers by key")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Responses, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    if entries.len() == MAX_INPUT_RESPONSES {
                        return Err(serde::de::Error::custom(format!(
                            "more than {MAX_INPUT_RESPONSES} answers"
                        )));
                    }
                    entries.push((key, map.next_value::<Box<RawValue>>()?));
                }
                Ok(Responses(entries))
            }
        }
        d.deserialize_map(Entries)
    }
}

/// The answers of `inputResponses`, refused with -32602 unless an object within the bounds.
fn read_responses(raw: &RawValue) -> Result<Vec<(String, Value)>, ErrorObject> {
    let text = raw.get();
    if text.len() > MAX_INPUT_RESPONSE_BYTES {
        return Err(ErrorObject::invalid_params(format!(
            "`inputResponses` is {} bytes; at most {MAX_INPUT_RESPONSE_BYTES} are accepted",
            text.len()
        )));
    }
    if !text.starts_with('{') {
        return Err(ErrorObject::invalid_params(format!(
            "`inputResponses` must be an object of answers by key, not {}",
            text.chars().take(40).collect::<String>()
        )));
    }
    let Responses(entries) = serde_json::from_str(text).map_err(|e| {
        ErrorObject::invalid_params(format!("`inputResponses` cannot be read: {e}"))
    })?;
    entries
        .into_iter()
        .map(|(key, raw)| {
            serde_json::from_str(raw.get())
                .map(|answer| (key.clone(), answer))
                .map_err(|e| {
                    ErrorObject::invalid_params(format!(
                        "`inputResponses.{}` cannot be read: {e}",
                        key.chars().take(64).collect::<String>()
                    ))
                })
        })
        .collect()
}

impl InputRound {
    /// Begin a round of `request`: verify its state, if any, and gather the answers.
    pub fn begin(
        retry: &RetryParams,
        binding: impl FnOnce() -> Result<Binding, ErrorObject>,
        capabilities: Option<Box<RawValue>>,
        key: &StateKey,
        max_rounds: u32,
    ) -> Result<Self, ErrorObject> {
        let mut answers = BTreeMap::new();
        let mut state = None;
        if let Some(raw) = &retry.request_state {
            if raw.get().len() > MAX_REQUEST_STATE_BYTES {
                return Err(ErrorObject::invalid_params(
                    "invalid `requestState`: it is larger than any this server issues",
                ));
            }
            let Ok(text) = serde_json::from_str::<&str>(raw.get()) else {
                return Err(ErrorObject::invalid_params(
                    "`requestState` must be the string the server returned",
                ));
            };
            let verified = key.verify(text, &binding()?).map_err(|why| {
                ErrorObject::invalid_params(format!("invalid `requestState`: {why}"))
            })?;
            state = Some(verified);
        }
        if let Some(raw) = &retry.input_responses {
            for (k, answer) in read_responses(raw)? {
                let question = match &state {
                    // Without a state, an answer is taken by its key alone.
                    None => None,
                    Some(state) => match state.asked.get(&k) {
                        Some(q) => Some(q.clone()),
                        None => {
                            tracing::debug!(
                                key = %k.chars().take(64).collect::<String>(),
                                "dropped an answer to a question that was not asked"
                            );
                            continue;
                        }
                    },
                };
                answers.insert(k, Given { question, answer });
            }
        }
        let (round, plugin) = match state {
            None => (0, None),
            Some(state) => {
                for (k, Answered { q, a }) in state.answers {
                    answers.entry(k).or_insert(Given {
                        question: Some(q),
                        answer: a,
                    });
                }
                (state.round, Some(state.plugin))
            }
        };
        Ok(Self {
            answers,
            round,
            plugin,
            max_rounds,
            capabilities,
            inner: Mutex::new(Asked::default()),
        })
    }

    fn asked(&self) -> std::sync::MutexGuard<'_, Asked> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The request reached the plugin with this `digest` (of its component and policy): it
    /// must be the one whose questions the state's answers answer. Called before the plugin
    /// runs; -32602 if the plugin has changed since.
    pub fn bind_plugin(&self, digest: &str) -> Result<(), ErrorObject> {
        if let Some(asked_by) = &self.plugin
            && asked_by != digest
        {
            return Err(ErrorObject::invalid_params(
                "invalid `requestState`: the plugin has been replaced since the client was asked, \
                 so the answers may not fit its questions; send the request again without \
                 `requestState` and `inputResponses`, and the client will be asked anew",
            ));
        }
        self.asked().plugin = Some(digest.to_owned());
        Ok(())
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
        let request = if kind == ClientRequest::Roots && params.is_empty() {
            json!({ "method": kind.method() })
        } else {
            json!({ "method": kind.method(), "params": params })
        };
        let question = digest(&request);
        let mut asked = self.asked();
        asked.count += 1;
        let key = named.unwrap_or_else(|| format!("{}-{}", kind.key_prefix(), asked.count));
        if let Some(given) = self.answers.get(&key)
            && given.question.as_ref().is_none_or(|q| *q == question)
        {
            if let Err(why) = kind.check_answer(&given.answer) {
                let problem = format!("`inputResponses.{key}` {why}");
                asked.invalid.get_or_insert(problem.clone());
                return Err(problem);
            }
            asked.used.insert(
                key,
                Answered {
                    q: question,
                    a: given.answer.clone(),
                },
            );
            return serde_json::value::to_raw_value(&given.answer).map_err(|e| e.to_string());
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
        if self.round >= self.max_rounds {
            return Err(format!(
                "no more input: this request has already asked the client in {} rounds, the most \
                 one request may (--max-input-rounds)",
                self.max_rounds
            ));
        }
        // What a round can ask is bounded: a plugin asking in a loop costs the host (and the
        // client) no more than this.
        let size = request.to_string().len();
        if asked.requests.len() >= MAX_QUESTIONS_PER_ROUND
            || asked.bytes.saturating_add(size) > MAX_QUESTION_BYTES_PER_ROUND
        {
            return Err(format!(
                "too many questions in one round: at most {MAX_QUESTIONS_PER_ROUND} (and {MAX_QUESTION_BYTES_PER_ROUND} bytes) are sent to the client at once"
            ));
        }
        asked.bytes += size;
        asked.digests.insert(key.clone(), question);
        asked.requests.insert(key.clone(), request);
        Err(format!(
            "input required: the client is asked ({key}) and the call runs again with its answer"
        ))
    }

    /// Whether the plugin asked a question this round has no answer for.
    pub fn has_questions(&self) -> bool {
        !self.asked().requests.is_empty()
    }

    /// End the round. `failed` says whether the plugin's outcome was a failure.
    pub fn end(
        self,
        binding: impl FnOnce() -> Result<Binding, ErrorObject>,
        failed: bool,
        key: &StateKey,
        lifetime: Duration,
    ) -> RoundEnd {
        let asked = std::mem::take(&mut *self.asked());
        if let Some(problem) = asked.invalid {
            return RoundEnd::InvalidAnswer(problem);
        }
        if !asked.requests.is_empty() {
            let binding = match binding() {
                Ok(binding) => binding,
                Err(error) => return RoundEnd::Refused(error),
            };
            let state = State {
                on: binding.on,
                params: binding.params,
                // A round whose plugin was never bound gets a state no plugin accepts.
                plugin: asked.plugin.unwrap_or_default(),
                round: self.round.saturating_add(1),
                asked: asked.digests,
                answers: asked.used,
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
            8,
        )
    }

    fn binding(r: &TypedRequest) -> Result<Binding, ErrorObject> {
        Binding::new(&r.method, r.target.as_ref(), r.params.as_deref())
    }

    /// The state of an `input_required` result, and the state's body as JSON.
    fn state_of(end: RoundEnd) -> (String, Value) {
        let RoundEnd::InputRequired(result) = end else {
            panic!("expected input_required")
        };
        let state = result["requestState"].as_str().unwrap().to_owned();
        let body = B64.decode(state.split_once('.').unwrap().0).unwrap();
        (state, serde_json::from_slice(&body).unwrap())
    }

    fn call(arguments: &str, extra: &str) -> TypedRequest {
        typed(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{arguments}{extra}}}}}"#
        ))
    }

    fn retry(arguments: &str, state: &str, responses: &Value) -> TypedRequest {
        call(
            arguments,
            &format!(r#","requestState":"{state}","inputResponses":{responses}"#),
        )
    }

    const ACCEPT: &str = r#"{"action":"accept","content":{"ok":true}}"#;

    fn question(text: &str) -> Box<RawValue> {
        raw(&json!({"message": text, "_meta": {"mcpbox/inputKey": "confirm"}}))
    }

    #[test]
    fn params_that_cannot_be_bound_are_refused_never_bound_as_empty() {
        let key = StateKey::random();
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        for extra in [
            format!(r#","_meta":{{"x":{deep}}}"#),
            r#","_meta":{"x":1e400}"#.to_owned(),
        ] {
            // A first round that asks: no state is issued for params that cannot be bound.
            let first = call(r#"{"target":"a"}"#, &extra);
            let round = begin(&first, &caps(), &key).unwrap();
            assert!(
                round
                    .ask(ClientRequest::Elicitation, &question("sure?"))
                    .is_err()
            );
            let RoundEnd::Refused(error) =
                round.end(|| binding(&first), true, &key, Duration::from_secs(60))
            else {
                panic!("expected a refusal")
            };
            assert_eq!(error.code, -32602);
            assert!(
                error.message.contains("cannot be bound"),
                "{}",
                error.message
            );

            // A state issued for sound params is not accepted for others carrying such a value.
            let sound = call(r#"{"target":"a"}"#, "");
            let round = begin(&sound, &caps(), &key).unwrap();
            let _ = round.ask(ClientRequest::Elicitation, &question("sure?"));
            let (state, _) =
                state_of(round.end(|| binding(&sound), true, &key, Duration::from_secs(60)));
            let other = call(
                r#"{"target":"B-OTHER"}"#,
                &format!(r#"{extra},"requestState":"{state}""#),
            );
            let error = begin(&other, &caps(), &key).err().unwrap();
            assert_eq!(error.code, -32602, "{}", error.message);
        }
    }

    #[test]
    fn answers_bind_the_plugin_and_the_question_they_answer() {
        let key = StateKey::random();
        let first = call(r#"{"dir":"/srv/data"}"#, "");
        let round = begin(&first, &caps(), &key).unwrap();
        round.bind_plugin("v1").unwrap();
        let _ = round.ask(
            ClientRequest::Elicitation,
            &question("may I read /srv/data?"),
        );
        let (state, _) =
            state_of(round.end(|| binding(&first), true, &key, Duration::from_secs(60)));
        let answers = json!({"confirm": serde_json::from_str::<Value>(ACCEPT).unwrap()});

        // Another version of the plugin: refused before it runs.
        let again = retry(r#"{"dir":"/srv/data"}"#, &state, &answers);
        let round = begin(&again, &caps(), &key).unwrap();
        let error = round.bind_plugin("v2").unwrap_err();
        assert_eq!(error.code, -32602);
        assert!(error.message.contains("replaced"), "{}", error.message);

        // The same version asking another question under the same key: asked anew, never
        // answered with the answer to the first.
        let round = begin(&again, &caps(), &key).unwrap();
        round.bind_plugin("v1").unwrap();
        assert!(
            round
                .ask(
                    ClientRequest::Elicitation,
                    &question("may I DELETE EVERYTHING under /srv/data?")
                )
                .is_err()
        );
        let (_, body) =
            state_of(round.end(|| binding(&again), true, &key, Duration::from_secs(60)));
        assert_eq!(body["answers"], json!({}));

        // The same question: answered.
        let round = begin(&again, &caps(), &key).unwrap();
        round.bind_plugin("v1").unwrap();
        let answer = round
            .ask(
                ClientRequest::Elicitation,
                &question("may I read /srv/data?"),
            )
            .unwrap();
        assert!(answer.get().contains("accept"));
    }

    #[test]
    fn answers_to_questions_never_asked_are_dropped() {
        let key = StateKey::random();
        let first = call("{}", "");
        let round = begin(&first, &caps(), &key).unwrap();
        let _ = round.ask(ClientRequest::Elicitation, &question("one?"));
        let (state, _) =
            state_of(round.end(|| binding(&first), true, &key, Duration::from_secs(60)));
        let accept: Value = serde_json::from_str(ACCEPT).unwrap();
        let answers = json!({"confirm": accept, "planted": accept, "elicitation-2": accept});
        let again = retry("{}", &state, &answers);
        let round = begin(&again, &caps(), &key).unwrap();
        assert!(
            round
                .ask(ClientRequest::Elicitation, &question("one?"))
                .is_ok()
        );
        // Asked later under a key the client answered unasked: asked for real.
        assert!(
            round
                .ask(
                    ClientRequest::Elicitation,
                    &raw(&json!({"message": "two?"}))
                )
                .is_err()
        );
        let (_, body) =
            state_of(round.end(|| binding(&again), true, &key, Duration::from_secs(60)));
        let kept: Vec<&String> = body["answers"].as_object().unwrap().keys().collect();
        assert_eq!(kept, ["confirm"]);
        assert_eq!(body["round"], 2);
    }

    #[test]
    fn a_request_asks_in_a_bounded_number_of_rounds() {
        let key = StateKey::random();
        let request = call("{}", "");
        let mut state: Option<String> = None;
        let mut answers = Map::new();
        for n in 1..=9 {
            let r = match &state {
                None => call("{}", ""),
                Some(state) => retry("{}", state, &Value::Object(answers.clone())),
            };
            let round = begin(&r, &caps(), &key).unwrap();
            // One more question every round.
            let mut refused = None;
            for i in 1..=n {
                let q = raw(
                    &json!({"message": format!("q{i}"), "_meta": {"mcpbox/inputKey": format!("q{i}")}}),
                );
                if let Err(e) = round.ask(ClientRequest::Elicitation, &q) {
                    refused = Some(e);
                }
            }
            if n == 9 {
                assert!(refused.unwrap().contains("no more input"));
                assert!(matches!(
                    round.end(|| binding(&request), true, &key, Duration::from_secs(60)),
                    RoundEnd::Complete
                ));
                return;
            }
            let (next, _) =
                state_of(round.end(|| binding(&r), true, &key, Duration::from_secs(60)));
            state = Some(next);
            answers.insert(format!("q{n}"), serde_json::from_str(ACCEPT).unwrap());
        }
        panic!("the ninth round was not refused");
    }

    #[test]
    fn input_responses_are_bounded_before_they_are_built() {
        let key = StateKey::random();
        let many: Map<String, Value> = (0..=MAX_INPUT_RESPONSES)
            .map(|i| (format!("k{i}"), json!({"action": "cancel"})))
            .collect();
        let r = call(
            "{}",
            &format!(r#","inputResponses":{}"#, Value::Object(many)),
        );
        let error = begin(&r, &caps(), &key).err().unwrap();
        assert_eq!(error.code, -32602);
        assert!(
            error.message.contains("more than 64 answers"),
            "{}",
            error.message
        );

        let big = json!({"k": {"action": "accept", "content": {"text": "x".repeat(MAX_INPUT_RESPONSE_BYTES)}}});
        let r = call("{}", &format!(r#","inputResponses":{big}"#));
        let error = begin(&r, &caps(), &key).err().unwrap();
        assert!(error.message.contains("bytes"), "{}", error.message);
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
