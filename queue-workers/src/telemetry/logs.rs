//! Log output and trace export of a process. Logs go to stdout as text (ANSI colours only on a terminal) or
//! JSON (`LOG_FORMAT=json`), written in batches by a thread of their own (`log_writer`). With `OTEL_EXPORTER_OTLP_ENDPOINT` set, spans are also exported over OTLP/HTTP
//! (protobuf) from a batch thread; unset, no OpenTelemetry layer is installed at all, so spans cost what plain
//! `tracing` spans cost. Log lines inside a request or job span carry its `trace_id` field.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{FilterExt as _, Targets, dynamic_filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::log_writer::{self, WriterGuard};
use super::sampling::{KeepMarked, TraceSampling, in_trace_not_kept};

static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans of this process are exported (checked before any propagation work on hot paths).
pub fn tracing_enabled() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// How a process logs and traces.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// `LOG_LEVEL` as a `tracing` level (`verbose` already turned into `trace`).
    pub level: String,
    pub json: bool,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL; spans go to `<base>/v1/traces`.
    pub otel_endpoint: Option<String>,
    /// `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`: which traces are exported.
    pub sampling: TraceSampling,
    /// `service.name` of the exported spans (`wagate`, `wagate-worker`).
    pub service_name: &'static str,
    /// `service.instance.id` (the node id, or the worker's host name).
    pub instance_id: String,
}

impl LogSettings {
    /// The filter: the chosen level for our code and `tower_http`, quieter defaults for chatty dependencies.
    /// (`tower=warn` alone would also silence `tower_http`: directives match target prefixes.)
    pub fn filter(&self) -> String {
        let level = &self.level;
        format!(
            "{level},sqlx=warn,hyper=warn,h2=warn,tower=warn,tower_http={level},opentelemetry=warn,reqwest=warn"
        )
    }

    /// The filter of exported spans: `info` (request, job and attempt spans) whatever `LOG_LEVEL` keeps out
    /// of the logs, so `LOG_LEVEL=warn` quiets the output without emptying the traces; a more verbose
    /// `LOG_LEVEL` applies to traces too.
    pub fn trace_filter(&self) -> String {
        let level = match self.level.as_str() {
            "debug" | "trace" => self.level.as_str(),
            _ => "info",
        };
        // The access log line repeats the request span's own fields: exported as a span event it doubled
        // what every request costs the exporter, so it stays in the logs only.
        format!(
            "{level},sqlx=warn,hyper=warn,h2=warn,tower=warn,tower_http={level},opentelemetry=warn,reqwest=warn,\
             wagate::access=off"
        )
    }
}

/// Keeps the trace exporter alive; dropping it flushes the spans still buffered.
#[must_use = "dropping the guard stops trace export"]
pub struct TracingGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TracingGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            EXPORTING.store(false, Ordering::Relaxed);
            if let Err(e) = provider.shutdown() {
                eprintln!("trace export did not shut down cleanly: {e}");
            }
        }
        flush_logs();
    }
}

fn tracer_provider(settings: &LogSettings, endpoint: &str) -> anyhow::Result<SdkTracerProvider> {
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    // The crate's default client is reqwest's blocking one (feature `reqwest-blocking-client`): the SDK exports
    // from its own batch thread, where the async client has no runtime and dropped every span.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .build()?;
    let resource = Resource::builder()
        .with_service_name(settings.service_name)
        .with_attribute(opentelemetry::KeyValue::new(
            "service.instance.id",
            settings.instance_id.clone(),
        ))
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            wagate_proto::VERSION,
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(KeepMarked::new(&settings.sampling))
        .with_resource(resource)
        .build())
}

/// Keeps the log writer's thread; taken (and so flushed) by [`flush_logs`].
static LOG_WRITER: Mutex<Option<WriterGuard>> = Mutex::new(None);

/// Writes out the log lines still queued and stops the writer; for a process about to exit (also done when
/// the [`TracingGuard`] drops). Lines logged after it are lost.
pub fn flush_logs() {
    if let Ok(mut slot) = LOG_WRITER.lock() {
        drop(slot.take());
    }
}

