//! The session's side of tasks: a `tools/call` that may become a task
//! ([`call_as_task`]), and `tasks/get`, `tasks/cancel` and `tasks/update`, with the
//! resumption of a task whose questions were answered.

use super::*;

/// Run a `tools/call` that may become a task: see the module's documentation. `resolved` is
/// what the request resolved to (the call runs on it), `ctx` the request's context (its
/// stream, progress token and audit), `round` its input round, `place` the request's place
/// among its caller's running calls, which the call holds until it ends, task or not.
#[expect(
    clippy::too_many_arguments,
    reason = "one request's parts, passed through once"
)]
pub(in crate::server) async fn call_as_task<B: Backend>(
    core: &Core<B>,
    call: TaskCall,
    body: ClientRequest,
    resolved: Option<B::Target>,
    round: Arc<InputRound>,
    binding: Binding,
    ctx: RequestContext,
    place: Option<Held>,
) -> MethodResult {
    let tasks = Arc::clone(&core.settings.tasks);
    let owner = owner_of(ctx.caller());
    let id = uuid::Uuid::new_v4().to_string();
    let cancellation = tasks.start(&id, &owner)?;
    // Until the call becomes a task, the client may still cancel its request.
    let request = ctx.cancellation();
    let ctx = ctx.with_cancellation(Arc::clone(&cancellation)).for_task();
    let mut launched = Launched::start(
        Arc::clone(core.backend()),
        body,
        resolved,
        ctx.clone(),
        round,
        binding,
        cancellation,
        place,
    );
    let mut unclaimed = Unclaimed {
        tasks: Arc::clone(&tasks),
        id: id.clone(),
        run: Some(launched.handle.abort_handle()),
    };
    let now = now_ms();
    let mut record = Record {
        owner,
        tool: call.tool,
        params: call
            .params
            .as_deref()
            .map_or_else(|| "{}".to_owned(), |p| p.get().to_owned()),
        capabilities: call.capabilities.map(|c| c.get().to_owned()),
        status: TaskStatus::Working,
        created: now,
        updated: now,
        lease: lease_until(),
        round: 0,
        input_requests: None,
        request_state: None,
        result: None,
        error: None,
        message: None,
    };
    let graced = tokio::select! {
        graced = tokio::time::timeout(GRACE, &mut launched.handle) => graced,
        () = request.cancelled() => {
            // Dropping `unclaimed` stops the call and frees the slot.
            return Err(ErrorObject::internal(
                "the request was cancelled before its call became a task",
            ));
        }
    };
    let joined = match graced {
        Ok(joined) => Some(joined),
        // Still running: it becomes a task if it can be kept.
        Err(_) => match tasks.save(&id, &record).await {
            Ok(()) => None,
            // A call that may run as a task goes on as a plain call instead.
            Err(e) if !call.required => {
                tracing::debug!(task = %id, tool = %record.tool, "cannot keep the task ({e}); the call goes on as a plain one");
                Some(tokio::select! {
                    joined = &mut launched.handle => joined,
                    () = request.cancelled() => {
                        // Dropping `unclaimed` stops the call and frees the slot.
                        return Err(ErrorObject::internal("the request was cancelled before its call ended"));
                    }
                })
            }
            // Dropping `unclaimed` stops the call and frees the slot.
            Err(e) => return Err(cannot_keep(&e)),
        },
    };
    if let Some(joined) = joined {
        unclaimed.claimed();
        tasks.stop(&id);
        drop(ctx);
        let outcome =
            joined.unwrap_or_else(|e| Err(ErrorObject::internal(format!("the call stopped: {e}"))));
        match conclude(&launched.round, &launched.binding, outcome, &core.settings) {
            asked @ Conclusion::Input { .. } => return plainly(asked),
            ended if !call.required => return plainly(ended),
            finished => record.conclude(finished),
        }
        // A tool that only runs as a task: a task created already finished.
        if let Err(e) = tasks.save(&id, &record).await {
            return Err(cannot_keep(&e));
        }
    } else {
        // It goes on after the answer: nothing more reaches this request's stream.
        ctx.finish();
        drop(ctx);
    }
    tracing::debug!(task = %id, tool = %record.tool, status = ?record.status, "task created");
    let created = record.envelope(&id, record.status, tasks.ttl_ms(), "task");
    if record.status == TaskStatus::Working {
        unclaimed.claimed();
        let settings = Arc::clone(&core.settings);
        tokio::spawn(supervise(
            tasks,
            settings,
            Run {
                id,
                record,
                launched,
            },
        ));
    }
    output(&Value::Object(created))
}

