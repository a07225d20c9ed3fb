//! Tests of linking a caller's account through the client: the elicitation, the wait for the
//! callback, and the refusals.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::*;
use crate::catalog::EventHub;
use crate::catalog::bridge::ClientBridge;
use crate::catalog::convert::error_result;
use crate::principal::{Principal, Scopes};
use crate::protocol::jsonrpc::{Reply, decode};
use crate::protocol::mcp::CompleteParams;
use crate::server::{Backend, ListKind, MethodOutput, Mode, Offers, ServerEvent, Session};

const URL: &str = "https://mcp.test/oauth/link/start?ticket=T1";

/// A linker with one provider, `github`, whose caller links when the test says the user
/// opened the URL (`opened`), or whose link fails (`fails`).
#[derive(Debug, Default)]
struct FakeLinker {
    opened: AtomicBool,
    fails: AtomicBool,
    begun: AtomicUsize,
    unlinked: Mutex<Vec<(String, String)>>,
}

impl Linker for FakeLinker {
    fn begin_link<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
        plugin: Option<&'a str>,
    ) -> Fut<'a, Result<LinkPrompt, String>> {
        assert_eq!((caller_key, plugin), ("token:alice", Some("github")));
        self.begun.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Ok(LinkPrompt {
                provider: provider.to_owned(),
                elicitation_id: "el-1".to_owned(),
                url: URL.to_owned(),
                message: "Link your GitHub account to use github's tools".to_owned(),
            })
        })
    }
    fn wait_linked<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a LinkPrompt,
        deadline: tokio::time::Instant,
    ) -> Fut<'a, WaitOutcome> {
        Box::pin(async move {
            loop {
                if self.fails.load(Ordering::SeqCst) {
                    return WaitOutcome::Failed("denied at the provider".to_owned());
                }
                if self.opened.load(Ordering::SeqCst) {
                    return WaitOutcome::Linked;
                }
                if tokio::time::Instant::now() >= deadline {
                    return WaitOutcome::Pending;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    }
    fn links_of<'a>(&'a self, caller_key: &'a str) -> Fut<'a, Result<Vec<LinkSummary>, String>> {
        Box::pin(async move {
            Ok(if caller_key == "token:alice" {
                vec![LinkSummary {
                    provider: "github".to_owned(),
                    display_name: "GitHub".to_owned(),
                    linked_at_ms: 1_800_000_000_000,
                    expires_at_ms: None,
                    scopes: Vec::new(),
                    refreshable: true,
                }]
            } else {
                Vec::new()
            })
        })
    }
    fn unlink<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
    ) -> Fut<'a, Result<bool, String>> {
        self.unlinked
            .lock()
            .unwrap()
            .push((caller_key.to_owned(), provider.to_owned()));
        Box::pin(async { Ok(true) })
    }
    fn display_name(&self, provider: &str) -> Option<String> {
        (provider == "github").then(|| "GitHub".to_owned())
    }
}

/// A backend whose one tool acts as the caller on GitHub: while the user has not opened
/// the link, its request is answered 401 by the host (the gate tells the call's reach that
/// a link is needed) and it answers that itself; once they have, it succeeds.
struct GitHubTool {
    linking: Option<Linking>,
    linker: Arc<FakeLinker>,
    runs: AtomicUsize,
    hub: EventHub,
}

