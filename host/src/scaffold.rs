//! `mcpbox new`: write a plugin project that builds outside this repository, in Rust, Python
//! or JavaScript, with a test; for WASI 0.3 (`--wasi 0.3`, async tools that stream), `p3`.
//!
//! Everything a project needs travels inside the binary: the WIT contract (for Python and
//! JavaScript, whose toolchains read it from the project), the Python and JavaScript helper
//! modules, and the templates. A Rust project depends on the `mcpbox-sdk` crate: by path when
//! mcpbox was built from a checkout that is still there (or `--sdk` names one), otherwise by
//! version from crates.io.
//!
//! Uses: nothing else in the crate.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// The plugin contract and the standard interfaces it may import: every file of `wit/` but its
/// README, by its path there, listed by the build script (`host/build.rs`).
const WIT: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/wit_files.rs"));

const PYTHON_HELPER: &str = include_str!("../../guest-sdk/python/mcpbox_sdk.py");
const JS_HELPER: &str = include_str!("../../guest-sdk/js/mcpbox.js");

/// The world every template builds against.
pub const WORLD: &str = "mcpbox:multi-user/plugin@0.1.0";

/// A project's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, with the `mcpbox-sdk` crate.
    Rust,
    /// Python, with componentize-py.
    Python,
    /// JavaScript, with componentize-js.
    Js,
}

/// Which WASI a project's component targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Wasi {
    /// WASI 0.2: the `mcpbox:plugin@0.1.0` contract, synchronous calls.
    #[default]
    #[value(name = "0.2")]
    P2,
    /// WASI 0.3: the `mcpbox:plugin@0.3.0` contract, async tools that stream (Rust and
    /// Python).
    #[value(name = "0.3")]
    P3,
}

mod p3;

/// Where a Rust project finds the SDK.
fn sdk_dependency(sdk: Option<&Path>) -> anyhow::Result<String> {
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    let path = match sdk {
        Some(path) => Some(
            path.canonicalize()
                .with_context(|| format!("--sdk {}: no such directory", path.display()))?,
        ),
        None => built_from.canonicalize().ok(),
    };
    Ok(match path {
        Some(path) => {
            if !path.join("Cargo.toml").exists() {
                bail!(
                    "--sdk {}: not the mcpbox-sdk crate (no Cargo.toml)",
                    path.display()
                );
            }
            format!("mcpbox-sdk = {{ path = {:?} }}", path.display().to_string())
        }
        None => format!(
            "mcpbox-sdk = \"{}\"  # or {{ path = \"…/mcpbox/guest-sdk\" }} for a checkout",
            env!("CARGO_PKG_VERSION")
        ),
    })
}

/// Whether `name` is a plugin name: 1 to 64 lower-case letters, digits, `_` and `-`, starting
/// with a letter.
pub fn valid_name(name: &str) -> bool {
    name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// Write a new `lang` project for the plugin `name` in `dir` (created; it must not exist or
/// be empty). Returns what to do next, for the user.
pub fn new_project(
    name: &str,
    lang: Lang,
    wasi: Wasi,
    dir: &Path,
    sdk: Option<&Path>,
) -> anyhow::Result<String> {
    if !valid_name(name) {
        bail!(
            "invalid plugin name `{name}`: use 1 to 64 lower-case letters, digits, `_` and `-`, \
             starting with a letter (it becomes the component's file name and the plugin's \
             name in mcpbox)"
        );
    }
    if wasi == Wasi::P3 && lang == Lang::Js {
        bail!(
            "--wasi 0.3 writes Rust and Python projects only: componentize-js 0.23.0 cannot \
             build WASI 0.3 components (PLUGINS.md, WASI 0.3)"
        );
    }
    if dir.exists()
        && std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_some()
    {
        bail!("{} already exists and is not empty", dir.display());
    }
    // The plugin's name in mcpbox is its file's stem; Rust names the file after the crate
    // with `-` as `_`, so every language does the same.
    let stem = name.replace('-', "_");
    let files = match lang {
        Lang::Rust if wasi == Wasi::P3 => p3::rust(name, &stem, &sdk_dependency(sdk)?),
        Lang::Rust => rust(name, &stem, &sdk_dependency(sdk)?),
        Lang::Python if wasi == Wasi::P3 => p3::python(&stem),
        Lang::Python => python(&stem),
        Lang::Js => js(name, &stem),
    };
    for (path, text) in files {
        write(dir, &path, &text)?;
    }
    if lang != Lang::Rust {
        for (path, text) in WIT {
            write(dir, &format!("wit/{path}"), text)?;
        }
    }
    let mut next = format!(
        "created {} ({lang:?} plugin `{stem}`)\n\nnext:\n",
        dir.display()
    );
    let shown = dir.display();
    let _ = match lang {
        Lang::Rust => write!(
            next,
            "  cd {shown}\n  cargo test                                    # the unit test\n  \
             rustup target add wasm32-wasip2\n  cargo build --release --target wasm32-wasip2\n  \
             mcpbox call target/wasm32-wasip2/release/{stem}.wasm hello --args '{}'\n",
            match wasi {
                Wasi::P2 => r#"{"name": "Ada"}"#,
                Wasi::P3 => r#"{"names": ["Ada", "Grace"]}"#,
            }
        ),
        Lang::Python => write!(
            next,
            "  cd {shown}\n  pip install componentize-py\n  ./test.sh                                     # builds {stem}.wasm, then calls it\n"
        ),
        Lang::Js => write!(
            next,
            "  cd {shown}\n  npm install\n  npm test                                      # builds {stem}.wasm, then calls it\n"
        ),
    };
    Ok(next)
}

fn write(dir: &Path, path: &str, text: &str) -> anyhow::Result<()> {
    let file: PathBuf = dir.join(path);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&file, text).with_context(|| format!("cannot write {}", file.display()))?;
    #[cfg(unix)]
    if path.ends_with(".sh") {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", file.display()))?;
    }
    Ok(())
}

