//! `mcpbox push`: publish a component as a WebAssembly artifact in `wkg`'s layout, with
//! progress on a terminal; with `--manifest`, the plugin manifest (the grants and limits the
//! plugin asks for) as a layer of its own beside the component, so the artifact's digest, and
//! any signature of it, covers what it asks for; and annotations on the manifest that say what
//! it offers (a description, the tools it lists), for managed installs' search.

use std::collections::BTreeMap;
use std::path::Path;

use futures::StreamExt as _;
use oci_client::client::Config;
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciImageManifest;

use super::artifact::{
    CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, PLUGIN_MANIFEST_MEDIA_TYPE,
    component_interfaces,
};
use super::install::{DESCRIPTION_ANNOTATION, TOOLS_ANNOTATION};
use super::progress::progress_bar;
use super::trust::digest_string;
use super::{Registry, RegistryError, parse_reference};

/// What `push` attaches to the artifact beside the component.
#[derive(Debug, Clone, Default)]
pub struct Attachments {
    /// The plugin manifest (TOML, already checked), as a layer of its own.
    pub manifest: Option<String>,
    /// A description for people (`org.opencontainers.image.description`).
    pub description: Option<String>,
    /// The tools the component lists (`dev.mcpbox.tools`, comma-separated).
    pub tools: Vec<String>,
}

/// `mcpbox push FILE REF`: publish a component as a WebAssembly artifact, with `attach`;
/// returns the digest reference it can be pulled by.
pub async fn push(
    registry: &Registry,
    file: &Path,
    reference_text: &str,
    attach: &Attachments,
) -> Result<String, RegistryError> {
    let reference = parse_reference(reference_text)?;
    let wasm = tokio::fs::read(file)
        .await
        .map_err(RegistryError::io(file))?;
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
    let mut layers = vec![layer];
    if let Some(text) = &attach.manifest {
        layers.push(oci_client::client::ImageLayer::new(
            bytes::Bytes::from(text.clone().into_bytes()),
            PLUGIN_MANIFEST_MEDIA_TYPE.to_owned(),
            None,
        ));
    }
    let mut annotations = BTreeMap::new();
    if let Some(description) = &attach.description {
        annotations.insert(DESCRIPTION_ANNOTATION.to_owned(), description.clone());
    }
    if !attach.tools.is_empty() {
        annotations.insert(TOOLS_ANNOTATION.to_owned(), attach.tools.join(","));
    }
    let mut manifest = OciImageManifest::build(
        &layers,
        &config,
        (!annotations.is_empty()).then_some(annotations),
    );
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
    for extra in &layers[1..] {
        let digest = digest_string(&extra.data);
        client
            .push_blob(&reference, extra.data.clone(), &digest)
            .await
            .map_err(|e| registry.failure(&reference, "uploading the plugin manifest", e))?;
    }
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
