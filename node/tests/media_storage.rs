//! Media storage end to end, on both backends (`STORAGE_TYPE=local`, and `s3` against a real
//! S3-compatible server on loopback: moto): a node sends media, receives it on the other sim session and
//! serves both through the REST routes; the same file twice is one object; status media is an object too;
//! a missing object reads as the omitted marker, never a 500; deleting a session deletes its objects. On
//! S3, nothing lands on the node's disk, refused credentials and an unreachable endpoint answer 503 and
//! lose nothing, and a storage archive carries media from local to S3 and back byte for byte.

mod messaging_support;

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine as _;
use messaging_support::*;
use serde_json::json;
use wagate_loadtest::harness::{Node, NodeOptions, S3Server};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Where a test node keeps its media.
enum Backend {
    Local,
    S3(S3Server),
}

impl Backend {
    async fn both() -> [Backend; 2] {
        [
            Backend::Local,
            Backend::S3(S3Server::start().await.expect("moto")),
        ]
    }

    fn name(&self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::S3(_) => "s3",
        }
    }

    fn options(&self, mut opts: NodeOptions) -> NodeOptions {
        if let Backend::S3(s3) = self {
            for (key, value) in s3.node_env() {
                opts = opts.env(key, value);
            }
        }
        opts
    }

    /// Every stored object of `node`, key to bytes.
    async fn objects(&self, node: &Node) -> BTreeMap<String, Vec<u8>> {
        match self {
            Backend::Local => {
                let mut out = BTreeMap::new();
                walk(&media_dir(node), "", &mut out);
                out
            }
            Backend::S3(s3) => {
                let mut out = BTreeMap::new();
                for key in s3.keys().await.expect("list bucket") {
                    let bytes = s3.get_object(&key).await.expect("get").expect("listed");
                    out.insert(key, bytes);
                }
                out
            }
        }
    }

    async fn remove(&self, node: &Node, key: &str) {
        match self {
            Backend::Local => std::fs::remove_file(media_dir(node).join(key)).expect("remove"),
            Backend::S3(s3) => s3.delete_object(key).await.expect("delete"),
        }
    }
}

fn media_dir(node: &Node) -> std::path::PathBuf {
    node.dir.path().join("data").join("media")
}

/// Files under `dir` by relative path, hidden ones (scratch, unfinished writes) left out.
fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let entry = entry.expect("entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let key = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        if entry.file_type().expect("type").is_dir() {
            walk(&entry.path(), &key, out);
        } else {
            out.insert(key, std::fs::read(entry.path()).expect("read"));
        }
    }
}

fn keys_of(objects: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    objects.keys().cloned().collect()
}

