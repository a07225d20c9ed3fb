//! `mcpbench`: drives the real mcpbox binary and the native `rmcp` baseline (`native-echo`) from
//! outside, with the same client code, and reports every figure beside the baseline's, with the
//! targets of BENCHMARKS.md. Run it through `tests/bench/run.sh`, which builds everything in
//! release mode first.

#![allow(
    clippy::print_stderr,
    reason = "a command-line tool: its progress and its report go to the terminal"
)]

mod client;
mod report;
mod server;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};
use clap::Parser;
use serde_json::{Value, json};
use tokio::task::JoinSet;

mod brokered;
mod fanout;
mod principals;
mod reference;
mod scale;

use client::Conn;
use report::{Report, Row, Target, median, percentile};
use server::{Launch, Memory, Server, Transport};

/// Command line.
#[derive(Parser)]
#[command(about = "Benchmark mcpbox against a native rmcp server")]
struct Args {
    /// The mcpbox binary (a release build).
    #[arg(long)]
    mcpbox: PathBuf,
    /// The native baseline server (`native-echo`, a release build).
    #[arg(long)]
    native: PathBuf,
    /// The benchmark plugin (`bench_tools.wasm`).
    #[arg(long)]
    plugin: PathBuf,
    /// A second, different plugin (its tools differ), for the reload measurement.
    #[arg(long)]
    alt_plugin: PathBuf,
    /// A scratch directory for plugin directories and caches (emptied first).
    #[arg(long)]
    work: PathBuf,
    /// Where to write the Markdown report (also printed).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Fewer iterations: a quick look, not figures to publish.
    #[arg(long)]
    quick: bool,
    /// The fewest iterations that exercise every part (the test suite's check that the
    /// harness works); the figures mean nothing.
    #[arg(long, conflicts_with = "quick")]
    smoke: bool,
    /// The most replicas the scale-out part puts behind HAProxy (it measures 1 to this many).
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// Where the scale-out part draws its plot (SVG) [default: scale.svg beside --out, or in
    /// the work directory].
    #[arg(long)]
    plot: Option<PathBuf>,
    /// The reference servers' originals, as `run.sh` installs them (`npm/` with Node 22 and the
    /// npm packages, `venv/` with `mcp-server-time`); without them the reference part is
    /// skipped.
    #[arg(long)]
    originals: Option<PathBuf>,
    /// The example plugins' directory (`target/plugins`, with their manifests), for the
    /// reference part.
    #[arg(long)]
    examples: Option<PathBuf>,
    /// Where `fanout.wasm` and `fanout_p2.wasm` are (`target/bench-plugins`), for the fanout
    /// part; without it the part is skipped.
    #[arg(long)]
    fanout_plugins: Option<PathBuf>,
    /// Run only these parts (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Part>,
}

/// The parts of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    /// tools/call over stdio.
    Stdio,
    /// tools/call over Streamable HTTP.
    Http,
    /// Start-up and memory per plugin.
    Startup,
    /// tools/list over 1,000 tools.
    List,
    /// Hot reload.
    Reload,
    /// Durable plugin state (`wasi:keyvalue`): embedded and Redis.
    State,
    /// Replicas behind HAProxy (needs `haproxy` installed).
    Scale,
    /// Budgets per caller over HTTP: their cost on the call path, and one caller at its limit
    /// beside another.
    Principals,
    /// The reference servers' originals against their plugins.
    Reference,
    /// A plugin's request to a host granted as the caller (the token attached) against the
    /// same request granted plainly: embedded and Redis.
    Brokered,
    /// One call fetching N slow loopback URLs: a WASI 0.3 plugin (at once) against the same
    /// tool on 0.2 (one after the other).
    Fanout,
}

/// How many iterations each measurement takes.
struct Sizes {
    warmup: usize,
    latency: usize,
    throughput: usize,
    waits: usize,
    starts: usize,
    reloads: usize,
    lists: usize,
    /// How long each of the budgets part's held calls (`wait`) lasts, ms.
    hold_ms: u64,
    /// How many plugins the "many plugins" start-up loads.
    many: usize,
    /// How many turns each server takes at each measurement: the servers alternate, so a
    /// change in the machine's load during the run falls on both alike. The smoke run takes
    /// one: it checks that every part works, not what it measures.
    turns: usize,
    /// How long both servers sit idle before their idle memory is read. The smoke run reads
    /// it at once (about 15 s less over its sections).
    idle: Duration,
}

impl Sizes {
    fn new(args: &Args) -> Self {
        if args.smoke {
            Self {
                warmup: 5,
                latency: 20,
                throughput: 64,
                waits: 64,
                starts: 1,
                reloads: 1,
                lists: 2,
                hold_ms: 200,
                many: 3,
                turns: 1,
                idle: Duration::ZERO,
            }
        } else if args.quick {
            Self {
                warmup: 100,
                latency: 500,
                throughput: 640,
                waits: 128,
                starts: 2,
                reloads: 2,
                lists: 5,
                hold_ms: 2000,
                many: 50,
                turns: 5,
                idle: IDLE_BEFORE_MEMORY,
            }
        } else {
            Self {
                warmup: 1000,
                latency: 5000,
                throughput: 10_240,
                waits: 1280,
                starts: 5,
                reloads: 8,
                lists: 50,
                hold_ms: 2000,
                many: 50,
                turns: 5,
                idle: IDLE_BEFORE_MEMORY,
            }
        }
    }
}

