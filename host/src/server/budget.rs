//! Budgets per caller, kept: how much of the host one [`Principal`] holds at once — plugin
//! calls running (a task's call among them, until it ends: `server::tasks`), HTTP sessions,
//! listen streams, bytes of requests in flight — and how many requests it sends a second (a
//! token bucket), against the budget its configuration gives it ([`BudgetConfig::budget_of`],
//! in `principal`). They sit beside the global bounds of
//! [`super::bounds`]: a global bound keeps the process within its memory and descriptors
//! whoever asks; a budget keeps one caller from taking the share of the others. A caller over
//! its budget is refused at once, never queued ahead of anyone (HTTP 429 with `Retry-After`,
//! or the JSON-RPC error [`OVER_BUDGET`] naming the limit and the caller's budget).
//!
//! Behind a balancer, the request rate and the sessions may be kept in a store the replicas
//! share ([`SharedBudgets`], Redis with `--state redis://…`): a caller spreading its requests
//! over replicas then has one rate and one count of sessions, not one per replica. Should the
//! store not answer in time, each replica falls back to its own bucket (logged), so a store
//! going away never stops the service. Running calls, listen streams and request bytes are
//! what one process holds, so they stay per replica.
//!
//! Use is kept per caller in one map, entered for a moment per take and give-back; an entry
//! goes when its caller holds nothing and its bucket is full again, so the map holds only
//! callers active within the last `burst / rate` seconds. Exported as metrics by limit
//! (`mcpbox_budget_in_use`, `mcpbox_budget_refusals_total`), by caller only when the operator
//! opts in (`label_principals`).
//!
//! Uses: `principal`, `metrics`, `protocol` (the error object).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use super::rate::WarnEvery;
pub use crate::metrics::Budgeted;
use crate::metrics::metrics;
use crate::principal::Principal;
pub use crate::principal::{Budget, BudgetConfig, BudgetPatch};
use crate::protocol::ErrorObject;

/// A future a shared store answers with.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Where budgets that must hold across replicas are kept: the request rate and the open
/// sessions of each caller (named by a digest of its key). Errors are the store's, as text.
pub trait SharedBudgets: Send + Sync {
    /// Take one token of `caller`'s bucket: `None` when taken, else the seconds to wait.
    fn take_token<'a>(
        &'a self,
        caller: &'a str,
        rate: f64,
        burst: f64,
    ) -> BoxFuture<'a, Result<Option<f64>, String>>;

    /// Count session `id` among `caller`'s for `lifetime`: `false` at `max`.
    fn open_session<'a>(
        &'a self,
        caller: &'a str,
        id: &'a str,
        max: usize,
        lifetime: std::time::Duration,
    ) -> BoxFuture<'a, Result<bool, String>>;

    /// Stop counting session `id` among `caller`'s.
    fn close_session<'a>(&'a self, caller: &'a str, id: &'a str) -> BoxFuture<'a, ()>;
}

/// The JSON-RPC error code of a request refused because its caller is over a budget (a
/// server error of the implementation-defined range; 429 is HTTP's "too many requests").
pub const OVER_BUDGET: i32 = -32029;

/// How long a caller refused at a count budget is told to wait, in seconds.
const RETRY_AFTER_SECS: u64 = 1;

/// Refusals are logged at warn at most this often (the rest at debug).
const WARN_EVERY_SECS: u64 = 10;

/// Idle entries are swept from the map at most this often, once it holds this many.
const SWEEP_EVERY_SECS: u64 = 10;
const SWEEP_ABOVE: usize = 256;

/// A request refused because its caller is over one of its budgets.
#[derive(Debug, Clone, PartialEq)]
pub struct OverBudget {
    /// Which budget.
    pub limit: Budgeted,
    /// The caller's budget.
    pub budget: Budget,
    /// The caller.
    pub principal: String,
    /// When to try again, in seconds.
    pub retry_after: u64,
}

