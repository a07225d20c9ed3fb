//! Skills (SEP-2640): the code-review example's skill, packed by the Rust SDK's `skills!`,
//! served by the real binary (entries, digests, files, directories, errors); `mcpbox skills`
//! putting skills into a component of any language, a hot reload telling clients what changed,
//! and broken or hostile skill sections refused while the plugin keeps serving. The official
//! suite's three skills scenarios run in `services::conformance`.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::support::{Raw, plugin_dir};

/// The code-review example's skill, as written in the repository.
fn review_file(path: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../plugins/code-review/skills/code-review")
            .join(path),
    )
    .unwrap()
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Send a request and read until its response, returning it and the notifications before it.
async fn ask(raw: &mut Raw, id: u64, method: &str, params: Value) -> (Value, Vec<Value>) {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    raw.send(line.to_string().as_bytes()).await;
    let mut notes = Vec::new();
    loop {
        let message = raw.recv().await;
        if message.get("id") == Some(&json!(id)) {
            return (message, notes);
        }
        notes.push(message);
    }
}

/// Read until a notification `method` arrives (for `uri`, when given).
async fn notified(raw: &mut Raw, method: &str, uri: Option<&str>) {
    loop {
        let message = raw.recv().await;
        if message["method"] == method && uri.is_none_or(|uri| message["params"]["uri"] == uri) {
            return;
        }
    }
}

fn result(reply: &Value) -> &Value {
    reply
        .get("result")
        .unwrap_or_else(|| panic!("an error: {reply}"))
}

fn error_code(reply: &Value) -> i64 {
    reply["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {reply}"))
}

const SKILL: &str = "skill://code_review/code-review/SKILL.md";

#[tokio::test]
async fn the_code_review_skill_is_served_with_its_digests_files_and_directories() {
    let dir = plugin_dir(&[("code_review", "code_review.wasm")]);
    let mut raw = Raw::start(dir.path(), &[]);
    let (init, _) = ask(
        &mut raw,
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    )
    .await;
    assert_eq!(
        result(&init)["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true})
    );
    assert!(result(&init)["capabilities"]["resources"].is_object());
    raw.send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    let manifest = review_file("SKILL.md");
    let checklist = review_file("references/checklist.md");
    let (list, _) = ask(&mut raw, 2, "skills/list", json!({})).await;
    let skills = result(&list)["skills"].as_array().unwrap().clone();
    assert_eq!(skills.len(), 1, "{list}");
    let entry = &skills[0];
    assert_eq!(entry["uri"], SKILL);
    assert_eq!(entry["frontmatter"]["name"], "code-review");
    assert_eq!(entry["frontmatter"]["license"], "Apache-2.0");
    assert_eq!(entry["frontmatter"]["metadata"], json!({"version": "1.0"}));
    assert_eq!(
        entry["resources"],
        json!([
            {"uri": SKILL, "digest": digest(&manifest), "size": manifest.len()},
            {"uri": "skill://code_review/code-review/references/checklist.md",
             "digest": digest(&checklist), "size": checklist.len()},
        ])
    );

    // skills/get gives the same entry; an unknown URI (or a file that is no skill) is -32602.
    let (get, _) = ask(&mut raw, 3, "skills/get", json!({"uri": SKILL})).await;
    assert_eq!(result(&get)["skill"], *entry);
    assert!(result(&get).get("nextCursor").is_none());
    for (id, uri) in [
        (4, "skill://code_review/nothing/SKILL.md"),
        (5, "skill://code_review/code-review/references/checklist.md"),
    ] {
        let (reply, _) = ask(&mut raw, id, "skills/get", json!({"uri": uri})).await;
        assert_eq!(error_code(&reply), -32602, "{reply}");
    }
    let (reply, _) = ask(&mut raw, 6, "skills/get", json!({})).await;
    assert_eq!(error_code(&reply), -32602, "{reply}");

    // Each file is a resource: listed (SKILL.md with its front matter's name and description)
    // and read back byte for byte.
    let (resources, _) = ask(&mut raw, 7, "resources/list", json!({})).await;
    let listed = result(&resources)["resources"].as_array().unwrap();
    let skill_md = listed.iter().find(|r| r["uri"] == SKILL).unwrap();
    assert_eq!(skill_md["name"], "code-review");
    assert_eq!(skill_md["mimeType"], "text/markdown");
    assert!(
        skill_md["description"]
            .as_str()
            .unwrap()
            .starts_with("Review a code change")
    );
    let (read, _) = ask(&mut raw, 8, "resources/read", json!({"uri": SKILL})).await;
    assert_eq!(
        result(&read)["contents"][0]["text"]
            .as_str()
            .unwrap()
            .as_bytes(),
        manifest
    );

    // Directories: the plugin's root, the skill's and its subdirectory; a file or an unknown
    // URI is -32602.
    let (root, _) = ask(
        &mut raw,
        9,
        "resources/directory/read",
        json!({"uri": "skill://code_review/code-review"}),
    )
    .await;
    let children = result(&root)["resources"].as_array().unwrap();
    assert_eq!(children.len(), 2, "{root}");
    assert_eq!(children[0]["uri"], SKILL);
    assert_eq!(
        children[1],
        json!({"uri": "skill://code_review/code-review/references", "name": "references", "mimeType": "inode/directory"})
    );
    let (top, _) = ask(
        &mut raw,
        10,
        "resources/directory/read",
        json!({"uri": "skill://code_review"}),
    )
    .await;
    assert_eq!(
        result(&top)["resources"][0]["uri"],
        "skill://code_review/code-review"
    );
    for (id, uri) in [
        (11, SKILL),
        (12, "skill://code_review/elsewhere"),
        (13, "skill://code_review/code-review/"),
    ] {
        let (reply, _) = ask(
            &mut raw,
            id,
            "resources/directory/read",
            json!({"uri": uri}),
        )
        .await;
        assert_eq!(error_code(&reply), -32602, "{uri}: {reply}");
    }
    raw.assert_alive(14).await;
}

/// `mcpbox skills` on a component.
fn pack(plugin: &Path, skills: Option<&Path>) -> (String, bool) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mcpbox"));
    command.arg("skills").arg(plugin);
    if let Some(skills) = skills {
        command.arg(skills);
    }
    let output = command.output().unwrap();
    (
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        output.status.success(),
    )
}

