//! Managed installs (`[manage]`) against real services on loopback: Debian's
//! `docker-registry` holding signed and unsigned artifacts (pushed with the grants their
//! author asks for), mcpbox over HTTP with its own OAuth (`oauth2-mock-server`: alice holds the
//! management scope, bob does not, admin also holds a plugin's scope), and the official Python
//! SDK as the client whose elicitation callback stands in for the user
//! (`tests/python/manage_client.py`), on 2025-11-25 and 2026-07-28.
//!
//! Shown: accept installs exactly the grants approved (the manifest written, and what the
//! plugin can reach), and every client is told and served at once, and removal the same way;
//! decline, cancel and a client that cannot be asked install nothing; arguments naming grants
//! not on offer add nothing; a tag moved between the consent and the install installs nothing
//! and the user is asked again; an unsigned artifact under the signature policy is refused
//! before the user is asked; a caller without the scope sees no management tool, and a search
//! never names a tool the caller's scopes hide, nor may they replace or remove a plugin
//! installed for a scope they lack; `pull` shows what an artifact asks for and
//! applies nothing; a replica sharing the managed directory serves what another installed; over
//! stdio the local user needs no scope; a source `REGISTRY/PATH/*` is searched through the
//! registry's catalog (only its repositories under PATH), and one whose registry serves no
//! catalog is named in the result; a folder the user approved that a symbolic link replaces
//! afterwards makes the plugin refused at load. The harness is `harness`.

mod harness;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use self::harness::{Setup, events_of, next_event, result_of};
use crate::registry::{component, ok, refused};
use crate::support::{RecordingClient, call, connect_logged, tool_text};

