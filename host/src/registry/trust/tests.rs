//! Tests of the trust check: lock entries and signatures under each signing policy.

use super::*;

/// A key pair written to `dir` as `NAME.key` (password `pw`) and `NAME.pub`.
fn key_pair(dir: &Path, name: &str) -> (PathBuf, TrustedKey) {
    let (private, public) = generate_key_pair(b"pw").unwrap();
    let private_file = dir.join(format!("{name}.key"));
    let public_file = dir.join(format!("{name}.pub"));
    std::fs::write(&private_file, private.as_bytes()).unwrap();
    std::fs::write(&public_file, public).unwrap();
    (private_file, TrustedKey::read(name, &public_file).unwrap())
}

fn signer(file: &Path) -> SigStoreSigner {
    assert!(read_signer(file, b"wrong").is_err());
    read_signer(file, b"pw").unwrap().0
}

fn policy(dir: &Path, text: &str) -> Result<TrustPolicy, String> {
    let table: toml::Table = toml::from_str(text).unwrap();
    TrustPolicy::from_table(&dir.join("mcpbox.toml"), &table)
}

#[test]
fn the_policy_names_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    key_pair(dir.path(), "acme");
    let good = policy(
        dir.path(),
        "[keys]\nacme = \"acme.pub\"\n[require]\nweather = \"acme\"\n\"*\" = [\"acme\"]\n",
    )
    .unwrap();
    assert_eq!(good.required("weather").unwrap()[0].name, "acme");
    assert_eq!(good.required("other").unwrap()[0].name, "acme");
    for (text, expected) in [
        ("[keys]\nacme = \"missing.pub\"\n", "`signatures.keys.acme`"),
        (
            "[keys]\nacme = 3\n",
            "expected the path of a PEM public key",
        ),
        ("[require]\nweather = [\"nobody\"]\n", "does not define"),
        ("[require]\nweather = []\n", "name at least one key"),
        ("[require]\nweather = 1\n", "expected a key name"),
        ("keys = 1\n", "`signatures.keys`: expected a table"),
        ("allow = true\n", "`signatures.allow`: unknown key"),
    ] {
        let error = policy(dir.path(), text).unwrap_err();
        assert!(error.contains(expected), "{text}: {error}");
    }
    std::fs::write(dir.path().join("bad.pub"), "not a key").unwrap();
    let error = policy(dir.path(), "[keys]\nbad = \"bad.pub\"\n").unwrap_err();
    assert!(error.contains("not a PEM public key"), "{error}");
    // No requirement for a plugin the policy does not name (and no `*`).
    let narrow = policy(
        dir.path(),
        "[keys]\nacme = \"acme.pub\"\n[require]\nweather = \"acme\"\n",
    )
    .unwrap();
    assert!(narrow.required("other").is_none());
}

/// A lock entry as `pull` writes it for `wasm`, signed by `signer` (if any).
fn entry(wasm: &[u8], signer: Option<&SigStoreSigner>) -> (LockEntry, String) {
    let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": super::super::MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": super::super::CONFIG_MEDIA_TYPE, "digest": digest_string(b"{}"), "size": 2},
            "layers": [{"mediaType": super::super::LAYER_MEDIA_TYPE, "digest": digest_string(wasm), "size": wasm.len()}],
        })
        .to_string();
    let digest = digest_string(manifest.as_bytes());
    let payload = serde_json::json!({
        "critical": {
            "identity": {"docker-reference": "registry.example/acme/weather"},
            "image": {"docker-manifest-digest": digest},
            "type": CRITICAL_TYPE_NAME,
        },
        "optional": null,
    })
    .to_string();
    let signed = signer.map(|s| Signed {
        signer: "acme".to_owned(),
        key: String::new(),
        payload: BASE64.encode(&payload),
        signature: sign_bytes(s, payload.as_bytes()).unwrap(),
    });
    (
        LockEntry {
            reference: "registry.example/acme/weather:1".to_owned(),
            digest,
            component: digest_string(wasm),
            manifest: BASE64.encode(&manifest),
            signed,
        },
        payload,
    )
}

