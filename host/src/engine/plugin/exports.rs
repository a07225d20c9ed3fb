//! Which plugin interfaces a component exports, 0.1's four or 0.3's, looked up once at load:
//! a component exporting the `mcpbox:plugin@0.3.0` interfaces is a WASI 0.3 plugin.

use wasmtime::component::InstancePre;

use super::p3;
use crate::engine::bindings::exports::mcpbox::plugin::{completion, prompts, resources, tools};
use crate::engine::state::StoreData;

/// Which plugin interfaces a component exports.
#[derive(Clone)]
pub struct Exports {
    pub(super) tools: Option<tools::GuestIndices>,
    pub(super) prompts: Option<prompts::GuestIndices>,
    pub(super) resources: Option<resources::GuestIndices>,
    pub(super) completion: Option<completion::GuestIndices>,
    /// The `mcpbox:plugin@0.3.0` interfaces, for a WASI 0.3 component (then the four above
    /// are none).
    pub(super) v3: Option<p3::Exports3>,
}

impl Exports {
    /// What the component behind `pre` exports, looked up once at load.
    pub(super) fn of(pre: &InstancePre<StoreData>) -> Self {
        Self {
            tools: tools::GuestIndices::new(pre).ok(),
            prompts: prompts::GuestIndices::new(pre).ok(),
            resources: resources::GuestIndices::new(pre).ok(),
            completion: completion::GuestIndices::new(pre).ok(),
            v3: p3::Exports3::of(pre),
        }
    }

    /// Whether the plugin is a WASI 0.3 component (`mcpbox:plugin@0.3.0`).
    pub fn is_v3(&self) -> bool {
        self.v3.is_some()
    }

    /// Whether the plugin exports `tools`.
    pub fn tools(&self) -> bool {
        self.tools.is_some() || self.v3.as_ref().is_some_and(|v3| v3.tools.is_some())
    }

    /// Whether the plugin exports `prompts`.
    pub fn prompts(&self) -> bool {
        self.prompts.is_some() || self.v3.as_ref().is_some_and(|v3| v3.prompts.is_some())
    }

    /// Whether the plugin exports `resources`.
    pub fn resources(&self) -> bool {
        self.resources.is_some() || self.v3.as_ref().is_some_and(|v3| v3.resources.is_some())
    }

    /// Whether the plugin exports `completion`.
    pub fn completion(&self) -> bool {
        self.completion.is_some() || self.v3.as_ref().is_some_and(|v3| v3.completion.is_some())
    }
}
