//! Running a task's call detached: the call until someone takes charge of it
//! ([`Unclaimed`]), launching it under its own cancellation, and the supervisor that renews
//! its lease and records its outcome when it ends; with the small results the methods answer.

use super::*;

/// A call that may become a task, until someone takes charge of it: should the request that
/// started it go away first (its client disconnected during the grace), the call is stopped
/// and its caller's slot freed, instead of running on with nobody to record it.
pub(super) struct Unclaimed {
    pub(super) tasks: Arc<Tasks>,
    pub(super) id: String,
    pub(super) run: Option<tokio::task::AbortHandle>,
}

impl Unclaimed {
    /// Someone has taken charge (the call ended within the grace, or a supervisor follows it).
    pub(super) fn claimed(&mut self) {
        self.run = None;
    }
}

impl Drop for Unclaimed {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            run.abort();
            self.tasks.stop(&self.id);
        }
    }
}

/// What a task run needs to go on after its request was answered.
pub(super) struct Run {
    pub(super) id: String,
    pub(super) record: Record,
    pub(super) launched: Launched,
}

/// A call started in its own task, and what its outcome is concluded with.
pub(super) struct Launched {
    pub(super) handle: JoinHandle<MethodResult>,
    pub(super) round: Arc<InputRound>,
    pub(super) binding: Binding,
    pub(super) cancellation: Arc<Cancellation>,
    /// The call's latest progress message.
    pub(super) status: Option<TaskProgress>,
}

impl Launched {
    /// Start `body` (a `tools/call`, on `resolved`, else resolved now) under `ctx`, a task's
    /// context cancelled by `cancellation`, in input round `round`, holding `place` (its
    /// caller's place among its running calls) until the call ends.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call's parts, passed through once"
    )]
    pub(super) fn start<B: Backend>(
        backend: Arc<B>,
        body: ClientRequest,
        resolved: Option<B::Target>,
        ctx: RequestContext,
        round: Arc<InputRound>,
        binding: Binding,
        cancellation: Arc<Cancellation>,
        place: Option<Held>,
    ) -> Self {
        let status = ctx.task_status();
        Self {
            handle: spawn_call(backend, body, resolved, ctx, place),
            round,
            binding,
            cancellation,
            status,
        }
    }
}

/// Start `body` (a `tools/call`) in its own task under `ctx`. `place` is given back when the
/// call ends, or when the task is aborted (dropped with it): once, however the call ends.
pub(super) fn spawn_call<B: Backend>(
    backend: Arc<B>,
    body: ClientRequest,
    resolved: Option<B::Target>,
    ctx: RequestContext,
    place: Option<Held>,
) -> JoinHandle<MethodResult> {
    tokio::spawn(async move {
        let _place = place;
        let outcome = dispatch(&*backend, body, resolved, ctx.clone()).await;
        ctx.finish();
        outcome
    })
}

/// Follow a task's run to its end: renew its lease, stop it when cancelled (here or on
/// another replica), and record its outcome.
pub(super) async fn supervise(tasks: Arc<Tasks>, settings: Arc<SessionSettings>, run: Run) {
    let Run {
        id,
        mut record,
        launched:
            Launched {
                mut handle,
                round,
                binding,
                cancellation,
                status,
            },
    } = run;
    let _running = crate::metrics::metrics().task_running();
    let mut renewal = tokio::time::interval(LEASE_RENEWAL);
    renewal.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    renewal.tick().await;
    let joined = loop {
        tokio::select! {
            joined = &mut handle => break Some(joined),
            () = cancellation.cancelled() => break None,
            _ = renewal.tick() => {
                if let Ok(Some(stored)) = tasks.store.load(&id).await
                    && stored.cancelled
                {
                    break None;
                }
                record.lease = lease_until();
                if let Some(status) = &status {
                    let latest = status
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone();
                    if latest.is_some() && latest != record.message {
                        record.message = latest;
                        record.updated = now_ms();
                    }
                }
                if let Err(e) = tasks.save(&id, &record).await {
                    tracing::warn!(task = %id, "could not renew the task's lease: {e}");
                }
            }
        }
    };
    match joined {
        None => {
            handle.abort();
            record.status = TaskStatus::Cancelled;
            record.updated = now_ms();
            record.lease = 0;
            tracing::debug!(task = %id, "task cancelled");
        }
        Some(joined) => {
            let outcome = joined
                .unwrap_or_else(|e| Err(ErrorObject::internal(format!("the call stopped: {e}"))));
            record.conclude(conclude(&round, &binding, outcome, &settings));
            tracing::debug!(task = %id, status = ?record.status, "task run ended");
        }
    }
    crate::metrics::metrics().task_ended(match record.status {
        TaskStatus::Completed => "completed",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Cancelled => "cancelled",
        TaskStatus::Failed | TaskStatus::Working => "failed",
    });
    if let Err(e) = tasks.save(&id, &record).await {
        // The outcome cannot be kept (the store refused it): keep, if anything, that it was
        // lost, rather than a task that reads `working` until its lease lapses.
        tracing::warn!(task = %id, "could not record the task's outcome: {e}");
        if record.status != TaskStatus::Cancelled {
            record.status = TaskStatus::Failed;
            record.result = None;
            record.input_requests = None;
            record.error = Some(ErrorObject::internal(format!(
                "the task's outcome could not be kept: {e}"
            )));
            if let Err(e) = tasks.save(&id, &record).await {
                tracing::warn!(task = %id, "could not record that the outcome was lost: {e}");
            }
        }
    }
    tasks.stop(&id);
}

/// The acknowledgement of `tasks/update` and `tasks/cancel`.
pub(super) fn ack() -> MethodResult {
    Ok(MethodOutput::from(
        RawValue::from_string(r#"{"resultType":"complete"}"#.to_owned())
            .map_err(|e| ErrorObject::internal(e.to_string()))?,
    ))
}

pub(super) fn output(value: &Value) -> MethodResult {
    serde_json::value::to_raw_value(value)
        .map(MethodOutput::from)
        .map_err(|e| ErrorObject::internal(e.to_string()))
}

/// How a call that did not become a task is answered, as a plain call's: a question is an
/// ordinary input round, and a call that produced no result fails as a plain call does (a
/// tool error the model can read).
pub(super) fn plainly(conclusion: Conclusion) -> MethodResult {
    match conclusion {
        Conclusion::Input { requests, state } => output(&v2026::input_required(&requests, &state)),
        Conclusion::Result(result) => Ok(result),
        Conclusion::Failed(error) if error.code == INTERNAL_ERROR => {
            let mut result = output(&json!({
                "resultType": "complete",
                "content": [{ "type": "text", "text": error.message }],
                "isError": true,
            }))?;
            result.is_error = true;
            Ok(result)
        }
        Conclusion::Failed(error) => Err(error),
    }
}

/// The refusal of a task that cannot be kept: -32029 when its caller keeps its share already,
/// else -32603. Neither says how much room the store has left.
pub(super) fn cannot_keep(error: &SaveError) -> ErrorObject {
    let message = format!("cannot keep the task: {error}");
    match error {
        SaveError::Share(_) => ErrorObject::new(OVER_BUDGET, message),
        SaveError::Full | SaveError::Failed(_) => ErrorObject::internal(message),
    }
}
