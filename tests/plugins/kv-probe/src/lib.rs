//! Test fixture: every `wasi:keyvalue` operation as one tool, `kv`, with whatever bucket, key
//! and value a test crafts, so tests can probe grants, namespaces, quotas and concurrency.
//! Answers are JSON text; failures are `isError` results carrying the host's error text. The
//! tool is named by the `KV_TOOL` environment variable when the manifest grants one, so
//! copies of this plugin under several names offer distinct tools.

use mcpbox_sdk::state::Store;
use mcpbox_sdk::{Deserialize, JsonSchema, Plugin, Tool, Tools, serde_json};

/// Arguments of `kv`.
#[derive(Deserialize, JsonSchema)]
struct KvArgs {
    /// get, set, delete, exists, keys, increment, update, get_many, increments, open_many,
    /// fill, page, delete_many, drain, walk
    op: String,
    /// The bucket (default `default`).
    bucket: Option<String>,
    /// The key.
    #[serde(default)]
    key: String,
    /// The value to set (a JSON string value).
    value: Option<String>,
    /// Instead of `value`: a value of this many bytes.
    size: Option<u32>,
    /// For increment.
    delta: Option<i64>,
    /// For get_many and delete_many; for keys, the prefix is `key`.
    #[serde(default)]
    keys: Vec<String>,
    /// For page: the cursor.
    cursor: Option<String>,
}

fn kv(args: KvArgs) -> Result<String, String> {
    let store =
        Store::open(args.bucket.as_deref().unwrap_or("default")).map_err(|e| e.to_string())?;
    let key = args.key.as_str();
    let answer = match args.op.as_str() {
        "get" => serde_json::json!(
            store
                .get_bytes(key)
                .map_err(|e| e.to_string())?
                .map(|v| String::from_utf8_lossy(&v).into_owned())
        ),
        "set" => {
            let value = match args.size {
                Some(n) => vec![b'x'; n as usize],
                None => args.value.unwrap_or_default().into_bytes(),
            };
            store.set_bytes(key, &value).map_err(|e| e.to_string())?;
            serde_json::json!("ok")
        }
        "delete" => {
            store.delete(key).map_err(|e| e.to_string())?;
            serde_json::json!("ok")
        }
        "exists" => serde_json::json!(store.exists(key).map_err(|e| e.to_string())?),
        "keys" => serde_json::json!(store.keys(key).map_err(|e| e.to_string())?),
        "increment" => serde_json::json!(
            store
                .increment(key, args.delta.unwrap_or(1))
                .map_err(|e| e.to_string())?
        ),
        // Append "+" to a JSON string value by compare-and-swap.
        "update" => serde_json::json!(
            store
                .update(key, |v: Option<String>| Some(format!(
                    "{}+",
                    v.unwrap_or_default()
                )))
                .map_err(|e| e.to_string())?
        ),
        // `delta` increments of `key`, one host call each (to be interrupted).
        "increments" => {
            let n = args.delta.unwrap_or(1);
            for i in 0..n {
                if let Err(e) = store.increment(key, 1) {
                    return Err(format!("after {i} increments: {e}"));
                }
            }
            serde_json::json!(n)
        }
        // Open `delta` more bucket handles, keeping them all.
        "open_many" => {
            let mut open = Vec::new();
            for i in 0..args.delta.unwrap_or(1) {
                match Store::open(store.name()) {
                    Ok(s) => open.push(s),
                    Err(e) => return Err(format!("after {i} more handles: {e}")),
                }
            }
            serde_json::json!(open.len())
        }
        "get_many" => serde_json::json!(
            store
                .get_many::<serde_json::Value>(&args.keys)
                .map_err(|e| e.to_string())?
        ),
        // `delta` keys `<key>00000`, `<key>00001`, …, one host call each.
        "fill" => {
            for i in 0..args.delta.unwrap_or(1) {
                store
                    .set_bytes(&format!("{key}{i:05}"), b"v")
                    .map_err(|e| format!("after {i} keys: {e}"))?;
            }
            serde_json::json!("ok")
        }
        // One page after `cursor`.
        "page" => {
            let page = store
                .keys_page(args.cursor.as_deref())
                .map_err(|e| e.to_string())?;
            serde_json::json!({"keys": page.keys, "cursor": page.cursor})
        }
        "delete_many" => {
            store.delete_many(&args.keys).map_err(|e| e.to_string())?;
            serde_json::json!("ok")
        }
        // Page by page, each page deleted with one delete-many before the next is read.
        "drain" => {
            let (mut cursor, mut pages, mut largest, mut deleted) = (None, 0, 0, 0);
            loop {
                let page = store
                    .keys_page(cursor.as_deref())
                    .map_err(|e| format!("page {pages}: {e}"))?;
                pages += 1;
                largest = largest.max(page.keys.len());
                deleted += page.keys.len();
                store
                    .delete_many(&page.keys)
                    .map_err(|e| format!("deleting page {pages}: {e}"))?;
                match page.cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            serde_json::json!({"pages": pages, "largest": largest, "deleted": deleted})
        }
        // Every page: how many keys, how many distinct, how many pages, the largest.
        "walk" => {
            let (mut cursor, mut pages, mut largest) = (None, 0, 0);
            let mut all = Vec::new();
            loop {
                let page = store
                    .keys_page(cursor.as_deref())
                    .map_err(|e| format!("page {pages}: {e}"))?;
                pages += 1;
                largest = largest.max(page.keys.len());
                all.extend(page.keys);
                match page.cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            let total = all.len();
            all.sort();
            all.dedup();
            serde_json::json!({"keys": total, "distinct": all.len(), "pages": pages, "largest": largest})
        }
        other => return Err(format!("unknown op {other}")),
    };
    Ok(answer.to_string())
}

struct Probe;

impl Plugin for Probe {
    fn tools(tools: &mut Tools) {
        let name = std::env::var("KV_TOOL").unwrap_or_else(|_| "kv".to_owned());
        tools.add(Tool::new(name, "One key-value operation"), kv);
    }
}

mcpbox_sdk::export!(Probe);
