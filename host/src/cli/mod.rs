//! The command line: raw arguments (`args`, each flag with an `MCPBOX_*` environment
//! fallback, merged with the configuration file), logging set-up, and running a command
//! (`serve`; `call`, `inspect`, `new`, `skills`, `push`, `sign` and `keygen` for plugin authors;
//! `state`, `credentials`, `check`, `pull` and `bundle` for operators). `serve` is checked into
//! settings and handed to [`Host`], the composition root; the other commands' work is their
//! rooms' (`commands`, with `bundle` and `credentials` in files of their own).
//! The top of the crate: it may use any room, and none uses it.
//!
//! Uses: `auth`, `author_tools`, `compose`, `config`, `credentials`, `engine`, `kv`, `manage`, `policy`, `principal`, `registry`, `scaffold`,
//! `server`, `skills`, `telemetry`, `transport`, `watch`.

mod args;
mod bundle;
mod commands;
mod credentials;
mod log_line;
mod settings;
mod state_args;

use std::ffi::OsString;
#[cfg(feature = "registry")]
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

pub use self::args::*;
#[cfg(feature = "registry")]
use self::commands::pull;
use self::commands::{call, check, state_command};
pub use self::credentials::{CredentialsAction, CredentialsArgs};
use self::log_line::EscapedLines;
use crate::author_tools;
use crate::compose::Host;
use crate::config::{ConfigError, ConfigFile};
use crate::engine::EngineStart;
use crate::kv::StateConfig;
use crate::policy::{Limits, Sections};

/// mcpbox: serve MCP tools, prompts and resources from sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(name = "mcpbox", version, about)]
pub struct Cli {
    /// Log level or filter for the log on stderr: error, warn, info, debug, trace, or
    /// directives such as `info,plugin=debug`.
    #[arg(long, global = true, env = "MCPBOX_LOG", default_value = "info")]
    pub log: String,

    /// How log lines are written: `text` for people, `json` (one object per line, with the
    /// fields apart) for log shippers.
    #[arg(
        long,
        global = true,
        env = "MCPBOX_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The format of the log on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event.
    Text,
    /// One JSON object per event.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP on stdin and stdout with the plugins in a directory.
    Serve(Box<ServeArgs>),
    /// Run one request against a plugin, with the sandbox and limits `serve` uses, and print
    /// the MCP result (exit status 1 when it is an error or `isError`).
    Call(CallArgs),
    /// Say what a plugin (or every plugin in a directory) offers and asks for: interfaces,
    /// tools with schemas, prompts, resources, names refused and why, grants and limits.
    Inspect(InspectArgs),
    /// Look at or clear the key-value state plugins keep (`wasi:keyvalue`).
    State(StateCommandArgs),
    /// Look at or remove the accounts callers linked at downstream providers (per-user
    /// credentials), or make a credentials key.
    Credentials(CredentialsArgs),
    /// Write a new plugin project (Rust, Python or JavaScript) that builds on its own, with
    /// a test.
    New(NewArgs),
    /// Check a configuration file (every key, value and plugin section) without serving;
    /// exit status 1 if it is invalid.
    Check(CheckArgs),
    /// Fetch a plugin from an OCI registry into a plugin directory: checked against its digest
    /// and the signature policy, recorded in the directory's lock file (`mcpbox.lock`).
    Pull(PullArgs),
    /// Publish a component to an OCI registry as a WebAssembly artifact (the layout `wkg`
    /// uses).
    Push(PushArgs),
    /// Sign a component in a registry (a cosign signature stored beside it) or a component
    /// file (a detached signature, `FILE.wasm.sig`).
    Sign(SignArgs),
    /// Make a key pair for signing (cosign's format): `PREFIX.key`, encrypted with
    /// `COSIGN_PASSWORD`, and `PREFIX.pub`.
    Keygen(KeygenArgs),
    /// Write an MCP Bundle's directory (`.mcpb`, manifest 0.4): this mcpbox and chosen
    /// plugins, asking the user for the folders to grant; `npx @anthropic-ai/mcpb pack DIR`
    /// makes the file a desktop client installs with a click.
    Bundle(bundle::BundleArgs),
    /// Put a directory of Agent Skills into a plugin component (any language's; the Rust
    /// SDK's `skills!` does it at build time), replacing the skills it carried, and say what
    /// mcpbox will serve of them.
    Skills(SkillsArgs),
}

