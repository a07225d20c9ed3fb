//! `mcpbox bundle`: an MCP Bundle (`.mcpb`, manifest 0.4) of this mcpbox and chosen plugins,
//! laid out as a directory that npm's `@anthropic-ai/mcpb` packs (`mcpb pack DIR`) into the
//! one file a desktop client (Claude Desktop and others) installs with a click.
//!
//! The directory holds `manifest.json`, `server/mcpbox` (this executable, or `--binary`; other
//! platforms' builds under `server/PLATFORM/` through `--platform-binary`, named in the
//! manifest's `platform_overrides`) and `plugins/` (each chosen component with its manifest
//! and signature). The manifest's `user_config` asks the user for the folders the filesystem
//! plugin may use (`multiple`), a directory of their own plugins, and a secrets file; the
//! client passes their answers to `mcpbox serve` as arguments.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};

use super::Outcome;

/// Arguments of `mcpbox bundle`.
#[derive(Debug, clap::Args)]
pub struct BundleArgs {
    /// The plugin directory the bundled plugins come from (repeatable: an earlier directory's
    /// plugin wins a name).
    #[arg(long, required = true, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub plugins: Vec<PathBuf>,

    /// Bundle only this plugin, by name (repeatable; default: every plugin in the directories).
    #[arg(long = "plugin", value_name = "NAME")]
    pub only: Vec<String>,

    /// Where to write the bundle's directory (created; it must be empty if it exists).
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub out: PathBuf,

    /// The mcpbox executable for this platform [default: this one].
    #[arg(long, value_name = "PATH", value_hint = clap::ValueHint::FilePath)]
    pub binary: Option<PathBuf>,

    /// Another platform's mcpbox build, `PLATFORM=PATH` with PLATFORM `darwin`, `win32` or
    /// `linux` (repeatable; built on that platform, or cross-compiled: OPERATING.md).
    #[arg(long, value_name = "PLATFORM=PATH", value_parser = parse_platform_binary)]
    pub platform_binary: Vec<(String, PathBuf)>,
}

/// The platforms a bundle may carry (Node's `process.platform` names, as manifests use).
const PLATFORMS: &[&str] = &["darwin", "linux", "win32"];

fn parse_platform_binary(text: &str) -> Result<(String, PathBuf), String> {
    let (platform, path) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not PLATFORM=PATH"))?;
    if !PLATFORMS.contains(&platform) {
        return Err(format!(
            "`{platform}` is not a platform: one of {}",
            PLATFORMS.join(", ")
        ));
    }
    if path.is_empty() {
        return Err(format!("`{text}` names no file"));
    }
    Ok((platform.to_owned(), PathBuf::from(path)))
}

/// This build's platform, as Node names it.
fn this_platform() -> &'static str {
    match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        _ => "linux",
    }
}

/// The file name of the executable on `platform`.
fn executable(platform: &str) -> &'static str {
    if platform == "win32" {
        "mcpbox.exe"
    } else {
        "mcpbox"
    }
}

/// One plugin's files: the component, and its manifest and signature when present.
struct Chosen {
    name: String,
    files: Vec<PathBuf>,
}

/// The plugins of `dirs` (an earlier directory's wins a name), only those of `only` if given.
fn choose(dirs: &[PathBuf], only: &[String]) -> anyhow::Result<Vec<Chosen>> {
    let mut seen = BTreeSet::new();
    let mut chosen = Vec::new();
    for dir in dirs {
        let mut components: Vec<PathBuf> = std::fs::read_dir(dir)
            .with_context(|| format!("cannot read the plugin directory {}", dir.display()))?
            .filter_map(Result::ok)
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "wasm") && path.is_file())
            .collect();
        components.sort();
        for component in components {
            let Some(name) = component.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if !only.is_empty() && !only.iter().any(|n| n == name) {
                continue;
            }
            if !seen.insert(name.to_owned()) {
                continue;
            }
            let mut files = vec![component.clone()];
            for beside in [
                component.with_extension("toml"),
                component.with_extension("wasm.sig"),
            ] {
                if beside.is_file() {
                    files.push(beside);
                }
            }
            chosen.push(Chosen {
                name: name.to_owned(),
                files,
            });
        }
    }
    if let Some(missing) = only.iter().find(|n| !seen.contains(*n)) {
        anyhow::bail!(
            "no plugin `{missing}` in {}",
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if chosen.is_empty() {
        anyhow::bail!("no plugins (`*.wasm`) to bundle");
    }
    Ok(chosen)
}

/// A plugin manifest's text without its `[[dirs]]` grants (they name folders of the machine
/// that made the bundle, not of the user's), and how many it had.
fn without_folders(file: &Path) -> anyhow::Result<(String, usize)> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", file.display()))?;
    let folders = match table.remove("dirs") {
        Some(toml::Value::Array(dirs)) => dirs.len(),
        Some(_) => 1,
        None => return Ok((text, 0)),
    };
    let rest = toml::to_string(&table)
        .with_context(|| format!("cannot write {} again", file.display()))?;
    Ok((
        format!(
            "# Written by `mcpbox bundle` from the plugin's manifest, without the folders it \
             granted\n# there: the folders the user picks are granted when mcpbox starts.\n{rest}"
        ),
        folders,
    ))
}

