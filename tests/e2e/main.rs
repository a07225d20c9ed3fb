//! End-to-end tests: the real `mcpbox` binary, the real example plugins (built from
//! `plugins/` for wasm32-wasip2), driven over stdio by the official Rust MCP client (rmcp)
//! and, for malformed input no client would send, by raw JSON-RPC lines.

mod support;