/// What a command leaves for `main` to print: output for stdout, and whether it failed.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Text for stdout (never written by `serve`, whose stdout is the protocol's).
    pub output: Option<String>,
    /// The command ran, but what it reports is a failure (exit status 1).
    pub failed: bool,
}

/// Why the command line (with its configuration file) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// The flags themselves (clap prints these, with usage).
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// The configuration file.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
}

/// `serve` as a built command: with the global options, as a configuration file may set them.
pub fn serve_command() -> clap::Command {
    use clap::CommandFactory as _;
    let mut command = Cli::command();
    command.build();
    command
        .find_subcommand("serve")
        .cloned()
        .unwrap_or_else(|| clap::Command::new("serve"))
}

impl Cli {
    /// Parse `args` (the process's arguments, program name first); for `serve --config`, read
    /// the file and fill in every option no flag or environment variable set (flag >
    /// environment > file > default). An empty `--plugins` or `--secrets` value means none (a
    /// desktop client passes an unset setting of an MCP bundle so).
    pub fn load(args: Vec<OsString>) -> Result<Self, ArgsError> {
        let mut cli = Self::load_with_file(args)?;
        if let Command::Serve(serve) = &mut cli.command {
            serve.plugins.retain(|dir| !dir.as_os_str().is_empty());
            if serve
                .secrets
                .as_ref()
                .is_some_and(|s| s.as_os_str().is_empty())
            {
                serve.secrets = None;
            }
        }
        Ok(cli)
    }

    fn load_with_file(args: Vec<OsString>) -> Result<Self, ArgsError> {
        use clap::{CommandFactory as _, FromArgMatches as _};
        let matches = Cli::command().try_get_matches_from(&args)?;
        let cli = Cli::from_arg_matches(&matches)?;
        let Some(path) = (match &cli.command {
            Command::Serve(serve) => serve.config.as_ref(),
            _ => None,
        }) else {
            return Ok(cli);
        };
        let serve = serve_command();
        let file = ConfigFile::load(path, &serve)?;
        let Some(("serve", serve_matches)) = matches.subcommand() else {
            return Ok(cli);
        };
        let mut args = args;
        args.extend(file.arguments(serve_matches, &serve)?);
        let mut cli = match Cli::try_parse_from(args) {
            Ok(cli) => cli,
            Err(e) => return Err(file.explain(e)?.into()),
        };
        if let Command::Serve(serve) = &mut cli.command {
            serve.loaded_config = Some(Arc::new(file));
        }
        Ok(cli)
    }

    /// Whether this is `serve` over HTTP (many clients at once), not over stdio or a one-shot
    /// command (one client).
    pub fn serves_http(&self) -> bool {
        matches!(&self.command, Command::Serve(serve) if serve.http.is_some())
    }

