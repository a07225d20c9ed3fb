//! What the host checks before it loads a plugin ([`Trust::check`], called by the loader in
//! `watch`): the plugin's lock entry, when its directory has a lock file (parsed once per
//! version of that file, known by its `files::Identity`), and its signature, under the policy
//! naming which plugins must be signed by which of the operator's public keys (`[signatures]`
//! in the configuration file). Also the key and signing primitives `mcpbox sign` and
//! `mcpbox keygen` use (the commands themselves are in `sign`).
//!
//! Two kinds of signature are understood, both cosign's, both keyed and checked offline with
//! the sigstore crate (no transparency log, no certificate authority):
//!
//! - an artifact in a registry is signed by a cosign "simple signing" payload naming its
//!   manifest digest, stored beside it under the tag `sha256-HEX.sig` (what `cosign sign --key`
//!   writes and `cosign verify --key` reads). `mcpbox pull` checks it, and records the payload,
//!   the signature and the manifest in the lock file, so the chain payload → manifest →
//!   component is checked again, offline, whenever the plugin is loaded;
//! - a component file is signed by a detached signature of its bytes in `NAME.wasm.sig` (what
//!   `cosign sign-blob --key` writes and `cosign verify-blob --key` reads), for plugins that
//!   never went through a registry.
//!
//! Without the cargo feature `registry` there is no sigstore to check signatures with: no key
//! can be read ([`TrustedKey::read`] says why), so a policy naming one is refused when it is
//! read, and lock entries are still checked by digest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest as _, Sha256};
#[cfg(feature = "registry")]
use {
    base64::Engine as _,
    base64::engine::general_purpose::STANDARD as BASE64,
    sigstore::cosign::payload::simple_signing::{CRITICAL_TYPE_NAME, SimpleSigning},
    sigstore::crypto::signing_key::SigStoreKeyPair,
    sigstore::crypto::{CosignVerificationKey, SigStoreSigner, Signature, SigningScheme},
    zeroize::Zeroizing,
};

use super::lock::{LOCK_FILE, LockEntry, LockError, LockFile, Signed};

/// The environment variable holding the password of an encrypted private key (cosign's).
pub const PASSWORD_VARIABLE: &str = "COSIGN_PASSWORD";

/// Why a plugin's signature or lock entry refused it, or a key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The component is not the one the lock file names.
    #[error(
        "its digest is {actual}, but {lock} says `{name}` is {expected} (pulled from {reference}): the file was replaced after it was pulled; pull it again (`mcpbox pull {reference}`) or remove its entry from the lock file"
    )]
    Swapped {
        /// The plugin.
        name: String,
        /// The lock file.
        lock: PathBuf,
        /// The digest the lock file records.
        expected: String,
        /// The file's digest.
        actual: String,
        /// Where it was pulled from.
        reference: String,
    },
    /// The policy requires a signature and there is none.
    #[error(
        "the signature policy in {policy} requires `{name}` to be signed by {keys}, and it is not signed ({looked})"
    )]
    Unsigned {
        /// The plugin.
        name: String,
        /// The configuration file holding the policy.
        policy: String,
        /// The keys it accepts.
        keys: String,
        /// Where signatures were looked for.
        looked: String,
    },
    /// Signatures exist, none by an accepted key.
    #[error(
        "the signature policy in {policy} requires `{name}` to be signed by {keys}, and {found}"
    )]
    WrongSigner {
        /// The plugin.
        name: String,
        /// The configuration file holding the policy.
        policy: String,
        /// The keys it accepts.
        keys: String,
        /// What was found instead.
        found: String,
    },
    /// Signatures exist beside the artifact, but of another artifact: they were copied there
    /// (or the tag was overwritten), and a signature counts only for the digest it names.
    #[error(
        "the signature policy in {policy} requires `{name}` to be signed by {keys}, and the only signatures beside it are of another artifact ({others}), not of {digest}: a signature counts only for the digest it names"
    )]
    SignedOther {
        /// The plugin.
        name: String,
        /// The configuration file holding the policy.
        policy: String,
        /// The keys it accepts.
        keys: String,
        /// The digest that was to be signed.
        digest: String,
        /// The digests the signatures name (and who signed, when a key is accepted).
        others: String,
    },
    /// The lock file could not be read (said in the text, not chained).
    #[error("{0}")]
    Lock(LockError),
    /// A key file could not be read or used.
    #[error("key {}: {message}", file.display())]
    Key {
        /// The key file.
        file: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Signing failed.
    #[error("cannot sign: {0}")]
    Sign(String),
}

