//! [`PluginName`]: the name a plugin is known by (its file name without `.wasm`), which keys its
//! state, its grants, its metrics and its log lines. A newtype, so that a plugin's name is never
//! confused with the names of what it offers; cheap to clone (shared, immutable).

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// The name a plugin is known by.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PluginName(Arc<str>);

impl PluginName {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for PluginName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for PluginName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for PluginName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for PluginName {
    fn from(name: &str) -> Self {
        Self(Arc::from(name))
    }
}

impl From<String> for PluginName {
    fn from(name: String) -> Self {
        Self(Arc::from(name))
    }
}

impl fmt::Display for PluginName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for PluginName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}