#[tokio::test]
async fn media_is_stored_once_read_back_and_deleted_with_its_session_on_both_backends() {
    for backend in Backend::both().await {
        let name = backend.name();
        let p = pair(backend.options(options())).await;
        let (to, from) = (jid(PHONE_B), jid(PHONE_A));
        let image = p
            .post(
                "messages/send-image",
                json!({ "chatId": to, "base64": b64(b"PNG-STORED"), "mimetype": "image/png" }),
            )
            .await;
        assert_eq!(image.status, 201, "{name}: {}", image.text);
        let wa_id = image.str("messageId");
        let inbound = p
            .wait_message(&p.b, "type=image", |m| m["waMessageId"] == wa_id.as_str())
            .await;
        assert_eq!(
            inbound["media"]["data"],
            b64(b"PNG-STORED"),
            "{name}: {inbound}"
        );
        let media_route = |session: &str, chat: &str, id: &str| {
            format!("/api/sessions/{session}/messages/{chat}/{id}/media")
        };
        let inbound_id = inbound["id"].as_str().unwrap_or_default().to_string();
        let raw = p
            .client
            .get(&media_route(&p.b, &from, &inbound_id))
            .await
            .unwrap();
        assert_eq!(
            (raw.status, raw.text.as_str()),
            (200, "PNG-STORED"),
            "{name}"
        );
        let sent = p
            .wait_message(&p.a, "type=image", |m| m["waMessageId"] == wa_id.as_str())
            .await;
        let sent_id = sent["id"].as_str().unwrap_or_default().to_string();
        let raw = p
            .client
            .get(&media_route(&p.a, &to, &sent_id))
            .await
            .unwrap();
        assert_eq!(
            (raw.status, raw.text.as_str()),
            (200, "PNG-STORED"),
            "{name}"
        );

        // One object per session, under {sessionId}/{sha256}.
        let objects = backend.objects(&p.node).await;
        let keys = keys_of(&objects);
        assert_eq!(keys.len(), 2, "{name}: {keys:?}");
        for session in [&p.a, &p.b] {
            assert!(
                keys.iter().any(|k| k.starts_with(&format!("{session}/"))),
                "{name}: {keys:?}"
            );
        }
        if matches!(backend, Backend::S3(_)) {
            let on_disk = std::fs::read_dir(media_dir(&p.node))
                .map(|d| d.count())
                .unwrap_or(0);
            assert_eq!(on_disk, 0, "S3 media written to the node's disk");
        }

        // The same file again: stored once per session.
        let again = p
            .post(
                "messages/send-image",
                json!({ "chatId": to, "base64": b64(b"PNG-STORED"), "mimetype": "image/png" }),
            )
            .await;
        assert_eq!(again.status, 201, "{name}: {}", again.text);
        let again_id = again.str("messageId");
        p.wait_message(&p.b, "type=image", |m| {
            m["waMessageId"] == again_id.as_str()
        })
        .await;
        assert_eq!(keys_of(&backend.objects(&p.node).await), keys, "{name}");

        // Status media is an object of the store too.
        let status = p
            .post(
                "status/send-image",
                json!({ "image": { "base64": b64(b"STATUS-IMG"), "mimetype": "image/png" }, "recipients": [to] }),
            )
            .await;
        assert_eq!(status.status, 201, "{name}: {}", status.text);
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
            (200, "STATUS-IMG"),
            "{name}"
        );
        // The poster's copy, and the copy the recipient's session stored when the status reached it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let objects = backend.objects(&p.node).await;
            let holders: Vec<&String> = objects
                .iter()
                .filter(|(_, bytes)| bytes.as_slice() == b"STATUS-IMG")
                .map(|(key, _)| key)
                .collect();
            let held_by = |s: &str| holders.iter().any(|k| k.starts_with(&format!("{s}/")));
            if held_by(&p.a) && held_by(&p.b) {
                assert_eq!(objects.len(), 4, "{name}: {:?}", keys_of(&objects));
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{name}: status media objects {holders:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }

        // A missing object: the list shows the omitted marker, the media route a 404; never a 500.
        let inbound_key = keys
            .iter()
            .find(|k| k.starts_with(&format!("{}/", p.b)))
            .expect("inbound key")
            .clone();
        backend.remove(&p.node, &inbound_key).await;
        let listed = p
            .client
            .get(&format!("/api/sessions/{}/messages?type=image", p.b))
            .await
            .unwrap();
        assert_eq!(listed.status, 200, "{name}: {}", listed.text);
        assert_eq!(
            listed.body[0]["media"]["omitted"], true,
            "{name}: {}",
            listed.text
        );
        let gone = p
            .client
            .get(&media_route(&p.b, &from, &inbound_id))
            .await
            .unwrap();
        assert_eq!(gone.status, 404, "{name}: {}", gone.text);
        assert!(
            p.node
                .wait_logged("media object missing", std::time::Duration::from_secs(10))
                .await,
            "{name}: the missing object is logged"
        );

        // A document too large to inline travels by key: the recipient's session keeps its own copy of
        // the sender's object, byte-identical, which outlives the sender's session.
        let doc: String = (0..(1024 * 1024 + 7))
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let sent_doc = p
            .post(
                "messages/send-document",
                json!({ "chatId": to, "base64": b64(doc.as_bytes()), "mimetype": "application/pdf", "filename": "big.pdf" }),
            )
            .await;
        assert_eq!(sent_doc.status, 201, "{name}: {}", sent_doc.text);
        let doc_wa = sent_doc.str("messageId");
        let got = p
            .wait_message(&p.b, "type=document", |m| {
                m["waMessageId"] == doc_wa.as_str()
            })
            .await;
        assert_eq!(
            (&got["media"]["omitted"], &got["media"]["sizeBytes"]),
            (&json!(true), &json!(doc.len())),
            "{name}: {got}"
        );
        let doc_route = media_route(&p.b, &from, got["id"].as_str().unwrap_or_default());
        let objects = backend.objects(&p.node).await;
        let copies: Vec<&String> = objects
            .iter()
            .filter(|(_, bytes)| bytes.as_slice() == doc.as_bytes())
            .map(|(key, _)| key)
            .collect();
        assert_eq!(
            copies.len(),
            2,
            "{name}: sender's and recipient's: {copies:?}"
        );
        assert!(
            copies.iter().any(|k| k.starts_with(&format!("{}/", p.b))),
            "{name}: {copies:?}"
        );

        // Deleting a session deletes its objects, and only its.
        let deleted = p
            .client
            .delete(&format!("/api/sessions/{}", p.a))
            .await
            .unwrap();
        assert_eq!(deleted.status, 204, "{name}: {}", deleted.text);
        let left = keys_of(&backend.objects(&p.node).await);
        assert!(
            left.iter().all(|k| !k.starts_with(&format!("{}/", p.a))),
            "{name}: {left:?}"
        );
        let raw = p.client.get(&doc_route).await.unwrap();
        assert_eq!(raw.status, 200, "{name}: {}", raw.text);
        assert!(
            raw.text == doc,
            "{name}: the recipient's copy reads back byte-identical"
        );
    }
}

