//! The bodies of the commands other than `serve` that need more than a line (`credentials` has
//! its own file): `pull`, `check`,
//! `call`, `state` and `skills`. Their work is done by the rooms they name (`registry`, `config`,
//! `author_tools`, `kv`); this module reads their arguments and shapes what they print.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;

#[cfg(feature = "registry")]
use super::args::PullArgs;
use super::args::{CallArgs, CheckArgs, ServeArgs, SkillsArgs, StateAction, StateCommandArgs};
use super::{ArgsError, Cli, Command, Outcome};
#[cfg(feature = "registry")]
use super::{reported, serve_command};
use crate::author_tools::{self, CallRequest};
use crate::config::ConfigFile;
use crate::kv::StateService;
use crate::policy::Sections;

/// `mcpbox pull`: the policy is the configuration's `[signatures]` (with `--key`s added), the
/// directory `--to` or the configuration's `plugins`.
#[cfg(feature = "registry")]
pub(super) async fn pull(args: PullArgs) -> anyhow::Result<Outcome> {
    let config = match &args.config {
        Some(path) => Some(ConfigFile::load(path, &serve_command())?),
        None => None,
    };
    let mut policy = config.as_ref().and_then(|c| c.signatures().cloned());
    for key in &args.key {
        let key = crate::registry::trust::TrustedKey::read(&key.display().to_string(), key)?;
        policy
            .get_or_insert_with(|| crate::registry::trust::TrustPolicy {
                source: "--key".to_owned(),
                ..Default::default()
            })
            .add_required_key(key);
    }
    let dir = match (
        &args.to,
        config.as_ref().and_then(|c| c.path_option("plugins")),
    ) {
        (Some(dir), _) => dir.clone(),
        (None, Some(dir)) => dir,
        (None, None) => anyhow::bail!(
            "where to? give --to DIR, or --config FILE whose `plugins` is the plugin directory"
        ),
    };
    let registry = args.registry.client()?;
    let request = crate::registry::PullRequest {
        reference: args.reference,
        dir,
        name: args.name,
        locked: args.locked,
        policy,
    };
    reported(crate::registry::pull(&registry, request).await)
}

/// `mcpbox check --config FILE`: read and check the file as `serve` would, and say what it
/// sets.
pub(super) async fn check(args: &CheckArgs) -> anyhow::Result<Outcome> {
    // Exactly what `serve --config FILE` would read (with the environment's overrides).
    let argv = vec![
        OsString::from("mcpbox"),
        OsString::from("serve"),
        OsString::from("--config"),
        args.config.clone().into_os_string(),
    ];
    let cli = match Cli::load(argv) {
        Ok(cli) => cli,
        Err(e) => {
            let message = match e {
                ArgsError::Clap(e) => e.to_string().lines().next().unwrap_or_default().to_owned(),
                other => other.to_string(),
            };
            return Ok(Outcome {
                output: Some(format!("invalid: {message}")),
                failed: true,
            });
        }
    };
    let Command::Serve(serve) = &cli.command else {
        anyhow::bail!("the configuration file was not read");
    };
    let Some(file) = serve.loaded_config.as_ref() else {
        anyhow::bail!("the configuration file was not read");
    };
    let keys: Vec<&str> = file.keys().collect();
    let sections: Vec<&str> = file.sections().keys().map(String::as_str).collect();
    let mut report = format!(
        "{} is valid: {} options{}{}, {} plugin sections{}",
        args.config.display(),
        keys.len(),
        if keys.is_empty() { "" } else { " (" },
        if keys.is_empty() {
            String::new()
        } else {
            format!("{})", keys.join(", "))
        },
        sections.len(),
        if sections.is_empty() {
            String::new()
        } else {
            format!(" ({})", sections.join(", "))
        },
    );
    if let Some(policy) = file.signatures() {
        let required: Vec<String> = policy
            .require
            .iter()
            .map(|(plugin, keys)| format!("{plugin} by {}", keys.join(" or ")))
            .collect();
        report.push_str(&format!(
            "\nsignatures: {} keys ({}); required: {}",
            policy.keys.len(),
            policy.keys.keys().cloned().collect::<Vec<_>>().join(", "),
            if required.is_empty() {
                "none".to_owned()
            } else {
                required.join(", ")
            }
        ));
    }
    if !keys.contains(&"plugins") {
        report.push_str(
            "\nnote: it sets no `plugins` directory; give --plugins or MCPBOX_PLUGINS when serving",
        );
    }
    let secrets = match serve.secrets() {
        Ok(secrets) => secrets,
        Err(e) => {
            return Ok(Outcome {
                output: Some(format!("invalid: {e:#}")),
                failed: true,
            });
        }
    };
    let mut failed = false;
    for line in credential_problems(serve, &secrets, &mut report) {
        failed = true;
        report.push_str(&format!("\nerror: {line}"));
    }
    let dirs: Vec<PathBuf> = serve
        .plugins
        .iter()
        .filter(|dir| dir.is_dir())
        .cloned()
        .collect();
    for dir in &dirs {
        let missing = missing_config(file, dir, serve, &secrets).await;
        failed |= !missing.is_empty();
        for line in missing {
            report.push_str(&format!("\nerror: {line}"));
        }
    }
    if !dirs.is_empty() {
        report.push_str(&plugin_warnings(file, &dirs, serve, &secrets).await?);
    }
    Ok(Outcome {
        output: Some(report),
        failed,
    })
}