#[tokio::test]
async fn accept_installs_exactly_what_was_approved_for_every_client_and_removal_too() {
    let setup = Setup::new().await;
    let root = setup.root();
    let (data, docs, secret) = (root.join("data"), root.join("docs"), root.join("secret"));
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let bob = setup.token("bob", "mcp").await;

    // Bob holds a listen stream (2026-07-28) before anything is installed.
    let mut listener = setup
        .client(
            &bob,
            "listen",
            json!([]),
            json!([["list_allowed_directories", {}]]),
        )
        .await;
    let mut lines = BufReader::new(listener.stdout.take().unwrap()).lines();
    next_event(&mut lines, "listening").await;

    // Alice (2025-11-25) installs, with arguments naming grants not on offer, and unticks the
    // second grant (the docs folder) in the form.
    let files = setup.reference("files:1");
    let hostile = json!([
        format!("folder:{}/notes:read-write", data.display()),
        format!("folder:{}:read-write", docs.display()),
        format!("folder:{}:read-only", docs.display()),
        format!("folder:{}:read-write", secret.display()),
        "host:127.0.0.1:9",
        "host:evil.example",
        "public-http",
    ]);
    let events = setup
        .run(
            &alice,
            "legacy",
            json!([{"untick": [2]}]),
            json!([
                ["mcpbox_install_plugin", {"reference": files, "grants": hostile}],
                ["list_allowed_directories", {}],
            ]),
        )
        .await;
    let asked = events_of(&events, "elicitation");
    assert_eq!(asked.len(), 1, "{events:#?}");
    let message = asked[0]["message"].as_str().unwrap();
    let digest = result_of(&events, "mcpbox_install_plugin")["structured"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    for shown in [
        format!("Install the plugin `files` from {files}?"),
        format!("Digest: {digest}"),
        "Signed by `acme` (key sha256:".to_owned(),
        format!("  1. read and write the folder {}/notes", data.display()),
        format!("  2. read the folder {}", docs.display()),
        "  3. send HTTP requests to 127.0.0.1:9".to_owned(),
        // Each limit at most the ceiling's, or else the command line's.
        "Limits: fuel 5000000000, memory-mib 128, output-kib 64, result-kib 4096, timeout-ms 30000"
            .to_owned(),
        format!(
            "  - write access to the folder {} (the operator allows reading it only)",
            docs.display()
        ),
        format!(
            "  - the folder {}: not inside a folder the operator allows",
            secret.display()
        ),
        "  - HTTP requests to evil.example: not a host the operator allows".to_owned(),
        "  - memory-mib 256 (lowered to the operator's 128)".to_owned(),
        "The request named grants the plugin is not offered (ignored):".to_owned(),
        "  - host:evil.example".to_owned(),
        format!("  - folder:{}:read-write", secret.display()),
        "  - public-http".to_owned(),
    ] {
        assert!(message.contains(&shown), "{shown}\nin:\n{message}");
    }
    assert_eq!(asked[0]["mode"], "form");
    assert_eq!(asked[0]["requestedSchema"]["required"], json!(["confirm"]));

    let installed = result_of(&events, "mcpbox_install_plugin");
    assert_eq!(installed["isError"], false, "{installed}");
    assert_eq!(
        installed["structured"]["grants"],
        json!([
            format!("folder:{}/notes:read-write", data.display()),
            "host:127.0.0.1:9"
        ])
    );
    assert!(digest.starts_with("sha256:"));
    // The manifest written holds exactly what was approved.
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(setup.managed().join("files.toml")).unwrap())
            .unwrap();
    assert_eq!(
        manifest["dirs"].as_array().unwrap(),
        &vec![toml::Value::Table(
            toml::from_str(&format!(
                "host = \"{}/notes\"\nmode = \"read-write\"",
                data.display()
            ))
            .unwrap()
        )]
    );
    assert_eq!(manifest["http"]["allow"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["http"]["allow"][0].as_str(), Some("127.0.0.1:9"));
    assert_eq!(manifest["limits"]["memory-mib"].as_integer(), Some(128));
    assert_eq!(setup.installed(), ["files"]);
    // And the plugin reaches exactly that: the next call, served at once.
    let reach = result_of(&events, "list_allowed_directories");
    let text = reach["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("{}/notes", data.display())),
        "{text}"
    );
    assert!(!text.contains(&docs.display().to_string()), "{text}");
    assert!(!text.contains(&secret.display().to_string()), "{text}");
    let took = installed["ms"].as_u64().unwrap();

    // Bob, who cannot manage, was told and is served the new tool.
    let called = next_event(&mut lines, "result").await;
    assert_eq!(called["isError"], false, "{called}");
    assert!(
        called["text"].as_str().unwrap().contains("notes"),
        "{called}"
    );

    // Alice lists it, then removes it (2026-07-28 this time); Bob hears it go.
    let events = setup
        .run(
            &alice,
            "2026-07-28",
            json!(["accept"]),
            json!([
                ["mcpbox_list_plugins", {}],
                ["mcpbox_remove_plugin", {"name": "files"}],
            ]),
        )
        .await;
    let listed = &result_of(&events, "mcpbox_list_plugins")["structured"]["plugins"];
    let entry = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "files")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(entry["managed"], true);
    assert_eq!(entry["digest"].as_str(), Some(digest.as_str()));
    assert_eq!(entry["signer"], "acme");
    let asked = events_of(&events, "elicitation");
    assert_eq!(asked.len(), 1, "{events:#?}");
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Remove the plugin `files` ({files}, {digest})?")),
        "{asked:?}"
    );
    assert_eq!(
        result_of(&events, "mcpbox_remove_plugin")["structured"]["removed"],
        true
    );
    next_event(&mut lines, "gone").await;
    assert!(setup.installed().is_empty());
    assert!(!setup.managed().join("files.wasm").exists());
    let _ = listener.kill().await;

    // Each step is in the audit log, as alice.
    let steps: Vec<String> = setup
        .audit()
        .iter()
        .filter(|r| {
            r["method"]
                .as_str()
                .is_some_and(|m| m.starts_with("manage/"))
        })
        .map(|r| {
            assert!(
                r["principal"].as_str().unwrap().ends_with("sub:alice"),
                "{r}"
            );
            r["method"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        steps,
        [
            "manage/resolved",
            "manage/ask",
            "manage/accepted",
            "manage/install",
            // 2026-07-28: asked in the first round, answered in the retry.
            "manage/ask",
            "manage/ask",
            "manage/accepted",
            "manage/remove"
        ]
    );
    // From the call to the plugin serving, the user's answer included (a few hundred ms here).
    assert!(took < 20_000, "installing took {took} ms");
    #[expect(clippy::print_stderr, reason = "the measured latency, for the issue")]
    {
        eprintln!("install latency, from the call to the plugin serving: {took} ms");
    }
}

#[tokio::test]
async fn decline_cancel_a_client_that_cannot_be_asked_and_an_unsigned_artifact_install_nothing() {
    let setup = Setup::new().await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let echo = setup.reference("echo:1");
    let install = json!(["mcpbox_install_plugin", {"reference": echo}]);
    for mode in ["legacy", "2026-07-28"] {
        let events = setup
            .run(
                &alice,
                mode,
                json!(["decline", "cancel"]),
                json!([install, install]),
            )
            .await;
        assert_eq!(
            events_of(&events, "elicitation").len(),
            2,
            "{mode}: {events:#?}"
        );
        let results = events_of(&events, "result");
        assert_eq!(
            results[0]["structured"],
            json!({"installed": false, "action": "decline"})
        );
        assert_eq!(
            results[0]["text"],
            "The user declined: nothing was installed."
        );
        assert_eq!(
            results[1]["structured"],
            json!({"installed": false, "action": "cancel"})
        );
        assert!(setup.installed().is_empty(), "{mode}");
    }
    // A client that declares no elicitation is refused, with the reason.
    for mode in ["legacy", "2026-07-28"] {
        let events = setup
            .run(&alice, mode, json!(["none"]), json!([install]))
            .await;
        let result = result_of(&events, "mcpbox_install_plugin");
        assert_eq!(result["isError"], true);
        assert!(
            result["text"]
                .as_str()
                .unwrap()
                .starts_with("this client cannot show the user a form"),
            "{result}"
        );
    }
    // An unsigned artifact the policy requires signed: refused before anyone is asked.
    let unsigned = setup.reference("unsigned:1");
    let events = setup
        .run(
            &alice,
            "legacy",
            json!(["accept"]),
            json!([["mcpbox_install_plugin", {"reference": unsigned}]]),
        )
        .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:#?}");
    let result = result_of(&events, "mcpbox_install_plugin");
    assert_eq!(result["isError"], true);
    let text = result["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("refused {unsigned} before asking the user: "))
            && text.contains("requires `unsigned` to be signed by the key `acme`")
            && text.ends_with("; nothing was installed"),
        "{text}"
    );
    // A reference outside the sources, a hostile one, a name that is a path, an argument the
    // tool does not take: refused before anything is fetched.
    let host = setup.registry.host();
    let refusals = [
        (
            json!({"reference": format!("{host}/plugins/elsewhere:1")}),
            "is not in the operator's sources",
        ),
        (
            json!({"reference": format!("{host}/plugins/echo/../unsigned:1")}),
            "",
        ),
        (
            json!({"reference": "evil.example/plugins/echo:1"}),
            "is not in the operator's sources",
        ),
        (
            json!({"reference": echo, "name": "../../managed/evil"}),
            "is not a plugin name",
        ),
        (
            json!({"reference": echo, "name": "governed"}),
            "the operator's configuration governs a plugin named `governed`",
        ),
        (
            json!({"reference": echo, "grants": [], "ceiling": {"hosts": ["*"]}}),
            "unknown field `ceiling`",
        ),
    ];
    let calls: Vec<Value> = refusals
        .iter()
        .map(|(arguments, _)| json!(["mcpbox_install_plugin", arguments]))
        .collect();
    let events = setup
        .run(&alice, "legacy", json!(["accept"]), json!(calls))
        .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:#?}");
    let results = events_of(&events, "result");
    assert_eq!(results.len(), refusals.len(), "{events:#?}");
    for (result, (arguments, why)) in results.iter().zip(&refusals) {
        assert_eq!(result["isError"], true, "{arguments}: {result}");
        assert!(
            result["text"].as_str().unwrap().contains(why),
            "{arguments}: {result}"
        );
    }
    assert!(setup.installed().is_empty());
    assert!(!setup.managed().join("echo.wasm").exists());
}

#[tokio::test]
async fn a_tag_moved_between_consent_and_install_installs_nothing_and_asks_again() {
    let setup = Setup::new().await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let moving = setup.reference("moving:1");
    let host = setup.registry.host();
    let mcpbox = env!("CARGO_BIN_EXE_mcpbox");
    for (mode, plugin) in [("legacy", "time"), ("2026-07-28", "quotes")] {
        // While the user reads the question, someone pushes another component (signed) under
        // the tag; then the user accepts.
        let move_tag = format!(
            "{mcpbox} push {file} {moving} --insecure-registry {host} --no-tools && {mcpbox} sign {moving} --key {key} --insecure-registry {host}",
            file = component(plugin).display(),
            key = setup.key,
        );
        let events = setup
            .run(
                &alice,
                mode,
                json!([{"run": ["sh", "-c", move_tag], "then": "accept"}, "decline"]),
                json!([["mcpbox_install_plugin", {"reference": moving}]]),
            )
            .await;
        let asked = events_of(&events, "elicitation");
        assert_eq!(asked.len(), 2, "{mode}: asked again: {events:#?}");
        let digest_of = |message: &str| {
            message
                .lines()
                .find_map(|l| l.strip_prefix("Digest: "))
                .unwrap()
                .to_owned()
        };
        let first = digest_of(asked[0]["message"].as_str().unwrap());
        let second = asked[1]["message"].as_str().unwrap();
        assert_ne!(first, digest_of(second), "{mode}");
        if mode == "legacy" {
            // In the same call: the user is told why they are asked again.
            assert!(
                second.starts_with("The artifact or its grants changed since you were asked: nothing was installed."),
                "{second}"
            );
        }
        let result = result_of(&events, "mcpbox_install_plugin");
        assert_eq!(result["structured"]["installed"], false, "{mode}: {result}");
        assert!(setup.installed().is_empty(), "{mode}");
    }
}

#[tokio::test]
async fn a_caller_without_the_scope_sees_no_management_tool_and_search_hides_what_scopes_hide() {
    let setup = Setup::new().await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let bob = setup.token("bob", "mcp").await;
    let admin = setup.token("admin", "mcp mcpbox:manage secret").await;

    let manage_tools = |names: &[String]| names.iter().filter(|n| n.starts_with("mcpbox_")).count();
    assert_eq!(manage_tools(&setup.tool_names(&bob).await), 0);
    assert_eq!(manage_tools(&setup.tool_names(&alice).await), 4);
    let (status, denied) = setup
        .rpc(
            &bob,
            "tools/call",
            json!({"name": "mcpbox_search_plugins", "arguments": {"query": "echo"}}),
        )
        .await;
    assert_eq!(status, 403, "{denied}");

    let search = |token: String, query: &'static str| {
        let setup = &setup;
        async move {
            let (_, found) = setup
                .rpc(
                    &token,
                    "tools/call",
                    json!({"name": "mcpbox_search_plugins", "arguments": {"query": query}}),
                )
                .await;
            assert_eq!(found["result"]["isError"], Value::Null, "{found}");
            found["result"]["structuredContent"]["results"].clone()
        }
    };
    // The sources' artifacts by their tools (listed at push) and description.
    let found = search(alice.clone(), "directories").await;
    assert_eq!(found[0]["reference"], setup.reference("files:1"), "{found}");
    assert!(
        found[0]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("list_allowed_directories"))
    );
    assert_eq!(found[0]["asksForGrants"], true);
    // The hidden plugin's tools: never named to alice, named to admin.
    let names = |found: &Value| -> Vec<String> {
        found
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["tool"].as_str().map(str::to_owned))
            .collect()
    };
    let for_alice = search(alice.clone(), "echo").await;
    assert!(names(&for_alice).is_empty(), "{for_alice}");
    assert!(
        for_alice
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["reference"] == setup.reference("echo:1")),
        "{for_alice}"
    );
    let for_admin = search(admin.clone(), "echo").await;
    assert!(
        names(&for_admin).contains(&"hidden_echo".to_owned()),
        "{for_admin}"
    );
    let (_, listed) = setup
        .rpc(
            &alice,
            "tools/call",
            json!({"name": "mcpbox_list_plugins", "arguments": {}}),
        )
        .await;
    assert_eq!(
        listed["result"]["structuredContent"]["plugins"],
        json!([]),
        "{listed}"
    );

    // `pull` shows what the artifact asks for, and applies none of it.
    let to = tempfile::tempdir().unwrap();
    let out = ok(
        &[
            "pull",
            &setup.reference("files:1"),
            "--to",
            to.path().to_str().unwrap(),
            "--insecure-registry",
            &setup.registry.host(),
        ],
        &[],
    )
    .await;
    assert!(
        out.contains("it asks for these grants and limits (not applied"),
        "{out}"
    );
    assert!(
        out.contains("  allow = [\"127.0.0.1:9\", \"evil.example\"]"),
        "{out}"
    );
    assert!(to.path().join("files.wasm").exists());
    assert!(!to.path().join("files.toml").exists());

    // `push` attaches only a manifest the host would load.
    let bad = to.path().join("bad.toml");
    std::fs::write(&bad, "[http]\nallow = 42\n").unwrap();
    let error = refused(
        &[
            "push",
            component("echo_tools").to_str().unwrap(),
            &setup.reference("bad:1"),
            "--manifest",
            bad.to_str().unwrap(),
            "--insecure-registry",
            &setup.registry.host(),
        ],
        &[],
    )
    .await;
    assert!(error.contains(&bad.display().to_string()), "{error}");

    // Issue #60: a plugin mcpbox installed for callers holding `secret` is neither replaced
    // nor removed by alice, who may not see it (the install replaced it).
    let gated = to.path().join("gated.toml");
    std::fs::write(&gated, "scopes = [\"secret\"]\n").unwrap();
    let gated_ref = setup.reference("free:gated");
    ok(
        &[
            "push",
            component("echo_tools").to_str().unwrap(),
            &gated_ref,
            "--manifest",
            gated.to_str().unwrap(),
            "--insecure-registry",
            &setup.registry.host(),
        ],
        &[],
    )
    .await;
    let events = setup
        .run(
            &admin,
            "legacy",
            json!(["accept"]),
            json!([["mcpbox_install_plugin", {"reference": gated_ref, "name": "gated"}]]),
        )
        .await;
    let installed = result_of(&events, "mcpbox_install_plugin");
    assert_eq!(installed["structured"]["installed"], true, "{events:#?}");
    let digest = installed["structured"]["digest"].clone();
    let events = setup
        .run(
            &alice,
            "legacy",
            json!(["accept", "accept"]),
            json!([
                ["mcpbox_install_plugin", {"reference": setup.reference("free:1"), "name": "gated"}],
                ["mcpbox_remove_plugin", {"name": "gated"}],
            ]),
        )
        .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:#?}");
    let results = events_of(&events, "result");
    assert_eq!(
        results[0]["text"],
        "the name `gated` is taken by a plugin mcpbox installed that this caller may not see (only those they may see can be replaced here): install under another name; nothing was installed",
        "{events:#?}"
    );
    assert_eq!(
        results[1]["text"],
        "no plugin `gated` was installed by mcpbox (only those can be removed here)"
    );
    assert_eq!(setup.installed(), ["gated"]);
    let (_, listed) = setup
        .rpc(
            &admin,
            "tools/call",
            json!({"name": "mcpbox_list_plugins", "arguments": {}}),
        )
        .await;
    let plugins = &listed["result"]["structuredContent"]["plugins"];
    let entry = plugins
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "gated")
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(entry["digest"], digest, "{listed}");
}

