//! Plugins from OCI registries: `mcpbox pull`, `push`, `sign` and `keygen`.
//!
//! A plugin is published as the Bytecode Alliance's `wkg` publishes WebAssembly components: an
//! OCI image manifest whose config has the media type `application/vnd.wasm.config.v0+json`
//! (architecture `wasm`, os `wasip2`, the component's imports and exports) and whose one layer
//! is the component, media type `application/wasm`. The registry protocol is `oci-client`'s
//! (anonymous, basic, and bearer-token auth; HTTPS unless the operator marks a host insecure).
//!
//! Pulling fetches the manifest once (by tag or by digest) and takes its digest from its bytes,
//! then fetches everything by that digest, checks every byte against it (manifest, then
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
//! Depends on nothing else of the host but `scaffold` (plugin names); the catalog depends on
//! [`trust`] to check lock entries and signatures before loading.
//!
//! Uses: `scaffold`.

pub mod lock;
pub mod trust;

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::StreamExt as _;
use oci_client::client::{ClientConfig, ClientProtocol, Config};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sigstore::cosign::SignatureLayer;
use sigstore::cosign::constraint::{Constraint as _, PrivateKeySigner};
use sigstore::cosign::payload::simple_signing::SimpleSigning;
use sigstore::registry::OciReference;

use self::lock::{LOCK_FILE, LockEntry, LockFile, Signed, WriteGuard, write_atomically};
use self::trust::{TrustError, TrustPolicy, digest_string, key_names, verify_payload};

/// The manifest media type of a component artifact (an OCI image manifest).
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config media type of a WebAssembly artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the component layer.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";

/// The largest component `pull` accepts: a registry cannot make the host hold more.
pub const MAX_COMPONENT_BYTES: u64 = 512 * 1024 * 1024;
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

/// The media type of a cosign simple-signing layer.
const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation of a cosign layer that holds its signature (base64).
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// What a manifest request accepts: an OCI image manifest is what `pull` wants; the others
/// are accepted so that a tag pointing elsewhere is named as such, not as missing.
const MANIFEST_ACCEPT: &[&str] = &[
    MANIFEST_MEDIA_TYPE,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// Environment variables with registry credentials (for every registry; else the Docker
/// configuration's, else anonymous).
pub const USERNAME_VARIABLE: &str = "MCPBOX_REGISTRY_USERNAME";
/// See [`USERNAME_VARIABLE`].
pub const PASSWORD_VARIABLE: &str = "MCPBOX_REGISTRY_PASSWORD";
/// A bearer token to send as it is.
pub const TOKEN_VARIABLE: &str = "MCPBOX_REGISTRY_TOKEN";

/// Why a registry command failed. Each names the reference or file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The reference is not an OCI reference.
    #[error(
        "`{reference}` is not a registry reference ({reason}); write it as REGISTRY/REPOSITORY:TAG or REGISTRY/REPOSITORY@sha256:DIGEST"
    )]
    Reference {
        /// What was given.
        reference: String,
        /// Why it does not parse.
        reason: String,
    },
    /// The registry could not be reached.
    #[error("cannot reach the registry {registry}: {reason}{hint}")]
    Unreachable {
        /// The registry.
        registry: String,
        /// Why.
        reason: String,
        /// What to try.
        hint: String,
    },
    /// The registry refused the credentials (or their absence).
    #[error(
        "the registry {registry} refused access to {reference}: {reason}; give credentials in {USERNAME_VARIABLE} and {PASSWORD_VARIABLE} (or {TOKEN_VARIABLE}), or log in with `docker login {registry}`"
    )]
    Denied {
        /// The registry.
        registry: String,
        /// The reference.
        reference: String,
        /// What it said.
        reason: String,
    },
    /// Nothing under that reference.
    #[error("{reference} is not in the registry ({reason})")]
    NotFound {
        /// The reference.
        reference: String,
        /// What the registry said.
        reason: String,
    },
    /// The registry did not accept a connection, or stopped answering, within the timeout.
    #[error(
        "the registry {registry} did not {what} within {seconds} s while {doing} ({reference}); if it is only slow, raise --registry-timeout (MCPBOX_REGISTRY_TIMEOUT)"
    )]
    TimedOut {
        /// The registry.
        registry: String,
        /// `answer` or `accept a connection`.
        what: &'static str,
        /// The timeout.
        seconds: u64,
        /// What was being done.
        doing: String,
        /// The reference.
        reference: String,
    },
    /// The registry sent (or declared) more than mcpbox reads of that kind.
    #[error("refusing {reference}: its {what} is {size}")]
    TooLarge {
        /// The reference.
        reference: String,
        /// What: manifest, signature manifest, signature, component.
        what: &'static str,
        /// Its size and the bound, in words (`over_the_limit`).
        size: String,
    },
    /// The registry sent more bytes than the manifest gives for a blob.
    #[error(
        "the registry sent more than the {size} bytes the manifest gives for the {what} of {reference}: it was tampered with or corrupted, and nothing was written"
    )]
    Overlong {
        /// What: component or signature.
        what: &'static str,
        /// The reference.
        reference: String,
        /// The size the manifest gives.
        size: u64,
    },
    /// The registry sent bytes that do not have the digest they were asked by.
    #[error(
        "the registry sent a {what} for {reference} whose digest is {actual}, not {expected}: it was tampered with or corrupted, and nothing was written"
    )]
    Tampered {
        /// What: manifest or component.
        what: &'static str,
        /// The reference.
        reference: String,
        /// The digest asked for.
        expected: String,
        /// The digest of what came.
        actual: String,
    },
    /// The artifact is not a WebAssembly component in the expected layout.
    #[error("{reference} is not a WebAssembly component artifact: {reason}")]
    NotComponent {
        /// The reference (or file).
        reference: String,
        /// Why.
        reason: String,
    },
    /// `--locked` and the tag moved.
    #[error(
        "{reference} now resolves to {now}, but {lock} pins it to {locked}: the tag moved since it was locked; refusing under --locked (pull without --locked to accept the new digest)"
    )]
    TagMoved {
        /// The reference.
        reference: String,
        /// The lock file.
        lock: PathBuf,
        /// The digest it records.
        locked: String,
        /// The digest the tag has now.
        now: String,
    },
    /// `--locked` and nothing locked for the plugin.
    #[error("{lock} has no entry for `{name}` from {reference}: nothing to pull under --locked")]
    NotLocked {
        /// The plugin.
        name: String,
        /// The reference.
        reference: String,
        /// The lock file.
        lock: PathBuf,
    },
    /// A signature check failed (unsigned, signed by no accepted key, or signatures of
    /// another artifact).
    #[error("refusing {reference}: {reason}")]
    Trust {
        /// The reference.
        reference: String,
        /// Why (said in the text, not chained).
        reason: Box<TrustError>,
    },
    /// A key or the lock file could not be used.
    #[error("{0}")]
    Local(Box<TrustError>),
    /// A file could not be read or written.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why (said in the text, not chained).
        error: std::io::Error,
    },
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// Any other registry failure, with what was being done.
    #[error("the registry {registry} failed while {doing}: {reason}")]
    Other {
        /// The registry.
        registry: String,
        /// What was being done.
        doing: String,
        /// Its error.
        reason: String,
    },
}

