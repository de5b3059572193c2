//! Webhook and automation-rule resources against the real binary: validation, write-only fields, scoping,
//! the all-sessions list, the test endpoint and the OpenAPI document.

mod support;

use serde_json::json;
use support::{SECRET, add_webhook, node};
use wagate_loadtest::harness::Receiver;

async fn session(c: &wagate_loadtest::harness::Client, name: &str) -> String {
    let r = c
        .post("/api/sessions", json!({ "name": name }))
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text);
    r.str("id")
}

#[tokio::test]
async fn webhook_crud_keeps_secret_and_headers_write_only() {
    let n = node().await;
    let c = n.client();
    let s = session(&c, "crud-one").await;
    let rx = Receiver::start().await.unwrap();
    let w = add_webhook(
        &c,
        &s,
        json!({ "url": rx.url(), "events": ["message.received"], "secret": SECRET,
                "headers": { "X-Tenant": "t1", "X-Wagate-Event": "forged" } }),
    )
    .await;
    assert!(
        w.get("secret").is_none() && w.get("headers").is_none(),
        "{w}"
    );
    assert_eq!(w["sessionId"], s.as_str());
    assert_eq!(w["retryCount"], 3);
    assert_eq!(w["active"], true);
    assert!(w["lastTriggeredAt"].is_null());
    let id = w["id"].as_str().unwrap().to_string();
    let path = format!("/api/sessions/{s}/webhooks/{id}");

    let got = c.get(&path).await.unwrap();
    assert_eq!(got.status, 200);
    assert!(!got.text.contains(SECRET));
    let list = c.get(&format!("/api/sessions/{s}/webhooks")).await.unwrap();
    assert_eq!(list.body.as_array().unwrap().len(), 1);
    assert!(!list.text.contains(SECRET));

    let put = c
        .put(
            &path,
            json!({ "events": ["*"], "retryCount": 0, "secret": "" }),
        )
        .await
        .unwrap();
    assert_eq!(put.status, 200, "{}", put.text);
    assert_eq!(put.body["events"], json!(["*"]));
    assert_eq!(put.body["retryCount"], 0);

    let all = c.get("/api/webhooks?limit=10").await.unwrap();
    assert_eq!(all.status, 200);
    assert_eq!(all.body.as_array().unwrap().len(), 1);

    assert_eq!(c.delete(&path).await.unwrap().status, 204);
    assert_eq!(c.get(&path).await.unwrap().status, 404);
    let audit = c.get(&format!("/api/audit?sessionId={s}")).await.unwrap();
    let actions: Vec<&str> = audit.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["action"].as_str())
        .collect();
    for a in ["webhook_created", "webhook_updated", "webhook_deleted"] {
        assert!(actions.contains(&a), "{actions:?}");
    }
}

