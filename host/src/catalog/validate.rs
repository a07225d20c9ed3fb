//! JSON Schema validation of tool arguments (before the plugin runs) and of structured output
//! (before the client sees it), with validators compiled once, when the plugin loads.
//!
//! Schemas are JSON Schema 2020-12 unless they say otherwise (`$schema`). Remote `$ref`s are
//! never fetched: a schema that needs one is refused at load.

use jsonschema::Validator;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::engine::Tool;

/// How many validation errors a message lists.
const MAX_REPORTED: usize = 5;

/// A tool's compiled schemas.
pub struct ToolSchemas {
    input: Validator,
    output: Option<Validator>,
}

impl ToolSchemas {
    /// Compile a tool's schemas, or say why one is not a usable JSON Schema.
    pub fn compile(tool: &Tool) -> Result<Self, String> {
        let compile = |what: &str, text: &str| -> Result<Validator, String> {
            let schema: Value = serde_json::from_str(text)
                .map_err(|e| format!("its {what} is not valid JSON: {e}"))?;
            jsonschema::validator_for(&schema)
                .map_err(|e| format!("its {what} is not a usable JSON Schema: {e}"))
        };
        Ok(Self {
            input: compile("input schema", &tool.input_schema)?,
            output: tool
                .output_schema
                .as_deref()
                .map(|s| compile("output schema", s))
                .transpose()?,
        })
    }

    /// Check arguments against the input schema; the problems, if any, as one message.
    pub fn check_arguments(&self, tool: &str, arguments: &RawValue) -> Result<(), String> {
        let value: Value = serde_json::from_str(arguments.get())
            .map_err(|e| format!("invalid arguments for tool `{tool}`: {e}"))?;
        problems(&self.input, &value)
            .map_err(|p| format!("invalid arguments for tool `{tool}`: {p}"))
    }

    /// Check structured output against the output schema. A tool with an output schema must
    /// return structured content (unless it reports an error).
    pub fn check_output(&self, structured: Option<&str>, is_error: bool) -> Result<(), String> {
        let Some(schema) = &self.output else {
            return Ok(());
        };
        let Some(text) = structured else {
            return if is_error {
                Ok(())
            } else {
                Err("has an output schema but returned no structured content".to_owned())
            };
        };
        let value: Value = serde_json::from_str(text)
            .map_err(|e| format!("returned structured content that is not valid JSON: {e}"))?;
        problems(schema, &value).map_err(|p| {
            format!("returned structured content that does not match its output schema: {p}")
        })
    }
}

fn problems(validator: &Validator, value: &Value) -> Result<(), String> {
    let mut found: Vec<String> = validator
        .iter_errors(value)
        .take(MAX_REPORTED + 1)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{e} (at {path})")
            }
        })
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    if found.len() > MAX_REPORTED {
        found.truncate(MAX_REPORTED);
        found.push("…".to_owned());
    }
    Err(found.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(input: &str, output: Option<&str>) -> Tool {
        Tool {
            name: "t".into(),
            title: None,
            description: "d".into(),
            input_schema: input.into(),
            output_schema: output.map(str::to_owned),
            annotations: None,
        }
    }

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn arguments_are_checked_against_2020_12_schemas() {
        let schemas = ToolSchemas::compile(&tool(
            r#"{"type":"object","properties":{"a":{"type":"number"}},"required":["a"],"additionalProperties":false,
                "$defs":{"x":{"$anchor":"ax","type":"string"}}}"#,
            None,
        ))
        .unwrap();
        assert!(schemas.check_arguments("t", &raw(r#"{"a": 1}"#)).is_ok());
        let e = schemas
            .check_arguments("t", &raw(r#"{"a": "one"}"#))
            .unwrap_err();
        assert!(
            e.starts_with("invalid arguments for tool `t`: ") && e.contains("/a"),
            "{e}"
        );
        assert!(
            schemas
                .check_arguments("t", &raw("{}"))
                .unwrap_err()
                .contains("required")
        );
        assert!(
            schemas
                .check_arguments("t", &raw(r#"{"a":1,"b":2}"#))
                .is_err()
        );
    }

    #[test]
    fn structured_output_is_checked() {
        let schemas = ToolSchemas::compile(&tool(
            r#"{"type":"object"}"#,
            Some(r#"{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}"#),
        ))
        .unwrap();
        assert!(schemas.check_output(Some(r#"{"sum": 3}"#), false).is_ok());
        assert!(
            schemas
                .check_output(Some(r#"{"total": 3}"#), false)
                .unwrap_err()
                .contains("does not match")
        );
        assert!(
            schemas
                .check_output(None, false)
                .unwrap_err()
                .contains("no structured content")
        );
        assert!(schemas.check_output(None, true).is_ok());
    }

    #[test]
    fn unusable_schemas_are_refused() {
        assert!(ToolSchemas::compile(&tool(r#"{"type": 5}"#, None)).is_err());
        assert!(
            ToolSchemas::compile(&tool(r#"{"$ref": "https://example.com/s.json"}"#, None)).is_err()
        );
    }
}