impl GitHubTool {
    fn new(wait: Duration) -> Arc<Self> {
        let linker = Arc::new(FakeLinker::default());
        Arc::new(Self {
            linking: Some(Linking::new(Arc::clone(&linker) as Arc<dyn Linker>, wait)),
            linker,
            runs: AtomicUsize::new(0),
            hub: EventHub::new().0,
        })
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

impl Backend for GitHubTool {
    fn offers(&self) -> Offers {
        Offers {
            tools: true,
            prompts: true,
            ..Offers::default()
        }
    }

    fn events(&self) -> Option<tokio::sync::broadcast::Receiver<ServerEvent>> {
        None
    }

    fn list(&self, _: ListKind, _: Option<&str>, _: &Principal) -> MethodResult {
        Err(crate::protocol::ErrorObject::new(-32601, "nothing listed"))
    }

    type Target = ();

    fn resolve(&self, _: &crate::protocol::request::ClientRequest) {}

    async fn call_tool(&self, (): (), _: &str, _: &RawValue, ctx: RequestContext) -> MethodResult {
        let run = |slot: LinkSlot| {
            let reach =
                ClientBridge::named("github".into(), false, ctx.clone(), self.hub.clone(), slot);
            async move {
                self.runs.fetch_add(1, Ordering::SeqCst);
                if self.linker.opened.load(Ordering::SeqCst) {
                    return to_output(
                        &json!({"content": [{"type": "text", "text": "issues of alice"}]}),
                    );
                }
                reach.credential_needed("github");
                error_result("Link your GitHub account to use this tool.")
            }
        };
        run_linking(self.linking.as_ref(), &ctx, "github", Request::Tool, run).await
    }

    async fn get_prompt(
        &self,
        _: (),
        _: &str,
        _: BTreeMap<String, String>,
        ctx: RequestContext,
    ) -> MethodResult {
        let links = LinkSlot::default();
        let reach = ClientBridge::named(
            "github".into(),
            false,
            ctx.clone(),
            self.hub.clone(),
            links.clone(),
        );
        reach.credential_needed("github");
        let outcome = to_output(&json!({"messages": []}));
        let linking = self.linking.as_ref();
        or_link_required(linking, &links, &ctx, "github", Request::Prompt, outcome).await
    }

    async fn read_resource(&self, _: (), _: &str, _: RequestContext) -> MethodResult {
        Err(crate::protocol::ErrorObject::new(-32601, "no resources"))
    }

    async fn complete(&self, _: (), _: CompleteParams, _: RequestContext) -> MethodResult {
        Err(crate::protocol::ErrorObject::new(-32601, "no completions"))
    }
}

fn to_output(value: &Value) -> MethodResult {
    Ok(MethodOutput::from(
        serde_json::value::to_raw_value(value).unwrap(),
    ))
}

fn alice() -> Principal {
    Principal::token("alice", Scopes::All)
}

/// A client driving a session: what it sends, and what the server sent it.
struct Client {
    session: Arc<Session<GitHubTool>>,
    outbound: mpsc::Sender<Reply>,
    sent: mpsc::Receiver<Reply>,
}

impl Client {
    fn new(backend: Arc<GitHubTool>) -> Self {
        let (outbound, sent) = mpsc::channel(64);
        Self {
            session: Arc::new(Session::new(backend, Mode::Dual, Arc::default())),
            outbound,
            sent,
        }
    }

    /// Send `line`; the work it started, if a request.
    async fn send(&self, line: &str) -> Option<tokio::task::JoinHandle<Value>> {
        let pending = self
            .session
            .accept(decode(line.as_bytes()), None, &self.outbound, &alice())
            .await?;
        Some(tokio::spawn(async move {
            let answer = pending.work.await.expect("an answer");
            serde_json::from_str(&answer.reply.0).unwrap()
        }))
    }

    /// A 2025-11-25 session whose client declared `capabilities`.
    async fn initialized(backend: Arc<GitHubTool>, capabilities: Value) -> Self {
        let client = Self::new(backend);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "t", "version": "1"}}});
        let answer = client.send(&init.to_string()).await.unwrap().await.unwrap();
        assert_eq!(
            answer["result"]["protocolVersion"], "2025-11-25",
            "{answer}"
        );
        assert!(
            client
                .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .await
                .is_none()
        );
        client
    }

    /// The next message the server sent.
    async fn next(&mut self) -> Value {
        let reply = tokio::time::timeout(Duration::from_secs(5), self.sent.recv())
            .await
            .expect("a message within 5 s")
            .expect("the session is open");
        serde_json::from_str(&reply.0).unwrap()
    }
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_issues","arguments":{}}}"#;

