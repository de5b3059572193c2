//! Which traces are exported, decided once where a request's trace starts, so that a request whose trace is
//! not kept costs no OpenTelemetry work at all: the exporting layer's filter drops every span and event made
//! while it is served (a task-local mark), where the SDK's own sampler would decide only after each span's
//! attributes were collected. The share is the standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`,
//! read and checked by the config crate with every other knob and handed to [`super::logs::init`]; a request
//! with a `traceparent` follows its sampled flag under the parent-based samplers (the default). Spans that
//! start a trace elsewhere (an inbound event, a job without a parent) are decided by the SDK's sampler built
//! from the same value (never from the process environment, which would miss `.env`).

use std::sync::OnceLock;

use axum::http::HeaderMap;
use opentelemetry::trace::{Link, SpanKind, TraceContextExt, TraceId, TraceState};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{Sampler, SamplingDecision, SamplingResult, ShouldSample};
use wagate_config::TraceSampler;

use super::propagation::{HeaderExtractor, TRACEPARENT};

/// The attribute a kept request's root span carries, so the SDK's sampler keeps it too (its own draw
/// would otherwise keep only `ratio` of what was already drawn at `ratio`).
pub const KEPT: &str = "wagate.trace.kept";

tokio::task_local! {
    /// Set while a request whose trace is not kept is served.
    static NOT_KEPT: bool;
}

/// Which traces are kept: `OTEL_TRACES_SAMPLER` and its argument as the config crate read them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceSampling {
    /// Share of new traces kept, 0..=1.
    pub ratio: f64,
    /// Whether a caller's `traceparent` decides (the `parentbased_*` samplers and the default).
    pub follows_parent: bool,
}

/// Set once by [`super::logs::init`] when it installs trace export; until then nothing is exported.
static SAMPLING: OnceLock<TraceSampling> = OnceLock::new();

impl Default for TraceSampling {
    /// OpenTelemetry's default sampler, `parentbased_always_on`.
    fn default() -> TraceSampling {
        TraceSampling::new(TraceSampler::ParentbasedAlwaysOn, 1.0)
    }
}

impl TraceSampling {
    /// From `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG` (a ratio from 0 to 1, which only the ratio
    /// samplers read).
    pub fn new(sampler: TraceSampler, arg: f64) -> TraceSampling {
        TraceSampling {
            ratio: sampler.ratio(arg).clamp(0.0, 1.0),
            follows_parent: sampler.follows_parent(),
        }
    }

    /// The SDK's sampler making the same choice for spans that start a trace outside a request. A ratio of
    /// 1 or 0 is `AlwaysOn` or `AlwaysOff`, which decide exactly as `TraceIdRatioBased` does at those bounds.
    pub fn sdk_sampler(&self) -> Sampler {
        let root = if self.ratio >= 1.0 {
            Sampler::AlwaysOn
        } else if self.ratio <= 0.0 {
            Sampler::AlwaysOff
        } else {
            Sampler::TraceIdRatioBased(self.ratio)
        };
        if self.follows_parent {
            Sampler::ParentBased(Box::new(root))
        } else {
            root
        }
    }

    /// Makes `self` the choice [`keeps_request`] applies; the first call wins (as the first subscriber does).
    pub(super) fn install(self) {
        let _ = SAMPLING.set(self);
    }

