//! Host-side bindings generated from `wit/` (world `mcpbox:plugin/plugin@0.1.0`).
//!
//! Generated code lives here alone. Imports and exports are async: exports so calls can be
//! interrupted and yield to tokio, imports so that later host functions (sampling,
//! elicitation) can wait on the client without blocking a thread.

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