impl From<TrustError> for RegistryError {
    fn from(error: TrustError) -> Self {
        Self::Local(Box::new(error))
    }
}

/// Parse a reference.
pub fn parse_reference(reference: &str) -> Result<Reference, RegistryError> {
    reference
        .parse::<Reference>()
        .map_err(|e| RegistryError::Reference {
            reference: reference.to_owned(),
            reason: e.to_string(),
        })
}

/// The component layer of a component artifact's manifest (its exact bytes): its config and
/// its one `application/wasm` layer are checked.
pub fn component_layer(manifest: &[u8]) -> Result<OciDescriptor, String> {
    let manifest: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|e| format!("its manifest is not an OCI image manifest: {e}"))?;
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(format!(
            "its config is `{}`, not `{CONFIG_MEDIA_TYPE}`",
            manifest.config.media_type
        ));
    }
    let mut wasm = manifest
        .layers
        .into_iter()
        .filter(|l| l.media_type == LAYER_MEDIA_TYPE);
    match (wasm.next(), wasm.next()) {
        (Some(layer), None) if !is_sha256(&layer.digest) => Err(format!(
            "its component's digest `{}` is not `sha256:` and 64 hex digits, the only kind mcpbox checks",
            layer.digest
        )),
        (Some(layer), None) => Ok(layer),
        (None, _) => Err(format!("it has no `{LAYER_MEDIA_TYPE}` layer")),
        (Some(_), Some(_)) => Err(format!(
            "it has more than one `{LAYER_MEDIA_TYPE}` layer; a plugin is one component"
        )),
    }
}