/// What `check` finds wrong with per-user credentials, as `serve` would refuse it: a provider
/// whose client secret the secrets file lacks, and providers with no key to seal their tokens
/// (or a key file that cannot be used). The providers are named in `report`.
fn credential_problems(
    serve: &ServeArgs,
    secrets: &crate::policy::Secrets,
    report: &mut String,
) -> Vec<String> {
    let providers = serve.providers();
    if providers.is_empty() {
        return Vec::new();
    }
    let names: Vec<String> = providers
        .iter()
        .map(|p| format!("{} ({})", p.name, p.display_name))
        .collect();
    report.push_str(&format!("\nproviders: {}", names.join(", ")));
    let mut problems = providers.missing_secrets(|name| secrets.get(name, None).is_some());
    problems.extend(providers.exchange_problem(serve.has_oauth()));
    match serve.credentials_key(secrets) {
        Ok(Some(_)) => {}
        Ok(None) if providers.iter().all(|p| p.exchange().is_some()) => {}
        Ok(None) => problems.push(
            "providers are configured but no credentials key seals their tokens: give \
             --credentials-key-file PATH (`mcpbox credentials keygen` makes a key), or a \
             `credentials-key` entry in the secrets file"
                .to_owned(),
        ),
        Err(e) => problems.push(format!("{e:#}")),
    }
    problems
}

/// The configuration keys of the plugins in `dir` that have no value with `secrets` (by key
/// and source, never a value), and the providers their `[http.credentials]` name that the
/// configuration does not define (such a plugin does not load): one line per plugin and kind.
async fn missing_config(
    file: &ConfigFile,
    dir: &Path,
    serve: &ServeArgs,
    secrets: &crate::policy::Secrets,
) -> Vec<String> {
    let sections = Arc::new(
        Sections::new(file.path().to_owned(), file.sections().clone()).with_grants(
            crate::policy::CommandLineGrants::new(serve.all_grants().unwrap_or_default()),
        ),
    );
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "wasm"))
        .collect();
    files.sort();
    let providers = serve.providers();
    let mut out = Vec::new();
    for path in files {
        let trust = crate::registry::trust::Trust::default();
        let Ok(source) = crate::watch::read_source(&path, &sections, &trust).await else {
            continue;
        };
        let Ok(policy) = crate::watch::policy_of(&source, serve.limits.limits()) else {
            continue;
        };
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let missing = crate::policy::config::missing(&policy.config, secrets);
        if !missing.is_empty() {
            out.push(format!(
                "plugin `{name}`: [config] keys without a value: {} (add them to the secrets file, \
                 set the variables, or mark them optional = true)",
                missing.join(", ")
            ));
        }
        for grant in &policy.credentials {
            if providers.get(&grant.provider).is_none() {
                out.push(format!(
                    "plugin `{name}`: [http.credentials] calls {} as the caller through provider \
                     `{}`, which the configuration does not define (add [providers.{}]); the \
                     plugin would not load",
                    grant.host, grant.provider, grant.provider
                ));
            }
        }
    }
    out
}