fn write(dir: &Path, path: &str, bytes: &[u8]) {
    let file = dir.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, bytes).unwrap();
}

#[tokio::test]
async fn mcpbox_skills_packs_any_component_and_a_reload_tells_clients_what_changed() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let plugin = dir.path().join("echo_tools.wasm");
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let (list, _) = ask(&mut raw, 1, "skills/list", json!({})).await;
    assert_eq!(result(&list)["skills"], json!([]));

    let skills = tempfile::tempdir().unwrap();
    let greeting = "---\nname: greeting\ndescription: Greet people warmly\n---\nSay hello.\n";
    write(skills.path(), "greeting/SKILL.md", greeting.as_bytes());
    write(skills.path(), "greeting/notes.txt", b"first");
    let logo = [0x89_u8, b'P', b'N', b'G', 0xff, 0x00];
    write(skills.path(), "greeting/assets/logo.png", &logo);
    write(skills.path(), "greeting/.hidden", b"left out");
    let (report, ok) = pack(&plugin, Some(skills.path()));
    assert!(ok, "{report}");
    assert!(
        report.contains("1 skill(s) from 3 file(s)")
            && report.contains("serves skill://echo_tools/greeting/SKILL.md"),
        "{report}"
    );

    notified(&mut raw, "notifications/resources/list_changed", None).await;
    let (list, _) = ask(&mut raw, 2, "skills/list", json!({})).await;
    let entry = &result(&list)["skills"][0];
    assert_eq!(entry["uri"], "skill://echo_tools/greeting/SKILL.md");
    assert_eq!(entry["resources"].as_array().unwrap().len(), 3, "{entry}");
    let (read, _) = ask(
        &mut raw,
        3,
        "resources/read",
        json!({"uri": "skill://echo_tools/greeting/assets/logo.png"}),
    )
    .await;
    let contents = &result(&read)["contents"][0];
    assert_eq!(contents["mimeType"], "image/png");
    use base64::Engine as _;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(contents["blob"].as_str().unwrap())
            .unwrap(),
        logo
    );
    // The plugin's tools are untouched.
    let (tools, _) = ask(&mut raw, 4, "tools/list", json!({})).await;
    assert!(!result(&tools)["tools"].as_array().unwrap().is_empty());

    // A changed file: subscribers hear of it, and its new digest is listed.
    let notes = "skill://echo_tools/greeting/notes.txt";
    let (subscribed, _) = ask(&mut raw, 5, "resources/subscribe", json!({"uri": notes})).await;
    result(&subscribed);
    write(skills.path(), "greeting/notes.txt", b"second");
    let (report, ok) = pack(&plugin, Some(skills.path()));
    assert!(ok, "{report}");
    notified(&mut raw, "notifications/resources/updated", Some(notes)).await;
    let (get, _) = ask(
        &mut raw,
        6,
        "skills/get",
        json!({"uri": "skill://echo_tools/greeting/SKILL.md"}),
    )
    .await;
    let listed = result(&get)["skill"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["uri"] == notes)
        .cloned()
        .unwrap();
    assert_eq!(listed["digest"], digest(b"second"));

    // A broken skill is refused with its reason; the good one is still served.
    write(
        skills.path(),
        "misnamed/SKILL.md",
        b"---\nname: other\ndescription: d\n---\n",
    );
    let (report, ok) = pack(&plugin, Some(skills.path()));
    assert!(!ok, "a refused skill fails the command: {report}");
    assert!(
        report.contains("refused `misnamed`") && report.contains("must be equal"),
        "{report}"
    );
    raw.stderr.wait_for("refused skill `misnamed`").await;
    let (list, _) = ask(&mut raw, 7, "skills/list", json!({})).await;
    assert_eq!(result(&list)["skills"].as_array().unwrap().len(), 1);

    // Taken out again: nothing is served, and a 2026-07-28 client no longer sees the
    // extension.
    let (report, ok) = pack(&plugin, None);
    assert!(ok && report.contains("0 skill(s)"), "{report}");
    let deadline = tokio::time::Instant::now() + crate::support::STEP;
    loop {
        let (list, _) = ask(&mut raw, 8, "skills/list", json!({})).await;
        if result(&list)["skills"] == json!([]) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the skills were still served: {list}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    raw.assert_alive(9).await;
}

