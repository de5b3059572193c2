//! Telemetry both binaries share: the Prometheus recorder and the metric families (`metrics`), log output
//! and OpenTelemetry trace export (`logs`, written out by `log_writer`), W3C trace-context propagation across processes (`propagation`),
//! which requests' traces are kept (`sampling`), and the metrics scrape's token rule (`scrape`).

pub mod log_writer;
pub mod logs;
pub mod metrics;
pub mod propagation;
pub mod sampling;
pub mod scrape;

pub use logs::{LogSettings, TracingGuard, tracing_enabled};
pub use metrics::{BuildInfo, Recorder};
pub use sampling::TraceSampling;
