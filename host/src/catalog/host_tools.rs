//! The host's own tools, served beside the plugins' when linking is configured: the caller's
//! linked accounts ([`LINKED_ACCOUNTS`]) and unlinking one ([`UNLINK_ACCOUNT`]). Their names
//! are reserved whether or not they are served, and so is every name beginning
//! [`RESERVED_PREFIX`] (`mcpbox_`, the host's namespace): no plugin can claim one (the catalog
//! refuses a plugin's tool of such a name, with a warning).
//!
//! Each acts for the request's caller only, through the [`Linker`]; nothing they return holds
//! a token.

use std::sync::{Arc, LazyLock};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::convert::{error_result, to_raw};
use super::link::{LinkSummary, Linker};
use crate::server::{MethodOutput, MethodResult, RequestContext};

/// Lists the caller's linked accounts.
pub const LINKED_ACCOUNTS: &str = "mcpbox_linked_accounts";
/// Removes one of the caller's links.
pub const UNLINK_ACCOUNT: &str = "mcpbox_unlink_account";
/// The names of the host's own tools, which no plugin may claim.
pub const RESERVED: [&str; 2] = [LINKED_ACCOUNTS, UNLINK_ACCOUNT];
/// How every host tool's name begins: the host's namespace. No plugin's tool may be served
/// under a name beginning so (compared ignoring ASCII case), so none can pass for one of the
/// host's, whatever its author's `prefix`.
pub const RESERVED_PREFIX: &str = "mcpbox_";

/// Whether tool name `name` is in the host's namespace ([`RESERVED_PREFIX`]).
pub fn in_host_namespace(name: &str) -> bool {
    name.get(..RESERVED_PREFIX.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(RESERVED_PREFIX))
}

/// The host's tools as `tools/list` shows them.
pub fn items() -> &'static [Arc<RawValue>] {
    static ITEMS: LazyLock<Vec<Arc<RawValue>>> = LazyLock::new(|| {
        [linked_accounts_tool(), unlink_account_tool()]
            .iter()
            .filter_map(|tool| serde_json::value::to_raw_value(tool).ok())
            .map(Arc::from)
            .collect()
    });
    &ITEMS
}

fn linked_accounts_tool() -> Value {
    json!({
        "name": LINKED_ACCOUNTS,
        "title": "Linked accounts",
        "description": "The accounts you have linked to mcpbox, so that its tools act as you on other services (such as GitHub): each provider, when you linked it, when its current access expires and whether mcpbox can renew it. A tool that needs an account you have not linked asks you to link it.",
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
        "outputSchema": {
            "type": "object",
            "properties": {
                "accounts": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "provider": {"type": "string"},
                            "displayName": {"type": "string"},
                            "linkedAt": {"type": "string", "format": "date-time"},
                            "expiresAt": {"type": ["string", "null"], "format": "date-time"},
                            "refreshable": {"type": "boolean"}
                        },
                        "required": ["provider", "displayName", "linkedAt", "expiresAt", "refreshable"]
                    }
                }
            },
            "required": ["accounts"]
        },
        "annotations": {"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}

fn unlink_account_tool() -> Value {
    json!({
        "name": UNLINK_ACCOUNT,
        "title": "Unlink an account",
        "description": "Remove your link to an account (a provider as mcpbox_linked_accounts lists it, such as `github`): mcpbox forgets its token, and its tools can no longer act as you there until you link it again.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "provider": {"type": "string", "description": "The provider, such as `github`."}
            },
            "required": ["provider"],
            "additionalProperties": false
        },
        "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false}
    })
}

/// Call the host's tool `name` for the caller of `ctx`; `None` if `name` is not one.
pub async fn call(
    linker: &dyn Linker,
    name: &str,
    arguments: &RawValue,
    ctx: &RequestContext,
) -> Option<MethodResult> {
    ctx.audit().plugin("mcpbox");
    let caller = ctx.caller().key();
    Some(match name {
        LINKED_ACCOUNTS => linked_accounts(linker, caller).await,
        UNLINK_ACCOUNT => unlink_account(linker, caller, arguments).await,
        _ => return None,
    })
}

async fn linked_accounts(linker: &dyn Linker, caller: &str) -> MethodResult {
    let links = match linker.links_of(caller).await {
        Ok(links) => links,
        Err(why) => {
            tracing::warn!("could not list a caller's links: {why}");
            return error_result(&format!("could not list your linked accounts: {why}"));
        }
    };
    let accounts: Vec<Value> = links.iter().map(account).collect();
    let text = if links.is_empty() {
        "You have linked no accounts.".to_owned()
    } else {
        let lines: Vec<String> = links.iter().map(describe).collect();
        format!("Your linked accounts:\n{}", lines.join("\n"))
    };
    to_raw(&json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"accounts": accounts},
    }))
    .map(MethodOutput::from)
}

