//! Findings of the black-box audit of the sim engine, end to end: a cleared or deleted chat leaves no
//! stored copy (message list, search), reads and clears of unknown chats are 404, a chat read with
//! `messageIds` reads only those, converted video fits 720p, group creates need real people, picture and
//! status media bodies follow the media-body rules, text statuses keep their style, and small validations.

mod resources_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use resources_support::{at, created_session, jid, linked_session, node};
use serde_json::{Value, json};
use wagate_loadtest::harness::Client;

const ALICE: &str = "4915700000001";
const BOB: &str = "4915700000002";
const STRANGER: &str = "4915700000099";
const OTHER: &str = "4915700000098";

async fn inbound(c: &Client, session: &str, from: &str, body: &str) -> String {
    let reply = c
        .post(
            &format!("/api/sim/sessions/{session}/inbound"),
            json!({ "from": jid(from), "type": "text", "body": body }),
        )
        .await
        .expect("inbound");
    assert!(reply.status < 300, "{}", reply.text);
    reply.str("messageId")
}

async fn stored(c: &Client, session: &str, chat: &str) -> usize {
    let path = at(session, &format!("/messages?chatId={chat}"));
    let reply = c.get(&path).await.expect("messages");
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body.as_array().map_or(0, Vec::len)
}

async fn found(c: &Client, session: &str, word: &str) -> i64 {
    let reply = c
        .get(&format!("/api/search?q={word}&sessionId={session}"))
        .await
        .expect("search");
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply.body["total"].as_i64().unwrap_or(-1)
}

/// Polls until `count` stored rows of `chat` are listed (the event path stores inbound messages).
async fn until_stored(c: &Client, session: &str, chat: &str, count: usize) {
    for _ in 0..200 {
        if stored(c, session, chat).await == count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{chat} never held {count} stored messages");
}

fn chat<'a>(list: &'a Value, id: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|c| c["id"] == id)
}

#[tokio::test]
async fn clearing_or_deleting_a_chat_deletes_the_stored_copy() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let (stranger, other) = (jid(STRANGER), jid(OTHER));
    inbound(&c, &alice, STRANGER, "kiwi from the stranger").await;
    inbound(&c, &alice, OTHER, "kiwi from the other").await;
    until_stored(&c, &alice, &stranger, 1).await;
    until_stored(&c, &alice, &other, 1).await;
    assert_eq!(found(&c, &alice, "kiwi").await, 2);

    let clear = c
        .delete(&at(&alice, &format!("/chats/{stranger}/messages")))
        .await
        .expect("clear");
    assert_eq!(clear.status, 200, "{}", clear.text);
    assert_eq!(stored(&c, &alice, &stranger).await, 0);
    assert_eq!(found(&c, &alice, "kiwi").await, 1, "only the other chat's");
    let all = c.get(&at(&alice, "/messages")).await.expect("all");
    assert_eq!(all.body.as_array().map(Vec::len), Some(1), "{}", all.text);

    inbound(&c, &alice, STRANGER, "mango after the clear").await;
    until_stored(&c, &alice, &stranger, 1).await;
    let delete = c
        .post(&at(&alice, "/chats/delete"), json!({ "chatId": stranger }))
        .await
        .expect("delete");
    assert_eq!(delete.status, 200, "{}", delete.text);
    assert_eq!(stored(&c, &alice, &stranger).await, 0);
    assert_eq!(found(&c, &alice, "mango").await, 0);
    assert_eq!(stored(&c, &alice, &other).await, 1, "other chats stay");
}

#[tokio::test]
async fn chat_reads_name_messages_and_unknown_chats_are_404() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let stranger = jid(STRANGER);
    let mut ids = Vec::new();
    for body in ["one", "two", "three"] {
        ids.push(inbound(&c, &alice, STRANGER, body).await);
    }
    let unread = |list: &Value| chat(list, &stranger).map(|s| s["unreadCount"].clone());
    let before = c.get(&at(&alice, "/chats")).await.expect("chats");
    assert_eq!(unread(&before.body), Some(json!(3)), "{}", before.text);
    let read = c
        .post(
            &at(&alice, "/chats/read"),
            json!({ "chatId": stranger, "messageIds": [ids[0]] }),
        )
        .await
        .expect("read one");
    assert_eq!(read.status, 200, "{}", read.text);
    let after = c.get(&at(&alice, "/chats")).await.expect("chats");
    assert_eq!(unread(&after.body), Some(json!(2)), "{}", after.text);

    let ghost = jid("4915700000077");
    let read = c
        .post(&at(&alice, "/chats/read"), json!({ "chatId": ghost }))
        .await
        .expect("read ghost");
    let clear = c
        .delete(&at(&alice, &format!("/chats/{ghost}/messages")))
        .await
        .expect("clear ghost");
    for reply in [&read, &clear] {
        assert_eq!(reply.status, 404, "{}", reply.text);
        assert_eq!(reply.body["message"], format!("Chat {ghost} not found"));
    }
    let list = c.get(&at(&alice, "/chats")).await.expect("chats");
    assert!(chat(&list.body, &ghost).is_none(), "{}", list.text);
}

