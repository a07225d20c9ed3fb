//! Reusing instances across calls: a plugin's spare (made ahead of its next call, off the
//! answer's path) and the instances kept for their caller's next call (`instances =
//! "per-caller"`), with the rules for when each may serve and the tasks that drop them once
//! too old. The module doc of [`super`] says when a plugin gets either.

use super::*;

/// A kept instance serves calls for at most this long after it was made (a granted
/// directory stays the one opened then).
pub const KEEP_MAX_LIFE: Duration = Duration::from_secs(10);

/// A kept instance's memory may be at most this share of its limit (a divisor: a quarter),
/// so that its next call has at least three quarters of the limit to grow into.
pub const KEEP_MAX_MEMORY_SHARE: usize = 4;

/// A kept instance may hold at most this many handles (a quarter of a call's limit), so that
/// a plugin that leaks handles gets a fresh instance long before it meets the limit.
pub const KEEP_MAX_HANDLES: usize = super::super::state::MAX_HANDLES_PER_CALL / 4;

/// The instances a plugin keeps for their callers' next calls.
#[derive(Default)]
pub(super) struct Shelf {
    pub(super) kept: Mutex<Vec<Kept>>,
    /// A task drops kept instances once they are too old.
    pub(super) sweeping: AtomicBool,
}

/// An instance kept after a call, for its caller's next call.
pub(super) struct Kept {
    pub(super) call: ActiveCall,
    /// The caller it serves ([`Principal::key`]).
    pub(super) caller: Arc<str>,
    pub(super) since: Instant,
    pub(super) _share: OwnedSemaphorePermit,
}

impl Shelf {
    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Kept>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Kept {
    pub(super) fn fresh(&self) -> bool {
        may_serve(self.call.made.elapsed(), self.since.elapsed())
    }
}

/// Whether a kept instance made `age` ago, and waiting for `idle`, may serve its caller's next
/// call: at most [`KEEP_MAX_LIFE`] after it was made, and [`SPARE_MAX_AGE`] after it was kept.
pub(super) fn may_serve(age: Duration, idle: Duration) -> bool {
    idle < SPARE_MAX_AGE && age < KEEP_MAX_LIFE
}

/// What a call that returned left in its instance, as far as keeping it goes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Leftovers {
    /// The instance's memory growth was refused (a memory bomb stopped at its limit).
    pub(super) growth_refused: bool,
    /// The instance's largest linear memory, in bytes.
    pub(super) memory_bytes: usize,
    /// The handles it holds (open files, streams, HTTP fields).
    pub(super) handles: usize,
    /// How long ago it was made.
    pub(super) age: Duration,
}

/// Whether an instance whose call returned leaving `left` may be kept for its caller's next
/// call, under a memory limit of `memory_limit_bytes`: not after refused growth, nor over
/// [a quarter](KEEP_MAX_MEMORY_SHARE) of its limit or [64 handles](KEEP_MAX_HANDLES), nor once
/// too old to serve. (A call that failed is never kept: [`ActiveCall::end`] drops it first.)
pub(super) fn may_keep(left: Leftovers, memory_limit_bytes: usize) -> bool {
    !left.growth_refused
        && left.memory_bytes <= memory_limit_bytes / KEEP_MAX_MEMORY_SHARE
        && left.handles <= KEEP_MAX_HANDLES
        && may_serve(left.age, Duration::ZERO)
}

/// How long a spare instance waits for a call before it is dropped: long enough for a
/// client's next call in a burst, short enough that nothing it opened (a granted directory)
/// is old when used, and that an idle plugin holds no instance.
pub const SPARE_MAX_AGE: Duration = Duration::from_secs(1);

/// A plugin's spare instance, and what its preparation is doing.
#[derive(Default)]
pub(super) struct SpareSlot {
    pub(super) ready: Mutex<Option<Spare>>,
    /// A spare is being made.
    pub(super) preparing: AtomicBool,
    /// A task drops the spare once it is too old.
    pub(super) sweeping: AtomicBool,
    /// Instantiating the plugin touches the host: it gets no spares.
    pub(super) off: AtomicBool,
    /// How long instantiating the plugin takes, in ns (a moving average over calls and
    /// spares): spares are made only when it is worth a hand-off.
    pub(super) instantiate_ns: AtomicU64,
    /// Told when a spare being made is ready (or failed).
    pub(super) made: tokio::sync::Notify,
    /// The plugin was instantiated once (the cold instantiation, not counted, is done).
    pub(super) warm: AtomicBool,
}