/// The text format's fields as the default formatter writes them without colours (`name=value`, the message
/// bare), but without painting each name: the default painted names through `nu_ansi_term` even with
/// colours off, which was a quarter of formatting the access line. A value is written bare only when it is
/// one plain token (or already a quoted string, as `&str` fields are); anything with spaces, quotes, `=`,
/// backslashes or control characters (a `%`-recorded value a client chose, an error's text) is written as a
/// quoted, escaped string, so no value can pass for further `name=value` pairs or start a line of its own.
/// The message stays bare with its control characters escaped.
fn plain_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use tracing_subscriber::field::MakeExt as _;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        with_scratch(|text| {
            use std::fmt::Write as _;
            write!(text, "{value:?}")?;
            match field.name() {
                "message" => write_message(w, text),
                name => {
                    let name = name.strip_prefix("r#").unwrap_or(name);
                    if is_plain_value(text) {
                        write!(w, "{name}={text}")
                    } else {
                        write!(w, "{name}={text:?}")
                    }
                }
            }
        })
    })
    .delimited(" ")
}

/// Runs `f` with this thread's cleared scratch string (a fresh one if the thread's is in use).
fn with_scratch(f: impl FnOnce(&mut String) -> std::fmt::Result) -> std::fmt::Result {
    use std::cell::RefCell;
    thread_local! {
        static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
    }
    /// A value longer than this leaves no buffer that size behind on the thread.
    const KEEP: usize = 16 * 1024;
    let mut f = Some(f);
    let reused = SCRATCH.try_with(|cell| {
        let mut text = cell.try_borrow_mut().ok()?;
        text.clear();
        let result = f.take().map(|f| f(&mut text));
        if text.capacity() > KEEP {
            *text = String::new();
        }
        result
    });
    match (reused, f) {
        (Ok(Some(result)), _) => result,
        (_, Some(f)) => f(&mut String::new()),
        (_, None) => Ok(()),
    }
}

/// Whether a formatted value can be written bare: one non-empty token without whitespace, control
/// characters, quotes, `=` or backslashes, or a string already quoted and escaped (a `&str` field's Debug).
fn is_plain_value(text: &str) -> bool {
    if is_quoted_string(text) {
        return true;
    }
    !text.is_empty()
        && !text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '=' | '\\'))
}

/// `"..."` with every inner quote and backslash escaped and no control character: one value to a reader.
fn is_quoted_string(text: &str) -> bool {
    let Some(inner) = text
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    else {
        return false;
    };
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            // An escape: the next character is part of it (consumed by the guard), whatever it is.
            '\\' if chars.next().is_none() => return false,
            '"' => return false,
            c if c.is_control() => return false,
            _ => {}
        }
    }
    true
}

/// The message as written, but a control character (a newline from a formatted argument) escaped.
fn write_message(
    w: &mut tracing_subscriber::fmt::format::Writer<'_>,
    text: &str,
) -> std::fmt::Result {
    if !text.chars().any(char::is_control) {
        return w.write_str(text);
    }
    for c in text.chars() {
        if c.is_control() {
            write!(w, "{}", c.escape_default())?;
        } else {
            w.write_char(c)?;
        }
    }
    Ok(())
}

/// Installs the process's subscriber. Call once, before anything logs; a second call (in-process tests)
/// leaves the first subscriber in place.
pub fn init(settings: &LogSettings) -> anyhow::Result<TracingGuard> {
    let ansi = std::io::stdout().is_terminal();
    // `Targets`, not `EnvFilter`: our filters name targets and levels only, and `EnvFilter` took a lock on
    // its span table at every span's creation, entry, exit and close (each poll of a request's future).
    let log_filter: Targets = settings.filter().parse()?;
    let (writer, writer_guard) = log_writer::spawn(std::io::stdout(), "wagate-log")?;
    let fmt_text = (!settings.json).then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .fmt_fields(plain_fields())
            .with_writer(writer.clone())
            .with_filter(log_filter.clone())
    });
    let fmt_json = settings.json.then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_ansi(false)
            .with_writer(writer)
            .with_filter(log_filter)
    });
    let provider = match settings.otel_endpoint.as_deref().filter(|e| !e.is_empty()) {
        Some(endpoint) => Some(tracer_provider(settings, endpoint)?),
        None => None,
    };
    // Only what a trace needs: code location, thread and target attributes cost an allocation or more per
    // span, and activating the OpenTelemetry context on every poll is for code that reads it implicitly
    // (ours passes spans explicitly). Requests whose trace is not kept never reach this layer.
    let trace_filter: Targets = settings.trace_filter().parse()?;
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer(settings.service_name))
            .with_tracked_inactivity(false)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_context_activation(false)
            .with_filter(trace_filter.and(dynamic_filter_fn(|_, _| !in_trace_not_kept())))
    });
    let installed = tracing_subscriber::registry()
        .with(fmt_text)
        .with(fmt_json)
        .with(otel)
        .try_init()
        .is_ok();
    if installed && let Ok(mut slot) = LOG_WRITER.lock() {
        *slot = Some(writer_guard);
    }
    if installed && provider.is_some() {
        settings.sampling.install();
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        EXPORTING.store(true, Ordering::Relaxed);
    }
    Ok(TracingGuard {
        provider: provider.filter(|_| installed),
    })
}

