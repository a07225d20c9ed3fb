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
//! - the caller it was issued to (a digest of the principal's key): another caller retrying
//!   with it is refused with -32602 and the plugin does not run;
//! - the plugin that asked: the digest of its component. After a reload, answers
//!   to the old version's questions are refused (-32602; the client starts again and is asked
//!   anew), never applied to the new version's questions;
//! - each answer with the digest of the question it answers. An answer is used only for the
//!   same question; answers to questions that were not asked are dropped, never signed into
//!   the next state;
//! - the round: a request asks the client in at most [`SessionSettings::max_input_rounds`]
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
//! This file keeps one round's books ([`InputRound`]: the answers given, the questions asked,
//! how the round ends); beside it are the signed state ([`state`]), the bounded readers of a
//! retry's raw fields ([`readers`]) and what each kind of question needs ([`questions`]).
//!
//! [`SessionSettings::max_input_rounds`]: super::SessionSettings::max_input_rounds

mod questions;
mod readers;
mod state;
#[cfg(test)]
mod test_support;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use self::readers::{read_responses, read_state};
use self::state::{Answered, State, digest, now_ms};
use super::context::ServerRequest;
use crate::protocol::ErrorObject;
use crate::protocol::request::RetryParams;

pub use self::state::{Binding, StateKey};

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
            let text = read_state(raw)?;
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

    /// The request reached the plugin with this `digest` (of its component): it
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
    pub fn ask(&self, kind: ServerRequest, params: &RawValue) -> Result<Box<RawValue>, String> {
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
        let request = if kind == ServerRequest::Roots && params.is_empty() {
            json!({ "method": kind.method() })
        } else {
            json!({ "method": kind.method(), "params": params })
        };
        let question = digest(&request);
        let mut asked = self.asked();
        asked.count += 1;
        // A kind is named as its capability is: `elicitation-1`, `sampling-2`, `roots-3`.
        let key = named.unwrap_or_else(|| format!("{}-{}", kind.capability(), asked.count));
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

    /// Whether the request declared the client capability at `path` (such as
    /// `["elicitation", "url"]`).
    pub fn declares(&self, path: &[&str]) -> bool {
        let Some(declared) = self
            .capabilities
            .as_deref()
            .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        else {
            return false;
        };
        let mut node = &declared;
        for key in path {
            match node.get(key) {
                Some(next) if !next.is_null() => node = next,
                _ => return false,
            }
        }
        true
    }

    /// Whether the plugin asked a question this round has no answer for.
    pub fn has_questions(&self) -> bool {
        !self.asked().requests.is_empty()
    }

    /// End the round. `failed` says whether the plugin's outcome was a failure.
    pub fn end(
        &self,
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
                caller: binding.caller,
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

#[cfg(test)]
mod tests {
    use super::test_support::{
        ACCEPT, begin, binding, call, caps, question, raw, retry, state_of, typed,
    };
    use super::*;

    #[test]
    fn answers_bind_the_plugin_and_the_question_they_answer() {
        let key = StateKey::random();
        let first = call(r#"{"dir":"/srv/data"}"#, "");
        let round = begin(&first, &caps(), &key).unwrap();
        round.bind_plugin("v1").unwrap();
        let _ = round.ask(
            ServerRequest::Elicitation,
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
                    ServerRequest::Elicitation,
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
                ServerRequest::Elicitation,
                &question("may I read /srv/data?"),
            )
            .unwrap();
        assert!(answer.get().contains("accept"));
    }

    #[test]
    fn a_round_knows_what_its_request_declared() {
        let key = StateKey::random();
        let first = call("{}", "");
        let round = begin(&first, &caps(), &key).unwrap();
        assert!(round.declares(&["elicitation"]));
        assert!(!round.declares(&["elicitation", "url"]));
        let with_url = json!({"elicitation": {"url": {}}, "roots": null});
        let round = begin(&first, with_url.as_object().unwrap(), &key).unwrap();
        assert!(round.declares(&["elicitation", "url"]));
        assert!(!round.declares(&["roots"]));
    }

    #[test]
    fn answers_to_questions_never_asked_are_dropped() {
        let key = StateKey::random();
        let first = call("{}", "");
        let round = begin(&first, &caps(), &key).unwrap();
        let _ = round.ask(ServerRequest::Elicitation, &question("one?"));
        let (state, _) =
            state_of(round.end(|| binding(&first), true, &key, Duration::from_secs(60)));
        let accept: Value = serde_json::from_str(ACCEPT).unwrap();
        let answers = json!({"confirm": accept, "planted": accept, "elicitation-2": accept});
        let again = retry("{}", &state, &answers);
        let round = begin(&again, &caps(), &key).unwrap();
        assert!(
            round
                .ask(ServerRequest::Elicitation, &question("one?"))
                .is_ok()
        );
        // Asked later under a key the client answered unasked: asked for real.
        assert!(
            round
                .ask(
                    ServerRequest::Elicitation,
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
                if let Err(e) = round.ask(ServerRequest::Elicitation, &q) {
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
    fn a_round_asks_a_bounded_number_of_questions() {
        let key = StateKey::random();
        let request =
            typed(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#);
        let round = begin(&request, &caps(), &key).unwrap();
        for _ in 0..10_000 {
            let _ = round.ask(
                ServerRequest::Elicitation,
                &raw(&json!({"message": "again?"})),
            );
        }
        let error = round
            .ask(
                ServerRequest::Elicitation,
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
}
