//! Tool registration: [`Tools`] collects a plugin's tools, and runs the one being called.
//!
//! The same registration code serves both of the host's requests. When the host lists tools,
//! each registration computes the tool's schemas; when it calls one, registrations of other
//! tools are skipped without generating anything, and the matching one runs at once.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::{Error, IntoToolResult, Tool, ToolAnnotations, ToolResult};

/// The tools of a plugin, passed to [`Plugin::tools`](crate::Plugin::tools).
pub struct Tools<'a> {
    mode: Mode<'a>,
}

enum Mode<'a> {
    List(Vec<Tool>),
    Call {
        name: &'a str,
        arguments: &'a str,
        result: Option<Result<ToolResult, Error>>,
    },
}

impl<'a> Tools<'a> {
    pub(crate) fn listing() -> Self {
        Self {
            mode: Mode::List(Vec::new()),
        }
    }

    pub(crate) fn calling(name: &'a str, arguments: &'a str) -> Self {
        Self {
            mode: Mode::Call {
                name,
                arguments,
                result: None,
            },
        }
    }

    pub(crate) fn into_list(self) -> Vec<Tool> {
        match self.mode {
            Mode::List(tools) => tools,
            Mode::Call { .. } => Vec::new(),
        }
    }

    pub(crate) fn into_result(self) -> Result<ToolResult, Error> {
        match self.mode {
            Mode::Call {
                result: Some(result),
                ..
            } => result,
            Mode::Call { name, .. } => Err(Error::NotFound(format!("no tool named `{name}`"))),
            Mode::List(_) => Err(Error::Internal("not a tool call".to_owned())),
        }
    }

    /// Register a tool: its description and the function that runs it.
    ///
    /// The function takes the tool's arguments as one type `A`, deserialised from the JSON the
    /// client sent; `A`'s JSON Schema is the tool's `inputSchema` unless the [`Tool`] already
    /// carries one (see [`Tool::input_schema`]). Arguments that do not match `A` reach the
    /// model as an `isError` result naming the problem. The return type decides the output
    /// (see [`IntoToolResult`]).
    pub fn add<A, R>(&mut self, mut tool: Tool, run: impl FnOnce(A) -> R) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema,
        R: IntoToolResult,
    {
        match &mut self.mode {
            Mode::List(tools) => {
                if tool.input_schema.is_empty() {
                    tool.input_schema = schema_json::<A>();
                }
                if tool.output_schema.is_none() {
                    tool.output_schema = R::output_schema();
                }
                tools.push(tool);
            }
            Mode::Call {
                name,
                arguments,
                result,
            } => {
                if result.is_none() && *name == tool.name {
                    *result = Some(match serde_json::from_str::<A>(arguments) {
                        Ok(args) => Ok(run(args).into_tool_result()),
                        Err(e) => Err(Error::InvalidParams(format!(
                            "invalid arguments for tool `{}`: {e}",
                            tool.name
                        ))),
                    });
                }
            }
        }
        self
    }
}

pub(crate) fn schema_json<A: JsonSchema>() -> String {
    serde_json::to_string(&schemars::schema_for!(A))
        .unwrap_or_else(|_| r#"{"type":"object"}"#.to_owned())
}

impl Tool {
    /// A tool named `name` (`[A-Za-z0-9_-]`, at most 64 characters) with a description for
    /// the model. Its schemas are derived from the function it is registered with.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema: String::new(),
            output_schema: None,
            annotations: None,
        }
    }

    /// A human-readable name for display.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Use this JSON Schema (JSON text) as the input schema instead of deriving one. Useful
    /// with `serde_json::Value` arguments, to publish a schema no Rust type describes.
    pub fn input_schema(mut self, schema: impl Into<String>) -> Self {
        self.input_schema = schema.into();
        self
    }

    /// Use this JSON Schema (JSON text) as the output schema instead of deriving one.
    pub fn output_schema(mut self, schema: impl Into<String>) -> Self {
        self.output_schema = Some(schema.into());
        self
    }

    /// Hint that the tool does not modify its environment.
    pub fn read_only(mut self, value: bool) -> Self {
        self.annotations_mut().read_only = Some(value);
        self
    }

    /// Hint that the tool may perform destructive updates.
    pub fn destructive(mut self, value: bool) -> Self {
        self.annotations_mut().destructive = Some(value);
        self
    }

    /// Hint that repeating a call with the same arguments has no further effect.
    pub fn idempotent(mut self, value: bool) -> Self {
        self.annotations_mut().idempotent = Some(value);
        self
    }

    /// Hint that the tool interacts with an open world of external entities.
    pub fn open_world(mut self, value: bool) -> Self {
        self.annotations_mut().open_world = Some(value);
        self
    }

    /// The tools of an MCP `tools/list` result's `tools` array (JSON text): each with its
    /// name, title, description, input and output schemas (kept as the text they are) and
    /// annotations. For a plugin that reproduces another server's surface verbatim: copy its
    /// listing into the crate and register each tool with `Tool::listing(…)`'s entry.
    pub fn listing(tools: &str) -> Result<Vec<Self>, serde_json::Error> {
        let listed: Vec<Listed<'_>> = serde_json::from_str(tools)?;
        Ok(listed
            .into_iter()
            .map(|entry| Self {
                name: entry.name,
                title: entry.title,
                description: entry.description,
                input_schema: entry.input_schema.get().to_owned(),
                output_schema: entry.output_schema.map(|s| s.get().to_owned()),
                annotations: entry.annotations.map(|hints| ToolAnnotations {
                    read_only: hints.read_only_hint,
                    destructive: hints.destructive_hint,
                    idempotent: hints.idempotent_hint,
                    open_world: hints.open_world_hint,
                }),
            })
            .collect())
    }

    fn annotations_mut(&mut self) -> &mut ToolAnnotations {
        self.annotations.get_or_insert(ToolAnnotations {
            read_only: None,
            destructive: None,
            idempotent: None,
            open_world: None,
        })
    }
}

/// Arguments of a tool (or prompt) that takes none. Its schema is an empty object that
/// allows no properties, and any JSON object deserialises into it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoArgs;

impl<'de> serde::Deserialize<'de> for NoArgs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer).map(|_| NoArgs)
    }
}

impl JsonSchema for NoArgs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoArgs".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "object", "properties": {}, "additionalProperties": false })
    }
}

/// One entry of a `tools/list` result, as [`Tool::listing`] reads it.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Listed<'a> {
    name: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(borrow)]
    input_schema: &'a serde_json::value::RawValue,
    #[serde(borrow, default)]
    output_schema: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    annotations: Option<Hints>,
}

/// A listed tool's annotations.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Hints {
    read_only_hint: Option<bool>,
    destructive_hint: Option<bool>,
    idempotent_hint: Option<bool>,
    open_world_hint: Option<bool>,
}