#[tokio::test]
async fn invalid_webhooks_answer_400_naming_the_field() {
    let n = node().await;
    let c = n.client();
    let s = session(&c, "crud-bad").await;
    let rx = Receiver::start().await.unwrap();
    let path = format!("/api/sessions/{s}/webhooks");
    let cases = [
        (
            json!({ "url": rx.url(), "events": ["message.nope"] }),
            "message.nope",
        ),
        (
            json!({ "url": rx.url(), "secret": "short" }),
            "secret must be at least 16 characters",
        ),
        (
            json!({ "url": rx.url(), "secret": "" }),
            "secret must be at least 16 characters",
        ),
        (
            json!({ "url": rx.url(), "filters": [[{ "field": "body", "operator": "is", "value": "x" }]] }),
            "filters must be an object",
        ),
        (
            json!({ "url": "http://no-such-host.invalid/hook" }),
            "does not resolve",
        ),
        (json!({ "url": rx.url(), "retryCount": 11 }), "retryCount"),
        (
            json!({ "url": rx.url(), "filters": { "conditions": [{ "field": "colour", "operator": "is", "value": "x" }] } }),
            "Invalid request body",
        ),
        (
            json!({ "url": rx.url(), "events": ["*", "message.ack"] }),
            "events",
        ),
        (
            json!({ "url": rx.url(), "filters": { "condition": [{ "field": "body", "operator": "is", "value": "x" }] } }),
            "unknown field `condition`",
        ),
        (
            json!({ "url": rx.url(), "filters": { "conditions": [{ "field": "isGroup", "operator": "is", "value": "yes" }] } }),
            "must be true or false",
        ),
    ];
    for (body, needle) in cases {
        let r = c.post(&path, body.clone()).await.unwrap();
        assert_eq!(r.status, 400, "{body}: {}", r.text);
        assert!(r.str("message").contains(needle), "{body}: {}", r.text);
    }
    let many: Vec<_> = (0..21)
        .map(|_| json!({ "field": "body", "operator": "is", "value": "x" }))
        .collect();
    let r = c
        .post(
            &path,
            json!({ "url": rx.url(), "filters": { "conditions": many } }),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.text);

    assert_eq!(
        c.get("/api/sessions/not-a-uuid/webhooks")
            .await
            .unwrap()
            .status,
        400
    );
    let missing = c
        .get("/api/sessions/00000000-0000-4000-8000-000000000000/webhooks")
        .await
        .unwrap();
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.str("message"),
        "Session 00000000-0000-4000-8000-000000000000 not found"
    );
}

/// `filters` is an object on every read (spec: `filters | object`): a webhook without conditions reads as
/// `{"conditions": []}`, never null, and still receives every event; PUT with `{}` or `null` clears.
#[tokio::test]
async fn a_webhook_without_filters_reads_as_the_empty_filter_and_gets_every_event() {
    let n = node().await;
    let c = n.client();
    let s = support::ready_session(&c, "crud-filters").await;
    let rx = Receiver::start().await.unwrap();
    let empty = json!({ "conditions": [] });
    let created = add_webhook(
        &c,
        &s,
        json!({ "url": rx.url(), "events": ["message.received"] }),
    )
    .await;
    assert_eq!(created["filters"], empty, "{created}");
    let path = format!(
        "/api/sessions/{s}/webhooks/{}",
        created["id"].as_str().unwrap()
    );
    assert_eq!(c.get(&path).await.unwrap().body["filters"], empty);
    let list = c.get(&format!("/api/sessions/{s}/webhooks")).await.unwrap();
    assert_eq!(list.body[0]["filters"], empty, "{}", list.text);
    let all = c.get("/api/webhooks").await.unwrap();
    assert_eq!(all.body[0]["filters"], empty, "{}", all.text);

    let cond =
        json!({ "conditions": [{ "field": "body", "operator": "is", "value": "never sent" }] });
    for clear in [json!({}), serde_json::Value::Null] {
        let set = c.put(&path, json!({ "filters": cond })).await.unwrap();
        assert_eq!(set.status, 200, "{}", set.text);
        assert_eq!(set.body["filters"], cond, "{}", set.text);
        let cleared = c.put(&path, json!({ "filters": clear })).await.unwrap();
        assert_eq!(cleared.status, 200, "{}", cleared.text);
        assert_eq!(cleared.body["filters"], empty, "{clear}: {}", cleared.text);
        assert_eq!(c.get(&path).await.unwrap().body["filters"], empty);
    }
    let untouched = c.put(&path, json!({ "retryCount": 1 })).await.unwrap();
    assert_eq!(untouched.body["filters"], empty, "{}", untouched.text);

    // No conditions: the message is delivered, as with no filter at all.
    support::inbound(&c, &s, "15557770000@c.us", "hello").await;
    let got = rx
        .wait_until(std::time::Duration::from_secs(30), |d| !d.is_empty())
        .await;
    assert_eq!(got[0].json()["data"]["body"], "hello");
}

