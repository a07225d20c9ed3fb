//! Linking a caller's account with a provider when a call needs it, through the client.
//!
//! A plugin's request to a host it calls as the caller (`[http.credentials]`) is answered 401
//! by the host when the caller has no usable link; the call's bridge records the provider in
//! its [`LinkSlot`]. Once the call has returned, [`run_linking`] asks the [`Linker`] (the host's
//! credential broker, behind this trait) for the caller's link URL and asks the user to open
//! it with URL-mode elicitation, through the request's own [`RequestContext::request`]:
//!
//! - **2025-11-25**, a client that declared `elicitation.url`: `elicitation/create` in URL mode;
//!   on `accept`, wait (at most the link-wait setting) until the link is made, send
//!   `notifications/elicitation/complete`, and run the call once more. With a link-wait of 0,
//!   or when the wait runs out, the answer is -32042 (URL elicitation required) with the link
//!   in `data.elicitations`: the client retries once the user has linked.
//! - **2026-07-28**, a request that declared `elicitation.url`: an input request keyed
//!   `mcpbox-link-PROVIDER` (never -32042). The round ends with `input_required`; the retry
//!   carrying the answer runs the call again, and an `accept` whose link is made by then (or
//!   within a few seconds) runs it once more.
//! - `decline` or `cancel`: the first run's result, the plugin's own answer to the 401.
//! - A client that cannot open URLs, or a call run as a task: a result with `isError: true`
//!   naming the URL to open.
//!
//! The URL and id of a pending link stay the same while it is unexpired (the linker's
//! promise), so a 2026-07-28 retry asks the same question and its answer applies.
//!
//! The broker is reached only through [`Linker`].

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use super::failure::{PluginFailure, Request};
use crate::server::{INPUT_KEY_META, MethodResult, RequestContext, ServerRequest};

// The link's plain data are the credentials room's own: one definition for the broker, the
// link flow and the host's tools.
pub use crate::credentials::{LinkPrompt, LinkSummary, WaitOutcome};

type Fut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The host's credential broker, as linking and the host's own tools use it.
pub trait Linker: Send + Sync + std::fmt::Debug + 'static {
    /// The caller's pending link for `provider` (the same ticket, URL and id while unexpired),
    /// or a new one.
    fn begin_link<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
        plugin: Option<&'a str>,
    ) -> Fut<'a, Result<LinkPrompt, String>>;
    /// Wait (polling the store, so a callback on another replica counts) until linked,
    /// failed or `deadline`.
    fn wait_linked<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
        prompt: &'a LinkPrompt,
        deadline: tokio::time::Instant,
    ) -> Fut<'a, WaitOutcome>;
    /// The caller's links.
    fn links_of<'a>(&'a self, caller_key: &'a str) -> Fut<'a, Result<Vec<LinkSummary>, String>>;
    /// Remove the caller's link to `provider`; whether there was one.
    fn unlink<'a>(
        &'a self,
        caller_key: &'a str,
        provider: &'a str,
    ) -> Fut<'a, Result<bool, String>>;
    /// The provider's name for people; `None`: no such provider.
    fn display_name(&self, provider: &str) -> Option<String>;
}

/// Linking as the catalog does it: the linker, and how long a 2025-11-25 call waits for the
/// user to finish linking before answering -32042 (zero: at once).
#[derive(Debug, Clone)]
pub struct Linking {
    pub(super) linker: Arc<dyn Linker>,
    pub(super) wait: Duration,
}

impl Linking {
    /// Link through `linker`, waiting at most `wait` for the user.
    pub fn new(linker: Arc<dyn Linker>, wait: Duration) -> Self {
        Self { linker, wait }
    }
}

/// How long a 2026-07-28 retry whose user accepted waits for the link to be made (the user
/// said they were done; the provider's redirect may still be on its way).
const ACCEPTED_WAIT: Duration = Duration::from_secs(10);

/// The input-request key of a link to `provider` (2026-07-28).
pub fn input_key(provider: &str) -> String {
    format!("mcpbox-link-{provider}")
}

/// Where a call records the provider its caller must link an account with (the first one
/// wins).
#[derive(Clone, Default)]
pub struct LinkSlot(Arc<Mutex<Option<String>>>);

impl LinkSlot {
    /// Record that the caller must link an account with `provider`, unless one was recorded.
    pub fn record(&self, provider: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| provider.to_owned());
    }

    /// The provider recorded, if any; the slot is then empty.
    pub fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// What linking came to.
enum LinkOutcome {
    /// The account is linked: run the call again.
    Linked,
    /// The user declined or cancelled (or the request was cancelled): the first run's result.
    Declined,
    /// The client is asked (a 2026-07-28 round ends with `input_required`): the first run's
    /// result, which the round replaces.
    Asked,
    /// Answer this instead.
    Refused(PluginFailure),
}

/// Run a call of `plugin` with `run` (given a fresh slot each time); when the run recorded
/// that the caller must link an account and `linking` is configured, link through the client
/// and, once linked, run the call once more (its outcome then stands, even if it needs a link
/// again). `request` is the kind of request, for the failure's mapping.
pub async fn run_linking<F, R>(
    linking: Option<&Linking>,
    ctx: &RequestContext,
    plugin: &str,
    request: Request<'_>,
    run: F,
) -> MethodResult
where
    F: Fn(LinkSlot) -> R,
    R: Future<Output = MethodResult>,
{
    let slot = LinkSlot::default();
    let first = run(slot.clone()).await;
    let (Some(linking), Some(provider)) = (linking, slot.take()) else {
        return first;
    };
    // Boxed: a rare path, kept out of every call's future.
    match Box::pin(link_caller(linking, ctx, &provider, plugin)).await {
        LinkOutcome::Linked => {
            tracing::info!(
                plugin,
                provider,
                "the caller linked their account; running the call again"
            );
            run(LinkSlot::default()).await
        }
        LinkOutcome::Declined | LinkOutcome::Asked => first,
        LinkOutcome::Refused(failure) => failure.into_mcp(plugin, request),
    }
}

