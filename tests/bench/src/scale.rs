//! Scale-out: throughput and tail latency of 2026-07-28 `tools/call`s over HTTP through
//! HAProxy (running the repository's `host/deploy/haproxy.cfg`) with 1…N mcpbox replicas,
//! against a direct connection to one replica; drawn as an SVG plot.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use plotters::prelude::*;
use serde_json::json;
use tokio::task::JoinSet;

use crate::client::{Conn, HttpConn};
use crate::report::{Report, Row, percentile};
use crate::server::{Launch, Server, Transport};

/// One measured point.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    /// Replicas behind the balancer (0: a direct connection to one replica).
    pub replicas: usize,
    /// Calls in flight.
    pub in_flight: usize,
    /// Calls per second.
    pub rate: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
}

/// HAProxy running `config` (the repository's file, with N server lines), killed on drop.
struct Balancer {
    child: tokio::process::Child,
    url: String,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The repository's HAProxy configuration with one `server` line per replica.
fn config(template: &str, replicas: &[String]) -> String {
    let mut out: String = template
        .lines()
        .filter(|line| !line.trim_start().starts_with("server replica"))
        .map(|line| format!("{line}\n"))
        .collect();
    for (i, addr) in replicas.iter().enumerate() {
        out.push_str(&format!("    server replica{} {addr}\n", i + 1));
    }
    out
}

async fn balancer(
    haproxy: &Path,
    template: &str,
    work: &Path,
    replicas: &[String],
) -> anyhow::Result<Balancer> {
    let port = free_port()?;
    let file = work.join("haproxy.cfg");
    std::fs::write(&file, config(template, replicas))?;
    let child = tokio::process::Command::new(haproxy)
        .args(["-db", "-f"])
        .arg(&file)
        .env("MCPBOX_LB_ADDR", format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", haproxy.display()))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let client = reqwest::Client::new();
    while !client
        .get(format!("http://127.0.0.1:{port}/readyz"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
    {
        ensure!(Instant::now() < deadline, "haproxy did not become ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Every server passes its first health check (1 s apart) before traffic starts.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    Ok(Balancer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    })
}

/// `total` echo calls, `in_flight` at a time, through `url`; the rate and p99.
async fn measure(url: &str, in_flight: usize, total: usize) -> anyhow::Result<(f64, f64)> {
    let conn = Conn::Http(HttpConn::new(url.to_owned())?);
    conn.set_v2026();
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..in_flight {
        let conn = conn.clone();
        let per_task = (total / in_flight).max(1);
        tasks.spawn(async move {
            let mut times = Vec::with_capacity(per_task);
            for _ in 0..per_task {
                let begun = Instant::now();
                let text = conn.call_text("echo", json!({"text": "scale"})).await?;
                ensure!(text == "scale", "echo answered {text:?}");
                times.push(begun.elapsed().as_secs_f64() * 1e3);
            }
            anyhow::Ok(times)
        });
    }
    let mut times = Vec::with_capacity(total);
    while let Some(done) = tasks.join_next().await {
        times.extend(done.context("a client task panicked")??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);
    Ok((times.len() as f64 / elapsed, percentile(&times, 99.0)))
}

/// What the scale-out part needs.
pub struct ScaleSetup<'a> {
    /// How to start one replica (HTTP).
    pub launch: &'a Launch,
    /// The `haproxy` program.
    pub haproxy: &'a Path,
    /// `host/deploy/haproxy.cfg`.
    pub template: &'a Path,
    /// A scratch directory.
    pub work: &'a Path,
    /// Measure 1 to this many replicas.
    pub max_replicas: usize,
    /// Calls per measurement.
    pub calls: usize,
    /// Where to draw the plot.
    pub plot: &'a Path,
}

/// Measure direct and 1…`max_replicas` behind HAProxy at each of `concurrency`; add the rows
/// to `report` and draw the plot.
pub async fn scale_rows(report: &mut Report, setup: &ScaleSetup<'_>) -> anyhow::Result<Vec<Point>> {
    let ScaleSetup {
        launch,
        haproxy,
        template,
        work,
        max_replicas,
        calls,
        plot,
    } = *setup;
    let template = std::fs::read_to_string(template)
        .with_context(|| format!("reading {}", template.display()))?;
    let concurrency = [1, 16, 64];
    let mut servers = Vec::new();
    for _ in 0..max_replicas {
        let server = Server::start(launch, Transport::Http).await?;
        server.initialize().await.ok();
        servers.push(server);
    }
    let addrs: Vec<String> = servers.iter().filter_map(|s| s.addr.clone()).collect();
    let mut points = Vec::new();
    for &in_flight in &concurrency {
        let direct = format!("http://{}/mcp", addrs[0]);
        measure(&direct, in_flight, calls / 10).await?; // warm-up
        let (rate, p99_ms) = measure(&direct, in_flight, calls).await?;
        points.push(Point {
            replicas: 0,
            in_flight,
            rate,
            p99_ms,
        });
        for n in 1..=max_replicas {
            let lb = balancer(haproxy, &template, work, &addrs[..n]).await?;
            measure(&lb.url, in_flight, calls / 10).await?;
            let (rate, p99_ms) = measure(&lb.url, in_flight, calls).await?;
            points.push(Point {
                replicas: n,
                in_flight,
                rate,
                p99_ms,
            });
            drop(lb.child);
        }
    }
    for server in servers {
        server.stop().await;
    }

    report.section_between(
        "Scale-out: 2026-07-28 echo calls over HTTP, direct and through HAProxy",
        "direct to one replica",
        "through HAProxy",
    );
    for &in_flight in &concurrency {
        let direct = points
            .iter()
            .find(|p| p.replicas == 0 && p.in_flight == in_flight);
        for p in points
            .iter()
            .filter(|p| p.replicas > 0 && p.in_flight == in_flight)
        {
            report.push(Row::new(
                format!("{} replica(s), {in_flight} in flight: calls/s", p.replicas),
                "/s",
                direct.map(|d| d.rate),
                p.rate,
            ));
            report.push(Row::new(
                format!("{} replica(s), {in_flight} in flight: p99", p.replicas),
                "ms",
                direct.map(|d| d.p99_ms),
                p.p99_ms,
            ));
        }
    }
    draw(&points, &concurrency, max_replicas, plot)?;
    Ok(points)
}

/// Throughput and p99 against replicas, one line per concurrency (replicas 0: direct).
fn draw(
    points: &[Point],
    concurrency: &[usize],
    max_replicas: usize,
    plot: &Path,
) -> anyhow::Result<()> {
    if let Some(dir) = plot.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let root = SVGBackend::new(plot, (960, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(480);
    let x_max = max_replicas as f64 + 0.2;
    let colours = [BLUE, RED, GREEN, MAGENTA, CYAN];
    let rate_max = points.iter().map(|p| p.rate).fold(0.0, f64::max) * 1.4;
    let p99_max = points.iter().map(|p| p.p99_ms).fold(0.0, f64::max) * 1.4;
    for (area, title, y_max, value, unit, legend) in [
        (
            &left,
            "throughput",
            rate_max,
            (|p: &Point| p.rate) as fn(&Point) -> f64,
            "calls/s",
            SeriesLabelPosition::UpperRight,
        ),
        (
            &right,
            "p99 latency",
            p99_max,
            (|p: &Point| p.p99_ms) as fn(&Point) -> f64,
            "ms",
            SeriesLabelPosition::UpperLeft,
        ),
    ] {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{title} (0 = direct, no balancer)"),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.2..x_max, 0.0..y_max.max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("replicas behind HAProxy")
            .y_desc(unit)
            .x_labels(max_replicas + 1)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()?;
        for (i, &in_flight) in concurrency.iter().enumerate() {
            let colour = colours[i % colours.len()];
            let series: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.in_flight == in_flight)
                .map(|p| (p.replicas as f64, value(p)))
                .collect();
            chart
                .draw_series(LineSeries::new(series.clone(), colour.stroke_width(2)))?
                .label(format!("{in_flight} in flight"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            chart.draw_series(
                series
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, colour.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .position(legend)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// Where HAProxy is, if installed.
pub fn find_haproxy() -> Option<PathBuf> {
    [
        "/usr/sbin/haproxy",
        "/usr/bin/haproxy",
        "/usr/local/sbin/haproxy",
    ]
    .into_iter()
    .map(PathBuf::from)
    .find(|p| p.exists())
}