/// The echo text sent and expected back.
const TEXT: &str = "hello from mcpbench";
/// mcpbox's reload debounce (its default), subtracted to report what the host itself takes.
const DEBOUNCE_MS: f64 = 200.0;
/// How many generated tools the long-list measurement serves.
const LIST_TOOLS: usize = 1000;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sizes = Sizes::new(&args);
    let bench = Bench::prepare(&args, sizes.many)?;
    let mut report = Report::default();

    let run = |part: Part| args.only.is_empty() || args.only.contains(&part);
    // Fill the shared cache first, so no measurement but the cold-cache ones compiles.
    for (dir, tools) in [(&bench.one_dir, 2), (&bench.list_dir, LIST_TOOLS + 2)] {
        first_list(&bench.mcpbox(dir, Transport::Stdio, &[]), tools).await?;
    }
    for (transport, part) in [
        (Transport::Stdio, Part::Stdio),
        (Transport::Http, Part::Http),
    ] {
        if !run(part) {
            continue;
        }
        let native_launch = bench.native(transport, 0);
        let mcpbox_launch = bench.mcpbox(&bench.one_dir, transport, &[]);
        let kept_launch = bench.mcpbox(&bench.kept_dir, transport, &[]);
        // mcpbox with fresh instances (the default), then with them kept per caller, each
        // beside the native server, with both kinds of client.
        for (variant, launch) in [("", &mcpbox_launch), (KEPT, &kept_launch)] {
            eprintln!("== tools/call over {}{variant}", transport.name());
            let [native, mcpbox] = load_suite(
                [
                    Driven::new(&native_launch, Revision::V2025),
                    Driven::new(launch, Revision::V2025),
                ],
                transport,
                &sizes,
            )
            .await?;
            load_rows(&mut report, transport, variant, &native, &mcpbox);
            eprintln!(
                "== tools/call over {}{variant}: an event-loop client",
                transport.name()
            );
            eventloop_rows(
                &mut report,
                transport,
                variant,
                [&native_launch, launch],
                &sizes,
            )
            .await?;
        }
        eprintln!(
            "== tools/call over {}: 2026-07-28 against 2025-11-25",
            transport.name()
        );
        let [v2025, v2026] = load_suite(
            [
                Driven::new(&mcpbox_launch, Revision::V2025),
                Driven::new(&mcpbox_launch, Revision::V2026),
            ],
            transport,
            &sizes,
        )
        .await?;
        revision_rows(&mut report, transport, &v2025, &v2026);
    }

    if run(Part::Startup) {
        eprintln!("== start-up");
        startup_rows(&mut report, &bench, &sizes).await?;
    }
    if run(Part::List) {
        eprintln!("== tools/list over {LIST_TOOLS} tools");
        list_rows(&mut report, &bench, &sizes).await?;
    }
    if run(Part::Reload) {
        eprintln!("== hot reload");
        reload_rows(&mut report, &bench, &sizes).await?;
    }
    if run(Part::State) {
        eprintln!("== plugin state");
        state_rows(&mut report, &bench, &sizes).await?;
    }
    if run(Part::Reference) {
        eprintln!("== reference servers against their plugins");
        let examples = args
            .examples
            .clone()
            .unwrap_or_else(|| args.plugin.with_file_name("../plugins"));
        if !reference::reference_rows(
            &mut report,
            &bench,
            &sizes,
            args.originals.as_ref(),
            &examples,
        )
        .await?
        {
            eprintln!(
                "the reference servers' originals are not installed: the reference part is skipped"
            );
        }
    }
    if run(Part::Principals) {
        eprintln!("== budgets per caller (HTTP, 2026-07-28)");
        principals::principals_rows(&mut report, &bench, &sizes).await?;
    }
    if run(Part::Brokered) {
        eprintln!("== brokered credentials (HTTP, 2026-07-28)");
        brokered::brokered_rows(&mut report, &bench, &sizes).await?;
    }
    if run(Part::Fanout) {
        match &args.fanout_plugins {
            Some(plugins) => {
                eprintln!("== WASI 0.3 against 0.2: one call, N slow upstreams");
                fanout::fanout_rows(&mut report, &bench, &sizes, plugins).await?;
            }
            None => eprintln!("no --fanout-plugins: the fanout part is skipped"),
        }
    }
    if run(Part::Scale) {
        match scale::find_haproxy() {
            Some(haproxy) => {
                eprintln!(
                    "== scale-out through HAProxy, 1 to {} replicas",
                    args.replicas
                );
                let template =
                    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../host/deploy/haproxy.cfg");
                // Requests through the balancer name its address (127.0.0.1 on its own port).
                let plot = args.plot.clone().unwrap_or_else(|| {
                    args.out
                        .as_deref()
                        .and_then(Path::parent)
                        .unwrap_or(&args.work)
                        .join("scale.svg")
                });
                let launch = bench.mcpbox(
                    &bench.one_dir,
                    Transport::Http,
                    &["--allowed-host", "127.0.0.1"],
                );
                let setup = scale::ScaleSetup {
                    launch: &launch,
                    haproxy: &haproxy,
                    template: &template,
                    work: &bench.work,
                    max_replicas: args.replicas.max(1),
                    calls: sizes.throughput,
                    plot: &plot,
                };
                scale::scale_rows(&mut report, &setup).await?;
            }
            None => eprintln!("no haproxy installed: the scale-out part is skipped"),
        }
    }

    let markdown = report.markdown();
    let verdicts: Vec<_> = report.verdicts().collect();
    let met = verdicts.iter().filter(|(_, met)| *met).count();
    let summary = format!("Targets met: {met} of {}.\n", verdicts.len());
    if let Some(out) = &args.out {
        std::fs::write(out, format!("{markdown}{summary}"))
            .with_context(|| format!("writing {}", out.display()))?;
    }
    eprintln!("\n{markdown}{summary}");
    Ok(())
}