/// What `check` warns about in the plugin directory `dir`, as `serve` would: `[plugin.NAME]`
/// sections naming no plugin there, and names in allow- and deny-lists (of sections and
/// manifests) that their plugin does not offer (the plugins are loaded to know).
async fn plugin_warnings(
    file: &ConfigFile,
    dirs: &[PathBuf],
    serve: &ServeArgs,
    secrets: &crate::policy::Secrets,
) -> anyhow::Result<String> {
    let mut warnings = String::new();
    for name in file.sections().keys() {
        if !super::settings::holds_plugin(dirs, name) {
            warnings.push_str(&format!(
                "\nwarning: [plugin.{name}] names no plugin in {}: there is no {name}.wasm",
                super::settings::shown(dirs)
            ));
        }
    }
    let sections = Arc::new(
        Sections::new(file.path().to_owned(), file.sections().clone()).with_grants(
            crate::policy::CommandLineGrants::new(serve.all_grants().unwrap_or_default()),
        ),
    );
    let cache_dir = if serve.no_cache {
        None
    } else {
        serve.cache_dir.clone()
    };
    // Loaded with the secrets `serve` would have, so plugins needing them load here too.
    for dir in dirs {
        let unknown = author_tools::unknown_listed_names(
            dir,
            Arc::clone(&sections),
            serve.limits.limits(),
            cache_dir.clone(),
            secrets.clone(),
        )
        .await?;
        for unknown in unknown {
            warnings.push_str(&format!("\nwarning: {unknown}"));
        }
    }
    Ok(warnings)
}

pub(super) async fn call(args: CallArgs) -> anyhow::Result<Outcome> {
    let request = match (args.tool, args.prompt, args.resource) {
        (_, Some(prompt), _) => CallRequest::Prompt(prompt),
        (_, _, Some(uri)) => CallRequest::Resource(uri),
        (Some(tool), _, _) => CallRequest::Tool(tool),
        (None, None, None) => anyhow::bail!("name a tool, or --prompt or --resource"),
    };
    let limits = args.limits.limits();
    let outcome = author_tools::call(
        &args.plugin,
        request,
        &args.args,
        limits,
        args.cache_dir,
        args.state.config(),
        super::args::read_secrets(args.secrets.as_deref())?,
    )
    .await?;
    Ok(Outcome {
        output: Some(outcome.json),
        failed: outcome.failed,
    })
}