/// `tasks/get`.
pub(in crate::server) async fn get_task<B: Backend>(
    core: &Core<B>,
    params: TaskParams,
    caller: &Principal,
) -> MethodResult {
    let tasks = &core.settings.tasks;
    let id = params.task_id;
    let (record, cancelled) = tasks.load(&id, &owner_of(caller)).await?;
    let status = record.seen(cancelled);
    let mut view = record.envelope(&id, status, tasks.ttl_ms(), "complete");
    match status {
        TaskStatus::Completed => {
            if let Some(result) = &record.result {
                view.insert(
                    "result".to_owned(),
                    serde_json::from_str(result.get()).unwrap_or(Value::Null),
                );
            }
        }
        TaskStatus::Failed => {
            let error = record.error.clone().unwrap_or_else(|| {
                ErrorObject::internal("the replica running this task stopped before it finished")
            });
            view.insert("error".to_owned(), json!(error));
            view.insert("statusMessage".to_owned(), json!(error.message));
        }
        TaskStatus::InputRequired => {
            let answered = tasks
                .store
                .answer(&id, record.round, Vec::new(), tasks.settings.ttl)
                .await
                .map_err(|e| ErrorObject::internal(format!("cannot read the task: {e}")))?;
            let open: Map<String, Value> = record
                .input_requests
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|(key, _)| !answered.contains_key(key))
                .collect();
            view.insert("inputRequests".to_owned(), Value::Object(open));
        }
        TaskStatus::Cancelled => {
            view.insert("statusMessage".to_owned(), json!("cancelled by the client"));
        }
        TaskStatus::Working => {
            if let Some(message) = &record.message {
                view.insert("statusMessage".to_owned(), json!(message));
            }
        }
    }
    output(&Value::Object(view))
}

/// `tasks/cancel`: acknowledged for a task in any state (cancelling a finished one changes
/// nothing).
pub(in crate::server) async fn cancel_task<B: Backend>(
    core: &Core<B>,
    params: TaskParams,
    caller: &Principal,
) -> MethodResult {
    let tasks = &core.settings.tasks;
    let id = params.task_id;
    let (mut record, cancelled) = tasks.load(&id, &owner_of(caller)).await?;
    if cancelled || record.seen(false).is_terminal() {
        return ack();
    }
    tasks
        .store
        .cancel(&id, tasks.settings.ttl)
        .await
        .map_err(|e| ErrorObject::internal(format!("cannot cancel the task: {e}")))?;
    let here = tasks.running().get(&id).map(|(_, c)| Arc::clone(c));
    if let Some(cancellation) = here {
        cancellation.cancel();
    } else if record.status == TaskStatus::InputRequired {
        // Nothing runs: it waits for answers.
        record.status = TaskStatus::Cancelled;
        record.updated = now_ms();
        record.input_requests = None;
        if let Err(e) = tasks.save(&id, &record).await {
            tracing::warn!(task = %id, "could not record the cancellation: {e}");
        }
    }
    ack()
}

/// `tasks/update`: answers to a task's questions. Answers to questions it did not ask are
/// ignored; when the last open question is answered, the call runs again with them all.
pub(in crate::server) async fn update_task<B: Backend>(
    core: &Core<B>,
    params: UpdateTaskParams,
    caller: &Principal,
) -> MethodResult {
    let tasks = Arc::clone(&core.settings.tasks);
    let id = params.task_id;
    if params.input_responses.len() > MAX_INPUT_RESPONSES {
        return Err(ErrorObject::invalid_params(format!(
            "`inputResponses` has {} entries; at most {MAX_INPUT_RESPONSES} are taken",
            params.input_responses.len()
        )));
    }
    let (record, cancelled) = tasks.load(&id, &owner_of(caller)).await?;
    if cancelled || record.status != TaskStatus::InputRequired {
        return ack();
    }
    let asked = record.input_requests.clone().unwrap_or_default();
    let mut bytes = 0usize;
    let mut given = Vec::new();
    for (key, answer) in params.input_responses {
        let Some(question) = asked.get(&key) else {
            continue;
        };
        // An answer that cannot answer its question is refused now, and the task keeps
        // waiting for a good one.
        if let Some(kind) = question["method"]
            .as_str()
            .and_then(ServerRequest::from_method)
            && let Err(why) = kind.check_answer(&answer)
        {
            return Err(ErrorObject::invalid_params(format!(
                "`inputResponses.{key}` {why}"
            )));
        }
        let encoded = serde_json::to_vec(&answer)
            .map_err(|e| ErrorObject::invalid_params(format!("`inputResponses.{key}`: {e}")))?;
        bytes = bytes.saturating_add(encoded.len());
        given.push((key, encoded));
    }
    if bytes > MAX_INPUT_RESPONSE_BYTES {
        return Err(ErrorObject::invalid_params(format!(
            "`inputResponses` is {bytes} bytes; at most {MAX_INPUT_RESPONSE_BYTES} are taken"
        )));
    }
    // The last answer restarts the call: refused while the caller runs its most tasks or
    // calls, before anything is recorded, so the client can send the answers again later.
    if !tasks.has_room(&record.owner) {
        return Err(tasks.over_bound());
    }
    let place = core
        .settings
        .budgets
        .take(caller, Budgeted::Calls, 1)
        .map_err(|over| over.error())?;
    let store_error = |e: String| ErrorObject::internal(format!("cannot update the task: {e}"));
    let answered = tasks
        .store
        .answer(&id, record.round, given, tasks.settings.ttl)
        .await
        .map_err(store_error)?;
    if asked.keys().any(|key| !answered.contains_key(key)) {
        return ack();
    }
    if !tasks
        .store
        .claim(&id, record.round, tasks.settings.ttl)
        .await
        .map_err(store_error)?
    {
        return ack();
    }
    resume(core, tasks, id, record, answered, place, caller).await;
    ack()
}

