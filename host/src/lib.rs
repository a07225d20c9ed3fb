//! mcpbox: an MCP host whose tools, prompts, resources and completions come from sandboxed
//! WebAssembly components.
//!
//! The data path of one call reads straight down the modules: [`transport`] frames bytes,
//! [`protocol`] decodes them, [`server`] runs the session and dispatches to the [`catalog`],
//! which finds the plugin and calls it through the [`engine`] under its [`policy`] limits;
//! every request carries its caller, a [`principal`], from the transport to the plugin.
//! A plugin's durable state lives in [`kv`] (the engine links `wasi:keyvalue` to it). Beside the
//! data path: [`auth`] (OAuth for HTTP), [`cli`] (the commands) with [`config`] (the
//! configuration file) and [`compose`] (the composition root: it builds the services and serves
//! them), [`author_tools`] (`call`, `inspect`), [`scaffold`] (`new`), [`metrics`]
//! (Prometheus) and [`telemetry`] (OpenTelemetry traces), both recorded along the data path,
//! [`audit`] (the audit log of every call and refusal), [`credentials`] (each user's own
//! accounts at downstream services, linked through OAuth and attached to plugins' requests),
//! [`registry`] (plugins from OCI registries: pull, push, signatures, the lock file),
//! [`skills`] (the Agent Skills a plugin carries in its component) and
//! [`watch`] (the plugin lifecycle: the startup load, hot reload of plugins and of the
//! configuration file). Each module's docs say what it owns, and each room's `Uses:` line
//! which rooms it may use (checked by `layering`).

pub mod audit;
pub mod auth;
pub mod author_tools;
pub mod catalog;
pub mod cli;
pub mod compose;
pub mod config;
pub mod credentials;
pub mod engine;
pub mod file_pages;
pub mod files;
pub mod kv;
#[cfg(feature = "registry")]
pub mod manage;
pub mod metrics;
pub mod policy;
pub mod principal;
pub mod protocol;
pub mod registry;
pub mod scaffold;
pub mod server;
pub mod skills;
pub mod telemetry;
pub mod tls;
pub mod transport;
pub mod watch;

#[cfg(test)]
mod layering;
