//! The command line: arguments (each flag with an `MCPBOX_*` environment fallback), logging
//! set-up, and running a command.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

use crate::catalog::{PluginSet, load_directory};
use crate::engine::{Runtime, RuntimeConfig};
use crate::policy::Limits;
use crate::server::Session;
use crate::transport::stdio::{self, StdioConfig};
use crate::watch::Reloader;

/// mcpbox: serve MCP tools, prompts and resources from sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "mcpbox", version, about)]
pub struct Cli {
    /// Log level or filter for the log on stderr: error, warn, info, debug, trace, or
    /// directives such as `info,plugin=debug`.
    #[arg(long, global = true, env = "MCPBOX_LOG", default_value = "info")]
    pub log: String,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP on stdin and stdout with the plugins in a directory.
    Serve(ServeArgs),
}

/// Arguments of `mcpbox serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The directory of plugins (`*.wasm` components) to serve.
    #[arg(long, env = "MCPBOX_PLUGINS", value_name = "DIR")]
    pub plugins: PathBuf,

    /// Items per page of `tools/list`, `prompts/list`, `resources/list` and
    /// `resources/templates/list`.
    #[arg(long, env = "MCPBOX_PAGE_SIZE", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub page_size: u32,

    /// The largest message accepted on stdin, in bytes.
    #[arg(long, env = "MCPBOX_MAX_MESSAGE_BYTES", default_value_t = StdioConfig::DEFAULT_MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,

    /// Fuel (a deterministic CPU budget) for each call into a plugin.
    #[arg(long, env = "MCPBOX_FUEL", default_value_t = Limits::DEFAULT_FUEL)]
    pub fuel: u64,

    /// Wall-clock limit for each call into a plugin, in milliseconds.
    #[arg(long, env = "MCPBOX_TIMEOUT_MS", default_value_t = Limits::DEFAULT_TIMEOUT.as_millis() as u64)]
    pub timeout_ms: u64,

    /// Memory limit for each plugin instance, in MiB.
    #[arg(long, env = "MCPBOX_MEMORY_MIB", default_value_t = (Limits::DEFAULT_MEMORY_BYTES >> 20) as u64)]
    pub memory_mib: u64,

    /// Do not watch the plugin directory: serve the plugins loaded at startup, and advertise
    /// exactly what they offer.
    #[arg(long, env = "MCPBOX_NO_WATCH")]
    pub no_watch: bool,

    /// How long a changed plugin file must be quiet before it is reloaded, in milliseconds.
    #[arg(long, env = "MCPBOX_RELOAD_DEBOUNCE_MS", default_value_t = 200)]
    pub reload_debounce_ms: u64,

    /// How many plugin instances may run at once; further calls wait for a slot.
    #[arg(long, env = "MCPBOX_MAX_INSTANCES", default_value_t = RuntimeConfig::default().max_instances)]
    pub max_instances: u32,
}

impl Cli {
    /// Send logs to stderr at the chosen level.
    pub fn init_logging(&self) -> anyhow::Result<()> {
        let filter = EnvFilter::builder().parse(&self.log).with_context(|| {
            format!(
                "invalid log level or filter `{}` (from --log or MCPBOX_LOG)",
                self.log
            )
        })?;
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(false)
            .try_init()
            .map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
    }
}

/// Run a command to completion.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let Command::Serve(args) = cli.command;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(serve(args));
    // Do not wait for a blocked stdin reader thread on the way out.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let memory_bytes =
        usize::try_from(args.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
    let limits = Limits {
        fuel: args.fuel,
        timeout: Duration::from_millis(args.timeout_ms),
        memory_bytes,
        ..Limits::default()
    };
    let config = RuntimeConfig {
        max_instances: args.max_instances,
        max_memory_bytes: memory_bytes.max(RuntimeConfig::default().max_memory_bytes),
    };
    let engine = Runtime::new(config)?;
    // Canonical, so that file events (absolute paths) match the loaded plugins' files.
    let dir = std::fs::canonicalize(&args.plugins).with_context(|| {
        format!(
            "cannot read the plugin directory {}",
            args.plugins.display()
        )
    })?;
    let plugins = load_directory(&engine, &dir, limits).await?;
    let watching = !args.no_watch;
    let plugins = Arc::new(PluginSet::new(plugins, args.page_size as usize, watching));
    let _watcher = if watching {
        let debounce = Duration::from_millis(args.reload_debounce_ms);
        Some(
            Reloader::new(engine.clone(), dir.clone(), limits, Arc::clone(&plugins))
                .watch(debounce)?,
        )
    } else {
        None
    };
    tracing::info!(
        dir = %dir.display(),
        plugins = plugins.catalog().plugin_count(),
        fuel = limits.fuel,
        timeout_ms = args.timeout_ms,
        memory_mib = args.memory_mib,
        "serving MCP on stdio"
    );
    let session = Arc::new(Session::new(plugins));
    let input = tokio::io::BufReader::with_capacity(64 << 10, tokio::io::stdin());
    let config = StdioConfig {
        max_message_bytes: args.max_message_bytes,
        ..StdioConfig::default()
    };
    stdio::serve(session, input, tokio::io::stdout(), config)
        .await
        .context("stdio transport failed")?;
    tracing::info!("stdin closed; exiting");
    Ok(())
}
