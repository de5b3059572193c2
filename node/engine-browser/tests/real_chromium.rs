//! The browser engine against a real (Debian) Chromium, offline: a fake WhatsApp Web served on loopback
//! by the test, whose `window.WPP` (tests/fake/fake-wpp.js, injected in place of the wa-js bundle) runs a
//! tiny simulated backend. The engine's own launch, injection, calls, pushes, reload and crash handling
//! and teardown are what run.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
#[path = "fake/server.rs"]
mod fake_server;
use fake_server::{FAKE_WPP, FakeWhatsApp, fake_whatsapp};
use wagate_engine_browser::{
    BrowserConfig, BrowserError, BrowserEvent, BrowserSession, Launcher, SessionOptions,
    default_chromium_path, procs, profile,
};

/// The fake's account that echoes what it is sent.
const ECHO: &str = "15550007777@c.us";
/// Generous: the machine is shared; nothing here asserts a duration.
const PATIENCE: Duration = Duration::from_secs(60);

fn launcher(url: &str, grace: Duration) -> Launcher {
    let chromium = std::env::var_os("CHROMIUM_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(default_chromium_path);
    assert!(
        chromium.exists(),
        "Chromium is missing at {} (scripts/test.sh installs Debian's chromium)",
        chromium.display()
    );
    Launcher::new(BrowserConfig {
        chromium_path: chromium,
        bundle_path: PathBuf::from(FAKE_WPP),
        url: url.to_string(),
        reinject_grace: grace,
        auth_wait: Duration::from_millis(500),
        watch_interval: Duration::from_millis(100),
        ..BrowserConfig::default()
    })
    .unwrap()
}

fn session(
    launcher: &Launcher,
    dir: &Path,
    id: &str,
) -> (BrowserSession, UnboundedReceiver<BrowserEvent>) {
    let (tx, rx) = unbounded_channel();
    let opts = SessionOptions {
        session_id: id.to_string(),
        profile_dir: dir.join(id),
        proxy_url: None,
    };
    (BrowserSession::new(launcher.clone(), opts, tx), rx)
}

async fn next_event(rx: &mut UnboundedReceiver<BrowserEvent>) -> BrowserEvent {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("an event in time")
        .expect("the session keeps its channel")
}

/// Calls until `done` accepts the answer (the page heals in its own time).
async fn call_until(
    s: &BrowserSession,
    name: &str,
    args: &[Value],
    done: impl Fn(&Result<Value, BrowserError>) -> bool,
) -> Result<Value, BrowserError> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let answer = s.call(name, args).await;
        if done(&answer) || tokio::time::Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn link_by_qr(fake: &FakeWhatsApp, rx: &mut UnboundedReceiver<BrowserEvent>) {
    match next_event(rx).await {
        BrowserEvent::Qr(payload) => assert!(payload.starts_with("2@fake-"), "{payload}"),
        other => panic!("expected a QR first, got {other:?}"),
    }
    fake.scanned.store(true, Ordering::SeqCst);
    match next_event(rx).await {
        BrowserEvent::Authenticated(me) => {
            assert_eq!(me.id.as_deref(), Some("15550001111@c.us"));
            assert_eq!(me.push_name.as_deref(), Some("Fake Phone"));
        }
        other => panic!("expected Authenticated, got {other:?}"),
    }
    assert_eq!(next_event(rx).await, BrowserEvent::Ready);
}

async fn ready_without_qr(rx: &mut UnboundedReceiver<BrowserEvent>) {
    assert!(matches!(
        next_event(rx).await,
        BrowserEvent::Authenticated(_)
    ));
    assert_eq!(next_event(rx).await, BrowserEvent::Ready);
}

fn assert_no_process_left(s: &BrowserSession, seen: &[u32]) {
    assert!(s.processes().is_empty(), "left: {:?}", s.processes());
    let alive: Vec<_> = seen.iter().filter(|p| procs::is_alive(**p)).collect();
    assert!(alive.is_empty(), "still alive: {alive:?}");
}

fn send_args(to: &str, body: &str) -> Vec<Value> {
    vec![json!(to), json!(body), json!({})]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_sends_receives_heals_reloads_and_crashes_then_stops_clean() {
    let fake = fake_whatsapp().await;
    let dir = tempfile::tempdir().unwrap();
    let launcher = launcher(&fake.url, Duration::from_secs(10));
    let (s, mut rx) = session(&launcher, dir.path(), "s1");

    assert_eq!(s.call("chats", &[]).await, Err(BrowserError::NotReady));
    s.start().await.unwrap();
    link_by_qr(&fake, &mut rx).await;

    // Send and receive: the fake echoes what is sent to its echo account.
    let sent = s.call("sendText", &send_args(ECHO, "hello")).await.unwrap();
    assert!(
        sent["id"]
            .as_str()
            .unwrap()
            .starts_with("true_15550007777@c.us_")
    );
    match next_event(&mut rx).await {
        BrowserEvent::Message(m) => {
            assert_eq!(m["body"], "echo: hello");
            assert_eq!(m["from"], ECHO);
            assert_eq!(m["fromMe"], false);
        }
        other => panic!("expected the echo, got {other:?}"),
    }
    let chats = s.call("chats", &[]).await.unwrap();
    assert_eq!(chats[0]["id"], ECHO);

    // A reload in the middle of a send: 409 (Reloading), then the same route works again, no event.
    let during = s.call("sendText", &send_args("a@c.us", "/reload")).await;
    assert_eq!(during, Err(BrowserError::Reloading));
    let after = call_until(&s, "sendText", &send_args("a@c.us", "again"), |r| {
        r != &Err(BrowserError::Reloading)
    })
    .await;
    assert!(after.is_ok(), "{after:?}");

    // A renderer crash: 503 (PageDead) while a fresh page loads, then calls work again.
    s.crash_renderer_for_test();
    let dead = call_until(&s, "chats", &[], |r| r == &Err(BrowserError::PageDead)).await;
    assert_eq!(dead, Err(BrowserError::PageDead));
    let healed = call_until(&s, "chats", &[], |r| r.is_ok()).await;
    assert!(healed.is_ok(), "{healed:?}");
    let leftover = rx.try_recv();
    assert!(
        leftover.is_err(),
        "a reload or a recovered crash emits nothing: {leftover:?}"
    );

    let mem = s.memory();
    assert!(mem.pss_bytes > 0 && mem.rss_bytes >= mem.pss_bytes);
    let seen = s.processes();
    assert!(seen.len() > 1, "a browser and its helpers: {seen:?}");
    s.stop().await.unwrap();
    assert_no_process_left(&s, &seen);

    // The profile is the credential: a restart links without a QR, and so does another "node" that
    // restores the archive into its own directory.
    let archive = profile::archive(s.profile_dir()).unwrap();
    s.start().await.unwrap();
    ready_without_qr(&mut rx).await;
    s.kill().await.unwrap();
    assert!(s.processes().is_empty());

    let other = tempfile::tempdir().unwrap();
    profile::restore(&other.path().join("s1"), &archive).unwrap();
    let (taken, mut rx2) = session(&launcher, other.path(), "s1");
    taken.start().await.unwrap();
    ready_without_qr(&mut rx2).await;
    taken.stop().await.unwrap();
    assert!(taken.processes().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_never_heals_is_a_disconnect_after_three_grace_windows() {
    let fake = fake_whatsapp().await;
    fake.scanned.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let launcher = launcher(&fake.url, Duration::from_millis(400));
    let (s, mut rx) = session(&launcher, dir.path(), "s2");
    s.start().await.unwrap();
    // Scanned already: the QR shows, then the phone links at once.
    assert!(matches!(next_event(&mut rx).await, BrowserEvent::Qr(_)));
    ready_without_qr(&mut rx).await;

    // "/break" moves the page where WPP never gets ready: 409 first, then Disconnected.
    let during = s.call("sendText", &send_args("a@c.us", "/break")).await;
    assert_eq!(during, Err(BrowserError::Reloading));
    assert_eq!(s.call("chats", &[]).await, Err(BrowserError::Reloading));
    match next_event(&mut rx).await {
        BrowserEvent::Disconnected(reason) => assert!(reason.contains("three grace windows")),
        other => panic!("expected Disconnected, got {other:?}"),
    }
    assert_eq!(s.call("chats", &[]).await, Err(BrowserError::NotReady));
    let seen = s.processes();
    s.kill().await.unwrap();
    assert_no_process_left(&s, &seen);
}

#[tokio::test]
async fn a_missing_chromium_is_a_clear_launch_error() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = Launcher::new(BrowserConfig {
        chromium_path: dir.path().join("no-chromium"),
        bundle_path: PathBuf::from(FAKE_WPP),
        ..BrowserConfig::default()
    })
    .unwrap();
    let (s, _rx) = session(&launcher, dir.path(), "s3");
    match s.start().await {
        Err(BrowserError::Launch(message)) => assert!(message.contains("Chromium not found")),
        other => panic!("expected a launch error, got {other:?}"),
    }
}

fn ok(answer: Result<Value, BrowserError>) -> Value {
    match answer {
        Ok(value) => value,
        Err(err) => panic!("the facade refused: {err:?}"),
    }
}

/// The facade's families beyond messaging, through the real engine and page: groups, channels, status
/// posts, presence, chat actions, label reads, contacts, and the facade's own error codes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_facade_runs_groups_channels_statuses_presence_and_chat_actions() {
    const GROUP: &str = "120363000000000001@g.us";
    const CHANNEL: &str = "120363000000000002@newsletter";
    const ANN: &str = "15550002222@c.us";
    let fake = fake_whatsapp().await;
    fake.scanned.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let launcher = launcher(&fake.url, Duration::from_secs(10));
    let (s, mut rx) = session(&launcher, dir.path(), "s4");
    s.start().await.unwrap();
    assert!(matches!(next_event(&mut rx).await, BrowserEvent::Qr(_)));
    ready_without_qr(&mut rx).await;

    // Groups: list, detail, participants (one refused by the "network"), settings, invite, requests.
    let groups = ok(s.call("groups", &[]).await);
    assert_eq!(groups[0]["id"], GROUP);
    assert_eq!(groups[0]["participantsCount"], 2);
    assert_eq!(groups[0]["isAdmin"], true);
    let added = ok(s
        .call(
            "participants",
            &[
                json!(GROUP),
                json!("add"),
                json!(["15550005555@c.us", "15550009990@c.us"]),
            ],
        )
        .await);
    assert_eq!(added[0]["success"], true);
    assert_eq!(
        (added[1]["success"].clone(), added[1]["status"].clone()),
        (json!(false), json!(403))
    );
    ok(s.call(
        "participants",
        &[json!(GROUP), json!("promote"), json!([ANN])],
    )
    .await);
    let info = ok(s.call("group", &[json!(GROUP)]).await);
    assert_eq!(info["participants"].as_array().unwrap().len(), 3);
    let ann = info["participants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == ANN)
        .cloned();
    assert_eq!(ann.unwrap()["isAdmin"], true);
    ok(s.call("groupSubject", &[json!(GROUP), json!("Renamed")])
        .await);
    let settings = ok(s
        .call(
            "updateGroupSettings",
            &[
                json!(GROUP),
                json!({"announce": true, "ephemeralSeconds": 86400}),
            ],
        )
        .await);
    assert_eq!(
        (
            settings["announce"].clone(),
            settings["ephemeralSeconds"].clone()
        ),
        (json!(true), json!(86400))
    );
    let admins_only = ok(s
        .call(
            "updateGroupSettings",
            &[json!(GROUP), json!({"adminAddOnly": true})],
        )
        .await);
    assert_eq!(admins_only["adminAddOnly"], json!(true));
    let reread = ok(s.call("groupSettings", &[json!(GROUP)]).await);
    assert_eq!(
        (reread["adminAddOnly"].clone(), reread["announce"].clone()),
        (json!(true), json!(true))
    );
    let code = ok(s.call("inviteCode", &[json!(GROUP)]).await);
    let preview = ok(s.call("joinInfo", &[code]).await);
    assert_eq!(preview["subject"], "Renamed");
    let requests = ok(s.call("membershipRequests", &[json!(GROUP)]).await);
    assert_eq!(requests.as_array().unwrap().len(), 2);
    let approved = ok(s
        .call(
            "answerMembership",
            &[json!(GROUP), json!(true), Value::Null],
        )
        .await);
    assert_eq!(approved.as_array().unwrap().len(), 2);
    assert_eq!(
        ok(s.call("membershipRequests", &[json!(GROUP)]).await),
        json!([])
    );
    // wa-js's own error codes arrive sorted: an unknown group is not_found.
    let missing = s.call("group", &[json!("120363999999999999@g.us")]).await;
    assert!(
        matches!(missing, Err(BrowserError::Page { ref code, .. }) if code == "not_found"),
        "{missing:?}"
    );

    // Channels: list, create, detail, posts, mute, unfollow.
    let channels = ok(s.call("channels", &[]).await);
    assert_eq!(
        (channels[0]["id"].clone(), channels[0]["isOwner"].clone()),
        (json!(CHANNEL), json!(true))
    );
    let created = ok(s
        .call_unbounded("createChannel", &[json!("Mine"), json!("about")])
        .await);
    let mine = created["id"].as_str().unwrap().to_string();
    assert!(mine.ends_with("@newsletter"));
    assert_eq!(
        ok(s.call("channel", &[json!(mine)]).await)["description"],
        "about"
    );
    ok(s.call("sendText", &send_args(CHANNEL, "channel news"))
        .await);
    let posts = ok(s
        .call("channelMessages", &[json!(CHANNEL), json!(10)])
        .await);
    assert_eq!(posts[0]["body"], "channel news");
    ok(s.call("muteChannel", &[json!(CHANNEL), json!(true)]).await);
    assert_eq!(
        ok(s.call("channel", &[json!(CHANNEL)]).await)["isMuted"],
        true
    );
    ok(s.call("deleteChannel", &[json!(mine)]).await);
    assert_eq!(
        ok(s.call("channels", &[]).await).as_array().unwrap().len(),
        1
    );

    // Status posts: text and image (unbounded calls), list, delete; a contact's statuses.
    let text = ok(s
        .call_unbounded(
            "postStatus",
            &[json!("text"), json!("hello status"), json!({})],
        )
        .await);
    let image = ok(s
        .call_unbounded(
            "postStatus",
            &[
                json!("image"),
                json!("data:image/png;base64,AAAA"),
                json!({"caption": "pic"}),
            ],
        )
        .await);
    let mine = ok(s.call("myStatuses", &[]).await);
    assert_eq!(mine.as_array().unwrap().len(), 2);
    assert_eq!(mine[1]["hasMedia"], true);
    assert_eq!(mine[0]["contact"], "15550001111@c.us");
    ok(s.call("deleteStatus", &[text["id"].clone()]).await);
    let left = ok(s.call("myStatuses", &[]).await);
    assert_eq!(left[0]["id"], image["id"]);
    assert_eq!(
        ok(s.call("contactStatuses", &[json!(ANN)]).await)[0]["caption"],
        "beach"
    );

    // Presence: nothing heard before a subscription; the subscribed contact's state is read back.
    assert_eq!(ok(s.call("presence", &[json!(ANN)]).await), Value::Null);
    ok(s.call("setPresence", &[json!(true)]).await);
    ok(s.call("subscribePresence", &[json!(ANN)]).await);
    let heard = call_until(
        &s,
        "presence",
        &[json!(ANN)],
        |r| matches!(r, Ok(v) if !v.is_null()),
    )
    .await;
    assert_eq!(ok(heard)[0]["state"], "available");

    // Chat actions: archive, pin, mute (indefinitely), typing; the chat list shows them.
    ok(s.call("archiveChat", &[json!(ANN), json!(true)]).await);
    ok(s.call("pinChat", &[json!(ANN), json!(true)]).await);
    ok(s.call("muteChat", &[json!(ANN), json!(0)]).await);
    ok(s.call("chatState", &[json!(ANN), json!("typing")]).await);
    let chats = ok(s.call("chats", &[]).await);
    let chat = chats
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == ANN)
        .cloned()
        .unwrap();
    assert_eq!(
        (
            chat["archived"].clone(),
            chat["pinned"].clone(),
            chat["muted"].clone(),
            chat["muteExpiration"].clone()
        ),
        (json!(true), json!(true), json!(true), json!(0))
    );
    ok(s.call("muteChat", &[json!(ANN), Value::Null]).await);
    let unmuted = ok(s.call("chats", &[]).await);
    assert!(
        unmuted
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == ANN && c["muted"] == false)
    );

    // Label reads, contacts and blocking, message actions (forward, star, poll vote).
    assert_eq!(
        ok(s.call("label", &[json!("1")]).await)["name"],
        "Customers"
    );
    assert_eq!(ok(s.call("labelChats", &[json!("1")]).await)[0]["id"], ANN);
    assert_eq!(ok(s.call("chatLabels", &[json!(ANN)]).await)[0]["id"], "1");
    ok(s.call("block", &[json!(ANN)]).await);
    assert_eq!(ok(s.call("blocked", &[]).await), json!([ANN]));
    let contact = ok(s.call("contact", &[json!(ANN)]).await);
    assert_eq!(
        (
            contact["isBlocked"].clone(),
            contact["profilePicUrl"].clone()
        ),
        (json!(true), json!("https://pps.fake/ann.jpg"))
    );
    let first = ok(s.call("sendText", &send_args(ANN, "to forward")).await);
    let copy = ok(s
        .call("forward", &[json!(GROUP), first["id"].clone()])
        .await);
    assert!(copy["id"].as_str().unwrap().contains(GROUP));
    ok(s.call("star", &[first["id"].clone(), json!(true)]).await);
    let poll = ok(s
        .call(
            "sendPoll",
            &[
                json!(GROUP),
                json!("Lunch?"),
                json!(["pizza", "soup"]),
                json!(1),
            ],
        )
        .await);
    ok(s.call("votePoll", &[poll["id"].clone(), json!(["soup"])])
        .await);
    let unknown = s
        .call("votePoll", &[poll["id"].clone(), json!(["cake"])])
        .await;
    assert!(
        matches!(unknown, Err(BrowserError::Page { ref code, .. }) if code == "bad_input"),
        "{unknown:?}"
    );
    let link = ok(s
        .call_unbounded("callLink", &[json!("video"), json!(1_700_000_000_000i64)])
        .await);
    assert_eq!(link, "https://call.whatsapp.com/video/FAKE1700000000");

    let seen = s.processes();
    s.stop().await.unwrap();
    assert_no_process_left(&s, &seen);
}
