//! Resource registration: [`Resources`] collects a plugin's resources and templates, and reads
//! the one asked for.
//!
//! When the host reads a URI, the first registration that matches it runs: a resource whose
//! URI equals it, or a template whose pattern matches it (see the module `uri_template` for
//! the template syntax the SDK matches).

use std::fmt::Display;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::uri_template::match_uri;
use crate::{Error, ResourceContents, ResourceInfo, ResourceTemplate};

/// The resources of a plugin, passed to [`Plugin::resources`](crate::Plugin::resources).
pub struct Resources<'a> {
    mode: Mode<'a>,
}

enum Mode<'a> {
    List {
        resources: Vec<ResourceInfo>,
        templates: Vec<ResourceTemplate>,
    },
    Read {
        uri: &'a str,
        result: Option<Result<Vec<ResourceContents>, Error>>,
    },
}

impl<'a> Resources<'a> {
    pub(crate) fn listing() -> Self {
        Self {
            mode: Mode::List {
                resources: Vec::new(),
                templates: Vec::new(),
            },
        }
    }

    pub(crate) fn reading(uri: &'a str) -> Self {
        Self {
            mode: Mode::Read { uri, result: None },
        }
    }

    pub(crate) fn into_lists(self) -> (Vec<ResourceInfo>, Vec<ResourceTemplate>) {
        match self.mode {
            Mode::List {
                resources,
                templates,
            } => (resources, templates),
            Mode::Read { .. } => (Vec::new(), Vec::new()),
        }
    }

    pub(crate) fn into_result(self) -> Result<Vec<ResourceContents>, Error> {
        match self.mode {
            Mode::Read {
                result: Some(result),
                ..
            } => result,
            Mode::Read { uri, .. } => Err(Error::NotFound(format!("no resource at `{uri}`"))),
            Mode::List { .. } => Err(Error::Internal("not a resource read".to_owned())),
        }
    }

    /// Register a resource at a fixed URI and the function that reads it.
    pub fn add<R: IntoResourceContents>(
        &mut self,
        resource: ResourceInfo,
        read: impl FnOnce() -> R,
    ) -> &mut Self {
        match &mut self.mode {
            Mode::List { resources, .. } => resources.push(resource),
            Mode::Read { uri, result } => {
                if result.is_none() && *uri == resource.uri {
                    *result =
                        Some(read().into_resource_contents(uri, resource.mime_type.as_deref()));
                }
            }
        }
        self
    }

    /// Register a resource template such as `quote://{id}` and the function that reads a URI
    /// matching it. The function takes the template's variables as one type `A` (a struct
    /// with `String` fields named after them).
    pub fn template<A, R>(
        &mut self,
        template: ResourceTemplate,
        read: impl FnOnce(A) -> R,
    ) -> &mut Self
    where
        A: DeserializeOwned,
        R: IntoResourceContents,
    {
        match &mut self.mode {
            Mode::List { templates, .. } => templates.push(template),
            Mode::Read { uri, result } => {
                if result.is_some() {
                    return self;
                }
                let Some(vars) = match_uri(&template.uri_template, uri) else {
                    return self;
                };
                let object: Map<String, Value> = vars
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect();
                *result = Some(match serde_json::from_value::<A>(Value::Object(object)) {
                    Ok(args) => {
                        read(args).into_resource_contents(uri, template.mime_type.as_deref())
                    }
                    Err(e) => Err(Error::InvalidParams(format!("invalid URI `{uri}`: {e}"))),
                });
            }
        }
        self
    }
}

impl ResourceInfo {
    /// A resource at `uri`, named `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
        }
    }

    /// A human-readable name for display.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the resource holds.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The MIME type of its contents.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Its size in bytes.
    pub fn size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }
}

impl ResourceTemplate {
    /// A template such as `quote://{id}`, named `name`.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        }
    }

    /// A human-readable name for display.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the resources hold.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// The MIME type of their contents.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// Binary resource contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob(pub Vec<u8>);

