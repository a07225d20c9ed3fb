//! The fixtures the official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! checks: tools for every content kind, logging, progress, errors, sampling and elicitation;
//! static, binary and templated resources; prompts with arguments, embedded resources and
//! images; and argument completion. For 2026-07-28: the diagnostic tools of the stateless
//! scenarios, list-change triggers, the input-request (MRTR) fixtures, and the tools of the
//! tasks scenarios (which run as tasks is the manifest's `[tasks]` to say).
//!
//! The triggers change this plugin's lists for real: granted a directory at `/state` (the
//! conformance test's manifest does that), a trigger bumps a counter there that the listed
//! `test_dynamic_tool` / `test_dynamic_prompt` descriptions show, and asks the host to read
//! the lists again. Without the grant the lists never change.

use std::time::Duration;

use mcpbox_sdk::serde_json::{Value, json};
use mcpbox_sdk::{
    Completions, Content, Deserialize, JsonSchema, ListKind, NoArgs, Plugin, Prompt, PromptMessage,
    Prompts, ResourceContents, ResourceInfo, ResourceTemplate, Resources, Tool, ToolResult, Tools,
    host,
};

const PNG: &[u8] = include_bytes!("../assets/pixel.png");
const WAV: &[u8] = include_bytes!("../assets/beep.wav");

/// The schema `json_schema_2020_12_tool` publishes, keyword for keyword.
const SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

/// Arguments of `test_sampling`.
#[derive(Deserialize, JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the client's model.
    prompt: String,
}

/// Arguments of `test_elicitation`.
#[derive(Deserialize, JsonSchema)]
struct ElicitationArgs {
    /// The message to show the user.
    message: String,
}

/// The generation counter `kind` keeps under `/state`, if the directory is granted.
fn generation(kind: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/state/{kind}-generation")).ok()?;
    text.trim().parse().ok()
}

/// Bump `kind`'s generation and tell the host the list changed.
fn trigger(kind: &str, list: ListKind) -> Result<String, String> {
    let next = generation(kind).unwrap_or(0) + 1;
    std::fs::write(format!("/state/{kind}-generation"), next.to_string())
        .map_err(|e| format!("cannot change the {kind} list without the /state grant: {e}"))?;
    host::notify_list_changed(list);
    Ok(format!("{kind} list changed (generation {next})"))
}

/// Ask the client to elicit `field`, keyed `key`; the answer's `content.field`.
fn ask(key: &str, message: &str, field: &str) -> Result<String, String> {
    let answer = host::elicit(&json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { field: { "type": "string" } },
            "required": [field],
        },
        "_meta": { host::INPUT_KEY_META: key },
    }))?;
    match answer["action"].as_str() {
        Some("accept") => Ok(answer["content"][field]
            .as_str()
            .map_or_else(|| answer["content"][field].to_string(), str::to_owned)),
        other => Err(format!(
            "the user did not answer ({})",
            other.unwrap_or("?")
        )),
    }
}

fn sample_keyed(key: &str, prompt: &str) -> Result<String, String> {
    let answer = host::sample(&json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": 100,
        "_meta": { host::INPUT_KEY_META: key },
    }))?;
    Ok(answer["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

fn with_logging(_: NoArgs) -> String {
    host::info("Tool execution started");
    sleep_ms(50);
    host::info("Tool processing data");
    sleep_ms(50);
    host::info("Tool execution completed");
    "Tool with logging executed successfully".to_owned()
}

fn with_progress(_: NoArgs) -> String {
    for (step, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        host::progress(
            progress,
            Some(100.0),
            Some(&format!("Completed step {step} of 2")),
        );
        if progress < 100.0 {
            sleep_ms(50);
        }
    }
    "Progress reporting completed".to_owned()
}

fn sampling(SamplingArgs { prompt }: SamplingArgs) -> Result<String, String> {
    let answer = host::sample(&json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": 100,
    }))?;
    let text = answer["content"]["text"].as_str().unwrap_or_default();
    Ok(format!("LLM response: {text}"))
}

fn elicit(request: &Value, prefix: &str) -> Result<String, String> {
    let answer = host::elicit(request)?;
    let action = answer["action"].as_str().unwrap_or("unknown");
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    Ok(format!("{prefix}: action={action}, content={content}"))
}

fn elicitation(ElicitationArgs { message }: ElicitationArgs) -> Result<String, String> {
    let request = json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { "response": { "type": "string", "description": "User's response" } },
            "required": ["response"],
        },
    });
    elicit(&request, "User response")
}

