//! The methods both revisions share (lists, tools, prompts, resources, completion, skills), dispatched
//! to the [`Backend`] in one exhaustive match. What differs by revision (envelope, result
//! decoration, error codes) is the caller's business.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_json::value::RawValue;

use super::{Backend, ListKind, MethodResult, RequestContext};
use crate::protocol::ErrorObject;
use crate::protocol::request::ClientRequest;

/// Run one of the shared methods. `resolved` is what the request resolved to when its checks
/// were made ([`Backend::resolve`]); without it (a task's call run again later), it is
/// resolved now.
pub async fn dispatch<B: Backend>(
    backend: &B,
    request: ClientRequest,
    resolved: Option<B::Target>,
    ctx: RequestContext,
) -> MethodResult {
    let target = match resolved {
        Some(target) => target,
        None => backend.resolve(&request),
    };
    match request {
        ClientRequest::ListTools(p) => {
            backend.list(ListKind::Tools, p.cursor.as_deref(), ctx.caller())
        }
        ClientRequest::ListPrompts(p) => {
            backend.list(ListKind::Prompts, p.cursor.as_deref(), ctx.caller())
        }
        ClientRequest::ListResources(p) => {
            backend.list(ListKind::Resources, p.cursor.as_deref(), ctx.caller())
        }
        ClientRequest::ListResourceTemplates(p) => backend.list(
            ListKind::ResourceTemplates,
            p.cursor.as_deref(),
            ctx.caller(),
        ),
        ClientRequest::CallTool(p) => {
            let empty = RawValue::from_string("{}".to_owned()).unwrap_or_default();
            let arguments = match &p.arguments {
                None => &*empty,
                Some(a) if a.get() == "null" => &*empty,
                Some(a) if a.get().starts_with('{') => a,
                Some(_) => {
                    return Err(ErrorObject::invalid_params(
                        "`arguments` must be a JSON object",
                    ));
                }
            };
            backend.call_tool(target, &p.name, arguments, ctx).await
        }
        ClientRequest::GetPrompt(p) => {
            let arguments = string_arguments(p.arguments.unwrap_or_default())?;
            backend.get_prompt(target, &p.name, arguments, ctx).await
        }
        ClientRequest::ReadResource(p) => backend.read_resource(target, &p.uri, ctx).await,
        ClientRequest::Complete(p) => backend.complete(target, p, ctx).await,
        ClientRequest::ListSkills(p) => {
            backend.list(ListKind::Skills, p.cursor.as_deref(), ctx.caller())
        }
        ClientRequest::GetSkill(p) => backend.get_skill(target, &p.uri, &ctx),
        ClientRequest::ReadDirectory(p) => {
            backend.read_directory(target, &p.uri, p.cursor.as_deref(), &ctx)
        }
        ClientRequest::Initialize(_)
        | ClientRequest::Ping
        | ClientRequest::Discover
        | ClientRequest::Listen(_)
        | ClientRequest::Subscribe(_)
        | ClientRequest::Unsubscribe(_)
        | ClientRequest::SetLevel(_)
        | ClientRequest::GetTask(_)
        | ClientRequest::UpdateTask(_)
        | ClientRequest::CancelTask(_) => Err(ErrorObject::internal(
            "a session method reached the shared dispatch",
        )),
        ClientRequest::Unknown(method) => Err(ErrorObject::method_not_found(&method)),
    }
}

/// Prompt arguments are strings; anything else is -32602 naming the argument.
fn string_arguments(
    arguments: BTreeMap<String, Value>,
) -> Result<BTreeMap<String, String>, ErrorObject> {
    arguments
        .into_iter()
        .map(|(name, value)| match value {
            Value::String(s) => Ok((name, s)),
            other => Err(ErrorObject::invalid_params(format!(
                "prompt argument `{name}` must be a string, not {other}"
            ))),
        })
        .collect()
}