/// Paths and launch lines shared by every measurement.
struct Bench {
    mcpbox: PathBuf,
    native: PathBuf,
    work: PathBuf,
    /// The benchmark plugin alone.
    one_dir: PathBuf,
    /// It alone, its instances kept per caller (`instances = "per-caller"`).
    kept_dir: PathBuf,
    /// Distinct copies of it (each with its own name prefix).
    many_dir: PathBuf,
    /// It, with `LIST_TOOLS` generated tools.
    list_dir: PathBuf,
    /// The directory the reload measurement replaces a plugin in.
    reload_dir: PathBuf,
    /// The benchmark plugin, granted durable state.
    state_dir: PathBuf,
    plugin: Vec<u8>,
    alt_plugin: Vec<u8>,
}

impl Bench {
    fn prepare(args: &Args, many: usize) -> anyhow::Result<Self> {
        let read = |p: &Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
        let plugin = read(&args.plugin)?;
        let alt_plugin = read(&args.alt_plugin)?;
        if args.work.exists() {
            std::fs::remove_dir_all(&args.work)
                .with_context(|| format!("emptying {}", args.work.display()))?;
        }
        let dir = |name: &str| -> anyhow::Result<PathBuf> {
            let d = args.work.join(name);
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            Ok(d)
        };
        let one_dir = dir("one")?;
        std::fs::write(one_dir.join("bench.wasm"), &plugin)?;
        let kept_dir = dir("kept")?;
        std::fs::write(kept_dir.join("bench.wasm"), &plugin)?;
        std::fs::write(kept_dir.join("bench.toml"), "instances = \"per-caller\"\n")?;
        let many_dir = dir("many")?;
        for i in 0..many {
            // A distinct component for each (its own hash, so its own compilation and cache
            // entry), and its own prefix, so the names do not collide.
            let copy = with_custom_section(&plugin, &format!("copy {i}"));
            std::fs::write(many_dir.join(format!("bench{i:02}.wasm")), copy)?;
            std::fs::write(
                many_dir.join(format!("bench{i:02}.toml")),
                format!("[env]\nBENCH_PREFIX = \"p{i:02}_\"\n"),
            )?;
        }
        let list_dir = dir("list")?;
        std::fs::write(list_dir.join("bench.wasm"), &plugin)?;
        std::fs::write(
            list_dir.join("bench.toml"),
            format!("[env]\nBENCH_TOOLS = \"{LIST_TOOLS}\"\n"),
        )?;
        let reload_dir = dir("reload")?;
        let state_dir = dir("state")?;
        std::fs::write(state_dir.join("bench.wasm"), &plugin)?;
        std::fs::write(
            state_dir.join("bench.toml"),
            "[env]\nBENCH_STATE = \"1\"\n\n[keyvalue]\nbuckets = [\"default\"]\n",
        )?;
        Ok(Self {
            mcpbox: args.mcpbox.clone(),
            native: args.native.clone(),
            work: args.work.clone(),
            one_dir,
            kept_dir,
            many_dir,
            list_dir,
            reload_dir,
            state_dir,
            plugin,
            alt_plugin,
        })
    }

    fn cache(&self, name: &str) -> PathBuf {
        self.work.join("caches").join(name)
    }

    /// mcpbox serving `dir` (compiled plugins cached in the shared warm cache).
    fn mcpbox(&self, dir: &Path, transport: Transport, extra: &[&str]) -> Launch {
        self.mcpbox_with_cache(dir, &self.cache("warm"), transport, extra)
    }

    /// mcpbox serving `dir` with its compiled plugins cached in `cache`, logging warnings (or
    /// what a `--log` in `extra` says).
    fn mcpbox_with_cache(
        &self,
        dir: &Path,
        cache: &Path,
        transport: Transport,
        extra: &[&str],
    ) -> Launch {
        let dir = dir.to_string_lossy();
        let cache = cache.to_string_lossy();
        let mut args = vec!["serve", "--plugins", &dir, "--cache-dir", &cache];
        if !extra.contains(&"--log") {
            args.extend(["--log", "warn"]);
        }
        if transport == Transport::Http {
            args.extend(["--http", "{addr}"]);
        }
        args.extend(extra);
        Launch::new(&self.mcpbox, &args)
    }

    fn native(&self, transport: Transport, tools: usize) -> Launch {
        let tools = tools.to_string();
        let mut args = vec!["--tools", &tools];
        if transport == Transport::Http {
            args.extend(["--http", "{addr}"]);
        }
        Launch::new(&self.native, &args)
    }
}

/// `component` with a custom section appended: the same program, a different hash.
fn with_custom_section(component: &[u8], payload: &str) -> Vec<u8> {
    let name = b"mcpbench";
    let mut body = leb128(name.len());
    body.extend_from_slice(name);
    body.extend_from_slice(payload.as_bytes());
    let mut out = component.to_vec();
    out.push(0); // custom section id
    out.extend(leb128(body.len()));
    out.extend(body);
    out
}

