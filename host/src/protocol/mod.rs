//! The wire protocol: JSON-RPC 2.0 framing, error codes, the MCP message shapes the server
//! reads (decoded once into typed requests) and writes (typed results and notifications),
//! and what differs by revision, in one sibling module per revision ([`v2025`] for the
//! handshake era, [`v2026`] for the stateless one).
//!
//! No tokio, no wasmtime: it turns bytes into typed messages and typed replies into bytes.
//!
//! Uses: nothing else in the crate.

pub mod error;
pub mod jsonrpc;
pub mod mcp;
pub mod request;
pub mod result;
pub mod v2025;
pub mod v2026;

#[cfg(test)]
mod fuzz;

pub use error::ErrorObject;
pub use jsonrpc::{Decoded, Message, Notification, Reply, Request, RequestId, Response};