/// A short test video of `size` (`WxH`), H.264 in MP4.
fn video(dir: &Path, size: &str) -> String {
    let out = dir.join(format!("in-{size}.mp4"));
    let status = Command::new("ffmpeg")
        .args([
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
        ])
        .arg(format!("testsrc=duration=0.5:size={size}:rate=5"))
        .args([
            "-pix_fmt",
            "yuv444p",
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
        ])
        .arg(&out)
        .status()
        .expect("ffmpeg is installed (scripts/test.sh installs Debian's ffmpeg)");
    assert!(status.success());
    base64::engine::general_purpose::STANDARD.encode(std::fs::read(out).expect("video"))
}

/// `(width, height)` of the first video stream of base64 MP4 `data`.
fn dimensions(dir: &Path, data: &str) -> (u64, u64) {
    let path = dir.join("out.mp4");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .expect("base64");
    std::fs::write(&path, bytes).expect("write");
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0", "-show_entries"])
        .args(["stream=width,height", "-of", "json"])
        .arg(&path)
        .output()
        .expect("ffprobe");
    let v: Value = serde_json::from_slice(&out.stdout).expect("ffprobe json");
    let s = &v["streams"][0];
    (
        s["width"].as_u64().unwrap_or(0),
        s["height"].as_u64().unwrap_or(0),
    )
}

#[tokio::test]
async fn converted_video_fits_720p_with_even_sides_and_is_never_upscaled() {
    let dir = tempfile::tempdir().expect("dir");
    let node = node().await;
    let c = node.client();
    let id = created_session(&c, "convert").await;
    for (size, want) in [
        ("1920x1080", (1280, 720)),
        ("1080x1920", (720, 1280)),
        ("321x241", (320, 240)),
    ] {
        let reply = c
            .post(
                &format!("/api/sessions/{id}/media/convert/video"),
                json!({ "base64": video(dir.path(), size), "mimetype": "video/mp4" }),
            )
            .await
            .expect("convert");
        assert_eq!(reply.status, 200, "{size}: {}", reply.text);
        let got = dimensions(dir.path(), reply.body["base64"].as_str().unwrap_or(""));
        assert_eq!(got, want, "{size}");
    }
}

#[tokio::test]
async fn groups_are_created_with_people_only() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    linked_session(&c, "bob", BOB).await;
    let create = |participants: Value| {
        let c = c.clone();
        let path = at(&alice, "/groups");
        async move {
            c.post(
                &path,
                json!({ "name": "Team", "participants": participants }),
            )
            .await
            .expect("create")
        }
    };
    for participants in [
        json!(["120363000000000001@newsletter"]),
        json!(["120363000000000002@g.us"]),
        json!([jid(BOB), "status@broadcast"]),
        json!([jid(ALICE)]),
    ] {
        let reply = create(participants.clone()).await;
        assert_eq!(reply.status, 400, "{participants}: {}", reply.text);
    }
    let made = create(json!([jid(ALICE), jid(BOB)])).await;
    assert_eq!(made.status, 201, "{}", made.text);
    let group = made.str("id");

    let settings = at(&alice, &format!("/groups/{group}/settings"));
    let odd = c
        .put(&settings, json!({ "ephemeralSeconds": 12345 }))
        .await
        .expect("settings");
    assert_eq!(odd.status, 400, "{}", odd.text);
    let week = c
        .put(&settings, json!({ "ephemeralSeconds": 604800 }))
        .await
        .expect("settings");
    assert_eq!(week.status, 200, "{}", week.text);

    let picture = at(&alice, &format!("/groups/{group}/picture"));
    for body in [
        json!({ "base64": "data:text/plain;base64,aGk=" }),
        json!({}),
        json!({ "base64": "aGk=" }),
        json!({ "base64": "aGk=", "mimetype": "text/plain" }),
    ] {
        let reply = c.put(&picture, body.clone()).await.expect("picture");
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
    }
    let ok = c
        .put(
            &picture,
            json!({ "base64": PNG_B64, "mimetype": "image/png" }),
        )
        .await
        .expect("picture");
    assert_eq!(ok.status, 200, "{}", ok.text);
    // The group picture shares the profile picture's media-body rules.
    refuses_picture_bodies(&c, &picture).await;
}

