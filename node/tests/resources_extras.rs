//! Channels, labels, catalog, status posts, calls and profile end to end on the sim, including the
//! network's refusals (403), `null` catalog answers, stored status media and `autoRejectCalls`.

mod resources_support;

use std::time::Duration;

use resources_support::{at, jid, linked_session, node};
use serde_json::json;
use wagate_loadtest::harness::{Client, Reply};

const ALICE: &str = "4915400000001";
const BOB: &str = "4915400000002";
const CALLER: &str = "4915400000050";

fn ok(reply: Reply) -> Reply {
    assert!(reply.status < 300, "{}", reply.text);
    reply
}

#[tokio::test]
async fn channels_create_subscribe_mute_transfer_and_refusals() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bob = linked_session(&c, "bob", BOB).await;
    let created = c
        .post(
            &at(&alice, "/channels"),
            json!({ "name": "News", "description": "daily" }),
        )
        .await
        .expect("create");
    assert_eq!(created.status, 201, "{}", created.text);
    let channel = created.str("id");
    for field in [
        "inviteCode",
        "subscriberCount",
        "verified",
        "createdAt",
        "picture",
    ] {
        assert!(
            created.body.get(field).is_some(),
            "{field}: {}",
            created.text
        );
    }
    let code = created.str("inviteCode");
    let subscribed = ok(c
        .post(
            &at(&bob, "/channels/subscribe"),
            json!({ "inviteCode": code }),
        )
        .await
        .expect("subscribe"));
    assert_eq!(subscribed.status, 201, "{}", subscribed.text);
    assert_eq!(subscribed.str("id"), channel);
    let info = ok(c
        .get(&at(&bob, &format!("/channels/{channel}")))
        .await
        .expect("info"));
    assert_eq!(info.body["name"], "News");
    ok(c.post(
        &at(&bob, &format!("/channels/{channel}/mute")),
        json!({ "mute": true }),
    )
    .await
    .expect("mute"));

    let refused = c
        .post_empty(&at(&bob, &format!("/channels/{channel}/delete")))
        .await
        .expect("delete");
    assert_eq!(
        refused.status, 403,
        "a non-owner's delete is refused by the network: {}",
        refused.text
    );
    let transfer = at(&alice, &format!("/channels/{channel}/owner/transfer"));
    ok(c.post(&transfer, json!({ "newOwnerId": jid(BOB) }))
        .await
        .expect("transfer"));
    ok(c.post(
        &at(&bob, &format!("/channels/{channel}/admins/demote")),
        json!({ "userId": jid(ALICE) }),
    )
    .await
    .expect("demote"));
    ok(c.delete(&at(&alice, &format!("/channels/{channel}")))
        .await
        .expect("unsubscribe"));
    ok(
        c.post_empty(&at(&bob, &format!("/channels/{channel}/delete")))
            .await
            .expect("delete"),
    );
    assert_eq!(
        c.get(&at(&bob, &format!("/channels/{channel}")))
            .await
            .expect("info")
            .status,
        404
    );
}

#[tokio::test]
async fn labels_edit_and_catalog_reads() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let label = ok(c
        .put(
            &at(&alice, "/labels/5"),
            json!({ "name": "VIP", "color": 3 }),
        )
        .await
        .expect("upsert"));
    assert_eq!(label.body["id"], "5");
    assert_eq!(label.body["name"], "VIP");
    assert!(label.str("hexColor").starts_with('#'));
    assert_eq!(
        c.put(&at(&alice, "/labels/5"), json!({ "color": 20 }))
            .await
            .expect("upsert")
            .status,
        400
    );
    let chat = jid(BOB);
    ok(c.post(
        &at(&alice, &format!("/labels/chat/{chat}")),
        json!({ "labelId": "5" }),
    )
    .await
    .expect("tag"));
    ok(c.delete(&at(&alice, &format!("/labels/chat/{chat}/5")))
        .await
        .expect("untag"));
    ok(c.delete(&at(&alice, "/labels/5")).await.expect("delete"));

    let catalog = ok(c.get(&at(&alice, "/catalog")).await.expect("catalog"));
    assert!(
        catalog.body["productCount"].as_u64().unwrap_or(0) >= 1,
        "{}",
        catalog.text
    );
    let page = ok(c
        .get(&at(&alice, "/catalog/products?page=1&limit=1"))
        .await
        .expect("products"));
    assert_eq!(page.body["pagination"]["page"], 1);
    assert_eq!(page.body["pagination"]["limit"], 1);
    assert!(page.body["pagination"]["totalPages"].as_u64().unwrap_or(0) >= 1);
    let first = page.body["products"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let product = ok(c
        .get(&at(&alice, &format!("/catalog/products/{first}")))
        .await
        .expect("product"));
    assert_eq!(product.body["id"], first.as_str());
    let none = ok(c
        .get(&at(&alice, "/catalog/products/no-such-product"))
        .await
        .expect("product"));
    assert!(none.body.is_null(), "no product answers null with 200");
}

