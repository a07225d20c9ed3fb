//! The layout of a plugin artifact, as `wkg` publishes WebAssembly components: the media
//! types, the one component layer of a manifest, and a component's top-level imports and
//! exports (which `push` writes into the config).

use oci_client::manifest::{OciDescriptor, OciImageManifest};

/// The manifest media type of a component artifact (an OCI image manifest).
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The config media type of a WebAssembly artifact.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the component layer.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The media type of the layer holding the plugin manifest its author attached (`push
/// --manifest`): the grants and limits it asks for, covered by the artifact's signature.
pub const PLUGIN_MANIFEST_MEDIA_TYPE: &str = "application/vnd.mcpbox.plugin.manifest.v1+toml";

/// What a file that is not a component is told.
const NOT_A_COMPONENT: &str =
    "not a WebAssembly component (a core module? build for wasm32-wasip2)";

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
pub(super) fn is_sha256(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `Ok` if `wasm` is a WebAssembly component (by its header); else why not, in words.
pub(super) fn ensure_component(wasm: &[u8]) -> Result<(), String> {
    if wasmparser::Parser::is_component(wasm) {
        Ok(())
    } else {
        Err(NOT_A_COMPONENT.to_owned())
    }
}

/// A component's top-level imports and exports, by name; an error if it is not a component.
pub(super) fn component_interfaces(wasm: &[u8]) -> Result<(Vec<String>, Vec<String>), String> {
    use wasmparser::{Parser, Payload};
    ensure_component(wasm)?;
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
