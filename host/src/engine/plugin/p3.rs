//! Calls into a WASI 0.3 plugin (`mcpbox:plugin@0.3.0`): the same instance, store, grants
//! and limits as a 0.1 call (`instantiate`, `guarded`, `finish`, `end`), run inside
//! `Store::run_concurrent`, where the plugin's tasks may await host calls concurrently.
//!
//! A tool answers at once with a `stream<content>` and a `future` of its result. The host
//! reads both in one loop: each streamed item goes to the client as a progress notification
//! (the only part of a result MCP lets a server send early) and into the final result, before
//! the result's own content. The loop ends when the result arrives (items already received
//! are kept; the stream is then closed), when the client cancels (the host drops its ends: the
//! plugin's next write or its result fails as dropped), or at the deadline: the outer timeout
//! covers every await, since a plugin waiting on the host runs no wasm for epochs to stop.
//!
//! Concurrent work is bounded per call: the store's table of tasks, subtasks, streams and
//! futures may hold at most [`MAX_CONCURRENT_PER_CALL`] entries; past it, the call fails with
//! [`CallError::HandleLimit`] (checked at every epoch tick while wasm runs, and at every item
//! while it waits). A call may stream at most [`MAX_STREAMED_ITEMS`] items and the plugin's
//! result limit in bytes, counted where each item is copied out of the plugin.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::mpsc;
use wasmtime::StoreContextMut;
use wasmtime::component::{
    Accessor, FutureConsumer, FutureReader, Source, StreamConsumer, StreamReader, StreamResult,
};

use super::super::p3::bindings::exports::mcpbox::plugin::{
    completion as completion3, prompts as prompts3, resources as resources3, tools as tools3,
};
use super::*;
use crate::engine::Content;

/// Entries (tasks, subtasks, streams, futures, their waitables) one 0.3 call's store may hold
/// at once: a plugin that spawns unbounded concurrent work fails at this bound instead of
/// growing the host's memory.
pub const MAX_CONCURRENT_PER_CALL: usize = 4096;
/// Content items one 0.3 tool call may stream.
pub const MAX_STREAMED_ITEMS: usize = 10_000;

/// Which 0.3 interfaces a component exports.
#[derive(Clone)]
pub struct Exports3 {
    pub(super) tools: Option<tools3::GuestIndices>,
    pub(super) prompts: Option<prompts3::GuestIndices>,
    pub(super) resources: Option<resources3::GuestIndices>,
    pub(super) completion: Option<completion3::GuestIndices>,
}

impl Exports3 {
    /// The 0.3 interfaces `pre` exports, if any.
    pub(super) fn of(pre: &InstancePre<StoreData>) -> Option<Self> {
        let exports = Self {
            tools: tools3::GuestIndices::new(pre).ok(),
            prompts: prompts3::GuestIndices::new(pre).ok(),
            resources: resources3::GuestIndices::new(pre).ok(),
            completion: completion3::GuestIndices::new(pre).ok(),
        };
        (exports.tools.is_some()
            || exports.prompts.is_some()
            || exports.resources.is_some()
            || exports.completion.is_some())
        .then_some(exports)
    }
}

/// The store's concurrent table is over [`MAX_CONCURRENT_PER_CALL`]: the error that fails the
/// call, recognised by [`call::host_failure`].
pub(super) const TOO_MANY_CONCURRENT: &str = "mcpbox: too many concurrent tasks in one call";

/// Check a 0.3 call's concurrent table at every epoch tick, beside its deadline. The store was
/// armed when the call got it ([`PluginCode::instantiate`]): its fuel is already the budget
/// less what instantiating it took, a spare's included, and is not reset here (resetting it
/// gave a 0.3 call on a spare its instantiation's fuel back).
pub(super) fn arm(store: &mut Store<StoreData>, limits: &Limits) {
    let deadline = Instant::now() + limits.timeout;
    store.epoch_deadline_callback(move |mut ctx| {
        if ctx.concurrent_state_table_size() > MAX_CONCURRENT_PER_CALL {
            return Err(wasmtime::Error::msg(TOO_MANY_CONCURRENT));
        }
        Ok(if Instant::now() >= deadline {
            UpdateDeadline::Interrupt
        } else {
            UpdateDeadline::Yield(1)
        })
    });
}

