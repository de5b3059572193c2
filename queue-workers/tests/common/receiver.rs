//! The recording webhook receiver: an axum server on 127.0.0.1 (random port) that keeps every request's
//! headers, raw body and arrival instant, and answers from a status plan.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};

/// One request the receiver saw.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: Bytes,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

#[derive(Default)]
struct ReceiverState {
    requests: Vec<Received>,
    /// Status codes to answer, in order; 200 once exhausted, unless `always` is set.
    plan: Vec<u16>,
    always: Option<u16>,
}

/// An axum server on 127.0.0.1 with a random port that records every POST.
#[derive(Clone)]
pub struct Receiver {
    state: Arc<Mutex<ReceiverState>>,
    pub url: String,
}

impl Receiver {
    pub async fn start(plan: Vec<u16>, always: Option<u16>) -> Receiver {
        let state = Arc::new(Mutex::new(ReceiverState {
            plan,
            always,
            ..Default::default()
        }));
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(record))
            .route("/slow", axum::routing::post(record_slowly))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { state, url }
    }

    /// The same receiver, answering each request after 300 ms.
    pub fn slow_url(&self) -> String {
        self.url.replace("/hook", "/slow")
    }

    pub fn requests(&self) -> Vec<Received> {
        self.state.lock().unwrap().requests.clone()
    }
}

async fn record(
    State(state): State<Arc<Mutex<ReceiverState>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut s = state.lock().unwrap();
    s.requests.push(Received {
        headers,
        body,
        at: Instant::now(),
    });
    let code = match s.always {
        Some(code) => code,
        None if s.plan.is_empty() => 200,
        None => s.plan.remove(0),
    };
    StatusCode::from_u16(code).unwrap()
}

async fn record_slowly(
    state: State<Arc<Mutex<ReceiverState>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    record(state, headers, body).await
}