#[tokio::test]
async fn a_pre_approval_policy_installs_signed_artifacts_for_clients_that_cannot_be_asked() {
    let setup = Setup::with("pre-approve = \"signed\"").await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let events = setup
        .run(
            &alice,
            "2026-07-28",
            json!(["none"]),
            json!([
                ["mcpbox_install_plugin", {"reference": setup.reference("free:1")}],
                ["mcpbox_install_plugin", {"reference": setup.reference("echo:1")}],
                ["echo", {"text": "pre-approved"}],
                ["mcpbox_remove_plugin", {"name": "echo"}],
            ]),
        )
        .await;
    assert!(events_of(&events, "elicitation").is_empty(), "{events:#?}");
    let results = events_of(&events, "result");
    // Not signed: nothing vouches for it, and nobody can be asked.
    assert_eq!(results[0]["isError"], true, "{events:#?}");
    assert!(
        results[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("this client cannot show the user a form"),
        "{events:#?}"
    );
    assert_eq!(results[1]["structured"]["installed"], true, "{events:#?}");
    assert_eq!(results[2]["text"], "pre-approved");
    // Pre-approval is for installs of signed artifacts: a removal still needs the user's form
    // (issue #60: it needed no consent at all).
    assert_eq!(results[3]["isError"], true, "{events:#?}");
    assert!(
        results[3]["text"]
            .as_str()
            .unwrap()
            .starts_with("this client cannot show the user a form"),
        "{events:#?}"
    );
    assert_eq!(setup.installed(), ["echo"]);
    let steps: Vec<String> = setup
        .audit()
        .iter()
        .filter_map(|r| {
            r["method"]
                .as_str()
                .filter(|m| m.starts_with("manage/"))
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(
        steps,
        [
            "manage/resolved",
            "manage/refused",
            "manage/resolved",
            "manage/pre-approved",
            "manage/install",
        ]
    );
}

#[tokio::test]
async fn a_plugin_installed_through_one_replica_is_served_by_another_sharing_the_directory() {
    let setup = Setup::new().await;
    let (other, _replica) = setup.replica().await;
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let bob = setup.token_for(&other, "bob", "mcp").await;
    // Bob is on the other replica, listening.
    let mut listener = setup
        .client_of(
            &other,
            &bob,
            "listen",
            json!([]),
            json!([["echo", {"text": "from the other replica"}]]),
        )
        .await;
    let mut lines = BufReader::new(listener.stdout.take().unwrap()).lines();
    next_event(&mut lines, "listening").await;
    let echo = setup.reference("echo:1");
    let events = setup
        .run(
            &alice,
            "legacy",
            json!(["accept"]),
            json!([["mcpbox_install_plugin", {"reference": echo}]]),
        )
        .await;
    assert_eq!(
        result_of(&events, "mcpbox_install_plugin")["structured"]["installed"],
        true,
        "{events:#?}"
    );
    let called = next_event(&mut lines, "result").await;
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(called["text"], "from the other replica");
    let events = setup
        .run(
            &alice,
            "legacy",
            json!(["accept"]),
            json!([["mcpbox_remove_plugin", {"name": "echo"}]]),
        )
        .await;
    assert_eq!(
        result_of(&events, "mcpbox_remove_plugin")["structured"]["removed"],
        true
    );
    next_event(&mut lines, "gone").await;
    let _ = listener.kill().await;
}

#[tokio::test]
async fn over_stdio_the_local_user_manages_plugins_without_a_scope() {
    let setup = Setup::new().await;
    let config = setup.root().join("mcpbox.toml");
    let (client, _stderr) = connect_logged(
        setup.plugins.path(),
        &["--config", config.to_str().unwrap()],
        RecordingClient::new(&json!({"elicitation": {}})),
    )
    .await;
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    for tool in [
        "mcpbox_search_plugins",
        "mcpbox_install_plugin",
        "mcpbox_remove_plugin",
        "mcpbox_list_plugins",
    ] {
        assert!(tools.contains(&tool.to_owned()), "{tools:?}");
    }
    // The local user also sees the plugin only `secret` holders see over HTTP.
    assert!(tools.contains(&"hidden_echo".to_owned()), "{tools:?}");
    let installed = client
        .call_tool(call(
            "mcpbox_install_plugin",
            json!({"reference": setup.reference("echo:1")}),
        ))
        .await
        .unwrap();
    assert_eq!(
        installed.structured_content.as_ref().unwrap()["installed"],
        true,
        "{installed:?}"
    );
    let echoed = client
        .call_tool(call("echo", json!({"text": "local"})))
        .await
        .unwrap();
    assert_eq!(tool_text(&echoed), ("local".to_owned(), false));
}

/// A registry on loopback that serves no catalog: every request is answered 404 (and the
/// connection closed). Its `host:port`.
async fn registry_without_a_catalog() -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
            });
        }
    });
    address
}

