//! The `principals` part: budgets per caller, over Streamable HTTP at 2026-07-28.
//!
//! - **Their cost on the call path.** The HTTP load suite against two mcpbox processes: one
//!   without authentication (the local user, whose budgets are skipped) and one naming a static
//!   token (`[tokens.bench]`) whose budget is too generous ever to refuse, the client sending
//!   that token. Every request to the second passes the budgets: a token of the rate taken, its
//!   bytes and its plugin call counted and given back.
//! - **One caller at its limit, another's latency.** One mcpbox naming two tokens. Alice keeps
//!   her 16 plugin calls running (`wait`) and floods further `echo` calls, each of which must be
//!   refused at once (429, `Retry-After`, the JSON-RPC error -32029 naming her calls budget);
//!   meanwhile bob's sequential `echo` round trips are timed, against his round trips on the
//!   same server with alice idle, in alternating turns. Alice runs on a thread and runtime of
//!   her own, as another process would: her tasks never queue ahead of bob's in the client
//!   (they still share the machine's cores with him and the server). Both rates are raised in the
//!   configuration (bob calls back to back, far above the default 50 a second, and alice's
//!   refusals are then all of her calls budget); every other budget is the default.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinSet;

use crate::client::{Conn, HttpStatus};
use crate::report::{Report, Row, percentile};
use crate::server::{Server, Transport};
use crate::{Bench, Driven, Revision, Sizes, TEXT, echo, load_suite, same_server_rows};

/// The static token of the call-path measurement (`[tokens.bench]`).
const BENCH_TOKEN: &str = "mcpbench-bench-token-0123456789abcdef";
/// Alice's token: the caller at her limit.
const ALICE_TOKEN: &str = "mcpbench-alice-token-0123456789abcdef";
/// Bob's token: the caller whose round trips are timed.
const BOB_TOKEN: &str = "mcpbench-bob-token-0123456789abcdef";
/// Alice's budget of plugin calls running at once, set explicitly (the default's value).
const ALICE_CALLS: usize = 16;
/// How many of alice's further calls are in flight at once during her flood.
const FLOOD: usize = 4;
/// The JSON-RPC error of a request refused over a budget.
const OVER_BUDGET: i64 = -32029;
/// How long alice has to reach her limit once her calls are sent.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Both measurements of the part.
pub async fn principals_rows(
    report: &mut Report,
    bench: &Bench,
    sizes: &Sizes,
) -> anyhow::Result<()> {
    cost_rows(report, bench, sizes).await?;
    contention_rows(report, bench, sizes).await
}

