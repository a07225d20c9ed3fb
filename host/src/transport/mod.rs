//! Transports: how sessions meet clients. stdio (the only code that writes to stdout) and HTTP
//! (Streamable HTTP for both revisions, and the legacy HTTP+SSE transport). They frame bytes,
//! carry headers and hold streams; arrival order, requests in flight and cancellation are the
//! session loop's ([`crate::server::Session::accept`]).
//!
//! Built on `protocol` and `server` (with `auth` for tokens, `kv` for the state store's
//! health and the call ledger's ids, and `credentials` for the routes that link accounts);
//! knows nothing of plugins.
//!
//! Uses: `auth`, `credentials`, `kv`, `metrics`, `principal`, `protocol`, `server`, `telemetry`.

pub mod http;
pub mod stdio;
