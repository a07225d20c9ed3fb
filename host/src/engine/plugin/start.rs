//! Starting a call: running its work here or, for a plugin that runs apart, on a blocking
//! thread ([`PluginCode::run`]), under the outer timeout (`guarded`); the call's context and
//! store, its deadline and fuel armed; and its instance, made at the call or taken from a
//! spare or a kept one (`instantiate`).

use super::*;

impl PluginCode {
    /// Run `work` with this plugin: here, or, if the plugin [runs apart](Policy::runs_apart),
    /// on a thread of tokio's blocking pool, where its file operations run in line (one
    /// hand-off a call instead of one for each operation). The runtime's workers never run
    /// such a plugin, so a file operation that blocks (opening a FIFO no one writes) holds
    /// only its own thread, and the outer timeout ([`Self::guarded`], which stays here)
    /// still answers the call. Dropping the returned future drops `work` on its thread at
    /// the next poll there (a cancelled or timed-out call stops as it would here); a thread
    /// blocked in a file operation drops it when the operation returns, and holds a permit
    /// of the plugin's [share](APART_SHARE) of the pool until then.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        work: impl AsyncFnOnce(&PluginCode) -> Result<T, CallError> + Send + 'static,
    ) -> Result<T, CallError> {
        let runtime = match tokio::runtime::Handle::try_current() {
            Ok(runtime) if self.policy.runs_apart() => runtime,
            _ => return work(self).await,
        };
        let share = Arc::clone(&self.apart)
            .acquire_owned()
            .await
            .map_err(|_| CallError::Host("the runtime is shutting down".to_owned()))?;
        let code = self.clone();
        // Dropped with this future, which tells the thread to drop `work`.
        let (_running, stopped) = tokio::sync::oneshot::channel::<std::convert::Infallible>();
        let joined = tokio::task::spawn_blocking(move || {
            let _share = share;
            runtime.block_on(async move {
                tokio::select! {
                    biased;
                    _ = stopped => None,
                    out = work(&code) => Some(out),
                }
            })
        });
        match joined.await {
            Ok(Some(out)) => out,
            Ok(None) => Err(CallError::Host("the call was stopped".to_owned())),
            Err(e) => Err(CallError::Host(format!("the call's thread failed: {e}"))),
        }
    }

    /// Run `work` under the outer timeout, which catches a guest stuck in a host function,
    /// and count its outcome with `meter` (`is_error`: whether a result is the plugin's own
    /// error).
    pub(super) async fn guarded<T>(
        &self,
        timeout: Duration,
        meter: CallMeter,
        is_error: impl FnOnce(&T) -> bool,
        work: impl Future<Output = Result<T, CallError>>,
    ) -> Result<T, CallError> {
        let span = tracing::trace_span!(
            target: crate::telemetry::TARGET,
            "plugin.call",
            otel.name = %format_args!("{} {}", meter.kind.as_str(), meter.plugin),
            mcpbox.plugin = %meter.plugin,
            mcpbox.call.kind = meter.kind.as_str(),
            mcpbox.call.name = %meter.name,
        );
        let work = tracing::Instrument::instrument(work, span);
        let result = match tokio::time::timeout(timeout + OUTER_TIMEOUT_GRACE, work).await {
            Ok(result) => result,
            Err(_) => Err(CallError::Timeout { after: timeout }),
        };
        meter.ran(&result, is_error);
        result
    }

    /// The call's own context: who it is for, and where its `host` imports, state and
    /// configuration come from. `denied` is set if the call is refused a grant.
    pub(super) fn call_context(
        &self,
        reach: Arc<dyn CallReach>,
        denied: Arc<AtomicBool>,
    ) -> CallContext {
        let principal = reach.caller();
        let credentials = match self.runtime.credentials() {
            Some(source) if !self.credential_grants.is_empty() => Some(CallCredentials::new(
                Arc::clone(source),
                principal.as_ref().map(|p| Arc::<str>::from(p.key())),
                Arc::clone(&reach),
            )),
            _ => None,
        };
        let config = ConfigCtx::new(
            &self.policy.config,
            &self.runtime.config.secrets.current(),
            principal.as_ref().map(Principal::key),
        );
        let identity = principal.map(|principal| {
            CallerIdentity::new(
                principal,
                self.name.clone(),
                Arc::clone(&self.runtime.state),
            )
        });
        let caller = CallerCtx::new(identity.clone(), self.policy.reveal_caller);
        let keyvalue = KeyValueCtx::new(
            self.name.clone(),
            Arc::clone(&self.runtime.state),
            self.policy.keyvalue.clone(),
            identity,
            Arc::clone(&denied),
        )
        .in_session(reach.session());
        CallContext {
            keyvalue,
            caller,
            config,
            reach,
            denied,
            credentials,
        }
    }

    /// Set a store's fuel and wall-clock deadline for `limits`, less `fuel_spent` already.
    pub(super) fn arm(
        store: &mut Store<StoreData>,
        limits: &Limits,
        fuel_spent: u64,
    ) -> Result<(), CallError> {
        store.set_hostcall_fuel(HOSTCALL_DATA_BYTES);
        store
            .set_fuel(limits.fuel.saturating_sub(fuel_spent))
            .map_err(|e| CallError::Host(format!("{e:#}")))?;
        let deadline = Instant::now() + limits.timeout;
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::Yield(1)
            })
        });
        Ok(())
    }

    /// A fresh store for one call into the plugin, with its limits, not yet instantiated.
    pub(super) fn new_store(
        &self,
        call: CallContext,
        limits: &Limits,
    ) -> Result<Store<StoreData>, CallError> {
        let state = StoreData::new(
            self.name.clone(),
            &self.policy,
            &self.http_grants,
            &self.credential_grants,
            call,
        )
        .map_err(CallError::Host)?;
        let mut store = Store::new(&self.runtime.engine, state);
        store.limiter(|state| &mut state.limiter);
        Self::arm(&mut store, limits, 0)?;
        Ok(store)
    }

    /// Take the plugin's spare instance for a call, or else a pool slot and instantiate the
    /// plugin in a fresh store with its limits. `denied` is set if the call is refused a
    /// grant.
    pub(super) async fn instantiate(
        &self,
        reach: Arc<dyn CallReach>,
        denied: Arc<AtomicBool>,
        limits: Limits,
    ) -> Result<ActiveCall, CallError> {
        let keep_for = match self.policy.instances {
            Instances::PerCaller => reach.caller().map(|p| Arc::<str>::from(p.key())),
            Instances::PerCall => None,
        };
        if let Some(caller) = &keep_for
            && let Some(mut call) = self.take_kept(caller)
        {
            call.store.data_mut().bind(self.call_context(reach, denied));
            Self::arm(&mut call.store, &limits, 0)?;
            call.limits = limits;
            call.started = Instant::now();
            call.fuel_used = None;
            call.in_use = Some(metrics().in_use());
            return Ok(call);
        }
        if let Some(spare) = self.next_spare().await {
            let Spare {
                mut store,
                instance,
                fuel_spent,
                made,
                _slot: slot,
                ..
            } = spare;
            store.data_mut().bind(self.call_context(reach, denied));
            Self::arm(&mut store, &limits, fuel_spent)?;
            return Ok(ActiveCall::new(
                store,
                instance,
                limits,
                made,
                keep_for,
                slot,
                metrics().in_use(),
            ));
        }
        let waiting = metrics().waiting();
        let slot = Arc::clone(&self.runtime.slots)
            .acquire_owned()
            .await
            .map_err(|_| CallError::Host("the runtime is shutting down".to_owned()))?;
        drop(waiting);
        let in_use = metrics().in_use();
        let began = Instant::now();
        let mut store = self.new_store(self.call_context(reach, denied), &limits)?;
        match self.pre.instantiate_async(&mut store).await {
            Ok(instance) => {
                self.spare.took(&self.name, began.elapsed());
                Ok(ActiveCall::new(
                    store, instance, limits, began, keep_for, slot, in_use,
                ))
            }
            Err(e) => {
                let error = classify(&mut store, &e, &limits);
                log_output(&mut store);
                Err(error)
            }
        }
    }
}
