//! The bridge between a plugin's `host` calls and the client: a [`CallReach`] built from the
//! request's [`RequestContext`], with the plugin's name as the logger. It also records, for
//! the call's maker, that the caller must link an account ([`LinkSlot`]).
//!
//! A resource update the plugin announces goes to every subscriber, unless the plugin keeps
//! each caller's state apart (caller buckets): then only to the subscriptions of the caller
//! the call serves, in any of its sessions. The update is most likely about that caller's own
//! state, which nobody else reads; another caller hearing of it would learn when the first
//! was active.

use std::sync::Arc;

use serde_json::value::RawValue;

use super::hub::EventHub;
use super::link::LinkSlot;
use crate::engine::{BoxFuture, CallReach, HostRequest, ListKind, LogLevel, PluginCode};
use crate::policy::PluginName;
use crate::protocol::mcp::LogLevel as McpLogLevel;
use crate::server::{Audience, RequestContext, ServerRequest};

/// One call's way to its client.
pub struct ClientBridge {
    plugin: PluginName,
    ctx: RequestContext,
    hub: EventHub,
    /// Its resource updates are for the caller alone (the plugin keeps callers apart).
    updates_for_caller: bool,
    /// Where a needed link is recorded.
    links: LinkSlot,
}

impl ClientBridge {
    /// The bridge for a call into `plugin` made for the request behind `ctx`.
    pub fn reach(plugin: &PluginCode, ctx: RequestContext, hub: EventHub) -> Arc<dyn CallReach> {
        Self::linking(plugin, ctx, hub, LinkSlot::default())
    }

    /// [`ClientBridge::reach`], recording in `links` the provider the caller must link an
    /// account with, should the call need one.
    pub fn linking(
        plugin: &PluginCode,
        ctx: RequestContext,
        hub: EventHub,
        links: LinkSlot,
    ) -> Arc<dyn CallReach> {
        Self::named(
            plugin.name().clone(),
            plugin.policy().keeps_callers_apart(),
            ctx,
            hub,
            links,
        )
    }

    /// The bridge for a call into the plugin named `plugin`, whose resource updates are for
    /// the caller alone when `updates_for_caller`.
    pub fn named(
        plugin: PluginName,
        updates_for_caller: bool,
        ctx: RequestContext,
        hub: EventHub,
        links: LinkSlot,
    ) -> Arc<dyn CallReach> {
        Arc::new(Self {
            plugin,
            ctx,
            hub,
            updates_for_caller,
            links,
        })
    }
}

fn mcp_level(level: LogLevel) -> McpLogLevel {
    match level {
        LogLevel::Debug => McpLogLevel::Debug,
        LogLevel::Info => McpLogLevel::Info,
        LogLevel::Notice => McpLogLevel::Notice,
        LogLevel::Warning => McpLogLevel::Warning,
        LogLevel::Error => McpLogLevel::Error,
        LogLevel::Critical => McpLogLevel::Critical,
        LogLevel::Alert => McpLogLevel::Alert,
        LogLevel::Emergency => McpLogLevel::Emergency,
    }
}

impl CallReach for ClientBridge {
    fn log(&self, level: LogLevel, message: String) -> BoxFuture<'_, ()> {
        Box::pin(async move { self.ctx.log(&self.plugin, mcp_level(level), &message).await })
    }

    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> BoxFuture<'_, ()> {
        Box::pin(async move { self.ctx.progress(progress, total, message.as_deref()).await })
    }

    fn streamed(&self, message: String) -> BoxFuture<'_, ()> {
        Box::pin(async move { self.ctx.streamed(&message).await })
    }

    fn cancelled(&self) -> bool {
        self.ctx.is_cancelled()
    }

    fn caller(&self) -> Option<crate::principal::Principal> {
        Some(self.ctx.caller().clone())
    }

    fn in_task(&self) -> bool {
        self.ctx.in_task()
    }

    fn session(&self) -> Option<u64> {
        self.ctx.session().map(crate::server::SessionId::get)
    }

    fn request(
        &self,
        request: HostRequest,
        params: String,
    ) -> BoxFuture<'_, Result<String, String>> {
        Box::pin(async move {
            let kind = match request {
                HostRequest::Sample => ServerRequest::Sampling,
                HostRequest::Elicit => ServerRequest::Elicitation,
                HostRequest::ListRoots => ServerRequest::Roots,
            };
            // Without line breaks: they would end the message on stdio or SSE.
            let params = RawValue::from_string(params)
                .map(crate::protocol::jsonrpc::flat_raw)
                .map_err(|e| format!("the request is not valid JSON: {e}"))?;
            if !params.get().trim_start().starts_with('{') {
                return Err("the request must be a JSON object".to_owned());
            }
            let answer = self.ctx.request(kind, &params).await;
            if let Err(why) = &answer {
                tracing::debug!(
                    plugin = &*self.plugin,
                    ?kind,
                    "client request failed: {why}"
                );
            }
            answer.map(|result| result.get().to_owned())
        })
    }

    fn list_changed(&self, kind: ListKind) {
        tracing::debug!(
            plugin = &*self.plugin,
            ?kind,
            "plugin says its list changed"
        );
        self.hub.relist(&self.plugin);
    }

    fn resource_updated(&self, uri: String) {
        tracing::debug!(
            plugin = &*self.plugin,
            uri,
            "plugin says a resource changed"
        );
        let audience = if self.updates_for_caller {
            Audience::caller(self.ctx.caller())
        } else {
            Audience::Everyone
        };
        self.hub.resource_updated(&self.plugin, uri, audience);
    }

    fn used_fuel(&self, fuel: u64) {
        self.ctx.audit().fuel(fuel);
    }

    fn credential_needed(&self, provider: &str) {
        tracing::debug!(
            plugin = &*self.plugin,
            provider,
            "the caller must link an account"
        );
        self.links.record(provider);
    }
}
