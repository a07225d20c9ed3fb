//! The audit trail of a session: one [`AuditRecord`] per `tools/call`, `prompts/get`,
//! `resources/read` and `completion/complete` (and per such request refused before it ran),
//! handed to an [`AuditSink`] once the request ends. Each request carries an [`AuditSlot`] on
//! its `RequestContext`: the backend writes the plugin that served it and the fuel it used, the
//! session its outcome. A record names who asked what of which plugin and how it ended, never
//! arguments, results or tokens. Every text a caller or a token supplies (the principal, the
//! client's name, the item, a string request id) is cut to [`MAX_FIELD_BYTES`] in the line,
//! and the record's `cut` says which fields were cut and how long they were.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::Serialize;

use crate::principal::Principal;
use crate::protocol::mcp::CompletionReference;
use crate::protocol::request::{ClientRequest, Method, TypedRequest};

/// Where audit records go (the host's file writer). Recording must not block: a sink that
/// falls behind drops records and counts them.
pub trait AuditSink: Send + Sync + std::fmt::Debug + 'static {
    /// Record one finished request.
    fn record(&self, record: AuditRecord);
}

/// How an audited request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditOutcome {
    /// A result.
    Ok,
    /// A tool result with `isError: true`.
    IsError,
    /// A JSON-RPC error with this code.
    Error(i32),
    /// Refused before it ran: the caller lacks the plugin's scopes.
    RefusedScope,
    /// Refused before it ran: the caller is over a budget.
    RefusedBudget,
    /// Cancelled (or dropped) before it was answered.
    Cancelled,
}

impl AuditOutcome {
    /// The outcome of a method's result.
    pub fn of(outcome: &super::MethodResult) -> Self {
        match outcome {
            Ok(output) if output.is_error => Self::IsError,
            Ok(_) => Self::Ok,
            Err(error) => Self::Error(error.code),
        }
    }

    /// Its name in a record.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::IsError => "is_error",
            Self::Error(_) => "error",
            Self::RefusedScope => "refused_scope",
            Self::RefusedBudget => "refused_budget",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The most bytes of one text field a record's line holds (a longer one is cut, and named in
/// the record's `cut`): a caller's 1 MiB tool name is 1 MiB of request, not 1 MiB of audit log.
pub const MAX_FIELD_BYTES: usize = 512;

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// When the request ended (RFC 3339, UTC).
    pub time: String,
    /// The caller's key (`token:alice`, `oauth:ISSUER sub:SUBJECT`, `local`).
    pub principal: String,
    /// The client's name, when it said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// The method.
    pub method: String,
    /// The plugin that served (or would have served) it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The tool or prompt name, the resource URI, or the completion reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// How it ended: `ok`, `is_error`, `error`, `refused_scope`, `refused_budget`,
    /// `cancelled`.
    pub outcome: &'static str,
    /// With `error`: the JSON-RPC error code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
    /// The fuel the plugin used, when one ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// The JSON-RPC request id, as JSON.
    pub request_id: serde_json::Value,
    /// The W3C trace id, when the request carried (or ran in) a trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The fields cut to [`MAX_FIELD_BYTES`], each with its length in bytes before the cut
    /// (filled in by [`AuditRecord::into_line`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cut: BTreeMap<&'static str, usize>,
}

impl AuditRecord {
    /// The record as one line of JSON (with its newline), each text field cut to
    /// [`MAX_FIELD_BYTES`] and the cut ones named in `cut`.
    pub fn into_line(mut self) -> String {
        let cut = &mut self.cut;
        bound("principal", &mut self.principal, cut);
        bound("method", &mut self.method, cut);
        for (field, value) in [
            ("client", &mut self.client),
            ("plugin", &mut self.plugin),
            ("item", &mut self.item),
            ("trace_id", &mut self.trace_id),
        ] {
            if let Some(value) = value {
                bound(field, value, cut);
            }
        }
        match &mut self.request_id {
            serde_json::Value::String(id) => bound("request_id", id, cut),
            serde_json::Value::Number(_) | serde_json::Value::Null => {}
            other => {
                // Not an id JSON-RPC allows: its kind, not its content.
                let text = other.to_string();
                if text.len() > MAX_FIELD_BYTES {
                    cut.insert("request_id", text.len());
                    *other = serde_json::Value::String(String::new());
                }
            }
        }
        let mut line = serde_json::to_string(&self).unwrap_or_else(|e| {
            format!(
                r#"{{"outcome":"unencodable","problem":"{}"}}"#,
                e.to_string().escape_default()
            )
        });
        line.push('\n');
        line
    }
}