#[tokio::test]
async fn status_posts_lists_media_and_delete() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bob = linked_session(&c, "bob", BOB).await;
    let text = c
        .post(&at(&alice, "/status/send-text"), json!({ "text": "hello", "recipients": [jid(BOB)], "font": 2, "backgroundColor": "#112233" }))
        .await
        .expect("text");
    assert_eq!(text.status, 201, "{}", text.text);
    assert!(
        text.str("expiresAt").ends_with('Z') && !text.str("statusId").is_empty(),
        "{}",
        text.text
    );
    let image = c
        .post(&at(&alice, "/status/send-image"), json!({ "image": { "base64": "aW1hZ2U=", "mimetype": "image/png" }, "caption": "pic", "recipients": [jid(BOB)] }))
        .await
        .expect("image");
    assert_eq!(image.status, 201, "{}", image.text);
    let flat = c
        .post(
            &at(&alice, "/status/send-voice"),
            json!({ "base64": "dm9pY2U=", "recipients": ["123456789@lid"] }),
        )
        .await
        .expect("voice");
    assert_eq!(flat.status, 201, "{}", flat.text);

    let own = ok(c.get(&at(&alice, "/status")).await.expect("list"));
    assert_eq!(
        own.body["statuses"].as_array().map(Vec::len),
        Some(3),
        "{}",
        own.text
    );
    let seen = ok(c
        .get(&at(&bob, &format!("/status/{}", jid(ALICE))))
        .await
        .expect("contact"));
    assert_eq!(
        seen.body["statuses"].as_array().map(Vec::len),
        Some(2),
        "{}",
        seen.text
    );
    // Bob's own list shows what his contacts posted to him too.
    let bobs = ok(c.get(&at(&bob, "/status")).await.expect("bob's list"));
    let contacts: Vec<_> = bobs.body["statuses"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| s["contact"].clone())
        .collect();
    assert_eq!(contacts.len(), 2, "{}", bobs.text);
    assert!(
        contacts.iter().all(|c| c.to_string().contains(ALICE)),
        "{}",
        bobs.text
    );

    let media = c
        .raw(
            reqwest::Method::GET,
            &at(&alice, &format!("/status/{}/media", image.str("statusId"))),
        )
        .send()
        .await
        .expect("media");
    assert_eq!(media.status(), 200);
    assert_eq!(
        media
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("image/png")
    );
    assert_eq!(media.bytes().await.expect("bytes").as_ref(), b"image");
    let none = c
        .get(&at(
            &alice,
            &format!("/status/{}/media", text.str("statusId")),
        ))
        .await
        .expect("media");
    assert_eq!(none.status, 404);

    let first = ok(c
        .delete(&at(&alice, &format!("/status/{}", text.str("statusId"))))
        .await
        .expect("delete"));
    let left = ok(c.get(&at(&alice, "/status")).await.expect("list"));
    assert_eq!(left.body["statuses"].as_array().map(Vec::len), Some(2));
    // Delete converges: deleting the same own post again answers the same success.
    let again = ok(c
        .delete(&at(&alice, &format!("/status/{}", text.str("statusId"))))
        .await
        .expect("delete again"));
    assert_eq!(again.body, first.body);
    assert_eq!(again.body["success"], true, "{}", again.text);
    let still = ok(c.get(&at(&alice, "/status")).await.expect("list"));
    assert_eq!(still.body["statuses"].as_array().map(Vec::len), Some(2));
    // A contact's post that Bob sees is not his to delete.
    let not_his = c
        .delete(&at(&bob, &format!("/status/{}", image.str("statusId"))))
        .await
        .expect("delete another's");
    assert_eq!(not_his.status, 404, "{}", not_his.text);
    // A deleted post's media goes with it; deleting it twice is fine as well.
    let image_path = at(&alice, &format!("/status/{}", image.str("statusId")));
    ok(c.delete(&image_path).await.expect("delete image"));
    ok(c.delete(&image_path).await.expect("delete image again"));
    let gone = c.get(&format!("{image_path}/media")).await.expect("media");
    assert_eq!(gone.status, 404, "{}", gone.text);
    // An id the session never posted is not a delete that landed: still 404.
    let never = c
        .delete(&at(&alice, "/status/NEVER-POSTED-0001"))
        .await
        .expect("delete unknown");
    assert_eq!(never.status, 404, "{}", never.text);
}

