//! WIT types to MCP JSON, and plugin failures to MCP errors: the one place where the plugin
//! contract meets the protocol.
//!
//! Plugin-supplied JSON (schemas, structured content) is embedded as raw text, so every
//! keyword and every byte the plugin wrote reaches the client unchanged.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::engine::{
    CompletionResult, Content, Prompt, PromptMessage, ResourceContents, ResourceInfo,
    ResourceTemplate, Role, Tool, ToolAnnotations, ToolResult,
};
use crate::policy::TaskSupport;
use crate::protocol::ErrorObject;
use crate::protocol::error::RESOURCE_NOT_FOUND;
use crate::protocol::jsonrpc::flat_raw;
use crate::server::{MethodOutput, MethodResult};

/// Serialise `value` as raw JSON; failure is an internal error.
pub fn to_raw(value: &impl Serialize) -> Result<Box<RawValue>, ErrorObject> {
    serde_json::value::to_raw_value(value)
        .map_err(|e| ErrorObject::internal(format!("could not encode the result: {e}")))
}

/// `value` as a result that reports no failure.
fn result(value: &impl Serialize) -> MethodResult {
    to_raw(value).map(MethodOutput::from)
}

/// Parse plugin-supplied JSON text, keeping it byte-for-byte but for line breaks (the
/// whitespace around tokens goes when there is one: see [`flat_raw`]).
fn raw_json(text: &str) -> Result<Box<RawValue>, String> {
    RawValue::from_string(text.to_owned())
        .map(flat_raw)
        .map_err(|e| format!("is not valid JSON: {e}"))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolJson<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    description: &'a str,
    input_schema: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    execution: Option<Value>,
}

/// A JSON Schema that describes an object, as MCP requires of tool schemas.
fn object_schema(what: &str, text: &str) -> Result<Box<RawValue>, String> {
    let raw = raw_json(text).map_err(|e| format!("its {what} {e}"))?;
    let value: Value = serde_json::from_str(raw.get())
        .map_err(|e| format!("its {what} is not valid JSON: {e}"))?;
    match value.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(raw),
        _ if !value.is_object() => Err(format!("its {what} is not a JSON object")),
        _ => Err(format!("its {what} must have \"type\": \"object\"")),
    }
}

fn annotations_json(a: &ToolAnnotations) -> Option<Value> {
    let mut map = serde_json::Map::new();
    for (key, value) in [
        ("readOnlyHint", a.read_only),
        ("destructiveHint", a.destructive),
        ("idempotentHint", a.idempotent),
        ("openWorldHint", a.open_world),
    ] {
        if let Some(v) = value {
            map.insert(key.to_owned(), Value::Bool(v));
        }
    }
    (!map.is_empty()).then_some(Value::Object(map))
}

/// A tool as `tools/list` shows it, or why it cannot be listed.
pub fn tool_json(tool: &Tool, task: TaskSupport) -> Result<Box<RawValue>, String> {
    let input_schema = object_schema("input schema", &tool.input_schema)?;
    let output_schema = tool
        .output_schema
        .as_deref()
        .map(|s| object_schema("output schema", s))
        .transpose()?;
    to_raw(&ToolJson {
        name: &tool.name,
        title: tool.title.as_deref(),
        description: &tool.description,
        input_schema: &input_schema,
        output_schema: output_schema.as_deref(),
        annotations: tool.annotations.as_ref().and_then(annotations_json),
        // Absent means forbidden: listed only for tools that may run as tasks.
        execution: (task != TaskSupport::Forbidden)
            .then(|| json!({ "taskSupport": task.as_str() })),
    })
    .map_err(|e| e.message)
}

/// A prompt as `prompts/list` shows it.
pub fn prompt_json(prompt: &Prompt) -> Result<Box<RawValue>, String> {
    let mut names = std::collections::HashSet::new();
    let arguments: Vec<Value> = prompt
        .arguments
        .iter()
        .map(|a| {
            if !names.insert(a.name.as_str()) {
                return Err(format!("argument `{}` is listed twice", a.name));
            }
            let mut arg = json!({ "name": a.name, "required": a.required });
            insert_opt(&mut arg, "title", a.title.as_deref());
            insert_opt(&mut arg, "description", a.description.as_deref());
            Ok(arg)
        })
        .collect::<Result<_, _>>()?;
    let mut value =
        json!({ "name": prompt.name, "description": prompt.description, "arguments": arguments });
    insert_opt(&mut value, "title", prompt.title.as_deref());
    to_raw(&value).map_err(|e| e.message)
}

/// A resource as `resources/list` (or a `resource_link` block) shows it.
pub fn resource_value(resource: &ResourceInfo) -> Value {
    let mut value = json!({ "uri": resource.uri, "name": resource.name });
    insert_opt(&mut value, "title", resource.title.as_deref());
    insert_opt(&mut value, "description", resource.description.as_deref());
    insert_opt(&mut value, "mimeType", resource.mime_type.as_deref());
    if let Some(size) = resource.size {
        value["size"] = json!(size);
    }
    value
}

