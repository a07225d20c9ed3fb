//! The `brokered` part: what attaching a caller's own token costs a plugin's request (issue
//! #56).
//!
//! One plugin `GET` to a loopback upstream per `tools/call` (the benchmark plugin's `get`,
//! over Streamable HTTP at 2026-07-28, as a named caller `token:bench`), against two mcpbox
//! processes differing only in the plugin's grant: the upstream granted plainly (`[http]
//! allow`), and granted as the caller (`[http.credentials]`, provider `bench`). The caller
//! links once, before the timing, through a stub provider (the harness plays the browser:
//! `/oauth/link/start`, the provider's `/authorize`, mcpbox's `/oauth/link/callback`). Every
//! brokered request then reads the caller's sealed record from the state store and opens it
//! (AES-256-GCM) before the token is attached; nothing is cached. Measured on the embedded
//! store and, if `redis-server` is installed, on Redis, in alternating turns of sequential
//! round trips.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, anyhow, bail, ensure};
use axum::Router;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::client::Conn;
use crate::report::{Report, Row, percentile};
use crate::server::{Server, Transport};
use crate::{Bench, RedisServer, Sizes};

/// The static token of the caller (`[tokens.bench]`).
const BENCH_TOKEN: &str = "mcpbench-brokered-token-0123456789abcdef";
/// The access token the stub provider issues: what mcpbox attaches.
const ACCESS_TOKEN: &str = "mcpbench-upstream-access-token";
/// The upstream's answer.
const BODY: &str = "upstream ok";

pub async fn brokered_rows(
    report: &mut Report,
    bench: &Bench,
    sizes: &Sizes,
) -> anyhow::Result<()> {
    let upstream = serve(Router::new().fallback(upstream)).await?;
    let provider = serve(Router::new().fallback(provider)).await?;
    let config = write_files(bench, provider)?;
    let plain = plugin_dir(bench, "brokered-plain", upstream, false)?;
    let brokered = plugin_dir(bench, "brokered", upstream, true)?;
    let url = format!("http://127.0.0.1:{upstream}/");

    report.section_between(
        "Brokered credentials: a plugin GET to a loopback host inside tools/call (HTTP, \
         2026-07-28, sequential), the host granted as the caller against granted plainly",
        "granted plainly",
        "as the caller",
    );
    let embedded = bench.work.join("brokered-store");
    let embedded_arg = embedded.to_string_lossy().into_owned();
    let redis = RedisServer::start().await?;
    let mut stores = vec![(
        "embedded (SQLite, WAL)",
        vec!["--state-dir", embedded_arg.as_str()],
    )];
    match &redis {
        Some(redis) => stores.push(("Redis on loopback", vec!["--state", redis.1.as_str()])),
        None => eprintln!("no redis-server installed: the brokered Redis rows are skipped"),
    }
    for (name, store) in stores {
        let mut extra = vec![
            "--config",
            config.config.as_str(),
            "--secrets",
            config.secrets.as_str(),
            "--credentials-key-file",
            config.key.as_str(),
        ];
        extra.extend(store);
        let plain = Server::start(
            &bench.mcpbox(&plain, Transport::Http, &extra),
            Transport::Http,
        )
        .await?;
        let brokered = Server::start(
            &bench.mcpbox(&brokered, Transport::Http, &extra),
            Transport::Http,
        )
        .await?;
        let plain_conn = caller(&plain).await?;
        let brokered_conn = caller(&brokered).await?;
        link(&brokered, &brokered_conn, &url).await?;
        for _ in 0..sizes.warmup {
            get(&plain_conn, &url).await?;
            get(&brokered_conn, &url).await?;
        }
        let per_turn = sizes.latency.div_ceil(sizes.turns);
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for _ in 0..sizes.turns {
            without.extend(round_trips(&plain_conn, &url, per_turn).await?);
            with.extend(round_trips(&brokered_conn, &url, per_turn).await?);
        }
        plain.stop().await;
        brokered.stop().await;
        without.sort_by(f64::total_cmp);
        with.sort_by(f64::total_cmp);
        for (p, label) in [(50.0, "p50"), (99.0, "p99")] {
            report.push(Row::new(
                format!("{name}, round trip {label}"),
                "µs",
                Some(percentile(&without, p)),
                percentile(&with, p),
            ));
        }
        let _ = std::fs::remove_dir_all(&embedded);
    }
    drop(redis);
    Ok(())
}

/// Serve `router` on a free loopback port for the rest of the run; its port.
async fn serve(router: Router) -> anyhow::Result<u16> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(port)
}

/// The upstream: `BODY` to anyone (it does not check the token; the broker's cost is the
/// host's side).
async fn upstream() -> &'static str {
    BODY
}

