//! Plugins from OCI registries: `mcpbox pull`, `push`, `sign` and `keygen`.
//!
//! A plugin is published as the Bytecode Alliance's `wkg` publishes WebAssembly components: an
//! OCI image manifest whose config has the media type `application/vnd.wasm.config.v0+json`
//! (architecture `wasm`, os `wasip2`, the component's imports and exports) and whose one layer
//! is the component, media type `application/wasm`. The registry protocol is `oci-client`'s
//! (anonymous, basic, and bearer-token auth; HTTPS unless the operator marks a host insecure).
//!
//! Pulling resolves a tag to a manifest digest once, then fetches everything by that digest,
//! checks every byte against it (manifest, then component), checks the signature the policy
//! requires ([`trust`]), and only then writes: the lock entry ([`lock`]) first, then the
//! component, each atomically, so a watching host never sees a component its lock does not
//! describe.
//!
//! Depends on nothing else of the host but `scaffold` (plugin names); the catalog depends on
//! [`trust`] to check lock entries and signatures before loading.

pub mod lock;
pub mod trust;

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::StreamExt as _;
use oci_client::client::{ClientConfig, ClientProtocol, Config};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sigstore::cosign::constraint::{Constraint as _, PrivateKeySigner};
use sigstore::cosign::{ClientBuilder, CosignCapabilities as _, SignatureLayer};
use sigstore::registry::{Auth, OciReference};

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
    /// A signature check failed (unsigned, or signed by no accepted key).
    #[error("refusing {reference}: {source}")]
    Trust {
        /// The reference.
        reference: String,
        /// Why.
        #[source]
        source: Box<TrustError>,
    },
    /// A key or the lock file could not be used.
    #[error("{0}")]
    Local(Box<TrustError>),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
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

/// A registry client: which hosts are plain HTTP, and where credentials come from.
pub struct Registry {
    client: Client,
    insecure: Vec<String>,
}

impl Registry {
    /// A client speaking HTTPS to every registry but `insecure` (host or host:port), which are
    /// spoken to in plain HTTP.
    pub fn new(insecure: &[String]) -> Self {
        for host in insecure {
            tracing::warn!(
                registry = %host,
                "speaking plain HTTP to this registry (--insecure-registry): no TLS, anyone on the path can read and change what is sent; the digests and signatures are still checked"
            );
        }
        Self {
            client: Client::new(client_config(insecure)),
            insecure: insecure.to_vec(),
        }
    }