    /// Send logs to stderr at the chosen level, and for `serve --otlp-endpoint` traces to the
    /// collector (the exporter is returned, to be shut down at exit).
    pub fn init_logging(&self) -> anyhow::Result<Option<crate::telemetry::Telemetry>> {
        use tracing_subscriber::Layer as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let mut filter = EnvFilter::builder().parse(&self.log).with_context(|| {
            format!(
                "invalid log level or filter `{}` (from --log or MCPBOX_LOG)",
                self.log
            )
        })?;
        if !self.log.contains("sigstore") {
            // sigstore reports at info that keyless verification is off: mcpbox never uses it.
            if let Ok(quiet) = "sigstore=warn".parse() {
                filter = filter.add_directive(quiet);
            }
        }
        let endpoint = match &self.command {
            Command::Serve(serve) => serve.otlp_endpoint.as_deref(),
            _ => None,
        };
        let failed = |e: tracing_subscriber::util::TryInitError| {
            anyhow::anyhow!("cannot set up logging: {e}")
        };
        let Some(endpoint) = endpoint else {
            // No exporter: one global filter, so that every call site the filter turns off
            // (the spans for traces among them) is never visited at all.
            let builder = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(EscapedLines(std::io::stderr))
                .with_ansi(false);
            match self.log_format {
                LogFormat::Text => builder.finish().try_init(),
                LogFormat::Json => builder.json().flatten_event(true).finish().try_init(),
            }
            .map_err(failed)?;
            return Ok(None);
        };
        // With the exporter, each layer has its own filter: the log keeps `--log`, the
        // exporter takes the spans of `mcpbox::otel`.
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(EscapedLines(std::io::stderr))
            .with_ansi(false);
        let fmt: Box<dyn tracing_subscriber::Layer<_> + Send + Sync> = match self.log_format {
            LogFormat::Text => fmt.with_filter(filter).boxed(),
            LogFormat::Json => fmt.json().flatten_event(true).with_filter(filter).boxed(),
        };
        let (otel, telemetry) =
            crate::telemetry::layer(endpoint).map_err(|e| anyhow::anyhow!(e))?;
        tracing_subscriber::registry()
            .with(fmt)
            .with(otel)
            .try_init()
            .map_err(failed)?;
        tracing::info!(endpoint, "exporting traces over OTLP");
        Ok(Some(telemetry))
    }
}