/// Instantiating a plugin must take at least this long (on average) for its calls to get
/// spares: below it, handing the work to another task costs about what it saves. Measured on
/// 2 cores shared with the client (BENCHMARKS.md, "Spare instances"): the Rust plugins
/// instantiate in 30–50 µs and the JavaScript example in about 100, and spares moved their
/// p50 0.94–1.09× for 5–16% more CPU a call; the Python example instantiates in 1.1 ms, and
/// spares took its p50 0.74–0.95× in three sets of rounds, for less CPU.
pub const SPARE_MIN_INSTANTIATE: Duration = Duration::from_micros(250);

impl SpareSlot {
    /// Record how long one instantiation of `plugin` took (logged at trace, target
    /// `mcpbox::calls`).
    pub(super) fn took(&self, plugin: &PluginName, elapsed: Duration) {
        let sample = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        // The first is cold (the compiled code's pages are touched for the first time: 0.7–6
        // ms where later ones take 30–50 µs), and does not count.
        if !self.warm.swap(true, Ordering::Relaxed) {
            return;
        }
        // A moving average over about eight instantiations; the first warm one counts whole.
        let before = self
            .instantiate_ns
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |average| {
                Some(if average == 0 {
                    sample
                } else {
                    average - average / 8 + sample / 8
                })
            })
            .unwrap_or(0);
        tracing::trace!(
            target: "mcpbox::calls",
            %plugin,
            instantiate_us = sample / 1000,
            average_before_us = before / 1000,
            "instantiated"
        );
    }

    /// Whether instantiating takes long enough to be worth doing ahead.
    pub(super) fn worth_it(&self) -> bool {
        let average = Duration::from_nanos(self.instantiate_ns.load(Ordering::Relaxed));
        average >= SPARE_MIN_INSTANTIATE
    }
}

/// An instance made ahead of its call, with no caller bound.
pub(super) struct Spare {
    pub(super) store: Store<StoreData>,
    pub(super) instance: Instance,
    /// Fuel instantiation used (its start functions), charged to the call.
    pub(super) fuel_spent: u64,
    pub(super) made: Instant,
    pub(super) _slot: OwnedSemaphorePermit,
    pub(super) _spare: OwnedSemaphorePermit,
}

impl PluginCode {
    /// The spare instance, if one is ready, or being made (it will be ready before an
    /// instance this call would begin now), and not too old.
    pub(super) async fn next_spare(&self) -> Option<Spare> {
        let slot = &self.spare;
        if slot.preparing.load(Ordering::Acquire) {
            let made = slot.made.notified();
            tokio::pin!(made);
            made.as_mut().enable();
            // Made (and told) before the waiter was registered: nothing to wait for.
            if slot.preparing.load(Ordering::Acquire) {
                made.await;
            }
        }
        self.take_spare()
    }

    /// The spare instance, if one is ready and not too old.
    pub(super) fn take_spare(&self) -> Option<Spare> {
        let spare = self
            .spare
            .ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        if spare.made.elapsed() < SPARE_MAX_AGE {
            metrics().spare_instance("used");
            Some(spare)
        } else {
            metrics().spare_instance("expired");
            drop_off_path(spare);
            None
        }
    }

    /// Claim the making of the plugin's next spare instance: false if one is ready or being
    /// made, or the plugin gets none. Whoever claims it calls [`Self::fill_spare`].
    pub(super) fn claim_spare(&self) -> bool {
        let slot = &self.spare;
        let wanted = match self.runtime.config.spares {
            SpareInstances::Auto => slot.worth_it(),
            SpareInstances::Always => true,
            SpareInstances::Never => false,
        };
        if !wanted
            || slot.off.load(Ordering::Relaxed)
            || slot.preparing.swap(true, Ordering::AcqRel)
        {
            return false;
        }
        let ready = slot
            .ready
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if ready {
            slot.preparing.store(false, Ordering::Release);
        }
        !ready
    }

    /// Make the spare instance [claimed](Self::claim_spare), and then drop it (and any later
    /// one) once it is too old, until none is left.
    pub(super) async fn fill_spare(self) {
        // Made where the plugin's calls run (its start functions may open files).
        let spare = self
            .run(async |code: &PluginCode| Ok(code.make_spare().await))
            .await
            .ok()
            .flatten();
        let slot = &self.spare;
        let made = spare.is_some();
        if let Some(spare) = spare {
            *slot.ready.lock().unwrap_or_else(PoisonError::into_inner) = Some(spare);
        }
        slot.preparing.store(false, Ordering::Release);
        slot.made.notify_waiters();
        if made && !slot.sweeping.swap(true, Ordering::AcqRel) {
            self.sweep_spares().await;
        }
    }

