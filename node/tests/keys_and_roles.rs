//! Keys over HTTP: create/list/revoke/delete, the last-admin refusal, key headers, roles and scoping, audit.

use serde_json::json;
use wagate_loadtest::harness::{ADMIN_KEY, Client, Node, NodeOptions};

/// A session id (allowedSessions holds ids, never names).
const SESSION: &str = "2f1d6c0e-0000-4000-8000-000000000001";

async fn node() -> Node {
    Node::start(NodeOptions::new(env!("CARGO_BIN_EXE_wagate")))
        .await
        .expect("node")
}

async fn create_key(admin: &Client, body: serde_json::Value) -> (String, String) {
    let reply = admin
        .post("/api/auth/api-keys", body)
        .await
        .expect("create");
    assert_eq!(reply.status, 201, "{}", reply.text);
    assert!(reply.body.get("keyHash").is_none());
    (reply.str("id"), reply.str("apiKey"))
}

#[tokio::test]
async fn key_lifecycle_create_list_revoke_delete() {
    let node = node().await;
    let admin = node.client();
    let (id, plaintext) = create_key(&admin, json!({ "name": "ci-operator" })).await;
    let list = admin.get("/api/auth/api-keys").await.expect("list");
    let listed = list
        .body
        .as_array()
        .expect("array")
        .iter()
        .find(|k| k["id"] == id.as_str())
        .cloned();
    assert_eq!(
        listed.as_ref().map(|k| k["role"].clone()),
        Some(json!("operator")),
        "default role"
    );
    assert!(
        listed.is_some_and(|k| k.get("apiKey").is_none()),
        "plaintext is shown once"
    );
    let user = node.client_with_key(Some(&plaintext));
    assert_eq!(
        user.post_empty("/api/auth/validate")
            .await
            .expect("ok")
            .status,
        200
    );
    // The use shows at once, though usage reaches the database only every few seconds.
    let used = admin
        .get(&format!("/api/auth/api-keys/{id}"))
        .await
        .expect("get");
    assert!(
        used.body["usageCount"].as_i64().is_some_and(|n| n >= 1),
        "{}",
        used.text
    );
    assert!(used.body["lastUsedAt"].is_string(), "{}", used.text);
    assert_eq!(
        admin
            .post_empty(&format!("/api/auth/api-keys/{id}/revoke"))
            .await
            .expect("revoke")
            .status,
        200
    );
    assert_eq!(
        user.post_empty("/api/auth/validate")
            .await
            .expect("401")
            .status,
        401
    );
    assert_eq!(
        admin
            .delete(&format!("/api/auth/api-keys/{id}"))
            .await
            .expect("delete")
            .status,
        204
    );
    assert_eq!(
        admin
            .get(&format!("/api/auth/api-keys/{id}"))
            .await
            .expect("gone")
            .status,
        404
    );
    let audit = admin
        .get("/api/audit?action=api_key_created")
        .await
        .expect("audit");
    assert!(
        audit.body["total"].as_i64().is_some_and(|n| n >= 1),
        "{}",
        audit.text
    );
    let deleted = admin
        .get("/api/audit?action=api_key_deleted")
        .await
        .expect("audit");
    assert_eq!(deleted.body["data"][0]["metadata"]["keyId"], id.as_str());
    assert_eq!(deleted.body["data"][0]["severity"], "info");
}

/// Revoking a revoked key changes nothing: the same answer, and no second `api_key_revoked` audit row.
#[tokio::test]
async fn a_repeat_revoke_answers_the_same_and_audits_once() {
    let node = node().await;
    let admin = node.client();
    let (id, _) = create_key(&admin, json!({ "name": "revoke-twice" })).await;
    let path = format!("/api/auth/api-keys/{id}/revoke");
    let first = admin.post_empty(&path).await.expect("revoke");
    assert_eq!(first.status, 200, "{}", first.text);
    assert_eq!(first.body["isActive"], false, "{}", first.text);
    let again = admin.post_empty(&path).await.expect("revoke again");
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.body, first.body, "nothing changed");
    let audit = admin
        .get("/api/audit?action=api_key_revoked")
        .await
        .expect("audit");
    let rows: Vec<_> = audit.body["data"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["metadata"]["keyId"] == id.as_str())
        .collect();
    assert_eq!(rows.len(), 1, "{}", audit.text);
    assert_eq!(
        admin
            .post_empty("/api/auth/api-keys/no-such-key/revoke")
            .await
            .expect("unknown")
            .status,
        404
    );
}