#[tokio::test]
async fn refused_credentials_answer_503_and_lose_nothing() {
    let s3 = S3Server::start().await.expect("moto");
    let backend = Backend::S3(s3);
    let p = pair(backend.options(options())).await;
    let Backend::S3(s3) = &backend else {
        unreachable!()
    };
    let (to, from) = (jid(PHONE_B), jid(PHONE_A));
    let image = p
        .post(
            "messages/send-image",
            json!({ "chatId": to, "base64": b64(b"KEEP-ME"), "mimetype": "image/png" }),
        )
        .await;
    assert_eq!(image.status, 201, "{}", image.text);
    let wa_id = image.str("messageId");
    let inbound = p
        .wait_message(&p.b, "type=image", |m| m["waMessageId"] == wa_id.as_str())
        .await;
    let inbound_id = inbound["id"].as_str().unwrap_or_default().to_string();
    let route = format!("/api/sessions/{}/messages/{from}/{inbound_id}/media", p.b);

    s3.refuse_credentials(true).await.unwrap();
    let refused = p.client.get(&route).await.unwrap();
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
    let send = p
        .post(
            "messages/send-image",
            json!({ "chatId": to, "base64": b64(b"NOT-NOW"), "mimetype": "image/png" }),
        )
        .await;
    // The media send path never answers 503 (the spec): a client must not take it as safe to retry.
    assert_eq!(send.status, 500, "{}", send.text);
    let count = p
        .client
        .get("/api/infra/storage/files/count")
        .await
        .unwrap();
    assert_eq!(count.status, 503, "{}", count.text);

    s3.refuse_credentials(false).await.unwrap();
    let back = p.client.get(&route).await.unwrap();
    assert_eq!((back.status, back.text.as_str()), (200, "KEEP-ME"));
    assert_eq!(backend.objects(&p.node).await.len(), 2);
}

