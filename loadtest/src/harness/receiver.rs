//! A webhook receiver on 127.0.0.1: records every delivery (headers and exact body bytes), answers with a
//! scripted sequence of statuses, and checks `X-Wagate-Signature` against a secret.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, KeyInit, Mac};
use parking_lot::Mutex;
use sha2::Sha256;

#[derive(Debug, Clone)]
pub struct Delivery {
    pub headers: HashMap<String, String>,
    pub body: Bytes,
    pub at: Instant,
}

impl Delivery {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// Whether the signature header is `sha256=<hex HMAC-SHA256(secret, body)>`.
    pub fn signed_with(&self, secret: &str) -> bool {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
            return false;
        };
        mac.update(&self.body);
        let expected = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        self.header("x-wagate-signature") == Some(expected.as_str())
    }
}

#[derive(Default)]
struct Inner {
    deliveries: Vec<Delivery>,
    statuses: VecDeque<u16>,
    /// How long each answer is held back (a slow receiver keeps deliveries in flight).
    delay: Option<Duration>,
}

#[derive(Clone)]
pub struct Receiver {
    inner: Arc<Mutex<Inner>>,
    pub port: u16,
    shutdown: Arc<tokio::sync::Notify>,
}

async fn record(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let headers = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_string(),
                v.to_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let (status, delay) = {
        let mut inner = inner.lock();
        inner.deliveries.push(Delivery {
            headers,
            body,
            at: Instant::now(),
        });
        (inner.statuses.pop_front().unwrap_or(200), inner.delay)
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    StatusCode::from_u16(status).unwrap_or(StatusCode::OK)
}

impl Receiver {
    pub async fn start() -> anyhow::Result<Receiver> {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        // Answers go out at once, as from any real receiver (no Nagle wait behind the sender's delayed ACK).
        let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
            let _ = stream.set_nodelay(true);
        });
        let app = axum::Router::new()
            .fallback(record)
            .with_state(inner.clone());
        let shutdown = Arc::new(tokio::sync::Notify::new());
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stop.notified().await })
                .await;
        });
        Ok(Receiver {
            inner,
            port,
            shutdown,
        })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    /// The statuses the next requests get, in order; afterwards 200.
    pub fn respond_with(&self, statuses: &[u16]) {
        self.inner.lock().statuses = statuses.iter().copied().collect();
    }

    /// Like [`Receiver::respond_with`], returning how many requests had arrived before the switch, read
    /// under the same lock so no request falls between the count and the new answers.
    pub fn switch_responses(&self, statuses: &[u16]) -> usize {
        let mut inner = self.inner.lock();
        inner.statuses = statuses.iter().copied().collect();
        inner.deliveries.len()
    }

    /// Holds every answer back by `delay` (`None`: answer at once).
    pub fn respond_after(&self, delay: Option<Duration>) {
        self.inner.lock().delay = delay;
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.inner.lock().deliveries.clone()
    }

    /// How many deliveries arrived so far (cheap: nothing is copied).
    pub fn len(&self) -> usize {
        self.inner.lock().deliveries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Polls until `count` deliveries arrived or the budget runs out; returns the deliveries. Unlike
    /// [`Receiver::wait_until`] it copies them once, so a benchmark's wait costs the node no CPU.
    pub async fn wait_count(&self, count: usize, budget: Duration) -> Vec<Delivery> {
        let deadline = Instant::now() + budget;
        while self.len() < count && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.deliveries()
    }

    /// Deliveries whose body has `event == name`.
    pub fn of_event(&self, name: &str) -> Vec<Delivery> {
        self.deliveries()
            .into_iter()
            .filter(|d| d.json()["event"] == name)
            .collect()
    }

    /// Polls until `pred` holds over the deliveries or the budget runs out; returns the deliveries.
    pub async fn wait_until(
        &self,
        budget: Duration,
        pred: impl Fn(&[Delivery]) -> bool,
    ) -> Vec<Delivery> {
        let deadline = Instant::now() + budget;
        loop {
            let all = self.deliveries();
            if pred(&all) || Instant::now() >= deadline {
                return all;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn stop(&self) {
        self.shutdown.notify_waiters();
    }
}
