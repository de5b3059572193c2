//! Media conversion against a real node and the system ffmpeg (Debian's package; `scripts/test.sh` installs
//! it): a generated tone becomes an OGG/Opus voice note and a generated test video an MP4 (H.264 + AAC,
//! moov before mdat), both checked with ffprobe; disabled and unrunnable conversion, the output cap, the
//! timeout, a saturated queue and refused inputs; and a `ptt` send of non-Opus audio is converted.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use wagate_loadtest::harness::{Client, Node, NodeOptions};

fn options() -> NodeOptions {
    NodeOptions::new(env!("CARGO_BIN_EXE_wagate"))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Runs ffmpeg with lavfi sources into `out`.
fn generate(dir: &Path, name: &str, args: &[&str]) -> Vec<u8> {
    let out = dir.join(name);
    let status = Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y"])
        .args(args)
        .arg(&out)
        .status()
        .expect("ffmpeg is installed (scripts/test.sh installs Debian's ffmpeg)");
    assert!(status.success());
    std::fs::read(out).unwrap()
}

fn tone(dir: &Path) -> Vec<u8> {
    generate(
        dir,
        "tone.wav",
        &["-f", "lavfi", "-i", "sine=frequency=440:duration=3"],
    )
}

fn test_video(dir: &Path) -> Vec<u8> {
    generate(
        dir,
        "test.avi",
        &[
            "-f",
            "lavfi",
            "-i",
            "testsrc=duration=2:size=320x240:rate=15",
            "-f",
            "lavfi",
            "-i",
            "sine=frequency=300:duration=2",
            "-c:v",
            "mpeg4",
            "-c:a",
            "pcm_s16le",
            "-shortest",
        ],
    )
}

/// ffprobe's view of a file: `(format_name, duration, [codec_name per stream])`.
fn probe(path: &Path) -> (String, f64, Vec<String>) {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_format",
            "-show_streams",
            "-of",
            "json",
        ])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let codecs = v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["codec_name"].as_str().unwrap().to_string())
        .collect();
    let duration = v["format"]["duration"].as_str().unwrap().parse().unwrap();
    (
        v["format"]["format_name"].as_str().unwrap().to_string(),
        duration,
        codecs,
    )
}

async fn session(c: &Client) -> String {
    let created = c
        .post("/api/sessions", json!({"name": "convert-s"}))
        .await
        .unwrap();
    assert_eq!(created.status, 201, "{}", created.text);
    created.str("id")
}

fn save(dir: &Path, name: &str, reply: &Value) -> PathBuf {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(reply["base64"].as_str().unwrap())
        .unwrap();
    assert_eq!(reply["bytes"].as_u64(), Some(bytes.len() as u64));
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[tokio::test]
async fn a_tone_becomes_a_voice_note_and_a_test_video_a_phone_mp4() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(options()).await.unwrap();
    let c = node.client();
    let id = session(&c).await;
    let available = c
        .get(&format!("/api/sessions/{id}/media/convert"))
        .await
        .unwrap();
    assert_eq!(available.status, 200, "{}", available.text);
    assert_eq!(available.body, json!({"available": true}));

    let voice = c
        .post(
            &format!("/api/sessions/{id}/media/convert/voice"),
            json!({"base64": b64(&tone(dir.path())), "mimetype": "audio/wav"}),
        )
        .await
        .unwrap();
    assert_eq!(voice.status, 200, "{}", voice.text);
    assert_eq!(voice.body["mimetype"], "audio/ogg; codecs=opus");
    let (format, duration, codecs) = probe(&save(dir.path(), "voice.ogg", &voice.body));
    assert_eq!(format, "ogg");
    assert_eq!(codecs, ["opus"]);
    assert!((duration - 3.0).abs() < 0.2, "{duration}");

    let video = c
        .post(
            &format!("/api/sessions/{id}/media/convert/video"),
            json!({"base64": b64(&test_video(dir.path())), "mimetype": "video/x-msvideo"}),
        )
        .await
        .unwrap();
    assert_eq!(video.status, 200, "{}", video.text);
    assert_eq!(video.body["mimetype"], "video/mp4");
    let path = save(dir.path(), "video.mp4", &video.body);
    let (format, duration, mut codecs) = probe(&path);
    assert!(format.contains("mp4"), "{format}");
    codecs.sort();
    assert_eq!(codecs, ["aac", "h264"]);
    assert!((duration - 2.0).abs() < 0.25, "{duration}");
    let bytes = std::fs::read(&path).unwrap();
    let at = |tag: &[u8]| bytes.windows(4).position(|w| w == tag).unwrap();
    assert!(at(b"moov") < at(b"mdat"), "faststart puts the index first");

    // Input refusals are 400: a URL the outbound-address guard blocks, garbage, both or neither source.
    for body in [
        json!({"url": "http://127.0.0.1:1/tone.wav"}),
        json!({"base64": b64(b"not media at all"), "mimetype": "audio/wav"}),
        json!({}),
        json!({"url": "http://example.invalid/a", "base64": "AAAA"}),
    ] {
        let reply = c
            .post(
                &format!("/api/sessions/{id}/media/convert/voice"),
                body.clone(),
            )
            .await
            .unwrap();
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert!(
            !reply.text.contains(".incoming") && !reply.text.contains("/tmp/"),
            "no server path: {}",
            reply.text
        );
    }
    let unknown = c
        .post(
            "/api/sessions/99999999-9999-4999-8999-999999999999/media/convert/voice",
            json!({"base64": "AAAA"}),
        )
        .await
        .unwrap();
    assert_eq!(unknown.status, 404);
}

