//! Async tool registration: [`Tools`] collects a 0.3 plugin's tools and, in a call, the one
//! being called as a future; [`Output`] streams its content as it goes.

use std::future::Future;
use std::pin::Pin;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use wit_bindgen::StreamWriter;

use crate::{Content, Error, IntoToolResult, Tool, ToolResult};

type Running = Pin<Box<dyn Future<Output = Result<ToolResult, Error>>>>;

/// The tools of a 0.3 plugin, passed to [`p3::Plugin::tools`](super::Plugin::tools).
pub struct Tools<'a> {
    mode: Mode<'a>,
}

enum Mode<'a> {
    List(Vec<Tool>),
    Call {
        name: &'a str,
        arguments: &'a str,
        output: Option<Output>,
        running: Option<Result<Running, Error>>,
    },
}

impl<'a> Tools<'a> {
    pub(crate) fn listing() -> Self {
        Self {
            mode: Mode::List(Vec::new()),
        }
    }

    pub(crate) fn calling(name: &'a str, arguments: &'a str, output: Output) -> Self {
        Self {
            mode: Mode::Call {
                name,
                arguments,
                output: Some(output),
                running: None,
            },
        }
    }

    pub(crate) fn into_list(self) -> Vec<Tool> {
        match self.mode {
            Mode::List(tools) => tools,
            Mode::Call { .. } => Vec::new(),
        }
    }

    /// Run the called tool to its result.
    pub(crate) async fn run(self) -> Result<ToolResult, Error> {
        match self.mode {
            Mode::Call {
                running: Some(running),
                ..
            } => running?.await,
            Mode::Call { name, .. } => Err(Error::NotFound(format!("no tool named `{name}`"))),
            Mode::List(_) => Err(Error::Internal("not a tool call".to_owned())),
        }
    }

    /// Register a tool: its description and the `async fn` that runs it.
    ///
    /// The function takes the tool's arguments as one type `A`, deserialised from the JSON the
    /// client sent (its JSON Schema is the tool's `inputSchema` unless the [`Tool`] carries
    /// one), and the call's [`Output`], through which it may stream content before it returns.
    /// The return type decides the rest of the result (see [`IntoToolResult`]).
    pub fn add<A, R, F, Fut>(&mut self, tool: Tool, run: F) -> &mut Self
    where
        A: DeserializeOwned + JsonSchema,
        R: IntoToolResult,
        F: FnOnce(A, Output) -> Fut,
        Fut: Future<Output = R> + 'static,
    {
        match &mut self.mode {
            Mode::List(tools) => {
                let mut tool = tool;
                if tool.input_schema.is_empty() {
                    tool.input_schema = crate::tools::schema_json::<A>();
                }
                if tool.output_schema.is_none() {
                    tool.output_schema = R::output_schema();
                }
                tools.push(tool);
            }
            Mode::Call {
                name,
                arguments,
                output,
                running,
            } => {
                if running.is_none()
                    && *name == tool.name
                    && let Some(output) = output.take()
                {
                    *running = Some(match serde_json::from_str::<A>(arguments) {
                        Ok(args) => {
                            let future = run(args, output);
                            Ok(Box::pin(async move { Ok(future.await.into_tool_result()) }))
                        }
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

/// The call was cancelled: the host dropped its end of the call's stream (the client
/// cancelled, or the call's time is up). Stop: nothing more is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the call was cancelled")
    }
}

impl std::error::Error for Cancelled {}

impl From<Cancelled> for String {
    fn from(c: Cancelled) -> Self {
        c.to_string()
    }
}

/// Where a 0.3 tool streams its content while it runs. Each item reaches the client at once
/// (as a progress notification: MCP sends a result whole) and is part of the final result,
/// before what the tool returns. Dropped when the tool returns, which ends the stream.
pub struct Output {
    writer: StreamWriter<Content>,
}

impl Output {
    pub(crate) fn new(writer: StreamWriter<Content>) -> Self {
        Self { writer }
    }

    /// Send one content item. Fails with [`Cancelled`] when the host no longer reads.
    pub async fn send(&mut self, item: Content) -> Result<(), Cancelled> {
        match self.writer.write_one(item).await {
            None => Ok(()),
            Some(_) => Err(Cancelled),
        }
    }

    /// Send a text item.
    pub async fn text(&mut self, text: impl Into<String>) -> Result<(), Cancelled> {
        self.send(Content::Text(text.into())).await
    }
}