/// Whether `digest` is `sha256:` and 64 lower-case hex digits.
fn is_sha256(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A registry client: which hosts are plain HTTP, where credentials come from, and how long
/// a registry may keep mcpbox waiting.
pub struct Registry {
    client: Client,
    /// For the requests read here in a bounded stream (manifests), set up as `client`.
    http: reqwest::Client,
    insecure: Vec<String>,
    timeout: Duration,
}

/// A cosign signature read from beside an artifact.
struct FoundSignature {
    /// The simple-signing payload, its exact bytes.
    payload: Vec<u8>,
    /// The signature of the payload (base64), from the layer's annotation.
    signature: Option<String>,
    /// The manifest digest the payload names, if it is a simple-signing document.
    names: Option<String>,
}

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

    /// Credentials for `reference`'s registry: the environment's, else the Docker
    /// configuration's (`docker login`, credential helpers), else anonymous.
    fn auth(reference: &Reference) -> RegistryAuth {
        let registry = reference.resolve_registry();
        if let Ok(token) = std::env::var(TOKEN_VARIABLE) {
            tracing::debug!(registry, "using the bearer token in {TOKEN_VARIABLE}");
            return RegistryAuth::Bearer(token);
        }
        if let (Ok(user), Ok(password)) = (
            std::env::var(USERNAME_VARIABLE),
            std::env::var(PASSWORD_VARIABLE),
        ) {
            tracing::debug!(
                registry,
                user,
                "using the credentials in {USERNAME_VARIABLE}"
            );
            return RegistryAuth::Basic(user, password);
        }
        match docker_credential::get_credential(registry) {
            Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
                tracing::debug!(
                    registry,
                    user,
                    "using the Docker configuration's credentials"
                );
                RegistryAuth::Basic(user, password)
            }
            Ok(docker_credential::DockerCredential::IdentityToken(_)) => {
                tracing::debug!(
                    registry,
                    "the Docker configuration holds an identity token, which mcpbox cannot use; pulling anonymously"
                );
                RegistryAuth::Anonymous
            }
            Err(_) => RegistryAuth::Anonymous,
        }
    }

    /// The manifest `reference` names (by tag or by digest), read in a bounded stream, and its
    /// digest (of the bytes read). A digest reference must have sent exactly that digest.
    async fn manifest(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<(String, Vec<u8>), RegistryError> {
        if let Some(digest) = reference.digest()
            && !is_sha256(digest)
        {
            return Err(RegistryError::Reference {
                reference: reference.whole(),
                reason: format!(
                    "its digest `{digest}` is not `sha256:` and 64 hex digits, the only kind mcpbox checks"
                ),
            });
        }
        let target = reference
            .digest()
            .or(reference.tag())
            .unwrap_or("latest")
            .to_owned();
        let bytes = self
            .get_bounded(
                reference,
                &format!("manifests/{target}"),
                MANIFEST_ACCEPT,
                (MAX_MANIFEST_BYTES, "manifest"),
                reference,
                auth,
            )
            .await?
            .ok_or_else(|| RegistryError::NotFound {
                reference: reference.whole(),
                reason: "the registry has no manifest under it".to_owned(),
            })?;
        let digest = digest_string(&bytes);
        if let Some(expected) = reference.digest()
            && expected != digest
        {
            return Err(RegistryError::Tampered {
                what: "manifest",
                reference: reference.whole(),
                expected: expected.to_owned(),
                actual: digest,
            });
        }
        Ok((digest, bytes))
    }

    /// GET `/v2/REPOSITORY/PATH` of `from`'s registry with the credentials `oci-client`
    /// negotiates, reading at most `limit.0` bytes (`limit.1` names what, for the error, which
    /// names `named`). `Ok(None)`: the registry has nothing there (404).
    async fn get_bounded(
        &self,
        from: &Reference,
        path: &str,
        accept: &[&str],
        (limit, what): (u64, &'static str),
        named: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Option<Vec<u8>>, RegistryError> {
        let doing = format!("fetching the {what}");
        let token = self
            .client
            .auth(from, auth, oci_client::RegistryOperation::Pull)
            .await
            .map_err(|e| self.failure(named, &doing, e))?;
        let registry = from.resolve_registry();
        let scheme = if self.insecure.iter().any(|h| h == registry) {
            "http"
        } else {
            "https"
        };
        let url = format!("{scheme}://{registry}/v2/{}/{path}", from.repository());
        let mut request = self
            .http
            .get(&url)
            .header(http::header::ACCEPT, accept.join(", "));
        request = match (token, auth) {
            (Some(token), _) => request.bearer_auth(token),
            (None, RegistryAuth::Basic(user, password)) => request.basic_auth(user, Some(password)),
            (None, _) => request,
        };
        let mut response = request
            .send()
            .await
            .map_err(|e| self.request_failure(named, &doing, &e))?;
        let status = response.status();
        if status == http::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            // The registry's explanation, bounded too.
            let mut body = Vec::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                body.extend_from_slice(&chunk);
                if body.len() > 4096 {
                    break;
                }
            }
            let reason = serde_json::from_slice::<oci_client::errors::OciEnvelope>(&body)
                .ok()
                .and_then(|e| e.errors.into_iter().next())
                .map_or_else(|| status.to_string(), |e| e.message);
            return Err(
                if status == http::StatusCode::UNAUTHORIZED || status == http::StatusCode::FORBIDDEN
                {
                    RegistryError::Denied {
                        registry: registry.to_owned(),
                        reference: named.whole(),
                        reason,
                    }
                } else {
                    RegistryError::Other {
                        registry: registry.to_owned(),
                        doing,
                        reason: format!("it answered {status}: {reason}"),
                    }
                },
            );
        }
        let too_large = |size: Option<u64>| RegistryError::TooLarge {
            reference: named.whole(),
            what,
            size: over_the_limit(size, limit),
        };
        let declared = response.content_length();
        if let Some(declared) = declared
            && declared > limit
        {
            return Err(too_large(Some(declared)));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(declared.unwrap_or(0)).unwrap_or(0));
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.request_failure(named, &doing, &e))?
        {
            if (bytes.len() + chunk.len()) as u64 > limit {
                // Cut here: a declared length was a lie, or there was none.
                return Err(too_large(None));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(bytes))
    }

    /// The blob `layer` of `from`, at most `limit` bytes, checked against its digest and size
    /// (`what` names it and `named` the artifact, for errors), with progress on a terminal.
    async fn blob(
        &self,
        from: &Reference,
        layer: &OciDescriptor,
        (limit, what): (u64, &'static str),
        named: &Reference,
    ) -> Result<Vec<u8>, RegistryError> {
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > limit {
            return Err(RegistryError::TooLarge {
                reference: named.whole(),
                what,
                size: over_the_limit(Some(size), limit),
            });
        }
        let doing = format!("fetching the {what}");
        let progress = progress_bar(size, "pulling");
        let mut stream = self
            .client
            .pull_blob_stream(from, layer)
            .await
            .map_err(|e| self.failure(named, &doing, e))?;
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                let tampered = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<oci_client::errors::DigestError>());
                match tampered {
                    Some(oci_client::errors::DigestError::VerificationError { actual, .. }) => {
                        RegistryError::Tampered {
                            what,
                            reference: named.whole(),
                            expected: layer.digest.clone(),
                            actual: actual.clone(),
                        }
                    }
                    _ => match self.timed_out(&e) {
                        Some(timed_out) => timed_out(named, &doing),
                        None => RegistryError::Other {
                            registry: named.resolve_registry().to_owned(),
                            doing: doing.clone(),
                            reason: error_chain(&e),
                        },
                    },
                }
            })?;
            bytes.extend_from_slice(&chunk);
            progress.inc(chunk.len() as u64);
            if bytes.len() as u64 > size {
                return Err(RegistryError::Overlong {
                    what,
                    reference: named.whole(),
                    size,
                });
            }
        }
        progress.finish_and_clear();
        let actual = digest_string(&bytes);
        if actual != layer.digest {
            return Err(RegistryError::Tampered {
                what,
                reference: named.whole(),
                expected: layer.digest.clone(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// The component layer's bytes, checked against its digest and size.
    async fn component(
        &self,
        pinned: &Reference,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, RegistryError> {
        self.blob(pinned, layer, (MAX_COMPONENT_BYTES, "component"), pinned)
            .await
    }

    /// The cosign signatures stored beside `pinned` (tag `sha256-HEX.sig` of its `digest`),
    /// each bounded: none if there is no such tag.
    async fn signatures(
        &self,
        pinned: &Reference,
        digest: &str,
        auth: &RegistryAuth,
    ) -> Result<Vec<FoundSignature>, RegistryError> {
        let tag = signature_tag(pinned, digest);
        let Some(bytes) = self
            .get_bounded(
                &tag,
                &format!("manifests/{}", tag.tag().unwrap_or_default()),
                MANIFEST_ACCEPT,
                (MAX_SIGNATURE_MANIFEST_BYTES, "signature manifest"),
                pinned,
                auth,
            )
            .await?
        else {
            return Ok(Vec::new());
        };
        let manifest: OciImageManifest =
            serde_json::from_slice(&bytes).map_err(|e| RegistryError::Other {
                registry: pinned.resolve_registry().to_owned(),
                doing: "reading the signatures".to_owned(),
                reason: format!(
                    "the manifest of {} is not an OCI image manifest: {e}",
                    tag.whole()
                ),
            })?;
        let layers: Vec<&OciDescriptor> = manifest
            .layers
            .iter()
            .filter(|l| l.media_type == SIGNATURE_MEDIA_TYPE)
            .collect();
        if layers.len() > MAX_SIGNATURES {
            return Err(RegistryError::TooLarge {
                reference: pinned.whole(),
                what: "signature manifest",
                size: format!(
                    "a list of {} signatures, over the {MAX_SIGNATURES} mcpbox reads",
                    layers.len()
                ),
            });
        }
        let mut found = Vec::with_capacity(layers.len());
        for layer in layers {
            if !is_sha256(&layer.digest) {
                tracing::debug!(digest = %layer.digest, "skipping a signature layer whose digest mcpbox cannot check");
                continue;
            }
            let payload = self
                .blob(&tag, layer, (MAX_SIGNATURE_BYTES, "signature"), pinned)
                .await?;
            let names = serde_json::from_slice::<SimpleSigning>(&payload)
                .ok()
                .map(|s| s.critical.image.docker_manifest_digest);
            found.push(FoundSignature {
                payload,
                signature: layer
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                    .cloned(),
                names,
            });
        }
        Ok(found)
    }

    /// If `error` (or its cause) is a timeout: the error naming the registry and the timeout.
    fn timed_out(
        &self,
        error: &(dyn std::error::Error + 'static),
    ) -> Option<impl Fn(&Reference, &str) -> RegistryError + use<>> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = next {
            // An I/O error's `source` skips the error it wraps: look inside it too.
            let wrapped = e
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<reqwest::Error>());
            if let Some(request) = e.downcast_ref::<reqwest::Error>().or(wrapped)
                && request.is_timeout()
            {
                let what = if request.is_connect() {
                    "accept a connection"
                } else {
                    "answer"
                };
                let seconds = self.timeout.as_secs();
                return Some(
                    move |reference: &Reference, doing: &str| RegistryError::TimedOut {
                        registry: reference.resolve_registry().to_owned(),
                        what,
                        seconds,
                        doing: doing.to_owned(),
                        reference: reference.whole(),
                    },
                );
            }
            next = e.source();
        }
        None
    }

    /// A failed request (of `reqwest`, here or inside `oci-client`) in words.
    fn request_failure(
        &self,
        reference: &Reference,
        doing: &str,
        error: &reqwest::Error,
    ) -> RegistryError {
        if let Some(timed_out) = self.timed_out(error) {
            return timed_out(reference, doing);
        }
        let registry = reference.resolve_registry().to_owned();
        let reason = error_chain(error);
        if !error.is_connect() {
            return RegistryError::Other {
                registry,
                doing: doing.to_owned(),
                reason,
            };
        }
        let hint = if reason.contains("InvalidContentType") {
            format!(
                " (it seems to speak plain HTTP: if so, mark it with --insecure-registry {registry}, only for a registry on a network you trust)"
            )
        } else if reason.contains("certificate") || reason.contains("UnknownIssuer") {
            " (its certificate is not trusted here: if a private CA signed it, point SSL_CERT_FILE at a PEM bundle holding that CA)".to_owned()
        } else {
            String::new()
        };
        RegistryError::Unreachable {
            registry,
            reason,
            hint,
        }
    }

    /// A registry failure in words: which registry, what was being done, and what to try.
    fn failure(
        &self,
        reference: &Reference,
        doing: &str,
        error: OciDistributionError,
    ) -> RegistryError {
        let registry = reference.resolve_registry().to_owned();
        match error {
            OciDistributionError::RequestError(e) => self.request_failure(reference, doing, &e),
            OciDistributionError::AuthenticationFailure(reason) => RegistryError::Denied {
                registry,
                reference: reference.whole(),
                reason,
            },
            OciDistributionError::ServerError {
                code: 401 | 403,
                message,
                ..
            } => RegistryError::Denied {
                registry,
                reference: reference.whole(),
                reason: serde_json::from_str::<oci_client::errors::OciEnvelope>(&message)
                    .ok()
                    .and_then(|e| e.errors.into_iter().next())
                    .map(|e| e.message)
                    .unwrap_or(message),
            },
            OciDistributionError::UnauthorizedError { .. } => RegistryError::Denied {
                registry,
                reference: reference.whole(),
                reason: "not authorized".to_owned(),
            },
            OciDistributionError::ImageManifestNotFoundError(reason) => RegistryError::NotFound {
                reference: reference.whole(),
                reason,
            },
            OciDistributionError::RegistryError { envelope, .. } => {
                use oci_client::errors::OciErrorCode as Code;
                let reason = envelope
                    .errors
                    .iter()
                    .map(|e| format!("{:?}: {}", e.code, e.message))
                    .collect::<Vec<_>>()
                    .join("; ");
                let code =
                    |wanted: &[Code]| envelope.errors.iter().any(|e| wanted.contains(&e.code));
                if code(&[Code::Unauthorized, Code::Denied]) {
                    RegistryError::Denied {
                        registry,
                        reference: reference.whole(),
                        reason,
                    }
                } else if code(&[Code::ManifestUnknown, Code::NameUnknown, Code::BlobUnknown]) {
                    RegistryError::NotFound {
                        reference: reference.whole(),
                        reason,
                    }
                } else {
                    RegistryError::Other {
                        registry,
                        doing: doing.to_owned(),
                        reason,
                    }
                }
            }
            OciDistributionError::DigestError(
                oci_client::errors::DigestError::VerificationError { expected, actual },
            ) => RegistryError::Tampered {
                what: "blob",
                reference: reference.whole(),
                expected,
                actual,
            },
            other => RegistryError::Other {
                registry,
                doing: doing.to_owned(),
                reason: error_chain(&other),
            },
        }
    }
}

/// Where cosign keeps the signatures of `digest` beside `pinned`: the tag `sha256-HEX.sig`.
fn signature_tag(pinned: &Reference, digest: &str) -> Reference {
    Reference::with_tag(
        pinned.registry().to_owned(),
        pinned.repository().to_owned(),
        format!("{}.sig", digest.replace(':', "-")),
    )
}

/// A size over `limit` in words: `5242880 bytes, over the 4194304 bytes (4 MiB) mcpbox
/// accepts`; `None`: the size is not known (no length was sent, or more came than it said).
fn over_the_limit(size: Option<u64>, limit: u64) -> String {
    match size {
        Some(size) => format!(
            "{size} bytes, over the {} mcpbox accepts",
            bytes_in_words(limit)
        ),
        None => format!(
            "over the {} mcpbox accepts (reading stopped there)",
            bytes_in_words(limit)
        ),
    }
}

/// `n` bytes in words: `4194304 bytes (4 MiB)`.
fn bytes_in_words(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{n} bytes ({} MiB)", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{n} bytes ({} KiB)", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// HTTPS to every registry but `insecure`; `timeout` for connecting and for each read.
fn client_config(insecure: &[String], timeout: Duration) -> ClientConfig {
    ClientConfig {
        protocol: ClientProtocol::HttpsExcept(insecure.to_vec()),
        connect_timeout: Some(timeout),
        read_timeout: Some(timeout),
        ..ClientConfig::default()
    }
}

/// A sigstore reference for an oci-client one.
fn oci_reference(reference: &Reference) -> OciReference {
    match reference.digest() {
        Some(digest) => OciReference::with_digest(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            digest.to_owned(),
        ),
        None => OciReference::with_tag(
            reference.registry().to_owned(),
            reference.repository().to_owned(),
            reference.tag().unwrap_or("latest").to_owned(),
        ),
    }
}

/// An error and its sources, joined.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(next) = source {
        let next_text = next.to_string();
        // Many errors embed their source's text already: say it once.
        if !text.contains(&next_text) {
            text.push_str(": ");
            text.push_str(&next_text);
        }
        source = next.source();
    }
    text
}

/// A progress bar on stderr when it is a terminal and the transfer is large enough to watch;
/// hidden otherwise.
fn progress_bar(size: u64, verb: &str) -> indicatif::ProgressBar {
    if size < 1024 * 1024 || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(size),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec} {eta}",
    ) {
        bar.set_style(style);
    }
    bar.set_message(verb.to_owned());
    bar
}

