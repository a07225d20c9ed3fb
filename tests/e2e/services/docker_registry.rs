//! Plugins from OCI registries, against a real one (Debian's `docker-registry`, the CNCF
//! distribution server) on loopback: push and pull by tag and by digest in `wkg`'s layout,
//! components travelling both ways between mcpbox and `wkg`'s library, `--locked` and a moved
//! tag, a tampered blob, a manifest rewritten under its tag, cosign signatures (valid, by an
//! unknown key, missing, copied from another artifact) under a policy, a registry that needs a
//! token, basic auth and HTTPS with a private CA, progress drawn on a terminal only, and the
//! host's side: a pull into a watched directory announced to a client, a swapped component
//! refused while the previous version keeps serving.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::external::{DistributionRegistry, RegistrySetup, TokenAuth};
use crate::registry::{component, error_line, keygen, mcpbox_cli, ok, pull_args, refused, sha256};
use crate::support::{
    HttpServer, RecordingClient, STEP, call, connect_command, connect_logged, mcpbox, tool_text,
};

/// Push `plugin` to `REGISTRY/plugins/REPO:TAG`; its manifest digest.
async fn push(registry: &DistributionRegistry, plugin: &str, repo_tag: &str) -> String {
    let file = component(plugin);
    let reference = format!("{}/plugins/{repo_tag}", registry.host());
    let out = ok(
        &[
            "push",
            file.to_str().unwrap(),
            &reference,
            "--insecure-registry",
            &registry.host(),
        ],
        &[],
    )
    .await;
    let digest = out
        .lines()
        .find_map(|l| l.rsplit_once('@').map(|(_, d)| d.to_owned()))
        .unwrap_or_else(|| panic!("push printed no digest reference: {out}"));
    assert!(digest.starts_with("sha256:"), "{out}");
    digest
}

/// `sign REF --key KEY --insecure-registry HOST`, as arguments.
fn sign_args<'a>(reference: &'a str, key: &'a str, host: &'a str) -> [&'a str; 6] {
    ["sign", reference, "--key", key, "--insecure-registry", host]
}

fn lock(dir: &Path) -> toml::Table {
    toml::from_str(&std::fs::read_to_string(dir.join("mcpbox.lock")).expect("a lock file"))
        .expect("the lock file is TOML")
}

