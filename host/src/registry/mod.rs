//! Plugins from OCI registries: `mcpbox pull`, `push`, `sign` and `keygen`, and what a managed
//! install needs of them (`install`: resolving a reference with the manifest its author
//! attached, installing into and removing from the managed directory).
//!
//! A plugin is published as the Bytecode Alliance's `wkg` publishes WebAssembly components: an
//! OCI image manifest whose config has the media type `application/vnd.wasm.config.v0+json`
//! (architecture `wasm`, os `wasip2`, the component's imports and exports) and whose one layer
//! is the component, media type `application/wasm`. The registry protocol is `oci-client`'s
//! (anonymous, basic, and bearer-token auth; HTTPS unless the operator marks a host insecure).
//!
//! Pulling fetches the manifest once (by tag or by digest) and takes its digest from its bytes,
//! which must be the digest the registry names it by (`Docker-Content-Digest`), if it names
//! one, then fetches everything by that digest, checks every byte against it (manifest, then
//! component), checks the signature the policy requires ([`trust`]), and only then writes: the
//! lock entry ([`lock`]) first, then the component, each atomically, so a watching host never
//! sees a component its lock does not describe.
//!
//! A registry is not trusted to be small or quick. What mcpbox reads from one is bounded
//! before it is read: a manifest at most [`MAX_MANIFEST_BYTES`] (4 MiB, as oras), a signature
//! manifest [`MAX_SIGNATURE_MANIFEST_BYTES`] listing at most [`MAX_SIGNATURES`] signatures,
//! each at most [`MAX_SIGNATURE_BYTES`], a component [`MAX_COMPONENT_BYTES`]; a declared size
//! over the bound is refused before the transfer, and a transfer is cut as soon as it passes
//! it. Manifests are therefore read here, in a bounded stream, with the credentials
//! `oci-client` negotiated (it reads a manifest whole); cosign signatures are read and written
//! here too (sigstore's own registry client reads them whole and has no timeouts), with
//! sigstore for the cryptography only. Every request has a connect timeout and a timeout on
//! each read (`--registry-timeout`, default [`DEFAULT_TIMEOUT`]); a registry that stops
//! answering is named in the error.
//!
//! Errors say their whole cause in their text, once: none is also chained as a `source`, so
//! printing the chain (`{:#}`) does not repeat it.
//!
//! The loader (`watch`) uses [`trust`] to check lock entries and signatures before loading.
//!
//! The work is split by job, each file in this folder owning one: `artifact` (the wkg layout:
//! media types, the component layer, a component's interfaces), `credentials` (whose
//! credentials each registry gets), `fetch` (the bounded reads: manifests and blobs), `pull`,
//! `push`, `install` (what managed installs need: an artifact resolved with the grants its
//! author asks for, tags, installing into a directory), `index` (the repositories under a
//! path, from the registry's catalog), `sign` (cosign signatures beside an
//! artifact, `sign` and `keygen`), `progress` (the
//! bar on a terminal) and `error` ([`RegistryError`], and every registry failure in words).
//! This file is their public face: the bounds, the client, and the re-exports callers use.
//!
//! All of it but `lock` and `trust` is the cargo feature `registry` (on by default). Without
//! it, `lock` still checks each component against the lock file, and `trust` refuses a
//! `[signatures]` policy that names a key: nothing could check the signatures it requires.
//!
//! Uses: `files`, `scaffold`.

#[cfg(feature = "registry")]
mod artifact;
#[cfg(feature = "registry")]
mod credentials;
#[cfg(feature = "registry")]
mod error;
#[cfg(feature = "registry")]
mod fetch;
#[cfg(feature = "registry")]
pub mod index;
#[cfg(feature = "registry")]
pub mod install;
pub mod lock;
#[cfg(feature = "registry")]
mod progress;
#[cfg(feature = "registry")]
mod pull;
#[cfg(feature = "registry")]
mod push;
#[cfg(feature = "registry")]
mod sign;
pub mod trust;