/// The answer to a request other than a tool call (a prompt, a resource) of `plugin` that
/// recorded in `links` that its caller must link an account: the link to open, as -32042 for a
/// 2025-11-25 client that can open URLs (it retries once the user has), else in the error's
/// message. `outcome` stands when no link was needed or linking is not configured. (Only tool
/// calls ask the user and run again.)
pub async fn or_link_required(
    linking: Option<&Linking>,
    links: &LinkSlot,
    ctx: &RequestContext,
    plugin: &str,
    request: Request<'_>,
    outcome: MethodResult,
) -> MethodResult {
    let (Some(linking), Some(provider)) = (linking, links.take()) else {
        return outcome;
    };
    let linker = &*linking.linker;
    let display = linker
        .display_name(&provider)
        .unwrap_or_else(|| provider.clone());
    let failure = match linker
        .begin_link(ctx.caller().key(), &provider, Some(plugin))
        .await
    {
        Ok(prompt) => PluginFailure::LinkRequired {
            prompt,
            display,
            protocol_error: !ctx.is_v2026() && !ctx.in_task() && ctx.can_open_urls(),
        },
        Err(why) => {
            tracing::warn!(plugin, provider, "could not begin a link: {why}");
            PluginFailure::LinkFailed { display, why }
        }
    };
    failure.into_mcp(plugin, request)
}

/// Ask the caller of `ctx` to link their account with `provider`, which `plugin` needs.
async fn link_caller(
    linking: &Linking,
    ctx: &RequestContext,
    provider: &str,
    plugin: &str,
) -> LinkOutcome {
    let linker = &*linking.linker;
    let display = linker
        .display_name(provider)
        .unwrap_or_else(|| provider.to_owned());
    let prompt = match linker
        .begin_link(ctx.caller().key(), provider, Some(plugin))
        .await
    {
        Ok(prompt) => prompt,
        Err(why) => {
            tracing::warn!(plugin, provider, "could not begin a link: {why}");
            return LinkOutcome::Refused(PluginFailure::LinkFailed { display, why });
        }
    };
    let refused = |prompt: LinkPrompt, display: String, protocol_error: bool| {
        LinkOutcome::Refused(PluginFailure::LinkRequired {
            prompt,
            display,
            protocol_error,
        })
    };
    if ctx.in_task() || !ctx.can_open_urls() {
        return refused(prompt, display, false);
    }
    let v2026 = ctx.is_v2026();
    if !v2026 && linking.wait.is_zero() {
        return refused(prompt, display, true);
    }
    let mut params = json!({ "mode": "url", "url": prompt.url, "message": prompt.message });
    if v2026 {
        params["_meta"] = json!({ INPUT_KEY_META: input_key(provider) });
    } else {
        params["elicitationId"] = json!(prompt.elicitation_id);
    }
    let Ok(params) = serde_json::value::to_raw_value(&params) else {
        return refused(prompt, display, false);
    };
    let answer = match ctx.request(ServerRequest::Elicitation, &params).await {
        Ok(answer) => answer,
        Err(_) if v2026 && ctx.asked_client() => return LinkOutcome::Asked,
        Err(why) => {
            tracing::debug!(plugin, provider, "could not ask the client to link: {why}");
            return refused(prompt, display, false);
        }
    };
    let action = serde_json::from_str::<Value>(answer.get())
        .ok()
        .and_then(|a| a.get("action").and_then(Value::as_str).map(str::to_owned));
    if action.as_deref() != Some("accept") {
        tracing::info!(
            plugin,
            provider,
            action = action.as_deref().unwrap_or("(none)"),
            "the user did not link"
        );
        return LinkOutcome::Declined;
    }
    // 2026-07-28: the user says they are done; the link-wait setting (2025-11-25's, where
    // zero means -32042 at once) only shortens this.
    let wait = match (v2026, linking.wait.is_zero()) {
        (true, true) => ACCEPTED_WAIT,
        (true, false) => linking.wait.min(ACCEPTED_WAIT),
        (false, _) => linking.wait,
    };
    let deadline = tokio::time::Instant::now() + wait;
    let outcome = tokio::select! {
        outcome = linker.wait_linked(ctx.caller().key(), provider, &prompt, deadline) => outcome,
        () = ctx.until_cancelled() => return LinkOutcome::Declined,
    };
    match outcome {
        WaitOutcome::Linked => {
            if !v2026 {
                ctx.notify(
                    "notifications/elicitation/complete",
                    &json!({ "elicitationId": prompt.elicitation_id }),
                )
                .await;
            }
            LinkOutcome::Linked
        }
        // 2025-11-25: the user may still finish, and the client retries then.
        WaitOutcome::Pending => refused(prompt, display, !v2026),
        WaitOutcome::Failed(why) => {
            LinkOutcome::Refused(PluginFailure::LinkFailed { display, why })
        }
    }
}

#[cfg(test)]
mod tests;