/// A configuration file `name` in the work directory naming `tokens` (name, token) by digest,
/// followed by `budgets` (TOML).
fn write_config(
    bench: &Bench,
    name: &str,
    tokens: &[(&str, &str)],
    budgets: &str,
) -> anyhow::Result<PathBuf> {
    let mut text: String = tokens
        .iter()
        .map(|(name, token)| {
            let digest = Sha256::digest(token.as_bytes());
            format!("[tokens.{name}]\nsha256 = \"{digest:x}\"\n\n")
        })
        .collect();
    text.push_str(budgets);
    let path = bench.work.join(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

// ---- the cost on the call path ----

async fn cost_rows(report: &mut Report, bench: &Bench, sizes: &Sizes) -> anyhow::Result<()> {
    let config = write_config(
        bench,
        "budget-cost.toml",
        &[("bench", BENCH_TOKEN)],
        "[budgets.principal.\"token:bench\"]\ncalls = 100000\nrequest_bytes = 1073741824\n\
         rate = 1e9\nburst = 1e9\n",
    )?;
    let config = config.to_string_lossy();
    let local = bench.mcpbox(&bench.one_dir, Transport::Http, &[]);
    let named = bench.mcpbox(&bench.one_dir, Transport::Http, &["--config", &config]);
    let [local, named] = load_suite(
        [
            Driven::new(&local, Revision::V2026),
            Driven::new(&named, Revision::V2026).bearer(BENCH_TOKEN),
        ],
        Transport::Http,
        sizes,
    )
    .await?;
    report.section_between(
        "Budgets per caller: tools/call over HTTP (echo, 2026-07-28), a named caller against \
         the local user",
        "local user (no budget)",
        "token:bench (budgeted)",
    );
    same_server_rows(report, &local, &named);
    Ok(())
}

// ---- one caller at its limit, another's latency ----

async fn contention_rows(report: &mut Report, bench: &Bench, sizes: &Sizes) -> anyhow::Result<()> {
    let budgets = format!(
        "[budgets.principal.\"token:alice\"]\ncalls = {ALICE_CALLS}\nrate = 1e9\nburst = 1e9\n\n\
         [budgets.principal.\"token:bob\"]\nrate = 1e9\nburst = 1e9\n"
    );
    let config = write_config(
        bench,
        "budget-two.toml",
        &[("alice", ALICE_TOKEN), ("bob", BOB_TOKEN)],
        &budgets,
    )?;
    let config = config.to_string_lossy();
    let launch = bench.mcpbox(&bench.one_dir, Transport::Http, &["--config", &config]);
    let server = Server::start(&launch, Transport::Http).await?;
    let alice = caller(&server, ALICE_TOKEN).await?;
    let bob = caller(&server, BOB_TOKEN).await?;
    // Alice's warm-up only; at her limit she has a connection of her own each turn.
    for _ in 0..sizes.warmup {
        echo(&alice).await?;
        echo(&bob).await?;
    }
    let per_turn = sizes.latency.div_ceil(sizes.turns);
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    let mut flood = Flood::default();
    for _ in 0..sizes.turns {
        alone.extend(round_trips(&bob, per_turn).await?);
        let at_limit = AtLimit::start(named(&server, ALICE_TOKEN)?, sizes.hold_ms).await?;
        let timed = round_trips(&bob, per_turn).await;
        flood.absorb(at_limit.stop().await?);
        beside.extend(timed?);
    }
    server.stop().await;
    alone.sort_by(f64::total_cmp);
    beside.sort_by(f64::total_cmp);
    flood.refused_us.sort_by(f64::total_cmp);
    contention_report(report, &alone, &beside, &flood);
    Ok(())
}

/// Another client of `server`, speaking 2026-07-28 with `token` (nothing sent yet).
fn named(server: &Server, token: &str) -> anyhow::Result<Conn> {
    let conn = server.connect()?;
    conn.set_v2026();
    conn.set_bearer(token)?;
    Ok(conn)
}

/// Another client of `server`, speaking 2026-07-28 with `token`, checked with
/// `server/discover`.
async fn caller(server: &Server, token: &str) -> anyhow::Result<Conn> {
    let conn = named(server, token)?;
    conn.initialize()
        .await
        .context("server/discover with a configured token")?;
    Ok(conn)
}

/// `calls` sequential `echo` round trips, µs (unsorted).
async fn round_trips(conn: &Conn, calls: usize) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        echo(conn).await?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(times)
}

/// What alice's flood met, over every turn.
#[derive(Default)]
struct Flood {
    /// Round trips of her refused further calls, µs.
    refused_us: Vec<f64>,
    /// Her further calls admitted after all (one of her held calls had just ended).
    admitted: usize,
    /// Her held calls refused (a further call had the place for a moment), sent again.
    held_refused: usize,
    /// How long she flooded.
    elapsed: Duration,
}

impl Flood {
    /// Add what `other` met.
    fn absorb(&mut self, other: Self) {
        self.refused_us.extend(other.refused_us);
        self.admitted += other.admitted;
        self.held_refused += other.held_refused;
        self.elapsed += other.elapsed;
    }
}

/// Alice at her limit, on a thread and runtime of her own, until stopped.
struct AtLimit {
    stop: Arc<AtomicBool>,
    done: oneshot::Receiver<anyhow::Result<Flood>>,
}

impl AtLimit {
    /// Start alice's held calls and her flood on `alice` (a connection of her own); returns
    /// once a further call of hers has been refused (she is at her limit).
    async fn start(alice: Conn, hold_ms: u64) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(Notify::new());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("building alice's runtime")?;
        let (answer, done) = oneshot::channel();
        let run = alice_at_limit(alice, hold_ms, Arc::clone(&stop), Arc::clone(&refused));
        std::thread::Builder::new()
            .name("alice".to_owned())
            .spawn(move || {
                let _ = answer.send(runtime.block_on(run));
            })
            .context("starting alice's thread")?;
        let at_limit = Self { stop, done };
        if tokio::time::timeout(READY_WITHIN, refused.notified())
            .await
            .is_err()
        {
            // A task that failed says why; otherwise she was never refused.
            at_limit.stop().await?;
            bail!("alice's further calls were not refused within {READY_WITHIN:?}");
        }
        Ok(at_limit)
    }

    /// Stop the flood, let the held calls end: what they met.
    async fn stop(self) -> anyhow::Result<Flood> {
        self.stop.store(true, Ordering::Relaxed);
        self.done
            .await
            .map_err(|_| anyhow!("alice's thread ended without an answer"))?
    }
}

/// Alice's `ALICE_CALLS` held calls and `FLOOD` flooding tasks, until `stop`.
async fn alice_at_limit(
    alice: Conn,
    hold_ms: u64,
    stop: Arc<AtomicBool>,
    refused: Arc<Notify>,
) -> anyhow::Result<Flood> {
    let started = Instant::now();
    let mut held = JoinSet::new();
    for _ in 0..ALICE_CALLS {
        held.spawn(hold(alice.clone(), hold_ms, Arc::clone(&stop)));
    }
    let mut flood = JoinSet::new();
    for _ in 0..FLOOD {
        flood.spawn(flood_calls(
            alice.clone(),
            Arc::clone(&stop),
            Arc::clone(&refused),
        ));
    }
    let mut total = Flood::default();
    while let Some(done) = flood.join_next().await {
        total.absorb(done.context("a flood task panicked")??);
    }
    total.elapsed = started.elapsed();
    while let Some(done) = held.join_next().await {
        total.held_refused += done.context("a held call's task panicked")??;
    }
    Ok(total)
}

