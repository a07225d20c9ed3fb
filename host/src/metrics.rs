//! Prometheus metrics: the one process-wide registry of what mcpbox counts (requests, plugin
//! calls and their outcomes, fuel, instances, sessions, listen streams, reloads, the compiled
//! cache, whether the state store answers), the small guards that keep its gauges true when work is dropped, and the text
//! exposition served at `/metrics`.
//!
//! Every label value is bounded: methods are the known ones (others are `other`), plugin and
//! tool names come from loaded plugins, never from what a client sends. Recording is a few
//! atomic adds behind a read lock; the registry is global because one process serves one
//! set of plugins (tests in one process share it and only ever compare differences).
//!
//! Uses: `policy` (the plugin name as a label), `protocol`.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

use crate::policy::PluginName;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets_range};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::protocol::request::Method;

/// The content type of [`Metrics::render`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An enum of label values: each variant with its documentation and the value it is exported as.
macro_rules! label_values {
    ($(#[$doc:meta])* pub enum $name:ident { $($(#[$vdoc:meta])* $variant:ident = $value:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Every value.
            pub const ALL: [Self; [$($value),*].len()] = [$(Self::$variant),*];

            /// Its label value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $value,)*
                }
            }
        }

        impl EncodeLabelValue for $name {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
                EncodeLabelValue::encode(&self.as_str(), encoder)
            }
        }
    };
}

label_values! {
    /// What kind of plugin call.
    pub enum CallKind {
        /// `tools/call`.
        Tool = "tool",
        /// `prompts/get`.
        Prompt = "prompt",
        /// `resources/read`.
        Resource = "resource",
        /// `completion/complete`.
        Completion = "completion",
        /// Reading a plugin's lists (at load, or when it says they changed).
        List = "list",
    }
}

label_values! {
    /// How a plugin call ended.
    pub enum CallOutcome {
        /// It returned a result.
        Ok = "ok",
        /// It returned an error of its own (a tool's `isError`, a prompt's or resource's error).
        IsError = "is_error",
        /// It returned an error after the host refused it a grant during the call.
        Denied = "denied",
        /// It ran out of fuel.
        OutOfFuel = "out_of_fuel",
        /// It ran past its time limit.
        Timeout = "timeout",
        /// It tried to grow past its memory limit.
        OutOfMemory = "out_of_memory",
        /// It trapped: a panic, a stack overflow, any other trap.
        Trap = "trap",
        /// It broke a host bound (handles, host-call data) or could not be run.
        HostError = "host_error",
        /// The client cancelled it (or went away) before it finished.
        Cancelled = "cancelled",
        /// Refused before running: the arguments did not match the tool's input schema.
        InvalidArguments = "invalid_arguments",
    }
}

label_values! {
    /// Which grant a plugin was refused.
    pub enum Grant {
        /// Outgoing HTTP (`wasi:http`).
        Http = "http",
        /// A key-value bucket (`wasi:keyvalue`).
        Keyvalue = "keyvalue",
    }
}

label_values! {
    /// A global bound on what clients can make the host hold.
    pub enum Bound {
        /// Open 2025-11-25 and 2024-11-05 SSE sessions over HTTP (`--max-sessions`).
        Sessions = "sessions",
        /// Open listen streams: 2026-07-28 `subscriptions/listen` and 2025-11-25 GET streams
        /// (`--max-listen-streams`, and the descriptors left after the reserve).
        ListenStreams = "listen_streams",
        /// Bytes of requests being read or served (`--max-request-bytes-in-flight`).
        RequestBytes = "request_bytes",
    }
}

