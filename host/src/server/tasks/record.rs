//! A task's record, as the store keeps it: its status, how a run of its call ended
//! ([`Conclusion`]) and what `tasks/get` shows of it, with the clock and id helpers the
//! records use.

use super::*;

/// A task id, cut for messages (it is client input).
pub(super) fn cut(id: &str) -> String {
    id.chars().take(80).collect()
}

/// A task's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The call runs.
    Working,
    /// The plugin asked the client something; `tasks/update` answers.
    InputRequired,
    /// The call produced a result (perhaps a tool error, `isError`).
    Completed,
    /// The call produced no result.
    Failed,
    /// The client cancelled it.
    Cancelled,
}

impl TaskStatus {
    pub(super) fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// What is kept of a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Record {
    /// A digest of the caller's key: only they see it.
    pub(super) owner: String,
    /// The tool's served name.
    pub(super) tool: String,
    /// The `tools/call` params as sent (what a resumed run is bound to).
    pub(super) params: String,
    /// The request's declared client capabilities, as sent.
    #[serde(default)]
    pub(super) capabilities: Option<String>,
    pub(super) status: TaskStatus,
    /// Milliseconds since the epoch.
    pub(super) created: u64,
    pub(super) updated: u64,
    /// While `working`: until when the running replica vouches for it.
    #[serde(default)]
    pub(super) lease: u64,
    /// Input rounds the task has asked in.
    #[serde(default)]
    pub(super) round: u32,
    #[serde(default)]
    pub(super) input_requests: Option<Map<String, Value>>,
    #[serde(default)]
    pub(super) request_state: Option<String>,
    #[serde(default)]
    pub(super) result: Option<Box<RawValue>>,
    #[serde(default)]
    pub(super) error: Option<ErrorObject>,
    /// The latest progress message of a working task (its `statusMessage`).
    #[serde(default)]
    pub(super) message: Option<String>,
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

pub(super) fn lease_until() -> u64 {
    now_ms().saturating_add(u64::try_from(LEASE.as_millis()).unwrap_or(u64::MAX))
}

pub(super) fn iso(ms: u64) -> String {
    chrono::DateTime::from_timestamp_millis(i64::try_from(ms).unwrap_or(i64::MAX))
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// How a run of the call ended, in a task's terms.
pub(super) enum Conclusion {
    /// A result (complete, as this revision sends it).
    Result(MethodOutput),
    /// No result.
    Failed(ErrorObject),
    /// The plugin asked the client.
    Input {
        requests: Map<String, Value>,
        state: String,
    },
}

/// The outcome of a run and its input round, concluded.
pub(super) fn conclude(
    round: &InputRound,
    binding: &Binding,
    outcome: MethodResult,
    settings: &SessionSettings,
) -> Conclusion {
    let failed = outcome.as_ref().map_or(true, |output| output.is_error);
    match round.end(
        || Ok(binding.clone()),
        failed,
        &settings.state_key,
        settings.state_lifetime,
    ) {
        RoundEnd::Complete => match outcome {
            Ok(output) => Conclusion::Result(MethodOutput {
                body: v2026::complete(&output.body, None),
                is_error: output.is_error,
            }),
            Err(error) => Conclusion::Failed(v2026::map_error(error)),
        },
        RoundEnd::InputRequired(mut result) => {
            let requests = match result.get_mut("inputRequests").map(Value::take) {
                Some(Value::Object(requests)) => requests,
                _ => Map::new(),
            };
            let state = result
                .get("requestState")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Conclusion::Input { requests, state }
        }
        RoundEnd::MissingCapabilities(missing) => {
            Conclusion::Failed(v2026::missing_capabilities(&missing))
        }
        RoundEnd::InvalidAnswer(problem) => {
            Conclusion::Failed(ErrorObject::invalid_params(problem))
        }
        RoundEnd::Refused(error) => Conclusion::Failed(error),
    }
}

impl Record {
    /// Record how a run ended.
    pub(super) fn conclude(&mut self, conclusion: Conclusion) {
        self.updated = now_ms();
        self.lease = 0;
        match conclusion {
            Conclusion::Result(output) => {
                self.status = TaskStatus::Completed;
                self.result = Some(output.body);
            }
            Conclusion::Failed(error) => {
                self.status = TaskStatus::Failed;
                self.error = Some(error);
            }
            Conclusion::Input { requests, state } => {
                self.status = TaskStatus::InputRequired;
                self.round = self.round.saturating_add(1);
                self.input_requests = Some(requests);
                self.request_state = Some(state);
            }
        }
        let size = serde_json::to_vec(&*self).map_or(usize::MAX, |b| b.len());
        if size > MAX_RECORD_BYTES {
            self.status = TaskStatus::Failed;
            self.result = None;
            self.input_requests = None;
            self.error = Some(ErrorObject::internal(format!(
                "the task's outcome is {size} bytes, over the {MAX_RECORD_BYTES} bytes a task keeps"
            )));
        }
    }

    /// The status a client sees: a cancellation wins over a status that was not final, and a
    /// task whose runner stopped renewing its lease failed.
    pub(super) fn seen(&self, cancelled: bool) -> TaskStatus {
        if cancelled && !self.status.is_terminal() {
            TaskStatus::Cancelled
        } else if self.status == TaskStatus::Working && self.lease < now_ms() {
            TaskStatus::Failed
        } else {
            self.status
        }
    }

    /// The fields every view of the task has.
    pub(super) fn envelope(
        &self,
        id: &str,
        status: TaskStatus,
        ttl_ms: u64,
        result_type: &str,
    ) -> Map<String, Value> {
        let mut view = Map::new();
        view.insert("resultType".to_owned(), json!(result_type));
        view.insert("taskId".to_owned(), json!(id));
        view.insert("status".to_owned(), json!(status));
        view.insert("createdAt".to_owned(), json!(iso(self.created)));
        view.insert("lastUpdatedAt".to_owned(), json!(iso(self.updated)));
        view.insert("ttlMs".to_owned(), json!(ttl_ms));
        view.insert("pollIntervalMs".to_owned(), json!(POLL_INTERVAL_MS));
        view
    }
}
