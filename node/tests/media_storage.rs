//! Media on `STORAGE_TYPE=s3` end to end: a node whose media lives in a real S3-compatible server on
//! loopback (moto) sends media, receives it on the other sim session, and serves both through the REST
//! routes; nothing lands on the node's disk; the same file twice is one object; refused credentials
//! answer 503 on the media route and the omitted marker in the list, losing nothing; deleting a session
//! deletes its objects; status media is an object too.

mod messaging_support;

use base64::Engine as _;
use messaging_support::*;
use serde_json::json;
use wagate_loadtest::harness::S3Server;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn sorted_keys(s3: &S3Server) -> Vec<String> {
    let mut keys = s3.keys().await.expect("list bucket");
    keys.sort();
    keys
}

#[tokio::test]
async fn media_sent_and_received_on_s3_reads_back_through_the_rest_routes() {
    let s3 = S3Server::start().await.expect("moto");
    let mut opts = options();
    for (key, value) in s3.node_env() {
        opts = opts.env(key, value);
    }
    let p = pair(opts).await;
    let (to, from) = (jid(PHONE_B), jid(PHONE_A));
    let image = p
        .post(
            "messages/send-image",
            json!({ "chatId": to, "base64": b64(b"PNG-ON-S3"), "mimetype": "image/png" }),
        )
        .await;
    assert_eq!(image.status, 201, "{}", image.text);
    let wa_id = image.str("messageId");
    let inbound = p
        .wait_message(&p.b, "type=image", |m| m["waMessageId"] == wa_id.as_str())
        .await;
    assert_eq!(inbound["media"]["data"], b64(b"PNG-ON-S3"), "{inbound}");
    let media_route = |session: &str, chat: &str, id: &str| {
        format!("/api/sessions/{session}/messages/{chat}/{id}/media")
    };
    let inbound_id = inbound["id"].as_str().unwrap_or_default().to_string();
    let raw = p
        .client
        .get(&media_route(&p.b, &from, &inbound_id))
        .await
        .unwrap();
    assert_eq!((raw.status, raw.text.as_str()), (200, "PNG-ON-S3"));
    let sent = p
        .wait_message(&p.a, "type=image", |m| m["waMessageId"] == wa_id.as_str())
        .await;
    let sent_id = sent["id"].as_str().unwrap_or_default().to_string();
    let raw = p
        .client
        .get(&media_route(&p.a, &to, &sent_id))
        .await
        .unwrap();
    assert_eq!((raw.status, raw.text.as_str()), (200, "PNG-ON-S3"));

    // Both sessions' objects are in the bucket, under {sessionId}/{sha256}; none on the node's disk.
    let keys = sorted_keys(&s3).await;
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(
        keys.iter().any(|k| k.starts_with(&format!("{}/", p.a))),
        "{keys:?}"
    );
    assert!(
        keys.iter().any(|k| k.starts_with(&format!("{}/", p.b))),
        "{keys:?}"
    );
    let local = p.node.dir.path().join("media");
    let on_disk = std::fs::read_dir(&local).map(|d| d.count()).unwrap_or(0);
    assert_eq!(on_disk, 0, "media written to {}", local.display());

    // The same file again: stored once per session.
    let again = p
        .post(
            "messages/send-image",
            json!({ "chatId": to, "base64": b64(b"PNG-ON-S3"), "mimetype": "image/png" }),
        )
        .await;
    assert_eq!(again.status, 201, "{}", again.text);
    let again_id = again.str("messageId");
    p.wait_message(&p.b, "type=image", |m| {
        m["waMessageId"] == again_id.as_str()
    })
    .await;
    assert_eq!(sorted_keys(&s3).await, keys);

    // Status media is an object of the store too.
    let status = p
        .post(
            "status/send-image",
            json!({ "image": { "base64": b64(b"STATUS-IMG"), "mimetype": "image/png" }, "recipients": [to] }),
        )
        .await;
    assert_eq!(status.status, 201, "{}", status.text);
    let status_media = p
        .client
        .get(&format!(
            "/api/sessions/{}/status/{}/media",
            p.a,
            status.str("statusId")
        ))
        .await
        .unwrap();
    assert_eq!(
        (status_media.status, status_media.text.as_str()),
        (200, "STATUS-IMG")
    );
    assert_eq!(sorted_keys(&s3).await.len(), 3);

    // Credentials refused: the media route answers 503 with a clear message, the list shows the
    // omitted marker (never a 500), and once accepted again everything is still there.
    s3.refuse_credentials(true).await.unwrap();
    let refused = p
        .client
        .get(&media_route(&p.b, &from, &inbound_id))
        .await
        .unwrap();
    assert_eq!(refused.status, 503, "{}", refused.text);
    assert!(
        refused.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Media storage is unavailable")),
        "{}",
        refused.text
    );
    let listed = p
        .client
        .get(&format!("/api/sessions/{}/messages?type=image", p.b))
        .await
        .unwrap();
    assert_eq!(listed.status, 200, "{}", listed.text);
    assert_eq!(listed.body[0]["media"]["omitted"], true, "{}", listed.text);
    s3.refuse_credentials(false).await.unwrap();
    let back = p
        .client
        .get(&media_route(&p.b, &from, &inbound_id))
        .await
        .unwrap();
    assert_eq!((back.status, back.text.as_str()), (200, "PNG-ON-S3"));

    // Deleting a session deletes its objects, and only its.
    let deleted = p
        .client
        .delete(&format!("/api/sessions/{}", p.b))
        .await
        .unwrap();
    assert_eq!(deleted.status, 204, "{}", deleted.text);
    let left = sorted_keys(&s3).await;
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter().all(|k| k.starts_with(&format!("{}/", p.a))),
        "{left:?}"
    );
}

#[tokio::test]
async fn boot_refuses_s3_without_a_bucket_or_with_a_bad_endpoint_in_one_line() {
    for (extra, expected) in [
        (
            None,
            "invalid configuration: S3_BUCKET is required when STORAGE_TYPE=s3",
        ),
        (
            Some(("S3_ENDPOINT", "minio:9000")),
            "invalid configuration: S3_ENDPOINT must be an http(s) URL",
        ),
    ] {
        let mut opts = options()
            .env("STORAGE_TYPE", "s3")
            .env("S3_BUCKET", if extra.is_some() { "media" } else { "" });
        if let Some((key, value)) = extra {
            opts = opts.env(key, value);
        }
        opts.wait_ready = false;
        let mut node = wagate_loadtest::harness::Node::start(opts)
            .await
            .expect("spawn");
        let code = node.wait_exit(std::time::Duration::from_secs(20)).await;
        let logs = node.logs();
        assert!(matches!(code, Some(c) if c != 0), "{logs}");
        let line = logs.lines().find(|l| l.contains(expected));
        assert!(line.is_some(), "{logs}");
    }
}
