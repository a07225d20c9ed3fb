//! The TLS client configuration of the host's own outgoing connections: plugins' HTTPS
//! (`engine::egress`) and OAuth's fetches of the issuer's metadata and keys (`auth`). It
//! trusts webpki's roots (the container image has no system store) and names aws-lc-rs, the
//! one crypto provider linked, explicitly: nothing is installed process-wide.
//!
//! Uses: nothing.

use std::sync::{Arc, LazyLock};

/// Built once for the process.
static CLIENT: LazyLock<Option<Arc<rustls::ClientConfig>>> = LazyLock::new(|| {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .ok()
    .map(|builder| Arc::new(builder.with_root_certificates(roots).with_no_client_auth()))
});

/// The configuration, shared; `None` if the provider offers no safe protocol version.
pub fn client_config() -> Option<Arc<rustls::ClientConfig>> {
    CLIENT.clone()
}
