//! Host-side bindings generated from the `wasi:keyvalue` WIT, one module per version.
//!
//! Generated code lives here alone; the traits are implemented in the sibling modules of the
//! same name. Both versions share the host's resource types ([`Bucket`], [`Cas`]), so a handle
//! means the same thing whichever version made it.
//!
//! [`Bucket`]: super::Bucket
//! [`Cas`]: super::Cas

#![allow(
    missing_docs,
    reason = "generated from the wasi:keyvalue WIT, which carries the docs"
)]

/// `wasi:keyvalue@0.2.0-draft2` (store, atomics, batch), from `wit/deps/keyvalue`.
pub mod v0_2_0_draft2 {
    wasmtime::component::bindgen!({
        world: "wasi:keyvalue/imports@0.2.0-draft2",
        path: "../wit/deps/keyvalue",
        imports: { default: async },
        with: {
            "wasi:keyvalue/store.bucket": crate::engine::keyvalue::Bucket,
            "wasi:keyvalue/atomics.cas": crate::engine::keyvalue::Cas,
        },
    });
}

/// `wasi:keyvalue@0.2.0-draft`, the earlier draft, from `host/wit/keyvalue-draft`.
pub mod v0_2_0_draft {
    wasmtime::component::bindgen!({
        world: "wasi:keyvalue/imports@0.2.0-draft",
        path: "wit/keyvalue-draft",
        imports: { default: async },
        with: {
            "wasi:keyvalue/store.bucket": crate::engine::keyvalue::Bucket,
        },
    });
}
