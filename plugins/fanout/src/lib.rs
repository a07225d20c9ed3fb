//! Fetch several URLs at once and stream what each says as it arrives: a WASI 0.3 plugin
//! (`mcpbox:plugin@0.3.0`). Every request is in flight together, within the hosts its
//! manifest grants; each answer reaches the client as soon as it comes (a progress
//! notification) and the result lists them all, then a summary. `plugins/fanout-p2` is the
//! same tool on 0.2, where the requests go one after the other.

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use mcpbox_sdk::p3::{Output, Plugin, Tools};
use mcpbox_sdk::{Deserialize, JsonSchema, Tool};

/// Arguments of `fetch_all`.
#[derive(Deserialize, JsonSchema)]
struct Urls {
    /// The URLs to fetch (`http://` or `https://`), all at once.
    urls: Vec<String>,
}

/// What one answer says, in a line: its status, size and first line of text.
fn summary(url: &str, answer: Result<mcpbox_sdk::p3::http::Reply, String>) -> (bool, String) {
    match answer {
        Ok(reply) => {
            let text = String::from_utf8_lossy(&reply.body);
            let first = text.lines().next().unwrap_or("").chars().take(120);
            (
                true,
                format!(
                    "{url}: {} ({} bytes) {}",
                    reply.status,
                    reply.body.len(),
                    first.collect::<String>()
                ),
            )
        }
        Err(e) => (false, format!("{url}: failed: {e}")),
    }
}

async fn fetch_all(args: Urls, mut out: Output) -> Result<String, String> {
    let mut pending: FuturesUnordered<_> = args
        .urls
        .iter()
        .map(|url| async move { (url, mcpbox_sdk::p3::http::get(url).await) })
        .collect();
    let mut fetched = 0;
    while let Some((url, answer)) = pending.next().await {
        let (ok, line) = summary(url, answer);
        fetched += usize::from(ok);
        out.text(line).await?;
    }
    Ok(format!("{fetched} of {} fetched", args.urls.len()))
}

struct Fanout;

impl Plugin for Fanout {
    fn tools(tools: &mut Tools) {
        tools.add(
            Tool::new(
                "fetch_all",
                "Fetch several URLs at once; stream each answer as it comes",
            )
            .read_only(true),
            fetch_all,
        );
    }
}

mcpbox_sdk::p3::export!(Fanout);
