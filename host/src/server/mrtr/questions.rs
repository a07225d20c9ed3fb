//! What the host knows of each kind of question ([`ServerRequest`]): the capability it needs
//! of the client (and of that capability's parts, such as elicitation's `url` mode), and the
//! shape an answer must have.

use serde_json::{Map, Value, json};

use crate::server::ServerRequest;

impl ServerRequest {
    /// The capability (name and ClientCapabilities value) this request needs and the client
    /// lacks, if any.
    pub(super) fn missing_capability(
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
    pub(in crate::server) fn check_answer(self, answer: &Value) -> Result<(), String> {
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
    use std::time::Duration;

    use super::super::test_support::{begin, binding, caps, raw, typed};
    use super::*;
    use crate::server::StateKey;
    use crate::server::mrtr::RoundEnd;

    #[test]
    fn undeclared_capabilities_are_refused_and_bad_answers_named() {
        let key = StateKey::random();
        let request = typed(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":{"roots-1":5}}}"#,
        );
        let round = begin(&request, &Map::new(), &key).unwrap();
        let error = round
            .ask(ServerRequest::Sampling, &raw(&json!({})))
            .unwrap_err();
        assert!(error.contains("`sampling`"), "{error}");
        let end = round.end(|| binding(&request), true, &key, Duration::from_secs(1));
        let RoundEnd::MissingCapabilities(missing) = end else {
            panic!()
        };
        assert_eq!(Value::Object(missing), json!({"sampling": {}}));

        let round = begin(&request, &caps(), &key).unwrap();
        assert!(round.ask(ServerRequest::Roots, &raw(&json!({}))).is_err());
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