    /// A sigstore client speaking to registries as this one does.
    fn sigstore(&self) -> Result<sigstore::cosign::Client, RegistryError> {
        ClientBuilder::default()
            .with_oci_client_config(sigstore::registry::ClientConfig {
                protocol: sigstore::registry::ClientProtocol::HttpsExcept(self.insecure.clone()),
                ..Default::default()
            })
            .build()
            .map_err(|e| RegistryError::Usage(format!("cannot set up sigstore: {e}")))
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

    /// The same credentials, as sigstore takes them.
    fn sigstore_auth(auth: &RegistryAuth) -> Auth {
        match auth {
            RegistryAuth::Anonymous => Auth::Anonymous,
            RegistryAuth::Basic(user, password) => Auth::Basic(user.clone(), password.clone()),
            RegistryAuth::Bearer(token) => Auth::Bearer(token.clone()),
        }
    }

    /// The manifest digest `reference` names: its own digest, or what its tag resolves to now.
    async fn resolve(
        &self,
        reference: &Reference,
        auth: &RegistryAuth,
    ) -> Result<String, RegistryError> {
        let digest = match reference.digest() {
            Some(digest) => digest.to_owned(),
            None => self
                .client
                .fetch_manifest_digest(reference, auth)
                .await
                .map_err(|e| failure(reference, "resolving the tag", e))?,
        };
        if !is_sha256(&digest) {
            return Err(RegistryError::Reference {
                reference: reference.whole(),
                reason: format!(
                    "its digest `{digest}` is not `sha256:` and 64 hex digits, the only kind mcpbox checks"
                ),
            });
        }
        Ok(digest)
    }

    /// The manifest at `pinned` (a digest reference), checked against its digest, and its
    /// component layer.
    async fn manifest(
        &self,
        pinned: &Reference,
        digest: &str,
        auth: &RegistryAuth,
    ) -> Result<(Vec<u8>, OciDescriptor), RegistryError> {
        self.client
            .store_auth_if_needed(pinned.resolve_registry(), auth)
            .await;
        let (bytes, _) = self
            .client
            .pull_manifest_raw(pinned, auth, &[MANIFEST_MEDIA_TYPE])
            .await
            .map_err(|e| failure(pinned, "fetching the manifest", e))?;
        let actual = digest_string(&bytes);
        if actual != digest {
            return Err(RegistryError::Tampered {
                what: "manifest",
                reference: pinned.whole(),
                expected: digest.to_owned(),
                actual,
            });
        }
        let layer = component_layer(&bytes).map_err(|reason| RegistryError::NotComponent {
            reference: pinned.whole(),
            reason,
        })?;
        Ok((bytes.to_vec(), layer))
    }

    /// The component layer's bytes, checked against its digest and size, with progress on a
    /// terminal.
    async fn component(
        &self,
        pinned: &Reference,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, RegistryError> {
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > MAX_COMPONENT_BYTES {
            return Err(RegistryError::NotComponent {
                reference: pinned.whole(),
                reason: format!(
                    "its component is {size} bytes, more than the {MAX_COMPONENT_BYTES} mcpbox accepts"
                ),
            });
        }
        let progress = progress_bar(size, "pulling");
        let mut stream = self
            .client
            .pull_blob_stream(pinned, layer)
            .await
            .map_err(|e| failure(pinned, "fetching the component", e))?;
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                let tampered = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<oci_client::errors::DigestError>());
                match tampered {
                    Some(digest) => RegistryError::Tampered {
                        what: "component",
                        reference: pinned.whole(),
                        expected: layer.digest.clone(),
                        actual: digest.to_string(),
                    },
                    None => RegistryError::Other {
                        registry: pinned.resolve_registry().to_owned(),
                        doing: "fetching the component".to_owned(),
                        reason: error_chain(&e),
                    },
                }
            })?;
            bytes.extend_from_slice(&chunk);
            progress.inc(chunk.len() as u64);
            if bytes.len() as u64 > size {
                return Err(RegistryError::Tampered {
                    what: "component",
                    reference: pinned.whole(),
                    expected: format!("{} ({size} bytes)", layer.digest),
                    actual: format!("more than {size} bytes"),
                });
            }
        }
        progress.finish_and_clear();
        let actual = digest_string(&bytes);
        if actual != layer.digest {
            return Err(RegistryError::Tampered {
                what: "component",
                reference: pinned.whole(),
                expected: layer.digest.clone(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// The cosign signatures stored beside `pinned` (tag `sha256-HEX.sig`), as sigstore reads
    /// them.
    async fn signatures(
        &self,
        pinned: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Vec<SignatureLayer>, RegistryError> {
        let mut client = self.sigstore()?;
        let reference = oci_reference(pinned);
        client
            .trusted_signature_layers(&Self::sigstore_auth(auth), &reference)
            .await
            .map_err(sigstore_failure(pinned, "fetching signatures"))
    }
}

/// A sigstore failure while talking to `reference`'s registry, with what was being done.
fn sigstore_failure(
    reference: &Reference,
    doing: &str,
) -> impl FnOnce(sigstore::errors::SigstoreError) -> RegistryError {
    let (registry, doing) = (reference.resolve_registry().to_owned(), doing.to_owned());
    move |e| RegistryError::Other {
        registry,
        doing,
        reason: e.to_string(),
    }
}

/// HTTPS to every registry but `insecure`.
fn client_config(insecure: &[String]) -> ClientConfig {
    ClientConfig {
        protocol: ClientProtocol::HttpsExcept(insecure.to_vec()),
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

/// A registry failure in words: which registry, what was being done, and what to try.
fn failure(reference: &Reference, doing: &str, error: OciDistributionError) -> RegistryError {
    let registry = reference.resolve_registry().to_owned();
    match error {
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
            let reason = error_chain(&e);
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
            let code = |wanted: &[Code]| envelope.errors.iter().any(|e| wanted.contains(&e.code));
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
        OciDistributionError::DigestError(e) => RegistryError::Tampered {
            what: "blob",
            reference: reference.whole(),
            expected: "the digest it was asked by".to_owned(),
            actual: e.to_string(),
        },
        OciDistributionError::RequestError(e) => RegistryError::Other {
            registry,
            doing: doing.to_owned(),
            reason: error_chain(&e),
        },
        other => RegistryError::Other {
            registry,
            doing: doing.to_owned(),
            reason: other.to_string(),
        },
    }
}

/// An error and its sources, joined.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(next) = source {
        text.push_str(": ");
        text.push_str(&next.to_string());
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
    let digest = registry.resolve(&reference, &auth).await?;
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
    let (manifest, layer) = registry.manifest(&pinned, &digest, &auth).await?;

    // The signature, before the component is even fetched.
    let mut signed = None;
    if let Some(policy) = &request.policy
        && let Some(keys) = policy.required(name)
    {
        let layers = registry.signatures(&pinned, &auth).await?;
        let found = layers
            .iter()
            .filter_map(|l| Some((l, l.signature.as_deref()?)))
            .find_map(|(l, signature)| {
                verify_payload(&keys, &l.raw_data, signature, &digest)
                    .map(|key| (l, signature, key))
            });
        match found {
            Some((layer, signature, key)) => {
                signed = Some(Signed {
                    signer: key.name.clone(),
                    key: key.fingerprint.clone(),
                    payload: BASE64.encode(&layer.raw_data),
                    signature: signature.to_owned(),
                });
            }
            None => {
                let source = if layers.is_empty() {
                    TrustError::Unsigned {
                        name: name.to_owned(),
                        policy: policy.source.clone(),
                        keys: key_names(&keys),
                        looked: format!("the registry holds no signature of {digest}"),
                    }
                } else {
                    TrustError::WrongSigner {
                        name: name.to_owned(),
                        policy: policy.source.clone(),
                        keys: key_names(&keys),
                        found: format!(
                            "the registry holds {} signature(s) of it, none by {}",
                            layers.len(),
                            if keys.len() == 1 {
                                "that key"
                            } else {
                                "those keys"
                            }
                        ),
                    }
                };
                return Err(RegistryError::Trust {
                    reference: pinned.whole(),
                    source: Box::new(source),
                });
            }
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
    if let Err(source) = write_atomically(&target, &wasm) {
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
            source,
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
        .map_err(|source| RegistryError::Io {
            path: file.to_owned(),
            source,
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
        .map_err(|e| failure(&reference, "authenticating to push", e))?;

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
            .map_err(|e| failure(&reference, "uploading the component", e))?;
    }
    progress.finish_and_clear();
    client
        .push_blob(&reference, config.data.clone(), &manifest.config.digest)
        .await
        .map_err(|e| failure(&reference, "uploading the config", e))?;
    let manifest_bytes = serde_json::to_vec(&manifest).unwrap_or_default();
    let digest = digest_string(&manifest_bytes);
    client
        .push_manifest_raw(
            &reference,
            manifest_bytes,
            http::HeaderValue::from_static(MANIFEST_MEDIA_TYPE),
        )
        .await
        .map_err(|e| failure(&reference, "uploading the manifest", e))?;
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
/// signatures already there.
pub async fn sign_reference(
    registry: &Registry,
    reference_text: &str,
    key: &Path,
) -> Result<String, RegistryError> {
    let (signer, fingerprint) = trust::read_signer(key, &trust::password())?;
    let reference = parse_reference(reference_text)?;
    let auth = Registry::auth(&reference);
    let digest = registry.resolve(&reference, &auth).await?;
    let pinned = reference.clone_with_digest(digest.clone());
    // Only component artifacts are signed here.
    registry.manifest(&pinned, &digest, &auth).await?;
    let mut client = registry.sigstore()?;
    let sigstore_auth = Registry::sigstore_auth(&auth);
    let source = oci_reference(&pinned);
    let (signature_image, _) = client
        .triangulate(&source, &sigstore_auth)
        .await
        .map_err(sigstore_failure(&reference, "finding where signatures go"))?;
    let mut layers = registry
        .signatures(&pinned, &auth)
        .await
        .unwrap_or_default();
    let mut layer = SignatureLayer::new_unsigned(&source, &digest)
        .map_err(|e| RegistryError::Usage(format!("cannot build the signature: {e}")))?;
    PrivateKeySigner::new_with_signer(signer)
        .add_constraint(&mut layer)
        .map_err(|e| TrustError::Sign(e.to_string()))?;
    layers.push(layer);
    client
        .push_signature(None, &sigstore_auth, &signature_image, layers)
        .await
        .map_err(sigstore_failure(&reference, "storing the signature"))?;
    Ok(format!(
        "signed {reference_text} ({digest}) with {} ({fingerprint}); the signature is at {}",
        key.display(),
        signature_image
    ))
}

/// `mcpbox sign FILE.wasm --key KEY`: a detached signature of the file's bytes in
/// `FILE.wasm.sig` (what `cosign sign-blob` writes).
pub fn sign_file(file: &Path, key: &Path) -> Result<String, RegistryError> {
    let (signer, fingerprint) = trust::read_signer(key, &trust::password())?;
    let wasm = std::fs::read(file).map_err(|source| RegistryError::Io {
        path: file.to_owned(),
        source,
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
    write_atomically(&target, signature.as_bytes()).map_err(|source| RegistryError::Io {
        path: target.clone(),
        source,
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
        move |source| RegistryError::Io { path, source }
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