/// Copy `from` to `to`, executable.
fn copy_executable(from: &Path, to: &Path) -> anyhow::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", to.display()))?;
    }
    Ok(())
}

/// The arguments the client starts mcpbox with: the bundled plugins, the user's own, the
/// folders they picked granted to the filesystem plugin, and their secrets file.
fn server_args(filesystem: bool) -> Vec<String> {
    // `--flag=${…}`, one argument: a setting left unset (its default "") then arrives as an
    // empty value, which mcpbox reads as none. (A client's resolver keeps an argument that is
    // exactly `${user_config.KEY}` as written when the value is empty.)
    let mut args: Vec<String> = [
        "serve",
        "--plugins",
        "${__dirname}/plugins",
        "--plugins=${user_config.plugin_dir}",
        "--secrets=${user_config.secrets_file}",
    ]
    .map(str::to_owned)
    .to_vec();
    if filesystem {
        // Last: each folder the user picked becomes an argument of its own.
        args.extend(["--grant-dirs", "filesystem", "${user_config.folders}"].map(str::to_owned));
    }
    args
}

/// The bundle's `manifest.json`.
fn manifest(plugins: &[Chosen], platforms: &[String]) -> Value {
    let filesystem = plugins.iter().any(|p| p.name == "filesystem");
    let names: Vec<&str> = plugins.iter().map(|p| p.name.as_str()).collect();
    let mut overrides = serde_json::Map::new();
    for platform in platforms.iter().filter(|p| *p != this_platform()) {
        overrides.insert(
            platform.clone(),
            json!({ "command": format!("${{__dirname}}/server/{platform}/{}", executable(platform)) }),
        );
    }
    let mut user_config = serde_json::Map::new();
    if filesystem {
        user_config.insert(
            "folders".to_owned(),
            json!({
                "type": "directory",
                "title": "Folders",
                "description": "The folders the filesystem tools may read and change. Nothing \
                                else on your disk is visible to any plugin.",
                "multiple": true,
                "required": false,
                "default": [],
            }),
        );
    }
    user_config.insert(
        "plugin_dir".to_owned(),
        json!({
            "type": "directory",
            "title": "Your own plugins",
            "description": "A folder of more mcpbox plugins (*.wasm) to serve beside the \
                            bundled ones; changes to it apply live.",
            "required": false,
            "default": "",
        }),
    );
    user_config.insert(
        "secrets_file".to_owned(),
        json!({
            "type": "file",
            "title": "Secrets file",
            "description": "A TOML file of secrets plugins' settings name (API keys), readable \
                            only by you. Its values never reach a plugin's logs or arguments.",
            "required": false,
            "default": "",
        }),
    );
    let mut mcp_config = json!({
        "command": format!("${{__dirname}}/server/{}", executable(this_platform())),
        "args": server_args(filesystem),
        "env": {},
    });
    if !overrides.is_empty() {
        mcp_config["platform_overrides"] = Value::Object(overrides);
    }
    json!({
        "manifest_version": "0.4",
        "name": "mcpbox",
        "display_name": "mcpbox",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "MCP tools from sandboxed WebAssembly plugins: no file, network or \
                        secret reaches a plugin unless you grant it.",
        "long_description": format!(
            "mcpbox serves the tools, prompts and resources of WebAssembly plugins, each in a \
             sandbox with a CPU, memory and time budget. Bundled plugins: {}.",
            names.join(", ")
        ),
        "author": { "name": "The mcpbox authors" },
        "license": env!("CARGO_PKG_LICENSE"),
        "keywords": ["sandbox", "webassembly", "wasm", "plugins"],
        "server": {
            "type": "binary",
            "entry_point": format!("server/{}", executable(this_platform())),
            "mcp_config": mcp_config,
        },
        "tools_generated": true,
        "prompts_generated": true,
        "user_config": user_config,
        "compatibility": { "platforms": platforms },
    })
}

