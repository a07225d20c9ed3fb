//! End-to-end tests: the real `mcpbox` binary, the real example plugins (built from
//! `plugins/` for wasm32-wasip2), driven over stdio by the official Rust MCP client (rmcp)
//! and, for malformed input no client would send, by raw JSON-RPC lines.
//!
//! Two sets. The fast one needs nothing but the binary and the plugins; the tests that install
//! or start something else (a Redis, HAProxy, Prometheus or registry server, a browser, the
//! conformance suite, Python and JavaScript toolchains, an authorization server, buildah: all
//! through `external.rs`) are under the `services` module, so that their paths start with
//! `services::` and one filter separates them. No other test's path contains `services::`.
//!
//! ```sh
//! cargo test --workspace                        # everything
//! cargo test -p mcpbox -- --skip services:: --test-threads 4  # the fast set: unit tests and fast e2e
//! cargo test -p mcpbox --test e2e services::    # the service-backed set alone
//! ```

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a panic is a failed test"
)]
#![allow(
    deprecated,
    reason = "the 2025-11-25 features under test (logging, sampling, roots) are deprecated in 2026-07-28"
)]

mod audit;
mod author;
mod bad_input;
mod bounds;
mod budgets;
mod caller_updates;
mod client;
mod config;
mod contract;
mod docs;
mod external;
mod fetch;
mod filesystem;
mod fuzz_http;
mod golden;
mod hardening;
mod http;
mod languages;
mod listings;
mod loading;
mod metrics;
mod multi_user;
mod naming;
mod own_machine;
mod principals;
mod promises;
mod readiness;
mod registry;
mod reload;
mod sandbox;
mod services;
mod skills;
mod state;
mod state_shared;
mod status;
mod support;
mod surface;
mod tasks;
mod time;

#[cfg(feature = "otel")]
mod traces;
mod v2026;
mod wasi_p3;
mod workspace;
