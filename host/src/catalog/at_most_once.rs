//! At-most-once tool calls behind a retrying balancer.
//!
//! With `--call-id-header`, the HTTP transport carries the id a trusted balancer gave each
//! request (HAProxy's `unique-id-header`, kept across its retries of one request) on the
//! request's context; without it, nothing here runs. A `tools/call` of a tool not annotated
//! read-only or idempotent that carries an id is recorded in the call ledger (`kv::calls`, in
//! the shared Redis) before the plugin runs:
//!
//! - a new id: the call runs, its lease is renewed while it runs, and its result is kept for a
//!   few minutes (a run that asked the client for input is forgotten instead: a 2026-07-28
//!   input round runs again by design);
//! - an id seen before for the same call (a retry of a request whose replica died, or whose
//!   answer was lost): the retry waits (at most the tool's time limit and a margin) for the
//!   first run's result and returns it; if that run's replica went away (its lease expired),
//!   or its result was too large to keep, the retry fails with [`CALL_NOT_REPEATED`] — the call
//!   may have run, and it is not run again;
//! - an id seen before for another call (other tool or arguments: a collision or a forged id):
//!   refused (-32600), never answered with that call's result.
//!
//! When the ledger cannot be reached the call is refused without running
//! ([`CALL_NOT_REPEATED`]): it cannot be made safe to retry.

use std::time::Duration;

use serde_json::value::RawValue;

use crate::kv::calls::{CallLedger, Claim, FirstRun, LEASE_RENEWAL, call_digest};
use crate::protocol::ErrorObject;
use crate::protocol::error::{CALL_NOT_REPEATED, INVALID_REQUEST};
use crate::server::{MethodOutput, MethodResult, RequestContext};

/// How much longer than the tool's time limit a retry waits for the first run's result.
const WAIT_MARGIN: Duration = Duration::from_secs(10);

/// What a finished run keeps for its retries.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kept {
    Result(Box<RawValue>),
    Error(ErrorObject),
}

/// A kept result, as its first run returned it. The ledger keeps the result's text alone (the
/// format every replica reads), so whether it reports a failure (`isError`) is read from it.
fn replayed(body: Box<RawValue>) -> MethodOutput {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Flag {
        #[serde(default)]
        is_error: bool,
    }
    let is_error = serde_json::from_str::<Flag>(body.get()).is_ok_and(|f| f.is_error);
    MethodOutput { body, is_error }
}

fn not_repeated(id: &str, why: &str) -> ErrorObject {
    ErrorObject::new(
        CALL_NOT_REPEATED,
        format!("request {id}: {why}; it was not run again"),
    )
}

/// Run the tool call `run` at most once for the request id `id` (see the module doc).
pub(super) async fn at_most_once(
    ledger: &CallLedger,
    id: &str,
    tool: &str,
    arguments: &RawValue,
    time_limit: Duration,
    ctx: &RequestContext,
    run: impl Future<Output = MethodResult>,
) -> MethodResult {
    let digest = call_digest("tools/call", tool, arguments.get());
    match ledger.claim(id, &digest).await {
        Ok(Claim::Fresh) => {}
        Ok(Claim::Seen) => return retried(ledger, id, &digest, time_limit).await,
        Err(e) => {
            tracing::warn!(request = id, tool, "cannot record the call: {e}");
            return Err(ErrorObject::new(
                CALL_NOT_REPEATED,
                format!(
                    "request {id}: the call could not be recorded, so a retry could run it twice; it was not run ({e})"
                ),
            ));
        }
    }
    tokio::pin!(run);
    let outcome = loop {
        tokio::select! {
            outcome = &mut run => break outcome,
            () = tokio::time::sleep(LEASE_RENEWAL) => {
                if let Err(e) = ledger.renew(id, &digest).await {
                    tracing::warn!(request = id, tool, "cannot renew the call's record: {e}");
                }
            }
        }
    };
    let kept = if ctx.asked_client() {
        ledger.forget(id).await
    } else {
        let kept = match &outcome {
            Ok(output) => serde_json::to_vec(&Kept::Result(output.body.clone())),
            Err(error) => serde_json::to_vec(&Kept::Error(error.clone())),
        };
        match kept {
            Ok(bytes) => ledger.finish(id, &digest, &bytes).await,
            Err(e) => Err(crate::kv::KvError::Backend(format!(
                "cannot encode the result: {e}"
            ))),
        }
    };
    if let Err(e) = kept {
        // Its retries find the record expired and fail clearly.
        tracing::warn!(
            request = id,
            tool,
            "cannot keep the call's result for retries: {e}"
        );
    }
    outcome
}