fn leb128(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = u8::try_from(n & 0x7f).unwrap_or_default();
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

// ---- tools/call: latency, throughput, CPU, overlap, memory ----

/// What one server did under load.
struct LoadFigures {
    /// Sequential round trips, sorted, in µs.
    latency_us: Vec<f64>,
    /// Server CPU per call during the sequential run, µs.
    cpu_per_call_us: f64,
    /// Calls per second at 1, 16 and 64 in flight, with server CPU per call.
    throughput: Vec<(usize, f64, f64)>,
    /// `wait 20 ms` calls per second at 64 in flight.
    wait_rate: f64,
    idle: Memory,
    loaded: Memory,
}

/// One server of a load suite, and how the client speaks to it.
#[derive(Clone, Copy)]
struct Driven<'a> {
    launch: &'a Launch,
    revision: Revision,
    /// The bearer token every request carries (HTTP), if any.
    bearer: Option<&'a str>,
}

impl<'a> Driven<'a> {
    /// `launch`, spoken to at `revision`, without a token.
    fn new(launch: &'a Launch, revision: Revision) -> Self {
        Self {
            launch,
            revision,
            bearer: None,
        }
    }

    /// The same, with every request carrying `token`.
    fn bearer(self, token: &'a str) -> Self {
        Self {
            bearer: Some(token),
            ..self
        }
    }
}

/// How long both servers sit idle before their idle memory is read, when measuring.
const IDLE_BEFORE_MEMORY: Duration = Duration::from_secs(2);

/// Run the same load against both servers, alternating between them in turns.
async fn load_suite(
    launches: [Driven<'_>; 2],
    transport: Transport,
    sizes: &Sizes,
) -> anyhow::Result<[LoadFigures; 2]> {
    let mut servers = Vec::new();
    for driven in launches {
        let server = Server::start(driven.launch, transport).await?;
        if driven.revision == Revision::V2026 {
            server.conn.set_v2026();
        }
        if let Some(token) = driven.bearer {
            server.conn.set_bearer(token)?;
        }
        server.initialize().await?;
        for _ in 0..sizes.warmup {
            echo(&server.conn).await?;
        }
        servers.push(server);
    }
    // Idle means idle: both servers sit for a moment after their warm-up before their memory
    // is read (mcpbox gives back its start's pages once ready and again a second later).
    tokio::time::sleep(sizes.idle).await;
    let mut figures: Vec<LoadFigures> = servers
        .iter()
        .map(|server| {
            Ok(LoadFigures {
                latency_us: Vec::with_capacity(sizes.latency),
                cpu_per_call_us: 0.0,
                throughput: Vec::new(),
                wait_rate: 0.0,
                idle: server.memory()?,
                loaded: Memory::default(),
            })
        })
        .collect::<anyhow::Result<_>>()?;

    // Sequential round trips, and the CPU they cost.
    let per_turn = sizes.latency.div_ceil(sizes.turns);
    let mut cpu = [Duration::ZERO; 2];
    for _ in 0..sizes.turns {
        for (i, server) in servers.iter().enumerate() {
            let before = server.cpu_time()?;
            for _ in 0..per_turn {
                let start = Instant::now();
                echo(&server.conn).await?;
                figures[i]
                    .latency_us
                    .push(start.elapsed().as_secs_f64() * 1e6);
            }
            cpu[i] += server.cpu_time()? - before;
        }
    }
    for (f, cpu) in figures.iter_mut().zip(cpu) {
        f.cpu_per_call_us = cpu.as_secs_f64() * 1e6 / f.latency_us.len() as f64;
        f.latency_us.sort_by(f64::total_cmp);
    }

    // Throughput at each depth, and the wait tool at 64 in flight.
    let runs: [(usize, usize, &'static str, Value, &'static str); 4] = [
        (1, sizes.throughput, "echo", json!({"text": TEXT}), TEXT),
        (16, sizes.throughput, "echo", json!({"text": TEXT}), TEXT),
        (64, sizes.throughput, "echo", json!({"text": TEXT}), TEXT),
        (64, sizes.waits, "wait", json!({"ms": 20}), "waited"),
    ];
    for (in_flight, total, tool, arguments, expect) in runs {
        let per_turn = (total / sizes.turns).max(in_flight);
        let mut elapsed = [Duration::ZERO; 2];
        let mut cpu = [Duration::ZERO; 2];
        for _ in 0..sizes.turns {
            for (i, server) in servers.iter().enumerate() {
                let before = server.cpu_time()?;
                elapsed[i] += in_flight_run(
                    &server.conn,
                    in_flight,
                    per_turn,
                    tool,
                    arguments.clone(),
                    expect,
                )
                .await?;
                cpu[i] += server.cpu_time()? - before;
            }
        }
        let calls = (per_turn / in_flight * in_flight * sizes.turns) as f64;
        for (i, f) in figures.iter_mut().enumerate() {
            let rate = calls / elapsed[i].as_secs_f64();
            if tool == "wait" {
                f.wait_rate = rate;
            } else {
                f.throughput
                    .push((in_flight, rate, cpu[i].as_secs_f64() * 1e6 / calls));
            }
        }
    }
    for (f, server) in figures.iter_mut().zip(&servers) {
        f.loaded = server.memory()?;
    }
    for server in servers {
        server.stop().await;
    }
    let [native, mcpbox]: [LoadFigures; 2] = figures
        .try_into()
        .map_err(|_| anyhow!("expected figures for two servers"))?;
    Ok([native, mcpbox])
}

/// The second kind of client: `eventloop_client.py` (asyncio, one thread, a reader task
/// handing each answer to the request waiting for it, as the official Python SDK's client
/// does) drives each server over `transport`, the two alternating in [`Sizes::turns`] turns, each
/// turn a fresh process warmed up before it is timed (over stdio the script starts the server;
/// over HTTP mcpbench does, and the script connects). Skipped, with a note, without `python3`.
async fn eventloop_rows(
    report: &mut Report,
    transport: Transport,
    variant: &str,
    launches: [&Launch; 2],
    sizes: &Sizes,
) -> anyhow::Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("eventloop_client.py");
    let python_runs = tokio::process::Command::new("python3")
        .arg("--version")
        .output()
        .await
        .is_ok_and(|out| out.status.success());
    if !python_runs {
        eprintln!("no python3: the event-loop client's rows are skipped");
        return Ok(());
    }
    let (warmup, calls) = (
        (sizes.warmup / sizes.turns).max(1).to_string(),
        sizes.latency.div_ceil(sizes.turns).to_string(),
    );
    let mut latency = [Vec::new(), Vec::new()];
    for _ in 0..sizes.turns {
        for (i, launch) in launches.iter().enumerate() {
            let mut command = tokio::process::Command::new("python3");
            command
                .arg(&script)
                .args(["--warmup", &warmup, "--calls", &calls])
                .kill_on_drop(true);
            let server = match transport {
                Transport::Stdio => {
                    command
                        .arg("--")
                        .arg(&launch.program)
                        .args(&launch.args)
                        .env_remove("RUST_BACKTRACE")
                        .env_remove("RUST_LIB_BACKTRACE")
                        .envs(launch.env.iter().map(|(k, v)| (k, v)));
                    None
                }
                Transport::Http => {
                    let server = Server::start(launch, transport).await?;
                    let addr = server
                        .addr
                        .clone()
                        .ok_or_else(|| anyhow!("an HTTP server without an address"))?;
                    command.args(["--http", &addr]);
                    Some(server)
                }
            };
            let run = command.output();
            let out = tokio::time::timeout(Duration::from_secs(600), run)
                .await
                .context("the event-loop client did not finish in 10 minutes")?
                .context("running the event-loop client")?;
            ensure!(
                out.status.success(),
                "the event-loop client failed against {}: {}",
                launch.program.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let round_trips: Vec<f64> = serde_json::from_slice(&out.stdout)
                .context("the event-loop client's round trips")?;
            latency[i].extend(round_trips);
            if let Some(server) = server {
                server.stop().await;
            }
        }
    }
    for samples in &mut latency {
        samples.sort_by(f64::total_cmp);
    }
    report.section(format!(
        "tools/call over {} (echo{variant}), an event-loop client (asyncio)",
        transport.name()
    ));
    for (p, name) in [(50.0, "p50"), (90.0, "p90"), (99.0, "p99")] {
        let mut row = Row::new(
            format!("round trip {name}"),
            "µs",
            Some(percentile(&latency[0], p)),
            percentile(&latency[1], p),
        );
        if name != "p90" {
            row = row.target(Target::RatioAtMost(1.0));
        }
        report.push(row);
    }
    Ok(())
}

/// The revision a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Revision {
    /// 2025-11-25: `initialize` and a session.
    V2025,
    /// 2026-07-28: every request stands alone.
    V2026,
}

