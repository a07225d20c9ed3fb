//! Test fixture: a WASI 0.3 plugin (`mcpbox:plugin@0.3.0`). Well-behaved tools (echo, a
//! streamed count, concurrent fetches, the caller, a note in durable state), a prompt, a resource and a completion,
//! and hostile tools: one that awaits forever, one that spawns thousands of futures, one that
//! holds its stream open, one that drops a write midway, one that streams a large text over
//! and over, one that asks the client many questions at once, one that burns fuel, one that grows
//! its memory, one that leaves a task running after it answers.

use futures::FutureExt as _;
use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use mcpbox_sdk::p3::bindings::wasi::http::types::ErrorCode;
use mcpbox_sdk::p3::bindings::wit_future;
use mcpbox_sdk::p3::{Output, Plugin, Tools};
use mcpbox_sdk::serde_json::json;
use mcpbox_sdk::{
    Completions, Deserialize, JsonSchema, NoArgs, Prompt, PromptMessage, Prompts, ResourceInfo,
    Resources, Tool,
};

/// Arguments of `echo`.
#[derive(Deserialize, JsonSchema)]
struct Text {
    /// What to echo.
    text: String,
}

/// Arguments of `count`, `spawn_many` and `grow`.
#[derive(Deserialize, JsonSchema)]
struct Count {
    /// How many.
    n: u32,
}

/// Arguments of `flood`.
#[derive(Deserialize, JsonSchema)]
struct Flood {
    /// The size of the text, in KiB.
    kib: usize,
    /// How many times to stream it.
    n: u32,
}

/// Arguments of `fetch_all`.
#[derive(Deserialize, JsonSchema)]
struct Urls {
    /// The URLs to fetch, all at once.
    urls: Vec<String>,
}

async fn echo(args: Text, _out: Output) -> String {
    args.text
}

/// Streams `1`..=`n`, then says it counted.
async fn count(args: Count, mut out: Output) -> Result<String, String> {
    for i in 1..=args.n {
        out.text(i.to_string()).await?;
    }
    Ok(format!("counted to {}", args.n))
}

/// Fetches every URL at once; streams each answer as it comes.
async fn fetch_all(args: Urls, mut out: Output) -> Result<String, String> {
    let mut pending: FuturesUnordered<_> = args
        .urls
        .iter()
        .map(|url| async move { (url.clone(), mcpbox_sdk::p3::http::get(url).await) })
        .collect();
    let mut ok = 0;
    while let Some((url, reply)) = pending.next().await {
        let line = match reply {
            Ok(reply) => {
                ok += 1;
                format!(
                    "{url}: {} {}",
                    reply.status,
                    String::from_utf8_lossy(&reply.body)
                )
            }
            Err(e) => format!("{url}: failed: {e}"),
        };
        out.text(line).await?;
    }
    Ok(format!("{ok} of {} fetched", args.urls.len()))
}

/// A future nothing ever completes: it holds its writer.
async fn never() {
    let (writer, reader) = wit_future::new::<Result<(), ErrorCode>>(|| Ok(()));
    let _ = reader.await;
    drop(writer);
}

async fn wait_forever(_: NoArgs, _out: Output) -> String {
    never().await;
    "woke up".to_owned()
}

/// Spawns `n` tasks, each awaiting a future nothing completes.
async fn spawn_many(args: Count, _out: Output) -> String {
    for _ in 0..args.n {
        drop(mcpbox_sdk::p3::spawn(never()));
    }
    never().await;
    "all spawned".to_owned()
}

/// Streams one item, then holds the stream open without ever answering.
async fn hold_stream(_: NoArgs, mut out: Output) -> String {
    let _ = out.text("first").await;
    never().await;
    "never".to_owned()
}

/// Streams the same `kib` KiB of text `n` times: each write costs the plugin little, and the
/// host a copy.
async fn flood(args: Flood, mut out: Output) -> Result<String, String> {
    let text = "x".repeat(args.kib * 1024);
    for _ in 0..args.n {
        out.text(text.clone()).await?;
    }
    Ok("flooded".to_owned())
}

/// Asks the client `n` questions at once; the first answer or refusal is the result.
async fn ask_many(args: Count, _out: Output) -> Result<String, String> {
    let question = json!({"message": "?", "requestedSchema": {"type": "object", "properties": {}}});
    let mut asked: FuturesUnordered<_> = (0..args.n)
        .map(|_| mcpbox_sdk::p3::host::elicit(&question))
        .collect();
    match asked.next().await {
        Some(Ok(answer)) => Ok(answer.to_string()),
        Some(Err(refused)) => Ok(refused),
        None => Err("asked nothing".to_owned()),
    }
}

