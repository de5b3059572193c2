//! The media store against both backends: a local directory and a real S3-compatible server (moto)
//! on loopback.

use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::testing::{S3Server, s3_config, server_config, store_on};
use super::*;

struct Backend {
    name: &'static str,
    store: MediaStore,
    _dir: tempfile::TempDir,
    _server: Option<S3Server>,
}

async fn backends(max: u64) -> Vec<Backend> {
    let local_dir = tempfile::tempdir().unwrap();
    let local = store_on(&StorageConfig::Local, local_dir.path(), max);
    let s3_dir = tempfile::tempdir().unwrap();
    let server = S3Server::start().await.expect("moto");
    let s3 = store_on(&server_config(&server), s3_dir.path(), max);
    vec![
        Backend {
            name: "local",
            store: local,
            _dir: local_dir,
            _server: None,
        },
        Backend {
            name: "s3",
            store: s3,
            _dir: s3_dir,
            _server: Some(server),
        },
    ]
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Every object in the backend, temporary uploads included.
async fn raw_keys(store: &MediaStore) -> Vec<String> {
    let mut keys: Vec<String> = store
        .objects
        .list(None)
        .map(|m| m.unwrap().location.to_string())
        .collect()
        .await;
    keys.sort();
    keys
}

fn chunks(data: &[u8]) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Unpin {
    let parts: Vec<Result<Bytes, std::io::Error>> = data
        .chunks(64 * 1024)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    futures::stream::iter(parts)
}

#[tokio::test]
async fn objects_are_content_addressed_per_session_and_stored_once() {
    for b in backends(1024 * 1024).await {
        let media = &b.store;
        let stored = media.put_base64("s1", "aGVsbG8=").await.unwrap();
        assert_eq!(stored.key, format!("s1/{}", sha(b"hello")), "{}", b.name);
        assert_eq!(stored.size, 5);
        assert_eq!(media.get(&stored.key).await.unwrap().unwrap(), b"hello");
        let again = media.put_bytes("s1", b"hello").await.unwrap();
        assert_eq!(again.key, stored.key, "{}: same file, same key", b.name);
        let other = media.put_bytes("s2", b"hello").await.unwrap();
        assert_eq!(other.key, format!("s2/{}", sha(b"hello")));
        assert_eq!(
            raw_keys(media).await,
            vec![stored.key.clone(), other.key.clone()],
            "{}: one object per session, nothing else left behind",
            b.name
        );
        let listed = media.list(Some("s1")).await.unwrap();
        assert_eq!(
            listed,
            vec![MediaObject {
                key: stored.key.clone(),
                size: 5
            }]
        );
        assert_eq!(media.head(&stored.key).await.unwrap(), Some(5));
        assert_eq!(media.storage_type().as_str(), b.name);
    }
}

#[tokio::test]
async fn a_large_object_streams_through_a_multipart_upload() {
    let data: Vec<u8> = (0..(12 * 1024 * 1024u32))
        .map(|i| (i % 251) as u8)
        .collect();
    for b in backends(64 * 1024 * 1024).await {
        let media = &b.store;
        let stored = media.put_stream("big", chunks(&data)).await.unwrap();
        assert_eq!(stored.key, format!("big/{}", sha(&data)), "{}", b.name);
        assert_eq!(stored.size, data.len() as u64);
        let read = media.stream(&stored.key).await.unwrap().expect("stored");
        assert_eq!(read.size, data.len() as u64);
        let mut back = Vec::with_capacity(data.len());
        let mut body = read.body;
        while let Some(chunk) = body.next().await {
            back.extend_from_slice(&chunk.unwrap());
        }
        assert!(back == data, "{}: streamed back byte-identical", b.name);
        // The same content again: the second upload is dropped, the object stays single.
        let again = media.put_stream("big", chunks(&data)).await.unwrap();
        assert_eq!(again.key, stored.key);
        assert_eq!(
            raw_keys(media).await,
            vec![stored.key.clone()],
            "{}",
            b.name
        );
    }
}

#[tokio::test]
async fn the_size_cap_is_enforced_while_streaming() {
    let data = vec![7u8; 7 * 1024 * 1024];
    for b in backends(6 * 1024 * 1024).await {
        let media = &b.store;
        assert!(
            matches!(
                media.put_stream("s1", chunks(&data)).await,
                Err(MediaError::TooLarge(_))
            ),
            "{}",
            b.name
        );
        assert!(matches!(
            media.put_base64("s1", "aGVsbG8gd29ybGQ=").await,
            Ok(StoredMedia { size: 11, .. })
        ));
        assert!(matches!(
            media.put_base64("s1", "data:image/png;base64,AAAA").await,
            Err(MediaError::BadInput(_))
        ));
        assert_eq!(media.list(None).await.unwrap().len(), 1, "{}", b.name);
    }
}

#[tokio::test]
async fn deleting_a_session_deletes_its_media_only() {
    for b in backends(1024 * 1024).await {
        let media = &b.store;
        let gone = media.put_bytes("doomed", b"one").await.unwrap();
        media.put_bytes("doomed", b"two").await.unwrap();
        let kept = media.put_bytes("kept", b"one").await.unwrap();
        assert_eq!(
            media.delete_session("doomed").await.unwrap(),
            2,
            "{}",
            b.name
        );
        assert_eq!(media.get(&gone.key).await.unwrap(), None);
        assert_eq!(media.get(&kept.key).await.unwrap().unwrap(), b"one");
        media.delete(&kept.key).await.unwrap();
        media.delete(&kept.key).await.unwrap();
        assert!(media.list(None).await.unwrap().is_empty(), "{}", b.name);
    }
}

#[tokio::test]
async fn missing_objects_and_foreign_keys_read_as_none() {
    for b in backends(1024).await {
        let media = &b.store;
        let absent = format!("s1/{}", "ab".repeat(32));
        assert_eq!(media.get(&absent).await.unwrap(), None, "{}", b.name);
        assert!(media.stream(&absent).await.unwrap().is_none());
        assert_eq!(media.head(&absent).await.unwrap(), None);
        for bad in ["../etc/passwd", "s1/../x", "s1/.upload-x", "", "a/b/c"] {
            assert_eq!(media.get(bad).await.unwrap(), None, "{}: {bad}", b.name);
        }
        assert!(matches!(
            media.put_bytes("../up", b"x").await,
            Err(MediaError::BadInput(_))
        ));
    }
}

#[tokio::test]
async fn an_engine_download_is_adopted_from_its_scratch_file() {
    use std::io::Write;
    for b in backends(1024).await {
        let media = &b.store;
        let mut file = media.incoming().unwrap();
        file.write_all(b"decrypted media").unwrap();
        let scratch = file.path_for_tests();
        assert!(scratch.exists());
        let stored = media.adopt("s1", file).await.unwrap();
        assert_eq!(
            stored.key,
            format!("s1/{}", sha(b"decrypted media")),
            "{}",
            b.name
        );
        assert_eq!(
            media.get(&stored.key).await.unwrap().unwrap(),
            b"decrypted media"
        );
        assert!(!scratch.exists(), "{}: scratch file removed", b.name);
        let mut over = media.incoming().unwrap();
        assert!(
            over.write_all(&[0u8; 2048]).is_err(),
            "the cap holds on scratch files"
        );
    }
}

#[tokio::test]
async fn an_imported_object_keeps_its_key_unless_its_content_disagrees() {
    for b in backends(1024).await {
        let media = &b.store;
        let key = format!("s9/{}", sha(b"archived"));
        let stored = media
            .import_object(&key, chunks(b"archived"))
            .await
            .unwrap();
        assert_eq!((stored.key.as_str(), stored.size), (key.as_str(), 8));
        assert_eq!(
            media.get(&key).await.unwrap().unwrap(),
            b"archived",
            "{}",
            b.name
        );
        let legacy = sha(b"legacy");
        let stored = media
            .import_object(&legacy, chunks(b"legacy"))
            .await
            .unwrap();
        assert_eq!(stored.key, legacy, "a bare legacy key is kept");
        assert_eq!(media.get(&legacy).await.unwrap().unwrap(), b"legacy");
        let lying = format!("s9/{}", sha(b"something else"));
        let stored = media
            .import_object(&lying, chunks(b"tampered"))
            .await
            .unwrap();
        assert_eq!(stored.key, format!("s9/{}", sha(b"tampered")), "{}", b.name);
        assert!(media.get(&lying).await.unwrap().is_none());
        assert!(matches!(
            media.import_object("s9/not-a-digest", chunks(b"x")).await,
            Err(MediaError::BadInput(_))
        ));
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_clear_unavailable_error() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let media = store_on(
        &s3_config(&format!("http://127.0.0.1:{port}"), "k", "s"),
        dir.path(),
        1024,
    );
    let key = format!("s1/{}", sha(b"x"));
    for err in [
        media.get(&key).await.unwrap_err(),
        media.put_bytes("s1", b"x").await.unwrap_err(),
        media.list(None).await.unwrap_err(),
    ] {
        assert!(matches!(err, MediaError::Unavailable(_)), "{err:?}");
        assert!(
            err.to_string()
                .starts_with("Media storage is unavailable: "),
            "{err}"
        );
    }
}

#[tokio::test]
async fn refused_credentials_are_unavailable_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start().await.expect("moto");
    let media = store_on(&server_config(&server), dir.path(), 1024);
    let stored = media.put_bytes("s1", b"kept safe").await.unwrap();

    server.refuse_credentials(true).await.unwrap();
    let read = media.get(&stored.key).await.unwrap_err();
    assert!(matches!(read, MediaError::Unavailable(_)), "{read:?}");
    assert!(
        read.to_string().contains("refused the credentials"),
        "{read}"
    );
    let write = media.put_bytes("s1", b"new").await.unwrap_err();
    assert!(matches!(write, MediaError::Unavailable(_)), "{write:?}");
    let delete = media.delete_session("s1").await;
    assert!(delete.is_err(), "a refused list deletes nothing");

    server.refuse_credentials(false).await.unwrap();
    assert_eq!(media.get(&stored.key).await.unwrap().unwrap(), b"kept safe");
}

#[tokio::test]
async fn objects_written_before_per_session_keys_still_read_locally() {
    let dir = tempfile::tempdir().unwrap();
    let media = store_on(&StorageConfig::Local, dir.path(), 1024);
    let digest = sha(b"legacy");
    std::fs::write(dir.path().join("media").join(&digest), b"legacy").unwrap();
    assert_eq!(media.get(&digest).await.unwrap().unwrap(), b"legacy");
}

/// Twelve MiB whose first bytes are `tag`: distinct objects of one size.
fn large(tag: &[u8]) -> Vec<u8> {
    let mut data: Vec<u8> = (0..(12 * 1024 * 1024u32))
        .map(|i| (i % 251) as u8)
        .collect();
    data[..tag.len()].copy_from_slice(tag);
    data
}

#[tokio::test]
async fn received_media_becomes_the_sessions_own_copy_made_by_the_backend() {
    use std::sync::atomic::Ordering::SeqCst;
    let data = large(b"passed on by key");
    for b in backends(64 * 1024 * 1024).await {
        let name = b.name;
        let sent = b.store.put_stream("sender", chunks(&data)).await.unwrap();
        let (store, traffic) = b.store.counted();
        let file = Some((sent.key.as_str(), sent.size));
        let kept = store.keep_received("recipient", file, &[]).await.unwrap();
        let kept = kept.expect("copied");
        assert_eq!(kept.key, format!("recipient/{}", sha(&data)), "{name}");
        assert_eq!(kept.size, data.len() as u64, "{name}");
        // Copied by the backend: no object body read or written through the node.
        let through_node = [&traffic.reads, &traffic.put_bytes, &traffic.multiparts];
        assert_eq!(through_node.map(|c| c.load(SeqCst)), [0, 0, 0], "{name}");
        assert_eq!(traffic.copies.load(SeqCst), 1, "{name}");
        // Kept once; the session's own object is kept as it is.
        let again = store.keep_received("recipient", file, &[]).await.unwrap();
        assert_eq!(again.as_ref(), Some(&kept), "{name}");
        let own = Some((kept.key.as_str(), kept.size));
        let same = store.keep_received("recipient", own, &[]).await.unwrap();
        assert_eq!(same.as_ref(), Some(&kept), "{name}");
        assert_eq!(traffic.copies.load(SeqCst), 1, "{name}");
        // The copy is the recipient's: byte-identical, and it outlives the sender's session.
        b.store.delete_session("sender").await.unwrap();
        let back = b.store.get(&kept.key).await.unwrap().expect("stored");
        assert!(back == data, "{name}: the copy is byte-identical");
        // Gone before it was copied: the bytes in hand when they are the whole content, else nothing.
        let gone = format!("sender/{}", sha(b"small"));
        let small = store
            .keep_received("r2", Some((gone.as_str(), 5)), b"small")
            .await;
        assert_eq!(small.unwrap().unwrap().key, format!("r2/{}", sha(b"small")));
        let none = store.keep_received("r2", Some((sent.key.as_str(), sent.size)), &[]);
        assert_eq!(none.await.unwrap(), None, "{name}");
    }
}

#[tokio::test]
async fn concurrent_large_writes_keep_part_memory_bounded() {
    use std::sync::atomic::Ordering::SeqCst;
    const WRITERS: usize = 8;
    let data: Vec<Vec<u8>> = (0..WRITERS).map(|i| large(&[b'w', i as u8])).collect();
    for b in backends(64 * 1024 * 1024).await {
        let (store, traffic) = b.store.counted();
        let writes = data.iter().map(|d| store.put_stream("many", chunks(d)));
        let stored = futures::future::join_all(writes).await;
        for (written, d) in stored.into_iter().zip(&data) {
            let written = written.unwrap();
            assert_eq!(written.key, format!("many/{}", sha(d)), "{}", b.name);
            let back = b.store.get(&written.key).await.unwrap().expect("stored");
            assert!(back == *d, "{}: byte-identical", b.name);
        }
        // Local parts are bounded per writer; on S3 no part is held at all: each object is streamed
        // from its scratch file in one PUT, past `object_store` (which would need whole parts).
        let peak = traffic.parts_in_flight_max.load(SeqCst);
        match b.store.storage_type() {
            StorageType::Local => {
                let bound = WRITERS * (sink::PARTS_IN_FLIGHT + 1) * sink::LOCAL_PART_SIZE;
                assert!(peak > 0 && peak <= bound as u64, "local: {peak} > {bound}");
            }
            StorageType::S3 => {
                assert_eq!(peak, 0, "s3: parts through object_store");
                assert_eq!(traffic.multiparts.load(SeqCst), 0, "s3: multipart uploads");
                assert_eq!(traffic.put_bytes.load(SeqCst), 0, "s3: bodies in memory");
            }
        }
        let scratch = std::fs::read_dir(b.store.scratch_dir()).map_or(0, |d| d.count());
        assert_eq!(scratch, 0, "{}: scratch files removed", b.name);
    }
}

#[tokio::test]
async fn an_object_past_the_single_put_limit_streams_its_parts_from_scratch() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start().await.expect("moto");
    // 12 MiB past a 6 MiB single-PUT limit: a multipart upload of parts 5 + 5 + 2 MiB.
    let store = store_on(&server_config(&server), dir.path(), 64 * 1024 * 1024)
        .with_streamer_limits(6 * 1024 * 1024, 5 * 1024 * 1024);
    let data = large(b"in parts");
    let stored = store.put_stream("parts", chunks(&data)).await.unwrap();
    assert_eq!(stored.key, format!("parts/{}", sha(&data)));
    assert_eq!(stored.size, data.len() as u64);
    let back = store.get(&stored.key).await.unwrap().expect("stored");
    assert!(back == data, "byte-identical");
    assert_eq!(raw_keys(&store).await, vec![stored.key.clone()]);
    let scratch = std::fs::read_dir(store.scratch_dir()).map_or(0, |d| d.count());
    assert_eq!(scratch, 0, "scratch files removed");
}