/// One of alice's held calls: `wait hold_ms`, sent again as soon as it ends, until `stop`.
/// Returns how many times it was refused (and sent again).
async fn hold(alice: Conn, hold_ms: u64, stop: Arc<AtomicBool>) -> anyhow::Result<usize> {
    let mut refused = 0;
    while !stop.load(Ordering::Relaxed) {
        match alice.call_text("wait", json!({"ms": hold_ms})).await {
            Ok(text) => ensure!(text == "waited", "wait answered {text:?}"),
            Err(error) => {
                check_refusal(&error)?;
                refused += 1;
            }
        }
    }
    Ok(refused)
}

/// Alice's further calls, one after another until `stop`; each refusal is timed and announced
/// on `refused`.
async fn flood_calls(
    alice: Conn,
    stop: Arc<AtomicBool>,
    refused: Arc<Notify>,
) -> anyhow::Result<Flood> {
    let mut flood = Flood::default();
    while !stop.load(Ordering::Relaxed) {
        let start = Instant::now();
        match alice.call_text("echo", json!({"text": TEXT})).await {
            Ok(text) => {
                ensure!(text == TEXT, "echo answered {text:?}");
                flood.admitted += 1;
            }
            Err(error) => {
                let elapsed = start.elapsed();
                check_refusal(&error)?;
                flood.refused_us.push(elapsed.as_secs_f64() * 1e6);
                refused.notify_one();
            }
        }
    }
    Ok(flood)
}

/// Check that `error` is a refusal at alice's calls budget: HTTP 429 with `Retry-After`, and
/// the JSON-RPC error -32029 naming her, the limit and her budget of it.
fn check_refusal(error: &anyhow::Error) -> anyhow::Result<()> {
    let Some(answer) = error.downcast_ref::<HttpStatus>() else {
        bail!("alice's call failed otherwise than by a refusal: {error:#}");
    };
    ensure!(
        answer.status == StatusCode::TOO_MANY_REQUESTS,
        "expected 429 over alice's budget, got {answer}"
    );
    let retry_after: u64 = answer
        .retry_after
        .as_deref()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("a 429 without Retry-After in seconds: {answer}"))?;
    ensure!(retry_after >= 1, "Retry-After {retry_after}: {answer}");
    let message: Value = serde_json::from_str(json_of(&answer.body))
        .with_context(|| format!("the body of a 429 is not JSON: {answer}"))?;
    let error = &message["error"];
    let names_alice = error["message"]
        .as_str()
        .is_some_and(|m| m.contains("token:alice"));
    ensure!(
        error["code"] == OVER_BUDGET
            && error["data"]["limit"] == "calls"
            && error["data"]["budget"] == ALICE_CALLS
            && names_alice,
        "expected the error {OVER_BUDGET} at alice's calls budget of {ALICE_CALLS}: {message}"
    );
    Ok(())
}

/// The JSON of an answer's body: the body, or the last `data:` of an event stream.
fn json_of(body: &str) -> &str {
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .next_back()
        .map_or(body, str::trim)
}

fn contention_report(report: &mut Report, alone: &[f64], beside: &[f64], flood: &Flood) {
    report.section_between(
        format!(
            "Budgets per caller: bob's echo round trips while alice is at her limit of \
             {ALICE_CALLS} calls (HTTP, 2026-07-28)"
        ),
        "alice idle",
        "alice at her limit",
    );
    for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
        report.push(Row::new(
            format!("bob's round trip {name}"),
            "µs",
            Some(percentile(alone, p)),
            percentile(beside, p),
        ));
    }
    let refused = flood.refused_us.len();
    report.push(Row::new(
        format!("alice's further calls refused (429, {FLOOD} in flight)"),
        "calls",
        None,
        refused as f64,
    ));
    report.push(Row::new(
        "alice's refusals a second",
        "/s",
        None,
        refused as f64 / flood.elapsed.as_secs_f64().max(1e-9),
    ));
    for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
        report.push(Row::new(
            format!("alice's refusal round trip {name}"),
            "µs",
            None,
            percentile(&flood.refused_us, p),
        ));
    }
    report.push(Row::new(
        "alice's further calls admitted (a place free for a moment)",
        "calls",
        None,
        flood.admitted as f64,
    ));
    report.push(Row::new(
        "alice's held calls refused and sent again",
        "calls",
        None,
        flood.held_refused as f64,
    ));
}
