//! Test fixture for plugins that serve many users: says who is calling, reads its
//! configuration, and keeps notes in a caller bucket (`mine`) beside a shared one (`shared`).
//! For instances kept per caller, it also holds memory, leaks handles and panics on request.

use mcpbox_sdk::serde_json::json;
use mcpbox_sdk::state::Store;
use mcpbox_sdk::{CallerKind, Deserialize, JsonSchema, NoArgs, Plugin, Tool, Tools};

/// Arguments of `config_get`.
#[derive(Deserialize, JsonSchema)]
struct Key {
    /// The configuration key.
    key: String,
}

/// Arguments of `remember`.
#[derive(Deserialize, JsonSchema)]
struct Note {
    /// What to remember.
    text: String,
}

/// Calls this instance has served: a fresh instance per call keeps it at one.
static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Memory `hold` keeps for the instance's life.
static HELD: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

/// Arguments of `hold` and `leak_buckets`.
#[derive(Deserialize, JsonSchema)]
struct Count {
    /// How many (MiB, buckets).
    count: u32,
}

/// Keep `count` MiB (touched) in the instance's memory.
fn hold(Count { count }: Count) -> String {
    let mib = vec![1u8; (count as usize) << 20];
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(mib);
    "held".to_owned()
}

/// Open the caller bucket `mine` `count` times and never close it: `count` handles leaked.
fn leak_buckets(Count { count }: Count) -> Result<String, String> {
    for _ in 0..count {
        std::mem::forget(Store::open("mine").map_err(|e| e.to_string())?);
    }
    Ok("leaked".to_owned())
}

fn fail(_: NoArgs) -> String {
    panic!("asked to fail")
}

fn whoami(_: NoArgs) -> String {
    let calls = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let Some(caller) = mcpbox_sdk::caller() else {
        return json!({ "caller": null }).to_string();
    };
    let kind = match caller.kind {
        CallerKind::Local => "local",
        CallerKind::Token => "token",
        CallerKind::Oauth => "oauth",
    };
    json!({
        "id": caller.id,
        "kind": kind,
        "name": caller.name,
        "scopes": caller.scopes,
        "all_scopes": caller.all_scopes,
        "admin": caller.has_scope("admin"),
        "calls_in_this_instance": calls,
    })
    .to_string()
}

fn config_get(Key { key }: Key) -> Result<String, String> {
    let value = mcpbox_sdk::config::get(&key).map_err(|e| e.to_string())?;
    Ok(json!({ "key": key, "value": value }).to_string())
}

fn config_keys(_: NoArgs) -> Result<String, String> {
    let mut keys: Vec<String> = mcpbox_sdk::config::all()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    keys.sort();
    Ok(json!(keys).to_string())
}

/// Keep a note in the caller's own bucket, and count it in the shared one.
fn remember(Note { text }: Note) -> Result<String, String> {
    let mine = Store::open("mine").map_err(|e| e.to_string())?;
    let n = mine.increment("count", 1).map_err(|e| e.to_string())?;
    mine.set(&format!("note:{n:06}"), &text)
        .map_err(|e| e.to_string())?;
    let shared = Store::open("shared").map_err(|e| e.to_string())?;
    let total = shared.increment("notes", 1).map_err(|e| e.to_string())?;
    Ok(json!({ "mine": n, "everyone": total }).to_string())
}

/// The caller's notes.
fn recall(_: NoArgs) -> Result<String, String> {
    let mine = Store::open("mine").map_err(|e| e.to_string())?;
    let mut notes = Vec::new();
    for key in mine.keys("note:").map_err(|e| e.to_string())? {
        let text: Option<String> = mine.get(&key).map_err(|e| e.to_string())?;
        notes.extend(text);
    }
    Ok(json!(notes).to_string())
}

struct CallerProbe;

impl Plugin for CallerProbe {
    fn tools(tools: &mut Tools) {
        tools
            .add(Tool::new("whoami", "Who is calling"), whoami)
            .add(
                Tool::new("config_get", "One configuration value"),
                config_get,
            )
            .add(
                Tool::new("config_keys", "The configuration keys that have a value"),
                config_keys,
            )
            .add(
                Tool::new("remember", "Keep a note of the caller's own"),
                remember,
            )
            .add(Tool::new("recall", "The caller's notes"), recall)
            .add(Tool::new("hold", "Keep this many MiB in memory"), hold)
            .add(
                Tool::new(
                    "leak_buckets",
                    "Open the bucket `mine` this many times, never closing it",
                ),
                leak_buckets,
            )
            .add(Tool::new("fail", "Panic"), fail);
    }
}

mcpbox_sdk::export!(CallerProbe);