#[tokio::test]
async fn scoped_and_viewer_keys_are_confined() {
    let n = node().await;
    let c = n.client();
    let mine = session(&c, "crud-mine").await;
    let other = session(&c, "crud-other").await;
    let rx = Receiver::start().await.unwrap();
    add_webhook(&c, &mine, json!({ "url": rx.url() })).await;
    add_webhook(&c, &other, json!({ "url": rx.url() })).await;
    let key = |role: &str, sessions: Option<Vec<&str>>| {
        let c = c.clone();
        let role = role.to_string();
        let sessions = sessions.map(|s| s.iter().map(|x| x.to_string()).collect::<Vec<_>>());
        async move {
            let r = c.post("/api/auth/api-keys", json!({ "name": format!("k-{role}"), "role": role, "allowedSessions": sessions })).await.unwrap();
            assert_eq!(r.status, 201, "{}", r.text);
            r.str("apiKey")
        }
    };
    let scoped = n.client_with_key(Some(&key("operator", Some(vec![mine.as_str()])).await));
    assert_eq!(
        scoped
            .get(&format!("/api/sessions/{other}/webhooks"))
            .await
            .unwrap()
            .status,
        403
    );
    let r = scoped
        .post(
            &format!("/api/sessions/{other}/webhooks"),
            json!({ "url": rx.url() }),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 403);
    let all = scoped.get("/api/webhooks").await.unwrap();
    let sessions: Vec<&str> = all
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["sessionId"].as_str())
        .collect();
    assert_eq!(sessions, [mine.as_str()]);

    let viewer = n.client_with_key(Some(&key("viewer", None).await));
    assert_eq!(
        viewer
            .get(&format!("/api/sessions/{mine}/webhooks"))
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        viewer
            .post(
                &format!("/api/sessions/{mine}/webhooks"),
                json!({ "url": rx.url() })
            )
            .await
            .unwrap()
            .status,
        403
    );
    assert_eq!(viewer.get("/api/webhooks").await.unwrap().status, 403);
    assert_eq!(
        viewer
            .get("/api/webhooks/delivery-failures")
            .await
            .unwrap()
            .status,
        403
    );
    assert_eq!(
        scoped
            .get(&format!("/api/sessions/{mine}/automation-rules"))
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        viewer
            .get(&format!("/api/sessions/{mine}/automation-rules"))
            .await
            .unwrap()
            .status,
        403
    );
}

#[tokio::test]
async fn test_endpoint_delivers_a_signed_test_event_without_touching_last_triggered() {
    let n = node().await;
    let c = n.client();
    let s = session(&c, "crud-test").await;
    let rx = Receiver::start().await.unwrap();
    let w = add_webhook(
        &c,
        &s,
        json!({ "url": rx.url(), "secret": SECRET, "headers": { "X-Tenant": "t1" } }),
    )
    .await;
    let path = format!("/api/sessions/{s}/webhooks/{}", w["id"].as_str().unwrap());
    let r = c.post_empty(&format!("{path}/test")).await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.body, json!({ "success": true, "statusCode": 200 }));
    let got = rx.deliveries();
    assert_eq!(got.len(), 1);
    let d = &got[0];
    assert!(d.signed_with(SECRET));
    assert_eq!(d.json()["event"], "test");
    assert_eq!(d.header("x-wagate-event"), Some("test"));
    assert_eq!(d.header("x-tenant"), Some("t1"));
    assert!(
        d.header("x-wagate-delivery-id")
            .unwrap()
            .starts_with("dlv_")
    );
    let body = d.json();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 6, "{keys:?}");
    let text = String::from_utf8(d.body.to_vec()).unwrap();
    assert!(
        text.starts_with(r#"{"event":"test","timestamp":"#),
        "{text}"
    );
    assert!(c.get(&path).await.unwrap().body["lastTriggeredAt"].is_null());

    rx.respond_with(&[503]);
    let r = c.post_empty(&format!("{path}/test")).await.unwrap();
    assert_eq!(r.body, json!({ "success": false, "statusCode": 503 }));
}

