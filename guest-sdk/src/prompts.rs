//! Prompt registration: [`Prompts`] collects a plugin's prompts and renders the one asked for.
//!
//! A prompt's arguments come from the fields of its arguments struct: each property of the
//! struct's JSON Schema is an argument, required unless it is optional, described by its doc
//! comment. MCP prompt arguments are strings, so the fields are `String` or `Option<String>`.

use std::fmt::Display;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::{Content, Error, Prompt, PromptArgument, PromptMessage, Role};

/// The prompts of a plugin, passed to [`Plugin::prompts`](crate::Plugin::prompts).
pub struct Prompts<'a> {
    mode: Mode<'a>,
}

enum Mode<'a> {
    List(Vec<Prompt>),
    Get {
        name: &'a str,
        arguments: &'a [(String, String)],
        result: Option<Result<Vec<PromptMessage>, Error>>,
    },
}

impl<'a> Prompts<'a> {
    pub(crate) fn listing() -> Self {
        Self {
            mode: Mode::List(Vec::new()),
        }
    }

    pub(crate) fn getting(name: &'a str, arguments: &'a [(String, String)]) -> Self {
        Self {
            mode: Mode::Get {
                name,
                arguments,
                result: None,
            },
        }
    }

    pub(crate) fn into_list(self) -> Vec<Prompt> {
        match self.mode {
            Mode::List(prompts) => prompts,
            Mode::Get { .. } => Vec::new(),
        }
    }

    pub(crate) fn into_result(self) -> Result<Vec<PromptMessage>, Error> {
        match self.mode {
            Mode::Get {
                result: Some(result),
                ..
            } => result,
            Mode::Get { name, .. } => Err(Error::NotFound(format!("no prompt named `{name}`"))),
            Mode::List(_) => Err(Error::Internal("not a prompt request".to_owned())),
        }
    }

    /// Register a prompt and the function that renders it.
    ///
    /// The prompt's arguments are derived from `A` unless the [`Prompt`] already lists some.
    pub fn add<A, R>(&mut self, mut prompt: Prompt, render: impl FnOnce(A) -> R) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema,
        R: IntoPromptMessages,
    {
        match &mut self.mode {
            Mode::List(prompts) => {
                if prompt.arguments.is_empty() {
                    prompt.arguments = arguments_of::<A>(&prompt.name);
                }
                prompts.push(prompt);
            }
            Mode::Get {
                name,
                arguments,
                result,
            } => {
                if result.is_none() && *name == prompt.name {
                    let object: Map<String, Value> = arguments
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect();
                    *result = Some(match serde_json::from_value::<A>(Value::Object(object)) {
                        Ok(args) => render(args).into_prompt_messages(),
                        Err(e) => Err(Error::InvalidParams(format!(
                            "invalid arguments for prompt `{}`: {e}",
                            prompt.name
                        ))),
                    });
                }
            }
        }
        self
    }
}

/// Whether a property's schema is a string (`String`, `Option<String>`, a string enum).
fn is_string(property: &Value) -> bool {
    match property.get("type") {
        Some(Value::String(kind)) => kind == "string",
        Some(Value::Array(kinds)) => kinds
            .iter()
            .all(|k| k.as_str().is_some_and(|k| k == "string" || k == "null")),
        None => property
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|values| values.iter().all(Value::is_string)),
        Some(_) => false,
    }
}

/// The prompt arguments described by `A`'s JSON Schema.
///
/// # Panics
///
/// When a field is not a string: MCP prompt arguments are strings, so such a prompt could
/// never be rendered. The panic happens when the plugin is loaded (its lists are read then),
/// and mcpbox reports it as the reason the plugin did not load.
fn arguments_of<A: JsonSchema>(prompt: &str) -> Vec<PromptArgument> {
    let schema = schemars::schema_for!(A);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    for (name, property) in properties {
        assert!(
            is_string(property),
            "mcpbox-sdk: prompt `{prompt}`: argument `{name}` must be a String or Option<String> \
             (MCP prompt arguments are strings), not {}",
            property
                .get("type")
                .map_or_else(|| "a non-string".to_owned(), Value::to_string)
        );
    }
    properties
        .iter()
        .map(|(name, property)| PromptArgument {
            name: name.clone(),
            title: property
                .get("title")
                .and_then(Value::as_str)
                .map(str::to_owned),
            description: property
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            required: required.contains(&name.as_str()),
        })
        .collect()
}

impl Prompt {
    /// A prompt named `name` (`[A-Za-z0-9_-]`, at most 64 characters) with a description.
    /// Its arguments are derived from the function it is registered with.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            arguments: Vec::new(),
        }
    }

    /// A human-readable name for display.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
}

impl PromptMessage {
    /// A message from the user.
    pub fn user(content: impl Into<Content>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }

    /// A message from the assistant.
    pub fn assistant(content: impl Into<Content>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
        }
    }
}

/// What a prompt function may return: `Vec<PromptMessage>`, a `String` (one user message), or
/// a `Result` of either whose `Err` (any `Display`) reports invalid arguments to the client.
pub trait IntoPromptMessages {
    /// Convert into the prompt's messages.
    fn into_prompt_messages(self) -> Result<Vec<PromptMessage>, Error>;
}

impl IntoPromptMessages for Vec<PromptMessage> {
    fn into_prompt_messages(self) -> Result<Vec<PromptMessage>, Error> {
        Ok(self)
    }
}

impl IntoPromptMessages for String {
    fn into_prompt_messages(self) -> Result<Vec<PromptMessage>, Error> {
        Ok(vec![PromptMessage::user(self)])
    }
}

impl<T: IntoPromptMessages, E: Display> IntoPromptMessages for Result<T, E> {
    fn into_prompt_messages(self) -> Result<Vec<PromptMessage>, Error> {
        self.map_err(|e| Error::InvalidParams(e.to_string()))?
            .into_prompt_messages()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use super::*;

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Good {
        language: String,
        style: Option<String>,
    }

    #[derive(serde::Deserialize, JsonSchema)]
    #[allow(dead_code, reason = "only its schema is used")]
    struct Bad {
        count: u32,
    }

    #[test]
    fn string_fields_become_arguments() {
        let arguments = arguments_of::<Good>("review");
        assert_eq!(arguments.len(), 2);
        assert!(arguments.iter().any(|a| a.name == "language" && a.required));
        assert!(arguments.iter().any(|a| a.name == "style" && !a.required));
    }

    #[test]
    #[should_panic(expected = "prompt `count_things`: argument `count` must be a String")]
    fn a_non_string_argument_is_refused_at_load() {
        let _ = arguments_of::<Bad>("count_things");
    }
}