impl fmt::Display for OverBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.budget;
        let (what, key) = match self.limit {
            Budgeted::Calls => (format!("{} plugin calls running at once", b.calls), "calls"),
            Budgeted::Sessions => (format!("{} open sessions", b.sessions), "sessions"),
            Budgeted::ListenStreams => (
                format!("{} open listen streams", b.listen_streams),
                "listen_streams",
            ),
            Budgeted::RequestBytes => (
                format!("{} bytes of requests in flight", b.request_bytes),
                "request_bytes",
            ),
            Budgeted::Rate => (
                format!("{} requests a second (bursts of {})", b.rate, b.burst),
                "rate",
            ),
        };
        write!(
            f,
            "over budget: {} may have {what} ([budgets] {key}); try again in {} s",
            self.principal, self.retry_after
        )
    }
}

impl std::error::Error for OverBudget {}

impl OverBudget {
    /// The JSON-RPC error: [`OVER_BUDGET`], with the limit, the caller's budget of it and when
    /// to try again in `data`.
    pub fn error(&self) -> ErrorObject {
        let budget = match self.limit {
            Budgeted::Rate => json!({ "rate": self.budget.rate, "burst": self.budget.burst }),
            limit => json!(max_of(&self.budget, limit)),
        };
        ErrorObject::new(OVER_BUDGET, self.to_string()).with_data(json!({
            "limit": self.limit.as_str(),
            "budget": budget,
            "retryAfterSeconds": self.retry_after,
        }))
    }
}

/// `wait` seconds in whole seconds, rounded up, at least one: what `Retry-After` can say.
fn whole_seconds(wait: f64) -> u64 {
    std::time::Duration::try_from_secs_f64(wait)
        .map_or(u64::MAX, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0))
        .max(1)
}

/// The most `budget` allows of a count.
fn max_of(budget: &Budget, what: Budgeted) -> usize {
    match what {
        Budgeted::Calls => budget.calls,
        Budgeted::Sessions => budget.sessions,
        Budgeted::ListenStreams => budget.listen_streams,
        Budgeted::RequestBytes => budget.request_bytes,
        Budgeted::Rate => usize::MAX,
    }
}

/// The count budgets, as indices into an account's holdings.
const COUNTED: [Budgeted; 4] = [
    Budgeted::Calls,
    Budgeted::Sessions,
    Budgeted::ListenStreams,
    Budgeted::RequestBytes,
];

fn slot(what: Budgeted) -> usize {
    COUNTED.iter().position(|c| *c == what).unwrap_or(0)
}

/// One caller's use.
#[derive(Debug)]
struct Account {
    held: [usize; 4],
    /// The bucket: tokens left when last refilled, at this rate and size.
    tokens: f64,
    refilled: Instant,
    rate: f64,
    burst: f64,
}

impl Account {
    fn new(budget: &Budget, now: Instant) -> Self {
        Self {
            held: [0; 4],
            tokens: budget.burst,
            refilled: now,
            rate: budget.rate,
            burst: budget.burst,
        }
    }

    /// Whether dropping it loses nothing: it holds nothing and its bucket is full again.
    fn idle(&self, now: Instant) -> bool {
        self.held == [0; 4]
            && self.tokens + now.duration_since(self.refilled).as_secs_f64() * self.rate
                >= self.burst
    }
}

#[derive(Debug)]
struct Accounts {
    by_caller: HashMap<Arc<str>, Account>,
    totals: [usize; 4],
    swept: Instant,
}

/// Every caller's budgets and use: one per process, shared by every session and transport.
#[derive(Debug)]
pub struct Budgets {
    config: BudgetConfig,
    accounts: Mutex<Accounts>,
    /// Refusals logged at warn at most every [`WARN_EVERY_SECS`].
    warn: WarnEvery,
    shared: Option<Arc<dyn SharedBudgets>>,
    /// The shared store's failures, logged at warn at most every [`WARN_EVERY_SECS`].
    store_warn: WarnEvery,
}

impl fmt::Debug for dyn SharedBudgets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedBudgets")
    }
}

/// A session counted in the shared store, uncounted when dropped.
#[must_use = "the session is uncounted when this is dropped"]
pub struct SharedSession {
    shared: Arc<dyn SharedBudgets>,
    caller: String,
    id: String,
}

