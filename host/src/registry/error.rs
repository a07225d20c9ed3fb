//! [`RegistryError`], and every failure of a registry (of `oci-client`, of `reqwest`, of a
//! timeout) in words: which registry, what was being done, and what to try.

use std::path::{Path, PathBuf};

use oci_client::Reference;
use oci_client::errors::OciDistributionError;

use super::Registry;
use super::credentials::{PASSWORD_VARIABLE, TOKEN_VARIABLE, USERNAME_VARIABLE};
use super::trust::TrustError;

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
    /// The registry named a manifest by one digest (`Docker-Content-Digest`) and sent bytes
    /// with another.
    #[error(
        "the registry sent a {what} for {reference} whose digest is {actual}, though it names it {named} (Docker-Content-Digest): it was tampered with or corrupted, and nothing was written"
    )]
    Misnamed {
        /// What: manifest or signature manifest.
        what: &'static str,
        /// The reference.
        reference: String,
        /// The digest the registry gives in its `Docker-Content-Digest` header.
        named: String,
        /// The digest of what came, by the same algorithm.
        actual: String,
    },
    /// The registry named a manifest by something that is not a digest mcpbox can check.
    #[error(
        "the registry names the {what} of {reference} `{named}` (Docker-Content-Digest), which is not a digest mcpbox can check (sha256, sha384 or sha512 and its hex digits): nothing was written"
    )]
    UncheckableDigest {
        /// What: manifest or signature manifest.
        what: &'static str,
        /// The reference.
        reference: String,
        /// What the header says.
        named: String,
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

impl RegistryError {
    /// The error of reading or writing `path`, for `map_err`.
    pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + use<> {
        let path = path.to_owned();
        move |error| Self::Io { path, error }
    }
}

impl Registry {
    /// If `error` (or its cause) is a timeout: the error naming the registry and the timeout.
    pub(super) fn timed_out(
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
    pub(super) fn request_failure(
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
    pub(super) fn failure(
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
                reason: envelope_message(message.as_bytes()).unwrap_or(message),
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

/// A size over `limit` in words: `5242880 bytes, over the 4194304 bytes (4 MiB) mcpbox
/// accepts`; `None`: the size is not known (no length was sent, or more came than it said).
pub(super) fn over_the_limit(size: Option<u64>, limit: u64) -> String {
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

/// An error and its sources, joined.
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
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

/// The first message of a registry's error body (the OCI error envelope), if it is one.
pub(super) fn envelope_message(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<oci_client::errors::OciEnvelope>(body)
        .ok()
        .and_then(|e| e.errors.into_iter().next())
        .map(|e| e.message)
}
