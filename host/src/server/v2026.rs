//! The 2026-07-28 (stateless) side of a session: every request stands alone. Its envelope is
//! checked by the revision's ladder, it runs with what its own `_meta` declared, its results
//! carry `resultType` (and caching hints), and a plugin's questions to the client end the round
//! with `input_required` (see [`super::mrtr`]).

use std::sync::Arc;

use super::audit::{AuditOutcome, AuditSlot};
use super::context::{Cancellation, Client, Outbound, RequestContext, V2026Client};
use super::dispatch::dispatch;
use super::mrtr::{Binding, InputRound, RoundEnd};
use super::session::{Answer, Revision, Session, Status, answer};
use super::tasks::{TaskCall, declares_tasks, missing_extension};
use super::v2025::to_raw;
use super::{Backend, MethodOutput, TaskUse};
use crate::principal::Principal;
use crate::protocol::ErrorObject;
use crate::protocol::jsonrpc::encode_error;
use crate::protocol::mcp::LogLevel;
use crate::protocol::request::{ClientRequest, Method, TypedRequest};
use crate::protocol::v2026::{self, CacheHints, DiscoverResult, MirrorHeaders, Refusal};

impl<B: Backend> Session<B> {
    /// Whether this server serves `method` to 2026-07-28 clients (its capability is declared).
    fn serves(&self, method: &Method) -> bool {
        let offers = self.backend().offers();
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
        &self,
        request: &TypedRequest,
        headers: Option<&MirrorHeaders>,
    ) -> Result<(), v2026::Refused> {
        let (Some(headers), Method::CallTool) = (headers, &request.method) else {
            return Ok(());
        };
        let Some(name) = request.target.as_ref().and_then(serde_json::Value::as_str) else {
            return Ok(());
        };
        let params = self.backend().tool_headers(name);
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
        v2026::check_params(&params, arguments.as_ref(), &headers.params)
    }

    /// Answer one 2026-07-28 request. `place` (its caller's place among its running calls,
    /// for a request that runs a plugin) is held until it is answered, or handed to its call
    /// when that becomes a task.
    #[allow(
        clippy::too_many_arguments,
        reason = "one request's parts, passed through once"
    )]
    pub(super) async fn v2026_request(
        &self,
        request: TypedRequest,
        headers: Option<MirrorHeaders>,
        call_id: Option<Arc<str>>,
        outbound: Outbound,
        cancellation: Arc<Cancellation>,
        caller: Principal,
        audit: Arc<AuditSlot>,
        place: Option<super::Held>,
    ) -> Option<Answer> {
        let checked =
            v2026::check(&request, headers.as_ref(), &|m| self.serves(m)).and_then(|envelope| {
                self.check_params(&request, headers.as_ref())
                    .map(|()| envelope)
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
        let settings = Arc::clone(&self.settings);
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
            .with_session(self.id())
        };
        let outcome = match body {
            ClientRequest::Listen(p) => {
                return self
                    .listen(id, p.notifications, outbound, cancellation, &caller)
                    .await;
            }
            ClientRequest::Discover => {
                // What went wrong at startup (plugins skipped, names refused), as warnings on
                // this request's stream, for a client that asked for them (`logLevel`).
                let context = context(None);
                for problem in self.backend().startup_problems() {
                    context.log("mcpbox", LogLevel::Warning, &problem).await;
                }
                to_raw(&DiscoverResult::new(
                    self.backend().offers().v2026_capabilities(),
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
            ClientRequest::GetTask(p) => self.get_task(p, &caller).await,
            ClientRequest::UpdateTask(p) => self.update_task(p, &caller).await,
            ClientRequest::CancelTask(p) => self.cancel_task(p, &caller).await,
            ClientRequest::CallTool(p)
                if self.backend().task_use(&p.name) == TaskUse::Required
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
                        match self.backend().task_use(&p.name) {
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
                    let outcome = self
                        .call_as_task(task, body, round, bound, ctx, place)
                        .await;
                    audit.outcome(AuditOutcome::of(&outcome));
                    return Some(answer(&id, outcome, Revision::V2026));
                }
                let read = matches!(body, ClientRequest::ReadResource(_));
                let ctx = context(Some(Arc::clone(&round)));
                let outcome = dispatch(&**self.backend(), body, ctx.clone()).await;
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
                    public: !self.backend().lists_vary_by_caller(),
                });
                let ctx = context(None);
                let result = dispatch(&**self.backend(), body, ctx.clone()).await;
                ctx.finish();
                result.map(|output| complete(&output, cache))
            }
        };
        let outcome = outcome.map_err(v2026::map_error);
        audit.outcome(AuditOutcome::of(&outcome));
        Some(answer(&id, outcome, Revision::V2026))
    }
}

/// `output` as a complete result of this revision (see [`v2026::complete`]).
fn complete(output: &MethodOutput, cache: Option<CacheHints>) -> MethodOutput {
    MethodOutput {
        body: v2026::complete(&output.body, cache),
        is_error: output.is_error,
    }
}
