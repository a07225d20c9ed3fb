//! Cosign signatures: reading those stored beside an artifact (`sha256-HEX.sig`, each
//! bounded), checking the one the policy requires before `pull` fetches the component,
//! `mcpbox sign` (of an artifact in a registry, or of a file) and `mcpbox keygen`. The layout
//! is cosign's; the registry traffic is this client's; sigstore does the cryptography.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::Reference;
use oci_client::client::Config;
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use sigstore::cosign::SignatureLayer;
use sigstore::cosign::constraint::{Constraint as _, PrivateKeySigner};
use sigstore::cosign::payload::simple_signing::SimpleSigning;
use sigstore::registry::OciReference;

use super::artifact::{MANIFEST_MEDIA_TYPE, component_layer, ensure_component, is_sha256};
use super::fetch::MANIFEST_ACCEPT;
use super::lock::{Signed, write_atomically};
use super::trust::{self, TrustError, TrustPolicy, digest_string, key_names, verify_payload};
use super::{
    MAX_SIGNATURE_BYTES, MAX_SIGNATURE_MANIFEST_BYTES, MAX_SIGNATURES, Registry, RegistryError,
    parse_reference,
};

/// The media type of a cosign simple-signing layer.
const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The annotation of a cosign layer that holds its signature (base64).
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

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
        let bytes = bytes.checked("signature manifest", pinned)?;
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
}

/// Where cosign keeps the signatures of `digest` beside `pinned`: the tag `sha256-HEX.sig`.
fn signature_tag(pinned: &Reference, digest: &str) -> Reference {
    Reference::with_tag(
        pinned.registry().to_owned(),
        pinned.repository().to_owned(),
        format!("{}.sig", digest.replace(':', "-")),
    )
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

/// The signature `policy` requires of plugin `name` at `pinned` (whose manifest digest is
/// `digest`), found beside it and checked; `None` when the policy requires none. Why none
/// fits, when none does: unsigned, signed by no accepted key, or signatures of other digests.
pub(super) async fn required_signature(
    registry: &Registry,
    policy: Option<&TrustPolicy>,
    name: &str,
    pinned: &Reference,
    digest: &str,
    auth: &RegistryAuth,
) -> Result<Option<Signed>, RegistryError> {
    let mut signed = None;
    if let Some(policy) = policy
        && let Some(keys) = policy.required(name)
    {
        let found = registry.signatures(pinned, digest, auth).await?;
        let (of_this, of_others): (Vec<&FoundSignature>, Vec<&FoundSignature>) = found
            .iter()
            .partition(|s| s.names.as_deref() == Some(digest));
        let verified = of_this.iter().find_map(|s| {
            let signature = s.signature.as_deref()?;
            verify_payload(&keys, &s.payload, signature, digest).map(|key| (s, signature, key))
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
                    digest: digest.to_owned(),
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
    Ok(signed)
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
    let wasm = std::fs::read(file).map_err(RegistryError::io(file))?;
    ensure_component(&wasm).map_err(|reason| RegistryError::NotComponent {
        reference: file.display().to_string(),
        reason,
    })?;
    let signature = trust::sign_bytes(&signer, &wasm)?;
    let target = trust::signature_file(file);
    write_atomically(&target, signature.as_bytes()).map_err(RegistryError::io(&target))?;
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
    write_atomically(&private_file, private.as_bytes())
        .map_err(RegistryError::io(&private_file))?;
    write_atomically(&public_file, public.as_bytes()).map_err(RegistryError::io(&public_file))?;
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
