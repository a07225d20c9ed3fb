//! Every method, through the official Rust MCP client (rmcp) over stdio.

use base64::Engine as _;
use rmcp::model::{
    ArgumentInfo, CallToolRequestParams, CompleteRequestParams, GetPromptRequestParams,
    PaginatedRequestParams, ReadResourceRequestParams, Reference,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::support::{STEP, all_examples, call, connect, error_code, json, mcpbox, plugin_dir};

const PIXEL_PNG: &[u8] = include_bytes!("../../plugins/echo-tools/assets/pixel.png");

fn args(value: &Value) -> serde_json::Map<String, Value> {
    value.as_object().cloned().expect("an object")
}

#[tokio::test]
async fn initialize_reports_the_server_and_what_its_plugins_offer() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    let info = json(&*client.peer_info().expect("server info"));
    assert_eq!(info["serverInfo"]["name"], "mcpbox");
    assert_eq!(info["protocolVersion"], "2025-11-25");
    let capabilities = &info["capabilities"];
    for capability in ["tools", "prompts", "resources", "completions"] {
        assert!(
            capabilities.get(capability).is_some(),
            "missing {capability} in {capabilities}"
        );
    }
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn capabilities_reflect_only_the_loaded_plugins() {
    // Without watching, the set of plugins is fixed: advertise exactly what it offers.
    let dir = plugin_dir(&[("code_review", "code_review.wasm")]);
    let client = connect(dir.path(), &["--no-watch"]).await;
    let capabilities = json(&*client.peer_info().expect("server info"))["capabilities"].clone();
    assert!(capabilities.get("prompts").is_some(), "{capabilities}");
    assert!(capabilities.get("tools").is_none(), "{capabilities}");
    assert!(capabilities.get("completions").is_some(), "{capabilities}");
    // Its skill: the extension, and its files as resources.
    assert_eq!(
        capabilities["extensions"],
        json!({"io.modelcontextprotocol/skills": {"directoryRead": true}})
    );
    assert!(capabilities.get("resources").is_some(), "{capabilities}");

    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let client = connect(dir.path(), &["--no-watch"]).await;
    let capabilities = json(&*client.peer_info().expect("server info"))["capabilities"].clone();
    assert_eq!(capabilities, json!({"tools": {}, "logging": {}}));

    // Watching (the default), plugins of any kind may arrive: every kind is advertised, with
    // change notifications and resource subscriptions.
    let client = connect(dir.path(), &[]).await;
    let capabilities = json(&*client.peer_info().expect("server info"))["capabilities"].clone();
    assert_eq!(
        capabilities,
        json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {"listChanged": true, "subscribe": true},
            "completions": {},
            "logging": {},
        })
    );
}

#[tokio::test]
async fn newer_clients_probing_with_server_discover_fall_back_to_initialize() {
    let dir = plugin_dir(&[("echo_tools", "echo_tools.wasm")]);
    let transport = TokioChildProcess::new(mcpbox(dir.path(), &[])).expect("start mcpbox");
    let lifecycle = ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::LATEST],
        legacy_version: None,
    };
    let client = tokio::time::timeout(STEP, ().serve_with_lifecycle(transport, lifecycle))
        .await
        .expect("in time")
        .expect("auto lifecycle falls back to initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 4);
}

#[tokio::test]
async fn tools_are_listed_with_their_derived_schemas() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    let tools = json(&client.list_all_tools().await.expect("tools/list"));
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["echo", "sum", "divide", "show_content"]);
    let add = &tools[1];
    assert_eq!(add["title"], "Sum");
    assert_eq!(add["inputSchema"]["type"], "object");
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]));
    assert_eq!(
        add["inputSchema"]["properties"]["a"]["description"],
        "The first addend."
    );
    assert_eq!(add["outputSchema"]["properties"]["sum"]["type"], "number");
    assert_eq!(add["annotations"]["readOnlyHint"], true);
}

#[tokio::test]
async fn tools_return_text_structured_content_and_errors() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;

    let echo = json(
        &client
            .call_tool(call("echo", json!({"text": "héllo ✓"})))
            .await
            .expect("echo"),
    );
    assert_eq!(
        echo["content"],
        json!([{"type": "text", "text": "héllo ✓"}])
    );
    assert_ne!(echo["isError"], true);

    let add = json(
        &client
            .call_tool(call("sum", json!({"a": 2, "b": 3.5})))
            .await
            .expect("sum"),
    );
    assert_eq!(add["structuredContent"], json!({"sum": 5.5}));
    assert_eq!(add["content"][0]["text"], r#"{"sum":5.5}"#);

    let divide = json(
        &client
            .call_tool(call("divide", json!({"dividend": 1, "divisor": 0})))
            .await
            .expect("divide"),
    );
    assert_eq!(divide["isError"], true);
    assert_eq!(divide["content"][0]["text"], "cannot divide 1 by zero");

    let quotient = json(
        &client
            .call_tool(call("divide", json!({"dividend": 9, "divisor": 4})))
            .await
            .expect("divide"),
    );
    assert_eq!(quotient["content"][0]["text"], "2.25");
}