#[test]
fn a_locked_signature_chain_is_checked_link_by_link() {
    let dir = tempfile::tempdir().unwrap();
    let (private, acme) = key_pair(dir.path(), "acme");
    let (_, other) = key_pair(dir.path(), "other");
    let signer = signer(&private);
    let wasm = b"\0asm component bytes";
    let (good, payload) = entry(wasm, Some(&signer));
    let signed = good.signed.clone().unwrap();
    let component = digest_string(wasm);
    assert_eq!(
        verify_locked(&[&acme], &good, &signed, &component)
            .unwrap()
            .name,
        "acme"
    );
    // Another key, another component, a manifest or payload changed: each refused.
    assert!(verify_locked(&[&other], &good, &signed, &component).is_err());
    assert!(verify_locked(&[&acme], &good, &signed, &digest_string(b"other")).is_err());
    let mut swapped = good.clone();
    swapped.manifest = BASE64.encode(b"{}");
    assert!(verify_locked(&[&acme], &swapped, &signed, &component).is_err());
    let mut forged = signed;
    forged.payload = BASE64.encode(payload.replace("weather", "wether"));
    assert!(verify_locked(&[&acme], &good, &forged, &component).is_err());
    // A payload for another manifest, validly signed, does not transfer.
    let (elsewhere, _) = entry(b"\0asm another", Some(&signer));
    let moved = elsewhere.signed.unwrap();
    assert!(verify_locked(&[&acme], &good, &moved, &component).is_err());
}

fn sha(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

#[test]
fn loading_checks_the_lock_then_the_signature() {
    let dir = tempfile::tempdir().unwrap();
    let (private, acme) = key_pair(dir.path(), "acme");
    let signer = signer(&private);
    let wasm = b"\0asm weather".to_vec();
    let file = dir.path().join("weather.wasm");
    std::fs::write(&file, &wasm).unwrap();
    let mut policy = TrustPolicy {
        source: "test".to_owned(),
        ..TrustPolicy::default()
    };
    policy.add_required_key(acme);
    let strict = Trust::new(Some(policy));
    let lax = Trust::default();

    // No lock, no signature: fine without a policy, refused under one.
    assert_eq!(
        lax.check(&file, "weather", Some(&wasm), &sha(&wasm))
            .unwrap(),
        Provenance::default()
    );
    let error = strict
        .check(&file, "weather", Some(&wasm), &sha(&wasm))
        .unwrap_err();
    assert!(matches!(error, TrustError::Unsigned { .. }), "{error}");

    // A detached signature of the file.
    std::fs::write(signature_file(&file), sign_bytes(&signer, &wasm).unwrap()).unwrap();
    assert_eq!(
        strict
            .check(&file, "weather", Some(&wasm), &sha(&wasm))
            .unwrap()
            .signer
            .as_deref(),
        Some("acme")
    );
    // Its bytes are needed, and without them it is refused, never passed.
    assert!(strict.needs_bytes("weather") && !lax.needs_bytes("weather"));
    let error = strict
        .check(&file, "weather", None, &sha(&wasm))
        .unwrap_err();
    assert!(matches!(error, TrustError::WrongSigner { .. }), "{error}");
    std::fs::write(signature_file(&file), sign_bytes(&signer, b"else").unwrap()).unwrap();
    let error = strict
        .check(&file, "weather", Some(&wasm), &sha(&wasm))
        .unwrap_err();
    assert!(matches!(error, TrustError::WrongSigner { .. }), "{error}");
    std::fs::remove_file(signature_file(&file)).unwrap();

    // A lock entry: its signature chain suffices, and a different file is refused by
    // both.
    let mut lock = LockFile::new();
    lock.plugins
        .insert("weather".to_owned(), entry(&wasm, Some(&signer)).0);
    lock.write(&dir.path().join(LOCK_FILE)).unwrap();
    assert_eq!(
        strict
            .check(&file, "weather", Some(&wasm), &sha(&wasm))
            .unwrap(),
        Provenance {
            pulled: Some((
                "registry.example/acme/weather:1".to_owned(),
                lock.plugins["weather"].digest.clone()
            )),
            signer: Some("acme".to_owned()),
        }
    );
    let swapped = b"\0asm not weather";
    for trust in [&lax, &strict] {
        let error = trust
            .check(&file, "weather", Some(swapped), &sha(swapped))
            .unwrap_err();
        assert!(matches!(error, TrustError::Swapped { .. }), "{error}");
    }
    // Plugins the lock does not name are not its business.
    assert_eq!(
        lax.check(
            &dir.path().join("other.wasm"),
            "other",
            Some(swapped),
            &sha(swapped)
        )
        .unwrap(),
        Provenance::default()
    );

    // An unreadable lock file refuses every plugin beside it.
    std::fs::write(dir.path().join(LOCK_FILE), "version = 99\n").unwrap();
    let error = lax
        .check(&file, "weather", Some(&wasm), &sha(&wasm))
        .unwrap_err();
    assert!(error.to_string().contains("version 99"), "{error}");
}
