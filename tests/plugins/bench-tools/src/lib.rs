//! Benchmark fixture: the tools the benchmark harness (`tests/bench`) measures, the same ones its
//! native `rmcp` baseline serves.
//!
//! - `echo {text}` sends the text back;
//! - `wait {ms}` sleeps on the WASI monotonic clock, then answers `waited`;
//! - `state {text}` (only with `BENCH_STATE` set) writes the text to durable state
//!   (`wasi:keyvalue`, bucket `default`) and reads it back, answering what it read;
//! - `get {url}` (only with `BENCH_HTTP` set) sends `GET url` (through `wasi:http`, as the manifest grants) and answers the
//!   body, or an error naming a status other than 200 (mcpbox-only: the native baseline has
//!   no such tool);
//! - `tool_0000` … : `BENCH_TOOLS` more echo tools, for measuring long lists.
//!
//! Every name is prefixed with `BENCH_PREFIX`, so that many copies of this one plugin can be
//! loaded side by side without their names colliding. Both variables come from the plugin's
//! manifest (`[env]`); without one, there is no prefix and no extra tool.

use std::time::Duration;

use mcpbox_sdk::state::{StateError, Store};
use mcpbox_sdk::{Deserialize, JsonSchema, Plugin, Tool, Tools};

/// Arguments of `echo` and the generated tools.
#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to send back.
    text: String,
}

/// Arguments of `wait`.
#[derive(Clone, Copy, Deserialize, JsonSchema)]
struct WaitArgs {
    /// How long to sleep, in milliseconds (at most 10,000).
    ms: u32,
}

fn wait(args: WaitArgs) -> Result<&'static str, String> {
    if args.ms > 10_000 {
        return Err(format!("{} ms is over the 10,000 ms maximum", args.ms));
    }
    std::thread::sleep(Duration::from_millis(u64::from(args.ms)));
    Ok("waited")
}

/// Arguments of `get`.
#[derive(Deserialize, JsonSchema)]
struct GetArgs {
    /// The URL to fetch.
    url: String,
}

/// `GET url`: the body; any status but 200 (say mcpbox's own 401 for a caller who has not
/// linked the host's provider) is an error naming it.
fn get(GetArgs { url }: GetArgs) -> Result<String, String> {
    let response = mcpbox_sdk::http::get(&url).map_err(|e| e.to_string())?;
    if response.status != 200 {
        return Err(format!("GET {url} answered {}", response.status));
    }
    Ok(response.text())
}

/// One set and one get of the same key: the round trip a stateful tool pays.
fn state(EchoArgs { text }: EchoArgs) -> Result<String, StateError> {
    let store = Store::open_default()?;
    store.set_bytes("bench", text.as_bytes())?;
    let read = store.get_bytes("bench")?.unwrap_or_default();
    Ok(String::from_utf8_lossy(&read).into_owned())
}

struct BenchTools;

impl Plugin for BenchTools {
    fn tools(tools: &mut Tools) {
        let prefix = std::env::var("BENCH_PREFIX").unwrap_or_default();
        let extra = std::env::var("BENCH_TOOLS")
            .ok()
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0);
        tools
            .add(
                Tool::new(format!("{prefix}echo"), "Send the text back unchanged").read_only(true),
                |args: EchoArgs| args.text,
            )
            .add(
                Tool::new(format!("{prefix}wait"), "Sleep for `ms` milliseconds").read_only(true),
                wait,
            );
        if std::env::var_os("BENCH_HTTP").is_some() {
            tools.add(
                Tool::new(format!("{prefix}get"), "GET a URL and answer its body").read_only(true),
                get,
            );
        }
        if std::env::var_os("BENCH_STATE").is_some() {
            tools.add(
                Tool::new(
                    format!("{prefix}state"),
                    "Write the text to state and read it back",
                ),
                state,
            );
        }
        for i in 0..extra {
            tools.add(
                Tool::new(
                    format!("{prefix}tool_{i:04}"),
                    format!("Generated tool {i}: send the text back unchanged"),
                )
                .read_only(true),
                |args: EchoArgs| args.text,
            );
        }
    }
}

mcpbox_sdk::export!(BenchTools);