/// A retry of request `id`: the first run's outcome, or a clear failure.
async fn retried(
    ledger: &CallLedger,
    id: &str,
    digest: &str,
    time_limit: Duration,
) -> MethodResult {
    let first = ledger
        .wait(id, digest, time_limit.saturating_add(WAIT_MARGIN))
        .await;
    tracing::debug!(request = id, "a retried request: {first:?}");
    match first {
        Ok(FirstRun::Finished(bytes)) => match serde_json::from_slice::<Kept>(&bytes) {
            Ok(Kept::Result(body)) => Ok(replayed(body)),
            Ok(Kept::Error(error)) => Err(error),
            Err(e) => Err(not_repeated(
                id,
                &format!("the first run's kept result cannot be read ({e})"),
            )),
        },
        Ok(FirstRun::TooLarge) => Err(not_repeated(
            id,
            "this call already ran, but its result was too large to keep for a retry",
        )),
        Ok(FirstRun::Lost) => Err(not_repeated(
            id,
            "this call may already have run on a replica that went away",
        )),
        Ok(FirstRun::StillRunning) => Err(not_repeated(
            id,
            "this call is still running on another replica past its time limit",
        )),
        Ok(FirstRun::OtherCall) => Err(ErrorObject::new(
            INVALID_REQUEST,
            format!(
                "request {id}: this request id was already used for another call (other tool or arguments); refused"
            ),
        )),
        Err(e) => Err(not_repeated(
            id,
            &format!("the first run's outcome cannot be read ({e})"),
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "test code")]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    /// A ledger that cannot be reached (nothing listens on port 1): the call is refused with
    /// -32030, naming why, and its work never starts.
    #[tokio::test]
    async fn a_call_that_cannot_be_recorded_is_refused_without_running() {
        let ledger = CallLedger::connect("redis://127.0.0.1:1").unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let run = {
            let ran = Arc::clone(&ran);
            async move {
                ran.store(true, Ordering::SeqCst);
                Ok(replayed(raw(r#"{"content":[]}"#)))
            }
        };
        let outcome = at_most_once(
            &ledger,
            "id-1",
            "add",
            &raw(r#"{"text":"one"}"#),
            Duration::from_secs(5),
            &RequestContext::detached(),
            run,
        )
        .await;
        let error = outcome.unwrap_err();
        assert_eq!(error.code, CALL_NOT_REPEATED);
        assert_eq!(CALL_NOT_REPEATED, -32030);
        assert!(
            error.message.starts_with(
                "request id-1: the call could not be recorded, so a retry could run it twice; it was not run ("
            ) && error.message.contains("127.0.0.1:1"),
            "{}",
            error.message
        );
        assert!(!ran.load(Ordering::SeqCst), "the call ran");
    }

    /// What a first run keeps is read back by every replica: the shape is fixed, and a kept
    /// result says whether it reports a failure from its own `isError`.
    #[test]
    fn a_kept_outcome_reads_back_as_it_was() {
        let result =
            serde_json::to_string(&Kept::Result(raw(r#"{"content":[],"isError":true}"#))).unwrap();
        assert_eq!(result, r#"{"result":{"content":[],"isError":true}}"#);
        let Kept::Result(body) = serde_json::from_str(&result).unwrap() else {
            panic!("not a result")
        };
        assert!(replayed(body).is_error);
        assert!(!replayed(raw(r#"{"content":[]}"#)).is_error);
        assert!(!replayed(raw(r#"{"content":[],"isError":false}"#)).is_error);

        let error =
            serde_json::to_string(&Kept::Error(ErrorObject::new(-32602, "no such tool"))).unwrap();
        let Kept::Error(back) = serde_json::from_str(&error).unwrap() else {
            panic!("not an error")
        };
        assert_eq!((back.code, back.message.as_str()), (-32602, "no such tool"));
    }

    #[test]
    fn a_retry_that_is_not_run_again_says_so() {
        let error = not_repeated(
            "id-9",
            "this call may already have run on a replica that went away",
        );
        assert_eq!(error.code, -32030);
        assert_eq!(
            error.message,
            "request id-9: this call may already have run on a replica that went away; it was not run again"
        );
    }
}
