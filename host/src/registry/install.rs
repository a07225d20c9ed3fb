//! What the host's managed installs need of a registry (`manage`): an artifact resolved to its
//! digest with what it says of itself (its annotations and the plugin manifest its author
//! attached: the grants and limits it asks for), a repository's tags, the signature the policy
//! requires, and installing a resolved artifact into a directory (lock entry, the manifest the
//! user approved, then the component), as `pull` does. Every read is bounded as `pull`'s are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::Reference;
use oci_client::manifest::{OciDescriptor, OciImageManifest};

use super::artifact::{PLUGIN_MANIFEST_MEDIA_TYPE, component_layer, ensure_component};
use super::lock::{LOCK_FILE, LockEntry, LockFile, Signed, WriteGuard, write_atomically};
use super::sign::required_signature;
use super::trust::{TrustError, TrustPolicy};
use super::{MAX_PLUGIN_MANIFEST_BYTES, Registry, RegistryError, parse_reference};

/// The annotation `push` writes with the tools a component lists (comma-separated).
pub const TOOLS_ANNOTATION: &str = "dev.mcpbox.tools";
/// The annotation `push` writes with a description for people.
pub const DESCRIPTION_ANNOTATION: &str = "org.opencontainers.image.description";
/// The most tags of one repository a search reads.
pub const MAX_TAGS: usize = 50;
/// The largest tag list read.
const MAX_TAG_LIST_BYTES: u64 = 64 * 1024;

/// An artifact resolved to its digest.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The reference as given.
    pub reference: String,
    /// The manifest's digest.
    pub digest: String,
    /// The manifest, its exact bytes.
    pub manifest: Vec<u8>,
    /// The component layer.
    pub layer: OciDescriptor,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
    /// The plugin manifest the author attached (TOML), if any.
    pub plugin_manifest: Option<String>,
}

impl Resolved {
    /// The reference pinned to the digest.
    pub fn pinned(&self) -> Result<Reference, RegistryError> {
        Ok(parse_reference(&self.reference)?.clone_with_digest(self.digest.clone()))
    }
}

impl Registry {
    /// Resolve `reference` to its digest and read what the artifact says of itself (its plugin
    /// manifest layer at most [`MAX_PLUGIN_MANIFEST_BYTES`], checked against its digest).
    pub async fn resolve(&self, reference_text: &str) -> Result<Resolved, RegistryError> {
        let reference = parse_reference(reference_text)?;
        let auth = Registry::auth(&reference);
        let (digest, manifest) = self.manifest(&reference, &auth).await?;
        let pinned = reference.clone_with_digest(digest.clone());
        let layer = component_layer(&manifest).map_err(|reason| RegistryError::NotComponent {
            reference: pinned.whole(),
            reason,
        })?;
        let parsed: OciImageManifest =
            serde_json::from_slice(&manifest).map_err(|e| RegistryError::NotComponent {
                reference: pinned.whole(),
                reason: format!("its manifest is not an OCI image manifest: {e}"),
            })?;
        let plugin_manifest = self.attached_manifest(&pinned, &parsed).await?;
        Ok(Resolved {
            reference: reference_text.to_owned(),
            digest,
            manifest,
            layer,
            annotations: parsed.annotations.unwrap_or_default(),
            plugin_manifest,
        })
    }