/// A resource template as `resources/templates/list` shows it.
pub fn template_json(template: &ResourceTemplate) -> Result<Box<RawValue>, String> {
    let mut value = json!({ "uriTemplate": template.uri_template, "name": template.name });
    insert_opt(&mut value, "title", template.title.as_deref());
    insert_opt(&mut value, "description", template.description.as_deref());
    insert_opt(&mut value, "mimeType", template.mime_type.as_deref());
    to_raw(&value).map_err(|e| e.message)
}

fn insert_opt(value: &mut Value, key: &str, field: Option<&str>) {
    if let Some(field) = field {
        value[key] = json!(field);
    }
}

fn contents_value(contents: &ResourceContents) -> Value {
    let mut value = match contents {
        ResourceContents::Text(t) => json!({ "uri": t.uri, "text": t.text }),
        ResourceContents::Blob(b) => json!({ "uri": b.uri, "blob": BASE64.encode(&b.blob) }),
    };
    let mime_type = match contents {
        ResourceContents::Text(t) => t.mime_type.as_deref(),
        ResourceContents::Blob(b) => b.mime_type.as_deref(),
    };
    insert_opt(&mut value, "mimeType", mime_type);
    value
}

fn content_value(content: &Content) -> Value {
    match content {
        Content::Text(text) => json!({ "type": "text", "text": text }),
        Content::Image(m) => {
            json!({ "type": "image", "data": BASE64.encode(&m.data), "mimeType": m.mime_type })
        }
        Content::Audio(m) => {
            json!({ "type": "audio", "data": BASE64.encode(&m.data), "mimeType": m.mime_type })
        }
        Content::ResourceLink(r) => {
            let mut value = resource_value(r);
            value["type"] = json!("resource_link");
            value
        }
        Content::Embedded(c) => json!({ "type": "resource", "resource": contents_value(c) }),
    }
}

/// A `tools/call` result that reports a failure to the model (`isError: true`).
pub fn error_result(message: &str) -> MethodResult {
    to_raw(&json!({ "content": [{ "type": "text", "text": message }], "isError": true }))
        .map(MethodOutput::tool_error)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallToolJson<'a> {
    content: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    structured_content: Option<&'a RawValue>,
    is_error: bool,
}

/// The `tools/call` result for what a tool returned (its failures are [`super::PluginFailure`]'s
/// business), or what is wrong with its structured content.
pub fn call_tool_result(result: &ToolResult) -> Result<MethodOutput, String> {
    let structured = result
        .structured
        .as_deref()
        .map(raw_json)
        .transpose()
        .map_err(|e| format!("returned structured content that {e}"))?;
    to_raw(&CallToolJson {
        content: result.content.iter().map(content_value).collect(),
        structured_content: structured.as_deref(),
        is_error: result.is_error,
    })
    .map(|body| MethodOutput {
        body,
        is_error: result.is_error,
    })
    .map_err(|e| e.message)
}

/// The most completion values sent to a client.
pub const MAX_COMPLETION_VALUES: usize = 100;

/// A `completion/complete` result from a plugin's answer: at most [`MAX_COMPLETION_VALUES`]
/// values, `hasMore` when it had more (or said so), `total` as it said (else the count).
pub fn completion_result(mut result: CompletionResult) -> MethodResult {
    let has_more = result.has_more || result.values.len() > MAX_COMPLETION_VALUES;
    let total = result.total.map_or(result.values.len(), |t| t as usize);
    result.values.truncate(MAX_COMPLETION_VALUES);
    self::result(&json!({
        "completion": { "values": result.values, "total": total, "hasMore": has_more }
    }))
}

/// The `completion/complete` result of a plugin that offers no completion.
pub fn no_completions() -> MethodResult {
    result(&json!({ "completion": { "values": [], "hasMore": false } }))
}

/// The `prompts/get` result.
pub fn prompt_result(description: &str, messages: &[PromptMessage]) -> MethodResult {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| {
            let role = match m.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({ "role": role, "content": content_value(&m.content) })
        })
        .collect();
    result(&json!({ "description": description, "messages": messages }))
}

/// The `resources/read` result.
pub fn read_result(contents: &[ResourceContents]) -> MethodResult {
    result(&json!({ "contents": contents.iter().map(contents_value).collect::<Vec<_>>() }))
}

/// A result made of JSON text made earlier, between `open` and `close`.
pub fn enclosed(open: &str, inner: &RawValue, close: &str) -> MethodResult {
    let inner = inner.get();
    let mut body = String::with_capacity(open.len() + inner.len() + close.len());
    body.push_str(open);
    body.push_str(inner);
    body.push_str(close);
    RawValue::from_string(body)
        .map(MethodOutput::from)
        .map_err(|e| ErrorObject::internal(format!("could not build the result: {e}")))
}