/// What `mcpbox pull` is asked.
#[derive(Debug, Clone)]
pub struct PullRequest {
    /// The reference, or `None` to pull everything the lock file holds (with `locked`).
    pub reference: Option<String>,
    /// The plugin directory to write into.
    pub dir: PathBuf,
    /// The plugin's name (default: the repository's last segment).
    pub name: Option<String>,
    /// Refuse anything that is not exactly what the lock file holds.
    pub locked: bool,
    /// The signature policy (the configuration's, with any `--key`).
    pub policy: Option<TrustPolicy>,
}

/// `mcpbox pull`: fetch, check and install each plugin asked for; a report line for each.
pub async fn pull(registry: &Registry, request: PullRequest) -> Result<String, RegistryError> {
    let lock_file = request.dir.join(LOCK_FILE);
    if !request.dir.is_dir() {
        return Err(RegistryError::Usage(format!(
            "{} is not a directory: create it, or pull into another with --to DIR",
            request.dir.display()
        )));
    }
    let jobs: Vec<(String, String)> = match &request.reference {
        Some(reference) => {
            let name = match &request.name {
                Some(name) => name.clone(),
                None => default_name(&parse_reference(reference)?)?,
            };
            vec![(name, reference.clone())]
        }
        None if request.locked => {
            let lock = LockFile::read(&lock_file)
                .map_err(TrustError::from)?
                .ok_or_else(|| {
                    RegistryError::Usage(format!(
                        "{} does not exist: nothing to pull under --locked",
                        lock_file.display()
                    ))
                })?;
            lock.plugins
                .into_iter()
                .map(|(name, entry)| (name, entry.reference))
                .collect()
        }
        None => {
            return Err(RegistryError::Usage(
                "give a reference to pull, or --locked to pull everything the lock file holds"
                    .to_owned(),
            ));
        }
    };
    match jobs.as_slice() {
        [] => {
            return Ok(format!(
                "nothing to pull: {} holds no plugins",
                lock_file.display()
            ));
        }
        [(name, reference)] => return pull_one(registry, &request, name, reference).await,
        _ => {}
    }
    // Everything the lock holds: try each, so one that fails does not keep the others away.
    let mut report = Vec::new();
    let mut failed = Vec::new();
    for (name, reference) in &jobs {
        match pull_one(registry, &request, name, reference).await {
            Ok(line) => {
                tracing::info!("{line}");
                report.push(line);
            }
            Err(e) => {
                tracing::error!(plugin = %name, "{e}");
                failed.push(name.as_str());
            }
        }
    }
    if failed.is_empty() {
        Ok(report.join("\n"))
    } else {
        Err(RegistryError::Usage(format!(
            "pulled {} of the {} plugins in {}; could not pull {} (see above)",
            report.len(),
            jobs.len(),
            lock_file.display(),
            failed.join(", ")
        )))
    }
}