fn elicitation_defaults(_: NoArgs) -> Result<String, String> {
    let request = json!({
        "message": "Please review and update the form fields with defaults",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "User name", "default": "John Doe" },
                "age": { "type": "integer", "description": "User age", "default": 30 },
                "score": { "type": "number", "description": "User score", "default": 95.5 },
                "status": { "type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active" },
                "verified": { "type": "boolean", "description": "Verification status", "default": true },
            },
            "required": [],
        },
    });
    elicit(&request, "Elicitation completed")
}

fn elicitation_enums(_: NoArgs) -> Result<String, String> {
    let request = json!({
        "message": "Please select options from the enum fields",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "untitledSingle": { "type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"] },
                "titledSingle": { "type": "string", "description": "Select one option with titles", "oneOf": [
                    { "const": "value1", "title": "First Option" },
                    { "const": "value2", "title": "Second Option" },
                    { "const": "value3", "title": "Third Option" },
                ] },
                "legacyEnum": { "type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"] },
                "untitledMulti": { "type": "array", "description": "Select multiple options", "minItems": 1, "maxItems": 3, "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                "titledMulti": { "type": "array", "description": "Select multiple options with titles", "minItems": 1, "maxItems": 3, "items": { "anyOf": [
                    { "const": "value1", "title": "First Choice" },
                    { "const": "value2", "title": "Second Choice" },
                    { "const": "value3", "title": "Third Choice" },
                ] } },
            },
            "required": [],
        },
    });
    elicit(&request, "Elicitation completed")
}

/// Arguments of `test_prompt_with_arguments`.
#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    /// First test argument
    arg1: String,
    /// Second test argument
    arg2: String,
}

/// Arguments of `test_prompt_with_embedded_resource`.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct EmbeddedArgs {
    /// URI of the resource to embed
    resource_uri: String,
}

/// The variables of `test://template/{id}/data`.
#[derive(Deserialize)]
struct TemplateId {
    id: String,
}

/// A tool whose arguments clients mirror into headers: a string, an integer and a boolean
/// (`x-mcp-header`), and one that is not mirrored.
const CUSTOM_HEADERS: &str = r#"{"type":"object","properties":{"region":{"type":"string","description":"Mirrored as Mcp-Param-Region","x-mcp-header":"Region"},"priority":{"type":"integer","description":"Mirrored as Mcp-Param-Priority","x-mcp-header":"Priority"},"verbose":{"type":"boolean","description":"Mirrored as Mcp-Param-Verbose","x-mcp-header":"Verbose"},"query":{"type":"string","description":"Not mirrored"}},"required":["region","priority","query"]}"#;

/// Arguments of `greet`.
#[derive(Deserialize, JsonSchema)]
struct GreetArgs {
    /// Who to greet.
    name: String,
}

/// Arguments of `slow_compute`.
#[derive(Deserialize, JsonSchema)]
struct SlowArgs {
    /// How long the computation takes, in seconds.
    seconds: f64,
    /// A label echoed in the result.
    #[serde(default)]
    label: Option<String>,
}

/// Arguments of `confirm_delete`.
#[derive(Deserialize, JsonSchema)]
struct DeleteArgs {
    /// The file to (pretend to) delete.
    filename: String,
}

/// Ask the user to confirm (a boolean `confirm`), keyed `key`.
fn confirm(key: &str, message: &str) -> Result<(), String> {
    let answer = host::elicit(&json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { "confirm": { "type": "boolean" }, "name": { "type": "string" } },
            "required": ["confirm"],
        },
        "_meta": { host::INPUT_KEY_META: key },
    }))?;
    match (answer["action"].as_str(), &answer["content"]["confirm"]) {
        (Some("accept"), Value::Bool(true)) => Ok(()),
        _ => Err(format!("not confirmed ({key})")),
    }
}

