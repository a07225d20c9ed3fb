//! The wire protocol: JSON-RPC 2.0 framing, error codes, and the MCP message shapes the
//! server reads and writes, with protocol-version negotiation.
//!
//! Depends on nothing else in the crate (no tokio, no wasmtime): it turns bytes into typed
//! messages and typed replies into bytes.

pub mod error;
pub mod jsonrpc;
pub mod mcp;

pub use error::ErrorObject;
pub use jsonrpc::{Decoded, Message, Notification, Reply, Request, RequestId, Response};