async fn within(work: tokio::task::JoinHandle<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(5), work)
        .await
        .expect("answered within 5 s")
        .unwrap()
}

#[tokio::test]
async fn a_2025_client_is_asked_to_open_the_link_and_the_call_runs_again_once_linked() {
    let backend = GitHubTool::new(Duration::from_secs(30));
    let mut client =
        Client::initialized(Arc::clone(&backend), json!({"elicitation": {"url": {}}})).await;
    let work = client.send(CALL).await.unwrap();
    let asked = client.next().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(
        asked["params"],
        json!({"mode": "url", "url": URL, "elicitationId": "el-1",
                   "message": "Link your GitHub account to use github's tools"})
    );
    // The user accepts, then finishes at the provider while the call waits.
    let id = asked["id"].clone();
    client
        .send(&json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept"}}).to_string())
        .await;
    backend.linker.opened.store(true, Ordering::SeqCst);
    let complete = client.next().await;
    assert_eq!(
        complete,
        json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                   "params": {"elicitationId": "el-1"}})
    );
    let answer = within(work).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "issues of alice",
        "{answer}"
    );
    assert_eq!(backend.runs(), 2, "run once more after linking");
}

#[tokio::test]
async fn declining_or_cancelling_returns_the_plugins_own_answer() {
    for action in ["decline", "cancel"] {
        let backend = GitHubTool::new(Duration::from_secs(30));
        let mut client =
            Client::initialized(Arc::clone(&backend), json!({"elicitation": {"url": {}}})).await;
        let work = client.send(CALL).await.unwrap();
        let asked = client.next().await;
        let id = asked["id"].clone();
        client
            .send(&json!({"jsonrpc": "2.0", "id": id, "result": {"action": action}}).to_string())
            .await;
        let answer = within(work).await;
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        assert_eq!(
            answer["result"]["content"][0]["text"],
            "Link your GitHub account to use this tool."
        );
        assert_eq!(backend.runs(), 1, "{action}: not run again");
    }
}

#[tokio::test]
async fn no_wait_or_a_wait_that_runs_out_is_32042_with_the_link() {
    // A link-wait of 0: -32042 at once, nothing asked.
    let backend = GitHubTool::new(Duration::ZERO);
    let mut client =
        Client::initialized(Arc::clone(&backend), json!({"elicitation": {"url": {}}})).await;
    let answer = within(client.send(CALL).await.unwrap()).await;
    let expected = json!({"code": -32042,
            "message": "This request needs your GitHub account: open the URL to link it, then retry",
            "data": {"elicitations": [{"mode": "url", "elicitationId": "el-1", "url": URL,
                "message": "Link your GitHub account to use github's tools"}]}});
    assert_eq!(answer["error"], expected, "{answer}");
    assert!(client.sent.try_recv().is_err(), "nothing was asked");

    // Accepted, but the user does not finish within the wait.
    let backend = GitHubTool::new(Duration::from_millis(50));
    let mut client =
        Client::initialized(Arc::clone(&backend), json!({"elicitation": {"url": {}}})).await;
    let work = client.send(CALL).await.unwrap();
    let id = client.next().await["id"].clone();
    client
        .send(&json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept"}}).to_string())
        .await;
    let answer = within(work).await;
    assert_eq!(answer["error"], expected, "{answer}");
    assert_eq!(backend.runs(), 1);

    // Accepted, and the link failed at the provider.
    let backend = GitHubTool::new(Duration::from_secs(30));
    backend.linker.fails.store(true, Ordering::SeqCst);
    let mut client =
        Client::initialized(Arc::clone(&backend), json!({"elicitation": {"url": {}}})).await;
    let work = client.send(CALL).await.unwrap();
    let id = client.next().await["id"].clone();
    client
        .send(&json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept"}}).to_string())
        .await;
    let answer = within(work).await;
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "could not link your GitHub account: denied at the provider",
        "{answer}"
    );
}

#[tokio::test]
async fn a_client_that_cannot_open_urls_gets_the_url_in_the_result() {
    for capabilities in [json!({}), json!({"elicitation": {"form": {}}})] {
        let backend = GitHubTool::new(Duration::from_secs(30));
        let mut client = Client::initialized(Arc::clone(&backend), capabilities).await;
        let answer = within(client.send(CALL).await.unwrap()).await;
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        assert_eq!(
            answer["result"]["content"][0]["text"],
            format!("This needs your GitHub account. Open {URL} to link it, then try again.")
        );
        assert!(client.sent.try_recv().is_err(), "nothing was asked");
    }
}

fn v2026_call(capabilities: &Value, retry: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"list_issues","arguments":{{}}{retry},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{capabilities}}}}}}}"#
    )
}