/// The tools of the tasks scenarios (SEP-2663). Which of them run as tasks is the manifest's
/// to say (`[tasks]` in the conformance test's manifest); each works a second before it
/// finishes, fails or asks, so that it outlasts the host's grace and becomes a task.
fn task_tools(tools: &mut Tools) {
    tools
        .add(
            Tool::new("greet", "Greets someone at once (never a task)"),
            |GreetArgs { name }: GreetArgs| format!("Hello, {name}!"),
        )
        .add(
            Tool::new("slow_compute", "Computes for `seconds` seconds"),
            |SlowArgs { seconds, label }: SlowArgs| {
                #[allow(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "clamped to 0..=3,600,000 first"
                )]
                let ms = (seconds.clamp(0.0, 3600.0) * 1000.0) as u64;
                // In slices, so a cancelled call stops within one; progress each second (a
                // task's status message).
                let mut done = 0;
                while done < ms && !host::cancelled() {
                    let step = (ms - done).min(100);
                    sleep_ms(step);
                    done += step;
                    if done % 1000 == 0 {
                        host::progress(
                            done as f64,
                            Some(ms as f64),
                            Some(&format!("computed {} of {} s", done / 1000, ms / 1000)),
                        );
                    }
                }
                format!(
                    "computed {} in {seconds} s",
                    label.as_deref().unwrap_or("a result")
                )
            },
        )
        .add(
            Tool::new("failing_job", "Works a second, then reports a tool error"),
            |_: NoArgs| -> Result<String, String> {
                sleep_ms(1000);
                Err("the job failed: the input could not be processed".to_owned())
            },
        )
        .add(
            Tool::new(
                "protocol_error_job",
                "Works a second, then crashes (produces no result)",
            ),
            |_: NoArgs| -> String {
                sleep_ms(1000);
                panic!("protocol_error_job crashed on purpose")
            },
        )
        .add(
            Tool::new(
                "confirm_delete",
                "Works a second, then asks the user to confirm deleting a file",
            ),
            |DeleteArgs { filename }: DeleteArgs| -> Result<String, String> {
                sleep_ms(1000);
                confirm("confirm", &format!("Delete {filename}?"))?;
                Ok(format!("Deleted {filename}"))
            },
        )
        .add(
            Tool::new(
                "multi_input",
                "Works a second, then asks two questions at once",
            ),
            |_: NoArgs| -> Result<String, String> {
                sleep_ms(1000);
                // Both are asked before either answer is used, so they go in one round.
                let first = confirm("first", "First confirmation?");
                let second = confirm("second", "Second confirmation?");
                first?;
                second?;
                Ok("both confirmed".to_owned())
            },
        )
        .add(
            Tool::new(
                "test_tool_with_task",
                "Asks the user's name at once, then works as a task",
            ),
            |_: NoArgs| -> Result<String, String> {
                let name = ask("user_name", "What is your name?", "name")?;
                sleep_ms(1000);
                Ok(format!("Hello, {name}! The task is done."))
            },
        );
}

