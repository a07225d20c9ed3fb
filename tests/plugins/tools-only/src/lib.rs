//! Test fixture: a plugin written against the WIT contract directly (no SDK), exporting only
//! the `tools` interface.

#![allow(
    unsafe_code,
    reason = "the export glue wit-bindgen generates in this crate is unsafe"
)]

#[allow(missing_docs, reason = "generated bindings")]
mod bindings {
    wit_bindgen::generate!({
        inline: "
            package test:fixture;
            world tools-only {
                export mcpbox:plugin/tools@0.1.0;
            }
        ",
        path: "../../../wit",
        world: "test:fixture/tools-only",
        generate_all,
    });
}

use bindings::exports::mcpbox::plugin::tools::{Error, Guest, Tool, ToolResult};
use bindings::mcpbox::plugin::types::Content;

struct ToolsOnly;

impl Guest for ToolsOnly {
    fn list_tools() -> Vec<Tool> {
        vec![Tool {
            name: "shout".to_owned(),
            title: None,
            description: "Upper-case the input".to_owned(),
            input_schema:
                r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#
                    .to_owned(),
            output_schema: None,
            annotations: None,
        }]
    }

    fn call_tool(name: String, arguments: String) -> Result<ToolResult, Error> {
        if name != "shout" {
            return Err(Error::NotFound(format!("no tool `{name}`")));
        }
        // No JSON library: find the string after `"text":"`, enough for a fixture.
        let text = arguments
            .split_once(r#""text":""#)
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(text, _)| text.to_uppercase())
            .ok_or_else(|| Error::InvalidParams("`text` is required".to_owned()))?;
        Ok(ToolResult {
            content: vec![Content::Text(text)],
            structured: None,
            is_error: false,
        })
    }
}

bindings::export!(ToolsOnly with_types_in bindings);