impl From<LockError> for TrustError {
    fn from(error: LockError) -> Self {
        Self::Lock(error)
    }
}

/// One public key the operator trusts, by the name the policy gives it.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    /// Its name in the policy.
    pub name: String,
    /// The PEM file it was read from.
    pub file: PathBuf,
    #[cfg(feature = "registry")]
    key: CosignVerificationKey,
    /// Without the `registry` feature no key can be read, so none exists.
    #[cfg(not(feature = "registry"))]
    key: std::convert::Infallible,
    /// `sha256:` of its DER form (SubjectPublicKeyInfo), to say which key signed.
    pub fingerprint: String,
}

impl TrustedKey {
    /// Without the `registry` feature: refused, naming the feature.
    #[cfg(not(feature = "registry"))]
    pub fn read(_name: &str, file: &Path) -> Result<Self, TrustError> {
        Err(TrustError::Key {
            file: file.to_owned(),
            message: "this mcpbox cannot check signatures: it was built without the cargo \
                      feature `registry` (on by default)"
                .to_owned(),
        })
    }

    /// Without the `registry` feature there is no key to verify with.
    #[cfg(not(feature = "registry"))]
    pub fn verifies(&self, _signature: &str, _message: &[u8]) -> bool {
        match self.key {}
    }

    /// Read a PEM public key (as `cosign generate-key-pair` or `mcpbox keygen` writes).
    #[cfg(feature = "registry")]
    pub fn read(name: &str, file: &Path) -> Result<Self, TrustError> {
        let error = |message: String| TrustError::Key {
            file: file.to_owned(),
            message,
        };
        let text = std::fs::read(file).map_err(|e| error(format!("cannot read it: {e}")))?;
        let key = CosignVerificationKey::try_from_pem(&text)
            .map_err(|e| error(format!("not a PEM public key sigstore can use: {e}")))?;
        let der = pem::parse(&text)
            .map_err(|e| error(format!("not PEM: {e}")))?
            .into_contents();
        Ok(Self {
            name: name.to_owned(),
            file: file.to_owned(),
            key,
            fingerprint: digest_string(&der),
        })
    }

    /// Whether `signature` (base64) is this key's signature of `message`.
    #[cfg(feature = "registry")]
    pub fn verifies(&self, signature: &str, message: &[u8]) -> bool {
        self.key
            .verify_signature(
                Signature::Base64Encoded(signature.trim().as_bytes()),
                message,
            )
            .is_ok()
    }
}

