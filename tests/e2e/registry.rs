//! Plugins from OCI registries, where no registry server is needed: a detached signature for
//! a file placed by hand, checked under a signature policy at load; a registry that is down,
//! one that never answers (each command bounded by its timeout), and one that misbehaves as a
//! real one cannot (oversized manifests and signatures refused unread). The tests against a
//! real registry (Debian's `docker-registry`) are in `services::docker_registry`; the helpers both
//! use are here.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::json;
use sha2::{Digest as _, Sha256};

use crate::support::{
    RecordingClient, STEP, call, connect_command, connect_logged, example_plugins, mcpbox,
    plugin_dir, tool_text,
};

/// A component of the examples, by name.
pub(crate) fn component(name: &str) -> PathBuf {
    example_plugins().join(format!("{name}.wasm"))
}

pub(crate) fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

/// Run `mcpbox ARGS` to completion with a clean environment for registries (no Docker
/// configuration, no credentials but those in `env`).
pub(crate) async fn mcpbox_cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    let docker_config = tempfile::tempdir().expect("temp dir");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"));
    command
        .args(args)
        .env("DOCKER_CONFIG", docker_config.path())
        .env_remove("MCPBOX_CONFIG")
        .env_remove("MCPBOX_LOG")
        .env_remove("MCPBOX_INSECURE_REGISTRIES")
        .env_remove("MCPBOX_REGISTRY_USERNAME")
        .env_remove("MCPBOX_REGISTRY_PASSWORD")
        .env_remove("MCPBOX_REGISTRY_TOKEN")
        .env_remove("MCPBOX_REGISTRY_TIMEOUT")
        .env_remove("COSIGN_PASSWORD")
        .envs(env.iter().copied())
        .kill_on_drop(true);
    tokio::time::timeout(STEP, command.output())
        .await
        .expect("mcpbox finished in time")
        .expect("run mcpbox")
}

/// Run it and insist it succeeded; its stdout.
pub(crate) async fn ok(args: &[&str], env: &[(&str, &str)]) -> String {
    let output = mcpbox_cli(args, env).await;
    assert!(
        output.status.success(),
        "mcpbox {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Run it and insist it failed; its stderr.
pub(crate) async fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let output = mcpbox_cli(args, env).await;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !output.status.success(),
        "mcpbox {args:?} should have failed; stdout:\n{}\nstderr:\n{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        output.stdout.is_empty(),
        "a failed command writes nothing to stdout"
    );
    stderr
}

/// The one error of a failed command's stderr (`mcpbox: …`, as printed or as logged at ERROR),
/// whatever warnings surround it: exactly one, one line.
pub(crate) fn error_line(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .filter_map(|l| match l.split_once(" ERROR mcpbox: ") {
            Some((_, error)) => Some(error),
            None => l.strip_prefix("mcpbox: "),
        })
        .collect();
    assert_eq!(lines.len(), 1, "one error line:\n{stderr}");
    format!("mcpbox: {}", lines[0])
}

/// `pull REF --to DIR EXTRA… --insecure-registry HOST`, as arguments.
pub(crate) fn pull_args<'a>(
    reference: &'a str,
    dir: &'a str,
    extra: &[&'a str],
    host: &'a str,
) -> Vec<&'a str> {
    let mut args = vec!["pull", reference, "--to", dir];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--insecure-registry", host]);
    args
}

/// A key pair made by `mcpbox keygen` in `dir`: (private, public).
pub(crate) async fn keygen(dir: &Path, name: &str) -> (String, String) {
    let prefix = dir.join(name);
    ok(
        &["keygen", prefix.to_str().unwrap()],
        &[("COSIGN_PASSWORD", "correct horse")],
    )
    .await;
    let private = format!("{}.key", prefix.display());
    let public = format!("{}.pub", prefix.display());
    assert!(
        std::fs::read_to_string(&private)
            .unwrap()
            .contains("ENCRYPTED SIGSTORE PRIVATE KEY"),
        "cosign's encrypted key format"
    );
    (private, public)
}