use std::time::Duration;

#[cfg(feature = "registry")]
use oci_client::{
    Client, Reference,
    client::{ClientConfig, ClientProtocol},
};

#[cfg(feature = "registry")]
pub use self::{
    artifact::{
        CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, PLUGIN_MANIFEST_MEDIA_TYPE,
        component_layer,
    },
    credentials::{PASSWORD_VARIABLE, TOKEN_VARIABLE, USERNAME_VARIABLE},
    error::RegistryError,
    pull::{PullRequest, pull},
    push::{Attachments, push},
    sign::{keygen, sign_file, sign_reference},
};

/// What a command of the `registry` feature says in a build without it.
#[cfg(not(feature = "registry"))]
pub fn not_built(command: &str) -> String {
    format!(
        "mcpbox {command}: this mcpbox was built without registries and signatures (the cargo \
         feature `registry`, on by default)"
    )
}

/// The largest component `pull` accepts: a registry cannot make the host hold more.
pub const MAX_COMPONENT_BYTES: u64 = 512 * 1024 * 1024;
/// The largest plugin manifest (the grants and limits an author attaches with `push
/// --manifest`) read from an artifact: a manifest is a few hundred bytes.
pub const MAX_PLUGIN_MANIFEST_BYTES: u64 = 64 * 1024;
/// The largest manifest `pull` and `sign` read (oras's limit): a component's is under 1 KiB.
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;
/// The largest signature manifest (the `sha256-HEX.sig` tag's): cosign's lists one short
/// descriptor per signature, a few hundred bytes each.
pub const MAX_SIGNATURE_MANIFEST_BYTES: u64 = 1024 * 1024;
/// The most signatures read beside one artifact (cosign adds one per `cosign sign`).
pub const MAX_SIGNATURES: usize = 100;
/// The largest signature payload: a cosign simple-signing document is a few hundred bytes.
pub const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;
/// How long a registry may take to accept a connection, and then each read of its answer,
/// unless `--registry-timeout` (`MCPBOX_REGISTRY_TIMEOUT`) says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Parse a reference.
#[cfg(feature = "registry")]
pub fn parse_reference(reference: &str) -> Result<Reference, RegistryError> {
    reference
        .parse::<Reference>()
        .map_err(|e| RegistryError::Reference {
            reference: reference.to_owned(),
            reason: e.to_string(),
        })
}

/// A registry client: which hosts are plain HTTP, where credentials come from, and how long
/// a registry may keep mcpbox waiting.
#[cfg(feature = "registry")]
pub struct Registry {
    client: Client,
    /// For the requests read here in a bounded stream (manifests), set up as `client`.
    http: reqwest::Client,
    insecure: Vec<String>,
    timeout: Duration,
}

#[cfg(feature = "registry")]
impl Registry {
    /// A client speaking HTTPS to every registry but `insecure` (host or host:port), which are
    /// spoken to in plain HTTP, waiting at most `timeout` for a connection and for each read.
    pub fn new(insecure: &[String], timeout: Duration) -> Result<Self, RegistryError> {
        for host in insecure {
            tracing::warn!(
                registry = %host,
                "speaking plain HTTP to this registry (--insecure-registry): no TLS, anyone on the path can read and change what is sent; the digests and signatures are still checked"
            );
        }
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .read_timeout(timeout)
            .user_agent(concat!("mcpbox/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| RegistryError::Usage(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Self {
            client: Client::new(client_config(insecure, timeout)),
            http,
            insecure: insecure.to_vec(),
            timeout,
        })
    }
}

/// HTTPS to every registry but `insecure`; `timeout` for connecting and for each read.
#[cfg(feature = "registry")]
fn client_config(insecure: &[String], timeout: Duration) -> ClientConfig {
    ClientConfig {
        protocol: ClientProtocol::HttpsExcept(insecure.to_vec()),
        connect_timeout: Some(timeout),
        read_timeout: Some(timeout),
        ..ClientConfig::default()
    }
}
