//! Write mcpbox plugins in Rust.
//!
//! A plugin is a `wasm32-wasip2` component that gives an MCP host tools, prompts and resources.
//! This crate owns the plugin side of the `mcpbox:plugin@0.1.0` WIT contract (in the world
//! `mcpbox:plugin-state/plugin@0.1.0`, which adds the optional `wasi:keyvalue` imports behind
//! [`state`]): it generates the bindings, exports all four interfaces for you, and turns plain Rust functions into MCP
//! tools, prompts and resources:
//!
//! - a **tool** is one function taking a typed arguments struct. The struct derives
//!   [`Deserialize`] and [`JsonSchema`]; its JSON Schema (doc comments become descriptions)
//!   is what the client sees as `inputSchema`. Return a `String`, a [`ToolResult`], a
//!   [`Json`] value (structured content with a derived `outputSchema`), or a `Result` of any of
//!   them: an `Err` becomes a result with `isError: true` that the model can read;
//! - a **prompt** is one function taking a struct of `String` (or `Option<String>`) fields,
//!   which become the prompt's arguments, and returning its messages;
//! - a **resource** is one function returning its contents; a **resource template** such as
//!   `quote://{id}` is one function taking a struct of the template's variables;
//! - a **completion** is one function from the typed prefix to candidate values.
//!
//! Everything is optional: a plugin that provides no prompts simply has none.
//!
//! # Example
//!
//! A complete plugin (the whole `src/lib.rs` of a `cdylib` crate):
//!
//! ```
//! use mcpbox_sdk::{Deserialize, Json, JsonSchema, Serialize};
//! use mcpbox_sdk::{Plugin, Prompt, PromptMessage, Prompts, ResourceInfo, Resources, Tool, Tools};
//!
//! /// Arguments of `add`.
//! #[derive(Deserialize, JsonSchema)]
//! struct AddArgs {
//!     /// The first addend.
//!     a: f64,
//!     /// The second addend.
//!     b: f64,
//! }
//!
//! /// The structured result of `add`.
//! #[derive(Serialize, JsonSchema)]
//! struct Sum {
//!     sum: f64,
//! }
//!
//! fn add(args: AddArgs) -> Json<Sum> {
//!     Json(Sum { sum: args.a + args.b })
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct DivideArgs {
//!     dividend: f64,
//!     divisor: f64,
//! }
//!
//! // An `Err` reaches the model as a tool result with `isError: true`.
//! fn divide(args: DivideArgs) -> Result<String, String> {
//!     if args.divisor == 0.0 {
//!         return Err("cannot divide by zero".to_owned());
//!     }
//!     Ok((args.dividend / args.divisor).to_string())
//! }
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct GreetArgs {
//!     /// Whom to greet.
//!     name: String,
//! }
//!
//! struct Demo;
//!
//! impl Plugin for Demo {
//!     fn tools(tools: &mut Tools) {
//!         tools.add(Tool::new("add", "Add two numbers").read_only(true), add);
//!         tools.add(Tool::new("divide", "Divide one number by another"), divide);
//!     }
//!
//!     fn prompts(prompts: &mut Prompts) {
//!         prompts.add(Prompt::new("greet", "Greet someone"), |args: GreetArgs| {
//!             vec![PromptMessage::user(format!("Say hello to {}.", args.name))]
//!         });
//!     }
//!
//!     fn resources(resources: &mut Resources) {
//!         let motd = ResourceInfo::new("demo://motd", "motd").mime_type("text/plain");
//!         resources.add(motd, || "Have a nice day.");
//!     }
//! }
//!
//! mcpbox_sdk::export!(Demo);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (after `rustup target add
//! wasm32-wasip2`) and put the `.wasm` file in mcpbox's plugin directory.
//!
//! # Host services
//!
//! While it handles a call, a plugin can log, report progress, check for cancellation and ask
//! the client for input through the functions in [`host`]. With the `http` feature, `http`
//! sends requests to the hosts the operator granted. [`state`] keeps data between calls (a
//! key-value store the operator grants and bounds in the manifest; a caller bucket keeps each
//! user's data apart). [`caller()`] says who is calling, and [`config`] reads the
//! configuration and secrets the operator gives the plugin.

#[doc(hidden)]
#[allow(missing_docs, reason = "generated from the WIT contract")]
pub mod bindings {
    wit_bindgen::generate!({
        // The multi-user world (`wit/deps/multi-user`): the plugin contract plus the optional
        // `wasi:keyvalue`, `caller` and `wasi:config` imports. A plugin imports only what it
        // calls, so one that never touches `state`, `caller()` or `config` imports none of
        // them, and loads on hosts that predate them.
        world: "mcpbox:multi-user/plugin@0.1.0",
        // The crate's own copy of the repository's `wit/` (made by `vendor-wit.sh`, checked by
        // `tests/wit.rs`), so that the crate builds when packaged on its own.
        path: "wit",
        generate_all,
        pub_export_macro: true,
        export_macro_name: "export_bindings",
        default_bindings_module: "mcpbox_sdk::bindings",
    });
}

mod adapter;
mod caller;
mod completion;
pub mod config;
mod content;
pub mod host;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "p3")]
pub mod p3;
mod prompts;
mod resources;
pub mod state;
mod tools;
mod uri_template;

#[doc(hidden)]
pub use adapter::Adapter;
pub use bindings::mcpbox::plugin::types::{
    BlobContents, CompletionResult, Content, Error, ListKind, LogLevel, Media, Prompt,
    PromptArgument, PromptMessage, ResourceContents, ResourceInfo, ResourceTemplate, Role,
    TextContents, Tool, ToolAnnotations, ToolResult,
};
pub use caller::{Caller, CallerKind, caller};
pub use completion::Completions;
pub use content::{IntoToolResult, Json};
/// Ship Agent Skills with the plugin: `mcpbox_sdk::skills!("skills");` packs every skill
/// under `skills/` (relative to `Cargo.toml`; each a directory holding a `SKILL.md`) into the
/// component, and mcpbox serves them (`skills/list`, `skills/get`, `skill://` resources).
pub use mcpbox_sdk_macros::skills;
pub use prompts::{IntoPromptMessages, Prompts};
pub use resources::{Blob, IntoResourceContents, Resources};
pub use schemars::{self, JsonSchema};
pub use serde::{self, Deserialize, Serialize};
pub use serde_json;
pub use tools::{NoArgs, Tools};

/// A plugin: what it offers, declared by registering functions.
///
/// Every method has an empty default, so implement only what the plugin provides. The host
/// calls each method in a fresh instance of the plugin, both to list what it offers (once, at
/// load) and to run a call, so registration must be cheap and must not depend on state kept
/// between calls.
pub trait Plugin: 'static {
    /// Register the plugin's tools.
    fn tools(_tools: &mut Tools) {}

    /// Register the plugin's prompts.
    fn prompts(_prompts: &mut Prompts) {}

    /// Register the plugin's resources and resource templates.
    fn resources(_resources: &mut Resources) {}

    /// Register argument completions for prompts and resource templates.
    fn completions(_completions: &mut Completions) {}
}

/// Export a [`Plugin`] implementation as the component's entry points.
///
/// Use it once, at the top level of the plugin crate: `mcpbox_sdk::export!(MyPlugin);`.
#[macro_export]
macro_rules! export {
    ($plugin:ty) => {
        #[doc(hidden)]
        type __McpboxSdkExport = $crate::Adapter<$plugin>;
        $crate::bindings::export_bindings!(__McpboxSdkExport with_types_in $crate::bindings);
    };
}

/// The README's Rust example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeExamples;