/// The skill every template ships (`skills/NAME/SKILL.md`): its name is the plugin's, as the
/// Agent Skills naming rules allow it (lower-case letters, digits and single hyphens).
fn skill(name: &str, stem: &str) -> (String, String) {
    let mut skill = String::new();
    for c in name.chars().map(|c| if c == '_' { '-' } else { c }) {
        if !(c == '-' && (skill.is_empty() || skill.ends_with('-'))) {
            skill.push(c);
        }
    }
    let skill = skill.trim_end_matches('-').to_owned();
    (
        format!("skills/{skill}/SKILL.md"),
        format!(
            "---\nname: {skill}\ndescription: How and when to use the {stem} plugin's tools. Say here when an agent should load this skill.\n---\n\n\
             # {skill}\n\n\
             Instructions for the agent, served with the plugin (mcpbox PLUGINS.md, \"Skills\"):\n\n\
             - Use the `hello` tool to greet someone by name.\n"
        ),
    )
}

/// The manifest every template writes beside the component: commented-out grants.
fn manifest(stem: &str) -> (String, String) {
    (
        format!("{stem}.toml"),
        format!(
            "# The grants and limits of `{stem}`: put this file beside {stem}.wasm in the plugin\n\
             # directory. Without grants a plugin has no files, network, environment or state.\n\
             # Every key is described in mcpbox's SECURITY.md.\n\
             \n\
             # [limits]\n# timeout-ms = 5000\n\
             \n\
             # [http]\n# allow = [\"api.example.com\"]\n\
             \n\
             # [keyvalue]\n# buckets = [\"default\"]\n"
        ),
    )
}

