//! Plugins as WASI 0.3 components (`mcpbox:plugin@0.3.0`, the `p3` feature): tools are
//! `async fn`s that may await host calls concurrently (HTTP through [`http`], the client
//! through [`host`]) and stream their output as they go ([`Output`]).
//!
//! The sync API ([`crate::Plugin`], [`crate::export!`]) stays for 0.2 plugins; a crate exports
//! one or the other. Prompts, resources and completions are registered as in 0.2 (with
//! [`crate::Prompts`], [`crate::Resources`], [`crate::Completions`]) and run inside the 0.3
//! world's async exports; state ([`crate::state`]), the caller ([`crate::caller()`]) and
//! configuration ([`crate::config`]) work unchanged.
//!
//! # Example
//!
//! ```
//! use mcpbox_sdk::p3::{Output, Plugin, Tools};
//! use mcpbox_sdk::{Deserialize, JsonSchema, Tool};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct CountArgs {
//!     /// How far to count.
//!     to: u32,
//! }
//!
//! /// Streams each number as it goes; the result holds them all.
//! async fn count(args: CountArgs, mut out: Output) -> Result<String, String> {
//!     for n in 1..=args.to {
//!         out.text(n.to_string()).await.map_err(|_| "cancelled")?;
//!     }
//!     Ok(format!("counted to {}", args.to))
//! }
//!
//! struct Counter;
//!
//! impl Plugin for Counter {
//!     fn tools(tools: &mut Tools) {
//!         tools.add(Tool::new("count", "Count, streaming each number"), count);
//!     }
//! }
//!
//! mcpbox_sdk::p3::export!(Counter);
//! ```
//!
//! Build it as a 0.2 plugin is built (`cargo build --release --target wasm32-wasip2`): the
//! component model's async ABI needs nothing more than wit-bindgen 0.63.

#[doc(hidden)]
#[allow(missing_docs, reason = "generated from the WIT contract")]
pub mod bindings {
    wit_bindgen::generate!({
        // `wit/0.3/`: the 0.3 contract with everything the host links (HTTP, state,
        // configuration). `types` and the `wasi:keyvalue` and `wasi:config` interfaces are the
        // 0.1 bindings' own, so the crate's types and its `state` and `config` modules serve
        // both versions.
        world: "mcpbox:plugin/plugin-full@0.3.0",
        path: "wit/0.3",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "mcpbox_sdk::p3::bindings",
        with: {
            "mcpbox:plugin/types@0.3.0": crate::bindings::mcpbox::plugin::types,
            "wasi:keyvalue/store@0.2.0-draft2": crate::bindings::wasi::keyvalue::store,
            "wasi:keyvalue/atomics@0.2.0-draft2": crate::bindings::wasi::keyvalue::atomics,
            "wasi:keyvalue/batch@0.2.0-draft2": crate::bindings::wasi::keyvalue::batch,
            "wasi:config/store@0.2.0-rc.1": crate::bindings::wasi::config::store,
        },
    });
}

mod adapter;
pub mod host;
pub mod http;
mod tools;

#[doc(hidden)]
pub use adapter::Adapter;
pub use tools::{Cancelled, Output, Tools};
/// Spawn a future on the plugin's executor: it runs beside the call (and may outlive its
/// answer until it ends).
pub use wit_bindgen::spawn_local as spawn;

/// A WASI 0.3 plugin: its tools are `async fn`s; its prompts, resources and completions are
/// registered as a 0.2 plugin's are.
///
/// Every method has an empty default, so implement only what the plugin provides.
pub trait Plugin: 'static {
    /// Register the plugin's tools.
    fn tools(_tools: &mut Tools) {}

    /// Register the plugin's prompts.
    fn prompts(_prompts: &mut crate::Prompts) {}

    /// Register the plugin's resources and resource templates.
    fn resources(_resources: &mut crate::Resources) {}

    /// Register argument completions for prompts and resource templates.
    fn completions(_completions: &mut crate::Completions) {}
}

/// Export a [`p3::Plugin`](Plugin) implementation as the component's entry points (the
/// `mcpbox:plugin@0.3.0` world). Use it once, at the top level of the plugin crate:
/// `mcpbox_sdk::p3::export!(MyPlugin);`.
#[macro_export]
#[doc(hidden)]
macro_rules! __export_p3 {
    ($plugin:ty) => {
        #[doc(hidden)]
        type __McpboxSdkExportP3 = $crate::p3::Adapter<$plugin>;
        $crate::p3::bindings::export_bindings!(__McpboxSdkExportP3 with_types_in $crate::p3::bindings);
    };
}

#[doc(inline)]
pub use crate::__export_p3 as export;

/// Who is calling now (the 0.3 world's `caller`; see [`crate::caller()`] for 0.2 plugins).
/// None while the host reads the plugin's lists.
pub fn caller() -> Option<crate::Caller> {
    use bindings::mcpbox::plugin::caller as v3;
    v3::current().map(|p| crate::Caller {
        id: p.id,
        kind: match p.kind {
            v3::CallerKind::Local => crate::CallerKind::Local,
            v3::CallerKind::Token => crate::CallerKind::Token,
            v3::CallerKind::Oauth => crate::CallerKind::Oauth,
        },
        name: p.name,
        scopes: p.scopes,
        all_scopes: p.all_scopes,
    })
}
