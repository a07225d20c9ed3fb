//! `mcpbox new --wasi 0.3`: a Rust or Python plugin built as a WASI 0.3 component
//! (`mcpbox:plugin@0.3.0`), whose tool is an `async fn` (an `async def`) that streams its
//! output.
//!
//! A Python project carries the same helper module as a 0.2 one (`mcpbox_sdk.py` serves both
//! worlds, telling them apart by the bindings componentize-py generated) and builds against
//! `wit/0.3` with componentize-py 0.25.1. JavaScript projects are written for 0.2 only:
//! componentize-js 0.23.0 cannot build a 0.3 component (it stops at an `async func` export,
//! "not yet implemented", and at a `stream` result, "entered unreachable code").

/// The world a Python 0.3 project builds against: the 0.3 contract with the HTTP, state and
/// configuration imports, which the helper module's `State`, `caller()` and `config()` use.
pub const PYTHON_WORLD: &str = "mcpbox:plugin/plugin-full@0.3.0";

/// The files of a Rust 0.3 project for the plugin `name` (file stem `stem`), with `sdk` the
/// line that names the `mcpbox-sdk` dependency.
pub(super) fn rust(name: &str, stem: &str, sdk: &str) -> Vec<(String, String)> {
    // The SDK line names the crate; the 0.3 API is its `p3` feature.
    let sdk = match sdk.split_once(" = ") {
        Some((crate_name, source)) if source.starts_with('{') => format!(
            "{crate_name} = {}, features = [\"p3\"] }}",
            source.trim_end().trim_end_matches('}').trim_end()
        ),
        Some((crate_name, source)) => {
            let (version, comment) = source.split_once("  #").unwrap_or((source, ""));
            let comment = if comment.is_empty() {
                String::new()
            } else {
                format!("  #{comment}")
            };
            format!("{crate_name} = {{ version = {version}, features = [\"p3\"] }}{comment}")
        }
        None => sdk.to_owned(),
    };
    let mut files = super::rust(name, stem, &sdk);
    for (path, text) in &mut files {
        match path.as_str() {
            "src/lib.rs" => *text = lib(stem),
            "README.md" => {
                *text = text
                    .replace(
                        "An mcpbox plugin in Rust.",
                        "An mcpbox plugin in Rust, built as a WASI 0.3 component: its tool is an \
                         `async fn`\nthat streams what it finds as it goes.",
                    )
                    .replace(r#"{"name": "Ada"}"#, r#"{"names": ["Ada", "Grace"]}"#);
            }
            _ => {}
        }
    }
    files
}

/// The files of a Python 0.3 project for the plugin `stem`: a 0.2 project's, with an app
/// whose tool streams, built against `wit/0.3`.
pub(super) fn python(stem: &str) -> Vec<(String, String)> {
    let mut files = super::python(stem);
    for (path, text) in &mut files {
        match path.as_str() {
            "app.py" => *text = PYTHON_APP.to_owned(),
            "build.sh" => {
                *text = text.replace(
                    &format!("-d wit -w {}", super::WORLD),
                    &format!("-d wit/0.3 -w {PYTHON_WORLD}"),
                );
            }
            "test.sh" => {
                *text = text
                    .replace(r#"{"name": "Ada"}"#, r#"{"names": ["Ada", "Grace"]}"#)
                    .replace(
                        "grep -q 'Hello, Ada!' <<<\"$out\"",
                        "grep -q 'Hello, Ada!' <<<\"$out\" && grep -q 'greeted 2' <<<\"$out\"",
                    );
            }
            "README.md" => {
                *text = text.replace(
                    "An mcpbox plugin in Python, built into a component by componentize-py.",
                    "An mcpbox plugin in Python, built into a WASI 0.3 component by componentize-py:\n\
                     its tool is an `async def` that streams what it makes as it goes.",
                );
            }
            _ => {}
        }
    }
    files
}

const PYTHON_APP: &str = r#""""An mcpbox plugin in Python, a WASI 0.3 component (built with componentize-py; see
README.md)."""

from mcpbox_sdk import Output, Plugin

plugin = Plugin()


def greeting(name: str) -> str:
    """The greeting for one name."""
    if not name.strip():
        raise ValueError("a name must not be empty")
    return f"Hello, {name}!"


@plugin.tool(read_only=True)
async def hello(names: list[str], out: Output) -> str:
    """Greet people by name, streaming each greeting as it is made."""
    for name in names:
        # Raises Cancelled once the client cancelled: the call then stops. Await other work
        # here too (`await elicit(...)`, `await sample(...)`): several may run at once.
        await out.text(greeting(name))
    return f"greeted {len(names)}"


@plugin.prompt()
def introduce(topic: str) -> str:
    """Ask for an introduction to a topic."""
    return f"Give a short introduction to {topic}."


@plugin.resource("hello://about", mime_type="text/plain")
def about() -> str:
    """What this plugin is."""
    return "A Python plugin for mcpbox, a WASI 0.3 component."


Tools, Prompts, Resources, Completion = plugin.exports()
"#;

fn lib(stem: &str) -> String {
    format!(
        r#"//! The `{stem}` mcpbox plugin, a WASI 0.3 component (`mcpbox:plugin@0.3.0`).

use mcpbox_sdk::p3::{{Output, Plugin, Tools}};
use mcpbox_sdk::{{Deserialize, JsonSchema, Tool}};

/// Arguments of `hello`.
#[derive(Deserialize, JsonSchema)]
struct HelloArgs {{
    /// Whom to greet.
    names: Vec<String>,
}}

/// The greeting for one name, or why there is none.
fn greeting(name: &str) -> Result<String, String> {{
    if name.trim().is_empty() {{
        return Err("a name must not be empty".to_owned());
    }}
    Ok(format!("Hello, {{name}}!"))
}}

/// Greet each name, streaming each greeting as it is made. An `Err` would reach the model as
/// an `isError` result. Await other work here (`mcpbox_sdk::p3::http::get`, the client
/// through `mcpbox_sdk::p3::host`): several awaits may run at once.
async fn hello(args: HelloArgs, mut out: Output) -> Result<String, String> {{
    for name in &args.names {{
        // Fails once the client cancelled: stop then.
        out.text(greeting(name)?).await?;
    }}
    Ok(format!("greeted {{}}", args.names.len()))
}}

struct MyPlugin;

impl Plugin for MyPlugin {{
    fn tools(tools: &mut Tools) {{
        tools.add(Tool::new("hello", "Greet people by name").read_only(true), hello);
    }}
}}

mcpbox_sdk::p3::export!(MyPlugin);

// The skills under `skills/` (each a directory holding a SKILL.md) go into the component.
mcpbox_sdk::skills!("skills");

#[cfg(test)]
mod tests {{
    use super::*;

    #[test]
    fn greeting_greets_and_refuses_an_empty_name() {{
        assert_eq!(greeting("Ada"), Ok("Hello, Ada!".to_owned()));
        assert!(greeting(" ").is_err());
    }}
}}
"#
    )
}

#[cfg(test)]
mod tests {
    /// The `Cargo.toml` line naming the SDK, as a 0.3 project has it.
    fn sdk_line(sdk: &str) -> String {
        let files = super::rust("demo", "demo", sdk);
        let manifest = &files
            .iter()
            .find(|(path, _)| path == "Cargo.toml")
            .expect("a Cargo.toml")
            .1;
        manifest
            .lines()
            .find(|l| l.starts_with("mcpbox-sdk"))
            .expect("the SDK line")
            .to_owned()
    }

    #[test]
    fn a_python_0_3_project_builds_against_the_0_3_world_and_checks_the_streamed_answer() {
        let files = super::python("demo");
        let file = |name: &str| {
            files
                .iter()
                .find(|(path, _)| path == name)
                .map(|(_, text)| text.clone())
                .unwrap_or_default()
        };
        assert!(
            file("build.sh").contains(
                "componentize-py -d wit/0.3 -w mcpbox:plugin/plugin-full@0.3.0 componentize"
            ),
            "{}",
            file("build.sh")
        );
        assert!(
            file("test.sh").contains(r#"--args '{"names": ["Ada", "Grace"]}'"#)
                && file("test.sh").contains("grep -q 'greeted 2'"),
            "{}",
            file("test.sh")
        );
        assert!(file("app.py").contains("async def hello(names: list[str], out: Output)"));
        assert!(file("mcpbox_sdk.py").contains("_exports_p3"));
    }

    #[test]
    fn a_0_3_project_asks_for_the_sdks_p3_feature_by_path_or_version() {
        assert_eq!(
            sdk_line(r#"mcpbox-sdk = { path = "/src/mcpbox/guest-sdk" }"#),
            r#"mcpbox-sdk = { path = "/src/mcpbox/guest-sdk", features = ["p3"] }"#
        );
        assert_eq!(
            sdk_line(
                r#"mcpbox-sdk = "0.1.0"  # or { path = "…/mcpbox/guest-sdk" } for a checkout"#
            ),
            r#"mcpbox-sdk = { version = "0.1.0", features = ["p3"] }  # or { path = "…/mcpbox/guest-sdk" } for a checkout"#
        );
    }
}
