//! The container image, end to end: `host/container/build.sh` stages the mcpbox binary (the
//! test's own build, to stay fast; operators get the `dist` build) with the libraries it links,
//! buildah (Debian's, installed if missing) builds `host/container/Containerfile`, and the
//! image runs: as the unprivileged user, with its directories and defaults, answering real
//! plugin calls (one keeping state) from its plugin directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::external;
use crate::support::example_plugins;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// buildah's global flags: storage of its own under target/, no daemon, no overlay.
fn storage() -> Vec<String> {
    let base = root().join("target/container");
    vec![
        "--root".to_owned(),
        base.join("storage").display().to_string(),
        "--runroot".to_owned(),
        base.join("run").display().to_string(),
        "--storage-driver".to_owned(),
        "vfs".to_owned(),
    ]
}

fn buildah(args: &[&str]) -> Output {
    let program = external::debian("buildah", "buildah");
    Command::new(program)
        .args(storage())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run buildah {args:?}: {e}"))
}

fn ok(output: &Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[test]
fn the_container_image_builds_and_serves_a_plugin() {
    let _ = external::debian("buildah", "buildah");
    let image = format!("localhost/mcpbox-test:{}", std::process::id());
    let built = Command::new("bash")
        .arg(root().join("host/container/build.sh"))
        .arg(&image)
        .env("MCPBOX_BINARY", env!("CARGO_BIN_EXE_mcpbox"))
        .env("BUILDAH_FLAGS", storage().join(" "))
        .output()
        .unwrap();
    assert_eq!(ok(&built, "host/container/build.sh"), image);

    let config = ok(
        &buildah(&[
            "inspect",
            "--type",
            "image",
            "--format",
            "{{.OCIv1.Config.User}} {{.OCIv1.Config.Env}} {{.OCIv1.Config.Entrypoint}} {{.OCIv1.Config.Labels}}",
            &image,
        ]),
        "buildah inspect",
    );
    assert!(
        config.starts_with("65532:65532 "),
        "runs as an unprivileged user: {config}"
    );
    assert!(
        config.contains("MCPBOX_PLUGINS=/plugins") && config.contains("MCPBOX_STATE_DIR=/state"),
        "{config}"
    );
    assert!(config.contains("[/mcpbox]"), "{config}");
    // The MCP Registry's ownership label names the server as host/deploy/server.json does.
    let listing: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("host/deploy/server.json")).unwrap(),
    )
    .unwrap();
    let label = format!(
        "io.modelcontextprotocol.server.name:{}",
        listing["name"].as_str().unwrap()
    );
    assert!(config.contains(&label), "{label} in {config}");

    let container = ok(&buildah(&["from", &image]), "buildah from");
    // The plugin directory, as a volume would hold it (bind mounts need more than chroot
    // isolation gives).
    let plugins = example_plugins().display().to_string();
    ok(
        &buildah(&["copy", &container, &plugins, "/plugins"]),
        "buildah copy",
    );
    let run = |command: &[&str]| {
        let mut args = vec![
            "run",
            "--isolation",
            "chroot",
            "--user",
            "65532:65532",
            &container,
            "--",
        ];
        args.extend_from_slice(command);
        buildah(&args)
    };
    let version = ok(
        &run(&["/mcpbox", "--version"]),
        "mcpbox --version in the image",
    );
    assert!(version.starts_with("mcpbox "), "{version}");
    let answer = ok(
        &run(&[
            "/mcpbox",
            "call",
            "/plugins/echo_tools.wasm",
            "echo",
            "--args",
            r#"{"text": "from the image"}"#,
        ]),
        "mcpbox call in the image",
    );
    assert!(answer.contains("from the image"), "{answer}");
    // The state directory is the unprivileged user's to write.
    let answer = ok(
        &run(&[
            "/mcpbox",
            "call",
            "/plugins/todo.wasm",
            "add",
            "--args",
            r#"{"text": "kept"}"#,
        ]),
        "a stateful call in the image",
    );
    assert!(answer.contains("\"isError\": false"), "{answer}");

    let _ = buildah(&["rm", &container]);
    let _ = buildah(&["rmi", "-f", &image]);
}
