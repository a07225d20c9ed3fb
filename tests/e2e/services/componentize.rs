//! Plugins in Python and JavaScript, end to end: the example plugins (`plugins/python-notes`,
//! `plugins/js-notes`) built with their own scripts by componentize-py (PyPI) and
//! componentize-js (npm), both installed into `target/tools/` by the tests, then served by the
//! real binary to rmcp's client: every tool, prompt and resource, durable state (each caller's
//! own), who is calling, configuration, argument validation, and a limit firing. And
//! `mcpbox new` in both languages: the project it writes builds outside this repository and
//! passes its own test (Rust's is in `languages`). And a WASI 0.3 plugin in Python
//! (`tests/plugins/python-p3`), whose async tool streams its content.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};

use crate::external;
use crate::languages::{path_with, root, run_in, scaffold};
use crate::support::{Client, STEP, call, connect_within, json as to_json, tool_text};

/// componentize-py, pinned.
const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// componentize-js, pinned.
const COMPONENTIZE_JS: &str = "@bytecodealliance/componentize-js@0.23.0";

/// Run an example's `build.sh` into `out` with `path_dirs` first on `PATH`.
fn build(script: &str, out: &Path, path_dirs: &[PathBuf]) {
    let output = Command::new("bash")
        .arg(root().join(script))
        .arg(out)
        .env("PATH", path_with(path_dirs))
        .env("MCPBOX", env!("CARGO_BIN_EXE_mcpbox"))
        .output()
        .unwrap_or_else(|e| panic!("run {script}: {e}"));
    assert!(
        output.status.success(),
        "{script} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The directory holding `componentize-py` (installed on first use).
fn python_tools() -> PathBuf {
    external::python(&[COMPONENTIZE_PY])
        .parent()
        .unwrap()
        .to_owned()
}

/// The directories holding `componentize-js` and Node 22 (installed on first use).
fn js_tools() -> [PathBuf; 2] {
    let npm = external::npm(&[COMPONENTIZE_JS]);
    let node = PathBuf::from(external::node_path().split(':').next().unwrap());
    [npm.join("node_modules/.bin"), node]
}

/// Both examples, built once per test run, in `target/polyglot-plugins/`.
/// How long starting mcpbox on a Python or JavaScript component may take: its first compile
/// (the component carries its interpreter) runs before the handshake is answered, and on a
/// cold cache several tests compile at once (three took past a minute at load 5).
const FIRST_COMPILE: Duration = Duration::from_secs(240);

fn built() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = root().join("target/polyglot-plugins");
        build("plugins/python-notes/build.sh", &out, &[python_tools()]);
        build("plugins/js-notes/build.sh", &out, &js_tools());
        out
    })
}

/// A plugin directory with the built `plugin` (`python_notes` or `js_notes`) and `manifest`.
fn dir_with(plugin: &str, manifest: &str) -> tempfile::TempDir {
    let built = tokio::task::block_in_place(built);
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        built.join(format!("{plugin}.wasm")),
        dir.path().join(format!("{plugin}.wasm")),
    )
    .unwrap();
    std::fs::write(dir.path().join(format!("{plugin}.toml")), manifest).unwrap();
    dir
}

async fn tool(client: &Client, name: &'static str, arguments: Value) -> (String, bool, Value) {
    let result = tokio::time::timeout(STEP, client.call_tool(call(name, arguments)))
        .await
        .expect("answered in time")
        .unwrap_or_else(|e| panic!("{name} failed: {e}\n{}", client.stderr.text()));
    let (text, error) = tool_text(&result);
    (text, error, to_json(&result)["structuredContent"].clone())
}

