//! Commands for plugin authors: `mcpbox call` runs one request against a plugin (a component
//! file with its manifest, or a plugin directory) with the same sandbox, limits, validation
//! and MCP conversion as `mcpbox serve`, and gives back the MCP result — the way to try a
//! plugin without wiring a client; `mcpbox inspect` says what a plugin offers and asks for.
//!
//! The request goes through a real session, as a client's would: `initialize`, then the one
//! request. Nothing is written to stdout here; the caller prints the result.
//!
//! Uses: `catalog`, `engine`, `kv`, `policy`, `principal`, `protocol`, `registry`, `server`,
//! `watch`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::catalog::{EventHub, LoadedPlugin, PluginSet};
use crate::engine::{ComponentCache, Runtime, RuntimeConfig};
use crate::kv::StateConfig;
use crate::policy::Limits;
use crate::principal::Principal;
use crate::protocol::jsonrpc::decode;
use crate::registry::trust::Trust;
use crate::server::{Mode, Session};
use crate::watch::{load_directory, load_source, read_source};

/// What to ask the plugin.
#[derive(Debug, Clone)]
pub enum CallRequest {
    /// `tools/call` of this tool.
    Tool(String),
    /// `prompts/get` of this prompt.
    Prompt(String),
    /// `resources/read` of this URI.
    Resource(String),
}

/// What a call gave: the JSON to show, and whether it failed (an error or `isError`).
#[derive(Debug)]
pub struct CallOutcome {
    /// The MCP result (or the JSON-RPC error), pretty-printed.
    pub json: String,
    /// Whether the request failed.
    pub failed: bool,
}

/// Load `path` (a `.wasm` component or a directory of them) and run `request` with
/// `arguments` (a JSON object) under `limits`.
pub async fn call(
    path: &Path,
    request: CallRequest,
    arguments: &str,
    limits: Limits,
    cache_dir: Option<PathBuf>,
    state: StateConfig,
    secrets: crate::policy::Secrets,
) -> anyhow::Result<CallOutcome> {
    let arguments: Value = serde_json::from_str(arguments)
        .with_context(|| format!("--args is not valid JSON: {arguments}"))?;
    if !arguments.is_object() {
        bail!("--args must be a JSON object, not {arguments}");
    }
    let plugins = load(path, limits, cache_dir, (state, secrets), &Arc::default()).await?;
    let (hub, _relists) = EventHub::new();
    let set = Arc::new(PluginSet::new(plugins, 10_000, false, hub));
    let session = Arc::new(Session::new(set, Mode::Dual, Arc::default()));
    let (outbound, mut sent) = mpsc::channel(1024);
    // What the request sends the client meanwhile (logs, progress) is already in the log.
    tokio::spawn(async move { while sent.recv().await.is_some() {} });
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "mcpbox call", "version": env!("CARGO_PKG_VERSION")}
    }});
    let (method, params) = match request {
        CallRequest::Tool(name) => ("tools/call", json!({"name": name, "arguments": arguments})),
        CallRequest::Prompt(name) => ("prompts/get", json!({"name": name, "arguments": arguments})),
        CallRequest::Resource(uri) => ("resources/read", json!({"uri": uri})),
    };
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut reply = Value::Null;
    for message in [initialize, request] {
        let bytes = serde_json::to_vec(&message)?;
        if let Some(pending) = session
            .accept(decode(&bytes), None, &outbound, &Principal::local())
            .await
            && let Some(answer) = pending.work.await
        {
            reply = serde_json::from_str(&answer.reply.0).context("an unreadable reply")?;
        }
    }
    let (shown, failed) = match (reply.get("result"), reply.get("error")) {
        (Some(result), _) => (result.clone(), result["isError"] == true),
        (None, Some(error)) => (error.clone(), true),
        _ => bail!("no answer to the request"),
    };
    Ok(CallOutcome {
        json: serde_json::to_string_pretty(&shown)?,
        failed,
    })
}