/// The 8-byte PNG signature and the start of its IHDR chunk: bytes `infer` types as image/png.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUg==";

/// The bodies a send's media-body rules refuse (both sources, a data: URL, a mimetype-less base64), and
/// base64 whose bytes are no image, each 400 naming its rule.
async fn refuses_picture_bodies(c: &Client, picture: &str) {
    let png = "image/png";
    for (body, message) in [
        (
            json!({ "url": "https://example.com/a.png", "base64": PNG_B64, "mimetype": png }),
            "exactly one of url or base64 is required",
        ),
        (
            json!({ "base64": format!("data:image/png;base64,{PNG_B64}"), "mimetype": png }),
            "base64 must be raw base64 without a data: URL prefix",
        ),
        (
            json!({ "base64": format!("data:image/png;base64,{PNG_B64}") }),
            "mimetype is required with base64",
        ),
        (
            json!({ "base64": "aGVsbG8=", "mimetype": png }),
            "the picture must be an image (image/*): its bytes show no known image type",
        ),
        (
            json!({ "base64": "JVBERi0xLjQK", "mimetype": png }),
            "the picture must be an image (image/*), not application/pdf (detected from the bytes)",
        ),
    ] {
        let reply = c.put(picture, body.clone()).await.expect("picture");
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
        assert_eq!(reply.body["message"], message, "{body}");
    }
}

#[tokio::test]
async fn profile_status_call_and_label_validations() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    linked_session(&c, "bob", BOB).await;

    let profile = at(&alice, "/profile/picture");
    for body in [
        json!({ "base64": "data:text/plain;base64,aGk=" }),
        json!({}),
        json!({ "base64": "aGk=" }),
        json!({ "base64": "aGk=", "mimetype": "text/plain" }),
    ] {
        let reply = c.put(&profile, body.clone()).await.expect("picture");
        assert_eq!(reply.status, 400, "{body}: {}", reply.text);
    }
    refuses_picture_bodies(&c, &profile).await;
    let ok = c
        .put(
            &profile,
            json!({ "base64": PNG_B64, "mimetype": "image/png" }),
        )
        .await
        .expect("picture");
    assert_eq!(ok.status, 200, "{}", ok.text);
    let long = c
        .put(
            &at(&alice, "/profile/name"),
            json!({ "name": "n".repeat(26) }),
        )
        .await
        .expect("name");
    assert_eq!(long.status, 400, "{}", long.text);
    let longest = c
        .put(
            &at(&alice, "/profile/name"),
            json!({ "name": "n".repeat(25) }),
        )
        .await
        .expect("name");
    assert_eq!(longest.status, 200, "{}", longest.text);

    let both = c
        .post(
            &at(&alice, "/status/send-image"),
            json!({ "image": { "url": "https://example.com/a.png" }, "url": "https://example.com/b.png",
                    "mimetype": "image/png", "recipients": [jid(BOB)] }),
        )
        .await
        .expect("image");
    assert_eq!(both.status, 400, "{}", both.text);

    let posted = c
        .post(
            &at(&alice, "/status/send-text"),
            json!({ "text": "styled", "recipients": [jid(BOB)], "backgroundColor": "#ff8800", "font": 7 }),
        )
        .await
        .expect("text status");
    assert_eq!(posted.status, 201, "{}", posted.text);
    let plain = c
        .post(
            &at(&alice, "/status/send-text"),
            json!({ "text": "plain", "recipients": [jid(BOB)] }),
        )
        .await
        .expect("text status");
    assert_eq!(plain.status, 201, "{}", plain.text);
    let list = c.get(&at(&alice, "/status")).await.expect("statuses");
    let find = |id: String| {
        list.body["statuses"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["id"] == id.as_str()).cloned())
            .unwrap_or_default()
    };
    let styled = find(posted.str("statusId"));
    assert_eq!(styled["backgroundColor"], "#ff8800", "{}", list.text);
    assert_eq!(styled["font"], 7, "{}", list.text);
    let unstyled = find(plain.str("statusId"));
    assert!(unstyled.get("backgroundColor").is_none(), "{}", list.text);
    assert!(unstyled.get("font").is_none(), "{}", list.text);

    for start in [json!(1.5), json!(-1)] {
        let reply = c
            .post(
                &at(&alice, "/calls/link"),
                json!({ "type": "audio", "startTime": start }),
            )
            .await
            .expect("link");
        assert_eq!(reply.status, 400, "{start}: {}", reply.text);
        assert_eq!(
            reply.body["message"],
            "startTime must be epoch milliseconds"
        );
    }
    let label = c
        .put(&at(&alice, "/labels/1"), json!({ "name": "" }))
        .await
        .expect("label");
    assert_eq!(label.status, 400, "{}", label.text);
}