/// Cut `value` to at most [`MAX_FIELD_BYTES`] (at a character's boundary), noting its length
/// in `cut` when it was longer.
fn bound(field: &'static str, value: &mut String, cut: &mut BTreeMap<&'static str, usize>) {
    if value.len() <= MAX_FIELD_BYTES {
        return;
    }
    cut.insert(field, value.len());
    let end = value.floor_char_boundary(MAX_FIELD_BYTES);
    value.truncate(end);
}

/// What the backend and the session learn about one request while it runs.
#[derive(Debug, Default)]
pub struct AuditSlot(Mutex<Filled>);

#[derive(Debug, Default)]
struct Filled {
    plugin: Option<String>,
    fuel: Option<u64>,
    outcome: Option<AuditOutcome>,
}

impl AuditSlot {
    fn filled(&self) -> std::sync::MutexGuard<'_, Filled> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The request reached this plugin.
    pub fn plugin(&self, plugin: &str) {
        self.filled().plugin = Some(plugin.to_owned());
    }

    /// A call into the plugin used this much fuel.
    pub fn fuel(&self, used: u64) {
        let mut filled = self.filled();
        filled.fuel = Some(filled.fuel.unwrap_or(0).saturating_add(used));
    }

    /// The request ended so (the first outcome set stands).
    pub(super) fn outcome(&self, outcome: AuditOutcome) {
        self.filled().outcome.get_or_insert(outcome);
    }
}

/// The methods audited.
pub(super) fn audited(method: &Method) -> bool {
    matches!(
        method,
        Method::CallTool | Method::GetPrompt | Method::ReadResource | Method::Complete
    )
}

/// One audited request from its start: what the record needs besides the slot.
pub(super) struct AuditStart {
    sink: Arc<dyn AuditSink>,
    principal: String,
    client: Option<String>,
    method: String,
    item: Option<String>,
    request_id: serde_json::Value,
    trace_id: Option<String>,
    started: Instant,
    pub(super) slot: Arc<AuditSlot>,
    ended: bool,
}

impl AuditStart {
    /// The start of `request` from `caller`, if its method is audited and there is a sink.
    pub(super) fn begin(
        sink: Option<&Arc<dyn AuditSink>>,
        request: &TypedRequest,
        caller: &Principal,
        client: Option<String>,
        span: &tracing::Span,
    ) -> Option<Self> {
        let sink = sink?;
        if !audited(&request.method) {
            return None;
        }
        let trace_id = request
            .meta
            .trace
            .as_ref()
            .and_then(|(parent, _)| trace_id_of(parent))
            .or_else(|| crate::telemetry::trace_id(span));
        Some(Self {
            sink: Arc::clone(sink),
            principal: caller.key().to_owned(),
            client,
            method: request.method.as_str().to_owned(),
            item: request.body.as_ref().ok().and_then(item_of),
            request_id: serde_json::to_value(&request.id).unwrap_or(serde_json::Value::Null),
            trace_id,
            started: Instant::now(),
            slot: Arc::default(),
            ended: false,
        })
    }

    /// Emit the record, with `outcome` unless the slot has one.
    pub(super) fn end(mut self, outcome: AuditOutcome) {
        self.emit(outcome);
    }

    fn emit(&mut self, outcome: AuditOutcome) {
        if self.ended {
            return;
        }
        self.ended = true;
        self.slot.outcome(outcome);
        let filled = std::mem::take(&mut *self.slot.filled());
        let outcome = filled.outcome.unwrap_or(outcome);
        let record = AuditRecord {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            principal: std::mem::take(&mut self.principal),
            client: self.client.take(),
            method: std::mem::take(&mut self.method),
            plugin: filled.plugin,
            item: self.item.take(),
            outcome: outcome.as_str(),
            code: match outcome {
                AuditOutcome::Error(code) => Some(code),
                _ => None,
            },
            duration_ms: (self.started.elapsed().as_secs_f64() * 1e6).round() / 1e3,
            fuel: filled.fuel,
            request_id: self.request_id.take(),
            trace_id: self.trace_id.take(),
            cut: BTreeMap::new(),
        };
        self.sink.record(record);
    }
}

impl Drop for AuditStart {
    /// A request dropped unanswered (its client went away) still leaves its one record.
    fn drop(&mut self) {
        self.emit(AuditOutcome::Cancelled);
    }
}

/// The item a request names: the tool or prompt, the resource URI, or the completion
/// reference (`prompt:NAME`, `resource:URI-TEMPLATE`).
fn item_of(body: &ClientRequest) -> Option<String> {
    match body {
        ClientRequest::CallTool(p) => Some(p.name.clone()),
        ClientRequest::GetPrompt(p) => Some(p.name.clone()),
        ClientRequest::ReadResource(p) => Some(p.uri.clone()),
        ClientRequest::Complete(p) => Some(match &p.reference {
            CompletionReference::Prompt { name } => format!("prompt:{name}"),
            CompletionReference::Resource { uri } => format!("resource:{uri}"),
        }),
        _ => None,
    }
}