#[tokio::test]
async fn a_hostile_skills_section_is_refused_and_the_plugin_keeps_serving() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let plugin = dir.path().join("echo_tools.wasm");
    // A section by hand, as a hostile build could write it: a path climbing out of the tree.
    let payload = br#"{"version":1,"files":[{"path":"x/../../etc/passwd","text":"root"}]}"#;
    let wasm = crate::support::with_custom_section(
        std::fs::read(&plugin).unwrap(),
        "mcpbox-skills",
        payload,
    );
    std::fs::write(&plugin, &wasm).unwrap();

    let mut raw = Raw::initialized(dir.path(), &[]).await;
    raw.stderr.wait_for("`..` segment").await;
    let (list, _) = ask(&mut raw, 1, "skills/list", json!({})).await;
    assert_eq!(result(&list)["skills"], json!([]));
    let (tools, _) = ask(&mut raw, 2, "tools/list", json!({})).await;
    assert!(!result(&tools)["tools"].as_array().unwrap().is_empty());

    // `mcpbox skills` with no directory takes the bad section out.
    let (report, ok) = pack(&plugin, None);
    assert!(ok, "{report}");
    assert!(
        !std::fs::read(&plugin)
            .unwrap()
            .windows(b"mcpbox-skills".len())
            .any(|w| w == b"mcpbox-skills"),
        "the section is gone"
    );
    // Not a component at all: a clear error, the file untouched.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello").unwrap();
    let (report, ok) = pack(&text, Some(dir.path()));
    assert!(!ok && report.contains("not a WebAssembly file"), "{report}");
    assert_eq!(std::fs::read_to_string(&text).unwrap(), "hello");
    // A link looping back up the tree is not followed: refused by name, the component as it was.
    let looped = tempfile::tempdir().unwrap();
    write(
        looped.path(),
        "loop/SKILL.md",
        b"---\nname: loop\ndescription: d\n---\n",
    );
    std::os::unix::fs::symlink(looped.path(), looped.path().join("loop/again")).unwrap();
    let before = std::fs::read(&plugin).unwrap();
    let (report, ok) = pack(&plugin, Some(looped.path()));
    assert!(!ok && report.contains("links are not followed"), "{report}");
    assert_eq!(std::fs::read(&plugin).unwrap(), before);
    raw.assert_alive(3).await;
}