    fn current() -> TraceSampling {
        SAMPLING.get().copied().unwrap_or_default()
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
/// Without trace export nothing reads the mark, and the scope would be entered and left on every poll.
pub async fn serve_marked<F: Future>(kept: bool, work: F) -> F::Output {
    serve_marked_when(super::tracing_enabled(), kept, work).await
}

async fn serve_marked_when<F: Future>(exporting: bool, kept: bool, work: F) -> F::Output {
    if !exporting {
        return work.await;
    }
    NOT_KEPT.scope(!kept, work).await
}

/// [`serve_marked`] for synchronous work, such as making the request's own span.
pub fn sync_marked<R>(kept: bool, work: impl FnOnce() -> R) -> R {
    sync_marked_when(super::tracing_enabled(), kept, work)
}

fn sync_marked_when<R>(exporting: bool, kept: bool, work: impl FnOnce() -> R) -> R {
    if !exporting {
        return work();
    }
    NOT_KEPT.sync_scope(!kept, work)
}

/// Whether the running task serves a request whose trace is not kept (the exporting layer's filter).
pub fn in_trace_not_kept() -> bool {
    NOT_KEPT.try_with(|not_kept| *not_kept).unwrap_or(false)
}

/// The SDK's sampler of the configured [`TraceSampling`], except that a span marked [`KEPT`] is kept.
#[derive(Debug, Clone)]
pub(super) struct KeepMarked {
    fallback: Box<dyn ShouldSample>,
}

impl KeepMarked {
    pub(super) fn new(sampling: &TraceSampling) -> KeepMarked {
        KeepMarked {
            fallback: Box::new(sampling.sdk_sampler()),
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
    fn the_standard_samplers_give_the_share_and_the_parent_rule() {
        let default = TraceSampling::default();
        assert_eq!(default.ratio, 1.0);
        assert!(default.follows_parent);
        let read = TraceSampling::new;
        assert_eq!(
            read(TraceSampler::ParentbasedTraceidratio, 0.25).ratio,
            0.25
        );
        assert!(!read(TraceSampler::Traceidratio, 0.5).follows_parent);
        assert_eq!(
            read(TraceSampler::AlwaysOn, 0.5).ratio,
            1.0,
            "only the ratio samplers read the argument"
        );
        assert_eq!(read(TraceSampler::AlwaysOff, 1.0).ratio, 0.0);
        assert_eq!(read(TraceSampler::ParentbasedAlwaysOff, 1.0).ratio, 0.0);
        assert!(read(TraceSampler::ParentbasedAlwaysOff, 1.0).follows_parent);
    }

    /// The SDK's sampler is the one `OTEL_TRACES_SAMPLER` names, as the SDK would build it from the variables.
    #[test]
    fn the_sdk_sampler_is_built_from_the_configured_value() {
        let built = |sampler, arg| format!("{:?}", TraceSampling::new(sampler, arg).sdk_sampler());
        let want = |sampler: Sampler| format!("{sampler:?}");
        let parent = |root| Sampler::ParentBased(Box::new(root));
        assert_eq!(built(TraceSampler::AlwaysOn, 1.0), want(Sampler::AlwaysOn));
        assert_eq!(
            built(TraceSampler::AlwaysOff, 1.0),
            want(Sampler::AlwaysOff)
        );
        assert_eq!(
            built(TraceSampler::Traceidratio, 0.1),
            want(Sampler::TraceIdRatioBased(0.1))
        );
        assert_eq!(
            built(TraceSampler::ParentbasedAlwaysOn, 0.1),
            want(parent(Sampler::AlwaysOn))
        );
        assert_eq!(
            built(TraceSampler::ParentbasedAlwaysOff, 1.0),
            want(parent(Sampler::AlwaysOff))
        );
        assert_eq!(
            built(TraceSampler::ParentbasedTraceidratio, 0.25),
            want(parent(Sampler::TraceIdRatioBased(0.25)))
        );
    }

    /// A root span marked kept is sampled whatever the sampler says; an unmarked one is the sampler's.
    #[test]
    fn keep_marked_keeps_marked_roots_and_asks_the_sampler_otherwise() {
        let never = KeepMarked::new(&TraceSampling::new(TraceSampler::AlwaysOff, 1.0));
        let decide = |attributes: &[KeyValue]| {
            never
                .should_sample(
                    None,
                    TraceId::from_bytes([7; 16]),
                    "request",
                    &SpanKind::Server,
                    attributes,
                    &[],
                )
                .decision
        };
        assert_eq!(
            decide(&[KeyValue::new(KEPT, true)]),
            SamplingDecision::RecordAndSample
        );
        assert_eq!(decide(&[]), SamplingDecision::Drop);
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
        assert!(serve_marked_when(true, false, async { in_trace_not_kept() }).await);
        assert!(!serve_marked_when(true, true, async { in_trace_not_kept() }).await);
        assert!(sync_marked_when(true, false, in_trace_not_kept));
        assert!(!in_trace_not_kept());
    }

    #[tokio::test]
    async fn without_export_nothing_is_marked() {
        assert!(!serve_marked_when(false, false, async { in_trace_not_kept() }).await);
        assert!(!sync_marked_when(false, false, in_trace_not_kept));
        assert!(!serve_marked(false, async { in_trace_not_kept() }).await);
    }
}