/// Run a command to completion.
pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    // Serving: the engine is made beside everything up to the plugins' loading, from here.
    let engine = match &cli.command {
        Command::Serve(args) => Some(EngineStart::begin(args.engine_sizes())),
        _ => None,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let args = match cli.command {
        Command::Serve(args) => *args,
        Command::Call(args) => {
            let outcome = runtime.block_on(call(args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        Command::New(args) => {
            let dir = args
                .dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(&args.name));
            let next = crate::scaffold::new_project(
                &args.name,
                args.lang,
                args.wasi,
                &dir,
                args.sdk.as_deref(),
            )?;
            return Ok(Outcome {
                output: Some(next),
                failed: false,
            });
        }
        Command::Check(args) => {
            let outcome = runtime.block_on(check(&args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        #[cfg(feature = "registry")]
        Command::Pull(args) => {
            let outcome = runtime.block_on(pull(args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        #[cfg(feature = "registry")]
        Command::Push(args) => {
            let registry = args.registry.client()?;
            let attach = runtime.block_on(push_attachments(&args))?;
            let outcome = runtime.block_on(crate::registry::push(
                &registry,
                &args.file,
                &args.reference,
                &attach,
            ));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return reported(outcome);
        }
        #[cfg(feature = "registry")]
        Command::Sign(args) => {
            let target = Path::new(&args.target);
            let outcome = if target.is_file() {
                crate::registry::sign_file(target, &args.key)
            } else if target.extension().is_some_and(|e| e == "wasm") {
                Err(crate::registry::RegistryError::Usage(format!(
                    "{} is not a file (to sign a component in a registry, give its reference)",
                    target.display()
                )))
            } else {
                let registry = args.registry.client()?;
                runtime.block_on(crate::registry::sign_reference(
                    &registry,
                    &args.target,
                    &args.key,
                ))
            };
            runtime.shutdown_timeout(Duration::from_millis(100));
            return reported(outcome);
        }
        #[cfg(feature = "registry")]
        Command::Keygen(args) => return reported(crate::registry::keygen(&args.prefix)),
        #[cfg(not(feature = "registry"))]
        Command::Pull(_) => anyhow::bail!(crate::registry::not_built("pull")),
        #[cfg(not(feature = "registry"))]
        Command::Push(_) => anyhow::bail!(crate::registry::not_built("push")),
        #[cfg(not(feature = "registry"))]
        Command::Sign(_) => anyhow::bail!(crate::registry::not_built("sign")),
        #[cfg(not(feature = "registry"))]
        Command::Keygen(_) => anyhow::bail!(crate::registry::not_built("keygen")),
        Command::Skills(args) => return self::commands::skills(&args),
        Command::Bundle(args) => return self::bundle::bundle(&args),
        Command::Credentials(args) => {
            let outcome = runtime.block_on(self::credentials::credentials_command(args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        Command::State(args) => {
            let outcome = runtime.block_on(state_command(args));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return outcome;
        }
        Command::Inspect(args) => {
            let sections = match &args.config {
                Some(path) => {
                    let file = ConfigFile::load(path, &serve_command())?;
                    Sections::new(file.path().to_owned(), file.sections().clone())
                }
                None => Sections::default(),
            };
            let report = runtime.block_on(author_tools::inspect(
                &args.plugin,
                Limits::default(),
                args.cache_dir,
                (
                    StateConfig::default_place(),
                    args::read_secrets(args.secrets.as_deref())?,
                ),
                Arc::new(sections.with_grants(crate::policy::CommandLineGrants::new(args.grant))),
            ));
            runtime.shutdown_timeout(Duration::from_millis(100));
            return report.map(|report| Outcome {
                output: Some(report),
                failed: false,
            });
        }
    };
    // On a worker thread, not this one: the stdio loop then spawns each request onto the
    // thread it runs on, with no hand-off to wake another thread for.
    let result = runtime.block_on(async {
        tokio::spawn(serve(args, engine))
            .await
            .unwrap_or_else(|e| Err(anyhow::anyhow!("the server task failed: {e}")))
    });
    // Do not wait for a blocked stdin reader thread on the way out.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result.map(|()| Outcome::default())
}

/// `mcpbox serve`: check the arguments, start the host (with the engine `engine` has been
/// making, begun here if not yet), serve until told to stop.
async fn serve(args: ServeArgs, engine: Option<EngineStart>) -> anyhow::Result<()> {
    // Installed first, so that a signal during start-up is handled too.
    let shutdown = crate::compose::shutdown_signal();
    let engine = engine.unwrap_or_else(|| EngineStart::begin(args.engine_sizes()));
    let settings = args.settings()?;
    let host = Host::start(settings, engine).await?;
    host.serve(shutdown).await?;
    Ok(())
}

/// A registry command's report, for stdout.
#[cfg(feature = "registry")]
fn reported(report: Result<String, crate::registry::RegistryError>) -> anyhow::Result<Outcome> {
    Ok(Outcome {
        output: Some(report?),
        failed: false,
    })
}

#[cfg(test)]
mod tests;

/// What `push` attaches beside the component: the manifest of `--manifest` (checked as the
/// host would read it), the description, and the tools the component lists (listed as `mcpbox
/// inspect` does, with no grants; unless `--no-tools`).
#[cfg(feature = "registry")]
async fn push_attachments(args: &args::PushArgs) -> anyhow::Result<crate::registry::Attachments> {
    let manifest = match &args.manifest {
        Some(path) => {
            let len = std::fs::metadata(path)
                .with_context(|| format!("cannot read {}", path.display()))?
                .len();
            if len > crate::registry::MAX_PLUGIN_MANIFEST_BYTES {
                anyhow::bail!(
                    "{} is {len} bytes, over the {} a plugin manifest may be",
                    path.display(),
                    crate::registry::MAX_PLUGIN_MANIFEST_BYTES
                );
            }
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            crate::policy::parse_manifest(path, &text, Limits::default())?;
            Some(text)
        }
        None => None,
    };
    let mut tools = Vec::new();
    if !args.no_tools {
        // Listing tools needs no state: none is opened.
        let state = StateConfig::Unset;
        match author_tools::inspect(
            &args.file,
            Limits::default(),
            None,
            (state, crate::policy::Secrets::default()),
            Arc::new(Sections::default()),
        )
        .await
        {
            Ok(report) => {
                let report: serde_json::Value = serde_json::from_str(&report)?;
                tools = report["plugins"][0]["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect();
            }
            Err(e) => tracing::warn!(
                "could not list the component's tools (pushing without them; --no-tools skips this): {e:#}"
            ),
        }
    }
    Ok(crate::registry::Attachments {
        manifest,
        description: args.description.clone(),
        tools,
    })
}
