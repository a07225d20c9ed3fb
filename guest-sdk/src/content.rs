//! Content blocks and tool results: constructors for the WIT types, and [`IntoToolResult`],
//! which lets a tool function return whatever is natural.

use std::fmt::Display;

use schemars::JsonSchema;
use serde::Serialize;

use crate::{
    BlobContents, Content, Media, ResourceContents, ResourceInfo, TextContents, ToolResult,
};

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(text.into())
    }

    /// An image block from raw bytes (the host base64-encodes them).
    pub fn image(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self::Image(Media {
            data: data.into(),
            mime_type: mime_type.into(),
        })
    }

    /// An audio block from raw bytes (the host base64-encodes them).
    pub fn audio(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Self::Audio(Media {
            data: data.into(),
            mime_type: mime_type.into(),
        })
    }

    /// A link to a resource the client can read.
    pub fn link(resource: ResourceInfo) -> Self {
        Self::ResourceLink(resource)
    }

    /// An embedded text resource.
    pub fn embedded_text(
        uri: impl Into<String>,
        mime_type: Option<&str>,
        text: impl Into<String>,
    ) -> Self {
        Self::Embedded(ResourceContents::text(uri, mime_type, text))
    }

    /// An embedded binary resource.
    pub fn embedded_blob(
        uri: impl Into<String>,
        mime_type: Option<&str>,
        blob: impl Into<Vec<u8>>,
    ) -> Self {
        Self::Embedded(ResourceContents::blob(uri, mime_type, blob))
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl ResourceContents {
    /// Text contents of the resource at `uri`.
    pub fn text(uri: impl Into<String>, mime_type: Option<&str>, text: impl Into<String>) -> Self {
        Self::Text(TextContents {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_owned),
            text: text.into(),
        })
    }

    /// Binary contents of the resource at `uri`.
    pub fn blob(uri: impl Into<String>, mime_type: Option<&str>, blob: impl Into<Vec<u8>>) -> Self {
        Self::Blob(BlobContents {
            uri: uri.into(),
            mime_type: mime_type.map(str::to_owned),
            blob: blob.into(),
        })
    }
}

impl ToolResult {
    /// A successful result made of these content blocks.
    pub fn new(content: Vec<Content>) -> Self {
        Self {
            content,
            structured: None,
            is_error: false,
        }
    }

    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![Content::text(text)])
    }

    /// A failed result (`isError: true`) with one text block the model can read.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: vec![Content::text(message)],
            structured: None,
            is_error: true,
        }
    }

    /// Attach structured content (JSON text matching the tool's output schema).
    pub fn with_structured(mut self, json: impl Into<String>) -> Self {
        self.structured = Some(json.into());
        self
    }
}

/// Structured tool output: the value is serialised as `structuredContent` (and, for clients
/// that read only text, as a text block too), and its [`JsonSchema`] becomes the tool's
/// `outputSchema`. Its schema must describe a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub struct Json<T>(pub T);

/// What a tool function may return.
///
/// Implemented for `String`, `&str`, [`Content`], `Vec<Content>`, [`ToolResult`], [`Json<T>`],
/// and `Result<T, E>` of any of these where `E: Display` (an `Err` becomes an `isError`
/// result carrying the error's text).
pub trait IntoToolResult {
    /// Convert into the result sent to the client.
    fn into_tool_result(self) -> ToolResult;

    /// The JSON Schema of the structured output, if this type produces one.
    fn output_schema() -> Option<String> {
        None
    }
}

impl IntoToolResult for ToolResult {
    fn into_tool_result(self) -> ToolResult {
        self
    }
}

impl IntoToolResult for String {
    fn into_tool_result(self) -> ToolResult {
        ToolResult::text(self)
    }
}

impl IntoToolResult for &str {
    fn into_tool_result(self) -> ToolResult {
        ToolResult::text(self)
    }
}

impl IntoToolResult for Content {
    fn into_tool_result(self) -> ToolResult {
        ToolResult::new(vec![self])
    }
}

impl IntoToolResult for Vec<Content> {
    fn into_tool_result(self) -> ToolResult {
        ToolResult::new(self)
    }
}

