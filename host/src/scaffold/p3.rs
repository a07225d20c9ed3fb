//! `mcpbox new --wasi 0.3`: a Rust plugin built as a WASI 0.3 component
//! (`mcpbox:plugin@0.3.0`), whose tool is an `async fn` that streams its output.
//!
//! Python and JavaScript projects are written for 0.2 only: componentize-py 0.25.1 builds 0.3
//! components (`tests/plugins/python-p3`), but the helper module has no 0.3 form yet, and
//! componentize-js 0.23.0 cannot build one (it stops at an `async func` export, "not yet
//! implemented", and at a `stream` result, "entered unreachable code").

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
