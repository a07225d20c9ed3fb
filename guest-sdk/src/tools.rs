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
    pub fn add<A, R>(&mut self, tool: Tool, run: impl FnOnce(A) -> R) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema,
        R: IntoToolResult,
    {
        // A call skips every other tool without copying its name.
        if matches!(&self.mode, Mode::Call { name, .. } if *name != tool.name) {
            return self;
        }
        let name = tool.name.clone();
        self.add_with(&name, || tool, run)
    }

    /// Register the tool named `name` in `listing`, an MCP `tools/list` result's `tools`
    /// array (JSON text), described as the listing describes it ([`Tool::listed`]); the
    /// listing is read only when the host lists tools. For a plugin that reproduces another
    /// server's surface verbatim.
    pub fn add_listed<A, R>(
        &mut self,
        listing: &str,
        name: &str,
        run: impl FnOnce(A) -> R,
    ) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema,
        R: IntoToolResult,
    {
        self.add_with(name, || Tool::listed(listing, name), run)
    }

    /// Register a tool named `name` whose description `describe` builds only when the host
    /// lists tools. A call runs on a fresh instance, which registers every tool to find the
    /// one called: with [`add`](Self::add) each call builds every description first (its
    /// schemas, its texts), with `add_with` none. Worth it when descriptions are large or
    /// computed, as when they are read from another server's listing ([`Tool::listed`]).
    /// The tool is listed under `name`, whatever name `describe` gives it.
    pub fn add_with<A, R>(
        &mut self,
        name: &str,
        describe: impl FnOnce() -> Tool,
        run: impl FnOnce(A) -> R,
    ) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema,
        R: IntoToolResult,
    {
        match &mut self.mode {
            Mode::List(tools) => {
                let mut tool = describe();
                name.clone_into(&mut tool.name);
                if tool.input_schema.is_empty() {
                    tool.input_schema = schema_json::<A>();
                }
                if tool.output_schema.is_none() {
                    tool.output_schema = R::output_schema();
                }
                tools.push(tool);
            }
            Mode::Call {
                name: called,
                arguments,
                result,
            } => {
                if result.is_none() && *called == name {
                    *result = Some(match serde_json::from_str::<A>(arguments) {
                        Ok(args) => Ok(run(args).into_tool_result()),
                        Err(e) => Err(Error::InvalidParams(format!(
                            "invalid arguments for tool `{name}`: {e}"
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

    /// The tool named `name` in an MCP `tools/list` listing (JSON text, as for
    /// [`Tool::listing`]); a tool of that name with no description when the listing has none
    /// or cannot be read. For [`Tools::add_with`], so that a call parses no listing:
    /// `tools.add_with("read", || Tool::listed(TOOLS, "read"), read)`.
    pub fn listed(tools: &str, name: &str) -> Self {
        Self::listing(tools)
            .ok()
            .and_then(|tools| tools.into_iter().find(|tool| tool.name == name))
            .unwrap_or_else(|| Self::new(name, ""))
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use std::cell::Cell;

    use super::*;

    const LISTING: &str = r#"[{"name":"read","title":"Read","description":"Read a thing",
        "inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}},
        "annotations":{"readOnlyHint":true}},
        {"name":"write","description":"Write","inputSchema":{"type":"object"}}]"#;

    #[derive(serde::Deserialize, JsonSchema)]
    struct N {
        n: i64,
    }

    /// Registers `read` lazily and `write` eagerly, counting descriptions built.
    fn register(tools: &mut Tools<'_>, built: &Cell<u32>) {
        tools
            .add_with(
                "read",
                || {
                    built.set(built.get() + 1);
                    Tool::listed(LISTING, "read")
                },
                |a: N| format!("read {}", a.n),
            )
            .add(Tool::listed(LISTING, "write"), |_: NoArgs| "written");
    }

    #[test]
    fn a_call_builds_no_lazy_description() {
        let built = Cell::new(0);
        let mut tools = Tools::calling("read", r#"{"n":7}"#);
        register(&mut tools, &built);
        let result = tools.into_result().unwrap();
        assert_eq!(built.get(), 0);
        assert!(format!("{result:?}").contains("read 7"), "{result:?}");

        let mut tools = Tools::calling("read", r#"{"n":"x"}"#);
        register(&mut tools, &built);
        let Err(Error::InvalidParams(why)) = tools.into_result() else {
            panic!("bad arguments must be refused");
        };
        assert!(why.contains("tool `read`"), "{why}");
    }

    #[test]
    fn a_listing_builds_each_description_under_its_name() {
        let built = Cell::new(0);
        let mut tools = Tools::listing();
        register(&mut tools, &built);
        let listed = tools.into_list();
        assert_eq!(built.get(), 1);
        let names: Vec<_> = listed.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["read", "write"]);
        assert_eq!(listed[0].title.as_deref(), Some("Read"));
        assert!(listed[0].input_schema.contains("integer"));
        assert_eq!(
            listed[0].annotations.as_ref().unwrap().read_only,
            Some(true)
        );
        assert_eq!(listed[1].description, "Write");
    }

    #[test]
    fn a_tool_missing_from_the_listing_is_named_and_blank() {
        let tool = Tool::listed(LISTING, "gone");
        assert_eq!(
            (tool.name.as_str(), tool.description.as_str()),
            ("gone", "")
        );
        let tool = Tool::listed("not json", "read");
        assert_eq!(tool.name, "read");
    }
}
