//! The `fanout` part: why WASI 0.3 (issue #59). One `tools/call` of `fetch_all` with N URLs,
//! each answered by a loopback upstream after [`DELAY`], against `plugins/fanout` (a 0.3
//! component: every request in flight at once, each answer streamed as it comes) and
//! `plugins/fanout-p2` (the same tool on 0.2: one request after the other), in two mcpbox
//! processes over stdio, sequential calls. Reported: the call's wall time (median), the
//! instance time it holds (one instance for the whole call, so the same figure: what the
//! pool lends per call), and each server's resident memory at its peak after the runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};

use axum::Router;
use serde_json::json;

use crate::report::{Report, Row, median};
use crate::server::{Server, Transport};
use crate::{Bench, Sizes};

/// How long the upstream takes to answer each request.
const DELAY: Duration = Duration::from_millis(200);

pub async fn fanout_rows(
    report: &mut Report,
    bench: &Bench,
    sizes: &Sizes,
    plugins: &Path,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let upstream = Router::new().fallback(async || {
            tokio::time::sleep(DELAY).await;
            "upstream ok"
        });
        let _ = axum::serve(listener, upstream).await;
    });
    let v3 = plugin_dir(bench, plugins, "fanout", port)?;
    let v2 = plugin_dir(bench, plugins, "fanout_p2", port)?;
    report.section_between(
        format!(
            "WASI 0.3 (plugins/fanout) against 0.2 (plugins/fanout-p2): one tools/call fetching N \
             loopback URLs that each answer after {} ms (stdio, sequential calls)",
            DELAY.as_millis()
        ),
        "0.2",
        "0.3",
    );
    let calls = (sizes.reloads).max(3);
    let v2_server =
        Server::start(&bench.mcpbox(&v2, Transport::Stdio, &[]), Transport::Stdio).await?;
    let v3_server =
        Server::start(&bench.mcpbox(&v3, Transport::Stdio, &[]), Transport::Stdio).await?;
    v2_server.initialize().await?;
    v3_server.initialize().await?;
    for n in [1usize, 4, 16] {
        let urls: Vec<String> = (0..n)
            .map(|i| format!("http://127.0.0.1:{port}/{i}"))
            .collect();
        let mut times = [Vec::new(), Vec::new()];
        for (server, times) in [&v2_server, &v3_server].into_iter().zip(&mut times) {
            let conn = &server.conn;
            let expected = format!("{n} of {n} fetched");
            for i in 0..=calls {
                let started = Instant::now();
                let result = conn
                    .request(
                        "tools/call",
                        json!({"name": "fetch_all", "arguments": {"urls": urls}}),
                    )
                    .await?;
                let elapsed = started.elapsed();
                let last = result["content"]
                    .as_array()
                    .and_then(|c| c.last())
                    .and_then(|c| c["text"].as_str())
                    .unwrap_or_default()
                    .to_owned();
                ensure!(last == expected, "fetch_all answered {result}");
                // The first call compiles nothing (the cache is warm) but opens connections.
                if i > 0 {
                    times.push(elapsed.as_secs_f64() * 1000.0);
                }
            }
        }
        let [v2_ms, v3_ms] = times.map(|t| median(&t));
        report.push(Row::new(
            format!("{n} URLs: call wall time (median)"),
            "ms",
            Some(v2_ms),
            v3_ms,
        ));
        report.push(Row::new(
            format!("{n} URLs: instance time held per call (1 instance)"),
            "ms",
            Some(v2_ms),
            v3_ms,
        ));
    }
    let (v2_memory, v3_memory) = (v2_server.memory()?, v3_server.memory()?);
    report.push(Row::new(
        "server resident memory at its peak, after the runs",
        "MiB",
        Some(v2_memory.peak as f64 / f64::from(1 << 20)),
        v3_memory.peak as f64 / f64::from(1 << 20),
    ));
    v2_server.stop().await;
    v3_server.stop().await;
    Ok(())
}

/// A plugin directory holding `plugin` (from `plugins`), granted the upstream on `port`.
fn plugin_dir(bench: &Bench, plugins: &Path, plugin: &str, port: u16) -> anyhow::Result<PathBuf> {
    let dir = bench.work.join(format!("fanout-{plugin}"));
    std::fs::create_dir_all(&dir)?;
    let source = plugins.join(format!("{plugin}.wasm"));
    std::fs::copy(&source, dir.join(format!("{plugin}.wasm")))
        .with_context(|| format!("copying {}", source.display()))?;
    std::fs::write(
        dir.join(format!("{plugin}.toml")),
        format!("[http]\nallow = [\"127.0.0.1:{port}\"]\n"),
    )?;
    Ok(dir)
}
