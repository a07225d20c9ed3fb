//! `mcpbox pull`: fetch a plugin by reference (or everything the lock file holds), check
//! every byte against its digest and the signature the policy requires, and only then write
//! the lock entry and the component, in that order.

use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::Reference;

use super::artifact::component_layer;
use super::lock::{LOCK_FILE, LockEntry, LockFile, WriteGuard, write_atomically};
use super::sign::required_signature;
use super::trust::{TrustError, TrustPolicy};
use super::{Registry, RegistryError, parse_reference};

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
    let signed = required_signature(
        registry,
        request.policy.as_ref(),
        name,
        &pinned,
        &digest,
        &auth,
    )
    .await?;

    // What its author asks for, shown and never applied: the operator writes what they
    // approve into its manifest or [plugin.NAME] section.
    let requested = match serde_json::from_slice(&manifest) {
        Ok(parsed) => registry.attached_manifest(&pinned, &parsed).await?,
        Err(_) => None,
    };

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
    let requested = match requested {
        Some(text) => format!(
            "\nit asks for these grants and limits (not applied: copy what you approve into {} or a [plugin.{name}] section):\n{}",
            request.dir.join(format!("{name}.toml")).display(),
            text.lines()
                .map(|l| {
                    // The author's text on the operator's terminal: no control characters.
                    let l: String = l
                        .chars()
                        .map(|c| if c.is_control() { '?' } else { c })
                        .collect();
                    format!("  {l}")
                })
                .collect::<Vec<_>>()
                .join("\n")
        ),
        None => String::new(),
    };
    Ok(format!(
        "pulled {reference_text} ({digest}) into {}{signer}{requested}",
        target.display()
    ))
}