/// `sha256:HEX` of `bytes`.
pub fn digest_string(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Which plugins must be signed, by which keys: the `[signatures]` table of the configuration.
#[derive(Debug, Clone, Default)]
pub struct TrustPolicy {
    /// Where it was read from (for messages).
    pub source: String,
    /// The keys, by name.
    pub keys: BTreeMap<String, TrustedKey>,
    /// Plugin name (or `*`, every plugin) → the names of the keys any one of which must have
    /// signed it.
    pub require: BTreeMap<String, Vec<String>>,
}

impl TrustPolicy {
    /// Read the `[signatures]` table of the configuration file `file`: `keys` maps names to PEM
    /// files (relative to the configuration file), `require` maps plugin names (or `*`) to
    /// lists of key names. Errors name the key at fault.
    pub fn from_table(file: &Path, table: &toml::Table) -> Result<Self, String> {
        let base = file.parent().unwrap_or(Path::new("."));
        let mut policy = Self {
            source: file.display().to_string(),
            ..Self::default()
        };
        for (key, value) in table {
            match (key.as_str(), value) {
                ("keys", toml::Value::Table(keys)) => {
                    for (name, path) in keys {
                        let toml::Value::String(path) = path else {
                            return Err(format!(
                                "`signatures.keys.{name}`: expected the path of a PEM public key"
                            ));
                        };
                        let trusted = TrustedKey::read(name, &base.join(path))
                            .map_err(|e| format!("`signatures.keys.{name}`: {e}"))?;
                        policy.keys.insert(name.clone(), trusted);
                    }
                }
                ("require", toml::Value::Table(require)) => {
                    for (plugin, names) in require {
                        let names: Vec<String> = match names {
                            toml::Value::String(one) => vec![one.clone()],
                            toml::Value::Array(many) => many
                                .iter()
                                .map(|n| n.as_str().map(str::to_owned))
                                .collect::<Option<_>>()
                                .ok_or_else(|| {
                                    format!("`signatures.require.{plugin}`: expected key names")
                                })?,
                            _ => {
                                return Err(format!(
                                    "`signatures.require.{plugin}`: expected a key name or a list of them"
                                ));
                            }
                        };
                        if names.is_empty() {
                            return Err(format!(
                                "`signatures.require.{plugin}`: name at least one key (remove the line to require none)"
                            ));
                        }
                        policy.require.insert(plugin.clone(), names);
                    }
                }
                ("keys" | "require", _) => {
                    return Err(format!("`signatures.{key}`: expected a table"));
                }
                (other, _) => {
                    return Err(format!(
                        "`signatures.{other}`: unknown key (expected `keys` and `require`)"
                    ));
                }
            }
        }
        for (plugin, names) in &policy.require {
            for name in names {
                if !policy.keys.contains_key(name) {
                    return Err(format!(
                        "`signatures.require.{plugin}` names the key `{name}`, which `signatures.keys` does not define"
                    ));
                }
            }
        }
        Ok(policy)
    }

    /// The keys one of which must have signed `plugin`, if any must.
    pub fn required(&self, plugin: &str) -> Option<Vec<&TrustedKey>> {
        let names = self.require.get(plugin).or_else(|| self.require.get("*"))?;
        Some(names.iter().filter_map(|n| self.keys.get(n)).collect())
    }

    /// Require every plugin to be signed by `key` as well as whatever this policy says (an
    /// ad-hoc `--key` on the command line).
    pub fn add_required_key(&mut self, key: TrustedKey) {
        let name = key.name.clone();
        self.keys.insert(name.clone(), key);
        self.require.entry("*".to_owned()).or_default().push(name);
    }
}

/// The names of `keys`, for messages: `acme` or `one of acme, beta`.
pub fn key_names(keys: &[&TrustedKey]) -> String {
    match keys {
        [one] => format!("the key `{}`", one.name),
        many => format!(
            "one of the keys {}",
            many.iter()
                .map(|k| format!("`{}`", k.name))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A cosign simple-signing payload that names `manifest_digest`, checked: the key among `keys`
/// whose signature `signature` of `payload` is, if any.
#[cfg(feature = "registry")]
pub fn verify_payload<'k>(
    keys: &[&'k TrustedKey],
    payload: &[u8],
    signature: &str,
    manifest_digest: &str,
) -> Option<&'k TrustedKey> {
    let signing: SimpleSigning = serde_json::from_slice(payload).ok()?;
    if signing.critical.type_name != CRITICAL_TYPE_NAME
        || signing.critical.image.docker_manifest_digest != manifest_digest
    {
        return None;
    }
    keys.iter()
        .find(|key| key.verifies(signature, payload))
        .copied()
}

/// Where a loaded component came from and who signed it, as the checks before loading found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// The reference it was pulled from and the manifest digest that resolved to (its lock
    /// entry), if it was pulled.
    pub pulled: Option<(String, String)>,
    /// The key that verified its signature, when the policy required one.
    pub signer: Option<String>,
}

/// What the host checks before loading a plugin: its lock entry (when its directory has a lock
/// file) and its signature (when the policy requires one); and which directory holds the
/// plugins installed with a user's consent (`[manage]`), whose grants the loader holds to what
/// the user approved.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    policy: Option<Arc<TrustPolicy>>,
    /// The managed directory (`[manage]`), if any.
    managed: Option<PathBuf>,
    /// The lock file last read, by its identity (`files::Identity`): loading many plugins
    /// from one directory parses it once, and a lock file rewritten (in place, or a new file
    /// renamed into place) is read again.
    lock: Arc<std::sync::Mutex<CachedLock>>,
}

/// The lock file last read: which version, and its content (`None`: there was none).
type CachedLock = Option<(LockIdentity, Option<Arc<LockFile>>)>;

/// What identifies one version of a lock file without reading it: its path and its identity.
type LockIdentity = (PathBuf, crate::files::Identity);

impl Trust {
    /// Checking lock files, and signatures under `policy`.
    pub fn new(policy: Option<TrustPolicy>) -> Self {
        Self {
            policy: policy.map(Arc::new),
            managed: None,
            lock: Arc::default(),
        }
    }

    /// With `dir` as the managed directory (`[manage]`).
    #[must_use]
    pub fn managing(mut self, dir: Option<PathBuf>) -> Self {
        self.managed = dir;
        self
    }

    /// Whether plugin file `file` was installed with a user's consent (it is in the managed
    /// directory).
    pub fn is_managed(&self, file: &Path) -> bool {
        self.managed.is_some() && file.parent() == self.managed.as_deref()
    }

    /// The lock file at `path` (`None` if there is none), parsed once per version.
    fn lock_file(&self, path: &Path) -> Result<Option<Arc<LockFile>>, LockError> {
        let identity = match crate::files::Identity::of_path(path) {
            Ok(identity) => (path.to_owned(), identity),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(LockError::Io {
                    file: path.to_owned(),
                    error,
                });
            }
        };
        let mut cached = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((known, lock)) = cached.as_ref()
            && *known == identity
        {
            return Ok(lock.clone());
        }
        let lock = LockFile::read(path)?.map(Arc::new);
        *cached = Some((identity, lock.clone()));
        Ok(lock)
    }

    /// The signature policy, if any.
    pub fn policy(&self) -> Option<&TrustPolicy> {
        self.policy.as_deref()
    }

    /// Whether checking the plugin `name` may need its component's bytes, not only their
    /// digest: when the policy requires it to be signed (a detached signature is of the bytes).
    pub fn needs_bytes(&self, name: &str) -> bool {
        self.policy
            .as_deref()
            .is_some_and(|policy| policy.required(name).is_some())
    }

    /// Check the component of the plugin `name`, read from `file`, whose SHA-256 is `digest`
    /// (its bytes are `wasm`, if they were read: see [`Trust::needs_bytes`]): the digest its
    /// lock entry records, then its signature. Returns where it came from and the key that
    /// signed it, when one was required.
    pub fn check(
        &self,
        file: &Path,
        name: &str,
        wasm: Option<&[u8]>,
        digest: &[u8; 32],
    ) -> Result<Provenance, TrustError> {
        let dir = file.parent().unwrap_or(Path::new("."));
        let lock = self.lock_file(&dir.join(LOCK_FILE))?;
        let actual = format!("sha256:{}", hex::encode(digest));
        let entry = lock.as_ref().and_then(|lock| lock.plugins.get(name));
        if let Some(entry) = entry
            && entry.component != actual
        {
            return Err(TrustError::Swapped {
                name: name.to_owned(),
                lock: dir.join(LOCK_FILE),
                expected: entry.component.clone(),
                actual,
                reference: entry.reference.clone(),
            });
        }
        let mut provenance = Provenance {
            pulled: entry.map(|e| (e.reference.clone(), e.digest.clone())),
            signer: None,
        };
        let Some(policy) = self.policy.as_deref() else {
            return Ok(provenance);
        };
        let Some(keys) = policy.required(name) else {
            return Ok(provenance);
        };
        let sig_file = signature_file(file);
        let mut found = Vec::new();
        if let Some(entry) = entry
            && let Some(signed) = &entry.signed
        {
            match verify_locked(&keys, entry, signed, &actual) {
                Ok(key) => {
                    provenance.signer = Some(key.name.clone());
                    return Ok(provenance);
                }
                Err(why) => found.push(why),
            }
        }
        match crate::files::read_to_string(&sig_file) {
            Ok(signature) => match wasm {
                Some(wasm) => match keys.iter().find(|k| k.verifies(&signature, wasm)) {
                    Some(key) => {
                        provenance.signer = Some(key.name.clone());
                        return Ok(provenance);
                    }
                    None => found.push(format!(
                        "{} is not a signature of it by any of them",
                        sig_file.display()
                    )),
                },
                None => found.push(format!(
                    "{} was not checked: the component's bytes were not read",
                    sig_file.display()
                )),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => found.push(format!("{} cannot be read: {e}", sig_file.display())),
        }
        if found.is_empty() {
            Err(TrustError::Unsigned {
                name: name.to_owned(),
                policy: policy.source.clone(),
                keys: key_names(&keys),
                looked: format!(
                    "no signature recorded for it in {} (`mcpbox pull --config` with this policy records one), no {} beside it",
                    dir.join(LOCK_FILE).display(),
                    sig_file.display()
                ),
            })
        } else {
            Err(TrustError::WrongSigner {
                name: name.to_owned(),
                policy: policy.source.clone(),
                keys: key_names(&keys),
                found: found.join("; "),
            })
        }
    }
}

/// The detached signature of a component file: `NAME.wasm.sig`.
pub fn signature_file(wasm: &Path) -> PathBuf {
    let mut name = wasm.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// Without the `registry` feature no key exists to check a chain with.
#[cfg(not(feature = "registry"))]
fn verify_locked<'k>(
    keys: &[&'k TrustedKey],
    _entry: &LockEntry,
    _signed: &Signed,
    _component: &str,
) -> Result<&'k TrustedKey, String> {
    keys.first()
        .map(|key| match key.key {})
        .ok_or_else(|| "no key to check its signature with".to_owned())
}

/// The chain a lock entry records, checked offline: the payload is signed by one of `keys` and
/// names the manifest, whose digest is the entry's, and whose one component layer is the file
/// (`component`, its digest).
#[cfg(feature = "registry")]
fn verify_locked<'k>(
    keys: &[&'k TrustedKey],
    entry: &LockEntry,
    signed: &Signed,
    component: &str,
) -> Result<&'k TrustedKey, String> {
    let decode = |what: &str, text: &str| {
        BASE64
            .decode(text.trim())
            .map_err(|e| format!("the lock file's {what} is not base64: {e}"))
    };
    let manifest = decode("manifest", &entry.manifest)?;
    if digest_string(&manifest) != entry.digest {
        return Err("the lock file's manifest does not have the digest it records".to_owned());
    }
    if super::component_layer(&manifest).map(|l| l.digest) != Ok(component.to_owned()) {
        return Err("the lock file's manifest does not name this component".to_owned());
    }
    let payload = decode("signed payload", &signed.payload)?;
    verify_payload(keys, &payload, &signed.signature, &entry.digest).ok_or_else(|| {
        format!(
            "the signature recorded when it was pulled (by `{}`) is not by any of them",
            signed.signer
        )
    })
}