#[tokio::test]
async fn arguments_that_do_not_fit_are_an_is_error_result_not_a_protocol_error() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    // Checked against the tool's input schema before the plugin runs (SEP-1303).
    let result = json(
        &client
            .call_tool(call("sum", json!({"a": "two", "b": 1})))
            .await
            .expect("sum"),
    );
    assert_eq!(result["isError"], true);
    assert_eq!(
        result["content"][0]["text"],
        r#"invalid arguments for tool `sum`: "two" is not of type "number" (at /a)"#
    );

    // No `arguments` at all is treated as `{}`.
    let result = json(
        &client
            .call_tool(CallToolRequestParams::new("echo"))
            .await
            .expect("echo"),
    );
    assert_eq!(result["isError"], true);
    assert_eq!(
        result["content"][0]["text"],
        r#"invalid arguments for tool `echo`: "text" is a required property"#
    );
}

#[tokio::test]
async fn every_content_kind_reaches_the_client() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    let show = async |kind: &str| {
        let result = client
            .call_tool(call("show_content", json!({ "kind": kind })))
            .await
            .expect("show_content");
        json(&result)["content"][0].clone()
    };
    let png = base64::engine::general_purpose::STANDARD.encode(PIXEL_PNG);

    let image = show("image").await;
    assert_eq!(
        image,
        json!({"type": "image", "data": png, "mimeType": "image/png"})
    );
    let audio = show("audio").await;
    assert_eq!(audio["type"], "audio");
    assert_eq!(audio["mimeType"], "audio/wav");
    assert!(!audio["data"].as_str().unwrap().is_empty());
    let link = show("resource_link").await;
    assert_eq!(
        link,
        json!({"type": "resource_link", "uri": "quote://1", "name": "quote-1", "mimeType": "text/plain"})
    );
    let text = show("embedded_text").await;
    assert_eq!(
        text,
        json!({"type": "resource", "resource": {"uri": "memo://greeting", "mimeType": "text/plain", "text": "Hello from a resource."}})
    );
    let blob = show("embedded_blob").await;
    assert_eq!(
        blob,
        json!({"type": "resource", "resource": {"uri": "memo://pixel", "mimeType": "image/png", "blob": png}})
    );
}

#[tokio::test]
async fn unknown_tools_are_invalid_params() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    let error = client
        .call_tool(call("no_such_tool", json!({})))
        .await
        .expect_err("unknown tool");
    let (code, message) = error_code(&error);
    assert_eq!(code, -32602);
    assert!(message.contains("no_such_tool"), "{message}");
}

#[tokio::test]
async fn prompts_are_listed_and_rendered() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    let prompts = json(&client.list_all_prompts().await.expect("prompts/list"));
    assert_eq!(prompts[0]["name"], "code_review");
    assert_eq!(prompts[0]["title"], "Code review");
    let arguments = prompts[0]["arguments"].as_array().unwrap();
    let language = arguments
        .iter()
        .find(|a| a["name"] == "language")
        .expect("language argument");
    assert_eq!(language["required"], true);
    assert_eq!(
        language["description"],
        "The programming language of the code."
    );
    let focus = arguments
        .iter()
        .find(|a| a["name"] == "focus")
        .expect("focus argument");
    assert_eq!(focus["required"], false);

    let params = GetPromptRequestParams::new("code_review")
        .with_arguments(args(&json!({"language": "Rust", "focus": "naming"})));
    let rendered = json(&client.get_prompt(params).await.expect("prompts/get"));
    assert_eq!(
        rendered["description"],
        "Ask the model for a careful code review"
    );
    assert_eq!(rendered["messages"][0]["role"], "user");
    let text = rendered["messages"][0]["content"]["text"].as_str().unwrap();
    assert!(
        text.contains("Rust code") && text.contains("attention to naming"),
        "{text}"
    );
    assert_eq!(rendered["messages"][1]["role"], "assistant");
}

#[tokio::test]
async fn prompt_errors_are_invalid_params() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    let missing =
        GetPromptRequestParams::new("code_review").with_arguments(args(&json!({"focus": "x"})));
    let (code, message) = error_code(
        &client
            .get_prompt(missing)
            .await
            .expect_err("missing argument"),
    );
    assert_eq!(code, -32602);
    assert!(
        message.contains("`language`") && message.contains("code_review"),
        "{message}"
    );

    let (code, message) = error_code(
        &client
            .get_prompt(GetPromptRequestParams::new("nope"))
            .await
            .expect_err("unknown"),
    );
    assert_eq!(code, -32602);
    assert!(message.contains("nope"), "{message}");

    // The plugin's own validation: an empty language.
    let empty =
        GetPromptRequestParams::new("code_review").with_arguments(args(&json!({"language": " "})));
    let (code, message) = error_code(&client.get_prompt(empty).await.expect_err("empty language"));
    assert_eq!(code, -32602);
    assert!(message.contains("must not be empty"), "{message}");
}