#[tokio::test]
async fn the_last_admin_key_cannot_be_removed() {
    let node = node().await;
    let admin = node.client();
    let keys = admin.get("/api/auth/api-keys").await.expect("list");
    let master = keys.body[0]["id"].as_str().unwrap_or_default().to_string();
    let reply = admin
        .delete(&format!("/api/auth/api-keys/{master}"))
        .await
        .expect("delete");
    assert_eq!(reply.status, 409, "{}", reply.text);
    let reply = admin
        .post_empty(&format!("/api/auth/api-keys/{master}/revoke"))
        .await
        .expect("revoke");
    assert_eq!(reply.status, 409);
    let reply = admin
        .put(
            &format!("/api/auth/api-keys/{master}"),
            json!({ "role": "viewer" }),
        )
        .await
        .expect("put");
    assert_eq!(reply.status, 409);
    // An expiry would lock every admin out once it passes.
    let reply = admin
        .put(
            &format!("/api/auth/api-keys/{master}"),
            json!({ "expiresAt": "2999-01-01T00:00:00Z" }),
        )
        .await
        .expect("put");
    assert_eq!(reply.status, 409, "{}", reply.text);
}

#[tokio::test]
async fn keys_are_read_from_either_header_and_compared_exactly() {
    let node = node().await;
    let anon = node.client_with_key(None);
    let upper = anon
        .raw(reqwest::Method::POST, "/api/auth/validate")
        .header("X-API-KEY", ADMIN_KEY);
    assert_eq!(anon.send(upper).await.expect("ok").status, 200);
    let bearer = anon
        .raw(reqwest::Method::POST, "/api/auth/validate")
        .bearer_auth(ADMIN_KEY);
    assert_eq!(anon.send(bearer).await.expect("ok").status, 200);
    let case = anon
        .raw(reqwest::Method::POST, "/api/auth/validate")
        .header("X-API-Key", ADMIN_KEY.to_uppercase());
    assert_eq!(anon.send(case).await.expect("401").status, 401);
    assert_eq!(
        anon.post_empty("/api/auth/validate")
            .await
            .expect("401")
            .status,
        401
    );
}

#[tokio::test]
async fn admin_routes_refuse_lower_roles_and_scoped_keys() {
    let node = node().await;
    let admin = node.client();
    let (_, viewer) = create_key(&admin, json!({ "name": "viewer", "role": "viewer" })).await;
    let (_, operator) = create_key(&admin, json!({ "name": "operator", "role": "operator" })).await;
    let scoped_body =
        json!({ "name": "scoped-admin", "role": "admin", "allowedSessions": [SESSION] });
    let (_, scoped_admin) = create_key(&admin, scoped_body).await;
    for key in [&viewer, &operator] {
        let c = node.client_with_key(Some(key));
        assert_eq!(c.get("/api/auth/api-keys").await.expect("403").status, 403);
        assert_eq!(c.get("/api/audit").await.expect("403").status, 403);
        let check = c.post_empty("/api/auth/validate").await.expect("200");
        assert_eq!(check.status, 200, "any valid key may check itself");
    }
    let scoped = node.client_with_key(Some(&scoped_admin));
    assert_eq!(
        scoped.get("/api/auth/api-keys").await.expect("403").status,
        403
    );
    assert_eq!(
        scoped
            .post_empty("/api/auth/validate")
            .await
            .expect("200")
            .body["scoped"],
        true
    );
    // A drain hands over every session of the node; the node's counts show only the key's sessions.
    assert_eq!(
        scoped
            .post_empty("/api/infra/drain")
            .await
            .expect("403")
            .status,
        403
    );
    let created = admin
        .post("/api/sessions", json!({ "name": "counted" }))
        .await
        .expect("create");
    let id = created.body["id"].as_str().unwrap_or_default().to_string();
    let started = admin
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await
        .expect("start");
    assert!(started.status < 300, "{}", started.text);
    let all = admin.get("/api/infra/status").await.expect("status");
    assert_eq!(all.body["sessionsLoaded"], 1, "{}", all.text);
    let own = scoped.get("/api/infra/status").await.expect("status");
    assert_eq!(own.status, 200, "{}", own.text);
    assert_eq!(own.body["sessionsLoaded"], 0, "{}", own.text);
    assert_eq!(own.body["leasesHeld"], 0, "{}", own.text);
}

#[tokio::test]
async fn malformed_allowed_sessions_and_ips_are_refused_at_creation() {
    let node = node().await;
    let admin = node.client();
    for entries in [
        json!([""]),
        json!([" padded"]),
        json!(["a,b"]),
        json!([SESSION, SESSION]),
        json!(["a-session-name"]),
    ] {
        let reply = admin
            .post(
                "/api/auth/api-keys",
                json!({ "name": "bad-scope", "allowedSessions": entries }),
            )
            .await;
        assert_eq!(reply.expect("reply").status, 400, "{entries}");
    }
    let reply = admin
        .post(
            "/api/auth/api-keys",
            json!({ "name": "bad-ip", "allowedIps": ["not-an-ip"] }),
        )
        .await;
    assert_eq!(reply.expect("reply").status, 400);
    let reply = admin
        .post("/api/auth/api-keys", json!({ "name": "ab" }))
        .await;
    assert_eq!(reply.expect("reply").status, 400, "name needs 3 characters");
}

