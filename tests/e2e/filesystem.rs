//! The filesystem server (`plugins/filesystem`) holding its grants against a client that
//! tries to leave them: paths outside, `..`, symlinks leading out (absolute and relative),
//! writes to a read-only grant and through symlinks, moves out, a granted folder replaced by
//! a link while loaded; and the client's roots
//! narrowing the grants, never widening them, read once per session until the client says
//! they changed. (Its sameness with the original is `services::reference`.)

use std::path::Path;

use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use crate::support::{RecordingClient, connect_with, plugin_dir, tool_text};

/// A tool's text and whether it failed.
async fn call<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    tool: &'static str,
    arguments: Value,
) -> (String, bool) {
    let Value::Object(arguments) = arguments else {
        panic!("arguments must be an object")
    };
    let result = client
        .call_tool(rmcp::model::CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    tool_text(&result)
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// A tree: `data/` (granted read-write) with a file, a subdirectory and three symlinks (one
/// in, two out); `ro/` (granted read-only); `secret/` (not granted).
struct Tree {
    _root: tempfile::TempDir,
    data: std::path::PathBuf,
    ro: std::path::PathBuf,
    secret: std::path::PathBuf,
}

fn tree() -> Tree {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    let (data, ro, secret) = (base.join("data"), base.join("ro"), base.join("secret"));
    for dir in [&data, &ro, &secret, &data.join("sub")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(data.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(data.join("sub/b.txt"), "beta\n").unwrap();
    std::fs::write(ro.join("r.txt"), "read only\n").unwrap();
    std::fs::write(secret.join("s.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(secret.join("s.txt"), data.join("abs")).unwrap();
    std::os::unix::fs::symlink("../secret/s.txt", data.join("rel")).unwrap();
    std::os::unix::fs::symlink("../secret", data.join("dirlink")).unwrap();
    std::os::unix::fs::symlink("a.txt", data.join("inside")).unwrap();
    Tree {
        _root: root,
        data,
        ro,
        secret,
    }
}

fn grant(dir: &Path, tree: &Tree) {
    std::fs::write(
        dir.join("filesystem.toml"),
        format!(
            "[[dirs]]\nhost = \"{}\"\nmode = \"read-write\"\n\n[[dirs]]\nhost = \"{}\"\n",
            tree.data.display(),
            tree.ro.display()
        ),
    )
    .unwrap();
}

/// A granted folder replaced by a link while its plugin is loaded (as a plugin granted the
/// folder above it could do, or anyone else): the next call is refused, naming the link, and
/// never opens where the link leads.
#[tokio::test]
async fn a_granted_folder_replaced_by_a_link_while_loaded_is_refused_at_the_next_call() {
    let tree = tree();
    let dir = plugin_dir(&[("filesystem", "filesystem.wasm")]);
    grant(dir.path(), &tree);
    let client = connect_with(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    let file = json!({"path": format!("{}/a.txt", path(&tree.data))});
    assert_eq!(
        call(&client, "read_text_file", file.clone()).await,
        ("alpha\n".to_owned(), false)
    );

    std::fs::write(tree.secret.join("a.txt"), "stolen\n").unwrap();
    std::fs::rename(&tree.data, tree.data.with_extension("old")).unwrap();
    std::os::unix::fs::symlink(&tree.secret, &tree.data).unwrap();
    let Value::Object(arguments) = file else {
        unreachable!()
    };
    let said = match client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("read_text_file").with_arguments(arguments),
        )
        .await
    {
        Ok(result) => tool_text(&result).0,
        Err(error) => error.to_string(),
    };
    assert!(
        said.contains(&format!(
            "granted directory {} is now a link to {}",
            path(&tree.data),
            path(&tree.secret)
        )),
        "{said}"
    );
    assert!(!said.contains("stolen"), "{said}");
}

#[tokio::test]
async fn the_filesystem_server_stays_inside_its_grants() {
    let tree = tree();
    let dir = plugin_dir(&[("filesystem", "filesystem.wasm")]);
    grant(dir.path(), &tree);
    let client = connect_with(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    let (data, ro, secret) = (path(&tree.data), path(&tree.ro), path(&tree.secret));

    // Granted directories are seen where the host has them.
    assert_eq!(
        call(&client, "list_allowed_directories", json!({})).await,
        (format!("Allowed directories:\n{data}\n{ro}"), false)
    );
    assert_eq!(
        call(
            &client,
            "read_text_file",
            json!({"path": format!("{data}/a.txt")})
        )
        .await,
        ("alpha\n".to_owned(), false)
    );
    assert_eq!(
        call(
            &client,
            "read_text_file",
            json!({"path": format!("{data}/inside")})
        )
        .await,
        ("alpha\n".to_owned(), false)
    );

    // Outside, by name, by `..`, and through symlinks: refused, nothing read.
    let outside = format!("Access denied - path outside allowed directories: {secret}/s.txt");
    for requested in [format!("{secret}/s.txt"), format!("{data}/../secret/s.txt")] {
        let (text, failed) = call(&client, "read_text_file", json!({"path": requested})).await;
        assert!(failed && text.starts_with(&outside), "{requested}: {text}");
    }
    for link in ["abs", "rel", "dirlink"] {
        for (tool, arguments) in [
            ("read_text_file", json!({"path": format!("{data}/{link}")})),
            (
                "write_file",
                json!({"path": format!("{data}/{link}"), "content": "owned"}),
            ),
            ("list_directory", json!({"path": format!("{data}/{link}")})),
            (
                "read_text_file",
                json!({"path": format!("{data}/{link}/s.txt")}),
            ),
        ] {
            let (text, failed) = call(&client, tool, arguments.clone()).await;
            assert!(
                failed
                    && text
                        .starts_with("Access denied - symlink target outside allowed directories"),
                "{tool} {arguments}: {text}"
            );
        }
    }
    let (text, failed) = call(
        &client,
        "move_file",
        json!({"source": format!("{data}/a.txt"), "destination": format!("{secret}/moved.txt")}),
    )
    .await;
    assert!(failed && text.starts_with("Access denied"), "{text}");
    // Searching and listing do not follow a link out either.
    let (text, _) = call(
        &client,
        "search_files",
        json!({"path": data, "pattern": "**/s.txt"}),
    )
    .await;
    assert_eq!(text, "No matches found");
    let (text, _) = call(&client, "directory_tree", json!({"path": data})).await;
    assert!(!text.contains("s.txt"), "{text}");

    // A read-only grant: reads work, changes are refused by the sandbox and leave no trace.
    assert_eq!(
        call(
            &client,
            "read_text_file",
            json!({"path": format!("{ro}/r.txt")})
        )
        .await,
        ("read only\n".to_owned(), false)
    );
    for (tool, arguments) in [
        (
            "write_file",
            json!({"path": format!("{ro}/new.txt"), "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": format!("{ro}/r.txt"), "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": format!("{ro}/r.txt"), "edits": [{"oldText": "read", "newText": "write"}]}),
        ),
        ("create_directory", json!({"path": format!("{ro}/d")})),
        (
            "move_file",
            json!({"source": format!("{ro}/r.txt"), "destination": format!("{ro}/m.txt")}),
        ),
    ] {
        let (text, failed) = call(&client, tool, arguments.clone()).await;
        assert!(failed, "{tool} {arguments}: {text}");
    }
    let mut left: Vec<_> = std::fs::read_dir(&tree.ro)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["r.txt"]);
    assert_eq!(
        std::fs::read_to_string(tree.ro.join("r.txt")).unwrap(),
        "read only\n"
    );
    assert_eq!(
        std::fs::read_to_string(tree.secret.join("s.txt")).unwrap(),
        "secret\n"
    );

    // The read-write grant takes changes, atomically (no temporary file left behind).
    assert_eq!(
        call(
            &client,
            "write_file",
            json!({"path": format!("{data}/a.txt"), "content": "new"})
        )
        .await,
        (format!("Successfully wrote to {data}/a.txt"), false)
    );
    assert_eq!(
        std::fs::read_to_string(tree.data.join("a.txt")).unwrap(),
        "new"
    );
    assert!(
        std::fs::read_dir(&tree.data).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".tmp"))
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn roots_narrow_the_grants_and_are_read_again_when_they_change() {
    let tree = tree();
    let dir = plugin_dir(&[("filesystem", "filesystem.wasm")]);
    grant(dir.path(), &tree);
    let (data, ro, secret) = (path(&tree.data), path(&tree.ro), path(&tree.secret));
    let uri = |p: &str| format!("file://{p}");
    // One root inside a grant, one outside every grant (skipped, never a widening).
    let client = RecordingClient::new(&json!({"roots": {"listChanged": true}})).with_roots(json!({
        "roots": [{"uri": uri(&format!("{data}/sub")), "name": "sub"}, {"uri": uri(&secret), "name": "secret"}]
    }));
    let roots = client.roots.clone();
    let events = client.clone();
    let client = connect_with(dir.path(), &[], client).await;
    assert_eq!(
        call(&client, "list_allowed_directories", json!({})).await,
        (format!("Allowed directories:\n{data}/sub"), false)
    );
    let (text, failed) = call(
        &client,
        "read_text_file",
        json!({"path": format!("{data}/a.txt")}),
    )
    .await;
    assert!(
        failed && text.starts_with("Access denied - path outside allowed directories"),
        "{text}"
    );
    assert_eq!(
        call(&client, "read_text_file", json!({"path": "b.txt"})).await,
        ("beta\n".to_owned(), false)
    );
    let (text, failed) = call(
        &client,
        "read_text_file",
        json!({"path": format!("{secret}/s.txt")}),
    )
    .await;
    assert!(failed && text.starts_with("Access denied"), "{text}");
    // Asked once for the three calls: the session keeps the answer.
    assert_eq!(events.events("roots").len(), 1);

    // Roots change: a root above a grant stands for the grants below it.
    *roots.lock().unwrap() =
        json!({"roots": [{"uri": uri(&path(tree.data.parent().unwrap())), "name": "all"}]});
    client.notify_roots_list_changed().await.unwrap();
    let deadline = tokio::time::Instant::now() + crate::support::STEP;
    loop {
        let (text, _) = call(&client, "list_allowed_directories", json!({})).await;
        if text == format!("Allowed directories:\n{data}\n{ro}") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{text}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Roots that are all outside the grants leave the grants as they are.
    *roots.lock().unwrap() = json!({"roots": [{"uri": uri(&secret), "name": "secret"}, {"uri": "file:///nonexistent", "name": "x"}]});
    client.notify_roots_list_changed().await.unwrap();
    let (text, failed) = call(
        &client,
        "read_text_file",
        json!({"path": format!("{secret}/s.txt")}),
    )
    .await;
    assert!(failed && text.starts_with("Access denied"), "{text}");
    client.cancel().await.unwrap();
}

/// A FIFO made in `tree`'s data directory, and a plugin directory serving the filesystem
/// plugin (granted that directory, its calls limited to `timeout_ms`) beside `others`.
fn with_a_fifo(
    tree: &Tree,
    others: &[(&str, &str)],
    timeout_ms: u32,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let fifo = tree.data.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let mut plugins = vec![("filesystem", "filesystem.wasm")];
    plugins.extend_from_slice(others);
    let dir = plugin_dir(&plugins);
    std::fs::write(
        dir.path().join("filesystem.toml"),
        format!(
            "[[dirs]]\nhost = \"{}\"\n\n[limits]\ntimeout-ms = {timeout_ms}\n",
            tree.data.display()
        ),
    )
    .unwrap();
    (dir, fifo)
}

/// A FIFO in a granted directory blocks whoever opens it until a writer comes. A plugin
/// granted a directory runs its calls on threads of tokio's blocking pool, so the call's
/// time limit ends each such call, and the host goes on serving: on the runtime's own
/// threads, two of them stopped every other request.
#[tokio::test]
async fn a_fifo_in_a_granted_directory_times_out_the_call_alone() {
    let tree = tree();
    let (dir, fifo) = with_a_fifo(&tree, &[], 1000);
    let client = connect_with(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    let pipe = json!({"path": path(&fifo)});
    let plain = json!({"path": path(&tree.data.join("a.txt"))});
    let (first, second, ordinary) =
        tokio::time::timeout(std::time::Duration::from_secs(20), async {
            tokio::join!(
                call(&client, "read_text_file", pipe.clone()),
                call(&client, "read_text_file", pipe.clone()),
                async {
                    // Once both FIFO reads are waiting.
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    call(&client, "read_text_file", plain.clone()).await
                },
            )
        })
        .await
        .expect("every call is answered");
    for (text, failed) in [&first, &second] {
        assert!(*failed && text.contains("timed out"), "{text}");
    }
    assert_eq!(ordinary, ("alpha\n".to_owned(), false));
    // And after them, the host still serves.
    assert_eq!(call(&client, "read_text_file", plain).await.0, "alpha\n");
}

/// Calls blocked on a FIFO keep their threads, and their instances, until a writer comes; one
/// plugin's calls may hold at most a quarter of the instance pool (with 4 slots, one), so
/// that however many such calls come, other plugins are still served.
#[tokio::test]
async fn calls_blocked_on_a_fifo_take_at_most_their_plugins_share_of_the_pool() {
    let tree = tree();
    let (dir, fifo) = with_a_fifo(&tree, &[("echo_tools", "echo_tools.wasm")], 300);
    let client = connect_with(
        dir.path(),
        &["--max-instances", "4"],
        RecordingClient::new(&json!({})),
    )
    .await;
    let pipe = json!({"path": path(&fifo)});
    let (blocked, echoed) = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        // As many as the pool has slots, at once.
        let blocked = futures::future::join_all(
            (0..4).map(|_| call(&client, "read_text_file", pipe.clone())),
        )
        .await;
        let echoed = call(&client, "echo", json!({"text": "still served"})).await;
        (blocked, echoed)
    })
    .await
    .expect("every call is answered");
    for (text, failed) in &blocked {
        assert!(*failed && text.contains("timed out"), "{text}");
    }
    assert_eq!(echoed, ("still served".to_owned(), false));
}
