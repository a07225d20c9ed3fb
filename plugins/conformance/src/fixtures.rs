//! What the 0.2 fixture (`plugins/conformance`) and its WASI 0.3 build
//! (`plugins/conformance-p3`, which includes this file) share: every tool's name and
//! description, the content they answer with, the argument types, the requests they send the
//! client and how they read its answers, the list-change counters, and the whole of the
//! resources, prompts and completions (which the SDK registers the same way for both).
//!
//! Only the tools differ: a 0.2 tool is a plain function that blocks on the host; a 0.3 tool
//! is an `async fn` that awaits it. The one prompt that asks the user
//! (`test_input_required_result_prompt`) asks through the 0.2 `host` import in both builds:
//! the SDK registers 0.3 prompts as plain functions, which cannot await.

use mcpbox_sdk::serde_json::{Value, json};
use mcpbox_sdk::{
    Completions, Content, Deserialize, JsonSchema, NoArgs, Prompt, PromptMessage, Prompts,
    ResourceContents, ResourceInfo, ResourceTemplate, Resources, Tool, host,
};

pub const PNG: &[u8] = include_bytes!("../assets/pixel.png");
pub const WAV: &[u8] = include_bytes!("../assets/beep.wav");

/// The schema `json_schema_2020_12_tool` publishes, keyword for keyword.
pub const SCHEMA_2020_12: &str = r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}"##;

/// A tool whose arguments clients mirror into headers: a string, an integer and a boolean
/// (`x-mcp-header`), and one that is not mirrored.
pub const CUSTOM_HEADERS: &str = r#"{"type":"object","properties":{"region":{"type":"string","description":"Mirrored as Mcp-Param-Region","x-mcp-header":"Region"},"priority":{"type":"integer","description":"Mirrored as Mcp-Param-Priority","x-mcp-header":"Priority"},"verbose":{"type":"boolean","description":"Mirrored as Mcp-Param-Verbose","x-mcp-header":"Verbose"},"query":{"type":"string","description":"Not mirrored"}},"required":["region","priority","query"]}"#;

/// Every tool, in the order both builds register them: its name and description. The
/// header-validation scenario reads the first tool, and `test_custom_headers` stays last.
const TOOLS: &[(&str, &str)] = &[
    ("test_simple_text", "Tests simple text content response"),
    ("test_image_content", "Tests image content response"),
    ("test_audio_content", "Tests audio content response"),
    (
        "test_embedded_resource",
        "Tests embedded resource content response",
    ),
    (
        "test_multiple_content_types",
        "Tests response with multiple content types (text, image, resource)",
    ),
    (
        "test_tool_with_logging",
        "Tests tool that emits log messages during execution",
    ),
    (
        "test_tool_with_progress",
        "Tests tool that reports progress notifications",
    ),
    ("test_error_handling", "Tests error response handling"),
    (
        "test_sampling",
        "Tests server-initiated sampling (LLM completion request)",
    ),
    (
        "test_elicitation",
        "Tests server-initiated elicitation (user input request)",
    ),
    (
        "test_elicitation_sep1034_defaults",
        "Tests elicitation with default values (SEP-1034)",
    ),
    (
        "test_elicitation_sep1330_enums",
        "Tests elicitation with enum schemas (SEP-1330)",
    ),
    (
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
    ),
    // The diagnostic and input-request tools of the 2026-07-28 scenarios.
    (
        "test_missing_capability",
        "Needs the client's sampling capability (rejected with -32021 without it)",
    ),
    (
        "test_streaming_elicitation",
        "Asks the user for input: never a request on the response stream",
    ),
    (
        "test_logging_tool",
        "Logs a message (sent only to requests that opted into logs)",
    ),
    ("test_trigger_tool_change", "Changes the tool list"),
    ("test_trigger_prompt_change", "Changes the prompt list"),
    ("test_dynamic_tool", ""),
    (
        "test_input_required_result_elicitation",
        "Asks the user's name (input request user_name)",
    ),
    (
        "test_input_required_result_sampling",
        "Asks the client's model a question (input request capital_question)",
    ),
    (
        "test_input_required_result_list_roots",
        "Asks the client for its roots",
    ),
    (
        "test_input_required_result_request_state",
        "Asks for a confirmation; the answer comes back with the request state",
    ),
    (
        "test_input_required_result_multiple_inputs",
        "Asks for a name, a completion and the roots in one round",
    ),
    (
        "test_input_required_result_multi_round",
        "Asks for a name, then (in a second round) a colour",
    ),
    (
        "test_input_required_result_tampered_state",
        "Asks for a confirmation; tampered request state is rejected",
    ),
    (
        "test_input_required_result_capabilities",
        "Asks the user if the client can elicit, else the client's model",
    ),
    // The tasks scenarios' tools (SEP-2663). Which of them run as tasks is the manifest's to
    // say (`[tasks]` in the conformance test's manifest); each works a second before it
    // finishes, fails or asks, so that it outlasts the host's grace and becomes a task.
    ("greet", "Greets someone at once (never a task)"),
    ("slow_compute", "Computes for `seconds` seconds"),
    ("failing_job", "Works a second, then reports a tool error"),
    (
        "protocol_error_job",
        "Works a second, then crashes (produces no result)",
    ),
    (
        "confirm_delete",
        "Works a second, then asks the user to confirm deleting a file",
    ),
    (
        "multi_input",
        "Works a second, then asks two questions at once",
    ),
    (
        "test_tool_with_task",
        "Asks the user's name at once, then works as a task",
    ),
    (
        "test_custom_headers",
        "Arguments mirrored into Mcp-Param headers (SEP-2243)",
    ),
];