/// A 1x1 RGB PNG.
const PNG_B64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

/// The served type of one of `session`'s own status posts' media.
async fn status_media_type(c: &Client, session: &str, status_id: &str) -> Option<String> {
    let path = at(session, &format!("/status/{status_id}/media"));
    let media = c
        .raw(reqwest::Method::GET, &path)
        .send()
        .await
        .expect("media");
    assert_eq!(media.status(), 200, "{path}");
    let served = media.headers().get("content-type")?;
    served.to_str().ok().map(str::to_string)
}

/// Status media given as base64 without a mimetype (nested or flat) takes the type its bytes show; bytes
/// of another kind, or of no kind known, are refused.
#[tokio::test]
async fn status_media_without_a_mimetype_takes_the_type_of_its_bytes() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let to = [jid(BOB)];
    let bodies = [
        json!({ "image": { "base64": PNG_B64 }, "recipients": to }),
        json!({ "base64": PNG_B64, "caption": "flat", "recipients": to }),
    ];
    for body in bodies {
        let posted = c
            .post(&at(&alice, "/status/send-image"), body.clone())
            .await
            .expect("post");
        assert_eq!(posted.status, 201, "{body}: {}", posted.text);
        for field in ["statusId", "timestamp", "expiresAt"] {
            assert!(!posted.str(field).is_empty(), "{field}: {}", posted.text);
        }
        let id = posted.str("statusId");
        let own = ok(c.get(&at(&alice, "/status")).await.expect("list"));
        let listed = own.body["statuses"].as_array().into_iter().flatten();
        let listed: Vec<_> = listed.filter(|s| s["id"] == id.as_str()).collect();
        assert_eq!(listed.len(), 1, "{}", own.text);
        assert_eq!(listed[0]["type"], "image", "{}", own.text);
        assert_eq!(listed[0]["hasMedia"], true, "{}", own.text);
        let served = status_media_type(&c, &alice, &id).await;
        assert_eq!(served.as_deref(), Some("image/png"));
    }
    let refused = [
        (
            "/status/send-image",
            json!({ "image": { "base64": "aGVsbG8gd29ybGQ=" }, "recipients": to }),
            "could not be detected",
        ),
        (
            "/status/send-video",
            json!({ "video": { "base64": PNG_B64 }, "recipients": to }),
            "not image/png",
        ),
        (
            "/status/send-image",
            json!({ "base64": "AAAAIGZ0eXBpc29tAAACAGlzb21pc28y", "recipients": to }),
            "not video/mp4",
        ),
    ];
    for (route, body, message) in refused {
        let reply = c.post(&at(&alice, route), body).await.expect("post");
        assert_eq!(reply.status, 400, "{route}: {}", reply.text);
        assert!(reply.str("message").contains(message), "{}", reply.text);
    }
    // A message send keeps the spec's rule: base64 needs its mimetype, whatever the bytes are.
    let send = json!({ "chatId": jid(BOB), "base64": PNG_B64 });
    let reply = c
        .post(&at(&alice, "/messages/send-image"), send)
        .await
        .expect("send");
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert_eq!(reply.str("message"), "mimetype is required with base64");
}