impl<T: Serialize + JsonSchema> IntoToolResult for Json<T> {
    fn into_tool_result(self) -> ToolResult {
        match serde_json::to_string(&self.0) {
            Ok(json) => ToolResult::text(json.clone()).with_structured(json),
            Err(e) => ToolResult::error(format!("could not serialise the tool's output: {e}")),
        }
    }

    fn output_schema() -> Option<String> {
        serde_json::to_string(&schemars::schema_for!(T)).ok()
    }
}

impl<T: IntoToolResult, E: Display> IntoToolResult for Result<T, E> {
    fn into_tool_result(self) -> ToolResult {
        match self {
            Ok(value) => value.into_tool_result(),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }

    fn output_schema() -> Option<String> {
        T::output_schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(result: &ToolResult) -> Vec<&str> {
        result
            .content
            .iter()
            .map(|c| match c {
                Content::Text(text) => text.as_str(),
                other => panic!("not text: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn plain_values_become_one_text_block() {
        for result in [
            "hello".into_tool_result(),
            "hello".to_owned().into_tool_result(),
            Content::text("hello").into_tool_result(),
            vec![Content::from("hello")].into_tool_result(),
            ToolResult::text("hello").into_tool_result(),
        ] {
            assert_eq!(text_of(&result), ["hello"]);
            assert!(!result.is_error);
            assert_eq!(result.structured, None);
        }
        assert_eq!(<&str as IntoToolResult>::output_schema(), None);
    }

    #[test]
    fn an_err_becomes_an_is_error_result_with_its_text() {
        let failed: Result<String, String> = Err("the file is gone".to_owned());
        let result = failed.into_tool_result();
        assert!(result.is_error);
        assert_eq!(text_of(&result), ["the file is gone"]);
        let ok: Result<&str, std::fmt::Error> = Ok("fine");
        let result = ok.into_tool_result();
        assert!(!result.is_error);
        assert_eq!(text_of(&result), ["fine"]);
        let error = ToolResult::error("no");
        assert!(error.is_error && text_of(&error) == ["no"]);
    }

    #[derive(Serialize, JsonSchema)]
    struct Sum {
        total: i64,
    }

    #[test]
    fn json_output_is_structured_and_text_with_its_schema() {
        let result = Json(Sum { total: 3 }).into_tool_result();
        assert!(!result.is_error);
        assert_eq!(result.structured.as_deref(), Some(r#"{"total":3}"#));
        assert_eq!(text_of(&result), [r#"{"total":3}"#]);
        let schema: serde_json::Value =
            serde_json::from_str(&Json::<Sum>::output_schema().unwrap()).unwrap();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["properties"]["total"]["type"], "integer");
        // A `Result` of it keeps the schema; its `Err` is an error without structured content.
        assert_eq!(
            <Result<Json<Sum>, String>>::output_schema(),
            Json::<Sum>::output_schema()
        );
        let failed: Result<Json<Sum>, String> = Err("overflow".to_owned());
        let failed = failed.into_tool_result();
        assert!(failed.is_error && failed.structured.is_none());
    }

    #[test]
    fn content_constructors_fill_the_wit_types() {
        let Content::Image(image) = Content::image(vec![1, 2], "image/png") else {
            panic!("not an image")
        };
        assert_eq!(
            (image.data, image.mime_type.as_str()),
            (vec![1, 2], "image/png")
        );
        let Content::Audio(audio) = Content::audio(vec![3], "audio/wav") else {
            panic!("not audio")
        };
        assert_eq!(audio.mime_type, "audio/wav");
        let Content::Embedded(ResourceContents::Text(text)) =
            Content::embedded_text("memo://a", Some("text/plain"), "hi")
        else {
            panic!("not embedded text")
        };
        assert_eq!(
            (
                text.uri.as_str(),
                text.mime_type.as_deref(),
                text.text.as_str()
            ),
            ("memo://a", Some("text/plain"), "hi")
        );
        let Content::Embedded(ResourceContents::Blob(blob)) =
            Content::embedded_blob("memo://b", None, vec![0u8, 255])
        else {
            panic!("not an embedded blob")
        };
        assert_eq!((blob.mime_type, blob.blob), (None, vec![0u8, 255]));
        let Content::ResourceLink(link) = Content::link(ResourceInfo::new("memo://c", "c")) else {
            panic!("not a link")
        };
        assert_eq!(link.uri, "memo://c");
    }
}