/// The `resources/read` result for a skill file (its contents were made at load).
pub fn skill_file_result(file: &crate::skills::SkillFile) -> MethodResult {
    enclosed(r#"{"contents":["#, &file.contents, "]}")
}

/// The error for a URI no plugin serves.
pub fn resource_not_found(uri: &str) -> ErrorObject {
    ErrorObject::new(RESOURCE_NOT_FOUND, format!("resource not found: `{uri}`"))
        .with_data(json!({ "uri": uri }))
}

/// The deepest nesting of structured content passed on to a client: clients parse it
/// recursively, and some drop a response nested deeper than this.
pub const MAX_STRUCTURED_DEPTH: usize = 64;

/// Check a tool's structured content before it reaches a client: nested at most
/// [`MAX_STRUCTURED_DEPTH`] deep, and an object unless the client's revision takes any value.
pub fn check_structured(text: &str, any_value: bool) -> Result<(), String> {
    let depth = json_depth(text);
    if depth > MAX_STRUCTURED_DEPTH {
        return Err(format!(
            "returned structured content nested {depth} levels deep, over the limit of {MAX_STRUCTURED_DEPTH}"
        ));
    }
    if !any_value && !text.trim_start().starts_with('{') {
        return Err(
            "returned structured content that is not a JSON object, which MCP 2025-11-25 requires"
                .to_owned(),
        );
    }
    Ok(())
}

/// The deepest nesting of arrays and objects in JSON text (strings skipped).
fn json_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in text.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The longest error message from a plugin passed on to a client; longer ones are cut.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 16 << 10;

/// A plugin's error message, cut to [`MAX_ERROR_MESSAGE_BYTES`] (saying so).
pub fn bounded(message: String) -> String {
    crate::engine::cut_message(message, MAX_ERROR_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Media;

    fn tool(schema: &str) -> Tool {
        Tool {
            name: "t".into(),
            title: None,
            description: "d".into(),
            input_schema: schema.into(),
            output_schema: None,
            annotations: None,
        }
    }

    #[test]
    fn plugin_json_with_line_breaks_leaves_without_them() {
        let pretty = "{\n  \"type\": \"object\",\n  \"properties\": {\"a\": {\"description\": \"x\\ny\"}}\n}";
        let listed = tool_json(&tool(pretty), TaskSupport::Forbidden).unwrap();
        assert!(!listed.get().contains('\n'), "{}", listed.get());
        let result = call_tool_result(&ToolResult {
            content: vec![],
            structured: Some("{\n\"a\": 1\n}".to_owned()),
            is_error: false,
        })
        .unwrap();
        assert!(!result.body.get().contains('\n'), "{}", result.body.get());
        assert!(result.body.get().contains(r#""structuredContent":{"a":1}"#));
    }

    #[test]
    fn structured_content_is_checked_for_depth_and_shape() {
        assert!(check_structured(r#"{"a":[1,{"b":"[[[["}]}"#, false).is_ok());
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(
            check_structured(&deep, true)
                .unwrap_err()
                .contains("10000 levels")
        );
        assert!(check_structured("[]", true).is_ok());
        assert!(
            check_structured("[]", false)
                .unwrap_err()
                .contains("not a JSON object")
        );
    }

    #[test]
    fn schemas_pass_through_byte_for_byte() {
        let schema = r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"a":{"$anchor":"x"}},"if":{},"then":{},"additionalProperties":false}"#;
        let json = tool_json(&tool(schema), TaskSupport::Forbidden).unwrap();
        assert!(json.get().contains(schema), "{}", json.get());
    }

    #[test]
    fn schemas_that_are_not_objects_are_refused() {
        assert!(
            tool_json(&tool(r#"{"type":"string"}"#), TaskSupport::Forbidden)
                .unwrap_err()
                .contains("\"type\": \"object\"")
        );
        assert!(
            tool_json(&tool("[1]"), TaskSupport::Forbidden)
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(
            tool_json(&tool("{"), TaskSupport::Forbidden)
                .unwrap_err()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn a_result_says_whether_it_reports_a_failure() {
        let failed = ToolResult {
            content: vec![Content::Text("no".into())],
            structured: None,
            is_error: true,
        };
        let out = call_tool_result(&failed).unwrap();
        assert!(out.is_error);
        assert!(out.body.get().contains(r#""isError":true"#), "{}", out.body);
        assert!(error_result("no").unwrap().is_error);
        assert!(!read_result(&[]).unwrap().is_error);
        assert!(!no_completions().unwrap().is_error);
    }

    #[test]
    fn content_blocks_have_their_mcp_shapes() {
        let result = ToolResult {
            content: vec![
                Content::Text("hi".into()),
                Content::Image(Media {
                    data: vec![1, 2, 3],
                    mime_type: "image/png".into(),
                }),
                Content::Audio(Media {
                    data: vec![4],
                    mime_type: "audio/wav".into(),
                }),
            ],
            structured: Some(r#"{"a": 1}"#.into()),
            is_error: false,
        };
        let out = call_tool_result(&result).unwrap();
        assert!(!out.is_error);
        let out: Value = serde_json::from_str(out.body.get()).unwrap();
        assert_eq!(out["content"][0], json!({"type": "text", "text": "hi"}));
        assert_eq!(
            out["content"][1],
            json!({"type": "image", "data": "AQID", "mimeType": "image/png"})
        );
        assert_eq!(out["content"][2]["type"], "audio");
        assert_eq!(out["structuredContent"], json!({"a": 1}));
        assert_eq!(out["isError"], false);
    }
}
