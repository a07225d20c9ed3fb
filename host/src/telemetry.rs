//! OpenTelemetry traces. With `--otlp-endpoint`, the spans of each request — the HTTP request,
//! the MCP request, the plugin call, and the host calls the plugin makes (HTTP egress) — are
//! exported over OTLP/HTTP (JSON) by a batch exporter, each request parented on the trace
//! context its client sent (`traceparent` and `tracestate` in `_meta`, or in the HTTP headers).
//!
//! Off by default, and free when off: the spans are TRACE-level under their own target
//! ([`TARGET`]), which only the OpenTelemetry layer enables, so without it their call sites are
//! never interested and record nothing.
//!
//! The exporter is the cargo feature `otel` (on by default). A build without it serves the
//! same and refuses `--otlp-endpoint` with an error saying so; its spans cost nothing.
//!
//! Uses: nothing else in the crate.

#[cfg(feature = "otel")]
use std::collections::HashMap;

#[cfg(feature = "otel")]
use opentelemetry::propagation::TextMapPropagator as _;
#[cfg(feature = "otel")]
use opentelemetry::trace::TracerProvider as _;
#[cfg(feature = "otel")]
use opentelemetry_otlp::{Protocol, WithExportConfig as _};
#[cfg(feature = "otel")]
use opentelemetry_sdk::propagation::TraceContextPropagator;
#[cfg(feature = "otel")]
use opentelemetry_sdk::trace::SdkTracerProvider;
#[cfg(feature = "otel")]
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The target of every span exported.
pub const TARGET: &str = "mcpbox::otel";

/// The running exporter: flushes what it holds when shut down.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Export the spans still held (at exit).
    pub fn shutdown(&self) {
        #[cfg(feature = "otel")]
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!("stopping the trace exporter: {e}");
        }
    }
}

/// Without the `otel` feature there is no exporter: `--otlp-endpoint` is refused.
#[cfg(not(feature = "otel"))]
pub fn layer(endpoint: &str) -> Result<(tracing_subscriber::layer::Identity, Telemetry), String> {
    Err(format!(
        "--otlp-endpoint `{endpoint}`: this mcpbox was built without OpenTelemetry (the cargo \
         feature `otel`, on by default)"
    ))
}

/// Without the `otel` feature spans have no trace context to take.
#[cfg(not(feature = "otel"))]
pub fn set_parent(_span: &tracing::Span, _traceparent: &str, _tracestate: Option<&str>) {}

/// Without the `otel` feature no span is in a trace.
#[cfg(not(feature = "otel"))]
pub fn trace_id(_span: &tracing::Span) -> Option<String> {
    None
}

#[cfg(feature = "otel")]
/// The OTLP exporter for `endpoint` (`http://collector:4318`; `/v1/traces` is added when it
/// names no path), and the layer that feeds it spans of [`TARGET`].
pub fn layer<S>(
    endpoint: &str,
) -> Result<(impl tracing_subscriber::Layer<S> + 'static, Telemetry), String>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
{
    use tracing_subscriber::Layer as _;
    let url: url::Url = endpoint
        .parse()
        .map_err(|e| format!("--otlp-endpoint `{endpoint}` is not a URL: {e}"))?;
    if url.scheme() != "http" {
        return Err(format!(
            "--otlp-endpoint `{endpoint}` must be http:// (an OpenTelemetry collector or agent \
             nearby; it forwards over TLS if needed)"
        ));
    }
    let endpoint = if matches!(url.path(), "" | "/") {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    } else {
        endpoint.to_owned()
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(&endpoint)
        .build()
        .map_err(|e| format!("cannot set up the OTLP exporter for {endpoint}: {e}"))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("mcpbox")
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("mcpbox");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(
            tracing_subscriber::filter::Targets::new().with_target(TARGET, tracing::Level::TRACE),
        );
    Ok((layer, Telemetry { provider }))
}

#[cfg(feature = "otel")]
/// Parent `span` on the W3C trace context `traceparent` (with `tracestate`), when it is valid;
/// otherwise `span` keeps the parent it has. Does nothing when tracing is off.
pub fn set_parent(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert("traceparent".to_owned(), traceparent.to_owned());
    if let Some(state) = tracestate {
        carrier.insert("tracestate".to_owned(), state.to_owned());
    }
    let context = TraceContextPropagator::new().extract(&carrier);
    use opentelemetry::trace::TraceContextExt as _;
    if context.span().span_context().is_valid() {
        let _ = span.set_parent(context);
    }
}

#[cfg(feature = "otel")]
/// The trace id `span` belongs to (32 hex digits), when tracing is on and it is in a valid
/// trace.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    use opentelemetry::trace::TraceContextExt as _;
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}