/// The stub provider: `/authorize` signs the browser in at once (back to `redirect_uri` with
/// a code and the `state`), `/token` answers a day-long token for any code.
async fn provider(uri: Uri) -> Response {
    match uri.path() {
        "/authorize" => {
            let query = uri.query().unwrap_or_default();
            let param = |name: &str| {
                query
                    .split('&')
                    .find_map(|p| p.strip_prefix(&format!("{name}=")))
                    .map(percent_decode)
                    .unwrap_or_default()
            };
            let back = format!(
                "{}?code=mcpbench-code&state={}",
                param("redirect_uri"),
                percent_encode(&param("state"))
            );
            (StatusCode::FOUND, [("location", back)]).into_response()
        }
        "/token" => (
            [("content-type", "application/json")],
            json!({
                "access_token": ACCESS_TOKEN,
                "token_type": "bearer",
                "expires_in": 86_400,
                "scope": "bench",
            })
            .to_string(),
        )
            .into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The paths of the files both servers share, as arguments.
struct Files {
    config: String,
    secrets: String,
    key: String,
}

/// mcpbox's configuration (the caller's token, the provider), its secrets and its key, in the
/// work directory (secrets and key owner-only).
fn write_files(bench: &Bench, provider: u16) -> anyhow::Result<Files> {
    use std::os::unix::fs::PermissionsExt as _;
    let digest = Sha256::digest(BENCH_TOKEN.as_bytes());
    let config = bench.work.join("brokered.toml");
    std::fs::write(
        &config,
        format!(
            "[tokens.bench]\nsha256 = \"{digest:x}\"\n\n\
             [budgets.principal.\"token:bench\"]\ncalls = 100000\n\
             request_bytes = 1073741824\nrate = 1e9\nburst = 1e9\n\n\
             [providers.bench]\n\
             authorization-endpoint = \"http://127.0.0.1:{provider}/authorize\"\n\
             token-endpoint = \"http://127.0.0.1:{provider}/token\"\n\
             client-id = \"mcpbench\"\n\
             client-secret = {{ secret = \"bench-client-secret\" }}\n\
             scopes = [\"bench\"]\n"
        ),
    )
    .with_context(|| format!("writing {}", config.display()))?;
    let private = |name: &str, text: String| -> anyhow::Result<String> {
        let path = bench.work.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok(path.to_string_lossy().into_owned())
    };
    let secrets = private(
        "brokered-secrets.toml",
        "bench-client-secret = \"mcpbench-client-secret\"\n".to_owned(),
    )?;
    let key = private(
        "brokered.key",
        format!("{:x}\n", Sha256::digest(b"mcpbench brokered key")),
    )?;
    Ok(Files {
        config: config.to_string_lossy().into_owned(),
        secrets,
        key,
    })
}

/// The benchmark plugin with `get`, granted the upstream plainly or as the caller.
fn plugin_dir(bench: &Bench, name: &str, upstream: u16, brokered: bool) -> anyhow::Result<PathBuf> {
    let dir = bench.work.join(name);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("bench.wasm"), &bench.plugin)?;
    let mut manifest =
        format!("[env]\nBENCH_HTTP = \"1\"\n\n[http]\nallow = [\"127.0.0.1:{upstream}\"]\n");
    if brokered {
        manifest.push_str(&format!(
            "\n[http.credentials]\n\"127.0.0.1:{upstream}\" = \"bench\"\n"
        ));
    }
    std::fs::write(dir.join("bench.toml"), manifest)?;
    Ok(dir)
}

/// A 2026-07-28 client of `server` as `token:bench`, checked with `server/discover`.
async fn caller(server: &Server) -> anyhow::Result<Conn> {
    let conn = server.connect()?;
    conn.set_v2026();
    conn.set_bearer(BENCH_TOKEN)?;
    conn.initialize()
        .await
        .context("server/discover as token:bench")?;
    Ok(conn)
}

async fn get(conn: &Conn, url: &str) -> anyhow::Result<()> {
    let text = conn.call_text("get", json!({"url": url})).await?;
    ensure!(text == BODY, "get answered {text:?}");
    Ok(())
}

/// `calls` sequential `get` round trips, µs (unsorted).
async fn round_trips(conn: &Conn, url: &str, calls: usize) -> anyhow::Result<Vec<f64>> {
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let start = Instant::now();
        get(conn, url).await?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(times)
}

/// Link `token:bench`'s account on `server`: its first call, from a client that cannot open
/// URLs, is an error carrying the link URL, which the harness follows as a browser would.
async fn link(server: &Server, conn: &Conn, url: &str) -> anyhow::Result<()> {
    let result = conn
        .request(
            "tools/call",
            json!({"name": "get", "arguments": {"url": url}}),
        )
        .await?;
    let text = result.to_string();
    let at = text
        .find("/oauth/link/start?ticket=")
        .ok_or_else(|| anyhow!("the first brokered call did not ask to link: {result}"))?;
    let path: String = text[at..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !"\"'<>)\\".contains(*c))
        .collect();
    let addr = server
        .addr
        .as_deref()
        .ok_or_else(|| anyhow!("an HTTP server has an address"))?;
    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let start = browser
        .get(format!(
            "http://{addr}{}",
            path.trim_end_matches(['.', ','])
        ))
        .send()
        .await?;
    let cookie = start
        .headers()
        .get("set-cookie")
        .and_then(|c| c.to_str().ok())
        .and_then(|c| c.split(';').next())
        .map(str::to_owned);
    let at_provider = location(&start, "/oauth/link/start")?;
    let authorized = browser.get(&at_provider).send().await?;
    let callback = location(&authorized, "the provider's /authorize")?;
    let mut request = browser.get(&callback);
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let done = request.send().await?;
    if !done.status().is_success() {
        bail!("the link callback answered {}", done.status());
    }
    get(conn, url).await.context("the first call after linking")
}

fn location(response: &reqwest::Response, what: &str) -> anyhow::Result<String> {
    ensure!(
        response.status().is_redirection(),
        "{what} answered {}",
        response.status()
    );
    response
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| anyhow!("{what} redirected nowhere"))
}