async fn prompt(client: &Client, name: &str, arguments: Value) -> String {
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let result = client
        .get_prompt(GetPromptRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .unwrap();
    to_json(&result)["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn read(client: &Client, uri: &str) -> String {
    let result = client
        .read_resource(ReadResourceRequestParams::new(uri.to_owned()))
        .await
        .unwrap();
    to_json(&result)["contents"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The example's skill (put in by its build script with `mcpbox skills`), read by rmcp's
/// client as the resource it is, byte for byte as written.
async fn skill(client: &Client, plugin: &str) {
    let uri = format!("skill://{plugin}/taking-notes/SKILL.md");
    let listed = client.list_all_resources().await.unwrap();
    let entry = listed
        .iter()
        .find(|r| r.uri == uri)
        .unwrap_or_else(|| panic!("{uri} is not listed"));
    assert_eq!(entry.name, "taking-notes");
    let dir = if plugin == "python_notes" {
        "python-notes"
    } else {
        "js-notes"
    };
    let written =
        std::fs::read_to_string(root().join(format!("plugins/{dir}/skills/taking-notes/SKILL.md")))
            .unwrap();
    assert_eq!(read(client, &uri).await, written);
}

/// Notes in a caller bucket (as the examples' own manifests grant them), and a configured
/// greeting (`wasi:config`).
const STATE: &str = "[keyvalue]\ncaller-buckets = [\"notes\"]\ncaller-quota-kib = 256\n\
                     caller-max-keys = 1000\n\n[config]\ngreeting = \"Hi from the operator\"\n";

/// The SDK's `caller()` over stdio: the local user, with an opaque id that stays the same; and
/// its `config`: the manifest's greeting.
async fn caller_and_config(client: &Client) {
    let (text, error, structured) = tool(client, "whoami", json!({})).await;
    assert!(!error, "{text}");
    let who: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(structured, who);
    assert_eq!(who["kind"], "local", "{who}");
    // The local user holds every scope, so none is listed; and has no name to show.
    assert_eq!(who["scopes"], json!([]), "{who}");
    assert_eq!(who["name"], Value::Null, "{who}");
    let id = who["id"].as_str().unwrap_or_default();
    assert_eq!(id.len(), 32, "an opaque id: {who}");
    let (again, error, _) = tool(client, "whoami", json!({})).await;
    assert!(!error, "{again}");
    assert_eq!(serde_json::from_str::<Value>(&again).unwrap()["id"], id);
    assert_eq!(
        tool(client, "greeting", json!({})).await.0,
        "Hi from the operator"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_plugin_serves_tools_prompts_resources_and_state() {
    let dir = dir_with("python_notes", STATE);
    let client = connect_within(dir.path(), &[], FIRST_COMPILE).await;

    let tools = client.list_all_tools().await.unwrap();
    let word_count = tools.iter().find(|t| t.name == "word_count").unwrap();
    let schema = to_json(&word_count.input_schema);
    assert_eq!(
        schema["properties"]["unit"]["enum"],
        json!(["words", "characters"])
    );
    assert_eq!(schema["required"], json!(["text"]));
    assert_eq!(
        word_count.description.as_deref(),
        Some("Count the words (or characters) in a text.")
    );

    let (text, error, structured) =
        tool(&client, "word_count", json!({"text": "one two three"})).await;
    assert!(!error, "{text}");
    assert_eq!(structured, json!({"count": 3, "unit": "words"}));
    // The host validates arguments against the schema from the type hints.
    let (text, error, _) = tool(&client, "word_count", json!({"text": "x", "unit": "lines"})).await;
    assert!(
        error && text.contains("\"words\"") && text.contains("\"characters\""),
        "{text}"
    );
    // An exception is an isError result the model reads.
    let (text, error, _) = tool(&client, "fibonacci", json!({"n": -1})).await;
    assert!(error && text == "n must not be negative", "{text}");
    assert_eq!(tool(&client, "fibonacci", json!({"n": 10})).await.0, "55");

    assert_eq!(
        prompt(&client, "haiku", json!({"topic": "rivers"})).await,
        "Write a haiku about rivers."
    );
    assert_eq!(
        read(&client, "notes://about").await,
        "A Python plugin for mcpbox, built with componentize-py."
    );
    skill(&client, "python_notes").await;
    caller_and_config(&client).await;

    assert_eq!(
        tool(&client, "add_note", json!({"text": "first"})).await.0,
        "note 1 kept"
    );
    assert_eq!(
        tool(&client, "add_note", json!({"text": "second"})).await.0,
        "note 2 kept"
    );
    let notes: Value = serde_json::from_str(&read(&client, "notes://all").await).unwrap();
    assert_eq!(
        notes,
        json!({"note:000001": "first", "note:000002": "second"})
    );
    client.service.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_plugin_meets_its_limits() {
    // Without the state grant or any configuration, and with a small fuel budget.
    let dir = dir_with("python_notes", "[limits]\nfuel = 200_000_000\n");
    let client = connect_within(dir.path(), &[], FIRST_COMPILE).await;
    let (text, error, _) = tool(&client, "fibonacci", json!({"n": 35})).await;
    assert!(
        error && text == "plugin `python_notes` ran out of fuel after 200000000 units",
        "{text}"
    );
    let (text, error, _) = tool(&client, "add_note", json!({"text": "x"})).await;
    assert!(
        error && text.contains("bucket `notes` is not granted"),
        "{text}"
    );
    // No `greeting` is configured: `config` answers none, and the tool falls back.
    assert_eq!(tool(&client, "greeting", json!({})).await.0, "Hello.");
    // The host keeps serving, and the next call starts afresh.
    assert_eq!(tool(&client, "fibonacci", json!({"n": 5})).await.0, "5");
    client.service.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_javascript_plugin_serves_tools_prompts_resources_and_state() {
    let dir = dir_with(
        "js_notes",
        // Fuel enough that the deadline, not the fuel, stops the spinning call below: on an
        // idle core the default budget ran out first.
        &format!("{STATE}\n[limits]\ntimeout-ms = 1500\nfuel = 500_000_000_000\n"),
    );
    let client = connect_within(dir.path(), &[], FIRST_COMPILE).await;

    let tools = client.list_all_tools().await.unwrap();
    let shout = tools.iter().find(|t| t.name == "shout").unwrap();
    assert_eq!(to_json(&shout.input_schema)["required"], json!(["text"]));
    assert_eq!(
        tool(&client, "shout", json!({"text": "hey", "times": 2}))
            .await
            .0,
        "HEY HEY"
    );
    let (text, error, _) = tool(&client, "shout", json!({"text": 5})).await;
    assert!(error && text.contains("not of type \"string\""), "{text}");

    assert_eq!(
        prompt(&client, "limerick", json!({"topic": "sandboxes"})).await,
        "Write a limerick about sandboxes."
    );
    assert_eq!(
        read(&client, "notes://about").await,
        "A JavaScript plugin for mcpbox, built with jco."
    );
    skill(&client, "js_notes").await;
    caller_and_config(&client).await;
    assert_eq!(
        tool(&client, "add_note", json!({"text": "first"})).await.0,
        "note 1 kept"
    );
    let notes: Value = serde_json::from_str(&read(&client, "notes://all").await).unwrap();
    assert_eq!(notes, json!({"note:000001": "first"}));

    // A limit fires: the call is stopped at its deadline, and the host keeps serving.
    let (text, error, _) = tool(&client, "spin", json!({"ms": 60_000})).await;
    assert!(
        error && text == "plugin `js_notes` timed out after 1.5 s",
        "{text}"
    );
    assert_eq!(
        tool(&client, "shout", json!({"text": "still here"}))
            .await
            .0,
        "STILL HERE"
    );
    client.service.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn mcpbox_new_writes_python_and_js_projects_that_build_and_pass_their_tests() {
    tokio::task::block_in_place(|| {
        let parent = scaffold("hello-py", "python");
        let project = parent.path().join("hello-py");
        let said = run_in(&project, &["bash", "test.sh"], &[python_tools()]);
        assert!(
            said.contains("Hello, Ada!") && said.lines().any(|l| l == "ok"),
            "{said}"
        );
        assert!(project.join("hello_py.wasm").exists());
        // Its build script put its skill into the component.
        let said = run_in(&project, &["mcpbox", "inspect", "hello_py.wasm"], &[]);
        assert!(
            said.contains("skill://hello_py/hello-py/SKILL.md"),
            "{said}"
        );

        let parent = scaffold("hello-js", "js");
        let project = parent.path().join("hello-js");
        let said = run_in(&project, &["npm", "test"], &js_tools());
        assert!(
            said.contains("Hello, Ada!") && said.lines().any(|l| l == "ok"),
            "{said}"
        );
        assert!(project.join("hello_js.wasm").exists());
        let said = run_in(&project, &["mcpbox", "inspect", "hello_js.wasm"], &[]);
        assert!(
            said.contains("skill://hello_js/hello-js/SKILL.md"),
            "{said}"
        );
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_0_3_plugin_streams_its_tool_result() {
    let componentize = python_tools().join("componentize-py");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("count_py.wasm");
    let output = tokio::task::block_in_place(|| {
        Command::new(&componentize)
            .arg("-d")
            .arg(root().join("wit/0.3"))
            .args(["-w", "mcpbox:plugin/plugin@0.3.0", "componentize", "-p"])
            .arg(root().join("tests/plugins/python-p3"))
            .arg("app")
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap()
    });
    assert!(
        output.status.success(),
        "componentize-py failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let client = connect_within(dir.path(), &[], FIRST_COMPILE).await;
    let result = to_json(
        &client
            .call_tool(call("count_py", json!({"n": 3})))
            .await
            .unwrap(),
    );
    let texts: Vec<&str> = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["1", "2", "3", "counted to 3"]);
}

/// `mcpbox new --lang python --wasi 0.3`: a project on the helper module's 0.3 form, whose
/// tool is an `async def` that streams each greeting. It builds with componentize-py and passes
/// its own test; served, each greeting reaches the client (as progress) before the result,
/// which holds them all; its prompt and resource answer as in 0.2.
#[tokio::test(flavor = "multi_thread")]
async fn mcpbox_new_writes_a_python_0_3_project_that_builds_and_streams() {
    let (_parent, wasm) = tokio::task::block_in_place(|| {
        let parent = tempfile::tempdir().unwrap();
        let output = Command::new(env!("CARGO_BIN_EXE_mcpbox"))
            .args(["new", "hello-py3", "--lang", "python", "--wasi", "0.3"])
            .current_dir(parent.path())
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success() && said.contains("next:"), "{said}");
        let project = parent.path().join("hello-py3");
        let said = run_in(&project, &["bash", "test.sh"], &[python_tools()]);
        assert!(
            said.contains("Hello, Ada!")
                && said.contains("Hello, Grace!")
                && said.contains("greeted 2")
                && said.lines().any(|l| l == "ok"),
            "{said}"
        );
        let said = run_in(&project, &["mcpbox", "inspect", "hello_py3.wasm"], &[]);
        assert!(
            said.contains("skill://hello_py3/hello-py3/SKILL.md"),
            "{said}"
        );
        let wasm = project.join("hello_py3.wasm");
        (parent, wasm)
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(&wasm, dir.path().join("hello_py3.wasm")).unwrap();
    let mut raw = crate::support::Raw::initialized(dir.path(), &[]).await;
    raw.send(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hello","arguments":{"names":["Ada","Grace"]},"_meta":{"progressToken":"p"}}}"#).await;
    let mut streamed = Vec::new();
    let result = loop {
        let message = raw.recv().await;
        if message["method"] == "notifications/progress" {
            streamed.push(message["params"]["message"].as_str().unwrap().to_owned());
            continue;
        }
        break message;
    };
    assert_eq!(streamed, ["Hello, Ada!", "Hello, Grace!"], "{result}");
    let texts: Vec<&str> = result["result"]["content"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Hello, Ada!", "Hello, Grace!", "greeted 2"]);
    assert_eq!(result["result"]["isError"], false, "{result}");
    // An empty name: the exception is an isError result, after what was streamed.
    let refused = raw
        .request(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hello","arguments":{"names":["Ada"," "]}}}"#)
        .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(
        refused["result"]["content"][1]["text"], "a name must not be empty",
        "{refused}"
    );
    let prompt = raw
        .request(r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"introduce","arguments":{"topic":"rivers"}}}"#)
        .await;
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"], "Give a short introduction to rivers.",
        "{prompt}"
    );
    let about = raw
        .request(r#"{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"hello://about"}}"#)
        .await;
    assert_eq!(
        about["result"]["contents"][0]["text"], "A Python plugin for mcpbox, a WASI 0.3 component.",
        "{about}"
    );
}
