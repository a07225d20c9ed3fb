//! The 2026-07-28 revision, whole: its [`Handler`], [`V2026`]. Every request stands alone
//! (the revision is stateless, so the handler keeps nothing). Its envelope is checked by the
//! revision's ladder, it runs with what its own `_meta` declared, its results carry
//! `resultType` (and caching hints), and a plugin's questions to the client end the round
//! with `input_required` (see [`super::mrtr`]). Its own methods are in files of their own and
//! dispatched from here: `subscriptions/listen` (`listen`) and the tasks extension (`tasks`).

use std::sync::Arc;

use super::answer::{Answer, Status, answer};
use super::audit::AuditOutcome;
use super::context::{Client, RequestContext, V2026Client};
use super::dispatch::dispatch;
use super::handler::{Core, Handler, Incoming, to_raw};
use super::listen::listen;
use super::mrtr::{Binding, InputRound, RoundEnd};
use super::tasks::{self, TaskCall, declares_tasks, missing_extension};
use super::{Backend, MethodOutput, Revision, Target, TaskUse};
use crate::protocol::ErrorObject;
use crate::protocol::jsonrpc::encode_error;
use crate::protocol::mcp::LogLevel;
use crate::protocol::request::{ClientRequest, Method, TypedRequest};
use crate::protocol::v2026::{self, CacheHints, DiscoverResult, MirrorHeaders, Refusal};

/// The 2026-07-28 handler.
pub(super) struct V2026;

impl V2026 {
    /// Whether this server serves `method` to 2026-07-28 clients (its capability is declared).
    fn serves<B: Backend>(core: &Core<B>, method: &Method) -> bool {
        let offers = core.backend().offers();
        match method {
            Method::ListTools | Method::CallTool => offers.tools,
            Method::ListPrompts | Method::GetPrompt => offers.prompts,
            Method::ListResources | Method::ListResourceTemplates | Method::ReadResource => {
                offers.resources
            }
            Method::Complete => offers.completions,
            Method::Listen => offers.list_changed,
            Method::ListSkills | Method::GetSkill | Method::ReadDirectory => offers.skills,
            Method::GetTask | Method::UpdateTask | Method::CancelTask => offers.tasks,
            _ => true,
        }
    }

    /// A `tools/call`'s `Mcp-Param-*` headers against its arguments, for the tool's
    /// `x-mcp-header` arguments (HTTP only; the body is read again only for such a tool).
    fn check_params(
        resolved: Option<&impl Target>,
        request: &TypedRequest,
        headers: Option<&MirrorHeaders>,
    ) -> Result<(), v2026::Refused> {
        let (Some(headers), Method::CallTool, Some(resolved)) =
            (headers, &request.method, resolved)
        else {
            return Ok(());
        };
        let params = resolved.tool_headers();
        if params.is_empty() {
            return Ok(());
        }
        #[derive(serde::Deserialize)]
        struct Call {
            #[serde(default)]
            arguments: Option<serde_json::Map<String, serde_json::Value>>,
        }
        let arguments = request
            .params
            .as_deref()
            .and_then(|raw| serde_json::from_str::<Call>(raw.get()).ok())
            .and_then(|call| call.arguments);
        v2026::check_params(params, arguments.as_ref(), &headers.params)
    }
}

