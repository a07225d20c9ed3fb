//! Host-side bindings generated from `wit/0.3/plugin.wit` (world
//! `mcpbox:plugin/plugin@0.3.0`): the 0.3 `host` and `caller` interfaces a plugin imports and
//! the four it may export, with the component model's `stream` and `future`.
//!
//! `types` is the released 0.1.0 one, word for word, so its generated Rust types are reused
//! (`with`): a 0.3 plugin's lists, results and errors are the very values the catalog already
//! turns into MCP. Exports are `store` (called through an [`Accessor`](wasmtime::component::Accessor)
//! inside `Store::run_concurrent`); the `async func` imports are too.

#![allow(
    missing_docs,
    reason = "generated from the WIT contract, which carries the docs"
)]

wasmtime::component::bindgen!({
    world: "mcpbox:plugin/plugin@0.3.0",
    path: "../wit/0.3",
    imports: { default: async, "mcpbox:plugin/caller": async | trappable },
    exports: { default: async | store },
    with: {
        "mcpbox:plugin/types@0.3.0": crate::engine::bindings::mcpbox::plugin::types,
    },
});