/// Write the bundle's directory.
pub(super) fn bundle(args: &BundleArgs) -> anyhow::Result<Outcome> {
    let out = &args.out;
    if out.exists()
        && std::fs::read_dir(out)
            .with_context(|| format!("cannot read {}", out.display()))?
            .next()
            .is_some()
    {
        anyhow::bail!(
            "{} is not empty: give a new or empty directory to --out",
            out.display()
        );
    }
    let chosen = choose(&args.plugins, &args.only)?;
    let binary = match &args.binary {
        Some(path) => path.clone(),
        None => std::env::current_exe().context("cannot find this mcpbox's executable")?,
    };
    let here = this_platform();
    copy_executable(&binary, &out.join("server").join(executable(here)))?;
    let mut platforms = vec![here.to_owned()];
    for (platform, path) in &args.platform_binary {
        if platforms.contains(platform) {
            anyhow::bail!("--platform-binary gives `{platform}` twice (or this platform's own)");
        }
        copy_executable(
            path,
            &out.join("server").join(platform).join(executable(platform)),
        )?;
        platforms.push(platform.clone());
    }
    let plugin_dir = out.join("plugins");
    std::fs::create_dir_all(&plugin_dir)
        .with_context(|| format!("cannot create {}", plugin_dir.display()))?;
    let mut dropped = Vec::new();
    for plugin in &chosen {
        for file in &plugin.files {
            let Some(name) = file.file_name() else {
                continue;
            };
            let to = plugin_dir.join(name);
            if file.extension().is_some_and(|e| e == "toml") {
                let (text, folders) = without_folders(file)?;
                if folders > 0 {
                    dropped.push(format!("{} ({folders})", plugin.name));
                }
                std::fs::write(&to, text)
                    .with_context(|| format!("cannot write {}", to.display()))?;
            } else {
                std::fs::copy(file, &to)
                    .with_context(|| format!("cannot copy {}", file.display()))?;
            }
        }
    }
    let text = serde_json::to_string_pretty(&manifest(&chosen, &platforms))
        .context("cannot write the manifest")?;
    std::fs::write(out.join("manifest.json"), format!("{text}\n"))
        .with_context(|| format!("cannot write {}", out.join("manifest.json").display()))?;
    let names: Vec<&str> = chosen.iter().map(|p| p.name.as_str()).collect();
    let dropped = if dropped.is_empty() {
        String::new()
    } else {
        format!(
            "left out the folders the plugins' manifests grant on this machine: {}; the user's \
             picks are granted instead\n",
            dropped.join(", ")
        )
    };
    Ok(Outcome {
        output: Some(format!(
            "{dropped}wrote the bundle's directory {} (mcpbox for {}; plugins {})\n\
             pack it into one file with npm's official CLI:\n  \
             npx @anthropic-ai/mcpb pack {} mcpbox.mcpb",
            out.display(),
            platforms.join(", "),
            names.join(", "),
            out.display()
        )),
        failed: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_platform_binary_names_a_known_platform_and_a_file() {
        assert_eq!(
            parse_platform_binary("darwin=/tmp/mcpbox").ok(),
            Some(("darwin".to_owned(), PathBuf::from("/tmp/mcpbox")))
        );
        assert!(
            parse_platform_binary("macos=/tmp/x")
                .err()
                .is_some_and(|e| e.contains("not a platform"))
        );
        assert!(parse_platform_binary("win32=").is_err());
        assert!(parse_platform_binary("/tmp/x").is_err());
    }

    #[test]
    fn the_manifest_overrides_the_command_for_each_other_platform() {
        let plugins = [Chosen {
            name: "filesystem".to_owned(),
            files: Vec::new(),
        }];
        let platforms = vec![this_platform().to_owned(), "win32".to_owned()];
        let manifest = manifest(&plugins, &platforms);
        assert_eq!(manifest["manifest_version"], "0.4");
        assert_eq!(manifest["server"]["type"], "binary");
        assert_eq!(
            manifest["server"]["mcp_config"]["platform_overrides"]["win32"]["command"],
            "${__dirname}/server/win32/mcpbox.exe"
        );
        assert_eq!(manifest["user_config"]["folders"]["multiple"], true);
        let args = manifest["server"]["mcp_config"]["args"].as_array().cloned();
        assert_eq!(
            args.and_then(|a| a.last().cloned()),
            Some(json!("${user_config.folders}"))
        );
    }
}