/// The diagnostic and input-request tools of the 2026-07-28 scenarios.
fn mrtr_tools(tools: &mut Tools) {
    let plain = |name: &str, description: &str| Tool::new(name, description);
    tools
        .add(
            plain(
                "test_missing_capability",
                "Needs the client's sampling capability (rejected with -32021 without it)",
            ),
            |_: NoArgs| -> Result<String, String> {
                sample_keyed("probe", "Say anything")?;
                Ok("Success".to_owned())
            },
        )
        .add(
            plain(
                "test_streaming_elicitation",
                "Asks the user for input: never a request on the response stream",
            ),
            |_: NoArgs| ask("stream_answer", "Anything to add?", "answer"),
        )
        .add(
            plain(
                "test_logging_tool",
                "Logs a message (sent only to requests that opted into logs)",
            ),
            |_: NoArgs| {
                host::info("test_logging_tool ran");
                "Logged".to_owned()
            },
        )
        .add(
            plain("test_trigger_tool_change", "Changes the tool list"),
            |_: NoArgs| trigger("tools", ListKind::Tools),
        )
        .add(
            plain("test_trigger_prompt_change", "Changes the prompt list"),
            |_: NoArgs| trigger("prompts", ListKind::Prompts),
        )
        .add(
            plain(
                "test_dynamic_tool",
                &format!(
                    "A tool whose description follows the tool list's generation ({})",
                    generation("tools").unwrap_or(0)
                ),
            ),
            |_: NoArgs| "dynamic",
        )
        .add(
            plain(
                "test_input_required_result_elicitation",
                "Asks the user's name (input request user_name)",
            ),
            |_: NoArgs| -> Result<String, String> {
                let name = ask("user_name", "What is your name?", "name")?;
                Ok(format!("Hello, {name}!"))
            },
        )
        .add(
            plain(
                "test_input_required_result_sampling",
                "Asks the client's model a question (input request capital_question)",
            ),
            |_: NoArgs| sample_keyed("capital_question", "What is the capital of France?"),
        )
        .add(
            plain(
                "test_input_required_result_list_roots",
                "Asks the client for its roots",
            ),
            |_: NoArgs| -> Result<String, String> {
                let roots = host::list_roots()?;
                Ok(format!("Roots: {}", roots["roots"]))
            },
        )
        .add(
            plain(
                "test_input_required_result_request_state",
                "Asks for a confirmation; the answer comes back with the request state",
            ),
            |_: NoArgs| -> Result<String, String> {
                ask("confirm", "Confirm?", "ok")?;
                Ok("state-ok".to_owned())
            },
        )
        .add(
            plain(
                "test_input_required_result_multiple_inputs",
                "Asks for a name, a completion and the roots in one round",
            ),
            |_: NoArgs| -> Result<String, String> {
                // All three are asked before any answer is used, so they go in one round.
                let name = ask("user_name", "What is your name?", "name");
                let greeting = sample_keyed("greeting", "Write a greeting");
                let roots = host::list_roots();
                Ok(format!(
                    "name={}, greeting={}, roots={}",
                    name?, greeting?, roots?["roots"]
                ))
            },
        )
        .add(
            plain(
                "test_input_required_result_multi_round",
                "Asks for a name, then (in a second round) a colour",
            ),
            |_: NoArgs| -> Result<String, String> {
                let name = ask("name", "What is your name?", "name")?;
                let color = ask("color", &format!("{name}, your favourite colour?"), "color")?;
                Ok(format!("{name} likes {color}"))
            },
        )
        .add(
            plain(
                "test_input_required_result_tampered_state",
                "Asks for a confirmation; tampered request state is rejected",
            ),
            |_: NoArgs| -> Result<String, String> {
                ask("confirm", "Confirm?", "ok")?;
                Ok("confirmed".to_owned())
            },
        )
        .add(
            plain(
                "test_input_required_result_capabilities",
                "Asks the user if the client can elicit, else the client's model",
            ),
            |_: NoArgs| -> Result<String, String> {
                match ask("user_choice", "Pick one", "choice") {
                    Ok(choice) => Ok(format!("user chose {choice}")),
                    Err(_) => {
                        sample_keyed("model_choice", "Pick one").map(|c| format!("model chose {c}"))
                    }
                }
            },
        );
}

struct Conformance;

impl Plugin for Conformance {
    fn tools(tools: &mut Tools) {
        let plain = |name: &str, description: &str| Tool::new(name, description);
        tools
            .add(
                plain("test_simple_text", "Tests simple text content response"),
                |_: NoArgs| "This is a simple text response for testing.",
            )
            .add(
                plain("test_image_content", "Tests image content response"),
                |_: NoArgs| Content::image(PNG, "image/png"),
            )
            .add(
                plain("test_audio_content", "Tests audio content response"),
                |_: NoArgs| Content::audio(WAV, "audio/wav"),
            )
            .add(
                plain(
                    "test_embedded_resource",
                    "Tests embedded resource content response",
                ),
                |_: NoArgs| {
                    Content::embedded_text(
                        "test://embedded-resource",
                        Some("text/plain"),
                        "This is an embedded resource content.",
                    )
                },
            )
            .add(
                plain(
                    "test_multiple_content_types",
                    "Tests response with multiple content types (text, image, resource)",
                ),
                |_: NoArgs| {
                    vec![
                        Content::text("Multiple content types test:"),
                        Content::image(PNG, "image/png"),
                        Content::embedded_text(
                            "test://mixed-content-resource",
                            Some("application/json"),
                            r#"{"test":"data","value":123}"#,
                        ),
                    ]
                },
            )
            .add(
                plain(
                    "test_tool_with_logging",
                    "Tests tool that emits log messages during execution",
                ),
                with_logging,
            )
            .add(
                plain(
                    "test_tool_with_progress",
                    "Tests tool that reports progress notifications",
                ),
                with_progress,
            )
            .add(
                plain("test_error_handling", "Tests error response handling"),
                |_: NoArgs| {
                    ToolResult::error("This tool intentionally returns an error for testing")
                },
            )
            .add(
                plain(
                    "test_sampling",
                    "Tests server-initiated sampling (LLM completion request)",
                ),
                sampling,
            )
            .add(
                plain(
                    "test_elicitation",
                    "Tests server-initiated elicitation (user input request)",
                ),
                elicitation,
            )
            .add(
                plain(
                    "test_elicitation_sep1034_defaults",
                    "Tests elicitation with default values (SEP-1034)",
                ),
                elicitation_defaults,
            )
            .add(
                plain(
                    "test_elicitation_sep1330_enums",
                    "Tests elicitation with enum schemas (SEP-1330)",
                ),
                elicitation_enums,
            )
            .add(
                plain(
                    "json_schema_2020_12_tool",
                    "Tool with JSON Schema 2020-12 features",
                )
                .input_schema(SCHEMA_2020_12),
                |args: Value| format!("JSON Schema 2020-12 tool called with: {args}"),
            );
        mrtr_tools(tools);
        task_tools(tools);
        // Last, so the header-validation scenario's first tool stays what it was.
        tools.add(
            plain(
                "test_custom_headers",
                "Arguments mirrored into Mcp-Param headers (SEP-2243)",
            )
            .input_schema(CUSTOM_HEADERS),
            |args: Value| format!("Custom headers test completed: {args}"),
        );
    }