/// mcpbox at 2026-07-28 beside itself at 2025-11-25 (the baseline column).
fn revision_rows(
    report: &mut Report,
    transport: Transport,
    v2025: &LoadFigures,
    v2026: &LoadFigures,
) {
    let t = transport.name();
    report.section_between(
        format!("tools/call over {t} (echo): mcpbox at 2026-07-28 against 2025-11-25"),
        "mcpbox 2025-11-25",
        "mcpbox 2026-07-28",
    );
    same_server_rows(report, v2025, v2026);
}

/// mcpbox beside itself run another way: round trips, CPU per call (held to 1.05×, the
/// resolution of the CPU clock over a run) and throughput, `value` against `baseline`.
fn same_server_rows(report: &mut Report, baseline: &LoadFigures, value: &LoadFigures) {
    for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
        report.push(Row::new(
            format!("round trip {name}"),
            "µs",
            Some(percentile(&baseline.latency_us, p)),
            percentile(&value.latency_us, p),
        ));
    }
    report.push(
        Row::new(
            "server CPU per call (1 in flight)",
            "µs",
            Some(baseline.cpu_per_call_us),
            value.cpu_per_call_us,
        )
        .target(Target::RatioAtMost(1.05)),
    );
    for ((k, b_rate, b_cpu), (_, v_rate, v_cpu)) in
        baseline.throughput.iter().zip(&value.throughput)
    {
        report.push(Row::new(
            format!("throughput, {k} in flight"),
            "calls/s",
            Some(*b_rate),
            *v_rate,
        ));
        report.push(Row::new(
            format!("server CPU per call, {k} in flight"),
            "µs",
            Some(*b_cpu),
            *v_cpu,
        ));
    }
}

async fn echo(conn: &Conn) -> anyhow::Result<()> {
    let text = conn.call_text("echo", json!({"text": TEXT})).await?;
    ensure!(text == TEXT, "echo answered {text:?}");
    Ok(())
}