/// The password of private keys: `COSIGN_PASSWORD`, empty if unset (as cosign does).
#[cfg(feature = "registry")]
pub fn password() -> Zeroizing<Vec<u8>> {
    Zeroizing::new(
        std::env::var(PASSWORD_VARIABLE)
            .unwrap_or_default()
            .into_bytes(),
    )
}

/// A private key for signing, and its public key's fingerprint: cosign's encrypted PEM
/// (decrypted with `password`) or an unencrypted PKCS#8 PEM.
#[cfg(feature = "registry")]
pub fn read_signer(file: &Path, password: &[u8]) -> Result<(SigStoreSigner, String), TrustError> {
    let error = |message: String| TrustError::Key {
        file: file.to_owned(),
        message,
    };
    let text =
        Zeroizing::new(std::fs::read(file).map_err(|e| error(format!("cannot read it: {e}")))?);
    let encrypted = String::from_utf8_lossy(&text).contains("ENCRYPTED");
    let pair = if encrypted {
        SigStoreKeyPair::from_encrypted_pem(&text, password).map_err(|e| {
            error(format!(
                "cannot decrypt it ({e}); is {PASSWORD_VARIABLE} set to its password?"
            ))
        })?
    } else {
        SigStoreKeyPair::from_pem(&text)
            .map_err(|e| error(format!("not a PEM private key sigstore can use: {e}")))?
    };
    let scheme = match &pair {
        SigStoreKeyPair::ED25519(_) => SigningScheme::ED25519,
        SigStoreKeyPair::RSA(_) => SigningScheme::RSA_PKCS1_SHA256(0),
        SigStoreKeyPair::ECDSA(_) => SigningScheme::ECDSA_P256_SHA256_ASN1,
    };
    let signer = pair
        .to_sigstore_signer(&scheme)
        .map_err(|e| error(format!("cannot sign with it: {e}")))?;
    let public = pair
        .public_key_to_der()
        .map_err(|e| error(format!("cannot read its public key: {e}")))?;
    Ok((signer, digest_string(&public)))
}

/// A detached signature (base64, as `cosign sign-blob` writes) of `bytes` by `signer`.
#[cfg(feature = "registry")]
pub fn sign_bytes(signer: &SigStoreSigner, bytes: &[u8]) -> Result<String, TrustError> {
    let signature = signer
        .sign(bytes)
        .map_err(|e| TrustError::Sign(e.to_string()))?;
    Ok(BASE64.encode(signature))
}

/// A new ECDSA P-256 key pair, as cosign makes them: the private key encrypted with `password`
/// (cosign's format) and the public key, both PEM.
#[cfg(feature = "registry")]
pub fn generate_key_pair(password: &[u8]) -> Result<(Zeroizing<String>, String), TrustError> {
    let failed = |e: sigstore::errors::SigstoreError| TrustError::Sign(e.to_string());
    let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
        .create_signer()
        .map_err(failed)?;
    let pair = signer.to_sigstore_keypair().map_err(failed)?;
    Ok((
        pair.private_key_to_encrypted_pem(password)
            .map_err(failed)?,
        pair.public_key_to_pem().map_err(failed)?,
    ))
}

#[cfg(test)]
#[cfg(feature = "registry")]
mod tests;
