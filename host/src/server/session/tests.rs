//! The loop's promise about a request's target: the checks it makes before a request runs
//! (the caller's scopes) and the run itself see one version of what the backend serves, even
//! when the backend reloads in between.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::Value;
use serde_json::value::RawValue;

use super::{Mode, Session};
use crate::principal::{Principal, Scopes};
use crate::protocol::ErrorObject;
use crate::protocol::jsonrpc::decode;
use crate::protocol::mcp::CompleteParams;
use crate::server::{
    Backend, ListKind, MethodResult, Offers, RequestContext, ServerEvent, Target,
    insufficient_scope,
};

/// A backend whose one tool, `t`, is open to every caller in version 1 and requires the scope
/// `admin` from version 2 on (a reload changed the plugin's scopes). It checks the scopes
/// again where it runs the call, as the catalog does, and says which version ran it.
#[derive(Default)]
struct Reloading {
    /// 0 stands for version 1.
    reloads: AtomicU32,
}

impl Reloading {
    fn version(&self) -> u32 {
        self.reloads.load(Ordering::SeqCst) + 1
    }

    fn reload(&self) {
        self.reloads.fetch_add(1, Ordering::SeqCst);
    }

    fn scopes_of(version: u32) -> Vec<String> {
        if version >= 2 {
            vec!["admin".to_owned()]
        } else {
            Vec::new()
        }
    }

    fn run(version: u32, ctx: &RequestContext) -> MethodResult {
        let required = Self::scopes_of(version);
        let missing = ctx.caller().missing(&required);
        if !missing.is_empty() {
            let missing: Vec<String> = missing.into_iter().map(str::to_owned).collect();
            return Err(insufficient_scope(&missing));
        }
        let body = RawValue::from_string(format!(
            r#"{{"content":[],"ranOn":{version},"checkedOn":{version}}}"#
        ))
        .map_err(|e| ErrorObject::internal(e.to_string()))?;
        Ok(body.into())
    }
}

/// What a request resolved to: the version of the moment, and the scopes it required then.
struct Resolved {
    version: u32,
    scopes: Vec<String>,
}

impl Target for Resolved {
    fn required_scopes(&self) -> &[String] {
        &self.scopes
    }
}

impl Backend for Reloading {
    type Target = Resolved;

    fn resolve(&self, _: &crate::protocol::request::ClientRequest) -> Resolved {
        let version = self.version();
        Resolved {
            version,
            scopes: Self::scopes_of(version),
        }
    }

    fn offers(&self) -> Offers {
        Offers {
            tools: true,
            prompts: true,
            resources: true,
            completions: true,
            ..Offers::default()
        }
    }

    fn events(&self) -> Option<tokio::sync::broadcast::Receiver<ServerEvent>> {
        None
    }

    fn list(&self, _: ListKind, _: Option<&str>, _: &Principal) -> MethodResult {
        Err(ErrorObject::invalid_params("nothing listed"))
    }

    async fn call_tool(
        &self,
        target: Resolved,
        _: &str,
        _: &RawValue,
        ctx: RequestContext,
    ) -> MethodResult {
        Self::run(target.version, &ctx)
    }

    async fn get_prompt(
        &self,
        target: Resolved,
        _: &str,
        _: BTreeMap<String, String>,
        ctx: RequestContext,
    ) -> MethodResult {
        Self::run(target.version, &ctx)
    }

    async fn read_resource(&self, target: Resolved, _: &str, ctx: RequestContext) -> MethodResult {
        Self::run(target.version, &ctx)
    }

    async fn complete(
        &self,
        target: Resolved,
        _: CompleteParams,
        ctx: RequestContext,
    ) -> MethodResult {
        Self::run(target.version, &ctx)
    }
}

const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

const PROMPT: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

const READ: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"demo://r","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

const COMPLETE: &[u8] = br#"{"jsonrpc":"2.0","id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":""},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// A caller without the scope `admin`.
fn bob() -> Principal {
    Principal::token("bob", Scopes::Granted(Default::default()))
}

/// Every request a plugin serves (a tool call, a prompt, a resource, a completion) runs on the
/// version its checks were made on.
#[tokio::test]
async fn a_call_runs_on_the_version_its_checks_were_made_on() {
    for request in [CALL, PROMPT, READ, COMPLETE] {
        let backend = Arc::new(Reloading::default());
        let session = Arc::new(Session::new(
            Arc::clone(&backend),
            Mode::V2026,
            Arc::default(),
        ));
        let (outbound, _queue) = tokio::sync::mpsc::channel(8);
        let method = String::from_utf8_lossy(request);
        // Accepted against version 1, where the item requires nothing.
        let pending = session
            .accept(decode(request), None, &outbound, &bob())
            .await
            .expect("a request is work to run");
        assert!(pending.refusal.is_none(), "refused before it ran: {method}");
        // A reload between the check and the run: the item now requires `admin`.
        backend.reload();
        let answer = pending.work.await.expect("an answer");
        let reply: Value = serde_json::from_str(&answer.reply.0).expect("JSON");
        assert_eq!(reply["result"]["ranOn"], 1, "{method}: {reply}");
        assert_eq!(reply["result"]["checkedOn"], 1, "{method}: {reply}");

        // A request accepted after the reload is checked against version 2, and refused.
        let pending = session
            .accept(decode(request), None, &outbound, &bob())
            .await
            .expect("a request is work to run");
        assert_eq!(
            pending.refusal,
            Some(crate::server::Refusal::Forbidden(vec!["admin".to_owned()])),
            "{method}"
        );
    }
}