#[tokio::test]
async fn a_2026_request_is_asked_by_input_request_and_never_gets_32042() {
    let backend = GitHubTool::new(Duration::ZERO);
    let client = Client::new(Arc::clone(&backend));
    let capabilities = json!({"elicitation": {"url": {}}});
    let first = within(client.send(&v2026_call(&capabilities, "")).await.unwrap()).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["mcpbox-link-github"],
        json!({"method": "elicitation/create", "params": {"mode": "url", "url": URL,
                   "message": "Link your GitHub account to use github's tools"}})
    );
    let state = result["requestState"].as_str().unwrap().to_owned();

    // The user opened the link and accepted: the retry completes.
    backend.linker.opened.store(true, Ordering::SeqCst);
    let retry = format!(
        r#","inputResponses":{{"mcpbox-link-github":{{"action":"accept"}}}},"requestState":"{state}""#
    );
    let answer = within(
        client
            .send(&v2026_call(&capabilities, &retry))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "issues of alice");

    // Accepted, but not linked within the wait: the clear error, not -32042.
    let backend = GitHubTool::new(Duration::from_millis(50));
    let client = Client::new(Arc::clone(&backend));
    let first = within(client.send(&v2026_call(&capabilities, "")).await.unwrap()).await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let retry = format!(
        r#","inputResponses":{{"mcpbox-link-github":{{"action":"accept"}}}},"requestState":"{state}""#
    );
    let answer = within(
        client
            .send(&v2026_call(&capabilities, &retry))
            .await
            .unwrap(),
    )
    .await;
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(URL),
        "{answer}"
    );

    // Declined: the plugin's own answer.
    let retry = format!(
        r#","inputResponses":{{"mcpbox-link-github":{{"action":"decline"}}}},"requestState":"{state}""#
    );
    let answer = within(
        client
            .send(&v2026_call(&capabilities, &retry))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "Link your GitHub account to use this tool.",
        "{answer}"
    );

    // A request that cannot open URLs: the URL in the result, no input request.
    let answer = within(
        client
            .send(&v2026_call(&json!({"elicitation": {}}), ""))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains(URL)
    );
}

#[tokio::test]
async fn a_prompt_that_needs_a_link_answers_with_it() {
    const GET: &str =
        r#"{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"triage"}}"#;
    let backend = GitHubTool::new(Duration::from_secs(30));
    let client =
        Client::initialized(Arc::clone(&backend), json!({"elicitation": {"url": {}}})).await;
    let answer = within(client.send(GET).await.unwrap()).await;
    assert_eq!(answer["error"]["code"], -32042, "{answer}");
    assert_eq!(answer["error"]["data"]["elicitations"][0]["url"], URL);

    let client = Client::initialized(Arc::clone(&backend), json!({})).await;
    let answer = within(client.send(GET).await.unwrap()).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert_eq!(
        answer["error"]["message"],
        format!("This needs your GitHub account. Open {URL} to link it, then try again.")
    );
}

#[test]
fn the_first_provider_needed_is_kept() {
    let slot = LinkSlot::default();
    slot.record("github");
    slot.record("gitlab");
    assert_eq!(slot.take().as_deref(), Some("github"));
    assert_eq!(slot.take(), None);
}
