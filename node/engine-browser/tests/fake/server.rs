//! The loopback fake WhatsApp Web the tests and the benchmark open: a blank page (the engine injects
//! `fake-wpp.js` in place of the wa-js bundle), `/scan`, which answers 1 once the "phone" scanned, and
//! `/inbound`, the messages other accounts send, which a linked page collects (one queue per fake: a test
//! that delivers opens one session on it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

/// The fake wa-js bundle, configured as the engine's bundle path.
pub const FAKE_WPP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fake/fake-wpp.js");

pub struct FakeWhatsApp {
    pub url: String,
    pub scanned: Arc<AtomicBool>,
    inbound: Arc<Mutex<Vec<Value>>>,
}

impl FakeWhatsApp {
    /// Has `from` send the text `body` to the account on the page (it arrives at the page's next poll).
    #[allow(dead_code)] // Not every test that serves the fake delivers messages.
    pub fn deliver(&self, from: &str, body: &str) {
        if let Ok(mut queue) = self.inbound.lock() {
            queue.push(json!({ "from": from, "body": body }));
        }
    }
}

pub async fn fake_whatsapp() -> FakeWhatsApp {
    let scanned = Arc::new(AtomicBool::new(false));
    let inbound = Arc::new(Mutex::new(Vec::new()));
    let flag = scanned.clone();
    let queue = inbound.clone();
    let page = || async { axum::response::Html("<html><body>fake WhatsApp Web</body></html>") };
    let app = Router::new()
        .route("/", get(page))
        .route("/broken", get(page))
        .route(
            "/scan",
            get(move || {
                let flag = flag.clone();
                async move {
                    if flag.load(Ordering::SeqCst) {
                        "1"
                    } else {
                        "0"
                    }
                }
            }),
        )
        .route(
            "/inbound",
            get(move || {
                let queue = queue.clone();
                async move {
                    let taken = queue.lock().map(|mut q| std::mem::take(&mut *q));
                    Json(Value::Array(taken.unwrap_or_default()))
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}/", listener.local_addr().expect("bound"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    FakeWhatsApp {
        url,
        scanned,
        inbound,
    }
}
