//! Test fixture: a plugin built against the earlier `wasi:keyvalue@0.2.0-draft` (as wasmtime's
//! and wasmCloud's toolchains use it), with no SDK. Its one tool, `hits`, increments the key
//! `hits` in the bucket `default` and answers `<count> <keys>` (the keys from `list-keys`).
//! With an `op` argument it does something else instead: `set` the key `hits` to `value`,
//! `get` it, `fill` `n` keys `k00000`…, or `count` every key by paging with the draft's
//! numeric cursors (`<keys> keys, <distinct> distinct, <pages> pages`).

#![allow(
    unsafe_code,
    reason = "the export glue wit-bindgen generates in this crate is unsafe"
)]

#[allow(missing_docs, reason = "generated bindings")]
mod bindings {
    wit_bindgen::generate!({
        inline: "
            package test:fixture;
            world kv-draft {
                import wasi:keyvalue/store@0.2.0-draft;
                import wasi:keyvalue/atomics@0.2.0-draft;
                export mcpbox:plugin/tools@0.1.0;
            }
        ",
        path: ["../../../wit", "../../../host/wit/keyvalue-draft"],
        world: "test:fixture/kv-draft",
        generate_all,
    });
}

use bindings::exports::mcpbox::plugin::tools::{Error, Guest, Tool, ToolResult};
use bindings::mcpbox::plugin::types::Content;
use bindings::wasi::keyvalue0_2_0_draft::{atomics, store};

struct KvDraft;

fn describe(error: &store::Error) -> String {
    match error {
        store::Error::NoSuchStore => "no such store".to_owned(),
        store::Error::AccessDenied => "access denied".to_owned(),
        store::Error::Other(message) => message.clone(),
    }
}

impl Guest for KvDraft {
    fn list_tools() -> Vec<Tool> {
        vec![Tool {
            name: "hits".to_owned(),
            title: None,
            description: "Count a hit".to_owned(),
            input_schema: r#"{"type":"object"}"#.to_owned(),
            output_schema: None,
            annotations: None,
        }]
    }

    fn call_tool(_name: String, arguments: String) -> Result<ToolResult, Error> {
        let arguments: serde_json::Value = serde_json::from_str(&arguments).unwrap_or_default();
        let op = arguments["op"].as_str().unwrap_or("increment").to_owned();
        let answer = store::open("default")
            .and_then(|bucket| match op.as_str() {
                "set" => {
                    let value = arguments["value"].as_str().unwrap_or_default();
                    bucket.set("hits", value.as_bytes())?;
                    Ok("ok".to_owned())
                }
                "get" => Ok(bucket.get("hits")?.map_or("null".to_owned(), |v| {
                    String::from_utf8_lossy(&v).into_owned()
                })),
                "fill" => {
                    for i in 0..arguments["n"].as_u64().unwrap_or(1) {
                        bucket.set(&format!("k{i:05}"), b"v")?;
                    }
                    Ok("ok".to_owned())
                }
                "count" => {
                    let (mut cursor, mut pages, mut all) = (None, 0, Vec::new());
                    loop {
                        let page = bucket.list_keys(cursor)?;
                        pages += 1;
                        all.extend(page.keys);
                        match page.cursor {
                            Some(next) => cursor = Some(next),
                            None => break,
                        }
                    }
                    let total = all.len();
                    all.sort();
                    all.dedup();
                    Ok(format!(
                        "{total} keys, {} distinct, {pages} pages",
                        all.len()
                    ))
                }
                _ => {
                    let count = atomics::increment(&bucket, "hits", 1)?;
                    let keys = bucket.list_keys(None)?.keys.join(",");
                    Ok(format!("{count} {keys}"))
                }
            })
            .map_err(|e| describe(&e));
        Ok(match answer {
            Ok(text) => ToolResult {
                content: vec![Content::Text(text)],
                structured: None,
                is_error: false,
            },
            Err(text) => ToolResult {
                content: vec![Content::Text(text)],
                structured: None,
                is_error: true,
            },
        })
    }
}

bindings::export!(KvDraft with_types_in bindings);