#[tokio::test]
async fn a_plugin_placed_by_hand_needs_its_detached_signature_under_the_policy() {
    let keys = tempfile::tempdir().unwrap();
    let (private, _) = keygen(keys.path(), "acme").await;
    let (_, _) = keygen(keys.path(), "stranger").await;
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let config = keys.path().join("mcpbox.toml");
    std::fs::write(
        &config,
        "[signatures.keys]\nacme = \"acme.pub\"\n\n[signatures.require]\n\"*\" = [\"acme\"]\n",
    )
    .unwrap();
    let client = RecordingClient::new(&json!({}));
    let mut command = mcpbox(dir.path(), &["--config", config.to_str().unwrap()]);
    command.arg("--log").arg("info");
    let (service, log) = connect_command(command, client.clone()).await;
    assert!(service.list_all_tools().await.unwrap().is_empty());
    assert!(
        log.text()
            .contains("requires `echo_tools` to be signed by the key `acme`, and it is not signed"),
        "{}",
        log.text()
    );

    // The author signs the file: the signature appears beside it, and the plugin loads.
    let file = dir.path().join("echo_tools.wasm");
    let out = ok(
        &["sign", file.to_str().unwrap(), "--key", &private],
        &[("COSIGN_PASSWORD", "correct horse")],
    )
    .await;
    assert!(out.contains("echo_tools.wasm.sig"), "{out}");
    client.wait_for("tools/list_changed", 1).await;
    let result = service
        .call_tool(call("echo", json!({"text": "by hand"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("by hand".to_owned(), false));
    drop(service);

    // A signature by another key is refused, naming what was found.
    let stranger = keys.path().join("stranger.key");
    ok(
        &[
            "sign",
            file.to_str().unwrap(),
            "--key",
            stranger.to_str().unwrap(),
        ],
        &[("COSIGN_PASSWORD", "correct horse")],
    )
    .await;
    let mut command = mcpbox(dir.path(), &["--config", config.to_str().unwrap()]);
    command.arg("--log").arg("info");
    let (service, log) = connect_command(command, RecordingClient::new(&json!({}))).await;
    assert!(service.list_all_tools().await.unwrap().is_empty());
    assert!(
        log.text()
            .contains("is not a signature of it by any of them"),
        "{}",
        log.text()
    );
}

#[tokio::test]
async fn a_registry_that_is_down_is_named_and_running_plugins_are_unaffected() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let (service, _) = connect_logged(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let host = format!("127.0.0.1:{closed}");
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
    assert!(
        error.contains(&format!("cannot reach the registry {host}")),
        "{error}"
    );
    assert!(!dir.path().join("mcpbox.lock").exists());
    let result = service
        .call_tool(call("echo", json!({"text": "unaffected"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&result), ("unaffected".to_owned(), false));
}

/// A registry that misbehaves as a real one cannot: on loopback, answering `/v2/` (no auth)
/// and each of `routes` (path → body, sent with its length, or streamed in chunks without one
/// when `chunked`), 404 for anything else. Its `host:port`.
async fn fake_registry(routes: Vec<(String, Vec<u8>, bool)>) -> String {
    use axum::body::Body;
    use axum::response::IntoResponse as _;
    let routes: std::sync::Arc<std::collections::HashMap<String, (Vec<u8>, bool)>> =
        std::sync::Arc::new(
            routes
                .into_iter()
                .map(|(path, body, chunked)| (path, (body, chunked)))
                .collect(),
        );
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
        let routes = std::sync::Arc::clone(&routes);
        async move {
            if uri.path() == "/v2/" {
                return "{}".into_response();
            }
            let Some((body, chunked)) = routes.get(uri.path()).cloned() else {
                return (axum::http::StatusCode::NOT_FOUND, "not here").into_response();
            };
            let content_type = [(
                axum::http::header::CONTENT_TYPE,
                "application/vnd.oci.image.manifest.v1+json",
            )];
            if chunked {
                let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                    body.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
                (
                    content_type,
                    Body::from_stream(futures::stream::iter(chunks)),
                )
                    .into_response()
            } else {
                (content_type, body).into_response()
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    host
}

/// A component artifact's manifest naming a component blob no one serves.
fn component_manifest(seed: &str) -> Vec<u8> {
    json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": sha256(b"{}"), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": sha256(seed.as_bytes()), "size": seed.len()}],
    })
    .to_string()
    .into_bytes()
}

#[tokio::test]
async fn oversized_manifests_and_signatures_are_refused_unread() {
    // 5 MiB manifests: one with its length, one streamed without. Neither is held: refused
    // from the length, or cut at the cap.
    let huge = vec![b' '; 5 * 1024 * 1024];
    // A component whose signature manifest is 1.5 MiB, and one whose signature is 100 KB.
    let signed = component_manifest("signed");
    let signed_digest = sha256(&signed);
    let big_signature = component_manifest("big signature");
    let big_signature_digest = sha256(&big_signature);
    let signature_manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha256(b"{}"), "size": 2},
        "layers": [{
            "mediaType": "application/vnd.dev.cosign.simplesigning.v1+json",
            "digest": sha256(b"payload"),
            "size": 100_000,
            "annotations": {"dev.cosignproject.cosign/signature": "c2ln"},
        }],
    })
    .to_string()
    .into_bytes();
    let sig_path = |repo: &str, digest: &str| {
        format!(
            "/v2/plugins/{repo}/manifests/{}.sig",
            digest.replace(':', "-")
        )
    };
    let host = fake_registry(vec![
        ("/v2/plugins/big/manifests/1.0".into(), huge.clone(), false),
        (
            "/v2/plugins/chunked/manifests/1.0".into(),
            huge.clone(),
            true,
        ),
        ("/v2/plugins/signed/manifests/1.0".into(), signed, false),
        (
            sig_path("signed", &signed_digest),
            vec![b' '; 1536 * 1024],
            false,
        ),
        (
            "/v2/plugins/bigsig/manifests/1.0".into(),
            big_signature,
            false,
        ),
        (
            sig_path("bigsig", &big_signature_digest),
            signature_manifest,
            false,
        ),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().to_str().unwrap();
    let keys = tempfile::tempdir().unwrap();
    let (_, public) = keygen(keys.path(), "acme").await;

    let error = refused(
        &pull_args(&format!("{host}/plugins/big:1.0"), to, &[], &host),
        &[],
    )
    .await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: refusing {host}/plugins/big:1.0: its manifest is 5242880 bytes, over the 4194304 bytes (4 MiB) mcpbox accepts"
        )
    );
    let error = refused(
        &pull_args(&format!("{host}/plugins/chunked:1.0"), to, &[], &host),
        &[],
    )
    .await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: refusing {host}/plugins/chunked:1.0: its manifest is over the 4194304 bytes (4 MiB) mcpbox accepts (reading stopped there)"
        )
    );
    let error = refused(
        &pull_args(
            &format!("{host}/plugins/signed:1.0"),
            to,
            &["--key", &public],
            &host,
        ),
        &[],
    )
    .await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: refusing {host}/plugins/signed@{signed_digest}: its signature manifest is 1572864 bytes, over the 1048576 bytes (1 MiB) mcpbox accepts"
        )
    );
    let error = refused(
        &pull_args(
            &format!("{host}/plugins/bigsig:1.0"),
            to,
            &["--key", &public],
            &host,
        ),
        &[],
    )
    .await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: refusing {host}/plugins/bigsig@{big_signature_digest}: its signature is 100000 bytes, over the 65536 bytes (64 KiB) mcpbox accepts"
        )
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn a_registry_that_never_answers_times_out_naming_it() {
    // Accepts connections (the kernel does, into the backlog) and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let reference = format!("{host}/plugins/silent:1.0");
    let error = refused(
        &pull_args(&reference, dir.path().to_str().unwrap(), &[], &host),
        &[("MCPBOX_REGISTRY_TIMEOUT", "2")],
    )
    .await;
    assert_eq!(
        error_line(&error),
        format!(
            "mcpbox: the registry {host} did not answer within 2 s while fetching the manifest ({reference}); if it is only slow, raise --registry-timeout (MCPBOX_REGISTRY_TIMEOUT)"
        )
    );
    // The flag says the same, and a signing or a push is bounded too.
    let keys = tempfile::tempdir().unwrap();
    let (private, _) = keygen(keys.path(), "acme").await;
    let error = refused(
        &[
            "sign",
            &reference,
            "--key",
            &private,
            "--insecure-registry",
            &host,
            "--registry-timeout",
            "1",
        ],
        &[("COSIGN_PASSWORD", "correct horse")],
    )
    .await;
    assert!(
        error_line(&error).contains("did not answer within 1 s"),
        "{error}"
    );
    let file = component("echo_tools");
    let error = refused(
        &[
            "push",
            file.to_str().unwrap(),
            &reference,
            "--insecure-registry",
            &host,
            "--registry-timeout",
            "1",
        ],
        &[],
    )
    .await;
    assert!(
        error_line(&error).contains(&format!("{host} did not answer within 1 s")),
        "{error}"
    );
}
