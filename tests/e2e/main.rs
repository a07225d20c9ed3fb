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
//! cargo test -p mcpbox -- --skip services::   # the fast set: unit tests and fast e2e
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

/// Four tests at a time unless told otherwise (`--test-threads` or `RUST_TEST_THREADS`), on a
/// machine of fewer cores too: most of these tests wait on a child process (mcpbox, a plugin
/// build, a service), not on a core, and libtest's default of one test per core left a 2-core
/// machine idle for a third of the run (TESTING.md, where the time goes). It runs before
/// `main`, where libtest reads the variable, as the first code of the process.
#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "a constructor is the only code that runs before libtest's main"
)]
#[used]
#[unsafe(link_section = ".init_array")]
static FOUR_AT_A_TIME: extern "C" fn() = four_at_a_time;

#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "setting the environment is sound while one thread runs"
)]
extern "C" fn four_at_a_time() {
    const THREADS: usize = 4;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if std::env::var_os("RUST_TEST_THREADS").is_none() && cores < THREADS {
        // SAFETY: constructors run before `main`, on the process's only thread.
        unsafe { std::env::set_var("RUST_TEST_THREADS", THREADS.to_string()) };
    }
}

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
