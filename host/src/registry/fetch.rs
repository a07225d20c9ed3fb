//! The bounded reads from a registry: a manifest (by tag or digest, its digest taken from its
//! bytes, which must have the digest the registry names it by, if it names one), and a blob
//! checked against its digest and size. Every read is bounded before it is read and cut as
//! soon as it passes its bound; manifests are read here with the credentials `oci-client`
//! negotiated, blobs through `oci-client`'s stream.

use futures::StreamExt as _;
use oci_client::Reference;
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use sha2::Digest as _;

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

/// The header in which a registry names the digest of the manifest it sends.
const DIGEST_HEADER: &str = "Docker-Content-Digest";

/// What a GET of a manifest brought: its bytes, and the digest the registry names them by
/// (`Docker-Content-Digest`), if it names one.
pub(super) struct Fetched {
    /// The body.
    pub(super) bytes: Vec<u8>,
    /// The `Docker-Content-Digest` header, as sent (`None` if absent or empty).
    pub(super) named: Option<String>,
    /// The `Link` header, as sent (`None` if absent): where a paginated list goes on.
    pub(super) link: Option<String>,
}

impl Fetched {
    /// The bytes, once they are found to have the digest the registry names them by (as oras
    /// and `oci-client` check it): `what` names them and `named` the artifact, for errors.
    pub(super) fn checked(
        self,
        what: &'static str,
        named: &Reference,
    ) -> Result<Vec<u8>, RegistryError> {
        let Some(header) = self.named else {
            return Ok(self.bytes);
        };
        let uncheckable = || RegistryError::UncheckableDigest {
            what,
            reference: named.whole(),
            named: header.clone(),
        };
        let (algorithm, hex) = header.split_once(':').ok_or_else(uncheckable)?;
        let length = match algorithm {
            "sha256" => 64,
            "sha384" => 96,
            "sha512" => 128,
            _ => return Err(uncheckable()),
        };
        if hex.len() != length || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(uncheckable());
        }
        let actual = match algorithm {
            "sha256" => hex::encode(sha2::Sha256::digest(&self.bytes)),
            "sha384" => hex::encode(sha2::Sha384::digest(&self.bytes)),
            _ => hex::encode(sha2::Sha512::digest(&self.bytes)),
        };
        if !actual.eq_ignore_ascii_case(hex) {
            return Err(RegistryError::Misnamed {
                what,
                reference: named.whole(),
                named: header.clone(),
                actual: format!("{algorithm}:{actual}"),
            });
        }
        Ok(self.bytes)
    }
}

impl Registry {
    /// The manifest `reference` names (by tag or by digest), read in a bounded stream, and its
    /// digest (of the bytes read). The bytes must have the digest the registry names them by,
    /// if it names one, and a digest reference must have sent exactly that digest.
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
            })?
            .checked("manifest", reference)?;
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
    /// names `named`), with the digest the registry names them by. `Ok(None)`: the registry
    /// has nothing there (404).
    pub(super) async fn get_bounded(
        &self,
        from: &Reference,
        path: &str,
        accept: &[&str],
        limit: (u64, &'static str),
        named: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Option<Fetched>, RegistryError> {
        let below = format!("{}/{path}", from.repository());
        self.get_v2(from, &below, accept, limit, named, auth).await
    }

    /// GET `/v2/BELOW` of `from`'s registry (with the credentials `oci-client` negotiates for
    /// pulling `from`), bounded as [`Registry::get_bounded`] is.
    pub(super) async fn get_v2(
        &self,
        from: &Reference,
        below: &str,
        accept: &[&str],
        (limit, what): (u64, &'static str),
        named: &Reference,
        auth: &RegistryAuth,
    ) -> Result<Option<Fetched>, RegistryError> {
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
        let url = format!("{scheme}://{registry}/v2/{below}");
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
        let digest = response
            .headers()
            .get(DIGEST_HEADER)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned())
            .filter(|value| !value.is_empty());
        let link = response
            .headers()
            .get(http::header::LINK)
            .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
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
        Ok(Some(Fetched {
            bytes,
            named: digest,
            link,
        }))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn fetched(named: Option<&str>) -> Fetched {
        Fetched {
            bytes: b"{}".to_vec(),
            named: named.map(str::to_owned),
            link: None,
        }
    }

    fn reference() -> Reference {
        "registry.example/plugins/echo:1.0".parse().unwrap()
    }

    #[test]
    fn bytes_are_checked_against_the_digest_the_registry_names() {
        let sha256 = digest_string(b"{}");
        let sha512 = format!("sha512:{}", hex::encode(sha2::Sha512::digest(b"{}")));
        // Unnamed, or named rightly (in any case of hex digits, by any algorithm mcpbox has).
        for named in [None, Some(sha256.as_str()), Some(&sha512)] {
            assert_eq!(
                fetched(named).checked("manifest", &reference()).unwrap(),
                b"{}"
            );
        }
        let upper = format!("sha256:{}", sha256["sha256:".len()..].to_ascii_uppercase());
        assert!(
            fetched(Some(&upper))
                .checked("manifest", &reference())
                .is_ok()
        );

        // Named wrongly: both digests in the error.
        let other = digest_string(b"[]");
        let error = fetched(Some(&other))
            .checked("manifest", &reference())
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "the registry sent a manifest for registry.example/plugins/echo:1.0 whose digest is {sha256}, though it names it {other} (Docker-Content-Digest): it was tampered with or corrupted, and nothing was written"
            )
        );

        // Named by something mcpbox cannot check: refused, not waved through.
        for named in [
            "md5:99914b932bd37a50b983c5e7c90ae93b",
            "sha256:abc",
            "sha256",
            "x",
        ] {
            let error = fetched(Some(named))
                .checked("signature manifest", &reference())
                .unwrap_err();
            assert!(
                matches!(error, RegistryError::UncheckableDigest { .. }),
                "{named}: {error}"
            );
        }
    }
}