label_values! {
    /// A budget each caller (principal) has of its own (`[budgets]` in the configuration file).
    pub enum Budgeted {
        /// Plugin calls running at once (`tools/call`, `prompts/get`, `resources/read`,
        /// `completion/complete`).
        Calls = "calls",
        /// Open HTTP sessions.
        Sessions = "sessions",
        /// Open listen streams.
        ListenStreams = "listen_streams",
        /// Bytes of requests being read or served.
        RequestBytes = "request_bytes",
        /// Requests a second (a token bucket).
        Rate = "rate",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BudgetLabels {
    limit: Budgeted,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BudgetPrincipalLabels {
    limit: Budgeted,
    principal: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BoundLabels {
    limit: Bound,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    outcome: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MethodLabels {
    method: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CallLabels {
    plugin: PluginName,
    kind: CallKind,
    name: Arc<str>,
    outcome: CallOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CallTimeLabels {
    plugin: PluginName,
    kind: CallKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PluginLabels {
    plugin: PluginName,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DenialLabels {
    plugin: PluginName,
    grant: Grant,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TransportLabels {
    transport: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

fn seconds_histogram() -> Histogram {
    // 50 µs to 60 s: an echo call to a plugin's time limit.
    Histogram::new(exponential_buckets_range(0.000_05, 60.0, 16))
}

/// The metrics, registered once.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_seconds: Family<MethodLabels, Histogram, fn() -> Histogram>,
    calls: Family<CallLabels, Counter>,
    call_seconds: Family<CallTimeLabels, Histogram, fn() -> Histogram>,
    fuel: Family<PluginLabels, Counter>,
    invalid_results: Family<PluginLabels, Counter>,
    denials: Family<DenialLabels, Counter>,
    instances_in_use: Gauge,
    spare_instances: Family<OutcomeLabels, Counter>,
    kept_instances: Family<OutcomeLabels, Counter>,
    instances_waiting: Gauge,
    instance_slots: Gauge,
    sessions: Family<TransportLabels, Gauge>,
    listen_streams: Gauge,
    reloads: Family<OutcomeLabels, Counter>,
    cache: Family<OutcomeLabels, Counter>,
    plugins: Gauge,
    bound_max: Family<BoundLabels, Gauge>,
    bound_in_use: Family<BoundLabels, Gauge>,
    bound_refusals: Family<BoundLabels, Counter>,
    budget_in_use: Family<BudgetLabels, Gauge>,
    budget_refusals: Family<BudgetLabels, Counter>,
    budget_refusals_by_principal: Family<BudgetPrincipalLabels, Counter>,
    state_store_up: Gauge,
    audit_dropped: Counter,
    tasks_running: Gauge,
    tasks: Family<OutcomeLabels, Counter>,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("mcpbox");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "MCP requests answered, by method and outcome (ok, error, cancelled)",
            requests.clone(),
        );
        let request_seconds: Family<MethodLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(seconds_histogram);
        registry.register_with_unit(
            "request_duration",
            "Time from a request's arrival to its answer, by method",
            Unit::Seconds,
            request_seconds.clone(),
        );
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "plugin_calls",
            "Calls into plugins, by plugin, kind, name (a tool's or prompt's) and outcome",
            calls.clone(),
        );
        let call_seconds: Family<CallTimeLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(seconds_histogram);
        registry.register_with_unit(
            "plugin_call_duration",
            "Time a plugin call took, from asking for an instance to its result, by plugin and kind",
            Unit::Seconds,
            call_seconds.clone(),
        );
        let fuel = Family::<PluginLabels, Counter>::default();
        registry.register(
            "plugin_fuel_consumed",
            "Fuel (deterministic CPU units) plugins consumed, by plugin",
            fuel.clone(),
        );
        let invalid_results = Family::<PluginLabels, Counter>::default();
        registry.register(
            "plugin_invalid_results",
            "Plugin results refused because they broke a tool's output schema or the result size limit, by plugin",
            invalid_results.clone(),
        );
        let denials = Family::<DenialLabels, Counter>::default();
        registry.register(
            "plugin_grant_denials",
            "Host calls refused because the plugin was not granted them, by plugin and grant",
            denials.clone(),
        );
        let instances_in_use = Gauge::default();
        registry.register(
            "instances_in_use",
            "Plugin instances running now",
            instances_in_use.clone(),
        );
        let spare_instances = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "spare_instances",
            "Instances prepared ahead of a plugin's next call, by outcome (used by a call, expired unused)",
            spare_instances.clone(),
        );
        let kept_instances = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "kept_instances",
            "Instances kept after a call for the same caller's next one (instances = \"per-caller\"), by outcome (kept, used by the caller's next call, expired unused)",
            kept_instances.clone(),
        );
        let instances_waiting = Gauge::default();
        registry.register(
            "instances_waiting",
            "Plugin calls waiting for an instance slot (--max-instances)",
            instances_waiting.clone(),
        );
        let instance_slots = Gauge::default();
        registry.register(
            "instance_slots",
            "How many plugin instances may run at once (--max-instances)",
            instance_slots.clone(),
        );
        let sessions = Family::<TransportLabels, Gauge>::default();
        registry.register(
            "sessions",
            "Open sessions, by transport (stdio, http: a 2025-11-25 HTTP or SSE session)",
            sessions.clone(),
        );
        let listen_streams = Gauge::default();
        registry.register(
            "listen_streams",
            "Open 2026-07-28 subscriptions/listen streams",
            listen_streams.clone(),
        );
        let reloads = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "reloads",
            "Plugin files handled by hot reload, by outcome (added, replaced, removed, failed)",
            reloads.clone(),
        );
        let cache = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "compiled_cache_lookups",
            "Lookups in the compiled-plugin cache, by outcome (hit, miss)",
            cache.clone(),
        );
        let plugins = Gauge::default();
        registry.register("plugins_loaded", "Plugins serving now", plugins.clone());
        let bound_max = Family::<BoundLabels, Gauge>::default();
        registry.register(
            "limit",
            "A global bound on what clients can make the host hold, by limit (sessions, listen_streams, request_bytes)",
            bound_max.clone(),
        );
        let bound_in_use = Family::<BoundLabels, Gauge>::default();
        registry.register(
            "limit_in_use",
            "How much of each global bound is in use, by limit",
            bound_in_use.clone(),
        );
        let bound_refusals = Family::<BoundLabels, Counter>::default();
        registry.register(
            "limit_refusals",
            "Requests refused because a global bound was reached, by limit",
            bound_refusals.clone(),
        );
        let budget_in_use = Family::<BudgetLabels, Gauge>::default();
        registry.register(
            "budget_in_use",
            "How much of the callers' budgets is in use, summed over callers, by limit (the rate's is 0)",
            budget_in_use.clone(),
        );
        let budget_refusals = Family::<BudgetLabels, Counter>::default();
        registry.register(
            "budget_refusals",
            "Requests refused because their caller was at one of its budgets, by limit",
            budget_refusals.clone(),
        );
        let budget_refusals_by_principal = Family::<BudgetPrincipalLabels, Counter>::default();
        registry.register(
            "budget_refusals_by_principal",
            "Requests refused at a budget, by limit and caller (only with [budgets] label_principals = true)",
            budget_refusals_by_principal.clone(),
        );
        for limit in Budgeted::ALL {
            drop(budget_in_use.get_or_create(&BudgetLabels { limit }));
            drop(budget_refusals.get_or_create(&BudgetLabels { limit }));
        }
        for limit in Bound::ALL {
            drop(bound_max.get_or_create(&BoundLabels { limit }));
            drop(bound_in_use.get_or_create(&BoundLabels { limit }));
            drop(bound_refusals.get_or_create(&BoundLabels { limit }));
        }
        let state_store_up = Gauge::default();
        state_store_up.set(1);
        registry.register(
            "state_store_up",
            "Whether the plugin state store answers (1) or not (0); the embedded store is always 1",
            state_store_up.clone(),
        );
        // The bounded label sets start at zero, so that rates and dashboards see them at once.
        for transport in ["stdio", "http"] {
            drop(sessions.get_or_create(&TransportLabels { transport }));
        }
        for outcome in ["added", "replaced", "removed", "failed"] {
            drop(reloads.get_or_create(&OutcomeLabels { outcome }));
        }
        for outcome in ["hit", "miss"] {
            drop(cache.get_or_create(&OutcomeLabels { outcome }));
        }
        let tasks_running = Gauge::default();
        registry.register(
            "tasks_running",
            "Calls run as tasks (the tasks extension) that this process runs now",
            tasks_running.clone(),
        );
        let tasks = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "tasks",
            "Task runs ended on this process, by how (completed, failed, input_required, cancelled)",
            tasks.clone(),
        );
        for outcome in ["completed", "failed", "input_required", "cancelled"] {
            drop(tasks.get_or_create(&OutcomeLabels { outcome }));
        }
        let audit_dropped = Counter::default();
        registry.register(
            "audit_records_dropped",
            "Audit records dropped because the audit log writer fell behind",
            audit_dropped.clone(),
        );
        registry.register(
            "build",
            "The mcpbox version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        Self {
            registry,
            requests,
            request_seconds,
            calls,
            call_seconds,
            fuel,
            invalid_results,
            denials,
            instances_in_use,
            spare_instances,
            kept_instances,
            instances_waiting,
            instance_slots,
            sessions,
            listen_streams,
            reloads,
            cache,
            plugins,
            bound_max,
            bound_in_use,
            bound_refusals,
            budget_in_use,
            budget_refusals,
            budget_refusals_by_principal,
            state_store_up,
            audit_dropped,
            tasks_running,
            tasks,
        }
    }

    /// Counts a task run on this process until dropped.
    pub fn task_running(&self) -> GaugeGuard {
        GaugeGuard::new(self.tasks_running.clone())
    }

    /// A task run ended: `outcome` is its status then.
    pub fn task_ended(&self, outcome: &'static str) {
        self.tasks.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// A global bound's maximum.
    pub fn set_bound(&self, limit: Bound, max: usize) {
        self.bound_max
            .get_or_create(&BoundLabels { limit })
            .set(i64::try_from(max).unwrap_or(i64::MAX));
    }

    /// The gauge of how much of a global bound is in use, to keep and set without a lookup
    /// (a bound's holder sets it on every take and give-back).
    pub fn bound_gauge(&self, limit: Bound) -> BoundGauge {
        BoundGauge(
            self.bound_in_use
                .get_or_create(&BoundLabels { limit })
                .clone(),
        )
    }

    /// A request refused at a global bound.
    pub fn bound_refused(&self, limit: Bound) {
        self.bound_refusals
            .get_or_create(&BoundLabels { limit })
            .inc();
    }

    /// How much of the callers' budgets of `limit` is in use now, summed over callers.
    pub fn budget_in_use(&self, limit: Budgeted, used: usize) {
        self.budget_in_use
            .get_or_create(&BudgetLabels { limit })
            .set(i64::try_from(used).unwrap_or(i64::MAX));
    }

    /// A request refused at its caller's budget of `limit`; `principal` is the caller's key
    /// when the operator asked for callers as labels.
    pub fn budget_refused(&self, limit: Budgeted, principal: Option<&str>) {
        self.budget_refusals
            .get_or_create(&BudgetLabels { limit })
            .inc();
        if let Some(principal) = principal {
            self.budget_refusals_by_principal
                .get_or_create(&BudgetPrincipalLabels {
                    limit,
                    principal: principal.to_owned(),
                })
                .inc();
        }
    }

    /// The text exposition (OpenMetrics), for a scrape.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(16 * 1024);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// A request answered (`outcome`: ok, error) or cancelled, after `elapsed`.
    pub fn request(&self, method: &Method, outcome: &'static str, elapsed: Duration) {
        let method = method.label();
        self.requests
            .get_or_create(&RequestLabels { method, outcome })
            .inc();
        self.request_seconds
            .get_or_create(&MethodLabels { method })
            .observe(elapsed.as_secs_f64());
    }

    /// A plugin call ended.
    pub fn call(
        &self,
        plugin: &PluginName,
        kind: CallKind,
        name: &Arc<str>,
        outcome: CallOutcome,
        elapsed: Duration,
    ) {
        self.calls
            .get_or_create(&CallLabels {
                plugin: plugin.clone(),
                kind,
                name: Arc::clone(name),
                outcome,
            })
            .inc();
        if outcome != CallOutcome::InvalidArguments {
            self.call_seconds
                .get_or_create(&CallTimeLabels {
                    plugin: plugin.clone(),
                    kind,
                })
                .observe(elapsed.as_secs_f64());
        }
    }

    /// How `plugin`'s calls of `calls` (kind and name) ended so far: the count of each
    /// outcome that happened (for the status page).
    pub fn outcomes(
        &self,
        plugin: &PluginName,
        calls: &[(CallKind, Arc<str>)],
    ) -> Vec<(CallOutcome, u64)> {
        CallOutcome::ALL
            .iter()
            .map(|&outcome| {
                let count: u64 = calls
                    .iter()
                    .filter_map(|(kind, name)| {
                        self.calls
                            .get(&CallLabels {
                                plugin: plugin.clone(),
                                kind: *kind,
                                name: Arc::clone(name),
                                outcome,
                            })
                            .map(|c| c.get())
                    })
                    .sum();
                (outcome, count)
            })
            .filter(|(_, count)| *count > 0)
            .collect()
    }

    /// Fuel a plugin consumed in one call.
    pub fn fuel(&self, plugin: &PluginName, fuel: u64) {
        self.fuel
            .get_or_create(&PluginLabels {
                plugin: plugin.clone(),
            })
            .inc_by(fuel);
    }

    /// An audit record dropped (the writer fell behind).
    pub fn audit_dropped(&self) {
        self.audit_dropped.inc();
    }

    /// A tool result refused (broke its output schema or a size limit).
    pub fn invalid_result(&self, plugin: &PluginName) {
        self.invalid_results
            .get_or_create(&PluginLabels {
                plugin: plugin.clone(),
            })
            .inc();
    }

    /// A host call refused for want of a grant.
    pub fn denial(&self, plugin: &PluginName, grant: Grant) {
        self.denials
            .get_or_create(&DenialLabels {
                plugin: plugin.clone(),
                grant,
            })
            .inc();
    }

    /// The number of instance slots.
    pub fn set_instance_slots(&self, slots: u32) {
        self.instance_slots.set(i64::from(slots));
    }

    /// Counts a call waiting for a slot until dropped.
    pub fn waiting(&self) -> GaugeGuard {
        GaugeGuard::new(self.instances_waiting.clone())
    }

    /// Counts an instance in use until dropped.
    pub fn in_use(&self) -> GaugeGuard {
        GaugeGuard::new(self.instances_in_use.clone())
    }

    /// A spare instance was used by a call (`used`) or dropped unused (`expired`).
    pub fn spare_instance(&self, outcome: &'static str) {
        self.spare_instances
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// An instance was kept after a call for its caller's next one (`kept`), used by it
    /// (`used`), or dropped unused (`expired`).
    pub fn kept_instance(&self, outcome: &'static str) {
        self.kept_instances
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// Counts an open session until dropped (`transport`: stdio, http).
    pub fn session(&self, transport: &'static str) -> GaugeGuard {
        GaugeGuard::new(
            self.sessions
                .get_or_create(&TransportLabels { transport })
                .clone(),
        )
    }

    /// Counts an open listen stream until dropped.
    pub fn listen_stream(&self) -> GaugeGuard {
        GaugeGuard::new(self.listen_streams.clone())
    }

    /// A plugin file handled by hot reload (`outcome`: added, replaced, removed, failed).
    pub fn reload(&self, outcome: &'static str) {
        self.reloads.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// A compiled-cache lookup (`hit`: whether it found a usable entry).
    pub fn cache_lookup(&self, hit: bool) {
        let outcome = if hit { "hit" } else { "miss" };
        self.cache.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// How many plugins are serving.
    pub fn set_plugins(&self, count: usize) {
        self.plugins.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Whether the plugin state store answered its last health check.
    pub fn set_state_store_up(&self, up: bool) {
        self.state_store_up.set(i64::from(up));
    }
}

/// A gauge raised while this lives.
#[must_use = "the gauge goes down when the guard is dropped"]
pub struct GaugeGuard(Gauge);

impl GaugeGuard {
    fn new(gauge: Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// How much of one global bound is in use (`mcpbox_limit_in_use`), kept by the bound's holder.
#[derive(Debug, Clone)]
pub struct BoundGauge(Gauge);

impl BoundGauge {
    /// Say that `used` is in use now.
    pub fn set(&self, used: usize) {
        self.0.set(i64::try_from(used).unwrap_or(i64::MAX));
    }
}

impl EncodeLabelValue for PluginName {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

#[cfg(test)]
mod tests;
