//! Transports: how sessions meet clients. stdio (the only code that writes to stdout) and HTTP
//! (Streamable HTTP for both revisions, and the 2024-11-05 HTTP+SSE transport). They frame bytes,
//! carry headers and hold streams; arrival order, requests in flight and cancellation are the
//! session loop's ([`crate::server::Session::accept`]).
//!
//! They know nothing of plugins.
//!
//! Uses: `auth`, `credentials`, `kv`, `metrics`, `principal`, `protocol`, `server`, `telemetry`.

pub mod http;
pub mod stdio;
