//! The fixtures the official MCP conformance suite (`@modelcontextprotocol/conformance`)
//! checks: tools for every content kind, logging, progress, errors, sampling and elicitation;
//! static, binary and templated resources; prompts with arguments, embedded resources and
//! images; and argument completion.

use std::time::Duration;

use mcpbox_sdk::serde_json::{Value, json};
use mcpbox_sdk::{
    Completions, Content, Deserialize, JsonSchema, NoArgs, Plugin, Prompt, PromptMessage, Prompts,
    ResourceContents, ResourceInfo, ResourceTemplate, Resources, Tool, ToolResult, Tools, host,
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