#[tokio::test]
async fn push_then_pull_by_tag_and_by_digest_in_wkg_layout() {
    let registry = DistributionRegistry::start(RegistrySetup::default());
    let host = registry.host();
    let digest = push(&registry, "echo_tools", "echo_tools:1.0").await;

    // The layout: an OCI image manifest, the wasm config, one application/wasm layer.
    let http = reqwest::Client::new();
    let manifest: Value = http
        .get(format!("http://{host}/v2/plugins/echo_tools/manifests/1.0"))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    let wasm = std::fs::read(component("echo_tools")).unwrap();
    assert_eq!(layers[0]["digest"], sha256(&wasm));
    let config: Value = http
        .get(format!(
            "http://{host}/v2/plugins/echo_tools/blobs/{}",
            manifest["config"]["digest"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"], json!([sha256(&wasm)]));
    let exports = config["component"]["exports"].as_array().unwrap();
    assert!(
        exports
            .iter()
            .any(|e| e.as_str().unwrap().starts_with("mcpbox:")),
        "{config}"
    );

    // By tag: the file, and a lock entry naming the resolved digest.
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("{host}/plugins/echo_tools:1.0");
    let out = ok(
        &pull_args(&tag, dir.path().to_str().unwrap(), &[], &host),
        &[],
    )
    .await;
    assert!(out.contains(&digest), "{out}");
    assert_eq!(
        std::fs::read(dir.path().join("echo_tools.wasm")).unwrap(),
        wasm
    );
    let locked = lock(dir.path());
    let entry = &locked["plugin"]["echo_tools"];
    assert_eq!(entry["reference"].as_str(), Some(tag.as_str()));
    assert_eq!(entry["digest"].as_str(), Some(digest.as_str()));
    assert_eq!(entry["component"].as_str(), Some(sha256(&wasm).as_str()));
    assert!(entry.get("signed").is_none());

    // By digest, under another name.
    let pinned = format!("{host}/plugins/echo_tools@{digest}");
    ok(
        &pull_args(
            &pinned,
            dir.path().to_str().unwrap(),
            &["--name", "echo_again"],
            &host,
        ),
        &[],
    )
    .await;
    assert_eq!(
        std::fs::read(dir.path().join("echo_again.wasm")).unwrap(),
        wasm
    );
    assert_eq!(
        lock(dir.path())["plugin"]["echo_again"]["digest"].as_str(),
        Some(digest.as_str())
    );

    // Pulls into one directory at the same time keep each other's lock entries.
    let many = tempfile::tempdir().unwrap();
    let to = many.path().to_str().unwrap();
    let pulls: Vec<_> = ["one", "two", "three", "four"]
        .into_iter()
        .map(|name| {
            let args = [
                "pull".to_owned(),
                tag.clone(),
                "--name".to_owned(),
                name.to_owned(),
                "--to".to_owned(),
                to.to_owned(),
                "--insecure-registry".to_owned(),
                host.clone(),
            ];
            async move {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                ok(&args, &[]).await
            }
        })
        .collect();
    futures::future::join_all(pulls).await;
    let plugins = lock(many.path())["plugin"].as_table().unwrap().clone();
    assert_eq!(plugins.len(), 4, "{plugins:?}");

    // A digest that is not there, and HTTPS to a plain-HTTP registry: clear errors.
    let missing = format!("{host}/plugins/echo_tools@sha256:{}", "0".repeat(64));
    let error = refused(
        &pull_args(&missing, dir.path().to_str().unwrap(), &[], &host),
        &[],
    )
    .await;
    assert!(error.contains("is not in the registry"), "{error}");
    let error = refused(&["pull", &tag, "--to", dir.path().to_str().unwrap()], &[]).await;
    assert!(error.contains("--insecure-registry"), "{error}");

    // The pulled plugin serves.
    let (service, _) = connect_logged(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    let result = service
        .call_tool(call("echo", json!({"text": "pulled"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("pulled".to_owned(), false));
}

#[tokio::test]
async fn locked_pull_refuses_a_moved_tag() {
    let registry = DistributionRegistry::start(RegistrySetup::default());
    let host = registry.host();
    let first = push(&registry, "echo_tools", "echo_tools:stable").await;
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().to_str().unwrap();
    let tag = format!("{host}/plugins/echo_tools:stable");
    ok(&pull_args(&tag, to, &[], &host), &[]).await;
    // Unmoved: --locked pulls.
    ok(&pull_args(&tag, to, &["--locked"], &host), &[]).await;
    let before = std::fs::read(dir.path().join("echo_tools.wasm")).unwrap();

    // The tag moves to another component.
    let second = push(&registry, "quotes", "echo_tools:stable").await;
    assert_ne!(first, second);
    let error = refused(&pull_args(&tag, to, &["--locked"], &host), &[]).await;
    assert!(error.contains("the tag moved"), "{error}");
    assert!(error.contains(&first) && error.contains(&second), "{error}");
    let error = refused(
        &["pull", "--locked", "--to", to, "--insecure-registry", &host],
        &[],
    )
    .await;
    assert!(error.contains("the tag moved"), "{error}");
    assert_eq!(
        std::fs::read(dir.path().join("echo_tools.wasm")).unwrap(),
        before,
        "nothing written"
    );
    assert_eq!(
        lock(dir.path())["plugin"]["echo_tools"]["digest"].as_str(),
        Some(first.as_str())
    );

    // Nothing locked under that name: --locked refuses too.
    let error = refused(
        &pull_args(&tag, to, &["--name", "other", "--locked"], &host),
        &[],
    )
    .await;
    assert!(error.contains("has no entry for `other`"), "{error}");

    // Without --locked, the new digest is accepted and recorded.
    ok(&pull_args(&tag, to, &[], &host), &[]).await;
    assert_eq!(
        lock(dir.path())["plugin"]["echo_tools"]["digest"].as_str(),
        Some(second.as_str())
    );
}

#[tokio::test]
async fn a_tampered_blob_is_refused_and_nothing_is_written() {
    let registry = DistributionRegistry::start(RegistrySetup::default());
    let host = registry.host();
    let digest = push(&registry, "echo_tools", "echo_tools:1.0").await;
    let wasm = std::fs::read(component("echo_tools")).unwrap();
    let blob = registry.blob_file(&sha256(&wasm));
    let mut tampered = wasm.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0xff;
    std::fs::write(&blob, &tampered).expect("tamper with the stored blob");

    let dir = tempfile::tempdir().unwrap();
    let error = refused(
        &pull_args(
            &format!("{host}/plugins/echo_tools:1.0"),
            dir.path().to_str().unwrap(),
            &[],
            &host,
        ),
        &[],
    )
    .await;
    // One cause, said once: which digest came, which was asked for.
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: the registry sent a component for {host}/plugins/echo_tools@{digest} whose digest is {}, not {}: it was tampered with or corrupted, and nothing was written",
            sha256(&tampered),
            sha256(&wasm)
        )
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "neither the component nor a lock file is written"
    );
}

/// Issue #55 (18): a manifest rewritten in the registry's storage is still served under the
/// tag, with the digest the tag was pushed with in `Docker-Content-Digest`; pulled by tag, its
/// bytes are checked against that digest and refused.
#[tokio::test]
async fn a_manifest_rewritten_in_the_registry_is_refused_when_pulled_by_tag() {
    let registry = DistributionRegistry::start(RegistrySetup::default());
    let host = registry.host();
    let digest = push(&registry, "echo_tools", "echo_tools:1.0").await;
    // Still a manifest (the registry parses what it serves), with the same component.
    let stored = registry.blob_file(&digest);
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&stored).unwrap()).unwrap();
    manifest["annotations"] = json!({"org.example.rewritten": "yes"});
    let rewritten = serde_json::to_vec(&manifest).unwrap();
    std::fs::write(&stored, &rewritten).expect("rewrite the stored manifest");

    // The registry serves the new bytes under the old name: a real mismatch.
    let tag = format!("{host}/plugins/echo_tools:1.0");
    let response = reqwest::Client::new()
        .get(format!("http://{host}/v2/plugins/echo_tools/manifests/1.0"))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["docker-content-digest"]
            .to_str()
            .unwrap(),
        digest
    );
    assert_eq!(
        response.bytes().await.unwrap().as_ref(),
        rewritten.as_slice()
    );

    let dir = tempfile::tempdir().unwrap();
    let error = refused(
        &pull_args(&tag, dir.path().to_str().unwrap(), &[], &host),
        &[],
    )
    .await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: the registry sent a manifest for {tag} whose digest is {}, though it names it {digest} (Docker-Content-Digest): it was tampered with or corrupted, and nothing was written",
            sha256(&rewritten)
        )
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "neither the component nor a lock file is written"
    );
}

