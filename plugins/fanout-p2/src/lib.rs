//! `plugins/fanout` on WASI 0.2 (`mcpbox:plugin@0.1.0`): the same tool, the same answer, but
//! a 0.2 plugin's calls block, so the URLs are fetched one after the other and nothing
//! reaches the client before the whole result. The benchmark compares the two.

use mcpbox_sdk::{Content, Deserialize, JsonSchema, Plugin, Tool, ToolResult, Tools};

/// Arguments of `fetch_all`.
#[derive(Deserialize, JsonSchema)]
struct Urls {
    /// The URLs to fetch (`http://` or `https://`), one after the other.
    urls: Vec<String>,
}

fn fetch_all(Urls { urls }: Urls) -> ToolResult {
    let mut lines = Vec::new();
    let mut fetched = 0;
    for url in &urls {
        lines.push(match mcpbox_sdk::http::get(url) {
            Ok(reply) => {
                fetched += 1;
                let text = reply.text();
                let first: String = text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .chars()
                    .take(120)
                    .collect();
                format!(
                    "{url}: {} ({} bytes) {first}",
                    reply.status,
                    reply.body.len()
                )
            }
            Err(e) => format!("{url}: failed: {e}"),
        });
    }
    lines.push(format!("{fetched} of {} fetched", urls.len()));
    ToolResult {
        content: lines.into_iter().map(Content::text).collect(),
        structured: None,
        is_error: false,
    }
}

struct Fanout;

impl Plugin for Fanout {
    fn tools(tools: &mut Tools) {
        tools.add(
            Tool::new("fetch_all", "Fetch several URLs one after the other").read_only(true),
            fetch_all,
        );
    }
}

mcpbox_sdk::export!(Fanout);
