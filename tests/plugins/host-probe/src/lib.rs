//! Test fixture: calls every host import and reports what each returned.

use mcpbox_sdk::serde_json::{Value, json};
use mcpbox_sdk::{
    Completions, ListKind, NoArgs, Plugin, Prompt, Prompts, Tool, ToolResult, Tools, host,
};

/// A JSON Schema 2020-12 schema using keywords no Rust type derives; the host must pass it
/// through byte for byte and validate arguments against it.
const SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

/// Call every import of the `host` interface; report the answers as JSON text.
fn probe(_: NoArgs) -> String {
    host::info("probe: logging through the host");
    host::progress(0.5, Some(1.0), Some("half way"));
    let cancelled = host::cancelled();
    let sample = host::sample(&json!({"messages": [], "maxTokens": 1}));
    let elicit = host::elicit(&json!({"message": "?", "requestedSchema": {"type": "object"}}));
    let roots = host::list_roots();
    host::notify_list_changed(ListKind::Tools);
    host::notify_resource_updated("probe://nothing");
    json!({
        "cancelled": cancelled,
        "sample": sample.err(),
        "elicit": elicit.err(),
        "roots": roots.err(),
    })
    .to_string()
}

/// Write to stdout and stderr, which the host must keep off its protocol stream.
#[expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the point of this fixture"
)]
fn chatter(_: NoArgs) -> String {
    println!("probe stdout line");
    eprintln!("probe stderr line");
    "said something".to_owned()
}

/// Arguments of `pick`.
#[derive(mcpbox_sdk::Deserialize, mcpbox_sdk::JsonSchema)]
struct Pick {
    /// A number.
    n: String,
}

/// Where `create_extra` leaves its mark (a directory the tests grant read-write).
const EXTRA: &str = "/state/extra";

fn create_extra(_: NoArgs) -> Result<String, String> {
    std::fs::write(EXTRA, b"1").map_err(|e| format!("cannot write {EXTRA}: {e}"))?;
    host::notify_list_changed(ListKind::Tools);
    Ok("created".to_owned())
}

/// Arguments of `touch`.
#[derive(mcpbox_sdk::Deserialize, mcpbox_sdk::JsonSchema)]
struct Touch {
    /// The resource that changed.
    uri: String,
}

struct Probe;

impl Plugin for Probe {
    fn tools(tools: &mut Tools) {
        // A tool that exists only once `create_extra` ran: the list depends on outside state.
        if std::path::Path::new(EXTRA).exists() {
            tools.add(
                Tool::new("extra", "Exists once create_extra ran"),
                |_: NoArgs| "extra",
            );
        }
        tools
            .add(Tool::new("create_extra", "Add the `extra` tool and say the tool list changed"), create_extra)
            .add(Tool::new("touch", "Say a resource changed"), |Touch { uri }: Touch| {
                host::notify_resource_updated(&uri);
                "touched"
            })
            .add(
                Tool::new(
                    "probe_host",
                    "Call every host import and report the answers",
                ),
                probe,
            )
            .add(Tool::new("chatter", "Print to stdout and stderr"), chatter)
            .add(Tool::new("schema_2020_12", "Take arguments described by a raw 2020-12 schema").input_schema(SCHEMA_2020_12), |args: Value| {
                format!("called with {args}")
            })
            .add(
                Tool::new("bad_output", "Return structured content that breaks its own output schema")
                    .output_schema(r#"{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}"#),
                |_: NoArgs| ToolResult::text("{}").with_structured(r#"{"total": 1}"#),
            );
    }

    fn prompts(prompts: &mut Prompts) {
        prompts.add(Prompt::new("pick", "Pick a number"), |args: Pick| {
            format!("You picked {}.", args.n)
        });
    }

    fn completions(completions: &mut Completions) {
        // 500 candidates: more than the 100 a completion result may carry.
        completions.prompt_argument("pick", "n", |typed| {
            (1..=500)
                .map(|n: u32| n.to_string())
                .filter(|n| n.starts_with(typed))
                .collect()
        });
    }
}

mcpbox_sdk::export!(Probe);