#[tokio::test]
async fn disabled_unrunnable_and_capped_conversions() {
    let dir = tempfile::tempdir().unwrap();
    let audio = b64(&tone(dir.path()));
    let body = json!({"base64": audio, "mimetype": "audio/wav"});
    for (key, value) in [
        ("MEDIA_CONVERSION_ENABLED", "false"),
        ("FFMPEG_PATH", "/nonexistent/ffmpeg"),
    ] {
        let node = Node::start(options().env(key, value)).await.unwrap();
        let c = node.client();
        let id = session(&c).await;
        let available = c
            .get(&format!("/api/sessions/{id}/media/convert"))
            .await
            .unwrap();
        assert_eq!(available.body, json!({"available": false}), "{key}");
        let reply = c
            .post(
                &format!("/api/sessions/{id}/media/convert/voice"),
                body.clone(),
            )
            .await
            .unwrap();
        assert_eq!(reply.status, 503, "{key}: {}", reply.text);
        // A malformed request is the client's error whether or not conversion could run.
        for bad in [
            json!({}),
            json!({"url": "ftp://x/a.wav"}),
            json!({"base64": "!!!"}),
        ] {
            let reply = c
                .post(&format!("/api/sessions/{id}/media/convert/voice"), bad)
                .await
                .unwrap();
            assert_eq!(reply.status, 400, "{key}: {}", reply.text);
        }
    }
    let node = Node::start(options().env("MEDIA_CONVERSION_MAX_OUTPUT_BYTES", "1000"))
        .await
        .unwrap();
    let c = node.client();
    let id = session(&c).await;
    let reply = c
        .post(&format!("/api/sessions/{id}/media/convert/voice"), body)
        .await
        .unwrap();
    assert_eq!(reply.status, 413, "{}", reply.text);
    assert!(reply.text.contains("MEDIA_CONVERSION_MAX_OUTPUT_BYTES"));
}

#[tokio::test]
async fn a_hung_conversion_times_out_and_a_full_queue_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hung-ffmpeg");
    std::fs::write(
        &script,
        "#!/bin/sh\n[ \"$1\" = -version ] && exit 0\nexec sleep 30\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let node = Node::start(
        options()
            .env("FFMPEG_PATH", script.display().to_string())
            .env("MEDIA_CONVERSION_TIMEOUT_MS", "1500")
            .env("MEDIA_CONVERSION_CONCURRENCY", "1")
            .env("MEDIA_CONVERSION_QUEUE", "0"),
    )
    .await
    .unwrap();
    let c = node.client();
    let id = session(&c).await;
    let path = format!("/api/sessions/{id}/media/convert/voice");
    let body = json!({"base64": b64(b"whatever"), "mimetype": "audio/wav"});
    let first = {
        let (c, path, body) = (c.clone(), path.clone(), body.clone());
        tokio::spawn(async move { c.post(&path, body).await.unwrap() })
    };
    // Let the first take the slot before the second knocks (ordering, not a timing assertion).
    tokio::time::sleep(Duration::from_millis(300)).await;
    // While the first holds the only slot, a second is refused at once.
    let mut refused = None;
    for _ in 0..100 {
        let reply = c.post(&path, body.clone()).await.unwrap();
        if reply.status == 503 && reply.text.contains("queue is full") {
            refused = Some(reply);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused.is_some(), "a saturated queue answers 503");
    let timed_out = first.await.unwrap();
    assert_eq!(timed_out.status, 503, "{}", timed_out.text);
    assert!(timed_out.text.contains("timed out"), "{}", timed_out.text);
}

#[tokio::test]
async fn a_ptt_send_of_non_opus_audio_is_converted_to_a_voice_note() {
    let dir = tempfile::tempdir().unwrap();
    let node = support::node().await;
    let c = node.client();
    let id = support::ready_session(&c, "ptt-convert").await;
    let sent = c
        .post(
            &format!("/api/sessions/{id}/messages/send-audio"),
            json!({"chatId": "15550002222@c.us", "base64": b64(&tone(dir.path())),
                   "mimetype": "audio/wav", "ptt": true}),
        )
        .await
        .unwrap();
    assert_eq!(sent.status, 201, "{}", sent.text);
    let messages = c
        .get(&format!("/api/sessions/{id}/messages?limit=1"))
        .await
        .unwrap();
    let media = &messages.body[0]["media"];
    assert_eq!(
        media["mimetype"], "audio/ogg; codecs=opus",
        "{}",
        messages.text
    );
    assert_eq!(messages.body[0]["type"], "voice");
}
