//! Host-side bindings generated from `wit/plugin.wit` (world `mcpbox:plugin/plugin@0.1.0`):
//! the `host` interface a plugin imports and the four it may export.
//!
//! Generated code lives in modules of its own, never beside hand-written code: this one for
//! the plugin world, [`keyvalue`](super::keyvalue)'s `bindings` for `wasi:keyvalue`, and a
//! `bindings` module inside [`caller`](super::caller) for `mcpbox:multi-user/caller`
//! (`wasi:config` comes generated with the crate `wasmtime-wasi-config`). Imports and exports
//! are async: exports so calls can be interrupted and yield to tokio, imports so that host
//! functions that wait on the client (sampling, elicitation) do not block a thread.

#![allow(
    missing_docs,
    reason = "generated from the WIT contract, which carries the docs"
)]

wasmtime::component::bindgen!({
    world: "plugin",
    path: "../wit",
    imports: { default: async },
    exports: { default: async },
});
