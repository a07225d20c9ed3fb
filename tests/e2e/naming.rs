//! Names and narrowing: the quick-start examples load with no refused
//! name; a plugin's tool and prompt names take a prefix, and allow- and deny-lists hide its
//! tools, prompts and resources, from its manifest or its `[plugin.NAME]` section, live, shown
//! by `inspect`; `check` reports sections naming no plugin and listed names no plugin offers.

use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::{Value, json};

use crate::support::{
    RecordingClient, call, connect_logged, error_code, example_plugins, plugin_dir, tool_text,
};

/// `mcpbox ARGS…`: (success, stdout, stderr).
fn run(args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_mcpbox"))
        .args(args)
        .env_remove("MCPBOX_LOG")
        .envs(crate::support::test_cache())
        .output()
        .expect("run mcpbox");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Wait until `count` plugins were loaded (at startup, or late: a loaded machine may take
/// longer than startup's wait for listings).
async fn loaded(stderr: &crate::support::Stderr, count: usize) {
    stderr.wait_for_count(" plugin plugin=", count).await;
}

async fn tool_names(
    client: &rmcp::service::RunningService<rmcp::RoleClient, RecordingClient>,
) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_quick_start_examples_load_with_no_refused_name() {
    // What `plugins/run.sh` serves: every example, with the manifests beside them.
    let (client, stderr) = connect_logged(
        example_plugins(),
        &["--no-watch"],
        RecordingClient::new(&json!({})),
    )
    .await;
    let log = stderr.wait_for("names refused").await;
    assert!(log.contains(" 0 names refused"), "{log}");
    // Late plugins (still listing when startup went on) too.
    let plugins = std::fs::read_dir(example_plugins())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wasm")
        })
        .count();
    let deadline = tokio::time::Instant::now() + crate::support::STEP;
    loop {
        let log = stderr.text();
        let done = log.matches(" plugin plugin=").count() + log.matches("skipped plugin").count();
        if done >= plugins {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{log}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let log = stderr.text();
    assert!(
        !log.contains("refused tool") && !log.contains("refused prompt"),
        "{log}"
    );
    let names = tool_names(&client).await;
    for name in [
        "add",
        "list",
        "echo",
        "sum",
        "sequentialthinking",
        "get_current_time",
        "search_nodes",
        "read_text_file",
        "fetch",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_prefix_renames_tools_and_prompts_and_calls_reach_the_plugin() {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("code_review", "code_review.wasm"),
        ("echo_tools", "plain.wasm"),
        ("echo_tools", "same.wasm"),
    ]);
    // From the manifest. The same plugin again under its own names serves beside it; a third
    // copy with the same prefix has its final names refused (they are served already).
    std::fs::write(dir.path().join("echo_tools.toml"), "prefix = \"calc_\"\n").unwrap();
    std::fs::write(dir.path().join("same.toml"), "prefix = \"calc_\"\n").unwrap();
    // From the configuration file's section.
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("mcpbox.toml");
    std::fs::write(&config, "[plugin.code_review]\nprefix = \"cr_\"\n").unwrap();
    let config_arg = config.display().to_string();
    let (client, stderr) = connect_logged(
        dir.path(),
        &["--config", &config_arg],
        RecordingClient::new(&json!({})),
    )
    .await;
    loaded(&stderr, 4).await;
    assert_eq!(
        tool_names(&client).await,
        [
            "calc_divide",
            "calc_echo",
            "calc_show_content",
            "calc_sum",
            "divide",
            "echo",
            "show_content",
            "sum"
        ]
    );
    let log = stderr.text();
    assert!(
        log.contains(
            "refused tool `calc_sum` of plugin `same`: the name is served by plugin `echo_tools`"
        ),
        "{log}"
    );
    assert!(!log.contains("of plugin `plain`"), "{log}");
    let result = client
        .call_tool(call("calc_sum", json!({"a": 2, "b": 3})))
        .await
        .unwrap();
    assert_eq!(result.structured_content, Some(json!({"sum": 5.0})));
    let unknown = client
        .call_tool(call("calc_nothing", json!({})))
        .await
        .unwrap_err();
    assert_eq!(
        error_code(&unknown),
        (-32602, "unknown tool `calc_nothing`".to_owned())
    );

    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| &*p.name).collect();
    assert_eq!(names, ["cr_code_review"]);
    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("cr_code_review")
                .with_arguments(json!({"language": "Rust"}).as_object().cloned().unwrap()),
        )
        .await
        .unwrap();
    assert!(!prompt.messages.is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_prefix_that_would_pass_for_the_hosts_own_tools_is_refused() {
    // `mcpbox_` is the host's namespace (its linked-account and management tools): a plugin's
    // prefix cannot put a tool there, whether its name looks like one of the host's or not.
    let dir = plugin_dir(&[
        ("echo_tools", "lookalike.wasm"),
        ("code_review", "review.wasm"),
    ]);
    std::fs::write(dir.path().join("lookalike.toml"), "prefix = \"mcpbox_\"\n").unwrap();
    std::fs::write(dir.path().join("review.toml"), "prefix = \"MCPBOX_\"\n").unwrap();
    let (client, stderr) = connect_logged(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    loaded(&stderr, 2).await;
    assert_eq!(tool_names(&client).await, Vec::<String>::new());
    let log = stderr.text();
    for (tool, plugin) in [
        ("mcpbox_echo", "lookalike"),
        ("mcpbox_sum", "lookalike"),
        ("mcpbox_divide", "lookalike"),
    ] {
        assert!(
            log.contains(&format!(
                "refused tool `{tool}` of plugin `{plugin}`: names beginning `mcpbox_` are mcpbox's own, reserved for its tools"
            )),
            "{log}"
        );
    }
    // Its prompts are not in the host's namespace: served under the prefix.
    let prompts = client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| &*p.name).collect();
    assert_eq!(names, ["MCPBOX_code_review"]);
    let unknown = client
        .call_tool(call("mcpbox_echo", json!({"text": "hi"})))
        .await
        .unwrap_err();
    assert_eq!(
        error_code(&unknown),
        (-32602, "unknown tool `mcpbox_echo`".to_owned())
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn allow_and_deny_lists_hide_tools_prompts_and_resources() {
    let dir = plugin_dir(&[
        ("echo_tools", "echo_tools.wasm"),
        ("code_review", "code_review.wasm"),
        ("quotes", "quotes.wasm"),
    ]);
    std::fs::write(
        dir.path().join("echo_tools.toml"),
        "[tools]\ndeny = [\"divide\", \"show_content\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("code_review.toml"),
        "[prompts]\ndeny = [\"code_review\"]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("quotes.toml"),
        "[resources]\nallow = [\"quote://cover.png\"]\n",
    )
    .unwrap();

    let (client, stderr) = connect_logged(dir.path(), &[], RecordingClient::new(&json!({}))).await;
    loaded(&stderr, 3).await;
    assert_eq!(tool_names(&client).await, ["echo", "sum"]);
    for hidden_tool in ["divide", "show_content"] {
        let error = client
            .call_tool(call(hidden_tool, json!({})))
            .await
            .unwrap_err();
        assert_eq!(
            error_code(&error),
            (-32602, format!("unknown tool `{hidden_tool}`"))
        );
    }
    let (text, failed) = tool_text(
        &client
            .call_tool(call("echo", json!({"text": "shown"})))
            .await
            .unwrap(),
    );
    assert!(!failed && text == "shown");
    assert!(client.list_all_prompts().await.unwrap().is_empty());
    let error = client
        .get_prompt(GetPromptRequestParams::new("code_review"))
        .await
        .unwrap_err();
    assert_eq!(error_code(&error).0, -32602);
    let resources = client.list_all_resources().await.unwrap();
    // (The code-review example's skill files are not resources its lists filter.)
    let uris: Vec<&str> = resources
        .iter()
        .map(|r| r.uri.as_str())
        .filter(|uri| !uri.starts_with("skill://code_review/"))
        .collect();
    assert_eq!(uris, ["quote://cover.png"]);
    assert!(
        client
            .list_all_resource_templates()
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        client
            .read_resource(ReadResourceRequestParams::new("quote://all"))
            .await
            .is_err(),
        "a hidden resource is not served"
    );
    assert!(
        client
            .read_resource(ReadResourceRequestParams::new("quote://cover.png"))
            .await
            .is_ok()
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn naming_changes_apply_live_with_list_changed() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("mcpbox.toml");
    let write_config = |text: &str| {
        let next = root.path().join(".next.toml");
        std::fs::write(&next, text).unwrap();
        std::fs::rename(&next, &config).unwrap();
    };
    write_config("reload-debounce-ms = 50\n");
    let config_arg = config.display().to_string();
    let events = RecordingClient::new(&json!({}));
    let (client, stderr) =
        connect_logged(dir.path(), &["--config", &config_arg], events.clone()).await;
    loaded(&stderr, 1).await;
    assert_eq!(
        tool_names(&client).await,
        ["divide", "echo", "show_content", "sum"]
    );

    // The manifest gains a prefix and a deny-list.
    let changes = events.events("tools/list_changed").len();
    let manifest = dir.path().join("echo_tools.toml");
    std::fs::write(&manifest, "prefix = \"m_\"\n[tools]\ndeny = [\"divide\"]\n").unwrap();
    events.wait_for("tools/list_changed", changes + 1).await;
    assert_eq!(
        tool_names(&client).await,
        ["m_echo", "m_show_content", "m_sum"]
    );
    assert!(events.events("prompts/list_changed").is_empty());

    // The configuration file's section takes over (the manifest is then ignored).
    write_config(
        "reload-debounce-ms = 50\n\n[plugin.echo_tools]\nprefix = \"c_\"\n[plugin.echo_tools.tools]\nallow = [\"echo\"]\n",
    );
    events.wait_for("tools/list_changed", changes + 2).await;
    assert_eq!(tool_names(&client).await, ["c_echo"]);
    let (text, _) = tool_text(
        &client
            .call_tool(call("c_echo", json!({"text": "live"})))
            .await
            .unwrap(),
    );
    assert_eq!(text, "live");
    assert!(stderr.text().contains("reloaded plugin"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn inspect_shows_the_naming_and_check_reports_what_names_nothing() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    std::fs::write(
        dir.path().join("echo_tools.toml"),
        "prefix = \"calc_\"\n[tools]\ndeny = [\"divide\", \"nope\"]\n",
    )
    .unwrap();
    let plugin_dir_arg = dir.path().display().to_string();
    let (ok, out, err) = run(&["inspect", &plugin_dir_arg]);
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let plugin = &report["plugins"][0];
    assert_eq!(plugin["naming"]["prefix"], "calc_");
    assert_eq!(plugin["naming"]["tools"]["deny"], json!(["divide", "nope"]));
    let tools: Vec<&str> = plugin["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["calc_echo", "calc_sum", "calc_show_content"]);
    assert_eq!(
        plugin["unknownNames"],
        json!(["tools.deny names `nope`, which the plugin does not offer"])
    );

    // With a configuration file, its section governs the plugin, as when serving.
    let sections = tempfile::tempdir().unwrap();
    let sections_file = sections.path().join("mcpbox.toml");
    std::fs::write(
        &sections_file,
        "[plugin.echo_tools]\nprefix = \"cfg_\"\n[plugin.echo_tools.tools]\nallow = [\"echo\"]\n",
    )
    .unwrap();
    let sections_arg = sections_file.display().to_string();
    let (ok, out, err) = run(&["inspect", &plugin_dir_arg, "--config", &sections_arg]);
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["plugins"][0]["naming"]["prefix"], "cfg_");
    assert_eq!(report["plugins"][0]["tools"][0]["name"], "cfg_echo");
    assert_eq!(report["plugins"][0]["tools"].as_array().unwrap().len(), 1);

    // `check`: a section naming no plugin, and a listed name no plugin offers.
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("mcpbox.toml");
    std::fs::write(
        &config,
        format!("plugins = {plugin_dir_arg:?}\n\n[plugin.ghost]\ntitle = \"Ghost\"\n"),
    )
    .unwrap();
    let config_arg = config.display().to_string();
    let (ok, out, err) = run(&["check", "--config", &config_arg]);
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("warning: [plugin.ghost] names no plugin in") && out.contains("ghost.wasm"),
        "{out}"
    );
    assert!(
        out.contains(
            "warning: plugin `echo_tools`: tools.deny names `nope`, which the plugin does not offer"
        ),
        "{out}"
    );
}