/// The tool `name` as listed: its description, and the schema of the two with a raw one.
pub fn tool(name: &str) -> Tool {
    let description = match name {
        "test_dynamic_tool" => format!(
            "A tool whose description follows the tool list's generation ({})",
            generation("tools").unwrap_or(0)
        ),
        _ => TOOLS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or_else(String::new, |(_, d)| (*d).to_owned()),
    };
    let tool = Tool::new(name, description);
    match name {
        "json_schema_2020_12_tool" => tool.input_schema(SCHEMA_2020_12),
        "test_custom_headers" => tool.input_schema(CUSTOM_HEADERS),
        _ => tool,
    }
}

/// What the content tools answer.
pub const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
pub const ERROR_TEXT: &str = "This tool intentionally returns an error for testing";

pub fn image() -> Content {
    Content::image(PNG, "image/png")
}

pub fn audio() -> Content {
    Content::audio(WAV, "audio/wav")
}

pub fn embedded() -> Content {
    Content::embedded_text(
        "test://embedded-resource",
        Some("text/plain"),
        "This is an embedded resource content.",
    )
}

pub fn mixed() -> Vec<Content> {
    vec![
        Content::text("Multiple content types test:"),
        Content::image(PNG, "image/png"),
        Content::embedded_text(
            "test://mixed-content-resource",
            Some("application/json"),
            r#"{"test":"data","value":123}"#,
        ),
    ]
}

/// `test_tool_with_logging`: three messages, 50 ms apart, then this answer.
pub const LOG_LINES: [&str; 3] = [
    "Tool execution started",
    "Tool processing data",
    "Tool execution completed",
];
pub const LOGGED: &str = "Tool with logging executed successfully";

/// `test_tool_with_progress`: three reports of 100, 50 ms apart, then this answer.
pub const PROGRESS: [f64; 3] = [0.0, 50.0, 100.0];
pub const PROGRESSED: &str = "Progress reporting completed";

pub fn progress_message(step: usize) -> String {
    format!("Completed step {step} of 2")
}

/// The pause between log messages and between progress reports.
pub const STEP_MS: u64 = 50;
/// How long a task tool works before it finishes, fails or asks.
pub const TASK_WORK_MS: u64 = 1000;

/// Arguments of `test_sampling`.
#[derive(Deserialize, JsonSchema)]
pub struct SamplingArgs {
    /// The prompt to send to the client's model.
    pub prompt: String,
}

/// Arguments of `test_elicitation`.
#[derive(Deserialize, JsonSchema)]
pub struct ElicitationArgs {
    /// The message to show the user.
    pub message: String,
}

/// Arguments of `greet`.
#[derive(Deserialize, JsonSchema)]
pub struct GreetArgs {
    /// Who to greet.
    pub name: String,
}

/// Arguments of `slow_compute`.
#[derive(Deserialize, JsonSchema)]
pub struct SlowArgs {
    /// How long the computation takes, in seconds.
    pub seconds: f64,
    /// A label echoed in the result.
    #[serde(default)]
    pub label: Option<String>,
}

