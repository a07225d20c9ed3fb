//! The signed `requestState` of an input request: the [`StateKey`] that signs it, what it
//! carries (the binding, the plugin, the round, the questions asked and the answers gathered,
//! the expiry), the [`Binding`] of a state to its request (its method and target, a digest of
//! the params' canonical JSON, and a digest of the caller's key), and signing and verifying it.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::principal::Principal;
use crate::protocol::ErrorObject;
use crate::protocol::request::Method;

type HmacSha256 = Hmac<Sha256>;

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
pub(super) struct Answered {
    /// SHA-256 of the question's canonical JSON (`{method, params}` as sent to the client).
    pub(super) q: String,
    /// The client's answer.
    pub(super) a: Value,
}

/// What a `requestState` carries.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct State {
    /// Method and target: `tools/call test_x`.
    pub(super) on: String,
    /// SHA-256 of the params' canonical JSON (without `_meta` and the retry fields).
    pub(super) params: String,
    /// SHA-256 of the key of the caller it was issued to (not the key itself: the state is
    /// readable by whoever holds it).
    #[serde(default)]
    pub(super) caller: String,
    /// The digest of the plugin's component whose questions these are (a new build is
    /// another plugin; a changed manifest alone is not).
    pub(super) plugin: String,
    /// How many rounds have ended with `input_required`, this one included.
    pub(super) round: u32,
    /// The questions this state's round asked, by key: the digest of each.
    pub(super) asked: BTreeMap<String, String>,
    /// Answers gathered in earlier rounds, by key.
    pub(super) answers: BTreeMap<String, Answered>,
    /// Expiry, in milliseconds since the Unix epoch.
    pub(super) expires: u64,
}

/// What binds a state to its request.
#[derive(Debug, Clone)]
pub struct Binding {
    pub(super) on: String,
    pub(super) params: String,
    pub(super) caller: String,
}

impl Binding {
    /// The binding of a request for `method` on `target` with `params`; -32602 when the params
    /// cannot be read as a JSON tree (they could not be bound, so no state may cover them).
    /// The state binds its `caller` too: another caller retrying with it is refused.
    pub fn new(
        method: &Method,
        target: Option<&Value>,
        params: Option<&RawValue>,
        caller: &Principal,
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
            caller: hex::encode(Sha256::digest(caller.key().as_bytes())),
        })
    }
}

/// SHA-256 of `value`'s canonical JSON, in hex.
pub(super) fn digest(value: &Value) -> String {
    let mut canonical = String::new();
    write_canonical(value, &mut canonical);
    hex::encode(Sha256::digest(canonical.as_bytes()))
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

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl StateKey {
    pub(super) fn sign(&self, state: &State) -> String {
        let body = B64.encode(serde_json::to_vec(state).unwrap_or_default());
        let mut mac = self.mac();
        mac.update(body.as_bytes());
        let tag = B64.encode(mac.finalize().into_bytes());
        format!("{body}.{tag}")
    }

    pub(super) fn verify(&self, text: &str, binding: &Binding) -> Result<State, String> {
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
        if state.caller != binding.caller {
            return Err("it was issued to another caller".to_owned());
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::super::RoundEnd;
    use super::super::test_support::{
        begin, binding, call, caps, question, raw, retry_line, state_of, typed,
    };
    use super::*;
    use crate::server::ServerRequest;

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
                    .ask(ServerRequest::Elicitation, &question("sure?"))
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
            let _ = round.ask(ServerRequest::Elicitation, &question("sure?"));
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
    fn a_question_without_an_answer_ends_the_round_with_signed_state() {
        let key = StateKey::random();
        let first = typed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}"#,
        );
        let round = begin(&first, &caps(), &key).unwrap();
        let ask = json!({"message": "who?", "_meta": {"mcpbox/inputKey": "user_name"}});
        assert!(round.ask(ServerRequest::Elicitation, &raw(&ask)).is_err());
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
        let answer = round.ask(ServerRequest::Elicitation, &raw(&ask)).unwrap();
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

    #[test]
    fn a_state_is_refused_to_any_caller_but_the_one_it_was_issued_to() {
        use crate::principal::{Principal, Scopes};
        let key = StateKey::random();
        let request = call(r#"{"target":"a"}"#, "");
        let bind = |caller: &Principal| {
            Binding::new(
                &request.method,
                request.target.as_ref(),
                request.params.as_deref(),
                caller,
            )
            .unwrap()
        };
        let alice = Principal::token("alice", Scopes::All);
        let bob = Principal::token("bob", Scopes::All);
        let issued = bind(&alice);
        let state = State {
            on: issued.on,
            params: issued.params,
            caller: issued.caller,
            plugin: String::new(),
            round: 1,
            asked: BTreeMap::new(),
            answers: BTreeMap::new(),
            expires: now_ms() + 60_000,
        };
        let text = key.sign(&state);
        assert!(key.verify(&text, &bind(&alice)).is_ok());
        let refused = key.verify(&text, &bind(&bob)).unwrap_err();
        assert!(refused.contains("another caller"), "{refused}");
        let body = B64.decode(text.split('.').next().unwrap()).unwrap();
        let body = String::from_utf8(body).unwrap();
        assert!(body.contains(&state.caller), "{body}");
        assert!(
            !body.contains("alice"),
            "the caller's key is not readable in the state: {body}"
        );
    }
}