    /// The plugin manifest attached to the artifact `pinned` whose manifest is `parsed`, read
    /// bounded and checked against its digest: `None` if it carries none.
    pub(super) async fn attached_manifest(
        &self,
        pinned: &Reference,
        parsed: &OciImageManifest,
    ) -> Result<Option<String>, RegistryError> {
        let mut attached = parsed
            .layers
            .iter()
            .filter(|l| l.media_type == PLUGIN_MANIFEST_MEDIA_TYPE);
        let layer = match (attached.next(), attached.next()) {
            (None, _) => return Ok(None),
            (Some(layer), None) => layer,
            (Some(_), Some(_)) => {
                return Err(RegistryError::NotComponent {
                    reference: pinned.whole(),
                    reason: "it carries more than one plugin manifest".to_owned(),
                });
            }
        };
        let bytes = self
            .blob(
                pinned,
                layer,
                (MAX_PLUGIN_MANIFEST_BYTES, "plugin manifest"),
                pinned,
            )
            .await?;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| RegistryError::NotComponent {
                reference: pinned.whole(),
                reason: "its plugin manifest is not UTF-8 text".to_owned(),
            })
    }

    /// The signature `policy` requires of plugin `name` for `resolved`, checked (`None`: the
    /// policy requires none).
    pub async fn check_signature(
        &self,
        policy: Option<&TrustPolicy>,
        name: &str,
        resolved: &Resolved,
    ) -> Result<Option<Signed>, RegistryError> {
        let pinned = resolved.pinned()?;
        let auth = Registry::auth(&pinned);
        required_signature(self, policy, name, &pinned, &resolved.digest, &auth).await
    }

    /// The tags of `repository` (`REGISTRY/REPOSITORY`), at most [`MAX_TAGS`], in the
    /// registry's order; signature tags (`sha256-HEX.sig`) left out.
    pub async fn tags(&self, repository: &str) -> Result<Vec<String>, RegistryError> {
        let reference = parse_reference(&format!("{repository}:latest"))?;
        let auth = Registry::auth(&reference);
        let Some(fetched) = self
            .get_bounded(
                &reference,
                &format!("tags/list?n={MAX_TAGS}"),
                &["application/json"],
                (MAX_TAG_LIST_BYTES, "tag list"),
                &reference,
                &auth,
            )
            .await?
        else {
            return Ok(Vec::new());
        };
        #[derive(serde::Deserialize)]
        struct TagList {
            tags: Option<Vec<String>>,
        }
        let list: TagList =
            serde_json::from_slice(&fetched.bytes).map_err(|e| RegistryError::Other {
                registry: reference.resolve_registry().to_owned(),
                doing: "listing tags".to_owned(),
                reason: format!("its tag list is not JSON: {e}"),
            })?;
        Ok(list
            .tags
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !t.ends_with(".sig"))
            .take(MAX_TAGS)
            .collect())
    }

    /// Install `resolved` (signed as `signed` says) as plugin `name` in `dir`, with the plugin
    /// manifest `manifest_text` beside it: the component is fetched by digest and checked, then
    /// the lock entry, the manifest and the component are written, each atomically, in that
    /// order, under the directory's write guard. Returns the component's path.
    pub async fn install(
        &self,
        resolved: &Resolved,
        signed: Option<Signed>,
        dir: &Path,
        name: &str,
        manifest_text: &str,
    ) -> Result<PathBuf, RegistryError> {
        let pinned = resolved.pinned()?;
        let wasm = self.component(&pinned, &resolved.layer).await?;
        ensure_component(&wasm).map_err(|reason| RegistryError::NotComponent {
            reference: pinned.whole(),
            reason,
        })?;
        let entry = LockEntry {
            reference: resolved.reference.clone(),
            digest: resolved.digest.clone(),
            component: resolved.layer.digest.clone(),
            manifest: BASE64.encode(&resolved.manifest),
            signed,
        };
        let lock_file = dir.join(LOCK_FILE);
        let target = dir.join(format!("{name}.wasm"));
        let manifest = dir.join(format!("{name}.toml"));
        let _guard = WriteGuard::acquire(dir).map_err(TrustError::from)?;
        let mut lock = LockFile::read(&lock_file)
            .map_err(TrustError::from)?
            .unwrap_or_else(LockFile::new);
        lock.plugins.insert(name.to_owned(), entry);
        lock.write(&lock_file).map_err(TrustError::from)?;
        write_atomically(&manifest, manifest_text.as_bytes()).map_err(|error| {
            RegistryError::Io {
                path: manifest.clone(),
                error,
            }
        })?;
        write_atomically(&target, &wasm).map_err(|error| RegistryError::Io {
            path: target.clone(),
            error,
        })?;
        Ok(target)
    }
}

/// Remove plugin `name` from `dir`: its component first (so the host unloads it), then its
/// manifest and its lock entry. Whether it was there.
pub fn uninstall(dir: &Path, name: &str) -> Result<bool, RegistryError> {
    let lock_file = dir.join(LOCK_FILE);
    let _guard = WriteGuard::acquire(dir).map_err(TrustError::from)?;
    let mut lock = LockFile::read(&lock_file)
        .map_err(TrustError::from)?
        .unwrap_or_else(LockFile::new);
    let target = dir.join(format!("{name}.wasm"));
    let existed = target.exists() || lock.plugins.contains_key(name);
    for file in [target, dir.join(format!("{name}.toml"))] {
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(RegistryError::Io { path: file, error }),
        }
    }
    if lock.plugins.remove(name).is_some() {
        lock.write(&lock_file).map_err(TrustError::from)?;
    }
    Ok(existed)
}

/// The lock entries of `dir` (what is installed there), by plugin name.
pub fn installed(dir: &Path) -> Result<BTreeMap<String, LockEntry>, RegistryError> {
    Ok(LockFile::read(&dir.join(LOCK_FILE))
        .map_err(TrustError::from)?
        .map(|lock| lock.plugins)
        .unwrap_or_default())
}