#[tokio::test]
async fn label_ids_are_tokens_and_names_are_capped() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let long_id = "1".repeat(65);
    // Path segments are percent-decoded: %2F is a '/', %20 a space.
    for id in ["a%2Fb", "%202", "2%20", "%20", "l.1", long_id.as_str()] {
        let reply = c
            .put(
                &at(&alice, &format!("/labels/{id}")),
                json!({ "name": "VIP" }),
            )
            .await
            .expect("label");
        assert_eq!(reply.status, 400, "{id}: {}", reply.text);
        assert!(
            reply.str("message").starts_with("labelId must be 1-64"),
            "{id}: {}",
            reply.text
        );
    }
    let too_long = c
        .put(&at(&alice, "/labels/7"), json!({ "name": "n".repeat(101) }))
        .await
        .expect("label");
    assert_eq!(too_long.status, 400, "{}", too_long.text);
    assert_eq!(
        too_long.body["message"],
        "name must be at most 100 characters"
    );
    let longest = c
        .put(
            &at(&alice, &format!("/labels/{}", "9".repeat(64))),
            json!({ "name": "n".repeat(100), "color": 3 }),
        )
        .await
        .expect("label");
    assert_eq!(longest.status, 200, "{}", longest.text);
    let token = c
        .put(&at(&alice, "/labels/team_a-1"), json!({ "name": "Team A" }))
        .await
        .expect("label");
    assert_eq!(token.status, 200, "{}", token.text);
    assert_eq!(token.body["id"], "team_a-1", "{}", token.text);
    let nameless = c
        .put(&at(&alice, "/labels/8"), json!({ "color": 2 }))
        .await
        .expect("label");
    assert_eq!(nameless.status, 400, "{}", nameless.text);
    assert_eq!(
        nameless.body["message"],
        "name is required to create a label"
    );
    let recoloured = c
        .put(&at(&alice, "/labels/team_a-1"), json!({ "color": 5 }))
        .await
        .expect("label");
    assert_eq!(recoloured.status, 200, "{}", recoloured.text);
}

#[tokio::test]
async fn a_contacts_presence_is_known_only_once_subscribed() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    linked_session(&c, "bob", BOB).await;
    let read = at(&alice, &format!("/presence/{}", jid(BOB)));
    let before = c.get(&read).await.expect("presence");
    assert_eq!(before.status, 200, "{}", before.text);
    assert!(before.body.is_null(), "never subscribed: {}", before.text);
    let subscribed = c
        .post(
            &at(&alice, "/presence/subscribe"),
            json!({ "chatId": jid(BOB) }),
        )
        .await
        .expect("subscribe");
    assert_eq!(subscribed.status, 200, "{}", subscribed.text);
    // The subscription's first report (the network answers one at once) arrives as an event; the read
    // answers it from then on.
    let after = reported(&c, &read).await;
    assert_eq!(after["chatId"], jid(BOB).as_str(), "{after}");
    assert!(after["participants"][0]["state"].is_string(), "{after}");

    // A group has no presence subscription of its own: its members' chat states report it, so a
    // subscribe alone leaves its read null.
    let group = c
        .post(
            &at(&alice, "/groups"),
            json!({ "name": "presence", "participants": [jid(BOB)] }),
        )
        .await
        .expect("group");
    assert_eq!(group.status, 201, "{}", group.text);
    let gid = group.str("id");
    let read = at(&alice, &format!("/presence/{gid}"));
    c.post(&at(&alice, "/presence/subscribe"), json!({ "chatId": gid }))
        .await
        .expect("subscribe");
    let after = c.get(&read).await.expect("presence");
    assert_eq!(after.status, 200, "{}", after.text);
    assert!(after.body.is_null(), "nothing reported: {}", after.text);
}

/// The presence read once it answers non-null (a report arrived), or the last null after a while.
async fn reported(c: &Client, read: &str) -> Value {
    for _ in 0..100 {
        let reply = c.get(read).await.expect("presence");
        if !reply.body.is_null() {
            return reply.body;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Value::Null
}