#[tokio::test]
async fn a_source_that_is_an_index_is_searched_through_the_registrys_catalog() {
    let dark = registry_without_a_catalog().await;
    let dark_source = format!("{dark}/plugins/*");
    let setup = Setup::with_sources("", &["REGISTRY/index/*", &dark_source], &[&dark]).await;
    let host = setup.registry.host();
    // Two repositories under the index, and two outside it (one whose name only begins alike).
    for (plugin, repo_tag) in [
        ("filesystem", "index/tools/fs:1"),
        ("echo_tools", "index/echo:1"),
        ("filesystem", "outside/fs:1"),
        ("filesystem", "index-not/fs:1"),
    ] {
        ok(
            &[
                "push",
                component(plugin).to_str().unwrap(),
                &format!("{host}/{repo_tag}"),
                "--insecure-registry",
                &host,
            ],
            &[],
        )
        .await;
    }
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let search = |query: &'static str| {
        let (setup, alice) = (&setup, alice.clone());
        async move {
            let (_, found) = setup
                .rpc(
                    &alice,
                    "tools/call",
                    json!({"name": "mcpbox_search_plugins", "arguments": {"query": query, "limit": 50}}),
                )
                .await;
            assert_eq!(found["result"]["isError"], Value::Null, "{found}");
            found["result"].clone()
        }
    };
    let references = |result: &Value| -> Vec<String> {
        result["structuredContent"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["reference"].as_str().map(str::to_owned))
            .collect()
    };

    // By a tool's name, in a repository under the index; never one outside it.
    let found = search("list_allowed_directories").await;
    let found_references = references(&found);
    assert!(
        found_references.contains(&format!("{host}/index/tools/fs:1")),
        "{found}"
    );
    assert!(
        !found_references
            .iter()
            .any(|r| r.contains("/outside/") || r.contains("/index-not/")),
        "{found}"
    );
    let found = search("echo").await;
    assert!(
        references(&found).contains(&format!("{host}/index/echo:1")),
        "{found}"
    );

    // The registry that serves no catalog is named, and the others were still searched.
    let text = found["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "(Could not list the source {dark_source}: the registry {dark} failed while listing the repositories under {dark}/plugins/ (GET /v2/_catalog): it does not serve its catalog (404 Not Found); name the repositories themselves as sources.)"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn a_managed_folder_replaced_by_a_link_after_install_is_refused_at_load() {
    let setup = Setup::with("pre-approve = \"signed\"").await;
    let root = setup.root();
    let alice = setup.token("alice", "mcp mcpbox:manage").await;
    let events = setup
        .run(
            &alice,
            "2026-07-28",
            json!(["none"]),
            json!([["mcpbox_install_plugin", {"reference": setup.reference("files:1")}]]),
        )
        .await;
    assert_eq!(
        result_of(&events, "mcpbox_install_plugin")["structured"]["installed"],
        true,
        "{events:#?}"
    );
    let manifest = std::fs::read_to_string(setup.managed().join("files.toml")).unwrap();
    let docs = root.join("docs");
    assert!(
        manifest.contains(&format!("host = \"{}\"", docs.display())),
        "{manifest}"
    );

    // After the user approved `docs`, it becomes a link to the folder the ceiling keeps out.
    std::fs::write(root.join("secret/key.txt"), "hunter2").unwrap();
    std::fs::remove_dir_all(&docs).unwrap();
    std::os::unix::fs::symlink(root.join("secret"), &docs).unwrap();

    // A host loading the managed directory now refuses the plugin, naming the folder.
    let (_url, _replica, stderr) = setup.replica_logged().await;
    let log = stderr
        .wait_for("the user approved now leads elsewhere")
        .await;
    assert!(
        log.contains(&format!(
            "skipped plugin: the folder {} the user approved now leads elsewhere through a symbolic link ({}): remove the plugin and install it again",
            docs.display(),
            root.join("secret").display()
        )),
        "{log}"
    );
}
