//! What is particular to MCP 2025-11-25 and older (the `initialize` era): version
//! negotiation, the `initialize` result, and the error codes of that revision.

use serde::Serialize;

use super::result::{SERVER_INFO, ServerCapabilities, ServerInfo};

/// The handshake versions this server speaks, newest first.
pub const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The version to answer a client that asked for `requested`: the same one if supported,
/// otherwise the newest this server speaks (the client then decides whether to continue).
pub fn negotiate_version(requested: &str) -> &'static str {
    VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(VERSIONS[0])
}

/// Whether `version` is a handshake-era version (`MCP-Protocol-Version` of a 2025-11-25 or older client).
pub fn is_handshake_version(version: &str) -> bool {
    VERSIONS.contains(&version)
}

/// The `initialize` result.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The negotiated version.
    pub protocol_version: &'static str,
    /// What the server offers this session.
    pub capabilities: ServerCapabilities,
    /// Who the server is.
    pub server_info: ServerInfo,
}

impl InitializeResult {
    /// The result for a session that negotiated `version` and is offered `capabilities`.
    pub fn new(version: &'static str, capabilities: ServerCapabilities) -> Self {
        Self {
            protocol_version: version,
            capabilities,
            server_info: SERVER_INFO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_supported_versions_and_offers_the_newest_otherwise() {
        for version in VERSIONS {
            assert_eq!(negotiate_version(version), version);
        }
        assert_eq!(negotiate_version("2099-01-01"), "2025-11-25");
        assert_eq!(negotiate_version("2026-07-28"), "2025-11-25");
        assert_eq!(negotiate_version(""), "2025-11-25");
    }
}
