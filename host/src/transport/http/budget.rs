//! Bytes of requests in flight, per caller (`[budgets] request_bytes`) and in all
//! (`--max-request-bytes-in-flight`): a POST's bytes are charged to its caller first, then
//! to the global bound, before they are held, and stay charged while it is served, to the
//! end of its event stream when it answers with one ([`reserve_request_bytes`]). A body that
//! declares its length has it reserved before it is read; one that does not (chunked) is
//! charged chunk by chunk as it arrives. A caller at its budget is refused (429) without
//! taking any of the global room, so bodies one caller holds half-sent never take the
//! others' room; past the global bound, 503 with `Retry-After`.
//!
//! A layer over the gated routes, inside the gate ([`super::gate`]): the caller is known
//! before a byte of the body is read. Bodies are size-limited (413 past `--max-body-bytes`).
//!
//! It knows nothing of sessions.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::RequestExt as _;
use axum::body::{Body, BodyDataStream, Bytes};
use axum::extract::{DefaultBodyLimit, FromRequest as _, Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use tokio_stream::{Stream, StreamExt as _};

use super::gate::Admitted;
use super::reply::{at_limit, over_budget};
use super::{App, Shared};
use crate::principal::Principal;
use crate::protocol::jsonrpc::sniff_id;
use crate::server::{AtLimit, Backend, Budgeted, Held, OverBudget, Share};

/// Charge a POST's bytes to its caller's budget and then to the global bound — its declared
/// length before its body is read, or each chunk as it arrives when it declares none — read
/// the body, and hold the bytes while the request is served (to the end of its event
/// stream, when it answers with one). Over the caller's budget: 429, answering the request's
/// id when its first bytes hold it; past the global bound: 503 with `Retry-After`. Other
/// methods pass untouched.
pub(super) async fn reserve_request_bytes<B: Backend>(
    State(app): Shared<B>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    // Without the gate's admission the handler refuses (500); nothing to charge.
    let Some(caller) = request
        .extensions()
        .get::<Admitted>()
        .map(|a| a.caller.clone())
    else {
        return next.run(request).await;
    };
    let most = app.config.max_body_bytes.max(1);
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut charge = Charge::new(&app, caller);
    let Some(length) = declared else {
        return charged_by_chunk(request, charge, most, next).await;
    };
    let amount = length.clamp(1, most);
    if let Err(refused) = charge.take(amount) {
        return refuse(&app, request.into_body(), refused, amount, most).await;
    }
    match read_body(request).await {
        Ok(request) => hold_while_streaming(next.run(request).await, (charge.own, charge.global)),
        Err(refused) => refused,
    }
}

/// A body that declares no length: read with each chunk charged as it arrives
/// ([`Charged`]), then served holding what it was charged.
async fn charged_by_chunk(request: Request, charge: Charge, most: usize, next: Next) -> Response {
    let charge = Arc::new(Mutex::new(charge));
    let (parts, body) = request.into_parts();
    let charged = Charged {
        body: Some(body.into_data_stream()),
        charge: Arc::clone(&charge),
        most,
    };
    let read = read_body(Request::from_parts(parts, Body::from_stream(charged))).await;
    let (own, global, refused, head) = {
        let mut charge = charge.lock().unwrap_or_else(PoisonError::into_inner);
        (
            charge.own.take(),
            charge.global.take(),
            charge.refused.take(),
            std::mem::take(&mut charge.head),
        )
    };
    match (read, refused) {
        (_, Some(Refused::OverBudget(over))) => over_budget(sniff_id(&head).as_ref(), &over),
        (_, Some(Refused::AtLimit(at))) => at_limit(&at),
        (Err(refused), None) => refused,
        (Ok(request), None) => hold_while_streaming(next.run(request).await, (own, global)),
    }
}

/// Why a request's bytes were refused.
#[derive(Debug)]
enum Refused {
    /// Its caller is at its budget (429).
    OverBudget(OverBudget),
    /// The process is at its bound (503).
    AtLimit(AtLimit),
}

/// What ends a [`Charged`] body whose chunk was refused (the refusal itself is kept in its
/// [`Charge`]).
#[derive(Debug, thiserror::Error)]
#[error("the request's bytes were refused")]
struct ChunkRefused;

/// The bytes one request holds: of its caller's budget (none for a caller without one) and
/// of the global bound, given back when dropped.
struct Charge {
    budgets: Arc<crate::server::Budgets>,
    global: Option<Share>,
    own: Option<Held>,
    caller: Principal,
    capacity: Arc<crate::server::Capacity>,
    /// The body's first bytes (up to [`ID_HEAD_BYTES`]), kept while it is charged chunk by
    /// chunk: a refusal mid-body answers the id they hold.
    head: Vec<u8>,
    /// Set when a chunk was refused.
    refused: Option<Refused>,
}

impl Charge {
    fn new<B>(app: &App<B>, caller: Principal) -> Self {
        Self {
            budgets: Arc::clone(&app.config.session.budgets),
            global: None,
            own: None,
            caller,
            capacity: Arc::clone(&app.config.session.limits.request_bytes),
            head: Vec::new(),
            refused: None,
        }
    }

    /// Charge `amount` more bytes: to the caller first (so a caller at its budget takes none
    /// of the global room), then globally.
    fn take(&mut self, amount: usize) -> Result<(), Refused> {
        match &mut self.own {
            Some(own) => own.grow(amount).map_err(Refused::OverBudget)?,
            None => {
                self.own = self
                    .budgets
                    .take(&self.caller, Budgeted::RequestBytes, amount)
                    .map_err(Refused::OverBudget)?;
            }
        }
        match &mut self.global {
            Some(global) => global.grow(amount).map_err(Refused::AtLimit)?,
            None => self.global = Some(self.capacity.take(amount).map_err(Refused::AtLimit)?),
        }
        Ok(())
    }
}

/// How much of a refused body is read to find its id: JSON-RPC clients put it first (most)
/// or last (the TypeScript SDK), so a small request's whole body, a large one's head.
const ID_HEAD_BYTES: usize = 16 << 10;

/// How long reading that much may take before the refusal goes without the id.
const ID_READ_TIME: Duration = Duration::from_secs(2);

/// A body charged chunk by chunk as it arrives. A refused chunk ends it with an error (the
/// refusal is in the [`Charge`]), and the rest of the body is read and thrown away
/// ([`discard_stream`]) so the client reads the refusal.
struct Charged {
    body: Option<BodyDataStream>,
    charge: Arc<Mutex<Charge>>,
    most: usize,
}

impl Stream for Charged {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let chunk = match Pin::new(body).poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(chunk))) => chunk,
            // A broken body: read_body answers it as it does any other.
            Poll::Ready(Some(Err(error))) => {
                self.body = None;
                return Poll::Ready(Some(Err(error)));
            }
            Poll::Ready(None) => return Poll::Ready(None),
        };
        let mut charge = self.charge.lock().unwrap_or_else(PoisonError::into_inner);
        let room = ID_HEAD_BYTES.saturating_sub(charge.head.len());
        charge
            .head
            .extend_from_slice(&chunk[..room.min(chunk.len())]);
        match charge.take(chunk.len()) {
            Ok(()) => Poll::Ready(Some(Ok(chunk))),
            Err(refused) => {
                charge.refused = Some(refused);
                drop(charge);
                if let Some(rest) = self.body.take() {
                    discard_stream(rest, self.most);
                }
                Poll::Ready(Some(Err(axum::Error::new(ChunkRefused))))
            }
        }
    }
}

