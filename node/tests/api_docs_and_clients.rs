//! The API's own documentation and what OpenWA's clients read (issues 20 and 23): the OpenAPI document
//! needs a key unless `DOCS_PUBLIC=true`, the UI page asks for the key and never calls a validator; and
//! the shapes OpenWA's SDK missed (click-button, label upsert, channel demote, received status media).

mod resources_support;

use base64::Engine as _;
use resources_support::{at, jid, linked_session, node, node_with};
use serde_json::json;

#[tokio::test]
async fn the_document_needs_a_key_unless_docs_public() {
    let node = node().await;
    let anonymous = node.client_with_key(None);
    let refused = anonymous.get("/api/docs/openapi.json").await.expect("doc");
    assert_eq!(refused.status, 401, "{}", refused.text);
    assert_eq!(refused.body["statusCode"], 401);
    let wrong = node
        .client_with_key(Some("not-a-key"))
        .get("/api/docs/openapi.json")
        .await
        .expect("doc");
    assert_eq!(wrong.status, 401);
    let doc = node
        .client()
        .get("/api/docs/openapi.json")
        .await
        .expect("doc");
    assert_eq!(doc.status, 200);
    assert_eq!(doc.body["openapi"], "3.1.0");
    assert_eq!(
        doc.body["paths"]["/api/health"]["get"]["security"],
        json!([])
    );
    assert_eq!(
        doc.body["paths"]["/api/metrics"]["get"]["security"],
        json!([{ "metricsToken": [] }])
    );
    assert_eq!(
        doc.body["paths"]["/api/search"]["get"]["parameters"][0]["in"],
        "query"
    );

    // The page and its assets carry no data: served to anyone; its initializer asks for the key and
    // sends it on every request, the document's included, and never calls an outside validator.
    let page = anonymous.get("/api/docs/").await.expect("page");
    assert_eq!(page.status, 200);
    assert!(page.text.contains("swagger-initializer.js"));
    let script = anonymous
        .get("/api/docs/swagger-initializer.js")
        .await
        .expect("initializer");
    assert_eq!(script.status, 200);
    assert!(script.text.contains("var askForKey = true;"));
    assert!(script.text.contains("window.prompt("));
    assert!(script.text.contains("headers[\"X-API-Key\"] = stored"));
    assert!(script.text.contains("validatorUrl: null"));

    let public = node_with(&[("DOCS_PUBLIC", "true")]).await;
    let open = public
        .client_with_key(None)
        .get("/api/docs/openapi.json")
        .await
        .expect("doc");
    assert_eq!(open.status, 200);
    let script = public
        .client_with_key(None)
        .get("/api/docs/swagger-initializer.js")
        .await
        .expect("initializer");
    assert!(script.text.contains("var askForKey = false;"));
}

#[tokio::test]
async fn docs_public_must_be_true_or_false() {
    let options = wagate_loadtest::harness::NodeOptions {
        wait_ready: false,
        ..wagate_loadtest::harness::NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
    }
    .env("DOCS_PUBLIC", "yes");
    let mut node = wagate_loadtest::harness::Node::start(options)
        .await
        .expect("spawn");
    let code = node.wait_exit(std::time::Duration::from_secs(30)).await;
    assert!(
        code.is_some_and(|c| c != 0),
        "boot must refuse DOCS_PUBLIC=yes"
    );
    assert!(node.logs().contains("DOCS_PUBLIC"), "{}", node.logs());
}

#[tokio::test]
async fn openwa_sdk_shapes_for_click_button_label_upsert_demote_and_status_media() {
    let node = node().await;
    let c = node.client();
    let me = linked_session(&c, "sdk-me", "4915600000001").await;
    let peer = linked_session(&c, "sdk-peer", "4915600000002").await;
    let them = jid("4915600000002");

    let inbound = c
        .post(
            &format!("/api/sim/sessions/{me}/inbound"),
            json!({ "from": them, "type": "text", "body": "pick one" }),
        )
        .await
        .expect("inbound");
    assert!(inbound.status < 300, "{}", inbound.text);
    let clicked = c
        .post(
            &at(&me, "/messages/click-button"),
            json!({ "chatId": them, "messageId": inbound.str("messageId"), "buttonId": "b1", "text": "Yes" }),
        )
        .await
        .expect("click");
    assert_eq!(clicked.status, 200, "{}", clicked.text);
    assert!(!clicked.str("messageId").is_empty());
    assert!(clicked.body["timestamp"].as_i64().is_some_and(|t| t > 0));

    let upserted = c
        .put(&at(&me, "/labels/7"), json!({ "name": "VIP", "color": 3 }))
        .await
        .expect("upsert");
    assert_eq!(upserted.status, 200, "{}", upserted.text);
    assert_eq!(upserted.body["success"], true);
    assert_eq!(upserted.body["id"], "7");
    assert_eq!(upserted.body["name"], "VIP");

    let channel = c
        .post(&at(&me, "/channels"), json!({ "name": "News" }))
        .await
        .expect("channel");
    assert_eq!(channel.status, 201, "{}", channel.text);
    let subscribed = c
        .post(
            &at(&peer, "/channels/subscribe"),
            json!({ "inviteCode": channel.str("inviteCode") }),
        )
        .await
        .expect("subscribe");
    assert!(subscribed.status < 300, "{}", subscribed.text);
    let demote = format!("/channels/{}/admins/demote", channel.str("id"));
    let demoted = c
        .post(&at(&me, &demote), json!({ "userId": them }))
        .await
        .expect("demote");
    assert_eq!(demoted.status, 200, "{}", demoted.text);
    let stranger = c
        .post(&at(&me, &demote), json!({ "userId": jid("4915600000099") }))
        .await
        .expect("demote");
    assert_eq!(stranger.status, 404, "{}", stranger.text);

    let png = b"\x89PNG\r\n\x1a\nstatus-bytes".to_vec();
    let posted = c
        .post(
            &at(&me, "/status/send-image"),
            json!({
                "image": { "base64": base64::engine::general_purpose::STANDARD.encode(&png), "mimetype": "image/png" },
                "recipients": [them],
            }),
        )
        .await
        .expect("status");
    assert_eq!(posted.status, 201, "{}", posted.text);
    let media_path = format!("/status/{}/media", posted.str("statusId"));
    let mut received = None;
    for _ in 0..100 {
        let reply = c.get(&at(&peer, &media_path)).await.expect("media");
        if reply.status == 200 {
            received = Some(reply);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let received = received.expect("the recipient serves the status media");
    assert_eq!(received.header("content-type"), Some("image/png"));
    assert!(received.text.contains("status-bytes"), "{}", received.text);
}
