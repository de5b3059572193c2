//! The session resource over HTTP: create/list rules, config and proxy, roles and key scoping.

use serde_json::json;
use wagate_loadtest::harness::sessions::create;
use wagate_loadtest::harness::{Client, Node, NodeOptions};

async fn node() -> Node {
    Node::start(NodeOptions::new(env!("CARGO_BIN_EXE_wagate")))
        .await
        .expect("node")
}

async fn key(admin: &Client, body: serde_json::Value) -> String {
    let reply = admin.post("/api/auth/api-keys", body).await.expect("key");
    assert_eq!(reply.status, 201, "{}", reply.text);
    reply.str("apiKey")
}

#[tokio::test]
async fn names_are_validated_and_unique() {
    let node = node().await;
    let c = node.client();
    for bad in [
        json!({}),
        json!({ "name": "ab" }),
        json!({ "name": "has space" }),
        json!({ "name": "x".repeat(51) }),
        json!({ "name": 42 }),
    ] {
        assert_eq!(
            c.post("/api/sessions", bad.clone())
                .await
                .expect("r")
                .status,
            400,
            "{bad}"
        );
    }
    create(&c, "unique-1").await.expect("create");
    let dup = c
        .post("/api/sessions", json!({ "name": "unique-1" }))
        .await
        .expect("r");
    assert_eq!(dup.status, 409);
    assert_eq!(dup.body["statusCode"], 409);
}

#[tokio::test]
async fn listing_pages_and_filters_by_exact_name() {
    let node = node().await;
    let c = node.client();
    for name in ["list-a", "list-b", "list-c"] {
        create(&c, name).await.expect("create");
    }
    assert_eq!(
        c.get("/api/sessions")
            .await
            .expect("r")
            .body
            .as_array()
            .map(Vec::len),
        Some(3)
    );
    assert_eq!(
        c.get("/api/sessions?limit=2")
            .await
            .expect("r")
            .body
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        c.get("/api/sessions?limit=2&offset=2")
            .await
            .expect("r")
            .body
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let named = c.get("/api/sessions?name=list-b").await.expect("r");
    assert_eq!(named.body[0]["name"], "list-b");
    assert_eq!(
        c.get("/api/sessions?name=LIST-B").await.expect("r").body,
        json!([])
    );
    assert_eq!(
        c.get("/api/sessions?name=list-b&offset=1")
            .await
            .expect("r")
            .body,
        json!([]),
        "the match is paged like any list"
    );
    for bad in [
        "?name=",
        "?name=list-a&name=list-b",
        "?limit=0",
        "?limit=1001",
        "?limit=abc",
        "?offset=-1",
    ] {
        assert_eq!(
            c.get(&format!("/api/sessions{bad}"))
                .await
                .expect("r")
                .status,
            400,
            "{bad}"
        );
    }
}

#[tokio::test]
async fn config_has_three_states_and_bounds() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "configured").await.expect("create");
    let url = format!("/api/sessions/{id}/config");
    let defaults = c.get(&url).await.expect("r").body;
    assert_eq!(
        defaults,
        json!({ "autoRejectCalls": false, "maxReconnectAttempts": null, "reconnectBaseDelay": 5000 })
    );
    let set = c
        .patch(
            &url,
            json!({ "maxReconnectAttempts": 3, "reconnectBaseDelay": 2000 }),
        )
        .await
        .expect("r")
        .body;
    assert_eq!(
        (
            set["maxReconnectAttempts"].as_u64(),
            set["reconnectBaseDelay"].as_u64()
        ),
        (Some(3), Some(2000))
    );
    let kept = c
        .patch(&url, json!({ "autoRejectCalls": true }))
        .await
        .expect("r")
        .body;
    assert_eq!(
        kept["maxReconnectAttempts"], 3,
        "omitted fields are unchanged"
    );
    let cleared = c
        .patch(
            &url,
            json!({ "maxReconnectAttempts": null, "reconnectBaseDelay": null }),
        )
        .await
        .expect("r")
        .body;
    assert_eq!(
        (
            cleared["maxReconnectAttempts"].is_null(),
            cleared["reconnectBaseDelay"].as_u64()
        ),
        (true, Some(5000))
    );
    for bad in [
        json!({ "maxReconnectAttempts": 21 }),
        json!({ "reconnectBaseDelay": 999 }),
        json!({ "reconnectBaseDelay": 300001 }),
        json!({ "autoRejectCalls": "yes" }),
    ] {
        assert_eq!(
            c.patch(&url, bad.clone()).await.expect("r").status,
            400,
            "{bad}"
        );
    }
}

