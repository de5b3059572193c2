//! Traces leave the processes over OTLP/HTTP and connect across them: a real OTLP receiver on loopback
//! decodes the protobuf export requests with the official definitions (`opentelemetry-proto`) and the test
//! follows the span parents. One trace goes from an inbound engine event on a `ROLE=api` node through the
//! commit and the outbox to the delivery attempt in a separate `wagate-worker`; one goes from a request on a
//! node that does not own the session, through the forward, to the owner's engine call. And JSON log lines
//! written inside a request or a delivery attempt carry the exported trace's id.

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use parking_lot::Mutex;
use prost::Message;
use serde_json::json;
use support::{add_webhook, fast_options, inbound, ready_session, wait_for, worker_binary};
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
use wagate_loadtest::harness::sessions::create_linked;
use wagate_loadtest::harness::{Node, Receiver};

#[derive(Debug, Clone)]
struct SpanSeen {
    name: String,
    service: String,
    instance: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent: Vec<u8>,
}

/// An OTLP/HTTP trace receiver on loopback that keeps every span it is sent.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<SpanSeen>>>,
}

fn attribute(attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> String {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            other => format!("{other:?}"),
        })
        .unwrap_or_default()
}

impl Collector {
    async fn start() -> Collector {
        let spans: Arc<Mutex<Vec<SpanSeen>>> = Arc::default();
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            post(move |body: Bytes| {
                let kept = kept.clone();
                async move {
                    let request = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
                    for resource_spans in request.resource_spans {
                        let attrs = resource_spans
                            .resource
                            .map(|r| r.attributes)
                            .unwrap_or_default();
                        let service = attribute(&attrs, "service.name");
                        let instance = attribute(&attrs, "service.instance.id");
                        for scope in resource_spans.scope_spans {
                            for span in scope.spans {
                                kept.lock().push(SpanSeen {
                                    name: span.name,
                                    service: service.clone(),
                                    instance: instance.clone(),
                                    trace_id: span.trace_id,
                                    span_id: span.span_id,
                                    parent: span.parent_span_id,
                                });
                            }
                        }
                    }
                    (
                        [("content-type", "application/x-protobuf")],
                        ExportTraceServiceResponse::default().encode_to_vec(),
                    )
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Collector { url, spans }
    }

    fn spans(&self) -> Vec<SpanSeen> {
        self.spans.lock().clone()
    }

    /// The spans of the trace that `pick` finds a span of, once that span has arrived.
    async fn trace_of(&self, pick: impl Fn(&SpanSeen) -> bool) -> Vec<SpanSeen> {
        wait_for(Duration::from_secs(30), || async {
            self.spans().iter().any(&pick)
        })
        .await;
        // Parents are exported after their children finish; give the batch processors a moment.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let all = self.spans();
        let trace = all
            .iter()
            .find(|s| pick(s))
            .expect("picked")
            .trace_id
            .clone();
        all.into_iter().filter(|s| s.trace_id == trace).collect()
    }
}

/// Every span of `trace` but its root has its parent in the trace: one connected tree.
fn assert_connected(trace: &[SpanSeen]) {
    let ids: HashMap<&[u8], &SpanSeen> = trace.iter().map(|s| (s.span_id.as_slice(), s)).collect();
    let roots: Vec<&SpanSeen> = trace.iter().filter(|s| s.parent.is_empty()).collect();
    assert_eq!(roots.len(), 1, "one root: {trace:#?}");
    for span in trace.iter().filter(|s| !s.parent.is_empty()) {
        assert!(
            ids.contains_key(span.parent.as_slice()),
            "{} has its parent in the trace: {trace:#?}",
            span.name
        );
    }
}

fn otel_env(collector: &Collector) -> Vec<(String, String)> {
    vec![
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT".to_string(),
            collector.url.clone(),
        ),
        ("OTEL_BSP_SCHEDULE_DELAY".to_string(), "100".to_string()),
    ]
}

#[tokio::test]
async fn an_inbound_event_is_one_trace_from_the_engine_to_the_workers_delivery() {
    let collector = Collector::start().await;
    let mut env = otel_env(&collector);
    env.push(("WEBHOOK_SSRF_PROTECT".into(), "false".into()));
    let cluster = TestCluster::start_with(
        env!("CARGO_BIN_EXE_wagate"),
        ClusterOptions {
            size: 1,
            timings: Timings::default(),
            worker_binary: Some(worker_binary()),
            env,
        },
    )
    .await
    .expect("node and worker");
    let c = cluster.client(0);
    let session = ready_session(&c, "traced-event").await;
    let rx = Receiver::start().await.expect("receiver");
    add_webhook(
        &c,
        &session,
        json!({ "url": rx.url(), "events": ["message.received"] }),
    )
    .await;
    inbound(&c, &session, "15550002222@c.us", "trace me").await;
    rx.wait_until(Duration::from_secs(30), |d| !d.is_empty())
        .await;
    let trace = collector
        .trace_of(|s| s.name == "webhook_attempt" && s.service == "wagate-worker")
        .await;
    let names: Vec<&str> = trace.iter().map(|s| s.name.as_str()).collect();
    for name in [
        "engine_event",
        "outbox_write",
        "webhook_delivery_job",
        "webhook_attempt",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let root = trace.iter().find(|s| s.parent.is_empty()).expect("root");
    assert_eq!(
        (root.name.as_str(), root.service.as_str()),
        ("engine_event", "wagate")
    );
    assert_connected(&trace);
}

#[tokio::test]
async fn a_forwarded_request_is_one_trace_to_the_owners_engine_call() {
    let collector = Collector::start().await;
    let cluster = TestCluster::start_with(
        env!("CARGO_BIN_EXE_wagate"),
        ClusterOptions {
            size: 2,
            timings: Timings::default(),
            worker_binary: None,
            env: otel_env(&collector),
        },
    )
    .await
    .expect("cluster");
    let id = create_linked(&cluster.client(0), "traced-fwd", "15550003001")
        .await
        .expect("linked on node a");
    create_linked(&cluster.client(0), "traced-peer", "15550003002")
        .await
        .expect("the recipient");
    let sent = cluster
        .client(1)
        .post(
            &format!("/api/sessions/{id}/messages/send-text"),
            json!({ "chatId": "15550003002@c.us", "text": "through the owner" }),
        )
        .await
        .expect("send");
    assert!(sent.status < 300, "{}", sent.text);
    assert_eq!(sent.header("x-wagate-served-by"), Some("node-a"));
    let trace = collector
        .trace_of(|s| s.name == "forward" && s.instance == "node-b")
        .await;
    let engine_call = trace
        .iter()
        .find(|s| s.name == "engine_call")
        .unwrap_or_else(|| panic!("the owner's engine call is in the trace: {trace:#?}"));
    assert_eq!(engine_call.instance, "node-a");
    let root = trace.iter().find(|s| s.parent.is_empty()).expect("root");
    assert_eq!(
        (root.name.as_str(), root.instance.as_str()),
        (
            "POST /api/sessions/{sessionId}/messages/send-text",
            "node-b"
        )
    );
    assert_connected(&trace);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `trace_id` of the innermost span of every JSON log line whose message is `message`.
fn logged_trace_ids(logs: &str, message: &str) -> Vec<String> {
    logs.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|line| line["fields"]["message"] == message)
        .map(|line| line["span"]["trace_id"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn json_log_lines_carry_the_trace_id_of_their_request_and_delivery() {
    let collector = Collector::start().await;
    let mut options = fast_options()
        .env("LOG_FORMAT", "json")
        .env("WEBHOOK_SSRF_PROTECT", "false");
    for (k, v) in otel_env(&collector) {
        options = options.env(&k, v);
    }
    let node = Node::start(options).await.expect("node");
    let c = node.client();

    // A request continuing a caller's trace: its access-log line names that trace.
    let caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let read = c
        .send(c.raw(reqwest::Method::GET, "/api/sessions").header(
            "traceparent",
            format!("00-{caller_trace}-00f067aa0ba902b7-01"),
        ))
        .await
        .expect("read");
    assert_eq!(read.status, 200, "{}", read.text);
    let exported = collector
        .trace_of(|s| s.name == "GET /api/sessions" && hex(&s.trace_id) == caller_trace)
        .await;
    assert!(!exported.is_empty());
    wait_for(Duration::from_secs(10), || async {
        logged_trace_ids(&node.logs(), "request served")
            .iter()
            .any(|t| t == caller_trace)
    })
    .await;

    // A failed delivery: its log line names the trace the inbound event started and the attempt joined.
    let session = ready_session(&c, "traced-logs").await;
    let rx = Receiver::start().await.expect("receiver");
    rx.respond_with(&[500]);
    add_webhook(
        &c,
        &session,
        json!({ "url": rx.url(), "events": ["message.received"], "retryCount": 0 }),
    )
    .await;
    inbound(&c, &session, "15550004444@c.us", "log my trace").await;
    let trace = collector.trace_of(|s| s.name == "webhook_attempt").await;
    assert!(trace.iter().any(|s| s.name == "engine_event"), "{trace:#?}");
    let event_trace = hex(&trace[0].trace_id);
    wait_for(Duration::from_secs(10), || async {
        logged_trace_ids(
            &node.logs(),
            "webhook delivery failed; recorded in the delivery-failure log",
        )
        .contains(&event_trace)
    })
    .await;
}

/// `LOG_LEVEL` quiets the log output, not the traces: with `LOG_LEVEL=warn` a request's span is still
/// exported.
#[tokio::test]
async fn a_quiet_log_level_still_exports_request_spans() {
    let collector = Collector::start().await;
    let mut options = fast_options().env("LOG_LEVEL", "warn");
    for (k, v) in otel_env(&collector) {
        options = options.env(&k, v);
    }
    let node = Node::start(options).await.expect("node");
    let reply = node
        .client()
        .get("/api/sessions")
        .await
        .expect("list sessions");
    assert_eq!(reply.status, 200, "{}", reply.text);
    let trace = collector
        .trace_of(|s| s.name == "GET /api/sessions" && s.service == "wagate")
        .await;
    assert!(!trace.is_empty());
}