/// How long a 0.3 call that may keep its instance waits, after its answer, for the tasks it
/// spawned to end.
const SETTLE: Duration = Duration::from_millis(20);

/// Whether every task of the store has ended (a 0.3 plugin's work may outlive its answer),
/// waiting at most [`SETTLE`] if `may_keep` (the instance may serve the caller's next call);
/// without it, the instance goes with the call and nothing is waited for. An instance whose
/// work did not end is not kept: the next call would run that work on its time and fuel.
async fn settle<T: Send>(accessor: &Accessor<T>, may_keep: bool) -> bool {
    if !may_keep {
        return true;
    }
    let ended = std::future::poll_fn(|cx| accessor.poll_no_interesting_tasks(cx));
    tokio::time::timeout(SETTLE, ended).await.is_ok()
}

/// Whether the store holds more concurrent entries than a call may.
fn over_bound<T>(accessor: &Accessor<T>) -> bool {
    accessor.with(|mut access| {
        use wasmtime::AsContextMut;
        access.as_context_mut().concurrent_state_table_size() > MAX_CONCURRENT_PER_CALL
    })
}

/// The host's read end of a tool's content stream: forwards each item to the call's loop,
/// counting what the call has streamed. Everything streamed stays in the result, so the stream
/// may carry no more than a result may hold: past [`MAX_STREAMED_ITEMS`] items or the plugin's
/// result limit in bytes, it forwards the failure instead and drops the stream (the plugin's
/// next write fails). Counting here, where each item is copied out of the plugin, bounds what
/// the host holds however fast the plugin writes and however slowly the call's loop reads: a
/// plugin writing one large string over and over costs it little fuel per write.
struct ContentSink {
    to_loop: mpsc::UnboundedSender<Result<Content, CallError>>,
    items: usize,
    bytes: usize,
    limit_bytes: usize,
}

impl ContentSink {
    /// Count `item`; the failure that ends the stream, if it goes past a bound.
    fn count(&mut self, item: &Content) -> Result<(), CallError> {
        self.items += 1;
        self.bytes = self.bytes.saturating_add(weight(item));
        if self.items > MAX_STREAMED_ITEMS {
            return Err(CallError::Streamed {
                what: format!("{MAX_STREAMED_ITEMS} content items"),
            });
        }
        if self.bytes > self.limit_bytes {
            return Err(CallError::Streamed {
                what: format!(
                    "{} of content, its result limit",
                    human_bytes(self.limit_bytes)
                ),
            });
        }
        Ok(())
    }
}

impl<D> StreamConsumer<D> for ContentSink {
    type Item = Content;

    fn poll_consume(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        mut store: StoreContextMut<D>,
        mut source: Source<'_, Content>,
        _finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        // One item at a time: each is counted before the next is copied out of the plugin.
        let mut items: Vec<Content> = Vec::with_capacity(1);
        source.read(&mut store, &mut items)?;
        for item in items {
            let counted = self.count(&item);
            let over = counted.is_err();
            if self.to_loop.send(counted.map(|()| item)).is_err() || over {
                return Poll::Ready(Ok(StreamResult::Dropped));
            }
        }
        Poll::Ready(Ok(StreamResult::Completed))
    }
}

/// About how many bytes `item` adds to a result: its strings, and its binary data as base64.
fn weight(item: &Content) -> usize {
    let opt = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    match item {
        Content::Text(text) => text.len(),
        Content::Image(media) | Content::Audio(media) => {
            media.data.len().div_ceil(3) * 4 + media.mime_type.len()
        }
        Content::ResourceLink(link) => {
            link.uri.len()
                + link.name.len()
                + opt(&link.title)
                + opt(&link.description)
                + opt(&link.mime_type)
        }
        Content::Embedded(ResourceContents::Text(t)) => {
            t.uri.len() + opt(&t.mime_type) + t.text.len()
        }
        Content::Embedded(ResourceContents::Blob(b)) => {
            b.uri.len() + opt(&b.mime_type) + b.blob.len().div_ceil(3) * 4
        }
    }
}