/// The trace id of a W3C `traceparent` (`00-TRACEID-SPANID-FLAGS`), when valid.
fn trace_id_of(traceparent: &str) -> Option<String> {
    let id = traceparent.split('-').nth(1)?;
    let valid = id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && id.bytes().any(|b| b != b'0');
    valid.then(|| id.to_owned())
}

/// The name in a `clientInfo` object, if it has one.
pub(super) fn client_name(client_info: &serde_json::value::RawValue) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Info {
        name: String,
    }
    serde_json::from_str::<Info>(client_info.get())
        .ok()
        .map(|i| i.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> AuditRecord {
        AuditRecord {
            time: "2026-11-23T18:00:00.000Z".to_owned(),
            principal: "token:alice".to_owned(),
            client: Some("claude".to_owned()),
            method: "tools/call".to_owned(),
            plugin: Some("echo_tools".to_owned()),
            item: Some("echo".to_owned()),
            outcome: AuditOutcome::Error(-32602).as_str(),
            code: Some(-32602),
            duration_ms: 1.25,
            fuel: Some(1234),
            request_id: serde_json::json!(7),
            trace_id: None,
            cut: BTreeMap::new(),
        }
    }

    #[test]
    fn long_fields_are_cut_and_the_record_says_which() {
        let long = "é".repeat(600_000); // 1.2 MB, two bytes a character
        let line = AuditRecord {
            principal: format!("oauth:https://idp sub:{long}"),
            client: Some(long.clone()),
            item: Some(long.clone()),
            request_id: serde_json::json!(long),
            ..record()
        }
        .into_line();
        assert!(line.len() < 6 * MAX_FIELD_BYTES, "{} bytes", line.len());
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            value["cut"],
            serde_json::json!({
                "principal": long.len() + 22,
                "client": long.len(),
                "item": long.len(),
                "request_id": long.len(),
            })
        );
        let item = value["item"].as_str().unwrap();
        assert_eq!(item.len(), MAX_FIELD_BYTES);
        assert!(long.starts_with(item));
        // A record with nothing long has no `cut`.
        let value: serde_json::Value = serde_json::from_str(&record().into_line()).unwrap();
        assert!(value.get("cut").is_none());
        // Nor does a field of exactly the bound.
        let exact = "a".repeat(MAX_FIELD_BYTES);
        let value: serde_json::Value = serde_json::from_str(
            &AuditRecord {
                item: Some(exact.clone()),
                ..record()
            }
            .into_line(),
        )
        .unwrap();
        assert_eq!(value["item"], exact);
        assert!(value.get("cut").is_none());
    }

    #[test]
    fn a_record_is_one_line_of_json_without_absent_fields() {
        let line = record().into_line();
        assert!(line.ends_with('\n'));
        assert_eq!(line.matches('\n').count(), 1);
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            value,
            serde_json::json!({
                "time": "2026-11-23T18:00:00.000Z",
                "principal": "token:alice",
                "client": "claude",
                "method": "tools/call",
                "plugin": "echo_tools",
                "item": "echo",
                "outcome": "error",
                "code": -32602,
                "duration_ms": 1.25,
                "fuel": 1234,
                "request_id": 7,
            })
        );
        let bare = AuditRecord {
            client: None,
            plugin: None,
            item: None,
            code: None,
            fuel: None,
            outcome: "refused_scope",
            request_id: serde_json::json!("a"),
            trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".to_owned()),
            ..record()
        };
        let value: serde_json::Value = serde_json::from_str(&bare.into_line()).unwrap();
        let mut keys: Vec<&str> = value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "duration_ms",
                "method",
                "outcome",
                "principal",
                "request_id",
                "time",
                "trace_id"
            ]
        );
    }

    #[test]
    fn trace_ids_come_from_valid_traceparents_only() {
        assert_eq!(
            trace_id_of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").as_deref(),
            Some("4bf92f3577b34da6a3ce929d0e0e4736")
        );
        assert_eq!(
            trace_id_of("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(trace_id_of("garbage"), None);
        assert_eq!(trace_id_of("00-XYZ-00f067aa0ba902b7-01"), None);
    }

    #[test]
    fn fuel_adds_up_and_the_first_outcome_stands() {
        let slot = AuditSlot::default();
        slot.fuel(10);
        slot.fuel(5);
        slot.outcome(AuditOutcome::IsError);
        slot.outcome(AuditOutcome::Cancelled);
        let filled = slot.filled();
        assert_eq!(filled.fuel, Some(15));
        assert_eq!(filled.outcome, Some(AuditOutcome::IsError));
    }
}
