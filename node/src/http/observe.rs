//! Per-request observation, one middleware: the request span (a child of the caller's `traceparent`, when
//! traces are exported and this request's trace is kept: `telemetry/sampling.rs`), `wagate_http_requests_total` and the latency histogram by route template, and one
//! access-log line at info. The route is axum's matched template (`/api/sessions/{sessionId}`), never the
//! raw path, so labels stay bounded; unmatched requests are `unmatched`.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::{Extensions, Method};
use axum::response::Response;
use tracing::Instrument;
use wagate_proto::Role;
use wagate_workers::telemetry::metrics::{HTTP_DURATION, HTTP_REQUESTS, SENDS_REFUSED};
use wagate_workers::telemetry::{propagation, sampling};

use crate::app::ApiContext;

/// Where the `Caller` extractor leaves the key id and role it authenticated, for the access log (the key
/// itself is never written anywhere).
#[derive(Clone, Default)]
pub(crate) struct CallerSlot(Arc<OnceLock<(String, Role)>>);

impl CallerSlot {
    pub(crate) fn set(&self, key_id: &str, role: Role) {
        let _ = self.0.set((key_id.to_owned(), role));
    }
}

/// The client address the access log names: the one `http/client_addr.rs` decided (the real client behind
/// a trusted proxy or a proven forward).
fn client_addr_for_access_log(extensions: &Extensions) -> Option<IpAddr> {
    super::client_addr::client_ip_from(extensions)
}

/// A bounded method label: the standard methods by name, anything else `other`.
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// A send route the global rate limiter refused counts as a refused send too.
fn is_send_route(route: &str) -> bool {
    route.contains("/messages/send")
}

pub(crate) async fn observe(
    ctx: &ApiContext,
    mut req: Request,
    next: impl AsyncFnOnce(Request) -> Response,
) -> Response {
    let started = Instant::now();
    crate::footprint::note_request();
    let route: Arc<str> = match req.extensions().get::<MatchedPath>() {
        Some(path) => Arc::from(path.as_str()),
        None => Arc::from("unmatched"),
    };
    let method = method_label(req.method());
    let request_id = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let client = client_addr_for_access_log(req.extensions());
    let caller = CallerSlot::default();
    req.extensions_mut().insert(caller.clone());
    // Decided before the span is made: a request whose trace is not kept makes no exported span at all.
    let kept = sampling::keeps_request(req.headers());
    let span = sampling::sync_marked(kept, || {
        if !kept {
            // Only what ties the request's other log lines to it: the access line names the rest, and the
            // log layer formats every span field once per request.
            return tracing::info_span!("request", request_id = %request_id);
        }
        // What only the exported span needs goes to it alone (`set_span_attribute` below): the log layer
        // would format every field of the span once per request, and the access line names them anyway.
        tracing::info_span!(
            "request",
            otel.name = tracing::field::Empty,
            request_id = %request_id,
            trace_id = tracing::field::Empty,
        )
    });
    if kept {
        span.record("otel.name", format!("{method} {route}"));
        propagation::set_span_attribute(&span, sampling::KEPT, true);
        propagation::set_span_attribute(&span, "http.request.method", method);
        propagation::set_span_attribute(&span, "http.route", route.to_string());
        propagation::adopt_from_headers(&span, req.headers());
        propagation::record_trace_id(&span);
    }
    let response = sampling::serve_marked(kept, next(req).instrument(span.clone())).await;
    let elapsed = started.elapsed();
    let status = response.status().as_u16();
    if kept {
        propagation::set_span_attribute(&span, "http.response.status_code", i64::from(status));
    }
    metrics::counter!(
        HTTP_REQUESTS,
        "route" => route.clone(),
        "method" => method,
        "status" => status_label(status)
    )
    .increment(1);
    metrics::histogram!(HTTP_DURATION, "route" => route.clone(), "method" => method)
        .record(elapsed.as_secs_f64());
    if status == 429 && is_send_route(&route) {
        metrics::counter!(SENDS_REFUSED, "reason" => "rate_limit").increment(1);
    }
    let (key_id, role) = match caller.0.get() {
        Some((id, role)) => (id.as_str(), role.as_str()),
        None => ("-", "-"),
    };
    // In a kept trace the line carries the span's trace id; otherwise it names everything itself, and
    // entering the span would only print the request id twice.
    let _entered = kept.then(|| span.enter());
    tracing::info!(
        target: "wagate::access",
        method,
        route = %route,
        status,
        latency_ms = elapsed.as_secs_f64() * 1000.0,
        request_id = %request_id,
        key_id,
        role,
        client = %client.map_or_else(|| "-".to_owned(), |ip| ip.to_string()),
        node = %ctx.config.node_id,
        "request served"
    );
    response
}

/// Status codes as label values without allocating for the common ones.
fn status_label(status: u16) -> &'static str {
    match status {
        200 => "200",
        201 => "201",
        202 => "202",
        204 => "204",
        301 => "301",
        302 => "302",
        304 => "304",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        409 => "409",
        413 => "413",
        415 => "415",
        422 => "422",
        429 => "429",
        500 => "500",
        501 => "501",
        502 => "502",
        503 => "503",
        504 => "504",
        s if s < 200 => "1xx",
        s if s < 300 => "2xx",
        s if s < 400 => "3xx",
        s if s < 500 => "4xx",
        _ => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_bounded() {
        assert_eq!(
            method_label(&Method::from_bytes(b"PURGE").unwrap()),
            "other"
        );
        assert_eq!(status_label(418), "4xx");
        assert_eq!(status_label(404), "404");
        assert!(is_send_route(
            "/api/sessions/{sessionId}/messages/send-text"
        ));
        assert!(!is_send_route("/api/sessions/{sessionId}/messages"));
    }
}