/// The answer to a request refused before its body (of `length` bytes) was read: 503 at the
/// global bound, or 429 over its caller's budget answering its id when the body's first
/// bytes hold it (read within [`ID_READ_TIME`], and only with room for them in the global
/// bound). The rest of the body is read and thrown away.
async fn refuse<B>(
    app: &App<B>,
    body: Body,
    refused: Refused,
    length: usize,
    most: usize,
) -> Response {
    let over = match refused {
        Refused::AtLimit(at) => {
            discard_stream(body.into_data_stream(), most);
            return at_limit(&at);
        }
        Refused::OverBudget(over) => over,
    };
    let mut chunks = body.into_data_stream();
    let mut head = Vec::new();
    let wanted = length.min(ID_HEAD_BYTES);
    if let Ok(_room) = app.config.session.limits.request_bytes.take(wanted) {
        let _ = tokio::time::timeout(ID_READ_TIME, async {
            while head.len() < wanted {
                let Some(Ok(chunk)) = chunks.next().await else {
                    break;
                };
                let room = wanted - head.len();
                head.extend_from_slice(&chunk[..room.min(chunk.len())]);
            }
        })
        .await;
    }
    discard_stream(chunks, most);
    over_budget(sniff_id(&head).as_ref(), &over)
}

/// `response`, holding `held` to the end of its body when it is an event stream (dropped at
/// once otherwise, the response being complete).
pub(super) fn hold_while_streaming<T: Send + Sync + 'static>(
    response: Response,
    held: T,
) -> Response {
    let streaming = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !streaming {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = Body::from_stream(body.into_data_stream().map(move |chunk| {
        let _held = &held;
        chunk
    }));
    Response::from_parts(parts, body)
}

/// Read the whole body of `request` within the route's body limit, exactly as the `Bytes`
/// extractor does (the same 413 and messages), and hand it on already read.
async fn read_body(request: Request) -> Result<Request, Response> {
    let (parts, body) = request.with_limited_body().into_parts();
    // The body is already limited: the probe must not add axum's default limit on top.
    let mut probe = Request::new(body);
    DefaultBodyLimit::disable().apply(&mut probe);
    match Bytes::from_request(probe, &()).await {
        Ok(bytes) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Err(rejection) => Err(rejection.into_response()),
    }
}

/// How long the body of a refused request is read and thrown away.
const DISCARD_TIME: Duration = Duration::from_secs(10);

/// Read and throw away the rest of a body refused before it was read, at most `most` bytes
/// for at most [`DISCARD_TIME`], holding nothing. A client still sending its body then reads
/// the refusal (and its `Retry-After`); closing on unread bytes would reset the connection
/// under it, and it would see a broken pipe instead.
pub(super) fn discard_stream(mut chunks: BodyDataStream, most: usize) {
    tokio::spawn(async move {
        let mut read = 0usize;
        let _ = tokio::time::timeout(DISCARD_TIME, async {
            while let Some(Ok(chunk)) = chunks.next().await {
                read = read.saturating_add(chunk.len());
                if read > most {
                    break;
                }
            }
        })
        .await;
    });
}