#[tokio::test]
async fn an_operator_turns_a_plugins_skills_off_and_on_again_live() {
    let dir = plugin_dir(&[("code_review", "code_review.wasm")]);
    let manifest = dir.path().join("code_review.toml");
    std::fs::write(&manifest, "skills = false\n").unwrap();
    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let (list, _) = ask(&mut raw, 1, "skills/list", json!({})).await;
    assert_eq!(result(&list)["skills"], json!([]));
    let (resources, _) = ask(&mut raw, 2, "resources/list", json!({})).await;
    assert_eq!(result(&resources)["resources"], json!([]));
    let (reply, _) = ask(&mut raw, 3, "resources/read", json!({"uri": SKILL})).await;
    assert!(reply.get("error").is_some(), "{reply}");
    // A 2026-07-28 request sees no extension declared.
    let meta = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }});
    let (discover, _) = ask(&mut raw, 4, "server/discover", meta.clone()).await;
    assert!(
        result(&discover)["capabilities"]
            .get("extensions")
            .is_none(),
        "{discover}"
    );
    // Its prompt is still served.
    let (prompts, _) = ask(&mut raw, 5, "prompts/list", json!({})).await;
    assert_eq!(result(&prompts)["prompts"][0]["name"], "code_review");

    std::fs::write(&manifest, "skills = true\n").unwrap();
    notified(&mut raw, "notifications/resources/list_changed", None).await;
    let (list, _) = ask(&mut raw, 6, "skills/list", json!({})).await;
    assert_eq!(result(&list)["skills"][0]["uri"], SKILL);
    let (discover, _) = ask(&mut raw, 7, "server/discover", meta).await;
    assert_eq!(
        result(&discover)["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true})
    );
    // A manifest with a mistyped value is refused with the key named, and the plugin keeps
    // its last good policy.
    std::fs::write(&manifest, "skills = \"no\"\n").unwrap();
    raw.stderr.wait_for("skills").await;
    raw.assert_alive(8).await;
}

/// Issue #55: a plugin whose name sorts first listed `skill://victim/demo/SKILL.md` as an
/// ordinary resource; the victim's skill was then refused ("the name is served by plugin
/// `aaa_shadow`") and reading the URI returned the attacker's text. `skill://` is the host's:
/// no plugin may list a resource or a template in it, and no read of it reaches a plugin.
#[tokio::test]
async fn issue_55_a_plugin_cannot_shadow_another_plugins_skill() {
    let dir = plugin_dir(&[
        ("hostile", "aaa_shadow.wasm"),
        ("echo_tools", "victim.wasm"),
    ]);
    let skills = tempfile::tempdir().unwrap();
    let victims = "---\nname: demo\ndescription: The victim's own skill\n---\nThe victim's text.\n";
    write(skills.path(), "demo/SKILL.md", victims.as_bytes());
    let (report, ok) = pack(&dir.path().join("victim.wasm"), Some(skills.path()));
    assert!(ok, "{report}");

    let mut raw = Raw::initialized(dir.path(), &[]).await;
    let uri = "skill://victim/demo/SKILL.md";
    let (list, _) = ask(&mut raw, 1, "skills/list", json!({})).await;
    assert_eq!(result(&list)["skills"][0]["uri"], uri, "{list}");
    let (read, _) = ask(&mut raw, 2, "resources/read", json!({"uri": uri})).await;
    assert_eq!(result(&read)["contents"][0]["text"], victims, "{read}");
    // A URI of the namespace no skill serves is not found: no template answers it.
    let (read, _) = ask(
        &mut raw,
        3,
        "resources/read",
        json!({"uri": "skill://victim/demo/other.md"}),
    )
    .await;
    assert_eq!(error_code(&read), -32002, "{read}");
    let (templates, _) = ask(&mut raw, 4, "resources/templates/list", json!({})).await;
    let templates = result(&templates)["resourceTemplates"].as_array().unwrap();
    assert_eq!(
        templates
            .iter()
            .map(|t| t["uriTemplate"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["hostile://fail/{mib}"]
    );
    // The attacker's other items are served.
    let (resources, _) = ask(&mut raw, 5, "resources/list", json!({})).await;
    let listed: Vec<&str> = result(&resources)["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["hostile://big", uri], "{resources}");
    // Each refused at load, naming the plugin and the URI.
    let log = raw
        .stderr
        .wait_for("refused resource template `skill://{+path}`")
        .await;
    let line = log
        .lines()
        .find(|l| l.contains("refused resource `skill://victim/demo/SKILL.md`"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains("`skill://` is the host's own namespace (the skills plugins carry); no plugin may serve a URI in it")
            && line.contains("aaa_shadow"),
        "{line}"
    );
    assert!(!log.contains("is served by plugin"), "{log}");
    raw.assert_alive(6).await;
}
