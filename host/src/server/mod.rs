//! One MCP session: the lifecycle (initialize, initialized), dispatch of each method to the
//! [`Backend`], and the rules for which request gets which error.
//!
//! Depends on `protocol` only. It defines the interface it dispatches to ([`Backend`]) so it
//! knows nothing of plugins, wasmtime or files; and it knows nothing of byte framing, so the
//! same session serves stdio and, later, HTTP.

mod context;
mod session;

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::protocol::ErrorObject;
use crate::protocol::mcp::CompleteParams;

pub use context::{ClientRequest, Outbound, RequestContext};
pub use session::Session;

/// Which kinds of things the backend offers; the session advertises the matching
/// capabilities at `initialize`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offers {
    /// Tools (`tools/list`, `tools/call`).
    pub tools: bool,
    /// Prompts (`prompts/list`, `prompts/get`).
    pub prompts: bool,
    /// Resources (`resources/list`, `resources/read`, `resources/templates/list`).
    pub resources: bool,
    /// Argument completion (`completion/complete`).
    pub completions: bool,
}

/// The paginated lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `tools/list`.
    Tools,
    /// `prompts/list`.
    Prompts,
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    ResourceTemplates,
}

/// What a method handler produces: a result as JSON text, or the JSON-RPC error to send.
pub type MethodResult = Result<Box<RawValue>, ErrorObject>;

/// What the session dispatches to: the merged catalog of everything the plugins offer.
///
/// Each method returns the complete MCP `result` object as JSON text, so the backend may keep
/// pre-serialised pages and pass plugin JSON (schemas, structured content) through untouched.
pub trait Backend: Send + Sync + 'static {
    /// What the backend offers.
    fn offers(&self) -> Offers;

    /// One page of a list: `cursor` is the previous page's `nextCursor`. An unknown cursor is
    /// -32602.
    fn list(&self, kind: ListKind, cursor: Option<&str>) -> MethodResult;

    /// `tools/call`. `arguments` is a JSON object. `ctx` reaches the client while it runs.
    fn call_tool(
        &self,
        name: &str,
        arguments: &RawValue,
        ctx: RequestContext,
    ) -> impl Future<Output = MethodResult> + Send;

    /// `prompts/get`.
    fn get_prompt(
        &self,
        name: &str,
        arguments: BTreeMap<String, String>,
        ctx: RequestContext,
    ) -> impl Future<Output = MethodResult> + Send;

    /// `resources/read`.
    fn read_resource(
        &self,
        uri: &str,
        ctx: RequestContext,
    ) -> impl Future<Output = MethodResult> + Send;

    /// `completion/complete`.
    fn complete(
        &self,
        params: CompleteParams,
        ctx: RequestContext,
    ) -> impl Future<Output = MethodResult> + Send;
}