impl fmt::Debug for SharedSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedSession")
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for SharedSession {
    fn drop(&mut self) {
        let (shared, caller, id) = (
            Arc::clone(&self.shared),
            std::mem::take(&mut self.caller),
            std::mem::take(&mut self.id),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { shared.close_session(&caller, &id).await });
        }
    }
}

/// The name of `caller` in the shared store: a digest of its key (bounded, and never text a
/// client chose).
fn shared_name(caller: &Principal) -> String {
    use sha2::{Digest as _, Sha256};
    let digest = Sha256::digest(caller.key().as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// Part of a caller's budget, given back when dropped.
#[derive(Debug)]
#[must_use = "a budget's share is given back when dropped"]
pub struct Held {
    budgets: Arc<Budgets>,
    key: Arc<str>,
    slot: usize,
    amount: usize,
    /// The caller's budget when it was taken (what [`Held::grow`] is judged against).
    budget: Budget,
}

/// What the status page shows of the budgets.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetUse {
    /// The default budget.
    pub default: Budget,
    /// Callers with a budget active now (holding something, or with a bucket refilling).
    pub callers: usize,
    /// In use, summed over callers, by limit.
    pub in_use: BTreeMap<&'static str, usize>,
    /// Callers at one of their count budgets now, by limit.
    pub at_limit: BTreeMap<&'static str, usize>,
    /// Each active caller's use, by limit (only with `label_principals`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by_caller: Option<BTreeMap<String, BTreeMap<&'static str, usize>>>,
}

impl Budgets {
    /// Budgets as `config` says, each replica keeping its own.
    pub fn new(config: BudgetConfig) -> Arc<Self> {
        Self::shared(config, None)
    }

    /// Budgets as `config` says, the request rate and the sessions kept in `shared` (when
    /// given) so that replicas share them.
    pub fn shared(config: BudgetConfig, shared: Option<Arc<dyn SharedBudgets>>) -> Arc<Self> {
        let now = Instant::now();
        Arc::new(Self {
            config,
            accounts: Mutex::new(Accounts {
                by_caller: HashMap::new(),
                totals: [0; 4],
                swept: now,
            }),
            warn: WarnEvery::new(WARN_EVERY_SECS),
            shared,
            store_warn: WarnEvery::new(WARN_EVERY_SECS),
        })
    }

    /// Whether the rate and the sessions are kept in a store the replicas share.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Log that the shared store did not answer: at warn at most every [`WARN_EVERY_SECS`].
    fn store_failed(&self, what: &str, error: &str) {
        if self.store_warn.now() {
            tracing::warn!(
                "the shared store did not keep a caller's {what} ({error}); this replica keeps it alone meanwhile"
            );
        } else {
            tracing::debug!("the shared store did not keep a caller's {what}: {error}");
        }
    }

    /// Take one token of `caller`'s request rate: from the shared store when there is one
    /// (falling back to this replica's own bucket when it does not answer), else locally.
    pub async fn admit(&self, caller: &Principal) -> Result<(), OverBudget> {
        let Some(budget) = self.config.budget_of(caller) else {
            return Ok(());
        };
        if let Some(shared) = &self.shared {
            match shared
                .take_token(&shared_name(caller), budget.rate, budget.burst)
                .await
            {
                Ok(None) => return Ok(()),
                Ok(Some(wait)) => {
                    let refused = OverBudget {
                        limit: Budgeted::Rate,
                        budget,
                        principal: caller.key().to_owned(),
                        retry_after: whole_seconds(wait),
                    };
                    self.refused(&refused);
                    return Err(refused);
                }
                Err(error) => self.store_failed("request rate", &error),
            }
        }
        self.admit_here(caller)
    }

    /// Count session `id` of `caller`, idle for at most `lifetime`, in the shared store (none
    /// without one, or for a caller without a budget; this replica's own count is
    /// [`Budgets::take`]'s).
    pub async fn open_session(
        &self,
        caller: &Principal,
        id: &str,
        lifetime: std::time::Duration,
    ) -> Result<Option<SharedSession>, OverBudget> {
        let (Some(shared), Some(budget)) = (&self.shared, self.config.budget_of(caller)) else {
            return Ok(None);
        };
        let name = shared_name(caller);
        match shared
            .open_session(&name, id, budget.sessions, lifetime)
            .await
        {
            Ok(true) => Ok(Some(SharedSession {
                shared: Arc::clone(shared),
                caller: name,
                id: id.to_owned(),
            })),
            Ok(false) => {
                let refused = OverBudget {
                    limit: Budgeted::Sessions,
                    budget,
                    principal: caller.key().to_owned(),
                    retry_after: RETRY_AFTER_SECS,
                };
                self.refused(&refused);
                Err(refused)
            }
            Err(error) => {
                self.store_failed("sessions", &error);
                Ok(None)
            }
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    fn accounts(&self) -> std::sync::MutexGuard<'_, Accounts> {
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Take `amount` of `caller`'s budget of `what` (a count: calls, sessions, listen streams,
    /// request bytes), or refuse if that would pass it. `None` for a caller with no budget of
    /// its own. A caller holding none of it may always take one share, however large, so a
    /// budget below one request's size refuses only concurrency, never the request forever.
    pub fn take(
        self: &Arc<Self>,
        caller: &Principal,
        what: Budgeted,
        amount: usize,
    ) -> Result<Option<Held>, OverBudget> {
        let Some(budget) = self.config.budget_of(caller) else {
            return Ok(None);
        };
        let max = max_of(&budget, what);
        let slot = slot(what);
        let now = Instant::now();
        let mut accounts = self.accounts();
        let key: Arc<str> = Arc::from(caller.key());
        let account = accounts
            .by_caller
            .entry(Arc::clone(&key))
            .or_insert_with(|| Account::new(&budget, now));
        let held = account.held[slot];
        if held > 0 && held.saturating_add(amount) > max {
            let refused = OverBudget {
                limit: what,
                budget,
                principal: caller.key().to_owned(),
                retry_after: RETRY_AFTER_SECS,
            };
            drop(accounts);
            self.refused(&refused);
            return Err(refused);
        }
        account.held[slot] = held.saturating_add(amount);
        accounts.totals[slot] = accounts.totals[slot].saturating_add(amount);
        metrics().budget_in_use(what, accounts.totals[slot]);
        Ok(Some(Held {
            budgets: Arc::clone(self),
            key,
            slot,
            amount,
            budget,
        }))
    }

    /// Take one token from `caller`'s bucket in this replica (one request), or refuse with
    /// when the next one will be there. Passes a caller with no budget of its own.
    pub fn admit_here(&self, caller: &Principal) -> Result<(), OverBudget> {
        let Some(budget) = self.config.budget_of(caller) else {
            return Ok(());
        };
        let now = Instant::now();
        let mut accounts = self.accounts();
        self.sweep(&mut accounts, now);
        let account = accounts
            .by_caller
            .entry(Arc::from(caller.key()))
            .or_insert_with(|| Account::new(&budget, now));
        // The budget may have changed since the bucket was made (another token's scopes).
        account.rate = budget.rate;
        account.burst = budget.burst;
        let elapsed = now.duration_since(account.refilled).as_secs_f64();
        account.tokens = (account.tokens + elapsed * budget.rate).min(budget.burst);
        account.refilled = now;
        if account.tokens >= 1.0 {
            account.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - account.tokens) / budget.rate;
        drop(accounts);
        let refused = OverBudget {
            limit: Budgeted::Rate,
            budget,
            principal: caller.key().to_owned(),
            retry_after: whole_seconds(wait),
        };
        self.refused(&refused);
        Err(refused)
    }

    /// Drop the entries that lose nothing by going, at most every [`SWEEP_EVERY_SECS`] and
    /// only once there are many.
    fn sweep(&self, accounts: &mut Accounts, now: Instant) {
        if accounts.by_caller.len() < SWEEP_ABOVE
            || now.duration_since(accounts.swept).as_secs() < SWEEP_EVERY_SECS
        {
            return;
        }
        accounts.swept = now;
        accounts.by_caller.retain(|_, account| !account.idle(now));
    }

    /// Count a refusal, and log it: at warn at most every [`WARN_EVERY_SECS`].
    fn refused(&self, refused: &OverBudget) {
        let principal = self
            .config
            .label_principals()
            .then_some(refused.principal.as_str());
        metrics().budget_refused(refused.limit, principal);
        if self.warn.now() {
            tracing::warn!(
                limit = refused.limit.as_str(),
                "refused a request: {refused}"
            );
        } else {
            tracing::debug!(
                limit = refused.limit.as_str(),
                "refused a request: {refused}"
            );
        }
    }

    /// What is in use now, for the status page.
    pub fn usage(&self) -> BudgetUse {
        let accounts = self.accounts();
        let mut at_limit: BTreeMap<&'static str, usize> =
            COUNTED.iter().map(|c| (c.as_str(), 0)).collect();
        let mut by_caller = self.config.label_principals().then(BTreeMap::new);
        let budget = self.config.default_budget();
        for (key, account) in &accounts.by_caller {
            for (i, what) in COUNTED.iter().enumerate() {
                // Judged against the default: a caller's own budget needs its token's scopes.
                if account.held[i] >= max_of(&budget, *what) {
                    *at_limit.entry(what.as_str()).or_default() += 1;
                }
            }
            if let Some(by_caller) = &mut by_caller {
                by_caller.insert(
                    key.to_string(),
                    COUNTED
                        .iter()
                        .enumerate()
                        .map(|(i, c)| (c.as_str(), account.held[i]))
                        .collect(),
                );
            }
        }
        BudgetUse {
            default: budget,
            callers: accounts.by_caller.len(),
            in_use: COUNTED
                .iter()
                .enumerate()
                .map(|(i, c)| (c.as_str(), accounts.totals[i]))
                .collect(),
            at_limit,
            by_caller,
        }
    }
}

impl Held {
    /// Take `amount` more into this share (a request's bytes as they arrive), or refuse if
    /// that would pass the budget. As with [`Budgets::take`], a share that is all its caller
    /// holds of this budget may always grow: one request alone is bounded by the body limit,
    /// not by a budget below it.
    pub fn grow(&mut self, amount: usize) -> Result<(), OverBudget> {
        let what = COUNTED[self.slot];
        let max = max_of(&self.budget, what);
        let mut guard = self.budgets.accounts();
        let accounts = &mut *guard;
        let Some(account) = accounts.by_caller.get_mut(&self.key) else {
            // Not possible while this share is held (an entry holding something stays).
            return Ok(());
        };
        let held = account.held[self.slot];
        let others = held.saturating_sub(self.amount);
        if others > 0 && held.saturating_add(amount) > max {
            drop(guard);
            let refused = OverBudget {
                limit: what,
                budget: self.budget,
                principal: self.key.to_string(),
                retry_after: RETRY_AFTER_SECS,
            };
            self.budgets.refused(&refused);
            return Err(refused);
        }
        account.held[self.slot] = held.saturating_add(amount);
        accounts.totals[self.slot] = accounts.totals[self.slot].saturating_add(amount);
        metrics().budget_in_use(what, accounts.totals[self.slot]);
        drop(guard);
        self.amount = self.amount.saturating_add(amount);
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut accounts = self.budgets.accounts();
        let accounts = &mut *accounts;
        accounts.totals[self.slot] = accounts.totals[self.slot].saturating_sub(self.amount);
        metrics().budget_in_use(COUNTED[self.slot], accounts.totals[self.slot]);
        if let Some(account) = accounts.by_caller.get_mut(&self.key) {
            account.held[self.slot] = account.held[self.slot].saturating_sub(self.amount);
            if account.idle(now) {
                accounts.by_caller.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::Scopes;
    use crate::principal::test_support::{config, token};

    #[test]
    fn a_caller_is_refused_past_its_share_and_others_are_not() {
        let budgets = Budgets::new(config("calls = 2"));
        let (alice, bob) = (token("alice", &[]), token("bob", &[]));
        let a1 = budgets.take(&alice, Budgeted::Calls, 1).unwrap();
        let _a2 = budgets.take(&alice, Budgeted::Calls, 1).unwrap();
        let refused = budgets.take(&alice, Budgeted::Calls, 1).unwrap_err();
        assert_eq!(refused.limit, Budgeted::Calls);
        assert_eq!(refused.error().code, OVER_BUDGET);
        assert_eq!(refused.error().data.unwrap()["budget"], 2);
        assert!(refused.to_string().contains("token:alice"), "{refused}");
        assert!(refused.to_string().contains("[budgets] calls"), "{refused}");
        assert!(budgets.take(&bob, Budgeted::Calls, 1).unwrap().is_some());
        drop(a1);
        assert!(budgets.take(&alice, Budgeted::Calls, 1).is_ok());
    }

    #[test]
    fn a_share_grows_within_the_budget_and_alone_past_it() {
        let budgets = Budgets::new(config("request_bytes = 100"));
        let (alice, bob) = (token("alice", &[]), token("bob", &[]));
        // Alone, a request's bytes may pass the budget as they arrive (the body limit bounds it).
        let mut first = budgets
            .take(&alice, Budgeted::RequestBytes, 60)
            .unwrap()
            .unwrap();
        first.grow(60).unwrap();
        assert_eq!(budgets.usage().in_use["request_bytes"], 120);
        drop(first);
        // Beside another of hers, not.
        let _other = budgets.take(&alice, Budgeted::RequestBytes, 30).unwrap();
        let mut second = budgets
            .take(&alice, Budgeted::RequestBytes, 30)
            .unwrap()
            .unwrap();
        second.grow(40).unwrap();
        let refused = second.grow(1).unwrap_err();
        assert_eq!(refused.limit, Budgeted::RequestBytes);
        assert_eq!(refused.error().data.unwrap()["budget"], 100);
        assert_eq!(budgets.usage().in_use["request_bytes"], 100);
        // Bob's bytes are his own; and what is given back is all that was taken.
        assert!(budgets.take(&bob, Budgeted::RequestBytes, 100).is_ok());
        drop(second);
        assert_eq!(budgets.usage().in_use["request_bytes"], 30);
    }

    #[test]
    fn the_local_user_and_the_shared_token_have_no_budget_unless_named() {
        let budgets = Budgets::new(config("calls = 1"));
        let local = Principal::local();
        let shared = Principal::token(crate::principal::AUTH_TOKEN_NAME, Scopes::All);
        for caller in [&local, &shared] {
            let held: Vec<_> = (0..10)
                .map(|_| budgets.take(caller, Budgeted::Calls, 1).unwrap())
                .collect();
            assert!(held.iter().all(Option::is_none));
        }
        let budgets = Budgets::new(config("[principal.local]\ncalls = 1"));
        let _one = budgets.take(&local, Budgeted::Calls, 1).unwrap();
        assert!(budgets.take(&local, Budgeted::Calls, 1).is_err());
    }

    #[test]
    fn the_rate_refills_and_says_when() {
        let budgets = Budgets::new(config("rate = 1.0\nburst = 3.0"));
        let alice = token("alice", &[]);
        for _ in 0..3 {
            budgets.admit_here(&alice).unwrap();
        }
        let refused = budgets.admit_here(&alice).unwrap_err();
        assert_eq!(refused.limit, Budgeted::Rate);
        assert_eq!(refused.retry_after, 1);
        assert!(budgets.admit_here(&token("bob", &[])).is_ok());
    }

    #[test]
    fn an_oversized_share_passes_alone_and_entries_go_when_idle() {
        let budgets = Budgets::new(config("request_bytes = 10"));
        let alice = token("alice", &[]);
        let big = budgets.take(&alice, Budgeted::RequestBytes, 50).unwrap();
        assert!(budgets.take(&alice, Budgeted::RequestBytes, 1).is_err());
        assert_eq!(budgets.usage().in_use["request_bytes"], 50);
        drop(big);
        assert_eq!(budgets.usage().in_use["request_bytes"], 0);
        // Holding nothing, with a full bucket: nothing kept.
        assert_eq!(budgets.usage().callers, 0);
    }
}