    /// Make a spare instance: a pool slot (only if one is free and the pool's share for
    /// spares is not used up), a store with no caller bound, the plugin instantiated in it.
    /// `None` if any of that fails, or if instantiating asked anything of the host (the
    /// plugin then gets no more spares).
    pub(super) async fn make_spare(&self) -> Option<Spare> {
        let spare_permit = Arc::clone(&self.runtime.spares).try_acquire_owned().ok()?;
        let slot = Arc::clone(&self.runtime.slots).try_acquire_owned().ok()?;
        let neutral = self.call_context(Arc::new(super::Detached), Arc::default());
        let began = Instant::now();
        let mut store = self.new_store(neutral, &self.limits).ok()?;
        let made = self.pre.instantiate_async(&mut store).await;
        self.spare.took(&self.name, began.elapsed());
        let state = store.data();
        let touched = state.lent() > 0 || state.limiter.refused.is_some();
        let instance = match made {
            Ok(instance) if !touched => instance,
            outcome => {
                self.spare.off.store(true, Ordering::Relaxed);
                tracing::debug!(
                    plugin = %self.name,
                    failed = outcome.is_err(),
                    "instantiating this plugin asks the host for something; its calls get no spare instance"
                );
                return None;
            }
        };
        let fuel_spent = self
            .limits
            .fuel
            .saturating_sub(store.get_fuel().unwrap_or(0));
        Some(Spare {
            store,
            instance,
            fuel_spent,
            made: Instant::now(),
            _slot: slot,
            _spare: spare_permit,
        })
    }

    /// Drop the spare once it is [too old](SPARE_MAX_AGE) to be used, until none is left.
    pub(super) async fn sweep_spares(&self) {
        let slot = &self.spare;
        loop {
            tokio::time::sleep(SPARE_MAX_AGE).await;
            let stale = {
                let mut ready = slot.ready.lock().unwrap_or_else(PoisonError::into_inner);
                match ready.as_ref() {
                    Some(spare) if spare.made.elapsed() < SPARE_MAX_AGE => continue,
                    Some(_) => {
                        metrics().spare_instance("expired");
                        ready.take()
                    }
                    None => {
                        // Under the lock: a spare stored after this starts its own sweeper.
                        slot.sweeping.store(false, Ordering::Release);
                        return;
                    }
                }
            };
            drop(stale);
        }
    }
}

impl PluginCode {
    /// The instance kept for `caller`'s next call, if one is, and it is not too old (the
    /// last one kept first: its pages are the warmest).
    pub(super) fn take_kept(&self, caller: &str) -> Option<ActiveCall> {
        let kept = {
            let mut shelf = self.kept.lock();
            let at = shelf.iter().rposition(|k| &*k.caller == caller)?;
            shelf.remove(at)
        };
        if kept.fresh() {
            metrics().kept_instance("used");
            Some(kept.call)
        } else {
            metrics().kept_instance("expired");
            drop_off_path(kept);
            None
        }
    }

    /// Keep the instance of `call`, which returned, for its caller's next call, if the
    /// plugin's instances may serve one caller's calls in turn and this one is healthy and
    /// small enough; else give the call back (`Some`).
    pub(super) fn keep(&self, mut call: ActiveCall) -> Option<ActiveCall> {
        let Some(caller) = call.keep_for.clone() else {
            return Some(call);
        };
        let state = call.store.data_mut();
        let left = Leftovers {
            growth_refused: state.limiter.refused.is_some(),
            memory_bytes: state.limiter.largest(),
            handles: state.handles(),
            age: call.made.elapsed(),
        };
        if !may_keep(left, self.limits.memory_bytes) {
            return Some(call);
        }
        let Ok(share) = Arc::clone(&self.runtime.spares).try_acquire_owned() else {
            return Some(call);
        };
        call.in_use = None;
        self.kept.lock().push(Kept {
            call,
            caller,
            since: Instant::now(),
            _share: share,
        });
        metrics().kept_instance("kept");
        if !self.kept.sweeping.swap(true, Ordering::AcqRel) {
            let code = self.clone();
            drop(tokio::spawn(async move { code.sweep_kept().await }));
        }
        None
    }

    /// Drop kept instances once they are too old, until none is left.
    pub(super) async fn sweep_kept(&self) {
        loop {
            tokio::time::sleep(SPARE_MAX_AGE).await;
            let stale: Vec<Kept> = {
                let mut shelf = self.kept.lock();
                if shelf.is_empty() {
                    // Under the lock: an instance kept after this starts its own sweeper.
                    self.kept.sweeping.store(false, Ordering::Release);
                    return;
                }
                let (fresh, stale) = std::mem::take(&mut *shelf)
                    .into_iter()
                    .partition(Kept::fresh);
                *shelf = fresh;
                stale
            };
            for _ in &stale {
                metrics().kept_instance("expired");
            }
            drop(stale);
        }
    }
}

/// Drop a spare in a task of its own (its slot is reset there), or here without a runtime.
pub(super) fn drop_off_path<T: Send + 'static>(spare: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(async move { drop(spare) })),
        Err(_) => drop(spare),
    }
}
