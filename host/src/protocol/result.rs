//! Typed results and notifications the server writes (`Serialize`), shared by both revisions.
//! Plugin-owned JSON (list items, tool results) never passes through here: it stays raw text
//! built by the catalog.

use serde::Serialize;
use serde_json::value::RawValue;

use super::mcp::LogLevel;

/// An empty object (`{}`), as capabilities without options are written.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Empty {}

/// A list capability (`tools`, `prompts`).
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListCapability {
    /// Whether the list may change while the client is connected.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub list_changed: bool,
}

/// The `resources` capability.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesCapability {
    /// Whether the list may change.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub list_changed: bool,
    /// Whether clients may subscribe to updates of a resource.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub subscribe: bool,
}

/// What the server offers.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ServerCapabilities {
    /// `logging`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logging: Option<Empty>,
    /// `completions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completions: Option<Empty>,
    /// `prompts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListCapability>,
    /// `resources`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// `tools`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<ListCapability>,
    /// `extensions`: each extension served, by identifier, with its settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Extensions>,
}

/// The extensions a server serves (SEP-2133: settings inline under each identifier).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Extensions {
    /// The skills extension (SEP-2640).
    #[serde(
        rename = "io.modelcontextprotocol/skills",
        skip_serializing_if = "Option::is_none"
    )]
    pub skills: Option<SkillsSettings>,
    /// The tasks extension (SEP-2663), 2026-07-28 only.
    #[serde(
        rename = "io.modelcontextprotocol/tasks",
        skip_serializing_if = "Option::is_none"
    )]
    pub tasks: Option<Empty>,
}

/// The skills extension's settings.
#[derive(Debug, Clone, Copy, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillsSettings {
    /// `resources/directory/read` is served.
    pub directory_read: bool,
}

/// The server's name and version.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ServerInfo {
    /// `mcpbox`.
    pub name: &'static str,
    /// `mcpbox`.
    pub title: &'static str,
    /// The crate version.
    pub version: &'static str,
}

/// This server.
pub const SERVER_INFO: ServerInfo = ServerInfo {
    name: "mcpbox",
    title: "mcpbox",
    version: env!("CARGO_PKG_VERSION"),
};

/// `notifications/message` params.
#[derive(Debug, Serialize)]
pub struct LoggingMessage<'a> {
    /// Severity.
    pub level: LogLevel,
    /// Who logged it (a plugin's name, or `mcpbox`).
    pub logger: &'a str,
    /// The message.
    pub data: &'a str,
}

/// `notifications/progress` params.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress<'a> {
    /// The request's token.
    pub progress_token: &'a RawValue,
    /// Progress so far (increasing).
    pub progress: f64,
    /// The value at which the work is done, if known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// What is happening.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
}

/// `notifications/resources/updated` params (2025-11-25).
#[derive(Debug, Serialize)]
pub struct ResourceUpdated<'a> {
    /// The resource that changed.
    pub uri: &'a str,
}

/// The lists that announce changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangedList {
    /// `notifications/tools/list_changed`.
    Tools,
    /// `notifications/prompts/list_changed`.
    Prompts,
    /// `notifications/resources/list_changed` (resources or templates).
    Resources,
}

impl ChangedList {
    /// The notification announcing a change of this list.
    pub fn notification(self) -> &'static str {
        match self {
            Self::Tools => "notifications/tools/list_changed",
            Self::Prompts => "notifications/prompts/list_changed",
            Self::Resources => "notifications/resources/list_changed",
        }
    }
}

/// `notifications/resources/updated`.
pub const RESOURCE_UPDATED: &str = "notifications/resources/updated";
/// `notifications/message`.
pub const LOG_MESSAGE: &str = "notifications/message";
/// `notifications/progress`.
pub const PROGRESS: &str = "notifications/progress";