/// Starts a write, drops it midway, then answers.
async fn drop_mid_write(_: NoArgs, mut out: Output) -> String {
    let _ = out.text("x".repeat(1 << 16)).now_or_never();
    drop(out);
    "answered after a dropped write".to_owned()
}

/// Reports its own progress (10, 20, 30 of 30) and streams an item after each report.
async fn steps(_: NoArgs, mut out: Output) -> Result<String, String> {
    for i in 1..=3u32 {
        mcpbox_sdk::p3::host::progress(f64::from(i * 10), Some(30.0), Some(&format!("step {i}")));
        out.text(format!("item {i}")).await?;
    }
    Ok("stepped".to_owned())
}

async fn burn(_: NoArgs, _out: Output) -> String {
    let mut x: u64 = 1;
    loop {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        if x == 0 {
            break;
        }
    }
    x.to_string()
}

async fn grow(args: Count, _out: Output) -> String {
    let held = vec![1u8; (args.n as usize) << 20];
    std::hint::black_box(&held);
    format!("grew {} MiB", args.n)
}

/// Calls this instance has served: a fresh instance per call keeps it at one.
static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

async fn calls(_: NoArgs, _out: Output) -> String {
    (CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1).to_string()
}

/// Answers, leaving a task behind that never ends.
async fn linger(_: NoArgs, _out: Output) -> String {
    CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    drop(mcpbox_sdk::p3::spawn(never()));
    "lingering".to_owned()
}

/// Appends `text` to the list kept under `notes` in the default bucket: the whole list.
async fn note(args: Text, _out: Output) -> Result<String, String> {
    let store = mcpbox_sdk::state::Store::open_default().map_err(|e| e.to_string())?;
    let mut notes: Vec<String> = store
        .get("notes")
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    notes.push(args.text);
    store.set("notes", &notes).map_err(|e| e.to_string())?;
    Ok(notes.join(","))
}

async fn who(_: NoArgs, _out: Output) -> String {
    match mcpbox_sdk::p3::caller() {
        Some(caller) => json!({ "id": caller.id, "all_scopes": caller.all_scopes }).to_string(),
        None => json!({ "caller": null }).to_string(),
    }
}

/// Arguments of the `greet` prompt.
#[derive(Deserialize, JsonSchema)]
struct Greet {
    /// Whom to greet.
    name: String,
}

struct Probe;

impl Plugin for Probe {
    fn tools(tools: &mut Tools) {
        tools
            .add(Tool::new("echo3", "Echo the text"), echo)
            .add(Tool::new("count", "Stream 1..=n"), count)
            .add(Tool::new("steps", "Report progress and stream"), steps)
            .add(Tool::new("fetch_all", "Fetch URLs at once"), fetch_all)
            .add(Tool::new("wait_forever", "Await forever"), wait_forever)
            .add(Tool::new("spawn_many", "Spawn n futures"), spawn_many)
            .add(
                Tool::new("hold_stream", "Hold the stream open"),
                hold_stream,
            )
            .add(Tool::new("drop_mid_write", "Drop a write"), drop_mid_write)
            .add(Tool::new("flood", "Stream one text n times"), flood)
            .add(Tool::new("ask_many", "Ask n questions at once"), ask_many)
            .add(Tool::new("burn3", "Burn fuel"), burn)
            .add(Tool::new("grow3", "Grow memory"), grow)
            .add(Tool::new("who3", "Who calls"), who)
            .add(Tool::new("calls3", "Calls this instance served"), calls)
            .add(Tool::new("linger", "Leave a task running"), linger)
            .add(Tool::new("note3", "Keep a note in state"), note);
    }

    fn prompts(prompts: &mut Prompts) {
        prompts.add(Prompt::new("greet3", "Greet someone"), |args: Greet| {
            vec![PromptMessage::user(format!("Say hello to {}.", args.name))]
        });
    }

    fn resources(resources: &mut Resources) {
        resources.add(
            ResourceInfo::new("probe3://hello", "hello"),
            || "hello from 0.3",
        );
    }

    fn completions(completions: &mut Completions) {
        completions.prompt_argument("greet3", "name", |prefix: &str| {
            ["Ada", "Alan", "Grace"]
                .into_iter()
                .filter(|n| n.starts_with(prefix))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        });
    }
}

mcpbox_sdk::p3::export!(Probe);
