//! W3C trace context (`traceparent`) across process boundaries: HTTP headers of a forwarded request, and the
//! delivery job a node pushes for a worker. Every function is a no-op unless this process exports spans.

use std::collections::HashMap;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::sampling::in_trace_not_kept;
use super::tracing_enabled;

pub const TRACEPARENT: &str = "traceparent";

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

pub(super) struct HeaderExtractor<'a>(pub(super) &'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

/// The OpenTelemetry context of `span`; asking for it starts the OpenTelemetry span when it has not started
/// yet (`tracing-opentelemetry` 0.34), so its ids are valid without entering the span (entering and leaving
/// would visit every layer twice).
fn started_context(span: &tracing::Span) -> opentelemetry::Context {
    span.context()
}

/// Sets an attribute on `span`'s exported span only: the log layers never see it (a span field would be
/// formatted into every log line of the span). Set before the span starts, the sampler sees it.
pub fn set_span_attribute(
    span: &tracing::Span,
    key: &'static str,
    value: impl Into<opentelemetry::Value>,
) {
    if tracing_enabled() {
        span.set_attribute(key, value);
    }
}

/// What a forward or a job carries on: `span`'s context, or, inside a request whose trace is not kept (its
/// spans were never made), a fresh context marked not sampled, so the next process does not start a trace
/// of its own for the rest of the work.
fn context_to_pass_on(span: &tracing::Span) -> opentelemetry::Context {
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };
    if !in_trace_not_kept() {
        return started_context(span);
    }
    let not_sampled = SpanContext::new(
        TraceId::from(rand::random::<u128>().max(1)),
        SpanId::from(rand::random::<u64>().max(1)),
        TraceFlags::default(),
        false,
        TraceState::default(),
    );
    opentelemetry::Context::new().with_remote_span_context(not_sampled)
}

/// Makes `span` a child of the trace named by the request's `traceparent` header, if any.
pub fn adopt_from_headers(span: &tracing::Span, headers: &HeaderMap) {
    if !tracing_enabled() || !headers.contains_key(TRACEPARENT) {
        return;
    }
    let cx =
        opentelemetry::global::get_text_map_propagator(|p| p.extract(&HeaderExtractor(headers)));
    let _ = span.set_parent(cx);
}

/// Writes `span`'s trace context into outgoing headers (a forwarded request).
pub fn inject_into_headers(span: &tracing::Span, headers: &mut HeaderMap) {
    if !tracing_enabled() {
        return;
    }
    let cx = context_to_pass_on(span);
    opentelemetry::global::get_text_map_propagator(|p| {
        p.inject_context(&cx, &mut HeaderInjector(headers))
    });
}

/// `span`'s `traceparent` value, for a job payload.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    if !tracing_enabled() {
        return None;
    }
    let cx = context_to_pass_on(span);
    let mut carrier: HashMap<String, String> = HashMap::new();
    opentelemetry::global::get_text_map_propagator(|p| p.inject_context(&cx, &mut carrier));
    carrier.remove(TRACEPARENT)
}

/// Makes `span` a child of the trace a job carried.
pub fn adopt_traceparent(span: &tracing::Span, traceparent: Option<&str>) {
    let Some(value) = traceparent.filter(|_| tracing_enabled()) else {
        return;
    };
    let carrier = HashMap::from([(TRACEPARENT.to_owned(), value.to_owned())]);
    let cx = opentelemetry::global::get_text_map_propagator(|p| p.extract(&carrier));
    let _ = span.set_parent(cx);
}

/// Records the span's trace id in its `trace_id` field (declared `Empty` where the span is made), so every
/// log line inside it names the trace.
pub fn record_trace_id(span: &tracing::Span) {
    use opentelemetry::trace::TraceContextExt;
    if !tracing_enabled() {
        return;
    }
    let cx = started_context(span);
    let span_ref = cx.span();
    let sc = span_ref.span_context();
    if sc.is_valid() {
        span.record("trace_id", tracing::field::display(sc.trace_id()));
    }
}