#[tokio::test]
async fn signatures_are_checked_against_the_policy_when_pulling_and_loading() {
    let registry = DistributionRegistry::start(RegistrySetup::default());
    let host = registry.host();
    let keys = tempfile::tempdir().unwrap();
    let (trusted_key, _) = keygen(keys.path(), "acme").await;
    let (unknown_key, _) = keygen(keys.path(), "stranger").await;
    let digest = push(&registry, "echo_tools", "echo_tools:1.0").await;
    let reference = format!("{host}/plugins/echo_tools:1.0");

    let dir = tempfile::tempdir().unwrap();
    let config = keys.path().join("mcpbox.toml");
    std::fs::write(
        &config,
        format!(
            "plugins = \"{}\"\n\n[signatures.keys]\nacme = \"acme.pub\"\n\n[signatures.require]\necho_tools = [\"acme\"]\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let checked = ok(&["check", "--config", config], &[]).await;
    assert!(
        checked.contains("required: echo_tools by acme"),
        "{checked}"
    );
    let pull = [
        "pull",
        reference.as_str(),
        "--config",
        config,
        "--insecure-registry",
        &host,
    ];
    let password = [("COSIGN_PASSWORD", "correct horse")];

    // No signature at all: one cause, said once.
    let error = refused(&pull, &[]).await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: refusing {host}/plugins/echo_tools@{digest}: the signature policy in {config} requires `echo_tools` to be signed by the key `acme`, and it is not signed (the registry holds no signature of {digest})"
        )
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // Signed, but by a key the policy does not name.
    let signed = ok(&sign_args(&reference, &unknown_key, &host), &password).await;
    assert!(signed.contains(&digest), "{signed}");
    let error = refused(&pull, &[]).await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: refusing {host}/plugins/echo_tools@{digest}: the signature policy in {config} requires `echo_tools` to be signed by the key `acme`, and the registry holds 1 signature(s) of it, none by that key"
        )
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);

    // A wrong password is named as such.
    let error = refused(
        &sign_args(&reference, &trusted_key, &host),
        &[("COSIGN_PASSWORD", "wrong")],
    )
    .await;
    assert!(error.contains("COSIGN_PASSWORD"), "{error}");

    // Signed by the trusted key too (beside the other signature): pulled, signer recorded.
    ok(&sign_args(&reference, &trusted_key, &host), &password).await;
    let out = ok(&pull, &[]).await;
    assert!(out.contains("signed by `acme`"), "{out}");
    let locked = lock(dir.path());
    assert_eq!(
        locked["plugin"]["echo_tools"]["signed"]["signer"].as_str(),
        Some("acme")
    );
    // An ad-hoc --key works the same way, with no configuration.
    let other = tempfile::tempdir().unwrap();
    let public = keys.path().join("acme.pub");
    ok(
        &pull_args(
            &reference,
            other.path().to_str().unwrap(),
            &["--key", public.to_str().unwrap()],
            &host,
        ),
        &[],
    )
    .await;
    // Several keys are alternatives (any one of them); a key that signed nothing refuses.
    let stranger = keys.path().join("stranger.pub");
    let (_, third) = keygen(keys.path(), "third").await;
    ok(
        &pull_args(
            &reference,
            other.path().to_str().unwrap(),
            &[
                "--name",
                "either",
                "--key",
                &third,
                "--key",
                stranger.to_str().unwrap(),
            ],
            &host,
        ),
        &[],
    )
    .await;
    let error = refused(
        &pull_args(
            &format!("{host}/plugins/echo_tools@{digest}"),
            other.path().to_str().unwrap(),
            &["--name", "strict", "--key", &third],
            &host,
        ),
        &[],
    )
    .await;
    assert!(error.contains("requires `strict` to be signed"), "{error}");

    // Signatures copied from another artifact (validly signed, by the trusted key) do not
    // count, and the refusal says so rather than "not signed".
    let elsewhere = push(&registry, "quotes", "echo_tools:other").await;
    let http = reqwest::Client::new();
    let oci = "application/vnd.oci.image.manifest.v1+json";
    let signatures = http
        .get(format!(
            "http://{host}/v2/plugins/echo_tools/manifests/{}.sig",
            digest.replace(':', "-")
        ))
        .header("Accept", oci)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let copied = http
        .put(format!(
            "http://{host}/v2/plugins/echo_tools/manifests/{}.sig",
            elsewhere.replace(':', "-")
        ))
        .header("Content-Type", oci)
        .body(signatures)
        .send()
        .await
        .unwrap();
    assert!(copied.status().is_success(), "{copied:?}");
    let copied_to = tempfile::tempdir().unwrap();
    let error = refused(
        &[
            "pull",
            &format!("{host}/plugins/echo_tools:other"),
            "--to",
            copied_to.path().to_str().unwrap(),
            "--config",
            config,
            "--insecure-registry",
            &host,
        ],
        &[],
    )
    .await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: refusing {host}/plugins/echo_tools@{elsewhere}: the signature policy in {config} requires `echo_tools` to be signed by the key `acme`, and the only signatures beside it are of another artifact ({digest}, by `acme`), not of {elsewhere}: a signature counts only for the digest it names"
        )
    );
    assert_eq!(std::fs::read_dir(copied_to.path()).unwrap().count(), 0);

    // The host checks the recorded chain again at load, offline: served.
    let mut command = mcpbox(dir.path(), &["--config", config]);
    command.arg("--log").arg("info");
    let (service, log) = connect_command(command, RecordingClient::new(&json!({}))).await;
    let result = service
        .call_tool(call("echo", json!({"text": "signed"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("signed".to_owned(), false));
    assert!(log.text().contains("signature verified"), "{}", log.text());
    drop(service);
    // The status page says where it came from and who signed it.
    let server = HttpServer::start(dir.path(), &["--config", config]).await;
    let page = reqwest::get(format!("http://127.0.0.1:{}/", server.port))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("pulled from"), "{page}");
    assert!(
        page.contains(&reference) && page.contains(&digest),
        "{page}"
    );
    assert!(page.contains("signed by"), "{page}");
    drop(server);

    // A lock entry whose recorded signature was altered is refused at load.
    let text = std::fs::read_to_string(dir.path().join("mcpbox.lock")).unwrap();
    let mut table: toml::Table = toml::from_str(&text).unwrap();
    let signed = table["plugin"]["echo_tools"]["signed"].clone();
    let mut signed = signed.as_table().unwrap().clone();
    let forged = {
        use base64::Engine as _;
        let base64 = base64::engine::general_purpose::STANDARD;
        let mut bytes = base64
            .decode(signed["signature"].as_str().unwrap())
            .unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        base64.encode(bytes)
    };
    signed.insert("signature".into(), forged.into());
    table["plugin"].as_table_mut().unwrap()["echo_tools"]
        .as_table_mut()
        .unwrap()
        .insert("signed".into(), signed.into());
    std::fs::write(
        dir.path().join("mcpbox.lock"),
        toml::to_string(&table).unwrap(),
    )
    .unwrap();
    let mut command = mcpbox(dir.path(), &["--config", config]);
    command.arg("--log").arg("info");
    let (service, log) = connect_command(command, RecordingClient::new(&json!({}))).await;
    assert!(service.list_all_tools().await.unwrap().is_empty());
    assert!(
        log.text().contains("is not by any of them"),
        "{}",
        log.text()
    );
}

#[tokio::test]
async fn a_pull_into_a_watched_directory_is_announced_and_a_swapped_file_refused() {
    let registry = DistributionRegistry::start(RegistrySetup::default());
    let host = registry.host();
    push(&registry, "echo_tools", "echo_tools:1.0").await;
    let dir = tempfile::tempdir().unwrap();
    let client = RecordingClient::new(&json!({}));
    let (service, log) = connect_logged(dir.path(), &["--log", "info"], client.clone()).await;
    assert!(service.list_all_tools().await.unwrap().is_empty());

    ok(
        &pull_args(
            &format!("{host}/plugins/echo_tools:1.0"),
            dir.path().to_str().unwrap(),
            &[],
            &host,
        ),
        &[],
    )
    .await;
    client.wait_for("tools/list_changed", 1).await;
    let result = service
        .call_tool(call("echo", json!({"text": "live"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("live".to_owned(), false));

    // Another component swapped in under the pulled name: refused, the pulled one serves on.
    let temporary = dir.path().join(".swap.tmp");
    std::fs::copy(component("quotes"), &temporary).unwrap();
    std::fs::rename(&temporary, dir.path().join("echo_tools.wasm")).unwrap();
    log.wait_for("the file was replaced after it was pulled")
        .await;
    assert!(
        log.text().contains("the previous version keeps serving"),
        "{}",
        log.text()
    );
    let result = service
        .call_tool(call("echo", json!({"text": "still"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("still".to_owned(), false));
}

/// A token service for the distribution registry: checks Basic credentials `tester`/`secret`
/// and issues ES256 tokens granting what was asked, signed by a self-signed certificate's key.
async fn token_service(service: &str, issuer: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["token-issuer".to_owned()]).unwrap();
    let certificate = params.self_signed(&key).unwrap();
    let encoding = jsonwebtoken::EncodingKey::from_ec_der(&key.serialize_der());
    let x5c = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(certificate.der())
    };
    let (service, issuer) = (service.to_owned(), issuer.to_owned());
    let app = axum::Router::new().route(
        "/token",
        axum::routing::get(
            async move |headers: axum::http::HeaderMap, query: axum::extract::RawQuery| {
                use axum::response::IntoResponse as _;
                let authorized = headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Basic "))
                    .and_then(|v| {
                        use base64::Engine as _;
                        base64::engine::general_purpose::STANDARD.decode(v).ok()
                    })
                    .is_some_and(|v| v == b"tester:secret");
                if !authorized {
                    return (axum::http::StatusCode::UNAUTHORIZED, "bad credentials")
                        .into_response();
                }
                let access: Vec<Value> =
                    url::form_urlencoded::parse(query.0.unwrap_or_default().as_bytes())
                        .filter(|(k, _)| k == "scope")
                        .filter_map(|(_, scope)| {
                            let mut parts = scope.splitn(3, ':');
                            let (kind, name, actions) = (parts.next()?, parts.next()?, parts.next()?);
                            Some(json!({"type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>()}))
                        })
                        .collect();
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                let claims = json!({
                    "iss": issuer, "sub": "tester", "aud": service,
                    "exp": now + 300, "nbf": now - 10, "iat": now,
                    "jti": format!("{now}-{}", access.len()), "access": access,
                });
                let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
                header.x5c = Some(vec![x5c.clone()]);
                let token = jsonwebtoken::encode(&header, &claims, &encoding).unwrap();
                let body = json!({"token": token, "access_token": token, "expires_in": 300});
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    body.to_string(),
                )
                    .into_response()
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let realm = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (realm, certificate.pem())
}

#[tokio::test]
async fn a_registry_that_needs_a_token() {
    let (realm, certificate) = token_service("mcpbox-registry", "mcpbox-token-issuer").await;
    let token = TokenAuth {
        realm: realm.clone(),
        service: "mcpbox-registry".to_owned(),
        issuer: "mcpbox-token-issuer".to_owned(),
        certificate,
    };
    let registry = DistributionRegistry::start(RegistrySetup {
        token: Some(&token),
        ..RegistrySetup::default()
    });
    let host = registry.host();
    let reference = format!("{host}/plugins/echo_tools:1.0");
    let file = component("echo_tools");
    let push = [
        "push",
        file.to_str().unwrap(),
        &reference,
        "--insecure-registry",
        &host,
    ];

    // Anonymous and wrong credentials: refused, saying how to give credentials.
    let error = refused(&push, &[]).await;
    assert!(error.contains("refused access"), "{error}");
    assert!(error.contains("MCPBOX_REGISTRY_USERNAME"), "{error}");
    let wrong = [
        ("MCPBOX_REGISTRY_USERNAME", "tester"),
        ("MCPBOX_REGISTRY_PASSWORD", "guess"),
    ];
    let error = refused(&push, &wrong).await;
    assert!(error.contains("refused access"), "{error}");

    // With credentials: the token dance, then push and pull.
    let good = [
        ("MCPBOX_REGISTRY_USERNAME", "tester"),
        ("MCPBOX_REGISTRY_PASSWORD", "secret"),
    ];
    ok(&push, &good).await;
    let dir = tempfile::tempdir().unwrap();
    let pull = [
        "pull",
        reference.as_str(),
        "--to",
        dir.path().to_str().unwrap(),
        "--insecure-registry",
        &host,
    ];
    let error = refused(&pull, &[]).await;
    assert!(error.contains("refused access"), "{error}");
    ok(&pull, &good).await;
    assert_eq!(
        std::fs::read(dir.path().join("echo_tools.wasm")).unwrap(),
        std::fs::read(&file).unwrap()
    );

    // A bearer token obtained elsewhere, given as it is.
    let issued: Value = reqwest::Client::new()
        .get(format!(
            "{realm}?service=mcpbox-registry&scope=repository:plugins/echo_tools:pull"
        ))
        .basic_auth("tester", Some("secret"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = issued["token"].as_str().unwrap();
    std::fs::remove_file(dir.path().join("echo_tools.wasm")).unwrap();
    ok(&pull, &[("MCPBOX_REGISTRY_TOKEN", token)]).await;
    assert!(dir.path().join("echo_tools.wasm").exists());
}

#[tokio::test]
async fn components_travel_both_ways_between_mcpbox_and_wkgs_library() {
    use oci_client_wkg::client::{ClientConfig, ClientProtocol};
    use oci_client_wkg::secrets::RegistryAuth;
    let registry = DistributionRegistry::start(RegistrySetup::default());
    let host = registry.host();
    let wkg = oci_wasm::WasmClient::new(oci_client_wkg::Client::new(ClientConfig {
        protocol: ClientProtocol::HttpsExcept(vec![host.clone()]),
        ..ClientConfig::default()
    }));

    // Pushed by wkg's library, pulled by mcpbox.
    let quotes = std::fs::read(component("quotes")).unwrap();
    let (config, layer) =
        oci_wasm::WasmConfig::from_raw_component(quotes.clone(), Some("acme".to_owned())).unwrap();
    let reference: oci_client_wkg::Reference = format!("{host}/wkg/quotes:0.1.0").parse().unwrap();
    wkg.push(&reference, &RegistryAuth::Anonymous, layer, config, None)
        .await
        .expect("wkg's library pushes");
    let dir = tempfile::tempdir().unwrap();
    ok(
        &pull_args(
            &format!("{host}/wkg/quotes:0.1.0"),
            dir.path().to_str().unwrap(),
            &[],
            &host,
        ),
        &[],
    )
    .await;
    assert_eq!(
        std::fs::read(dir.path().join("quotes.wasm")).unwrap(),
        quotes
    );

    // Pushed by mcpbox, pulled (and its config read) by wkg's library.
    push(&registry, "echo_tools", "echo_tools:2.0").await;
    let reference: oci_client_wkg::Reference =
        format!("{host}/plugins/echo_tools:2.0").parse().unwrap();
    let (_, config, _) = wkg
        .pull_manifest_and_config(&reference, &RegistryAuth::Anonymous)
        .await
        .expect("wkg's library reads mcpbox's manifest and config");
    assert_eq!(config.os, "wasip2");
    let pulled = wkg
        .pull(&reference, &RegistryAuth::Anonymous)
        .await
        .expect("wkg's library pulls");
    assert_eq!(
        pulled.layers[0].data.as_ref(),
        std::fs::read(component("echo_tools")).unwrap().as_slice()
    );
}

/// A private CA (PEM) and a certificate and key for 127.0.0.1 it signed (PEM).
fn private_ca() -> (String, String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "mcpbox test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    (ca.pem(), server.pem(), server_key.serialize_pem())
}

#[tokio::test]
async fn https_is_the_default_and_a_private_ca_is_trusted_through_ssl_cert_file() {
    let (ca, certificate, key) = private_ca();
    let registry = DistributionRegistry::start(RegistrySetup {
        tls: Some((&certificate, &key)),
        ..RegistrySetup::default()
    });
    let host = registry.host();
    let trust = tempfile::tempdir().unwrap();
    let ca_file = trust.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let trusted = [("SSL_CERT_FILE", ca_file.to_str().unwrap())];
    let file = component("echo_tools");
    let reference = format!("{host}/plugins/echo_tools:tls");

    // Not trusted: refused, saying why.
    let error = refused(&["push", file.to_str().unwrap(), &reference], &[]).await;
    assert!(error.contains("certificate"), "{error}");
    assert!(error.contains("SSL_CERT_FILE"), "{error}");

    // Trusted: push, sign and pull over HTTPS, no --insecure-registry anywhere.
    ok(&["push", file.to_str().unwrap(), &reference], &trusted).await;
    let keys = tempfile::tempdir().unwrap();
    let (private, public) = keygen(keys.path(), "acme").await;
    ok(
        &["sign", &reference, "--key", &private],
        &[trusted[0], ("COSIGN_PASSWORD", "correct horse")],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = ok(
        &[
            "pull",
            &reference,
            "--to",
            dir.path().to_str().unwrap(),
            "--key",
            &public,
        ],
        &trusted,
    )
    .await;
    assert!(out.contains("signed by"), "{out}");
    assert_eq!(
        std::fs::read(dir.path().join("echo_tools.wasm")).unwrap(),
        std::fs::read(&file).unwrap()
    );
}

/// A component of more than a megabyte: echo_tools with a 3 MiB custom section appended.
fn large_component(dir: &Path) -> PathBuf {
    let wasm = crate::support::with_custom_section(
        std::fs::read(component("echo_tools")).unwrap(),
        "padding",
        &vec![0u8; 3 * 1024 * 1024],
    );
    let file = dir.join("large.wasm");
    std::fs::write(&file, wasm).unwrap();
    file
}

/// Run `mcpbox ARGS` on a pseudo-terminal (`script`, from Debian's bsdutils): everything it
/// drew there.
async fn on_a_terminal(args: &[&str]) -> String {
    let script = crate::external::debian("script", "bsdutils");
    let command = std::iter::once(env!("CARGO_BIN_EXE_mcpbox"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let output = tokio::time::timeout(
        STEP,
        tokio::process::Command::new(script)
            .args(["-qec", &command, "/dev/null"])
            .env_remove("MCPBOX_LOG")
            .output(),
    )
    .await
    .expect("mcpbox finished in time")
    .expect("run script");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "mcpbox {args:?} failed:\n{text}");
    text
}

#[tokio::test]
async fn large_transfers_show_progress_on_a_terminal_only() {
    let registry = DistributionRegistry::start(RegistrySetup::default());
    let host = registry.host();
    let work = tempfile::tempdir().unwrap();
    let large = large_component(work.path());
    let reference = format!("{host}/plugins/large:1.0");
    let drawn = on_a_terminal(&[
        "push",
        large.to_str().unwrap(),
        &reference,
        "--insecure-registry",
        &host,
    ])
    .await;
    assert!(
        drawn.contains("pushing") && drawn.contains("/3.22 MiB"),
        "{drawn}"
    );
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().to_str().unwrap();
    let drawn = on_a_terminal(&pull_args(&reference, to, &[], &host)).await;
    assert!(
        drawn.contains("pulling") && drawn.contains("/3.22 MiB"),
        "{drawn}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("large.wasm")).unwrap(),
        std::fs::read(&large).unwrap()
    );
    // Not a terminal: no progress drawn, only the report.
    let output = mcpbox_cli(&pull_args(&reference, to, &[], &host), &[]).await;
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("pulling"), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("pulled "));
}

#[tokio::test]
async fn a_registry_with_basic_auth_over_https() {
    let htpasswd = std::process::Command::new(crate::external::debian("htpasswd", "apache2-utils"))
        .args(["-Bbn", "tester", "secret"])
        .output()
        .expect("run htpasswd");
    assert!(htpasswd.status.success());
    let htpasswd = String::from_utf8(htpasswd.stdout).unwrap();
    let (ca, certificate, key) = private_ca();
    let registry = DistributionRegistry::start(RegistrySetup {
        htpasswd: Some(&htpasswd),
        tls: Some((&certificate, &key)),
        ..RegistrySetup::default()
    });
    let host = registry.host();
    let work = tempfile::tempdir().unwrap();
    let ca_file = work.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let ca_file = ca_file.to_str().unwrap();
    let file = component("echo_tools");
    let reference = format!("{host}/plugins/echo_tools:1.0");
    let push = ["push", file.to_str().unwrap(), &reference];

    let error = refused(&push, &[("SSL_CERT_FILE", ca_file)]).await;
    assert!(error.contains("refused access"), "{error}");
    let error = refused(
        &push,
        &[
            ("SSL_CERT_FILE", ca_file),
            ("MCPBOX_REGISTRY_USERNAME", "tester"),
            ("MCPBOX_REGISTRY_PASSWORD", "guess"),
        ],
    )
    .await;
    assert!(error.contains("refused access"), "{error}");
    ok(
        &push,
        &[
            ("SSL_CERT_FILE", ca_file),
            ("MCPBOX_REGISTRY_USERNAME", "tester"),
            ("MCPBOX_REGISTRY_PASSWORD", "secret"),
        ],
    )
    .await;

    // The credentials `docker login` stores are used when the environment gives none.
    let docker = work.path().join("docker");
    std::fs::create_dir(&docker).unwrap();
    let auth = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode("tester:secret")
    };
    std::fs::write(
        docker.join("config.json"),
        json!({"auths": {host.clone(): {"auth": auth}}}).to_string(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    ok(
        &["pull", &reference, "--to", dir.path().to_str().unwrap()],
        &[
            ("SSL_CERT_FILE", ca_file),
            ("DOCKER_CONFIG", docker.to_str().unwrap()),
        ],
    )
    .await;
    assert_eq!(
        std::fs::read(dir.path().join("echo_tools.wasm")).unwrap(),
        std::fs::read(&file).unwrap()
    );
}