/// Run a task's call again with the answers to its questions, holding `place` among its
/// caller's running calls.
async fn resume<B: Backend>(
    core: &Core<B>,
    tasks: Arc<Tasks>,
    id: String,
    mut record: Record,
    answered: BTreeMap<String, Vec<u8>>,
    place: Option<Held>,
    caller: &Principal,
) {
    let started = restart(core, &tasks, &id, &record, answered, place, caller);
    let launched = match started {
        Ok(started) => started,
        Err(error) => {
            record.conclude(Conclusion::Failed(error));
            if let Err(e) = tasks.save(&id, &record).await {
                tracing::warn!(task = %id, "could not record the task's failure: {e}");
            }
            return;
        }
    };
    record.status = TaskStatus::Working;
    record.updated = now_ms();
    record.lease = lease_until();
    record.input_requests = None;
    record.message = None;
    if let Err(e) = tasks.save(&id, &record).await {
        tracing::warn!(task = %id, "could not record that the task runs again: {e}");
    }
    let settings = Arc::clone(&core.settings);
    tokio::spawn(supervise(
        tasks,
        settings,
        Run {
            id,
            record,
            launched,
        },
    ));
}

/// Start the call of `record` again, as the retry of its last input round.
fn restart<B: Backend>(
    core: &Core<B>,
    tasks: &Tasks,
    id: &str,
    record: &Record,
    answered: BTreeMap<String, Vec<u8>>,
    place: Option<Held>,
    caller: &Principal,
) -> Result<Launched, ErrorObject> {
    let params = RawValue::from_string(record.params.clone())
        .map_err(|e| ErrorObject::internal(format!("the task's call is damaged: {e}")))?;
    let call: CallToolParams = parse_params("tools/call", Some(&params))?;
    let binding = Binding::new(
        &Method::CallTool,
        Some(&Value::String(record.tool.clone())),
        Some(&params),
        caller,
    )?;
    let responses: Map<String, Value> = answered
        .into_iter()
        .filter_map(|(k, v)| serde_json::from_slice(&v).ok().map(|v| (k, v)))
        .collect();
    let raw = |value: &Value| serde_json::value::to_raw_value(value).ok();
    let retry = RetryParams {
        input_responses: raw(&Value::Object(responses)),
        request_state: record
            .request_state
            .as_ref()
            .and_then(|s| raw(&Value::String(s.clone()))),
    };
    let capabilities = record
        .capabilities
        .clone()
        .and_then(|c| RawValue::from_string(c).ok());
    let round = Arc::new(InputRound::begin(
        &retry,
        || Ok(binding.clone()),
        capabilities,
        &core.settings.state_key,
        core.settings.max_input_rounds,
    )?);
    let cancellation = tasks.start(id, &record.owner)?;
    // No client waits on this run: its messages go nowhere.
    let (outbound, _) = tokio::sync::mpsc::channel(1);
    let ctx = RequestContext::new(
        Client::V2026(Arc::new(V2026Client::new(None, Some(Arc::clone(&round))))),
        outbound,
        None,
        Arc::clone(&cancellation),
        caller.clone(),
    )
    .for_task();
    ctx.finish();
    // Run again later: resolved in the catalog of the moment, and checked there.
    Ok(Launched::start(
        Arc::clone(core.backend()),
        ClientRequest::CallTool(call),
        None,
        ctx,
        round,
        binding,
        cancellation,
        place,
    ))
}