/// The host's read end of a future: hands its value to the call's loop.
struct Once<T>(Option<tokio::sync::oneshot::Sender<T>>);

impl<D, T: wasmtime::component::Lift + Send + Sync + 'static> FutureConsumer<D> for Once<T> {
    type Item = T;

    fn poll_consume(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        mut store: StoreContextMut<D>,
        mut source: Source<'_, T>,
        _finish: bool,
    ) -> Poll<wasmtime::Result<()>> {
        let mut value = None;
        source.read(&mut store, &mut value)?;
        if let (Some(value), Some(tell)) = (value, self.0.take()) {
            // The loop may have ended (the call was cancelled).
            let _ = tell.send(value);
        }
        Poll::Ready(Ok(()))
    }
}

/// A short text for a progress notification about a streamed item.
fn describe(item: &Content) -> String {
    match item {
        Content::Text(text) => log_line(text, 1024),
        Content::Image(_) => "(an image)".to_owned(),
        Content::Audio(_) => "(audio)".to_owned(),
        Content::ResourceLink(link) => format!("(a link to {})", log_line(&link.uri, 512)),
        Content::Embedded(_) => "(a resource)".to_owned(),
    }
}

/// Keep a streamed item for the result, telling the client of it as progress (by the rule of
/// `RequestContext::progress`: the plugin's own reports keep their values). The sink counted
/// it against the call's bounds.
async fn keep_item(streamed: &mut Vec<Content>, item: Content, reach: &Arc<dyn CallReach>) {
    reach.streamed(describe(&item)).await;
    streamed.push(item);
}

/// Read a tool's stream and result until the result arrives, the client cancels, or the call
/// holds too much; each item is told to `host` as progress.
async fn read_tool_output(
    accessor: &Accessor<StoreData>,
    stream: StreamReader<Content>,
    result: FutureReader<Result<ToolResult, GuestError>>,
    reach: &Arc<dyn CallReach>,
    limit_bytes: usize,
) -> Result<Result<ToolResult, GuestError>, CallError> {
    let (items_tx, mut items_rx) = mpsc::unbounded_channel();
    let sink = ContentSink {
        to_loop: items_tx,
        items: 0,
        bytes: 0,
        limit_bytes,
    };
    let (result_tx, mut result_rx) = tokio::sync::oneshot::channel();
    accessor
        .with(|mut access| {
            stream.pipe(&mut access, sink)?;
            result.pipe(&mut access, Once(Some(result_tx)))
        })
        .map_err(|e| call::host_failure(&e))?;
    let mut streamed = Vec::new();
    let mut check = tokio::time::interval(Duration::from_millis(20));
    let outcome = loop {
        tokio::select! {
            biased;
            value = &mut result_rx => break value,
            Some(item) = items_rx.recv() => keep_item(&mut streamed, item?, reach).await,
            _ = check.tick() => {
                if reach.cancelled() {
                    return Err(CallError::Cancelled);
                }
                if over_bound(accessor) {
                    return Err(CallError::HandleLimit { limit: MAX_CONCURRENT_PER_CALL });
                }
            }
        }
    };
    // Items the plugin wrote before its result (the SDK awaits each write, then drops the
    // stream, then writes the result) are all here by now. Those that came with it (a plugin
    // that writes its items and its result in one go, without waiting in between) go to the
    // client too, before the result.
    while let Ok(item) = items_rx.try_recv() {
        keep_item(&mut streamed, item?, reach).await;
    }
    match outcome {
        Ok(Ok(mut result)) => {
            streamed.append(&mut result.content);
            result.content = streamed;
            Ok(Ok(result))
        }
        Ok(Err(error)) => Ok(Err(error)),
        Err(_) => Err(CallError::Trap(
            "dropped its result without writing it".to_owned(),
        )),
    }
}