    fn resources(resources: &mut Resources) {
        resources
            .add(
                ResourceInfo::new("test://static-text", "static-text")
                    .title("Static Text Resource")
                    .description("A static text resource for testing")
                    .mime_type("text/plain"),
                || "This is the content of the static text resource.",
            )
            .add(
                ResourceInfo::new("test://static-binary", "static-binary")
                    .title("Static Binary Resource")
                    .description("A static binary resource (image) for testing")
                    .mime_type("image/png"),
                || mcpbox_sdk::Blob(PNG.to_vec()),
            )
            .add(
                ResourceInfo::new("test://watched-resource", "watched-resource")
                    .title("Watched Resource")
                    .description("A resource for testing subscriptions")
                    .mime_type("text/plain"),
                || "Watched resource content",
            )
            .template(
                ResourceTemplate::new("test://template/{id}/data", "template")
                    .title("Resource Template")
                    .description("A resource template with parameter substitution")
                    .mime_type("application/json"),
                |TemplateId { id }: TemplateId| {
                    json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") })
                        .to_string()
                },
            );
    }

    fn prompts(prompts: &mut Prompts) {
        prompts
            .add(
                Prompt::new("test_simple_prompt", "A simple prompt without arguments"),
                |_: NoArgs| "This is a simple prompt for testing.".to_owned(),
            )
            .add(
                Prompt::new(
                    "test_prompt_with_arguments",
                    "A prompt with required arguments",
                ),
                |a: PromptArgs| {
                    format!(
                        "Prompt with arguments: arg1='{}', arg2='{}'",
                        a.arg1, a.arg2
                    )
                },
            )
            .add(
                Prompt::new(
                    "test_prompt_with_embedded_resource",
                    "A prompt that includes an embedded resource",
                ),
                |a: EmbeddedArgs| {
                    vec![
                        PromptMessage::user(Content::Embedded(ResourceContents::text(
                            a.resource_uri,
                            Some("text/plain"),
                            "Embedded resource content for testing.",
                        ))),
                        PromptMessage::user("Please process the embedded resource above."),
                    ]
                },
            )
            .add(
                Prompt::new("test_prompt_with_image", "A prompt that includes an image"),
                |_: NoArgs| {
                    vec![
                        PromptMessage::user(Content::image(PNG, "image/png")),
                        PromptMessage::user("Please analyze the image above."),
                    ]
                },
            )
            .add(
                Prompt::new(
                    "test_input_required_result_prompt",
                    "A prompt that asks the user for context first",
                ),
                |_: NoArgs| -> Result<String, String> {
                    let context = ask("context", "What context should the prompt use?", "context")?;
                    Ok(format!("Use this context: {context}"))
                },
            )
            .add(
                Prompt::new(
                    "test_dynamic_prompt",
                    format!(
                        "A prompt whose description follows the prompt list's generation ({})",
                        generation("prompts").unwrap_or(0)
                    ),
                ),
                |_: NoArgs| "dynamic".to_owned(),
            );
    }

    fn completions(completions: &mut Completions) {
        completions.prompt_argument("test_prompt_with_arguments", "arg1", |typed| {
            ["test1", "test2", "test3"]
                .iter()
                .filter(|v| v.starts_with(typed))
                .map(|v| (*v).to_owned())
                .collect()
        });
    }
}

mcpbox_sdk::export!(Conformance);

// The skills under `skills/` go into the component (the suite's skills scenarios).
mcpbox_sdk::skills!("skills");