#[tokio::test]
async fn the_proxy_is_never_shown_and_scoped_keys_cannot_change_it() {
    let node = node().await;
    let c = node.client();
    let id = create(&c, "proxied").await.expect("create");
    let url = format!("/api/sessions/{id}/proxy");
    let set = c
        .patch(
            &url,
            json!({ "proxyUrl": "socks5://user:pw@10.1.2.3:1080" }),
        )
        .await
        .expect("r");
    assert_eq!(set.status, 200, "{}", set.text);
    assert_eq!(
        set.body,
        json!({ "enabled": true, "proxyType": "socks5", "proxyHost": "10.1.2.3:1080", "hasCredentials": true })
    );
    assert!(!c.get(&url).await.expect("r").text.contains("pw"));
    assert_eq!(
        c.patch(&url, json!({ "proxyUrl": "ftp://x" }))
            .await
            .expect("r")
            .status,
        400
    );
    let scoped = key(
        &c,
        json!({ "name": "scoped-admin", "role": "admin", "allowedSessions": [id] }),
    )
    .await;
    let reply = node
        .client_with_key(Some(&scoped))
        .patch(&url, json!({ "proxyUrl": null }))
        .await
        .expect("r");
    assert_eq!(reply.status, 403);
    let created = node
        .client_with_key(Some(&scoped))
        .post(
            "/api/sessions",
            json!({ "name": "proxied-by-scoped", "proxyUrl": "http://10.1.2.3:3128" }),
        )
        .await
        .expect("r");
    assert_eq!(
        created.status, 403,
        "a proxy at creation too: {}",
        created.text
    );
    let cleared = c.patch(&url, json!({ "proxyUrl": null })).await.expect("r");
    assert_eq!(cleared.body["enabled"], false);
}

#[tokio::test]
async fn roles_are_enforced_per_route_class() {
    let node = node().await;
    let admin = node.client();
    let id = create(&admin, "roles").await.expect("create");
    let viewer = node.client_with_key(Some(
        &key(&admin, json!({ "name": "viewer-key", "role": "viewer" })).await,
    ));
    let operator = node.client_with_key(Some(
        &key(
            &admin,
            json!({ "name": "operator-key", "role": "operator" }),
        )
        .await,
    ));
    assert_eq!(viewer.get("/api/sessions").await.expect("r").status, 200);
    assert_eq!(
        viewer
            .get(&format!("/api/sessions/{id}"))
            .await
            .expect("r")
            .status,
        200
    );
    assert_eq!(
        viewer
            .post("/api/sessions", json!({ "name": "by-viewer" }))
            .await
            .expect("r")
            .status,
        403
    );
    assert_eq!(
        viewer
            .post_empty(&format!("/api/sessions/{id}/start"))
            .await
            .expect("r")
            .status,
        403
    );
    assert_eq!(
        viewer
            .get(&format!("/api/sessions/{id}/qr"))
            .await
            .expect("r")
            .status,
        403,
        "QR is a credential"
    );
    assert_eq!(
        operator
            .post("/api/sessions", json!({ "name": "by-operator" }))
            .await
            .expect("r")
            .status,
        201
    );
    assert_eq!(
        operator.get("/api/auth/api-keys").await.expect("r").status,
        403
    );
    assert_eq!(operator.get("/api/audit").await.expect("r").status, 403);
    assert_eq!(admin.get("/api/audit").await.expect("r").status, 200);
}

#[tokio::test]
async fn a_scoped_key_sees_and_touches_only_its_sessions() {
    let node = node().await;
    let admin = node.client();
    let mine = create(&admin, "mine").await.expect("create");
    let other = create(&admin, "other").await.expect("create");
    let scoped = node.client_with_key(Some(
        &key(
            &admin,
            json!({ "name": "scoped", "allowedSessions": [mine] }),
        )
        .await,
    ));
    let list = scoped.get("/api/sessions").await.expect("r");
    assert_eq!(list.body.as_array().map(|a| a.len()), Some(1));
    assert_eq!(list.body[0]["id"], mine.as_str());
    assert_eq!(
        scoped
            .get("/api/sessions?name=other")
            .await
            .expect("r")
            .body,
        json!([])
    );
    assert_eq!(
        scoped
            .get(&format!("/api/sessions/{other}"))
            .await
            .expect("r")
            .status,
        403
    );
    assert_eq!(
        scoped
            .post_empty(&format!("/api/sessions/{other}/start"))
            .await
            .expect("r")
            .status,
        403
    );
    assert_eq!(
        scoped
            .get(&format!("/api/sessions/{mine}"))
            .await
            .expect("r")
            .status,
        200
    );
}

#[tokio::test]
async fn stats_overview_counts_by_status() {
    let node = node().await;
    let c = node.client();
    create(&c, "stat-a").await.expect("create");
    let stats = c.get("/api/sessions/stats/overview").await.expect("r");
    assert_eq!(stats.status, 200, "{}", stats.text);
    assert_eq!(stats.body["total"], 1);
    assert_eq!(stats.body["byStatus"]["created"], 1);
}