#[tokio::test]
async fn allowed_ips_confine_a_key_to_its_addresses() {
    let node = node().await;
    let admin = node.client();
    let (_, elsewhere) = create_key(
        &admin,
        json!({ "name": "remote-only", "allowedIps": ["10.0.0.0/8"] }),
    )
    .await;
    let (_, local) = create_key(
        &admin,
        json!({ "name": "local-only", "allowedIps": ["127.0.0.1"] }),
    )
    .await;
    assert_eq!(
        node.client_with_key(Some(&elsewhere))
            .post_empty("/api/auth/validate")
            .await
            .expect("r")
            .status,
        401
    );
    assert_eq!(
        node.client_with_key(Some(&local))
            .post_empty("/api/auth/validate")
            .await
            .expect("r")
            .status,
        200
    );
}

async fn master_id(admin: &Client) -> String {
    let keys = admin.get("/api/auth/api-keys").await.expect("list");
    keys.body
        .as_array()
        .and_then(|list| list.iter().find(|k| k["name"] == "master"))
        .and_then(|k| k["id"].as_str())
        .expect("the master key is listed")
        .to_string()
}

fn assert_last_admin(reply: &wagate_loadtest::harness::Reply) {
    assert_eq!(reply.status, 409, "{}", reply.text);
    assert_eq!(
        reply.body["message"], "This change would leave no usable admin key",
        "{}",
        reply.text
    );
}

#[tokio::test]
async fn an_admin_key_bound_to_other_addresses_does_not_keep_the_caller_in() {
    let node = node().await;
    let admin = node.client();
    let master = format!("/api/auth/api-keys/{}", master_id(&admin).await);
    let (second, _) = create_key(&admin, json!({ "name": "admin2", "role": "admin" })).await;
    let second = format!("/api/auth/api-keys/{second}");
    let narrowed = admin
        .put(&second, json!({ "allowedIps": ["10.0.0.0/8"] }))
        .await
        .expect("narrow");
    assert_eq!(narrowed.status, 200, "{}", narrowed.text);
    assert_last_admin(&admin.delete(&master).await.expect("delete"));
    assert_last_admin(
        &admin
            .post_empty(&format!("{master}/revoke"))
            .await
            .expect("revoke"),
    );
    let elsewhere = admin
        .put(&master, json!({ "allowedIps": ["10.9.9.9"] }))
        .await
        .expect("narrow master");
    assert_last_admin(&elsewhere);
    let here = admin
        .put(&master, json!({ "allowedIps": ["127.0.0.1"] }))
        .await
        .expect("narrow master to here");
    assert_eq!(here.status, 200, "{}", here.text);
    let still = admin.get("/api/auth/api-keys").await.expect("list");
    assert_eq!(still.status, 200, "the admin still gets in: {}", still.text);
}

#[tokio::test]
async fn an_expiry_in_the_past_is_refused() {
    let node = node().await;
    let admin = node.client();
    let past = json!({ "name": "expired", "expiresAt": "2001-01-01T00:00:00Z" });
    let reply = admin
        .post("/api/auth/api-keys", past)
        .await
        .expect("create");
    assert_eq!(reply.status, 400, "{}", reply.text);
    let (id, _) = create_key(&admin, json!({ "name": "expiring" })).await;
    let path = format!("/api/auth/api-keys/{id}");
    let reply = admin
        .put(&path, json!({ "expiresAt": "2001-01-01T00:00:00Z" }))
        .await
        .expect("update");
    assert_eq!(reply.status, 400, "{}", reply.text);
    let future = admin
        .put(&path, json!({ "expiresAt": "2999-01-01T00:00:00Z" }))
        .await
        .expect("update");
    assert_eq!(future.status, 200, "{}", future.text);
}

#[tokio::test]
async fn allowed_sessions_must_be_session_ids_on_update_too() {
    let node = node().await;
    let admin = node.client();
    let (id, _) = create_key(
        &admin,
        json!({ "name": "scoped", "allowedSessions": [SESSION] }),
    )
    .await;
    let path = format!("/api/auth/api-keys/{id}");
    let reply = admin
        .put(&path, json!({ "allowedSessions": ["my-session"] }))
        .await
        .expect("update");
    assert_eq!(reply.status, 400, "{}", reply.text);
    let record = admin.get(&path).await.expect("get");
    assert_eq!(
        record.body["allowedSessions"],
        json!([SESSION]),
        "{}",
        record.text
    );
}
