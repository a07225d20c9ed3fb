//! Transports: how sessions meet clients. Stdio today (the only code that writes to stdout).
//!
//! Depends on `protocol` and `server`; knows nothing of plugins.

pub mod http;
pub mod stdio;