fn rust(name: &str, stem: &str, sdk: &str) -> Vec<(String, String)> {
    vec![
        (
            "Cargo.toml".to_owned(),
            format!(
                r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

# A plugin is a WebAssembly component: build it with
# `cargo build --release --target wasm32-wasip2`.
[lib]
crate-type = ["cdylib"]

[dependencies]
{sdk}
# The SDK's derives expand to these crates' paths.
serde = {{ version = "1", features = ["derive"] }}
schemars = "1.2"

[profile.release]
opt-level = "s"
lto = true
codegen-units = 1
strip = "debuginfo"

# Not part of any enclosing workspace.
[workspace]
"#
            ),
        ),
        (
            "src/lib.rs".to_owned(),
            format!(
                r#"//! The `{stem}` mcpbox plugin.

use mcpbox_sdk::{{Deserialize, JsonSchema, Plugin, Tool, Tools}};

/// Arguments of `hello`.
#[derive(Deserialize, JsonSchema)]
struct HelloArgs {{
    /// Whom to greet.
    name: String,
}}

/// Greet someone. An `Err` would reach the model as an `isError` result.
fn hello(args: HelloArgs) -> Result<String, String> {{
    if args.name.trim().is_empty() {{
        return Err("`name` must not be empty".to_owned());
    }}
    Ok(format!("Hello, {{}}!", args.name))
}}

struct MyPlugin;

impl Plugin for MyPlugin {{
    fn tools(tools: &mut Tools) {{
        tools.add(Tool::new("hello", "Greet someone by name").read_only(true), hello);
    }}
}}

mcpbox_sdk::export!(MyPlugin);

// The skills under `skills/` (each a directory holding a SKILL.md) go into the component.
mcpbox_sdk::skills!("skills");

#[cfg(test)]
mod tests {{
    use super::*;

    #[test]
    fn hello_greets_and_refuses_an_empty_name() {{
        let greeting = hello(HelloArgs {{ name: "Ada".to_owned() }});
        assert_eq!(greeting, Ok("Hello, Ada!".to_owned()));
        assert!(hello(HelloArgs {{ name: " ".to_owned() }}).is_err());
    }}
}}
"#
            ),
        ),
        manifest(stem),
        skill(name, stem),
        (
            "README.md".to_owned(),
            format!(
                "# {name}\n\nAn mcpbox plugin in Rust.\n\n```sh\ncargo test\nrustup target add wasm32-wasip2\n\
                 cargo build --release --target wasm32-wasip2\n\
                 mcpbox call target/wasm32-wasip2/release/{stem}.wasm hello --args '{{\"name\": \"Ada\"}}'\n```\n\n\
                 To serve it, copy `{stem}.wasm` (and `{stem}.toml`, its grants) into mcpbox's plugin\n\
                 directory. The plugin's name in mcpbox is the file name without `.wasm`.\n"
            ),
        ),
        (".gitignore".to_owned(), "/target\n".to_owned()),
    ]
}

fn python(stem: &str) -> Vec<(String, String)> {
    vec![
        (
            "app.py".to_owned(),
            r#""""An mcpbox plugin in Python (built with componentize-py; see README.md)."""

from mcpbox_sdk import Plugin

plugin = Plugin()


@plugin.tool(read_only=True)
def hello(name: str) -> str:
    """Greet someone by name."""
    if not name.strip():
        raise ValueError("`name` must not be empty")
    return f"Hello, {name}!"


@plugin.prompt()
def introduce(topic: str) -> str:
    """Ask for an introduction to a topic."""
    return f"Give a short introduction to {topic}."


@plugin.resource("hello://about", mime_type="text/plain")
def about() -> str:
    """What this plugin is."""
    return "A Python plugin for mcpbox."


Tools, Prompts, Resources, Completion = plugin.exports()
"#
            .to_owned(),
        ),
        ("mcpbox_sdk.py".to_owned(), PYTHON_HELPER.to_owned()),
        (
            "build.sh".to_owned(),
            format!(
                "#!/usr/bin/env bash\n# Build {stem}.wasm with componentize-py (pip install componentize-py).\n\
                 set -euo pipefail\ncd \"$(dirname \"$0\")\"\n\
                 componentize-py -d wit -w {WORLD} componentize -p . app -o {stem}.wasm\n\
                 # The skills under skills/ go into the component.\n\
                 \"${{MCPBOX:-mcpbox}}\" skills {stem}.wasm skills\n"
            ),
        ),
        (
            "test.sh".to_owned(),
            format!(
                "#!/usr/bin/env bash\n# Build the plugin, then call its tool with mcpbox (on PATH, or $MCPBOX).\n\
                 set -euo pipefail\ncd \"$(dirname \"$0\")\"\n./build.sh\n\
                 out=\"$(\"${{MCPBOX:-mcpbox}}\" call {stem}.wasm hello --args '{{\"name\": \"Ada\"}}')\"\n\
                 echo \"$out\"\ngrep -q 'Hello, Ada!' <<<\"$out\" && echo ok\n"
            ),
        ),
        manifest(stem),
        skill(stem, stem),
        (
            "README.md".to_owned(),
            format!(
                "# {stem}\n\nAn mcpbox plugin in Python, built into a component by componentize-py.\n\n\
                 ```sh\npip install componentize-py\n./build.sh     # → {stem}.wasm\n\
                 ./test.sh      # builds, then runs `mcpbox call {stem}.wasm hello …`\n```\n\n\
                 `mcpbox_sdk.py` is mcpbox's helper module and `wit/` its contract, copied here by\n\
                 `mcpbox new`. To serve the plugin, copy `{stem}.wasm` (and `{stem}.toml`) into\n\
                 mcpbox's plugin directory.\n"
            ),
        ),
        (".gitignore".to_owned(), "*.wasm\n__pycache__/\n".to_owned()),
    ]
}