/// `total` calls of `tool`, `in_flight` at a time; each answer is checked. Returns the wall time.
async fn in_flight_run(
    conn: &Conn,
    in_flight: usize,
    total: usize,
    tool: &'static str,
    arguments: Value,
    expect: &'static str,
) -> anyhow::Result<Duration> {
    let per_task = total / in_flight;
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..in_flight {
        let conn = conn.clone();
        let arguments = arguments.clone();
        tasks.spawn(async move {
            for _ in 0..per_task {
                let text = conn.call_text(tool, arguments.clone()).await?;
                ensure!(text == expect, "{tool} answered {text:?}");
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("a client task panicked")??;
    }
    Ok(start.elapsed())
}

/// The section titles' note for mcpbox serving the benchmark plugin with its instances kept
/// per caller.
const KEPT: &str = ", instances kept per caller";

fn load_rows(
    report: &mut Report,
    transport: Transport,
    variant: &str,
    native: &LoadFigures,
    mcpbox: &LoadFigures,
) {
    let t = transport.name();
    report.section(format!("tools/call over {t} (echo{variant})"));
    for (p, name) in [(50.0, "p50"), (90.0, "p90"), (99.0, "p99")] {
        let mut row = Row::new(
            format!("round trip {name}"),
            "µs",
            Some(percentile(&native.latency_us, p)),
            percentile(&mcpbox.latency_us, p),
        );
        if transport == Transport::Stdio && name == "p50" {
            row = row.target(Target::RatioAtMost(1.0));
        }
        report.push(row);
    }
    let mut cpu = Row::new(
        "server CPU per call (1 in flight)",
        "µs",
        Some(native.cpu_per_call_us),
        mcpbox.cpu_per_call_us,
    );
    if transport == Transport::Stdio {
        cpu = cpu.target(Target::RatioAtMost(1.0));
    }
    report.push(cpu);
    for ((k, n_rate, n_cpu), (_, m_rate, m_cpu)) in native.throughput.iter().zip(&mcpbox.throughput)
    {
        let mut row = Row::new(
            format!("throughput, {k} in flight"),
            "calls/s",
            Some(*n_rate),
            *m_rate,
        );
        match (transport, k) {
            (Transport::Stdio, 16) => row = row.target(Target::RatioAtLeast(0.8)),
            (Transport::Http, 64) => row = row.target(Target::RatioAtLeast(0.5)),
            _ => {}
        }
        report.push(row);
        report.push(Row::new(
            format!("server CPU per call, {k} in flight"),
            "µs",
            Some(*n_cpu),
            *m_cpu,
        ));
    }
    report.push(
        Row::new(
            "`wait 20 ms`, 64 in flight",
            "calls/s",
            Some(native.wait_rate),
            mcpbox.wait_rate,
        )
        .target(Target::RatioAtLeast(0.9)),
    );
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    // #30's memory targets: at most 10 MiB idle, at most twice the native server's peak.
    report.push(
        Row::new(
            "RSS idle (one plugin)",
            "MiB",
            Some(mib(native.idle.rss)),
            mib(mcpbox.idle.rss),
        )
        .target(Target::AtMost(10.0)),
    );
    report.push(
        Row::new(
            "peak RSS under load",
            "MiB",
            Some(mib(native.loaded.peak)),
            mib(mcpbox.loaded.peak),
        )
        .target(Target::RatioAtMost(2.0)),
    );
}

// ---- start-up ----

/// Start a server, initialise, list tools; the time to the `tools/list` answer and the memory
/// then. Checks the expected number of tools.
async fn first_list(launch: &Launch, tools: usize) -> anyhow::Result<(f64, Memory)> {
    let start = Instant::now();
    let server = Server::start(launch, Transport::Stdio).await?;
    server.initialize().await?;
    server.conn.request("tools/list", json!({})).await?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let memory = server.memory()?;
    let (listed, _) = server.conn.list_all_tools().await?;
    if listed.len() != tools {
        let log = server.stderr_lines().join("\n");
        bail!(
            "expected {tools} tools, the server listed {}; its log:\n{log}",
            listed.len()
        );
    }
    server.stop().await;
    Ok((ms, memory))
}

async fn startup_rows(report: &mut Report, bench: &Bench, sizes: &Sizes) -> anyhow::Result<()> {
    report.section("Start-up to the first tools/list answer (stdio)");
    let mut native = Vec::new();
    for _ in 0..sizes.starts {
        native.push(first_list(&bench.native(Transport::Stdio, 0), 2).await?.0);
    }
    let native = median(&native);
    let mut idle_rss = Vec::new();
    let many = sizes.many;
    for (dir, plugins) in [(&bench.one_dir, 1), (&bench.many_dir, many)] {
        let tools = plugins * 2;
        let (mut cold, mut warm, mut rss) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..sizes.starts {
            let cache = bench.cache(&format!("start-{plugins}-{round}"));
            let launch = bench.mcpbox_with_cache(dir, &cache, Transport::Stdio, &[]);
            cold.push(first_list(&launch, tools).await?.0);
            let (ms, memory) = first_list(&launch, tools).await?;
            warm.push(ms);
            rss.push(memory.rss as f64);
            std::fs::remove_dir_all(&cache).ok();
        }
        let name = if plugins == 1 {
            "1 plugin".to_owned()
        } else {
            format!("{plugins} plugins")
        };
        report.push(Row::new(
            format!("{name}, cache cold"),
            "ms",
            Some(native),
            median(&cold),
        ));
        // #30's start-up targets: 5 ms with one plugin, 40 ms with fifty.
        let target = if plugins == many { 40.0 } else { 5.0 };
        report.push(
            Row::new(
                format!("{name}, cache warm"),
                "ms",
                Some(native),
                median(&warm),
            )
            .target(Target::AtMost(target)),
        );
        idle_rss.push(median(&rss));
    }
    // The same plugins, each with a detached signature, under a policy requiring every plugin
    // to be signed: what checking signatures before loading adds to a warm start.
    let config = sign_every_plugin(bench, many).await?;
    let config = config.to_string_lossy().into_owned();
    let launch = bench.mcpbox_with_cache(
        &bench.many_dir,
        &bench.cache("start-signed"),
        Transport::Stdio,
        &["--config", &config],
    );
    first_list(&launch, many * 2).await?;
    let mut signed = Vec::new();
    for _ in 0..sizes.starts {
        signed.push(first_list(&launch, many * 2).await?.0);
    }
    report.push(Row::new(
        format!("{many} plugins, cache warm, each signature verified"),
        "ms",
        Some(native),
        median(&signed),
    ));
    let per_plugin = (idle_rss[1] - idle_rss[0]) / (many - 1) as f64 / (1024.0 * 1024.0);
    report.push(
        Row::new(
            format!("RSS per idle plugin ({many} vs 1, warm)"),
            "MiB",
            None,
            per_plugin,
        )
        .target(Target::AtMost(1.0)),
    );
    Ok(())
}

/// Sign each of the `many` plugins with a new key (`mcpbox keygen`, `mcpbox sign`); the path of
/// a configuration file requiring every plugin to be signed by it.
async fn sign_every_plugin(bench: &Bench, many: usize) -> anyhow::Result<PathBuf> {
    let run = |args: Vec<String>| async move {
        let output = tokio::process::Command::new(&bench.mcpbox)
            .args(&args)
            .env("COSIGN_PASSWORD", "bench")
            .output()
            .await
            .with_context(|| format!("running mcpbox {args:?}"))?;
        if !output.status.success() {
            bail!(
                "mcpbox {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        anyhow::Ok(())
    };
    let key = bench.work.join("bench-key");
    run(vec!["keygen".into(), key.to_string_lossy().into_owned()]).await?;
    for i in 0..many {
        let file = bench.many_dir.join(format!("bench{i:02}.wasm"));
        run(vec![
            "sign".into(),
            file.to_string_lossy().into_owned(),
            "--key".into(),
            format!("{}.key", key.display()),
        ])
        .await?;
    }
    let config = bench.work.join("signed.toml");
    std::fs::write(
        &config,
        "[signatures.keys]\nbench = \"bench-key.pub\"\n\n[signatures.require]\n\"*\" = [\"bench\"]\n",
    )?;
    Ok(config)
}

// ---- tools/list over many tools ----

async fn list_rows(report: &mut Report, bench: &Bench, sizes: &Sizes) -> anyhow::Result<()> {
    report.section(format!("tools/list over {LIST_TOOLS} tools (stdio)"));
    let total = LIST_TOOLS + 2;

    let native = Server::start(
        &bench.native(Transport::Stdio, LIST_TOOLS),
        Transport::Stdio,
    )
    .await?;
    native.initialize().await?;
    let native_ms = time_listing(&native.conn, total, 1, sizes.lists).await?;
    native.stop().await;

    let timing = ["--log", "warn,mcpbox::timing=debug"];
    // One page holding every tool: the same request and answer as the baseline's.
    let one_page = bench.mcpbox(
        &bench.list_dir,
        Transport::Stdio,
        &[&timing[..], &["--page-size", "2000"]].concat(),
    );
    let server = Server::start(&one_page, Transport::Stdio).await?;
    server.initialize().await?;
    let mcpbox_ms = time_listing(&server.conn, total, 1, sizes.lists).await?;
    let inside = server_times(&server, "tools/list")?;
    server.stop().await;
    report.push(Row::new(
        "whole list in one page, round trip",
        "ms",
        Some(native_ms),
        mcpbox_ms,
    ));
    report.push(
        Row::new(
            "the same, inside the server",
            "ms",
            None,
            median(&inside) / 1e3,
        )
        .target(Target::AtMost(1.0)),
    );

    // The default page size (100): what a client following cursors sees.
    let paged = bench.mcpbox(&bench.list_dir, Transport::Stdio, &timing);
    let server = Server::start(&paged, Transport::Stdio).await?;
    server.initialize().await?;
    let pages = total.div_ceil(100);
    let paged_ms = time_listing(&server.conn, total, pages, sizes.lists).await?;
    let inside = server_times(&server, "tools/list")?;
    server.stop().await;
    report.push(Row::new(
        format!("whole list in {pages} pages of 100, round trips"),
        "ms",
        Some(native_ms),
        paged_ms,
    ));
    report.push(Row::new(
        "one page of 100, inside the server",
        "ms",
        None,
        median(&inside) / 1e3,
    ));
    Ok(())
}

/// Median time to list every tool (checking the count and the number of pages), ms.
async fn time_listing(
    conn: &Conn,
    tools: usize,
    pages: usize,
    rounds: usize,
) -> anyhow::Result<f64> {
    let mut times = Vec::new();
    for _ in 0..rounds {
        let start = Instant::now();
        let (listed, got_pages) = conn.list_all_tools().await?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
        ensure!(
            listed.len() == tools && got_pages == pages,
            "listed {} tools in {got_pages} pages",
            listed.len()
        );
    }
    Ok(median(&times))
}

/// mcpbox's own timings of `method` (µs), from its `mcpbox::timing` debug log.
fn server_times(server: &Server, method: &str) -> anyhow::Result<Vec<f64>> {
    let needle = format!("method={method} ");
    let times: Vec<f64> = server
        .stderr_lines()
        .iter()
        .filter(|line| line.contains("mcpbox::timing") && line.contains(&needle))
        .filter_map(|line| line.split("elapsed_us=").nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect();
    ensure!(!times.is_empty(), "mcpbox logged no timing for {method}");
    Ok(times)
}

// ---- plugin state ----

/// Sequential `tools/call` latency (µs, sorted) of `tool` on a fresh server.
async fn sequential_latency(
    launch: &Launch,
    sizes: &Sizes,
    tool: &str,
) -> anyhow::Result<Vec<f64>> {
    let server = Server::start(launch, Transport::Stdio).await?;
    server.initialize().await?;
    let mut times = Vec::with_capacity(sizes.latency);
    for i in 0..sizes.warmup + sizes.latency {
        let start = Instant::now();
        let text = server.conn.call_text(tool, json!({"text": TEXT})).await?;
        let elapsed = start.elapsed();
        ensure!(text == TEXT, "{tool} answered {text:?}");
        if i >= sizes.warmup {
            times.push(elapsed.as_secs_f64() * 1e6);
        }
    }
    server.stop().await;
    times.sort_by(f64::total_cmp);
    Ok(times)
}

/// A `redis-server` on a free loopback port, without persistence, if one is installed.
struct RedisServer(tokio::process::Child, String);

impl RedisServer {
    async fn start() -> anyhow::Result<Option<Self>> {
        let Some(program) = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
            .into_iter()
            .find(|p| Path::new(p).exists())
        else {
            return Ok(None);
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = tokio::process::Command::new(program)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            ensure!(Instant::now() < deadline, "redis-server did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(Some(Self(child, format!("redis://127.0.0.1:{port}"))))
    }
}

async fn state_rows(report: &mut Report, bench: &Bench, sizes: &Sizes) -> anyhow::Result<()> {
    report.section_between(
        "Plugin state: one set and one get inside a tools/call (stdio, sequential)",
        "echo (no state)",
        "with state",
    );
    let echo = sequential_latency(
        &bench.mcpbox(&bench.state_dir, Transport::Stdio, &[]),
        sizes,
        "echo",
    )
    .await?;
    let state_dir = bench.work.join("state-store");
    let dir = state_dir.to_string_lossy();
    let disk = sequential_latency(
        &bench.mcpbox(&bench.state_dir, Transport::Stdio, &["--state-dir", &dir]),
        sizes,
        "state",
    )
    .await?;
    for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
        report.push(Row::new(
            format!("embedded (SQLite WAL, fsync per write), {name}"),
            "µs",
            Some(percentile(&echo, p)),
            percentile(&disk, p),
        ));
    }
    match RedisServer::start().await? {
        Some(redis) => {
            let times = sequential_latency(
                &bench.mcpbox(&bench.state_dir, Transport::Stdio, &["--state", &redis.1]),
                sizes,
                "state",
            )
            .await?;
            drop(redis.0);
            for (p, name) in [(50.0, "p50"), (99.0, "p99")] {
                report.push(Row::new(
                    format!("Redis on loopback, {name}"),
                    "µs",
                    Some(percentile(&echo, p)),
                    percentile(&times, p),
                ));
            }
        }
        None => eprintln!("no redis-server installed: the Redis rows are skipped"),
    }
    Ok(())
}

// ---- hot reload ----

async fn reload_rows(report: &mut Report, bench: &Bench, sizes: &Sizes) -> anyhow::Result<()> {
    report.section(
        "Hot reload: file renamed into place → tools/list_changed (stdio, 200 ms debounce)",
    );
    let target = bench.reload_dir.join("tool.wasm");
    std::fs::write(&target, &bench.plugin)?;
    let cache = bench.cache("reload");
    let launch = bench.mcpbox_with_cache(&bench.reload_dir, &cache, Transport::Stdio, &[]);
    let mut server = Server::start(&launch, Transport::Stdio).await?;
    server.initialize().await?;
    let mut notifications = server
        .notifications
        .take()
        .ok_or_else(|| anyhow!("no notification stream"))?;
    // Alternate between two plugins with different tools, so every replacement changes the
    // list; each version is a distinct component (first pass: compiled; second: from cache).
    let versions: Vec<Vec<u8>> = (0..sizes.reloads * 2)
        .map(|i| {
            let base = if i % 2 == 0 {
                &bench.alt_plugin
            } else {
                &bench.plugin
            };
            with_custom_section(base, &format!("version {i}"))
        })
        .collect();
    let mut compiled = Vec::new();
    let mut cached = Vec::new();
    for pass in 0..2 {
        for version in &versions {
            let incoming = bench.reload_dir.join("tool.wasm.incoming");
            std::fs::write(&incoming, version)?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            while notifications.try_recv().is_ok() {}
            let start = Instant::now();
            std::fs::rename(&incoming, &target)?;
            loop {
                let message = tokio::time::timeout(Duration::from_secs(10), notifications.recv())
                    .await
                    .context("no tools/list_changed within 10 s of a replacement")?
                    .ok_or_else(|| anyhow!("the server closed stdout"))?;
                if message.get("method").and_then(Value::as_str)
                    == Some("notifications/tools/list_changed")
                {
                    break;
                }
            }
            let ms = start.elapsed().as_secs_f64() * 1e3;
            if pass == 0 {
                compiled.push(ms)
            } else {
                cached.push(ms)
            }
        }
    }
    server.stop().await;
    report.push(Row::new(
        "new component (compiled), median",
        "ms",
        None,
        median(&compiled),
    ));
    report.push(Row::new(
        "component seen before (cache), median",
        "ms",
        None,
        median(&cached),
    ));
    report.push(
        Row::new(
            "new component, beyond the debounce",
            "ms",
            None,
            median(&compiled) - DEBOUNCE_MS,
        )
        .target(Target::AtMost(250.0)),
    );
    Ok(())
}