/// What a resource function may return.
///
/// Implemented for `String` and `&str` (text), [`Blob`] (binary), [`ResourceContents`],
/// `Vec<ResourceContents>`, `Option<T>` (`None`: the resource does not exist) and
/// `Result<T, E>` (`Err`: the read failed, with `E`'s text).
pub trait IntoResourceContents {
    /// Convert into the contents of the resource at `uri`.
    fn into_resource_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, Error>;
}

impl IntoResourceContents for String {
    fn into_resource_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, Error> {
        Ok(vec![ResourceContents::text(uri, mime_type, self)])
    }
}

impl IntoResourceContents for &str {
    fn into_resource_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, Error> {
        Ok(vec![ResourceContents::text(uri, mime_type, self)])
    }
}

impl IntoResourceContents for Blob {
    fn into_resource_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, Error> {
        Ok(vec![ResourceContents::blob(uri, mime_type, self.0)])
    }
}

impl IntoResourceContents for ResourceContents {
    fn into_resource_contents(
        self,
        _: &str,
        _: Option<&str>,
    ) -> Result<Vec<ResourceContents>, Error> {
        Ok(vec![self])
    }
}

impl IntoResourceContents for Vec<ResourceContents> {
    fn into_resource_contents(
        self,
        _: &str,
        _: Option<&str>,
    ) -> Result<Vec<ResourceContents>, Error> {
        Ok(self)
    }
}

impl<T: IntoResourceContents> IntoResourceContents for Option<T> {
    fn into_resource_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, Error> {
        match self {
            Some(contents) => contents.into_resource_contents(uri, mime_type),
            None => Err(Error::NotFound(format!("no resource at `{uri}`"))),
        }
    }
}

impl<T: IntoResourceContents, E: Display> IntoResourceContents for Result<T, E> {
    fn into_resource_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, Error> {
        self.map_err(|e| Error::Internal(e.to_string()))?
            .into_resource_contents(uri, mime_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_become_contents_at_the_uri_read() {
        let [ResourceContents::Text(text)] = &"hello"
            .into_resource_contents("memo://a", Some("text/plain"))
            .unwrap()[..]
        else {
            panic!("not one text")
        };
        assert_eq!(
            (
                text.uri.as_str(),
                text.mime_type.as_deref(),
                text.text.as_str()
            ),
            ("memo://a", Some("text/plain"), "hello")
        );
        let [ResourceContents::Blob(blob)] = &Blob(vec![7])
            .into_resource_contents("memo://b", None)
            .unwrap()[..]
        else {
            panic!("not one blob")
        };
        assert_eq!(
            (blob.uri.as_str(), &blob.blob[..]),
            ("memo://b", &[7u8][..])
        );
    }

    #[test]
    fn none_is_not_found_and_err_is_a_failed_read() {
        let missing: Option<String> = None;
        let Err(Error::NotFound(why)) = missing.into_resource_contents("memo://gone", None) else {
            panic!("None must be not found")
        };
        assert_eq!(why, "no resource at `memo://gone`");
        let failed: Result<String, String> = Err("disk on fire".to_owned());
        let Err(Error::Internal(why)) = failed.into_resource_contents("memo://x", None) else {
            panic!("Err must fail the read")
        };
        assert_eq!(why, "disk on fire");
        let found: Option<Result<&str, String>> = Some(Ok("here"));
        assert_eq!(
            found
                .into_resource_contents("memo://y", None)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn builders_set_what_they_name() {
        let info = ResourceInfo::new("memo://a", "a")
            .title("A")
            .description("the first")
            .mime_type("text/plain")
            .size(12);
        assert_eq!(
            (
                info.uri.as_str(),
                info.name.as_str(),
                info.title.as_deref(),
                info.description.as_deref(),
                info.mime_type.as_deref(),
                info.size
            ),
            (
                "memo://a",
                "a",
                Some("A"),
                Some("the first"),
                Some("text/plain"),
                Some(12)
            )
        );
        let template = ResourceTemplate::new("memo://{id}", "memo")
            .title("Memo")
            .mime_type("text/markdown");
        assert_eq!(template.uri_template, "memo://{id}");
        assert_eq!(template.mime_type.as_deref(), Some("text/markdown"));
    }
}
