//! Fuzzing harness for the HTTP request path of the real binary: requests built from pieces
//! (methods, paths, the MCP headers with good and bad values, bodies mutated from real
//! messages) and raw bytes, written to a live `mcpbox serve --http` over TCP. Whatever arrives:
//! an answer (or a closed connection for bytes that are not HTTP), never a 5xx, never a hang,
//! and the server still serves afterwards.
//!
//! `cargo test` runs a bounded number of random inputs (bolero's test mode;
//! `BOLERO_RANDOM_ITERATIONS` sets how many).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::support::{HttpServer, plugin_dir};

const METHODS: [&str; 5] = ["POST", "GET", "DELETE", "PUT", "OPTIONS"];
const PATHS: [&str; 5] = ["/mcp", "/sse", "/messages?session_id=x", "/", "/mcp?x=%ff"];
const HEADERS: [&str; 9] = [
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
    "accept",
    "content-type",
    "origin",
    "last-event-id",
    "authorization",
];
const VALUES: [&str; 12] = [
    "2026-07-28",
    "2025-11-25",
    "v999.0.0",
    "tools/call",
    "echo",
    "=?base64?ZWNobw==?=",
    "=?base64?!!?=",
    "application/json, text/event-stream",
    "text/event-stream",
    "http://evil.example.com",
    "0-1",
    "",
];
const BODIES: [&str; 6] = [
    r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
    r#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
    r#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#,
    r#"{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
];

/// Write `request` and read the status code (`None`: the server closed without one). With
/// `half_close`, the write side is shut after the request (for bytes that may not be a whole
/// request, so the server is not left waiting for more).
fn exchange(port: u16, request: &[u8], half_close: bool) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let _ = stream.write_all(request);
    if half_close {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    let mut head = [0u8; 64];
    let mut read = 0;
    while read < 12 {
        match stream.read(&mut head[read..]) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!(
                    "no answer in time to {:?}",
                    String::from_utf8_lossy(request)
                )
            }
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&head[..read]);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

fn check_status(status: Option<u16>, request: &[u8]) {
    if let Some(status) = status {
        assert!(
            status < 500,
            "HTTP {status} for {:?}",
            String::from_utf8_lossy(request)
        );
    }
}

#[tokio::test]
async fn the_http_path_survives_fuzzed_requests() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let server = HttpServer::start(dir.path(), &[]).await;
    let port = server.port;
    tokio::task::spawn_blocking(move || {
        bolero::check!()
            .with_type::<(u8, u8, Vec<(u8, u8)>, u8, Vec<(u16, u8)>)>()
            .for_each(|(method, path, headers, body, edits)| {
                let mut body = BODIES[usize::from(*body) % BODIES.len()].as_bytes().to_vec();
                for (at, byte) in edits.iter().take(8) {
                    let at = usize::from(*at) % body.len().max(1);
                    if at < body.len() {
                        body[at] = *byte;
                    }
                }
                let mut request = format!(
                    "{} {} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-length: {}\r\nconnection: close\r\n",
                    METHODS[usize::from(*method) % METHODS.len()],
                    PATHS[usize::from(*path) % PATHS.len()],
                    body.len()
                )
                .into_bytes();
                for (name, value) in headers.iter().take(12) {
                    let name = HEADERS[usize::from(*name) % HEADERS.len()];
                    let value = VALUES[usize::from(*value) % VALUES.len()];
                    request.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
                }
                request.extend_from_slice(b"\r\n");
                request.extend_from_slice(&body);
                check_status(exchange(port, &request, false), &request);
            });
        bolero::check!().for_each(|bytes: &[u8]| {
            check_status(exchange(port, bytes, true), bytes);
        });
    })
    .await
    .unwrap();
    // Still serving.
    let status = exchange(
        port,
        format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: server/discover\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
            BODIES[5].len(),
            BODIES[5]
        )
        .as_bytes(),
        false,
    );
    assert_eq!(status, Some(200));
    assert!(
        !server.stderr.text().contains("panicked"),
        "{}",
        server.stderr.text()
    );
}