/// The plugin name a reference gives: its repository's last segment.
fn default_name(reference: &Reference) -> Result<String, RegistryError> {
    let last = reference
        .repository()
        .rsplit('/')
        .next()
        .unwrap_or_default();
    if crate::scaffold::valid_name(last) {
        Ok(last.to_owned())
    } else {
        Err(RegistryError::Usage(format!(
            "the repository's last segment `{last}` is not a plugin name (lower-case letters, digits, `_` and `-`, starting with a letter); name it with --name"
        )))
    }
}

/// Signatures that name other digests, in words: each digest once, with the keys among
/// `keys` that signed it, if any did.
fn other_signatures(others: &[&FoundSignature], keys: &[&trust::TrustedKey]) -> String {
    let mut digests: Vec<(&str, Vec<&str>)> = Vec::new();
    for found in others {
        let digest = found.names.as_deref().unwrap_or("an unreadable payload");
        let signer = found.signature.as_deref().and_then(|signature| {
            keys.iter()
                .find(|key| key.verifies(signature, &found.payload))
        });
        let at = match digests.iter().position(|(d, _)| *d == digest) {
            Some(at) => at,
            None => {
                digests.push((digest, Vec::new()));
                digests.len() - 1
            }
        };
        if let Some(key) = signer
            && !digests[at].1.contains(&key.name.as_str())
        {
            digests[at].1.push(key.name.as_str());
        }
    }
    digests
        .iter()
        .map(|(digest, signers)| match signers.as_slice() {
            [] => (*digest).to_owned(),
            signers => format!(
                "{digest}, by {}",
                signers
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Pull one plugin `name` from `reference` into the request's directory.
async fn pull_one(
    registry: &Registry,
    request: &PullRequest,
    name: &str,
    reference_text: &str,
) -> Result<String, RegistryError> {
    if !crate::scaffold::valid_name(name) {
        return Err(RegistryError::Usage(format!(
            "`{name}` is not a plugin name (lower-case letters, digits, `_` and `-`, starting with a letter)"
        )));
    }
    let reference = parse_reference(reference_text)?;
    let lock_file = request.dir.join(LOCK_FILE);
    let lock = LockFile::read(&lock_file)
        .map_err(TrustError::from)?
        .unwrap_or_else(LockFile::new);
    let auth = Registry::auth(&reference);
    let (digest, manifest) = registry.manifest(&reference, &auth).await?;
    if request.locked {
        let entry = lock
            .plugins
            .get(name)
            .filter(|e| e.reference == reference_text)
            .ok_or_else(|| RegistryError::NotLocked {
                name: name.to_owned(),
                reference: reference_text.to_owned(),
                lock: lock_file.clone(),
            })?;
        if entry.digest != digest {
            return Err(RegistryError::TagMoved {
                reference: reference_text.to_owned(),
                lock: lock_file,
                locked: entry.digest.clone(),
                now: digest,
            });
        }
    }
    let pinned = reference.clone_with_digest(digest.clone());
    let layer = component_layer(&manifest).map_err(|reason| RegistryError::NotComponent {
        reference: pinned.whole(),
        reason,
    })?;

    // The signature, before the component is even fetched.
    let mut signed = None;
    if let Some(policy) = &request.policy
        && let Some(keys) = policy.required(name)
    {
        let found = registry.signatures(&pinned, &digest, &auth).await?;
        let (of_this, of_others): (Vec<&FoundSignature>, Vec<&FoundSignature>) = found
            .iter()
            .partition(|s| s.names.as_deref() == Some(digest.as_str()));
        let verified = of_this.iter().find_map(|s| {
            let signature = s.signature.as_deref()?;
            verify_payload(&keys, &s.payload, signature, &digest).map(|key| (s, signature, key))
        });
        if let Some((found, signature, key)) = verified {
            signed = Some(Signed {
                signer: key.name.clone(),
                key: key.fingerprint.clone(),
                payload: BASE64.encode(&found.payload),
                signature: signature.to_owned(),
            });
        } else {
            let (name, source, keys_named) =
                (name.to_owned(), policy.source.clone(), key_names(&keys));
            let reason = if !of_this.is_empty() {
                TrustError::WrongSigner {
                    name,
                    policy: source,
                    keys: keys_named,
                    found: format!(
                        "the registry holds {} signature(s) of it, none by {}",
                        of_this.len(),
                        if keys.len() == 1 {
                            "that key"
                        } else {
                            "those keys"
                        }
                    ),
                }
            } else if !of_others.is_empty() {
                TrustError::SignedOther {
                    name,
                    policy: source,
                    keys: keys_named,
                    digest: digest.clone(),
                    others: other_signatures(&of_others, &keys),
                }
            } else {
                TrustError::Unsigned {
                    name,
                    policy: source,
                    keys: keys_named,
                    looked: format!("the registry holds no signature of {digest}"),
                }
            };
            return Err(RegistryError::Trust {
                reference: pinned.whole(),
                reason: Box::new(reason),
            });
        }
    }

    let wasm = registry.component(&pinned, &layer).await?;
    if !wasmparser::Parser::is_component(&wasm) {
        return Err(RegistryError::NotComponent {
            reference: pinned.whole(),
            reason: "its layer is not a WebAssembly component (a core module?)".to_owned(),
        });
    }

    // The lock entry first, then the component: a watching host reads the lock when the
    // component changes, so it never sees a component its lock does not describe.
    let entry = LockEntry {
        reference: reference_text.to_owned(),
        digest: digest.clone(),
        component: layer.digest.clone(),
        manifest: BASE64.encode(&manifest),
        signed: signed.clone(),
    };
    let target = request.dir.join(format!("{name}.wasm"));
    // One writer at a time: read the lock again under the guard, so that concurrent pulls into
    // one directory keep each other's entries.
    let _guard = WriteGuard::acquire(&request.dir).map_err(TrustError::from)?;
    let mut lock = LockFile::read(&lock_file)
        .map_err(TrustError::from)?
        .unwrap_or_else(LockFile::new);
    if !lock.plugins.contains_key(name) && target.exists() {
        tracing::warn!(
            file = %target.display(),
            "replacing a plugin the lock file did not describe (placed by hand?)"
        );
    }
    let previous = lock.plugins.insert(name.to_owned(), entry);
    lock.write(&lock_file).map_err(TrustError::from)?;
    if let Err(error) = write_atomically(&target, &wasm) {
        // Put the lock back as it was, so it still describes the file that is there.
        match previous {
            Some(previous) => lock.plugins.insert(name.to_owned(), previous),
            None => lock.plugins.remove(name),
        };
        if let Err(e) = lock.write(&lock_file) {
            tracing::error!(
                "could not restore the lock file after failing to write the component: {e}"
            );
        }
        return Err(RegistryError::Io {
            path: target,
            error,
        });
    }
    let signer = match &signed {
        Some(signed) => format!(", signed by `{}` ({})", signed.signer, signed.key),
        None => String::new(),
    };
    Ok(format!(
        "pulled {reference_text} ({digest}) into {}{signer}",
        target.display()
    ))
}

/// `mcpbox push FILE REF`: publish a component as a WebAssembly artifact; returns the digest
/// reference it can be pulled by.
pub async fn push(
    registry: &Registry,
    file: &Path,
    reference_text: &str,
) -> Result<String, RegistryError> {
    let reference = parse_reference(reference_text)?;
    let wasm = tokio::fs::read(file)
        .await
        .map_err(|error| RegistryError::Io {
            path: file.to_owned(),
            error,
        })?;
    let (imports, exports) =
        component_interfaces(&wasm).map_err(|reason| RegistryError::NotComponent {
            reference: file.display().to_string(),
            reason,
        })?;
    let component_digest = digest_string(&wasm);
    let config = serde_json::json!({
        "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [component_digest],
        "component": { "exports": exports, "imports": imports },
    });
    let config = Config {
        data: serde_json::to_vec(&config).unwrap_or_default().into(),
        media_type: CONFIG_MEDIA_TYPE.to_owned(),
        annotations: None,
    };
    let title = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let layer_annotations = BTreeMap::from([("org.opencontainers.image.title".to_owned(), title)]);
    // Shared, not copied: the layer, the chunks and the digest all read the one buffer.
    let wasm = bytes::Bytes::from(wasm);
    let layer = oci_client::client::ImageLayer::new(
        wasm.clone(),
        LAYER_MEDIA_TYPE.to_owned(),
        Some(layer_annotations),
    );
    let mut manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    manifest.media_type = Some(MANIFEST_MEDIA_TYPE.to_owned());
    let auth = Registry::auth(&reference);
    let client = &registry.client;
    client
        .store_auth_if_needed(reference.resolve_registry(), &auth)
        .await;
    client
        .auth(&reference, &auth, oci_client::RegistryOperation::Push)
        .await
        .map_err(|e| registry.failure(&reference, "authenticating to push", e))?;

    // The component in chunks, so a terminal shows progress.
    let size = wasm.len() as u64;
    let progress = progress_bar(size, "pushing");
    const CHUNK: usize = 1024 * 1024;
    let chunks: Vec<bytes::Bytes> = (0..wasm.len())
        .step_by(CHUNK)
        .map(|start| wasm.slice(start..(start + CHUNK).min(wasm.len())))
        .collect();
    let bar = progress.clone();
    let stream = futures::stream::iter(chunks).map(move |chunk| {
        bar.inc(chunk.len() as u64);
        Ok::<_, OciDistributionError>(chunk)
    });
    if !client
        .blob_exists(&reference, &component_digest)
        .await
        .unwrap_or(false)
    {
        client
            .push_blob_stream(&reference, stream, &component_digest, Some(size))
            .await
            .map_err(|e| registry.failure(&reference, "uploading the component", e))?;
    }
    progress.finish_and_clear();
    client
        .push_blob(&reference, config.data.clone(), &manifest.config.digest)
        .await
        .map_err(|e| registry.failure(&reference, "uploading the config", e))?;
    let manifest_bytes = serde_json::to_vec(&manifest).unwrap_or_default();
    let digest = digest_string(&manifest_bytes);
    client
        .push_manifest_raw(
            &reference,
            manifest_bytes,
            http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(|e| registry.failure(&reference, "uploading the manifest", e))?;
    Ok(format!(
        "pushed {} to {reference_text}\n{}/{}@{digest}",
        file.display(),
        reference.registry(),
        reference.repository()
    ))
}

/// A component's top-level imports and exports, by name; an error if it is not a component.
fn component_interfaces(wasm: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    use wasmparser::{Parser, Payload};
    if !Parser::is_component(wasm) {
        return Err(
            "not a WebAssembly component (a core module? build for wasm32-wasip2)".to_owned(),
        );
    }
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(|e| format!("not a valid component: {e}"))?;
        match payload {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    let import = import.map_err(|e| format!("not a valid component: {e}"))?;
                    imports.push(import.name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    let export = export.map_err(|e| format!("not a valid component: {e}"))?;
                    exports.push(export.name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    Ok((imports, exports))
}

/// `mcpbox sign REF --key KEY`: sign the artifact's manifest digest with cosign's
/// simple-signing payload and store the signature beside it (`sha256-HEX.sig`), keeping the
/// signatures of that digest already there. The layout is cosign's, so `cosign verify` reads
/// it; the registry traffic is this client's (bounded, with timeouts).
pub async fn sign_reference(
    registry: &Registry,
    reference_text: &str,
    key: &Path,
) -> Result<String, RegistryError> {
    let (signer, fingerprint) = trust::read_signer(key, &trust::password())?;
    let reference = parse_reference(reference_text)?;
    let auth = Registry::auth(&reference);
    let (digest, manifest) = registry.manifest(&reference, &auth).await?;
    let pinned = reference.clone_with_digest(digest.clone());
    // Only component artifacts are signed here.
    component_layer(&manifest).map_err(|reason| RegistryError::NotComponent {
        reference: pinned.whole(),
        reason,
    })?;
    let mut layer = SignatureLayer::new_unsigned(&oci_reference(&pinned), &digest)
        .map_err(|e| RegistryError::Usage(format!("cannot build the signature: {e}")))?;
    PrivateKeySigner::new_with_signer(signer)
        .add_constraint(&mut layer)
        .map_err(|e| TrustError::Sign(e.to_string()))?;
    let existing = registry.signatures(&pinned, &digest, &auth).await?;
    let signature_layer = |payload: Vec<u8>, signature: Option<String>| {
        oci_client::client::ImageLayer::new(
            payload,
            SIGNATURE_MEDIA_TYPE.to_owned(),
            Some(
                signature
                    .map(|s| (SIGNATURE_ANNOTATION.to_owned(), s))
                    .into_iter()
                    .collect(),
            ),
        )
    };
    let layers: Vec<_> = existing
        .into_iter()
        .filter(|s| s.names.as_deref() == Some(digest.as_str()))
        .map(|s| signature_layer(s.payload, s.signature))
        .chain(std::iter::once(signature_layer(
            layer.raw_data,
            layer.signature,
        )))
        .collect();
    let config = Config::oci_v1(b"{}".to_vec(), None);
    let mut signatures = OciImageManifest::build(&layers, &config, None);
    signatures.media_type = Some(MANIFEST_MEDIA_TYPE.to_owned());
    let target = signature_tag(&pinned, &digest);
    registry
        .client
        .push(&target, &layers, config, &auth, Some(signatures))
        .await
        .map_err(|e| registry.failure(&reference, "storing the signature", e))?;
    Ok(format!(
        "signed {reference_text} ({digest}) with {} ({fingerprint}); the signature is at {}",
        key.display(),
        target.whole()
    ))
}

/// `mcpbox sign FILE.wasm --key KEY`: a detached signature of the file's bytes in
/// `FILE.wasm.sig` (what `cosign sign-blob` writes).
pub fn sign_file(file: &Path, key: &Path) -> Result<String, RegistryError> {
    let (signer, fingerprint) = trust::read_signer(key, &trust::password())?;
    let wasm = std::fs::read(file).map_err(|error| RegistryError::Io {
        path: file.to_owned(),
        error,
    })?;
    if !wasmparser::Parser::is_component(&wasm) {
        return Err(RegistryError::NotComponent {
            reference: file.display().to_string(),
            reason: "not a WebAssembly component (a core module? build for wasm32-wasip2)"
                .to_owned(),
        });
    }
    let signature = trust::sign_bytes(&signer, &wasm)?;
    let target = trust::signature_file(file);
    write_atomically(&target, signature.as_bytes()).map_err(|error| RegistryError::Io {
        path: target.clone(),
        error,
    })?;
    Ok(format!(
        "signed {} ({}) with {} ({fingerprint}) into {}",
        file.display(),
        digest_string(&wasm),
        key.display(),
        target.display()
    ))
}

/// `mcpbox keygen PREFIX`: a new key pair, `PREFIX.key` (encrypted with `COSIGN_PASSWORD`,
/// cosign's format, readable by its owner only) and `PREFIX.pub`.
pub fn keygen(prefix: &Path) -> Result<String, RegistryError> {
    let password = trust::password();
    let (private, public) = trust::generate_key_pair(&password)?;
    let with = |extension: &str| {
        let mut path = prefix.as_os_str().to_owned();
        path.push(extension);
        PathBuf::from(path)
    };
    let (private_file, public_file) = (with(".key"), with(".pub"));
    for file in [&private_file, &public_file] {
        if file.exists() {
            return Err(RegistryError::Usage(format!(
                "{} exists; not overwriting a key",
                file.display()
            )));
        }
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |error| RegistryError::Io { path, error }
    };
    write_atomically(&private_file, private.as_bytes()).map_err(io(&private_file))?;
    write_atomically(&public_file, public.as_bytes()).map_err(io(&public_file))?;
    let warning = if password.is_empty() {
        format!(
            " (with an empty password: set {} to choose one)",
            trust::PASSWORD_VARIABLE
        )
    } else {
        String::new()
    };
    Ok(format!(
        "wrote the private key {}{warning} and the public key {}",
        private_file.display(),
        public_file.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[(&str, &str)]) -> Vec<u8> {
        serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": config, "digest": format!("sha256:{}", "1".repeat(64)), "size": 2},
            "layers": layers.iter().map(|(media_type, digest)| serde_json::json!({
                "mediaType": media_type, "digest": digest, "size": 8,
            })).collect::<Vec<_>>(),
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn only_wkgs_layout_with_one_sha256_component_is_a_plugin() {
        let good = format!("sha256:{}", "a".repeat(64));
        let layer = component_layer(&manifest(CONFIG_MEDIA_TYPE, &[(LAYER_MEDIA_TYPE, &good)]));
        assert_eq!(layer.unwrap().digest, good);
        // Other layers (an SBOM, say) beside the component are fine.
        let with_other = manifest(
            CONFIG_MEDIA_TYPE,
            &[("application/spdx+json", &good), (LAYER_MEDIA_TYPE, &good)],
        );
        assert!(component_layer(&with_other).is_ok());
        for (bytes, expected) in [
            (
                manifest(
                    "application/vnd.oci.image.config.v1+json",
                    &[(LAYER_MEDIA_TYPE, &good)],
                ),
                "its config is",
            ),
            (
                manifest(CONFIG_MEDIA_TYPE, &[]),
                "no `application/wasm` layer",
            ),
            (
                manifest(
                    CONFIG_MEDIA_TYPE,
                    &[(LAYER_MEDIA_TYPE, &good), (LAYER_MEDIA_TYPE, &good)],
                ),
                "more than one",
            ),
            (
                manifest(
                    CONFIG_MEDIA_TYPE,
                    &[(LAYER_MEDIA_TYPE, &format!("sha512:{}", "a".repeat(128)))],
                ),
                "not `sha256:`",
            ),
            (b"{}".to_vec(), "not an OCI image manifest"),
        ] {
            let error = component_layer(&bytes).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
        assert!(!is_sha256(&format!("sha256:{}", "A".repeat(64))));
        assert!(!is_sha256("sha256:abc"));
    }

    #[test]
    fn a_core_module_is_not_a_component() {
        let core_module = b"\0asm\x01\0\0\0";
        let error = component_interfaces(core_module).unwrap_err();
        assert!(error.contains("core module"), "{error}");
        let error = component_interfaces(b"not wasm").unwrap_err();
        assert!(error.contains("not a WebAssembly component"), "{error}");
    }
}