async fn ring(c: &Client, session: &str) -> String {
    let call = ok(c
        .post(
            &format!("/api/sim/sessions/{session}/call"),
            json!({ "from": jid(CALLER), "isVideo": false }),
        )
        .await
        .expect("call"));
    call.str("callId")
}

#[tokio::test]
async fn calls_links_rejection_auto_reject_and_profile() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let link = ok(c
        .post(
            &at(&alice, "/calls/link"),
            json!({ "type": "audio", "startTime": 1_700_000_000_000_i64 }),
        )
        .await
        .expect("link"));
    assert!(link.str("link").starts_with("https://"), "{}", link.text);
    // What a client without integers sends (a Python float).
    ok(c.post(
        &at(&alice, "/calls/link"),
        json!({ "type": "video", "startTime": 1_700_000_000_000.5_f64 }),
    )
    .await
    .expect("float link"));
    assert_eq!(
        c.post(
            &at(&alice, "/calls/link"),
            json!({ "type": "audio", "startTime": -1 })
        )
        .await
        .expect("negative")
        .status,
        400
    );
    assert_eq!(
        c.post(
            &at(&alice, "/calls/link"),
            json!({ "type": "fax", "startTime": 1 })
        )
        .await
        .expect("link")
        .status,
        400
    );

    let call = ring(&c, &alice).await;
    ok(c.post_empty(&at(&alice, &format!("/calls/{call}/reject")))
        .await
        .expect("reject"));
    assert_eq!(
        c.post_empty(&at(&alice, &format!("/calls/{call}/reject")))
            .await
            .expect("again")
            .status,
        404
    );

    ok(
        c.patch(&at(&alice, "/config"), json!({ "autoRejectCalls": true }))
            .await
            .expect("config"),
    );
    let call = ring(&c, &alice).await;
    // Watch the node's log (no side effect on the call) until the session rejected it by itself.
    let mut logged = false;
    for _ in 0..200 {
        if node
            .logs()
            .lines()
            .any(|l| l.contains("autoRejectCalls") && l.contains(&call))
        {
            logged = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(logged, "autoRejectCalls rejected the ringing call");
    let again = c
        .post_empty(&at(&alice, &format!("/calls/{call}/reject")))
        .await
        .expect("reject");
    assert_eq!(
        again.status, 404,
        "the call no longer rings: {}",
        again.text
    );

    ok(
        c.put(&at(&alice, "/profile/name"), json!({ "name": "Alice A" }))
            .await
            .expect("name"),
    );
    let record = c
        .get(&format!("/api/sessions/{alice}"))
        .await
        .expect("record");
    assert_eq!(record.body["pushName"], "Alice A", "{}", record.text);
    ok(
        c.put(&at(&alice, "/profile/status"), json!({ "status": "busy" }))
            .await
            .expect("status"),
    );
    ok(c.put(
        &at(&alice, "/profile/picture"),
        json!({ "base64": "iVBORw0KGgoAAAANSUhEUg==", "mimetype": "image/png" }),
    )
    .await
    .expect("picture"));
    ok(c.delete(&at(&alice, "/profile/picture"))
        .await
        .expect("remove"));
    assert_eq!(
        c.put(&at(&alice, "/profile/picture"), json!({}))
            .await
            .expect("empty")
            .status,
        400
    );
    // A picture URL goes through the media store's outbound-address guard like a send's media.
    let private = c
        .put(
            &at(&alice, "/profile/picture"),
            json!({ "url": "http://127.0.0.1:9/p.jpg" }),
        )
        .await
        .expect("private url");
    assert_eq!(private.status, 400);
    assert!(
        private.body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("outbound-address guard"),
        "{}",
        private.body
    );
}