/// The plugins at `path`: one component (with its manifest), or every one in a directory
/// (waiting for those still listing); at least one, or an error.
async fn load(
    path: &Path,
    limits: Limits,
    cache_dir: Option<PathBuf>,
    (state, secrets): (StateConfig, crate::policy::Secrets),
    sections: &Arc<crate::policy::Sections>,
) -> anyhow::Result<Vec<LoadedPlugin>> {
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: cache_dir.or_else(ComponentCache::default_dir),
        state,
        secrets: Arc::new(crate::policy::config::SecretsCell::new(secrets)),
        // One call, then the process ends: no instance to prepare ahead.
        spares: crate::engine::SpareInstances::Never,
        ..RuntimeConfig::default()
    })?;
    let plugins = load_from(&runtime, path, limits, sections).await?;
    if plugins.is_empty() {
        bail!(
            "no plugin loaded from {} (the log says why)",
            path.display()
        );
    }
    Ok(plugins)
}

async fn load_from(
    runtime: &Runtime,
    path: &Path,
    limits: Limits,
    sections: &Arc<crate::policy::Sections>,
) -> anyhow::Result<Vec<LoadedPlugin>> {
    if path.is_dir() {
        let mut loaded = load_directory(runtime, path, limits, sections, &Trust::default()).await?;
        for late in loaded.late.drain(..) {
            match late.await {
                Ok((_, Ok(plugin))) => loaded.plugins.push(plugin),
                Ok((file, Err(error))) => {
                    tracing::error!(file = %file.display(), "skipped plugin: {error}");
                }
                Err(e) => tracing::error!("a plugin load task failed: {e}"),
            }
        }
        return Ok(loaded.plugins);
    }
    let source = read_source(path, sections, &Trust::default())
        .await
        .with_context(|| format!("cannot load {}", path.display()))?;
    let plugin = load_source(runtime, source, limits)
        .await
        .with_context(|| format!("cannot load {}", path.display()))?;
    Ok(vec![plugin])
}

/// Load every plugin in `dir` as `serve` would with the configuration file's plugin
/// `sections`, and say, plugin by plugin, which names in their allow- and deny-lists they do
/// not offer (for `mcpbox check`). Plugins that fail to load are logged and left out.
pub async fn unknown_listed_names(
    dir: &Path,
    sections: Arc<crate::policy::Sections>,
    limits: Limits,
    cache_dir: Option<PathBuf>,
    secrets: crate::policy::Secrets,
) -> anyhow::Result<Vec<String>> {
    let runtime = Runtime::new(RuntimeConfig {
        cache_dir: cache_dir.or_else(ComponentCache::default_dir),
        state: StateConfig::default_place(),
        secrets: Arc::new(crate::policy::config::SecretsCell::new(secrets)),
        ..RuntimeConfig::default()
    })?;
    let plugins = load_from(&runtime, dir, limits, &sections).await?;
    Ok(plugins
        .iter()
        .flat_map(|plugin| {
            plugin
                .unknown_names()
                .iter()
                .map(|unknown| format!("plugin `{}`: {unknown}", plugin.code.name()))
        })
        .collect())
}

/// Describe the plugins at `path`: interfaces, lists as clients see them, items refused and
/// why (including names another plugin in the directory serves), grants and limits.
/// With `sections` (a configuration file's `[plugin.NAME]` sections), a directory's plugins
/// are governed by them as `serve` would.
pub async fn inspect(
    path: &Path,
    limits: Limits,
    cache_dir: Option<PathBuf>,
    state: (StateConfig, crate::policy::Secrets),
    sections: Arc<crate::policy::Sections>,
) -> anyhow::Result<String> {
    let plugins = load(path, limits, cache_dir, state, &sections).await?;
    let described: Vec<Value> = plugins.iter().map(LoadedPlugin::describe).collect();
    let (hub, _relists) = EventHub::new();
    let set = PluginSet::new(plugins, 10_000, false, hub);
    let collisions: Vec<String> = set
        .catalog()
        .refusals()
        .iter()
        .map(ToString::to_string)
        .collect();
    Ok(serde_json::to_string_pretty(&json!({
        "plugins": described,
        "namesRefused": collisions,
    }))?)
}