impl PluginCode {
    /// The 0.3 exports, if this plugin is a 0.3 component.
    pub(super) fn v3(&self) -> Option<&Exports3> {
        self.exports.v3.as_ref()
    }

    /// [`PluginCode::read_lists`] for a 0.3 plugin: the lists are plain functions, called
    /// inside the concurrent runtime.
    pub(super) async fn read_lists_v3(&self, exports: Exports3) -> Result<PluginLists, CallError> {
        let meter = CallMeter::start(&self.name, CallKind::List, "");
        let denied = Arc::clone(&meter.denied);
        let work = async move |code: &PluginCode| {
            let mut call = code
                .instantiate(Arc::new(Detached), denied, code.limits)
                .await?;
            arm(&mut call.store, &code.limits);
            let tools = match &exports.tools {
                Some(i) => Some(call.load(|s, inst| i.load(s, inst))?),
                None => None,
            };
            let prompts = match &exports.prompts {
                Some(i) => Some(call.load(|s, inst| i.load(s, inst))?),
                None => None,
            };
            let resources = match &exports.resources {
                Some(i) => Some(call.load(|s, inst| i.load(s, inst))?),
                None => None,
            };
            if let Some(i) = &exports.completion {
                call.load(|s, inst| i.load(s, inst))?;
            }
            let out = call
                .store
                .run_concurrent(async |a| -> wasmtime::Result<PluginLists> {
                    let mut lists = PluginLists::default();
                    if let Some(guest) = &tools {
                        lists.tools = guest.call_list_tools(a).await?;
                    }
                    if let Some(guest) = &prompts {
                        lists.prompts = guest.call_list_prompts(a).await?;
                    }
                    if let Some(guest) = &resources {
                        lists.resources = guest.call_list_resources(a).await?;
                        lists.templates = guest.call_list_templates(a).await?;
                    }
                    Ok(lists)
                })
                .await
                .and_then(|lists| lists);
            call.check(out)
        };
        self.guarded(self.limits.timeout, meter, |_| false, self.run(work))
            .await
    }

