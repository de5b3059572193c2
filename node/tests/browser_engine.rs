//! The browser engine through the real HTTP API of a node (`ENGINE_TYPE=browser`), offline: the node's
//! Chromium (Debian's, `CHROMIUM_PATH`) opens the crate's loopback fake WhatsApp Web (`BROWSER_WEB_URL`),
//! with the fake's `fake-wpp.js` as the wa-js bundle (`BROWSER_WAJS_PATH`). What runs is the node's side of
//! the engine: boot builds the crate's factory, the session links by QR, a send reaches the page and its
//! echo comes back as a stored message (a sent image comes back as received media, stored and read back
//! byte for byte), who may add members is set, click-button answers 501 (socket only), a dead page
//! answers the spec's statuses (503 on a bounded route, 500 on an unbounded one, in the spec's error
//! shape), and a stop leaves no Chromium behind.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use wagate_engine_browser::{default_chromium_path, procs};
use wagate_loadtest::harness::sessions::{create, wait_status};
use wagate_loadtest::harness::{Client, Node, NodeOptions, Reply};

#[path = "../engine-browser/tests/fake/server.rs"]
#[allow(dead_code)]
// its FAKE_WPP resolves against the browser crate's manifest dir; re-declared here.
mod fake_server;

const FAKE_WPP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/engine-browser/tests/fake/fake-wpp.js"
);
/// The fake's account that echoes what it is sent.
const ECHO: &str = "15550007777@c.us";
/// The fake's group, administered by its account.
const GROUP: &str = "120363000000000001@g.us";
/// Generous: the machine is shared; nothing here asserts a duration.
const PATIENCE: Duration = Duration::from_secs(60);

