//! Which traces are exported, decided once where a request's trace starts, so that a request whose trace is
//! not kept costs no OpenTelemetry work at all: the exporting layer's filter drops every span and event made
//! while it is served (a task-local mark), where the SDK's own sampler would decide only after each span's
//! attributes were collected. The share is the standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`;
//! a request with a `traceparent` follows its sampled flag under the parent-based samplers (the default).
//! Spans that start a trace elsewhere (an inbound event, a job without a parent) are decided by the SDK's
//! sampler built from the same variables.

use std::sync::OnceLock;

use axum::http::HeaderMap;
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Config, SamplingDecision, SamplingResult, ShouldSample};

use super::propagation::{HeaderExtractor, TRACEPARENT};

/// The attribute a kept request's root span carries, so the SDK's sampler keeps it too (its own draw
/// would otherwise keep only `ratio` of what was already drawn at `ratio`).
pub const KEPT: &str = "wagate.trace.kept";

tokio::task_local! {
    /// Set while a request whose trace is not kept is served.
    static NOT_KEPT: bool;
}

/// The sampler variables, read once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceSampling {
    /// Share of new traces kept, 0..=1.
    pub ratio: f64,
    /// Whether a caller's `traceparent` decides (the `parentbased_*` samplers and the default).
    pub follows_parent: bool,
}

static SAMPLING: OnceLock<TraceSampling> = OnceLock::new();

impl TraceSampling {
    /// From the variables' values, as the OpenTelemetry SDK reads them (an unknown sampler or a bad
    /// argument falls back to keeping everything, as the SDK does).
    pub fn from_values(sampler: Option<&str>, arg: Option<&str>) -> TraceSampling {
        let arg_ratio = || {
            arg.and_then(|a| a.trim().parse::<f64>().ok())
                .filter(|r| (0.0..=1.0).contains(r))
                .unwrap_or(1.0)
        };
        let (ratio, follows_parent) = match sampler.map(str::trim) {
            Some("always_on") => (1.0, false),
            Some("always_off") => (0.0, false),
            Some("traceidratio") => (arg_ratio(), false),
            Some("parentbased_always_off") => (0.0, true),
            Some("parentbased_traceidratio") => (arg_ratio(), true),
            _ => (1.0, true),
        };
        TraceSampling {
            ratio,
            follows_parent,
        }
    }

    fn from_env() -> TraceSampling {
        let read = |name: &str| std::env::var(name).ok();
        TraceSampling::from_values(
            read("OTEL_TRACES_SAMPLER").as_deref(),
            read("OTEL_TRACES_SAMPLER_ARG").as_deref(),
        )
    }

    fn current() -> TraceSampling {
        *SAMPLING.get_or_init(TraceSampling::from_env)
    }

    /// Whether a request with these headers starts (or continues) a kept trace.
    fn keeps(&self, headers: &HeaderMap) -> bool {
        if self.follows_parent && headers.contains_key(TRACEPARENT) {
            let cx = opentelemetry::global::get_text_map_propagator(|p| {
                p.extract(&HeaderExtractor(headers))
            });
            let span = cx.span();
            let parent = span.span_context();
            if parent.is_valid() {
                return parent.is_sampled();
            }
        }
        self.ratio >= 1.0 || (self.ratio > 0.0 && rand::random::<f64>() < self.ratio)
    }
}

/// Whether the trace of a request with these headers is exported; always false when nothing is exported.
pub fn keeps_request(headers: &HeaderMap) -> bool {
    super::tracing_enabled() && TraceSampling::current().keeps(headers)
}

/// Runs `work` marked as part of a trace that is not kept (a no-op mark when `kept`).
pub async fn serve_marked<F: Future>(kept: bool, work: F) -> F::Output {
    NOT_KEPT.scope(!kept, work).await
}

/// [`serve_marked`] for synchronous work, such as making the request's own span.
pub fn sync_marked<R>(kept: bool, work: impl FnOnce() -> R) -> R {
    NOT_KEPT.sync_scope(!kept, work)
}

/// Whether the running task serves a request whose trace is not kept (the exporting layer's filter).
pub fn in_trace_not_kept() -> bool {
    NOT_KEPT.try_with(|not_kept| *not_kept).unwrap_or(false)
}

/// The SDK's sampler from the environment, except that a span marked [`KEPT`] is kept.
#[derive(Debug, Clone)]
pub(super) struct KeepMarked {
    fallback: Box<dyn ShouldSample>,
}

impl KeepMarked {
    pub(super) fn from_env() -> KeepMarked {
        // The SDK's default configuration builds its sampler from OTEL_TRACES_SAMPLER(_ARG).
        KeepMarked {
            fallback: Config::default().sampler,
        }
    }
}

impl ShouldSample for KeepMarked {
    fn should_sample(
        &self,
        parent_context: Option<&Context>,
        trace_id: TraceId,
        name: &str,
        span_kind: &SpanKind,
        attributes: &[KeyValue],
        links: &[Link],
    ) -> SamplingResult {
        let has_parent = parent_context.is_some_and(|cx| cx.span().span_context().is_valid());
        if !has_parent && attributes.iter().any(|kv| kv.key.as_str() == KEPT) {
            return SamplingResult {
                decision: SamplingDecision::RecordAndSample,
                attributes: Vec::new(),
                trace_state: TraceState::default(),
            };
        }
        self.fallback
            .should_sample(parent_context, trace_id, name, span_kind, attributes, links)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_variables_give_the_share_and_the_parent_rule() {
        let read = |s: Option<&str>, a: Option<&str>| TraceSampling::from_values(s, a);
        assert_eq!(read(None, None).ratio, 1.0);
        assert!(read(None, None).follows_parent);
        assert_eq!(
            read(Some("parentbased_traceidratio"), Some("0.25")).ratio,
            0.25
        );
        assert_eq!(read(Some("traceidratio"), Some("2")).ratio, 1.0);
        assert!(!read(Some("traceidratio"), Some("0.5")).follows_parent);
        assert_eq!(read(Some("always_off"), None).ratio, 0.0);
        assert_eq!(read(Some("parentbased_always_off"), None).ratio, 0.0);
    }

    #[test]
    fn a_caller_traceparent_decides_under_a_parent_based_sampler() {
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let never = TraceSampling {
            ratio: 0.0,
            follows_parent: true,
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            TRACEPARENT,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .expect("header"),
        );
        assert!(never.keeps(&headers), "a sampled parent is followed");
        headers.insert(
            TRACEPARENT,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
                .parse()
                .expect("header"),
        );
        let always = TraceSampling {
            ratio: 1.0,
            follows_parent: true,
        };
        assert!(!always.keeps(&headers), "an unsampled parent is followed");
        assert!(!never.keeps(&HeaderMap::new()));
        assert!(always.keeps(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn the_mark_holds_inside_the_work_only() {
        assert!(!in_trace_not_kept());
        assert!(serve_marked(false, async { in_trace_not_kept() }).await);
        assert!(!serve_marked(true, async { in_trace_not_kept() }).await);
        assert!(sync_marked(false, in_trace_not_kept));
        assert!(!in_trace_not_kept());
    }
}
