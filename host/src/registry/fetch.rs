//! The bounded reads from a registry: a manifest (by tag or digest, its digest taken from its
//! bytes), and a blob checked against its digest and size. Every read is bounded before it is
//! read and cut as soon as it passes its bound; manifests are read here with the credentials
//! `oci-client` negotiated, blobs through `oci-client`'s stream.
//!
//! Depends on nothing else of the host but `registry::trust` (digests).

use futures::StreamExt as _;
use oci_client::Reference;
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;

use super::artifact::{MANIFEST_MEDIA_TYPE, is_sha256};
use super::error::{envelope_message, error_chain, over_the_limit};
use super::progress::progress_bar;
use super::trust::digest_string;
use super::{MAX_COMPONENT_BYTES, MAX_MANIFEST_BYTES, Registry, RegistryError};

/// What a manifest request accepts: an OCI image manifest is what `pull` wants; the others
/// are accepted so that a tag pointing elsewhere is named as such, not as missing.
pub(super) const MANIFEST_ACCEPT: &[&str] = &[
    MANIFEST_MEDIA_TYPE,
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
impl Registry {
    /// The manifest `reference` names (by tag or by digest), read in a bounded stream, and its
    /// digest (of the bytes read). A digest reference must have sent exactly that digest.
    pub(super) async fn manifest(
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
    pub(super) async fn get_bounded(
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
            let reason = envelope_message(&body).unwrap_or_else(|| status.to_string());
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
    pub(super) async fn blob(
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
    pub(super) async fn component(
        &self,
        pinned: &Reference,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, RegistryError> {
        self.blob(pinned, layer, (MAX_COMPONENT_BYTES, "component"), pinned)
            .await
    }
}