#[cfg(test)]
mod tests {
    use tracing::Level;
    use tracing_subscriber::filter::Targets;

    use super::{LogSettings, TraceSampling};

    fn settings(level: &str) -> LogSettings {
        LogSettings {
            level: level.to_owned(),
            json: false,
            otel_endpoint: None,
            sampling: TraceSampling::default(),
            service_name: "wagate",
            instance_id: "test".to_owned(),
        }
    }

    /// Formats one event through the text layer's fields.
    fn text_line(event: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .without_time()
            .fmt_fields(super::plain_fields())
            .with_writer(move || out.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, event);
        let bytes = buf.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_text_field_value_cannot_pass_for_more_fields() {
        let forged = "abc status=500 route=/api/admin key_id=forged";
        let line = text_line(|| {
            tracing::info!(
                target: "wagate::access",
                status = 200u16,
                latency_ms = 1.5,
                route = %"/api/sessions/{sessionId}",
                request_id = %forged,
                key_id = "k1",
                client = %"::1",
                "request served"
            )
        });
        assert!(
            line.contains("request served status=200 latency_ms=1.5"),
            "{line}"
        );
        assert!(line.contains("route=/api/sessions/{sessionId}"), "{line}");
        assert!(
            line.contains(r#"request_id="abc status=500 route=/api/admin key_id=forged""#),
            "{line}"
        );
        assert!(line.contains(r#"key_id="k1" client=::1"#), "{line}");
        assert_eq!(line.matches("status=").count(), 2, "{line}");
        let newline = text_line(|| tracing::warn!(error = %"a\nb=c \"q\"", "failed {}", "x\ny"));
        assert_eq!(newline.trim_end().lines().count(), 1, "{newline}");
        assert!(
            newline.contains(r#"failed x\ny error="a\nb=c \"q\"""#),
            "{newline}"
        );
        let quoted = text_line(|| tracing::info!(v = %"\"one value\"", w = %"a\\", "m"));
        assert!(quoted.contains(r#"v="one value" w="a\\""#), "{quoted}");
    }

    #[test]
    fn every_level_gives_filters_that_parse() {
        for level in ["error", "warn", "info", "debug", "trace"] {
            let settings = settings(level);
            assert!(settings.filter().parse::<Targets>().is_ok(), "{level}");
            assert!(
                settings.trace_filter().parse::<Targets>().is_ok(),
                "{level}"
            );
        }
    }

    #[test]
    fn chatty_dependencies_stay_quiet_and_access_lines_stay_out_of_traces() {
        let settings = settings("info");
        let logs: Targets = settings.filter().parse().unwrap();
        assert!(logs.would_enable("wagate::access", &Level::INFO));
        assert!(logs.would_enable("tower_http::trace", &Level::INFO));
        assert!(!logs.would_enable("sqlx::query", &Level::INFO));
        assert!(!logs.would_enable("tower::buffer", &Level::INFO));
        let traces: Targets = settings.trace_filter().parse().unwrap();
        assert!(!traces.would_enable("wagate::access", &Level::INFO));
        assert!(traces.would_enable("wagate_node::http", &Level::INFO));
        let quiet: Targets = self::settings("warn").trace_filter().parse().unwrap();
        assert!(quiet.would_enable("wagate_node::http", &Level::INFO));
    }
}
