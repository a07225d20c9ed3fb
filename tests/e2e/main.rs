//! End-to-end tests: the real `mcpbox` binary, the real example plugins (built from
//! `plugins/` for wasm32-wasip2), driven over stdio by the official Rust MCP client (rmcp)
//! and, for malformed input no client would send, by raw JSON-RPC lines.

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
mod client;
mod config;
mod conformance;
mod container;
mod contract;
mod docs;
mod fuzz_http;
mod golden;
mod hardening;
mod http;
mod languages;
mod loading;
mod metrics;
mod modern;
mod naming;
mod oauth;
mod principals;
mod python;
mod readiness;
mod registry;
mod reload;
mod sandbox;
mod scale;
mod state;
mod status;
mod support;
mod surface;
mod tools;
mod traces;
mod workspace;
