//! The loopback fake WhatsApp Web the tests and the benchmark open: a blank page (the engine injects
//! `fake-wpp.js` in place of the wa-js bundle) and `/scan`, which answers 1 once the "phone" scanned.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::routing::get;

/// The fake wa-js bundle, configured as the engine's bundle path.
pub const FAKE_WPP: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fake/fake-wpp.js");

pub struct FakeWhatsApp {
    pub url: String,
    pub scanned: Arc<AtomicBool>,
}

pub async fn fake_whatsapp() -> FakeWhatsApp {
    let scanned = Arc::new(AtomicBool::new(false));
    let flag = scanned.clone();
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
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}/", listener.local_addr().expect("bound"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    FakeWhatsApp { url, scanned }
}
