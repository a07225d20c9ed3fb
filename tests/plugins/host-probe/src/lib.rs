//! Test fixture: calls every host import and reports what each returned.

use mcpbox_sdk::{ListKind, NoArgs, Plugin, Tool, Tools, host, serde_json::json};

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

struct Probe;

impl Plugin for Probe {
    fn tools(tools: &mut Tools) {
        tools
            .add(
                Tool::new(
                    "probe_host",
                    "Call every host import and report the answers",
                ),
                probe,
            )
            .add(Tool::new("chatter", "Print to stdout and stderr"), chatter);
    }
}

mcpbox_sdk::export!(Probe);