async fn browser_node(url: &str) -> Node {
    let chromium = std::env::var_os("CHROMIUM_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(default_chromium_path);
    assert!(
        chromium.exists(),
        "Chromium is missing at {} (scripts/test.sh installs Debian's chromium)",
        chromium.display()
    );
    Node::start(
        NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
            .env("ENGINE_TYPE", "browser")
            .env("CHROMIUM_PATH", chromium.to_string_lossy())
            .env("BROWSER_WAJS_PATH", FAKE_WPP)
            .env("BROWSER_WEB_URL", url),
    )
    .await
    .expect("node")
}

/// The node's Chromium processes (its descendants whose command line names Chromium).
fn chromium_of(node: &Node, kind: &str) -> Vec<u32> {
    let Some(pid) = node.pid() else {
        return Vec::new();
    };
    procs::tree(pid)
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| c.windows(kind.len()).any(|w| w == kind.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Polls `path` until it answers 200 (the engine heals a dead page in its own time).
async fn until_ok(c: &Client, path: &str) -> Reply {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let reply = c.get(path).await.expect("get");
        if reply.status == 200 {
            return reply;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path}: {} {}",
            reply.status,
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the session's stored messages of the echo chat until an incoming one has `body`; answers it.
async fn stored_inbound(c: &Client, id: &str, body: &str) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let listed = c
            .get(&format!("/api/sessions/{id}/messages?chatId={ECHO}"))
            .await
            .expect("messages");
        let found = listed.body.as_array().and_then(|all| {
            all.iter()
                .find(|m| m["body"] == body && m["direction"] == "incoming")
                .cloned()
        });
        if let Some(message) = found {
            return message;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {body:?}: {}",
            listed.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_session_links_sends_answers_a_dead_page_and_stops_clean() {
    let fake = fake_server::fake_whatsapp().await;
    let node = browser_node(&fake.url).await;
    let c = node.client();
    let id = create(&c, "browser").await.expect("create");

    // Link by QR: the page's QR is served, then the "phone" scans.
    let started = c
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert!(started.status < 300, "{}", started.text);
    wait_status(&c, &id, "qr_ready", PATIENCE)
        .await
        .expect("qr_ready");
    let qr = c.get(&format!("/api/sessions/{id}/qr")).await.expect("qr");
    assert_eq!(qr.status, 200, "{}", qr.text);
    assert!(qr.str("qrCode").starts_with("data:image/png;base64,"));
    fake.scanned.store(true, Ordering::SeqCst);
    wait_status(&c, &id, "ready", PATIENCE)
        .await
        .expect("ready");

    // A send reaches the page; the fake's echo comes back as a stored inbound message.
    let sent = c
        .post(
            &format!("/api/sessions/{id}/messages/send-text"),
            json!({ "chatId": ECHO, "text": "hi" }),
        )
        .await
        .expect("send");
    assert!(sent.status < 300, "{}", sent.text);
    stored_inbound(&c, &id, "echo: hi").await;

    // Received media: the echo sends the image back; the page downloads it and the engine stores it, read
    // back inline and through the media route byte for byte.
    let png = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, b"PNG-FROM-ECHO");
    let sent = c
        .post(
            &format!("/api/sessions/{id}/messages/send-image"),
            json!({ "chatId": ECHO, "base64": png, "mimetype": "image/png", "caption": "look" }),
        )
        .await
        .expect("send image");
    assert_eq!(sent.status, 201, "{}", sent.text);
    let image = stored_inbound(&c, &id, "look").await;
    assert_eq!(
        (
            &image["type"],
            &image["media"]["data"],
            &image["media"]["mimetype"]
        ),
        (&json!("image"), &json!(png), &json!("image/png")),
        "{image}\n{}",
        node.logs()
    );
    let raw = c
        .get(&format!(
            "/api/sessions/{id}/messages/{ECHO}/{}/media",
            image["id"].as_str().unwrap_or_default()
        ))
        .await
        .expect("media route");
    assert_eq!((raw.status, raw.text.as_str()), (200, "PNG-FROM-ECHO"));

    // Who may add members is set through the page too.
    let settings = c
        .put(
            &format!("/api/sessions/{id}/groups/{GROUP}/settings"),
            json!({ "memberAddMode": "admins" }),
        )
        .await
        .expect("group settings");
    assert_eq!(settings.status, 200, "{}", settings.text);
    let settings = c
        .get(&format!("/api/sessions/{id}/groups/{GROUP}/settings"))
        .await
        .expect("group settings read");
    assert_eq!(
        (settings.status, &settings.body["memberAddMode"]),
        (200, &json!("admins")),
        "{}",
        settings.text
    );

    // Click-button is socket only (the wire notes): the browser engine answers 501.
    let clicked = c
        .post(
            &format!("/api/sessions/{id}/messages/click-button"),
            json!({ "chatId": ECHO, "messageId": "true_15550007777@c.us_X", "buttonId": "no" }),
        )
        .await
        .expect("click");
    assert_eq!(clicked.status, 501, "{}", clicked.text);

    // A dead page: the bounded chat list answers 503, the unbounded channel create 500. Each round kills
    // the renderer and asks at once, before the engine has replaced the page.
    let chats = format!("/api/sessions/{id}/chats");
    until_ok(&c, &chats).await;
    let (mut seen_503, mut seen_500) = (None, None);
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while seen_503.is_none() || seen_500.is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "503 {seen_503:?}, 500 {seen_500:?}"
        );
        procs::kill_all(&chromium_of(&node, "--type=renderer"));
        tokio::time::sleep(Duration::from_millis(20)).await;
        let listed = c.get(&chats).await.expect("chats");
        match listed.status {
            503 => seen_503 = Some(listed.body),
            200 | 409 => {}
            other => panic!("a dead page on chat list: {other} {}", listed.text),
        }
        let created = c
            .post(
                &format!("/api/sessions/{id}/channels"),
                json!({ "name": "During" }),
            )
            .await
            .expect("create channel");
        match created.status {
            500 => seen_500 = Some(created.body),
            200 | 201 | 409 => {}
            other => panic!("a dead page on channel create: {other} {}", created.text),
        }
        until_ok(&c, &chats).await;
    }
    let (bounded, unbounded) = (seen_503.unwrap_or_default(), seen_500.unwrap_or_default());
    assert_eq!(
        (&bounded["statusCode"], &bounded["error"]),
        (&json!(503), &json!("Service Unavailable")),
        "{bounded}"
    );
    assert_eq!(
        (&unbounded["statusCode"], &unbounded["error"]),
        (&json!(500), &json!("Internal Server Error")),
        "{unbounded}"
    );
    assert!(
        unbounded["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{unbounded}"
    );

    // A stop leaves no Chromium process behind.
    let stopped = c
        .post_empty(&format!("/api/sessions/{id}/stop"))
        .await
        .expect("stop");
    assert_eq!(stopped.status, 200, "{}", stopped.text);
    assert_eq!(chromium_of(&node, "chromium"), Vec::<u32>::new());
}