/// `mcpbox state`: read or clear a plugin's key-value state.
pub(super) async fn state_command(args: StateCommandArgs) -> anyhow::Result<Outcome> {
    let service = StateService::new(args.state.config())?;
    let backend = service.backend().await?;
    let shared_service = &service;
    // The namespace an action addresses: the plugin's own, or one caller's in it, and how to
    // name it in messages.
    let space = |plugin: &str, principal: Option<&str>| {
        let plugin = plugin.to_owned();
        let principal = principal.map(str::to_owned);
        async move {
            match principal {
                None => Ok::<_, anyhow::Error>((plugin.clone(), format!("plugin `{plugin}`"))),
                Some(principal) => {
                    let key = shared_service.host_key().await?;
                    let id = crate::principal::caller_id(&plugin, &principal, &key);
                    Ok((
                        crate::kv::caller_space(&plugin, &id),
                        format!("caller `{principal}` of plugin `{plugin}`"),
                    ))
                }
            }
        }
    };
    let output = match args.action {
        StateAction::Ls { plugin, principal } => {
            let (space, whose) = space(&plugin, principal.as_deref()).await?;
            let entries = backend.entries(&space).await?;
            let usage = backend.usage(&space).await?;
            let mut out = String::new();
            for entry in &entries {
                out.push_str(&format!(
                    "{}\t{}\t{} bytes\n",
                    entry.bucket,
                    crate::engine::log_line(&entry.key, 1024),
                    entry.size
                ));
            }
            out.push_str(&format!(
                "{whose}: {} keys, {} bytes in {}",
                usage.keys,
                usage.bytes,
                service.config()
            ));
            if principal.is_none() {
                let callers = backend.callers(&plugin).await?;
                if !callers.is_empty() {
                    let (keys, bytes) = callers
                        .iter()
                        .fold((0, 0), |(k, b), (_, u)| (k + u.keys, b + u.bytes));
                    out.push_str(&format!(
                        " (all callers included); {} callers have buckets of their own: {keys} \
                         keys, {bytes} bytes (see one with --principal KEY)",
                        callers.len()
                    ));
                }
            }
            out
        }
        StateAction::Get {
            plugin,
            key,
            bucket,
            principal,
        } => {
            let (space, whose) = space(&plugin, principal.as_deref()).await?;
            match backend.get(&space, &bucket, &key).await? {
                None => {
                    return Ok(Outcome {
                        output: Some(format!("{whose} has no key `{key}` in bucket `{bucket}`")),
                        failed: true,
                    });
                }
                Some(value) => match String::from_utf8(value) {
                    Ok(text) => text,
                    Err(binary) => {
                        use base64::Engine as _;
                        tracing::info!("the value is not UTF-8 text; printed as base64");
                        base64::engine::general_purpose::STANDARD.encode(binary.as_bytes())
                    }
                },
            }
        }
        StateAction::Rm {
            plugin,
            key: Some(key),
            bucket,
            principal,
        } => {
            let (space, whose) = space(&plugin, principal.as_deref()).await?;
            let existed = backend.exists(&space, &bucket, &key).await?;
            backend.delete(&space, &bucket, &key).await?;
            if existed {
                format!("removed `{key}` from bucket `{bucket}` of {whose}")
            } else {
                format!("{whose} had no key `{key}` in bucket `{bucket}`")
            }
        }
        StateAction::Rm {
            plugin,
            key: None,
            principal,
            ..
        } => {
            let (space, whose) = space(&plugin, principal.as_deref()).await?;
            let removed = backend.clear(&space).await?;
            format!("removed all state of {whose} ({removed} keys)")
        }
    };
    Ok(Outcome {
        output: Some(output),
        failed: false,
    })
}

/// `mcpbox skills`: put the skills under a directory into a component (or take them out), and
/// report what mcpbox will serve of them and what it refuses.
pub fn skills(args: &SkillsArgs) -> anyhow::Result<Outcome> {
    use crate::skills;
    let wasm = std::fs::read(&args.plugin)
        .with_context(|| format!("cannot read {}", args.plugin.display()))?;
    let files = match &args.dir {
        Some(dir) => skills::read_tree(dir).map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    let packed = skills::pack(&wasm, &files)
        .map_err(|why| anyhow::anyhow!("{}: {why}", args.plugin.display()))?;
    let name = args
        .plugin
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("plugin");
    let served = skills::Skills::from_component(name, &packed);
    let output = args.output.as_ref().unwrap_or(&args.plugin);
    // Written beside and renamed, so a running server's watcher never reads half a file.
    let partial = output.with_extension("wasm.partial");
    std::fs::write(&partial, &packed)
        .with_context(|| format!("cannot write {}", partial.display()))?;
    std::fs::rename(&partial, output)
        .with_context(|| format!("cannot write {}", output.display()))?;
    let mut report = format!(
        "{}: {} skill(s) from {} file(s)\n",
        output.display(),
        served.skills.len(),
        files.len()
    );
    for skill in &served.skills {
        report.push_str(&format!(
            "  serves {} ({} files)\n",
            skill.uri,
            skill.files.len()
        ));
    }
    for (what, why) in &served.refused {
        report.push_str(&format!("  refused {what}: {why}\n"));
    }
    Ok(Outcome {
        output: Some(report),
        failed: !served.refused.is_empty(),
    })
}