#[tokio::test]
async fn an_unreachable_endpoint_answers_503_with_a_clear_message() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let p = pair(
        options()
            .env("STORAGE_TYPE", "s3")
            .env("S3_BUCKET", "media")
            .env("S3_ENDPOINT", format!("http://127.0.0.1:{port}"))
            .env("S3_FORCE_PATH_STYLE", "true")
            .env("AWS_ACCESS_KEY_ID", "id")
            .env("AWS_SECRET_ACCESS_KEY", "secret"),
    )
    .await;
    let send = p
        .post(
            "messages/send-image",
            json!({ "chatId": jid(PHONE_B), "base64": b64(b"NOWHERE"), "mimetype": "image/png" }),
        )
        .await;
    assert_eq!(
        send.status, 500,
        "the media send path never answers 503: {}",
        send.text
    );
    assert!(
        send.body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Media storage is unavailable")),
        "{}",
        send.text
    );
    for route in [
        "/api/infra/storage/files/count",
        "/api/infra/storage/export",
    ] {
        let reply = p.client.get(route).await.unwrap();
        assert_eq!(reply.status, 503, "{route}: {}", reply.text);
    }
}

/// The storage archive of `from`, copied into `to`'s data directory, imported there.
async fn carry_archive(from: &Node, to: &Node) -> serde_json::Value {
    let exported = from
        .client()
        .get("/api/infra/storage/export")
        .await
        .unwrap();
    assert_eq!(exported.status, 200, "{}", exported.text);
    let download = exported.str("download");
    let source = if Path::new(&download).is_absolute() {
        std::path::PathBuf::from(&download)
    } else {
        std::env::current_dir().unwrap().join(&download)
    };
    let target = to.dir.path().join("data").join("carried.tar.gz");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(&source, &target).unwrap();
    let imported = to
        .client()
        .post(
            "/api/infra/storage/import",
            json!({ "filePath": target.display().to_string() }),
        )
        .await
        .unwrap();
    assert_eq!(imported.status, 200, "{}", imported.text);
    imported.body
}

#[tokio::test]
async fn a_storage_archive_moves_media_from_local_to_s3_and_back_byte_identical() {
    let local = Backend::Local;
    let p = pair(local.options(options())).await;
    // One object over the multipart part size (5 MiB), one small.
    let big: Vec<u8> = (0..6 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    for (body, mimetype, route, field) in [
        (
            big.as_slice(),
            "application/pdf",
            "messages/send-document",
            "base64",
        ),
        (
            &b"SMALL-IMAGE"[..],
            "image/png",
            "messages/send-image",
            "base64",
        ),
    ] {
        let reply = p
            .post(
                route,
                json!({ "chatId": jid(PHONE_B), field: b64(body), "mimetype": mimetype, "filename": "f" }),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        let wa_id = reply.str("messageId");
        p.wait_message(&p.b, "limit=10", |m| m["waMessageId"] == wa_id.as_str())
            .await;
    }
    // Each file twice: the sender's object and the recipient's.
    let original = local.objects(&p.node).await;
    assert_eq!(original.len(), 4, "{:?}", keys_of(&original));

    let s3 = Backend::S3(S3Server::start().await.expect("moto"));
    let on_s3 = Node::start(s3.options(options())).await.unwrap();
    let imported = carry_archive(&p.node, &on_s3).await;
    assert_eq!(
        imported,
        json!({ "imported": true, "count": 4, "storageType": "s3" })
    );
    assert_eq!(s3.objects(&on_s3).await, original, "local to S3");
    let count = on_s3
        .client()
        .get("/api/infra/storage/files/count")
        .await
        .unwrap();
    assert_eq!(count.body["storageType"], "s3", "{}", count.text);
    assert_eq!(count.body["count"], 4, "{}", count.text);
    let total: usize = original.values().map(Vec::len).sum();
    assert_eq!(count.body["sizeBytes"], total as u64, "{}", count.text);

    let back = Node::start(local.options(options())).await.unwrap();
    let imported = carry_archive(&on_s3, &back).await;
    assert_eq!(
        imported,
        json!({ "imported": true, "count": 4, "storageType": "local" })
    );
    assert_eq!(local.objects(&back).await, original, "S3 back to local");
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
            "invalid configuration: S3_ENDPOINT must be an http:// or https:// URL (got 'minio:9000')",
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