#[tokio::test]
async fn resources_and_templates_are_listed_and_read() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    let listed = json(&client.list_all_resources().await.expect("resources/list"));
    // The code-review example's skill files come first (plugins in file-name order).
    let resources: Vec<&Value> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["uri"].as_str().unwrap().starts_with("skill://"))
        .collect();
    assert_eq!(listed.as_array().unwrap().len(), resources.len() + 2);
    assert_eq!(resources[0]["uri"], "quote://all");
    assert_eq!(resources[0]["title"], "All quotes");
    assert_eq!(resources[1]["uri"], "quote://cover.png");
    assert_eq!(resources[1]["size"], PIXEL_PNG.len());
    let templates = json(
        &client
            .list_all_resource_templates()
            .await
            .expect("templates/list"),
    );
    assert_eq!(
        templates,
        json!([{"uriTemplate": "quote://{id}", "name": "quote", "title": "One quote", "description": "The quote with this number, from 1", "mimeType": "text/plain"}])
    );

    let all = json(
        &client
            .read_resource(ReadResourceRequestParams::new("quote://all"))
            .await
            .expect("read all"),
    );
    let text = all["contents"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("1. “Simplicity"), "{text}");
    assert_eq!(all["contents"][0]["mimeType"], "text/plain");

    let cover = json(
        &client
            .read_resource(ReadResourceRequestParams::new("quote://cover.png"))
            .await
            .expect("read cover"),
    );
    let blob = cover["contents"][0]["blob"].as_str().expect("a blob");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(blob)
            .unwrap(),
        PIXEL_PNG
    );

    let one = json(
        &client
            .read_resource(ReadResourceRequestParams::new("quote://3"))
            .await
            .expect("read template"),
    );
    assert_eq!(one["contents"][0]["uri"], "quote://3");
    assert!(
        one["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Knuth")
    );
}

#[tokio::test]
async fn unknown_resources_are_resource_not_found() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    for uri in ["quote://99", "nothing://here", "quote://1/2"] {
        let error = client
            .read_resource(ReadResourceRequestParams::new(uri))
            .await
            .expect_err("not found");
        let (code, message) = error_code(&error);
        assert_eq!(code, -32002, "{uri}: {message}");
        assert!(message.contains(uri), "{message}");
    }
}

#[tokio::test]
async fn completions_come_from_the_owning_plugin() {
    let dir = all_examples();
    let client = connect(dir.path(), &[]).await;
    let params = CompleteRequestParams::new(
        Reference::for_prompt("code_review"),
        ArgumentInfo::new("language", "ru"),
    );
    let result = json(
        &client
            .complete(params)
            .await
            .expect("complete prompt argument"),
    );
    assert_eq!(result["completion"]["values"], json!(["ruby", "rust"]));
    assert_eq!(result["completion"]["hasMore"], false);

    let params = CompleteRequestParams::new(
        Reference::for_resource("quote://{id}"),
        ArgumentInfo::new("id", ""),
    );
    let result = json(
        &client
            .complete(params)
            .await
            .expect("complete template variable"),
    );
    assert_eq!(
        result["completion"]["values"],
        json!(["1", "2", "3", "4", "5"])
    );
    assert_eq!(result["completion"]["total"], 5);
}

#[tokio::test]
async fn every_list_is_paginated_with_opaque_cursors() {
    let dir = all_examples();
    let client = connect(dir.path(), &["--page-size", "1"]).await;
    let mut names = Vec::new();
    let mut cursor = None;
    loop {
        let page = client
            .list_tools(Some(
                PaginatedRequestParams::default().with_cursor(cursor.clone()),
            ))
            .await
            .expect("tools/list page");
        let page = json(&page);
        assert_eq!(page["tools"].as_array().unwrap().len(), 1, "{page}");
        names.push(page["tools"][0]["name"].as_str().unwrap().to_owned());
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(names, ["echo", "sum", "divide", "show_content"]);
    // The quotes example's two, and the code-review example's skill's two files.
    assert_eq!(
        client.list_all_resources().await.expect("resources").len(),
        4
    );
    assert_eq!(client.list_all_prompts().await.expect("prompts").len(), 1);
    assert_eq!(
        client
            .list_all_resource_templates()
            .await
            .expect("templates")
            .len(),
        1
    );

    let bad = PaginatedRequestParams::default().with_cursor(Some("not-a-cursor".into()));
    let (code, message) = error_code(&client.list_tools(Some(bad)).await.expect_err("bad cursor"));
    assert_eq!(code, -32602);
    assert!(message.contains("cursor"), "{message}");
}