impl<B: Backend> Handler<B> for V2026 {
    /// Answer one 2026-07-28 request. Its `place` (its caller's place among its running
    /// calls, for a request that runs a plugin) is held until it is answered, or handed to its
    /// call when that becomes a task.
    async fn handle(&self, core: &Core<B>, incoming: Incoming<B::Target>) -> Option<Answer> {
        let Incoming {
            request,
            resolved,
            headers,
            call_id,
            outbound,
            cancellation,
            caller,
            audit,
            place,
        } = incoming;
        let checked = v2026::check(&request, headers.as_ref(), &|m| Self::serves(core, m))
            .and_then(|envelope| {
                Self::check_params(resolved.as_ref(), &request, headers.as_ref()).map(|()| envelope)
            });
        let envelope = match checked {
            Ok(envelope) => envelope,
            Err(refused) => {
                tracing::debug!(id = %request.id, code = refused.error.code, "refused: {}", refused.error.message);
                audit.outcome(AuditOutcome::Error(refused.error.code));
                return Some(Answer::refused(
                    encode_error(Some(&request.id), &refused.error),
                    match refused.refusal {
                        Refusal::BadRequest => Status::BadRequest,
                        Refusal::NotFound => Status::NotFound,
                    },
                ));
            }
        };
        let TypedRequest {
            id,
            method,
            mut meta,
            retry,
            target,
            body,
            params,
        } = request;
        // Computed only when a state is verified or issued, and then once: it reads the params
        // again, as a tree, and a retry that asks again needs it twice.
        let bound = std::sync::OnceLock::new();
        let binding = || {
            bound
                .get_or_init(|| Binding::new(&method, target.as_ref(), params.as_deref(), &caller))
                .clone()
        };
        let body = match body {
            Ok(body) => body,
            Err(error) => {
                audit.outcome(AuditOutcome::Error(error.code));
                return Some(answer(&id, Err(error), Revision::V2026));
            }
        };
        let settings = Arc::clone(&core.settings);
        let context = |inputs: Option<Arc<InputRound>>| {
            RequestContext::new(
                Client::V2026(Arc::new(V2026Client::new(envelope.log_level, inputs))),
                outbound.clone(),
                meta.progress_token.clone(),
                Arc::clone(&cancellation),
                caller.clone(),
            )
            .with_call_id(call_id.clone())
            .with_audit(Arc::clone(&audit))
            .with_session(core.id())
        };
        let outcome = match body {
            ClientRequest::Listen(p) => {
                return listen(core, id, p.notifications, outbound, cancellation, &caller).await;
            }
            ClientRequest::Discover => {
                // What went wrong at startup (plugins skipped, names refused), as warnings on
                // this request's stream, for a client that asked for them (`logLevel`).
                let context = context(None);
                for problem in core.backend().startup_problems() {
                    context.log("mcpbox", LogLevel::Warning, &problem).await;
                }
                to_raw(&DiscoverResult::new(
                    core.backend().offers().v2026_capabilities(),
                    settings.list_ttl_ms,
                ))
            }
            ClientRequest::GetTask(_)
            | ClientRequest::UpdateTask(_)
            | ClientRequest::CancelTask(_)
                if !declares_tasks(meta.client_capabilities.as_deref()) =>
            {
                Err(missing_extension())
            }
            ClientRequest::GetTask(p) => tasks::get_task(core, p, &caller).await,
            ClientRequest::UpdateTask(p) => tasks::update_task(core, p, &caller).await,
            ClientRequest::CancelTask(p) => tasks::cancel_task(core, p, &caller).await,
            ClientRequest::CallTool(_)
                if task_use(resolved.as_ref()) == TaskUse::Required
                    && !declares_tasks(meta.client_capabilities.as_deref()) =>
            {
                Err(missing_extension())
            }
            body @ (ClientRequest::CallTool(_)
            | ClientRequest::GetPrompt(_)
            | ClientRequest::ReadResource(_)) => {
                // A tool that may run as a task, for a request that declared the extension.
                let task = match &body {
                    ClientRequest::CallTool(p)
                        if declares_tasks(meta.client_capabilities.as_deref()) =>
                    {
                        match task_use(resolved.as_ref()) {
                            TaskUse::Never => None,
                            task_use => Some(TaskCall {
                                tool: p.name.clone(),
                                params: params.clone(),
                                capabilities: meta.client_capabilities.clone(),
                                required: task_use == TaskUse::Required,
                            }),
                        }
                    }
                    _ => None,
                };
                let round = match InputRound::begin(
                    &retry,
                    binding,
                    meta.client_capabilities.take(),
                    &settings.state_key,
                    settings.max_input_rounds,
                ) {
                    Ok(round) => Arc::new(round),
                    Err(error) => {
                        audit.outcome(AuditOutcome::Error(error.code));
                        return Some(answer(&id, Err(error), Revision::V2026));
                    }
                };
                if let Some(task) = task {
                    let bound = match binding() {
                        Ok(bound) => bound,
                        Err(error) => {
                            audit.outcome(AuditOutcome::Error(error.code));
                            return Some(answer(&id, Err(error), Revision::V2026));
                        }
                    };
                    let ctx = context(Some(Arc::clone(&round)));
                    let outcome =
                        tasks::call_as_task(core, task, body, resolved, round, bound, ctx, place)
                            .await;
                    audit.outcome(AuditOutcome::of(&outcome));
                    return Some(answer(&id, outcome, Revision::V2026));
                }
                let read = matches!(body, ClientRequest::ReadResource(_));
                let ctx = context(Some(Arc::clone(&round)));
                let outcome = dispatch(&**core.backend(), body, resolved, ctx.clone()).await;
                ctx.finish();
                drop(ctx);
                let failed = outcome.as_ref().map_or(true, |output| output.is_error);
                let end = match Arc::try_unwrap(round) {
                    Ok(round) => round.end(
                        binding,
                        failed,
                        &settings.state_key,
                        settings.state_lifetime,
                    ),
                    // Nothing holds the round once the call returned; should a host call still
                    // hold it, the answer cannot be trusted.
                    Err(_) => RoundEnd::InvalidAnswer(
                        "the call ended with a question still open".to_owned(),
                    ),
                };
                match end {
                    RoundEnd::Complete => {
                        let cache = read.then_some(CacheHints {
                            ttl_ms: settings.read_ttl_ms,
                            public: false,
                        });
                        outcome.map(|output| complete(&output, cache))
                    }
                    RoundEnd::InputRequired(result) => {
                        tracing::debug!(%id, "asked the client for input");
                        to_raw(&result)
                    }
                    RoundEnd::MissingCapabilities(missing) => {
                        Err(v2026::missing_capabilities(&missing))
                    }
                    RoundEnd::InvalidAnswer(problem) => Err(ErrorObject::invalid_params(problem)),
                    RoundEnd::Refused(error) => Err(error),
                }
            }
            body => {
                // Lists that differ by caller (some item requires a scope) are the caller's own.
                let cache = (!matches!(body, ClientRequest::Complete(_))).then(|| CacheHints {
                    ttl_ms: settings.list_ttl_ms,
                    public: !core.backend().lists_vary_by_caller(),
                });
                let ctx = context(None);
                let result = dispatch(&**core.backend(), body, resolved, ctx.clone()).await;
                ctx.finish();
                result.map(|output| complete(&output, cache))
            }
        };
        let outcome = outcome.map_err(v2026::map_error);
        audit.outcome(AuditOutcome::of(&outcome));
        Some(answer(&id, outcome, Revision::V2026))
    }
}

/// Whether the tool a `tools/call` resolved to may or must run as a task.
fn task_use(resolved: Option<&impl Target>) -> TaskUse {
    resolved.map_or(TaskUse::Never, Target::task_use)
}

/// `output` as a complete result of this revision (see [`v2026::complete`]).
fn complete(output: &MethodOutput, cache: Option<CacheHints>) -> MethodOutput {
    MethodOutput {
        body: v2026::complete(&output.body, cache),
        is_error: output.is_error,
    }
}