async fn unlink_account(linker: &dyn Linker, caller: &str, arguments: &RawValue) -> MethodResult {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Arguments {
        provider: String,
    }
    let provider = match serde_json::from_str::<Arguments>(arguments.get()) {
        Ok(arguments) => arguments.provider,
        Err(e) => {
            return error_result(&format!(
                "invalid arguments for tool `{UNLINK_ACCOUNT}`: {e} (expected {{\"provider\": \"NAME\"}})"
            ));
        }
    };
    let Some(display) = linker.display_name(&provider) else {
        return error_result(&format!(
            "no provider `{}` is configured",
            provider.chars().take(64).collect::<String>()
        ));
    };
    match linker.unlink(caller, &provider).await {
        Ok(true) => to_raw(&json!({
            "content": [{"type": "text", "text": format!("Unlinked your {display} account.")}],
        }))
        .map(MethodOutput::from),
        Ok(false) => to_raw(&json!({
            "content": [{"type": "text", "text": format!("Your {display} account was not linked.")}],
        }))
        .map(MethodOutput::from),
        Err(why) => {
            tracing::warn!(provider, "could not unlink a caller's account: {why}");
            error_result(&format!("could not unlink your {display} account: {why}"))
        }
    }
}

/// A time in ms since the Unix epoch, as RFC 3339 (UTC).
fn rfc3339(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || ms.to_string(),
            |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )
}

fn account(link: &LinkSummary) -> Value {
    json!({
        "provider": link.provider,
        "displayName": link.display_name,
        "linkedAt": rfc3339(link.linked_at_ms),
        "expiresAt": link.expires_at_ms.map(rfc3339),
        "refreshable": link.refreshable,
    })
}