    /// [`PluginCode::call_tool`] for a 0.3 plugin.
    pub(super) async fn call_tool_v3(
        &self,
        indices: tools3::GuestIndices,
        name: &str,
        arguments: &str,
        reach: Arc<dyn CallReach>,
    ) -> Result<Result<ToolResult, GuestError>, CallError> {
        let meter = CallMeter::start(&self.name, CallKind::Tool, name);
        let denied = Arc::clone(&meter.denied);
        let is_error = |r: &Result<ToolResult, GuestError>| r.as_ref().map_or(true, |r| r.is_error);
        let limits = Limits {
            timeout: if reach.in_task() {
                self.limits.task_timeout
            } else {
                self.limits.timeout
            },
            ..self.limits
        };
        let (name, arguments) = (name.to_owned(), arguments.to_owned());
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(Arc::clone(&reach), denied, limits).await?;
            arm(&mut call.store, &limits);
            let guest = call.load(|s, i| indices.load(s, i))?;
            let keep = call.keep_for.is_some();
            let out = call
                .store
                .run_concurrent(async |a| -> wasmtime::Result<_> {
                    let (stream, result) = guest.call_call_tool(a, name.clone(), arguments).await?;
                    let out =
                        read_tool_output(a, stream, result, &reach, limits.result_bytes).await;
                    Ok((out, settle(a, keep).await))
                })
                .await
                .and_then(|out| out);
            let out = match out {
                Ok((Ok(result), settled)) => {
                    call.left_work = !settled;
                    Ok(result)
                }
                Ok((Err(error), _)) => {
                    log_output(&mut call.store);
                    return Err(error);
                }
                Err(trap) => Err(trap),
            };
            let result = call.finish("tool", &name, out);
            call.end(&result, code);
            result
        };
        self.guarded(limits.timeout, meter, is_error, self.run(work))
            .await
    }

    /// [`PluginCode::get_prompt`] for a 0.3 plugin.
    pub(super) async fn get_prompt_v3(
        &self,
        indices: prompts3::GuestIndices,
        name: &str,
        arguments: &[(String, String)],
        reach: Arc<dyn CallReach>,
    ) -> Result<Result<Vec<PromptMessage>, GuestError>, CallError> {
        let meter = CallMeter::start(&self.name, CallKind::Prompt, name);
        let denied = Arc::clone(&meter.denied);
        let (name, arguments) = (name.to_owned(), arguments.to_vec());
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(reach, denied, code.limits).await?;
            arm(&mut call.store, &code.limits);
            let guest = call.load(|s, i| indices.load(s, i))?;
            let keep = call.keep_for.is_some();
            let out = call
                .store
                .run_concurrent(async |a| {
                    let out = guest.call_get_prompt(a, name.clone(), arguments).await;
                    (out, settle(a, keep).await)
                })
                .await
                .and_then(|(out, settled)| {
                    call.left_work = !settled;
                    out
                });
            let result = call.finish("prompt", &name, out);
            call.end(&result, code);
            result
        };
        self.guarded(self.limits.timeout, meter, Result::is_err, self.run(work))
            .await
    }

    /// [`PluginCode::read_resource`] for a 0.3 plugin.
    pub(super) async fn read_resource_v3(
        &self,
        indices: resources3::GuestIndices,
        uri: &str,
        reach: Arc<dyn CallReach>,
    ) -> Result<Result<Vec<ResourceContents>, GuestError>, CallError> {
        let meter = CallMeter::start(&self.name, CallKind::Resource, "");
        let denied = Arc::clone(&meter.denied);
        let uri = uri.to_owned();
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(reach, denied, code.limits).await?;
            arm(&mut call.store, &code.limits);
            let guest = call.load(|s, i| indices.load(s, i))?;
            let keep = call.keep_for.is_some();
            let out = call
                .store
                .run_concurrent(async |a| {
                    let out = guest.call_read_resource(a, uri.clone()).await;
                    (out, settle(a, keep).await)
                })
                .await
                .and_then(|(out, settled)| {
                    call.left_work = !settled;
                    out
                });
            let result = call.finish("resource", &uri, out);
            call.end(&result, code);
            result
        };
        self.guarded(self.limits.timeout, meter, Result::is_err, self.run(work))
            .await
    }

    /// [`PluginCode::complete`] for a 0.3 plugin.
    pub(super) async fn complete_v3(
        &self,
        indices: completion3::GuestIndices,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: &[(String, String)],
        reach: Arc<dyn CallReach>,
    ) -> Result<Result<CompletionResult, GuestError>, CallError> {
        let meter = CallMeter::start(&self.name, CallKind::Completion, "");
        let denied = Arc::clone(&meter.denied);
        let (reference, argument, value, context) = (
            reference.clone(),
            argument.to_owned(),
            value.to_owned(),
            context.to_vec(),
        );
        let work = async move |code: &PluginCode| {
            let mut call = code.instantiate(reach, denied, code.limits).await?;
            arm(&mut call.store, &code.limits);
            let guest = call.load(|s, i| indices.load(s, i))?;
            let keep = call.keep_for.is_some();
            let out = call
                .store
                .run_concurrent(async |a| {
                    let out = guest
                        .call_complete(a, reference, argument.clone(), value, context)
                        .await;
                    (out, settle(a, keep).await)
                })
                .await
                .and_then(|(out, settled)| {
                    call.left_work = !settled;
                    out
                });
            let result = call.finish("completion", &argument, out);
            call.end(&result, code);
            result
        };
        self.guarded(self.limits.timeout, meter, Result::is_err, self.run(work))
            .await
    }
}