impl SlowArgs {
    /// How long to compute, in ms.
    pub fn ms(&self) -> u64 {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "clamped to 0..=3,600,000 first"
        )]
        let ms = (self.seconds.clamp(0.0, 3600.0) * 1000.0) as u64;
        ms
    }

    /// The answer once computed.
    pub fn answer(&self) -> String {
        format!(
            "computed {} in {} s",
            self.label.as_deref().unwrap_or("a result"),
            self.seconds
        )
    }
}

/// `slow_compute`'s progress after `done` of `ms` (a task's status message).
pub fn computed(done: u64, ms: u64) -> String {
    format!("computed {} of {} s", done / 1000, ms / 1000)
}

/// Arguments of `confirm_delete`.
#[derive(Deserialize, JsonSchema)]
pub struct DeleteArgs {
    /// The file to (pretend to) delete.
    pub filename: String,
}

/// The generation counter `kind` keeps under `/state`, if the directory is granted.
pub fn generation(kind: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/state/{kind}-generation")).ok()?;
    text.trim().parse().ok()
}

/// Bump `kind`'s generation (the caller then tells the host the list changed): what to answer.
pub fn bump(kind: &str) -> Result<String, String> {
    let next = generation(kind).unwrap_or(0) + 1;
    std::fs::write(format!("/state/{kind}-generation"), next.to_string())
        .map_err(|e| format!("cannot change the {kind} list without the /state grant: {e}"))?;
    Ok(format!("{kind} list changed (generation {next})"))
}

/// The elicitation asking for `field`, keyed `key`.
pub fn ask_request(key: &str, message: &str, field: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { field: { "type": "string" } },
            "required": [field],
        },
        "_meta": { host::INPUT_KEY_META: key },
    })
}

/// The user's `field` from an answer to [`ask_request`].
pub fn asked(answer: &Value, field: &str) -> Result<String, String> {
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

/// Ask the user for `field`, keyed `key`, through the 0.2 `host` import.
pub fn ask(key: &str, message: &str, field: &str) -> Result<String, String> {
    asked(&host::elicit(&ask_request(key, message, field))?, field)
}

/// The sampling request for `prompt`, keyed `key` if given.
pub fn sample_request(key: Option<&str>, prompt: &str) -> Value {
    let mut request = json!({
        "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
        "maxTokens": 100,
    });
    if let Some(key) = key {
        request["_meta"] = json!({ host::INPUT_KEY_META: key });
    }
    request
}

/// The model's text from an answer to [`sample_request`].
pub fn sampled(answer: &Value) -> String {
    answer["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// What the elicitation tools answer: the action and the content the client sent.
pub fn elicited(answer: &Value, prefix: &str) -> String {
    let action = answer["action"].as_str().unwrap_or("unknown");
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    format!("{prefix}: action={action}, content={content}")
}

/// `test_elicitation`'s request.
pub fn elicitation_request(message: &str) -> Value {
    json!({
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { "response": { "type": "string", "description": "User's response" } },
            "required": ["response"],
        },
    })
}

/// `test_elicitation_sep1034_defaults`'s request.
pub fn defaults_request() -> Value {
    json!({
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
    })
}

/// `test_elicitation_sep1330_enums`'s request.
pub fn enums_request() -> Value {
    json!({
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
    })
}

/// The confirmation (a boolean `confirm`) asked with `message`, keyed `key`.
pub fn confirm_request(key: &str, message: &str) -> Value {
    json!({
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": { "confirm": { "type": "boolean" }, "name": { "type": "string" } },
            "required": ["confirm"],
        },
        "_meta": { host::INPUT_KEY_META: key },
    })
}

/// Whether an answer to [`confirm_request`] keyed `key` confirms.
pub fn confirmed(answer: &Value, key: &str) -> Result<(), String> {
    match (answer["action"].as_str(), &answer["content"]["confirm"]) {
        (Some("accept"), Value::Bool(true)) => Ok(()),
        _ => Err(format!("not confirmed ({key})")),
    }
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

/// The resources and the template.
pub fn resources(resources: &mut Resources) {
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

/// The prompts.
pub fn prompts(prompts: &mut Prompts) {
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

/// Completion of `test_prompt_with_arguments.arg1`.
pub fn completions(completions: &mut Completions) {
    completions.prompt_argument("test_prompt_with_arguments", "arg1", |typed| {
        ["test1", "test2", "test3"]
            .iter()
            .filter(|v| v.starts_with(typed))
            .map(|v| (*v).to_owned())
            .collect()
    });
}
