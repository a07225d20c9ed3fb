//! The bounded readers of a retry's raw fields: `requestState` (a string of at most
//! [`MAX_REQUEST_STATE_BYTES`]) and `inputResponses` (an object of at most
//! [`MAX_INPUT_RESPONSES`] answers and [`MAX_INPUT_RESPONSE_BYTES`] bytes, counted while it is
//! read, before anything is built). Anything else is -32602.

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{MAX_INPUT_RESPONSE_BYTES, MAX_INPUT_RESPONSES, MAX_REQUEST_STATE_BYTES};
use crate::protocol::ErrorObject;

/// The text of `requestState`, refused with -32602 unless a string within its bound.
pub(super) fn read_state(raw: &RawValue) -> Result<&str, ErrorObject> {
    if raw.get().len() > MAX_REQUEST_STATE_BYTES {
        return Err(ErrorObject::invalid_params(
            "invalid `requestState`: it is larger than any this server issues",
        ));
    }
    serde_json::from_str::<&str>(raw.get()).map_err(|_| {
        ErrorObject::invalid_params("`requestState` must be the string the server returned")
    })
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
pub(super) fn read_responses(raw: &RawValue) -> Result<Vec<(String, Value)>, ErrorObject> {
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

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::super::test_support::{begin, call, caps};
    use super::*;
    use crate::server::StateKey;

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
}
