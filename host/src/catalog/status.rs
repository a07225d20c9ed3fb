//! The status page (`GET /` over HTTP): plain server-rendered HTML, readable without
//! JavaScript, of the loaded plugins (version digest, where each was pulled from and which key
//! signed it, tools, prompts, resources, the names they are served as, grants and limits,
//! calls by outcome from the metrics), the plugin state store and whether it answers, the
//! names refused, and recent loads, reloads and failures. Everything a plugin supplies is
//! escaped (maud escapes every interpolation).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use maud::{DOCTYPE, Markup, html};

use super::live::PluginSet;
use super::loaded::LoadedPlugin;
use crate::metrics::{CallKind, metrics};
use crate::policy::{GrantSummary, NamingSummary};
use crate::server::BudgetUse;

/// The page refreshes itself this often (a `<meta>` refresh: no script).
const REFRESH_SECS: u32 = 10;

/// Render the page for `set`, serving since `started`, with plugin state in `state` and the
/// callers' budgets in use `budgets`.
pub fn render(
    set: &PluginSet,
    started: SystemTime,
    state: &crate::kv::StateService,
    budgets: &BudgetUse,
) -> String {
    let catalog = set.catalog();
    let mut plugins = set.plugins();
    plugins.sort_by(|a, b| a.code.name().cmp(b.code.name()));
    let now = SystemTime::now();
    let uptime = now.duration_since(started).unwrap_or_default();
    let history = set.history();
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(REFRESH_SECS);
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "mcpbox status" }
                style { (STYLE) }
            }
            body {
                h1 { "mcpbox " (env!("CARGO_PKG_VERSION")) }
                p {
                    (catalog.plugin_count()) " plugins serving · up " (ago(uptime))
                    " · refreshes every " (REFRESH_SECS) " s · "
                    a href="/metrics" { "metrics" }
                }
                p id="state" {
                    "Plugin state: " (state.config().to_string())
                    @if let Some(problem) = state.last_problem() {
                        " — " strong class="down" { "down" } ": " (problem)
                        " (stateful calls fail; stateless tools keep serving)"
                    } @else if state.is_shared() {
                        " — up"
                    }
                }
                h2 { "Plugins" }
                @if plugins.is_empty() {
                    p { "No plugins are loaded." }
                }
                @for plugin in &plugins {
                    (plugin_section(plugin))
                }
                h2 { "Names refused" }
                @let refusals = catalog.refusals();
                @let invalid: Vec<(String, &str, &str)> = plugins.iter().flat_map(|p| {
                    p.refused_items().iter().map(|(item, why)| (p.code.name().to_string(), item.as_str(), why.as_str()))
                }).collect();
                @if refusals.is_empty() && invalid.is_empty() {
                    p { "None." }
                } @else {
                    ul {
                        @for refusal in refusals { li { (refusal.to_string()) } }
                        @for (plugin, item, why) in &invalid {
                            li { "plugin `" (plugin) "`: " (item) ": " (why) }
                        }
                    }
                }
                (budget_section(budgets))
                h2 { "Recent loads, reloads and failures" }
                @if history.is_empty() {
                    p { "None yet." }
                } @else {
                    table {
                        thead { tr { th { "when" } th { "what" } } }
                        tbody {
                            @for (at, event) in history.iter().rev() {
                                tr {
                                    td class="when" { (ago(now.duration_since(*at).unwrap_or_default())) " ago" }
                                    td { (event) }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    page.into_string()
}

/// The callers' budgets: the default, how much is in use summed over callers, and how many
/// callers are at a limit (each caller's use only when the operator opted in).
fn budget_section(budgets: &BudgetUse) -> Markup {
    let default = &budgets.default;
    html! {
        h2 id="budgets" { "Budgets per caller" }
        p {
            "Each named caller may hold " (default.calls) " running calls, "
            (default.sessions) " sessions, " (default.listen_streams) " listen streams and "
            (default.request_bytes >> 10) " KiB of requests, at " (default.rate)
            " requests a second (bursts of " (default.burst) "), unless [budgets] says otherwise. "
            (budgets.callers) " callers active."
        }
        table {
            tr { th { "limit" } th { "in use (all callers)" } th { "callers at the default" } }
            @for (limit, used) in &budgets.in_use {
                tr {
                    td { (limit) } td { (used) }
                    td { (budgets.at_limit.get(limit).copied().unwrap_or_default()) }
                }
            }
        }
        @if let Some(by_caller) = &budgets.by_caller {
            table {
                tr { th { "caller" } th { "calls" } th { "sessions" } th { "listen streams" } th { "request bytes" } }
                @for (caller, used) in by_caller {
                    tr {
                        td { (caller) }
                        @for limit in ["calls", "sessions", "listen_streams", "request_bytes"] {
                            td { (used.get(limit).copied().unwrap_or_default()) }
                        }
                    }
                }
            }
        }
    }
}

fn plugin_section(plugin: &LoadedPlugin) -> Markup {
    let name = plugin.code.name();
    let lists = &plugin.lists;
    let limits = plugin.code.limits();
    let digest: String = plugin
        .digest
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut calls: Vec<(CallKind, Arc<str>)> = lists
        .tools
        .iter()
        .map(|t| (CallKind::Tool, Arc::from(t.name.as_str())))
        .chain(
            lists
                .prompts
                .iter()
                .map(|p| (CallKind::Prompt, Arc::from(p.name.as_str()))),
        )
        .collect();
    let empty: Arc<str> = Arc::from("");
    calls.extend(
        [CallKind::Resource, CallKind::Completion]
            .into_iter()
            .map(|kind| (kind, Arc::clone(&empty))),
    );
    let outcomes = metrics().outcomes(name, &calls);
    html! {
        section class="plugin" id=(format!("plugin-{name}")) {
            h3 {
                (name)
                @if let Some(title) = &plugin.code.policy().title { " — " (title) }
            }
            dl {
                dt { "version" } dd { code { (digest) } " (SHA-256 of component and policy, first 8 bytes)" }
                dt { "file" } dd { code { (plugin.file.display().to_string()) } }
                @if let Some((reference, digest)) = &plugin.provenance.pulled {
                    dt { "pulled from" } dd { code { (reference) } " (" code { (digest) } ")" }
                }
                @if let Some(signer) = &plugin.provenance.signer {
                    dt { "signed by" } dd { "the key " code { (signer) } " (verified at load)" }
                }
                dt { "tools" } dd { (names(lists.tools.iter().map(|t| t.name.as_str()))) }
                dt { "prompts" } dd { (names(lists.prompts.iter().map(|p| p.name.as_str()))) }
                dt { "resources" } dd {
                    (names(lists.resources.iter().map(|r| r.uri.as_str()).chain(lists.templates.iter().map(|t| t.uri_template.as_str()))))
                }
                @let naming = &plugin.code.policy().naming;
                @if !naming.is_default() {
                    dt { "naming" } dd { (NamingSummary(naming).to_string()) }
                    @let (tools, prompts) = plugin.served_names();
                    dt { "served as" } dd { (names(tools.into_iter().chain(prompts))) }
                }
                @if !plugin.unknown_names().is_empty() {
                    dt { "unknown names" } dd {
                        @for (i, unknown) in plugin.unknown_names().iter().enumerate() {
                            @if i > 0 { "; " }
                            (unknown)
                        }
                    }
                }
                dt { "grants" } dd { (GrantSummary(plugin.code.policy()).to_string()) }
                dt { "limits" } dd {
                    (limits.fuel) " fuel · " (limits.timeout.as_millis()) " ms · "
                    (limits.memory_bytes >> 20) " MiB memory · " (limits.result_bytes >> 10) " KiB result"
                }
                dt { "calls" } dd {
                    @if outcomes.is_empty() { "none yet" }
                    @for (i, (outcome, count)) in outcomes.iter().enumerate() {
                        @if i > 0 { " · " }
                        span class=(format!("outcome {}", outcome.as_str())) { (outcome.as_str()) ": " (count) }
                    }
                }
            }
        }
    }
}

fn names<'a>(items: impl Iterator<Item = &'a str>) -> Markup {
    let items: Vec<&str> = items.collect();
    html! {
        @if items.is_empty() { "none" }
        @for (i, item) in items.iter().enumerate() {
            @if i > 0 { ", " }
            code { (item) }
        }
    }
}

/// A duration as people read it: `42 s`, `3 min`, `5 h`, `2 d`.
fn ago(duration: Duration) -> String {
    let secs = duration.as_secs();
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min", secs / 60),
        3600..86_400 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    }
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:70rem;margin:1rem auto;padding:0 1rem;color:#222}\
section.plugin{border:1px solid #ccc;border-radius:6px;padding:0 1rem;margin:1rem 0}\
dl{display:grid;grid-template-columns:8rem 1fr;gap:.3rem 1rem}dt{font-weight:600}dd{margin:0}\
table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:.2rem .6rem;text-align:left}\
td.when{white-space:nowrap;color:#555}.down{color:#a00}.outcome.ok{color:#070}.outcome:not(.ok){color:#a00}";