fn js(name: &str, stem: &str) -> Vec<(String, String)> {
    vec![
        (
            "app.js".to_owned(),
            r#"// An mcpbox plugin in JavaScript (built with componentize-js; see README.md).

import { Plugin } from "./mcpbox.js";

const plugin = new Plugin();

plugin.tool(
  "hello",
  { description: "Greet someone by name", input: { name: "string" }, readOnly: true },
  ({ name }) => {
    if (!name.trim()) throw new Error("`name` must not be empty");
    return `Hello, ${name}!`;
  },
);

plugin.prompt(
  "introduce",
  { description: "Ask for an introduction to a topic", arguments: ["topic"] },
  ({ topic }) => `Give a short introduction to ${topic}.`,
);

plugin.resource("hello://about", { name: "about", mimeType: "text/plain" }, () =>
  "A JavaScript plugin for mcpbox.",
);

export const { tools, prompts, resources, completion } = plugin.exports();
"#
            .to_owned(),
        ),
        ("mcpbox.js".to_owned(), JS_HELPER.to_owned()),
        (
            "package.json".to_owned(),
            format!(
                r#"{{
  "name": "{name}",
  "version": "0.1.0",
  "private": true,
  "type": "module",
  "scripts": {{
    "build": "componentize-js app.js --wit wit --world-name {WORLD} -o {stem}.wasm && ${{MCPBOX:-mcpbox}} skills {stem}.wasm skills",
    "test": "npm run build && bash test.sh"
  }},
  "devDependencies": {{
    "@bytecodealliance/componentize-js": "0.23.0"
  }}
}}
"#
            ),
        ),
        (
            "test.sh".to_owned(),
            format!(
                "#!/usr/bin/env bash\n# Call the built plugin's tool with mcpbox (on PATH, or $MCPBOX).\n\
                 set -euo pipefail\ncd \"$(dirname \"$0\")\"\n\
                 out=\"$(\"${{MCPBOX:-mcpbox}}\" call {stem}.wasm hello --args '{{\"name\": \"Ada\"}}')\"\n\
                 echo \"$out\"\ngrep -q 'Hello, Ada!' <<<\"$out\" && echo ok\n"
            ),
        ),
        manifest(stem),
        skill(name, stem),
        (
            "README.md".to_owned(),
            format!(
                "# {name}\n\nAn mcpbox plugin in JavaScript, built into a component by componentize-js.\n\n\
                 ```sh\nnpm install\nnpm run build   # → {stem}.wasm\n\
                 npm test        # builds, then runs `mcpbox call {stem}.wasm hello …`\n```\n\n\
                 `mcpbox.js` is mcpbox's helper module and `wit/` its contract, copied here by\n\
                 `mcpbox new`. To serve the plugin, copy `{stem}.wasm` (and `{stem}.toml`) into\n\
                 mcpbox's plugin directory.\n"
            ),
        ),
        (
            ".gitignore".to_owned(),
            "*.wasm\nnode_modules/\n".to_owned(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::WIT;

    /// Every file under `dir` but `wit/README.md`, by its path relative to `root` with `/`
    /// between names, with its text.
    fn wit_files(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                wit_files(root, &path, files);
            } else if path != root.join("README.md") {
                let name = path.strip_prefix(root).unwrap().to_str().unwrap();
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((name.replace('\\', "/"), text));
            }
        }
    }

    /// A project for Python or JavaScript gets the whole contract: every file of `wit/` (but its
    /// README), none missing, none stale.
    #[test]
    fn new_projects_carry_every_file_of_the_wit() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit");
        let mut ours = Vec::new();
        wit_files(&root, &root, &mut ours);
        ours.sort();
        let mut carried: Vec<(String, String)> = WIT
            .iter()
            .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
            .collect();
        carried.sort();
        let names = |files: &[(String, String)]| -> Vec<String> {
            files.iter().map(|(name, _)| name.clone()).collect()
        };
        assert_eq!(names(&carried), names(&ours));
        assert!(carried == ours, "a WIT file differs from wit/'s");
    }
}