fn describe(link: &LinkSummary) -> String {
    let expiry = match link.expires_at_ms {
        Some(ms) => format!("access expires {}", rfc3339(ms)),
        None => "access does not expire".to_owned(),
    };
    let renewal = if link.refreshable {
        "renewed by mcpbox"
    } else {
        "not renewable: link it again when it expires"
    };
    format!(
        "- {} (`{}`): linked {}; {expiry}, {renewal}",
        link.display_name,
        link.provider,
        rfc3339(link.linked_at_ms)
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;
    use crate::catalog::link::{LinkPrompt, WaitOutcome};
    use crate::catalog::{EventHub, PluginSet};
    use crate::principal::Principal;
    use crate::server::{Backend, ListKind};

    /// A call of tool `name`, resolved in the plugin set's catalog of the moment.
    fn pinned(plugins: &PluginSet, name: &str) -> crate::catalog::Pinned {
        let call = crate::protocol::mcp::CallToolParams {
            name: name.to_owned(),
            arguments: None,
        };
        plugins.resolve(&crate::protocol::request::ClientRequest::CallTool(call))
    }

    type Fut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

    /// The local user has linked GitHub; unlinking is recorded.
    #[derive(Debug, Default)]
    struct Links(Mutex<Vec<(String, String)>>);

    impl Linker for Links {
        fn begin_link<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: Option<&'a str>,
        ) -> Fut<'a, Result<LinkPrompt, String>> {
            Box::pin(async { Err("not here".to_owned()) })
        }
        fn wait_linked<'a>(
            &'a self,
            _: &'a str,
            _: &'a str,
            _: &'a LinkPrompt,
            _: tokio::time::Instant,
        ) -> Fut<'a, WaitOutcome> {
            Box::pin(async { WaitOutcome::Pending })
        }
        fn links_of<'a>(
            &'a self,
            caller_key: &'a str,
        ) -> Fut<'a, Result<Vec<LinkSummary>, String>> {
            Box::pin(async move {
                Ok(if caller_key == "local" {
                    vec![LinkSummary {
                        provider: "github".to_owned(),
                        display_name: "GitHub".to_owned(),
                        linked_at_ms: 1_800_000_000_000,
                        expires_at_ms: Some(1_800_028_800_000),
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
            let mut unlinked = self.0.lock().unwrap();
            let first = !unlinked.iter().any(|(_, p)| p == provider);
            unlinked.push((caller_key.to_owned(), provider.to_owned()));
            Box::pin(async move { Ok(first) })
        }
        fn display_name(&self, provider: &str) -> Option<String> {
            (provider == "github").then(|| "GitHub".to_owned())
        }
    }

    fn body(result: MethodResult) -> (Value, bool) {
        let output = result.unwrap();
        (
            serde_json::from_str(output.body.get()).unwrap(),
            output.is_error,
        )
    }

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).unwrap()
    }

    #[tokio::test]
    async fn the_caller_lists_and_unlinks_their_own_accounts() {
        let links = Links::default();
        let ctx = RequestContext::detached();
        let (listed, failed) = body(
            call(&links, LINKED_ACCOUNTS, &raw(&json!({})), &ctx)
                .await
                .unwrap(),
        );
        assert!(!failed);
        assert_eq!(
            listed["structuredContent"],
            json!({"accounts": [{"provider": "github", "displayName": "GitHub",
                "linkedAt": "2027-01-15T08:00:00Z", "expiresAt": "2027-01-15T16:00:00Z",
                "refreshable": true}]})
        );
        assert_eq!(
            listed["content"][0]["text"],
            "Your linked accounts:\n- GitHub (`github`): linked 2027-01-15T08:00:00Z; access \
             expires 2027-01-15T16:00:00Z, renewed by mcpbox"
        );

        let unlink = |provider: Value| raw(&json!({ "provider": provider }));
        let (done, failed) = body(
            call(&links, UNLINK_ACCOUNT, &unlink(json!("github")), &ctx)
                .await
                .unwrap(),
        );
        assert!(!failed);
        assert_eq!(done["content"][0]["text"], "Unlinked your GitHub account.");
        let (again, _) = body(
            call(&links, UNLINK_ACCOUNT, &unlink(json!("github")), &ctx)
                .await
                .unwrap(),
        );
        assert_eq!(
            again["content"][0]["text"],
            "Your GitHub account was not linked."
        );
        assert_eq!(
            *links.0.lock().unwrap(),
            [
                ("local".to_owned(), "github".to_owned()),
                ("local".to_owned(), "github".to_owned())
            ]
        );
        let (unknown, failed) = body(
            call(&links, UNLINK_ACCOUNT, &unlink(json!("nope")), &ctx)
                .await
                .unwrap(),
        );
        assert!(failed);
        assert_eq!(
            unknown["content"][0]["text"],
            "no provider `nope` is configured"
        );
        let (bad, failed) = body(
            call(&links, UNLINK_ACCOUNT, &raw(&json!({})), &ctx)
                .await
                .unwrap(),
        );
        assert!(failed, "{bad}");
        assert!(call(&links, "echo", &raw(&json!({})), &ctx).await.is_none());
    }

    #[tokio::test]
    async fn the_host_tools_are_served_only_with_a_linker() {
        let (hub, _relists) = EventHub::new();
        let plugins = PluginSet::new(Vec::new(), 100, false, hub);
        let listed = |plugins: &PluginSet| {
            let page = plugins
                .list(ListKind::Tools, None, &Principal::local())
                .unwrap();
            let page: Value = serde_json::from_str(page.body.get()).unwrap();
            page["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert!(listed(&plugins).is_empty());
        let refused = plugins
            .call_tool(
                pinned(&plugins, LINKED_ACCOUNTS),
                LINKED_ACCOUNTS,
                &raw(&json!({})),
                RequestContext::detached(),
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code, -32602);
        assert!(!plugins.offers().tools);

        plugins.use_linker(Arc::new(Links::default()), Duration::from_secs(1));
        assert_eq!(listed(&plugins), [LINKED_ACCOUNTS, UNLINK_ACCOUNT]);
        assert!(plugins.offers().tools);
        let (listed, failed) = body(
            plugins
                .call_tool(
                    pinned(&plugins, LINKED_ACCOUNTS),
                    LINKED_ACCOUNTS,
                    &raw(&json!({})),
                    RequestContext::detached(),
                )
                .await,
        );
        assert!(!failed);
        assert_eq!(
            listed["structuredContent"]["accounts"][0]["provider"],
            "github"
        );
        // Every tool's schema is valid (as the catalog checks plugins' tools).
        for item in items() {
            let tool: Value = serde_json::from_str(item.get()).unwrap();
            assert!(jsonschema::validator_for(&tool["inputSchema"]).is_ok());
            if let Some(output) = tool.get("outputSchema") {
                let validator = jsonschema::validator_for(output).unwrap();
                assert!(validator.is_valid(&listed["structuredContent"]));
            }
        }
    }

    #[test]
    fn reserved_names_are_refused_as_reserved() {
        use crate::catalog::{Claim, Refusal};
        let refusal = Refusal {
            claim: Claim::Tool(UNLINK_ACCOUNT.to_owned()),
            plugin: "impostor".into(),
            owner: "mcpbox".into(),
        };
        assert_eq!(
            refusal.to_string(),
            "refused tool `mcpbox_unlink_account` of plugin `impostor`: the name is reserved for \
             mcpbox's own tools"
        );
    }
}