#[tokio::test]
async fn automation_rules_crud_and_openapi_lists_the_routes() {
    let n = node().await;
    let c = n.client();
    let s = session(&c, "rules").await;
    let base = format!("/api/sessions/{s}/automation-rules");
    let r = c
        .post(&base, json!({ "name": "price", "conditions": [{ "field": "body", "operator": "contains", "value": "price" }],
                             "replyText": "See our catalog", "cooldownSeconds": 60 }))
        .await
        .unwrap();
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.body["enabled"], true);
    let id = r.str("id");
    let put = c
        .put(&format!("{base}/{id}"), json!({ "enabled": false }))
        .await
        .unwrap();
    assert_eq!(put.body["enabled"], false);
    assert_eq!(put.body["replyText"], "See our catalog");
    assert_eq!(
        c.get(&base).await.unwrap().body.as_array().unwrap().len(),
        1
    );
    let bad = c
        .post(&base, json!({ "name": "x", "replyText": "" }))
        .await
        .unwrap();
    assert_eq!(bad.status, 400);
    assert_eq!(c.delete(&format!("{base}/{id}")).await.unwrap().status, 204);
    assert_eq!(c.get(&format!("{base}/{id}")).await.unwrap().status, 404);

    let doc = c.get("/api/docs/openapi.json").await.unwrap();
    for p in [
        "/api/sessions/{sessionId}/webhooks",
        "/api/sessions/{sessionId}/webhooks/{webhookId}",
        "/api/sessions/{sessionId}/webhooks/{webhookId}/test",
        "/api/webhooks",
        "/api/webhooks/delivery-failures",
        "/api/webhooks/delivery-failures/redrive",
        "/api/sessions/{sessionId}/automation-rules/{ruleId}",
        "/api/ws",
    ] {
        assert!(doc.body["paths"].get(p).is_some(), "{p} missing");
    }
}

/// Creates of session-scoped rows (webhooks, templates, automation rules) fired at the same moment as the
/// session's delete: each answers 201 (stored before the delete, which then removed it) or the unknown
/// session's 404, never a 500 from the row's foreign key to the deleted session.
#[tokio::test]
async fn creates_racing_the_session_delete_answer_201_or_404() {
    let n = node().await;
    let c = n.client();
    let hook = Receiver::start().await.unwrap();
    for round in 0..8 {
        let s = session(&c, &format!("race-{round}")).await;
        let mut calls = Vec::new();
        for i in 0..10 {
            calls.push((
                format!("/api/sessions/{s}/webhooks"),
                json!({ "url": hook.url(), "events": ["*"] }),
            ));
            calls.push((
                format!("/api/sessions/{s}/templates"),
                json!({ "name": format!("t{i}"), "body": "hello {{x}}" }),
            ));
            calls.push((
                format!("/api/sessions/{s}/automation-rules"),
                json!({ "name": format!("r{i}"), "replyText": "auto", "cooldownSeconds": 10,
                        "conditions": [{ "field": "body", "operator": "contains", "value": "x" }] }),
            ));
        }
        let creates = futures::future::join_all(calls.iter().map(|(path, body)| {
            let c = c.clone();
            async move { (path, c.post(path, body.clone()).await.unwrap()) }
        }));
        let session_path = format!("/api/sessions/{s}");
        let delete = c.delete(&session_path);
        let (answers, deleted) = tokio::join!(creates, delete);
        let deleted = deleted.unwrap();
        assert!(deleted.status < 300, "delete: {}", deleted.text);
        for (path, r) in answers {
            assert!(
                r.status == 201 || r.status == 404,
                "{path}: {} {}",
                r.status,
                r.text
            );
            if r.status == 404 {
                assert_eq!(r.str("message"), format!("Session {s} not found"), "{path}");
            }
        }
        assert_eq!(c.get(&session_path).await.unwrap().status, 404);
    }
}
