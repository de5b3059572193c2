//! The sim network and the WebSocket across a cluster: a send from a session on one node reaches a session
//! on another as `message.received` (acks and reactions cross back), "who exists" and contact lists are
//! cluster-wide, the shared view of connected devices names each session's node, and `/api/ws` sockets on
//! any node get the events raised on every node (once each; scope and QR rules on the receiving node).
//! Groups, channels, statuses, presence, calls and blocks act across nodes too, and a stalled node that
//! resumes cannot drain the sim inbox of a session whose lease it lost.
//! Three real nodes on one PostgreSQL data DB and one Redis (own key prefix).

use std::time::Duration;

use serde_json::{Value, json};
use wagate_loadtest::harness::cluster::{TestCluster, Timings};
use wagate_loadtest::harness::sessions::{create, create_linked, wait_status};
use wagate_loadtest::harness::ws::{self, Socket};
use wagate_loadtest::harness::{ADMIN_KEY, Client, Node};

const PHONE_X: &str = "15550003001";
const PHONE_Y: &str = "15550003002";

async fn connect(node: &Node, key: &str) -> Socket {
    ws::subscribed(node, key).await.expect("subscribed socket")
}

async fn until(socket: &mut Socket, pred: impl Fn(&Value) -> bool) -> Value {
    ws::until(socket, pred).await.expect("the awaited frame")
}

async fn collect_until(socket: &mut Socket, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    ws::collect_until(socket, pred)
        .await
        .expect("the awaited frame")
}

fn is_event(f: &Value, name: &str, session: &str) -> bool {
    f["type"] == "event" && f["payload"]["event"] == name && f["payload"]["sessionId"] == session
}

async fn new_key(c: &Client, name: &str, role: &str, sessions: Option<Vec<String>>) -> String {
    let r = c
        .post(
            "/api/auth/api-keys",
            json!({ "name": name, "role": role, "allowedSessions": sessions }),
        )
        .await
        .expect("key");
    assert_eq!(r.status, 201, "{}", r.text);
    r.str("apiKey")
}

async fn cluster() -> TestCluster {
    TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 3, Timings::default())
        .await
        .expect("cluster")
}

#[tokio::test]
async fn sim_traffic_crosses_nodes_and_every_nodes_sockets_see_it() {
    let c = cluster().await;
    let x = create_linked(&c.client(0), "sim-x", PHONE_X)
        .await
        .expect("x on node a");
    let y = create_linked(&c.client(1), "sim-y", PHONE_Y)
        .await
        .expect("y on node b");
    // Sockets: admin on node c (neither owner), admin on node a (raises x's events), and on node c a key
    // scoped to y plus a viewer (keys are per node: they are created where they are used).
    let mut on_c = connect(&c.nodes[2], ADMIN_KEY).await;
    let mut on_a = connect(&c.nodes[0], ADMIN_KEY).await;
    let scoped_key = new_key(&c.client(2), "scoped-y", "operator", Some(vec![y.clone()])).await;
    let mut scoped = connect(&c.nodes[2], &scoped_key).await;
    let viewer_key = new_key(&c.client(2), "viewer", "viewer", None).await;
    let mut viewer = connect(&c.nodes[2], &viewer_key).await;

    // A send from x, asked of node c (forwarded to node a), reaches y on node b.
    let sent = c
        .client(2)
        .post(
            &format!("/api/sessions/{x}/messages/send-text"),
            json!({ "chatId": format!("{PHONE_Y}@c.us"), "text": "across nodes" }),
        )
        .await
        .expect("send");
    assert!(sent.status < 300, "{}", sent.text);
    let message_id = sent.str("messageId");
    let received = until(&mut on_c, |f| is_event(f, "message.received", &y)).await;
    assert_eq!(
        received["payload"]["data"]["body"], "across nodes",
        "{received}"
    );
    assert_eq!(received["payload"]["data"]["id"], message_id.as_str());
    // y's own `ready` may still be on its way from node b when the socket opens (seen on a loaded machine).
    let on_scoped = until(&mut scoped, |f| {
        f["type"] == "event"
            && !(f["payload"]["event"] == "session.status"
                && f["payload"]["sessionId"] == y.as_str())
    })
    .await;
    assert!(
        is_event(&on_scoped, "message.received", &y),
        "a key scoped to y gets y's events only (x's message.sent came first): {on_scoped}"
    );
    // The recipient is online elsewhere, so the sender's message is delivered and read.
    let read = until(&mut on_c, |f| {
        is_event(f, "message.ack", &x) && f["payload"]["data"]["status"] == "read"
    })
    .await;
    assert_eq!(read["payload"]["data"]["id"], message_id.as_str(), "{read}");

    // y (owned by node b, asked of node a) reacts; x on node a gets the reaction.
    let react = c
        .client(0)
        .post(
            &format!("/api/sessions/{y}/messages/react"),
            json!({ "chatId": format!("{PHONE_X}@c.us"), "messageId": message_id, "emoji": "🎉" }),
        )
        .await
        .expect("react");
    assert_eq!(react.status, 200, "{}", react.text);
    // On the raising node a, x's events arrive exactly once each (no echo from Redis).
    let frames = collect_until(&mut on_a, |f| is_event(f, "message.reaction", &x)).await;
    let sent_frames = frames
        .iter()
        .filter(|f| is_event(f, "message.sent", &x))
        .count();
    assert_eq!(sent_frames, 1, "{frames:?}");
    assert!(
        frames.iter().any(|f| is_event(f, "message.received", &y)),
        "node a's socket also gets node b's events"
    );

    // Who exists and contact lists are cluster-wide.
    let check = c
        .client(1)
        .get(&format!("/api/sessions/{y}/contacts/check/{PHONE_X}"))
        .await
        .expect("check");
    assert_eq!(check.body["exists"], true, "{}", check.text);
    let nobody = c
        .client(1)
        .get(&format!("/api/sessions/{y}/contacts/check/15550003999"))
        .await
        .expect("check");
    assert_eq!(nobody.body["exists"], false, "{}", nobody.text);
    let contacts = c
        .client(2)
        .get(&format!("/api/sessions/{x}/contacts"))
        .await
        .expect("contacts");
    let ids: Vec<&str> = contacts
        .body
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r["id"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        ids.contains(&format!("{PHONE_Y}@c.us").as_str()),
        "{}",
        contacts.text
    );

    // The shared view of connected devices, asked of any node.
    let devices = c
        .client(2)
        .get(&format!("/api/sim/devices?phone={PHONE_X}"))
        .await
        .expect("devices");
    assert_eq!(devices.status, 200, "{}", devices.text);
    let rows = devices.body.as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "{}", devices.text);
    assert_eq!(rows[0]["sessionId"], x.as_str());
    assert_eq!(rows[0]["nodeId"], "node-a");
    assert_eq!(rows[0]["isNodeLive"], true);

    // A QR raised on node a reaches the admin on node c but not the viewer there.
    let z = create(&c.client(0), "sim-z").await.expect("z");
    let started = c
        .client(0)
        .post_empty(&format!("/api/sessions/{z}/start"))
        .await
        .expect("start");
    assert_eq!(started.status, 200, "{}", started.text);
    wait_status(&c.client(0), &z, "qr_ready", Duration::from_secs(10))
        .await
        .expect("qr");
    until(&mut on_c, |f| is_event(f, "session.qr", &z)).await;
    let status = until(&mut viewer, |f| {
        is_event(f, "session.qr", &z) || is_event(f, "session.status", &z)
    })
    .await;
    assert!(
        !is_event(&status, "session.qr", &z),
        "the viewer on node c got a QR: {status}"
    );
}

fn jid(phone: &str) -> String {
    format!("{phone}@c.us")
}

fn at(id: &str, rest: &str) -> String {
    format!("/api/sessions/{id}{rest}")
}

/// Asserts a 2xx and hands the reply back.
fn ok(reply: wagate_loadtest::harness::Reply) -> wagate_loadtest::harness::Reply {
    assert!(reply.status < 300, "{}: {}", reply.status, reply.text);
    reply
}

fn data(f: &Value) -> &Value {
    &f["payload"]["data"]
}

#[tokio::test]
async fn a_group_made_on_one_node_carries_messages_and_notifications_to_members_on_others() {
    const GX: &str = "15550004001";
    const GY: &str = "15550004002";
    let c = cluster().await;
    let x = create_linked(&c.client(0), "grp-x", GX)
        .await
        .expect("x on node a");
    let y = create_linked(&c.client(1), "grp-y", GY)
        .await
        .expect("y on node b");
    let mut ws = connect(&c.nodes[2], ADMIN_KEY).await;

    // x (node a) creates a group with y (node b): y hears it joined.
    let created = ok(c
        .client(0)
        .post(
            &at(&x, "/groups"),
            json!({ "name": "Across", "participants": [jid(GY)] }),
        )
        .await
        .expect("create"));
    let group = created.str("id");
    let joined = until(&mut ws, |f| is_event(f, "group.join", &y)).await;
    assert_eq!(data(&joined)["groupId"], group.as_str(), "{joined}");
    let listed = ok(c.client(1).get(&at(&y, "/groups")).await.expect("list"));
    assert_eq!(listed.body, json!([{ "id": group, "name": "Across" }]));

    // y (node b) writes to the group; x (node a) receives it in the group chat.
    ok(c.client(1)
        .post(
            &at(&y, "/messages/send-text"),
            json!({ "chatId": group, "text": "hello group" }),
        )
        .await
        .expect("send"));
    let got = until(&mut ws, |f| is_event(f, "message.received", &x)).await;
    assert_eq!(data(&got)["body"], "hello group", "{got}");
    assert_eq!(data(&got)["chatId"], group.as_str(), "{got}");

    // x promotes y: y hears it; then y renames the group and x hears that.
    ok(c.client(0)
        .post(
            &at(&x, &format!("/groups/{group}/participants/promote")),
            json!({ "participants": [jid(GY)] }),
        )
        .await
        .expect("promote"));
    let promoted = until(&mut ws, |f| is_event(f, "group.update", &y)).await;
    assert_eq!(data(&promoted)["changes"]["admin"], true, "{promoted}");
    ok(c.client(1)
        .put(
            &at(&y, &format!("/groups/{group}/subject")),
            json!({ "subject": "Renamed on b" }),
        )
        .await
        .expect("subject"));
    let renamed = until(&mut ws, |f| {
        is_event(f, "group.update", &x) && data(f)["changes"]["subject"] == "Renamed on b"
    })
    .await;
    assert_eq!(data(&renamed)["actorId"], jid(GY).as_str(), "{renamed}");
    let info = ok(c
        .client(0)
        .get(&at(&x, &format!("/groups/{group}")))
        .await
        .expect("info"));
    assert_eq!(info.body["name"], "Renamed on b", "{}", info.text);
    let y_entry = info.body["participants"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["number"] == GY).cloned())
        .unwrap_or_default();
    assert_eq!(y_entry["isAdmin"], true, "{}", info.text);

    // y leaves (node b): x hears it.
    ok(c.client(1)
        .post_empty(&at(&y, &format!("/groups/{group}/leave")))
        .await
        .expect("leave"));
    let left = until(&mut ws, |f| is_event(f, "group.leave", &x)).await;
    assert_eq!(data(&left)["participantIds"], json!([jid(GY)]), "{left}");
}

#[tokio::test]
async fn blocks_presence_statuses_calls_and_channels_act_across_nodes() {
    const PX: &str = "15550005001";
    const PY: &str = "15550005002";
    let c = cluster().await;
    let x = create_linked(&c.client(0), "xn-x", PX)
        .await
        .expect("x on node a");
    let y = create_linked(&c.client(1), "xn-y", PY)
        .await
        .expect("y on node b");
    let mut ws = connect(&c.nodes[2], ADMIN_KEY).await;
    let send = |text: &'static str| {
        let client = c.client(0);
        let path = at(&x, "/messages/send-text");
        async move {
            ok(client
                .post(&path, json!({ "chatId": jid(PY), "text": text }))
                .await
                .expect("send"))
        }
    };

    // A block set on node b is honoured when node a sends; lifting it lets messages through again.
    ok(c.client(1)
        .post_empty(&at(&y, &format!("/contacts/{}/block", jid(PX))))
        .await
        .expect("block"));
    let blocked = ok(c
        .client(1)
        .get(&at(&y, "/contacts/blocked"))
        .await
        .expect("blocked"));
    assert!(blocked.text.contains(PX), "{}", blocked.text);
    send("while blocked").await;
    ok(c.client(1)
        .delete(&at(&y, &format!("/contacts/{}/block", jid(PX))))
        .await
        .expect("unblock"));
    send("after the unblock").await;
    let first = until(&mut ws, |f| is_event(f, "message.received", &y)).await;
    assert_eq!(
        data(&first)["body"],
        "after the unblock",
        "the message sent while blocked never arrives: {first}"
    );

    // y (node b) follows x's presence; x (node a) comes online and y sees it.
    ok(c.client(1)
        .post(&at(&y, "/presence/subscribe"), json!({ "chatId": jid(PX) }))
        .await
        .expect("subscribe"));
    let initial = until(&mut ws, |f| is_event(f, "presence.update", &y)).await;
    assert_eq!(data(&initial)["participants"][0]["state"], "unavailable");
    ok(c.client(0)
        .put(&at(&x, "/presence"), json!({ "available": true }))
        .await
        .expect("presence"));
    let online = until(&mut ws, |f| is_event(f, "presence.update", &y)).await;
    assert_eq!(data(&online)["chatId"], jid(PX).as_str(), "{online}");
    assert_eq!(data(&online)["participants"][0]["state"], "available");
    let read = ok(c
        .client(1)
        .get(&at(&y, &format!("/presence/{}", jid(PX))))
        .await
        .expect("presence read"));
    assert!(read.text.contains("\"available\""), "{}", read.text);

    // A status posted on node a reaches y on node b, and y can list it there.
    let posted = ok(c
        .client(0)
        .post(
            &at(&x, "/status/send-text"),
            json!({ "text": "a story", "recipients": [jid(PY)] }),
        )
        .await
        .expect("status"));
    let status = until(&mut ws, |f| is_event(f, "status.received", &y)).await;
    assert_eq!(
        data(&status)["caption"],
        "a story",
        "{status} after {}",
        posted.text
    );
    let listed = ok(c
        .client(1)
        .get(&at(&y, &format!("/status/{}", jid(PX))))
        .await
        .expect("statuses"));
    assert!(listed.text.contains("a story"), "{}", listed.text);

    // x calls y: it rings on node b; y rejects (asked of node a, forwarded) and x hears the rejection.
    let call = ok(c
        .client(2)
        .post(
            &format!("/api/sim/sessions/{y}/call"),
            json!({ "from": jid(PX), "isVideo": true }),
        )
        .await
        .expect("call"))
    .str("callId");
    let ringing = until(&mut ws, |f| is_event(f, "call.received", &y)).await;
    assert_eq!(data(&ringing)["callId"], call.as_str());
    ok(c.client(0)
        .post_empty(&at(&y, &format!("/calls/{call}/reject")))
        .await
        .expect("reject"));
    let rejected = until(&mut ws, |f| is_event(f, "call.rejected", &x)).await;
    assert_eq!(data(&rejected)["callId"], call.as_str(), "{rejected}");
    assert_eq!(data(&rejected)["from"], jid(PY).as_str(), "{rejected}");

    // A channel made on node a, followed from node b, delivers its posts there.
    let channel = ok(c
        .client(0)
        .post(&at(&x, "/channels"), json!({ "name": "News" }))
        .await
        .expect("channel"));
    let (channel_id, code) = (channel.str("id"), channel.str("inviteCode"));
    let followed = ok(c
        .client(1)
        .post(
            &at(&y, "/channels/subscribe"),
            json!({ "inviteCode": code }),
        )
        .await
        .expect("subscribe"));
    assert_eq!(followed.str("id"), channel_id);
    ok(c.client(0)
        .post(
            &at(&x, "/messages/send-text"),
            json!({ "chatId": channel_id, "text": "first post" }),
        )
        .await
        .expect("post"));
    let post = until(&mut ws, |f| {
        is_event(f, "message.received", &y) && data(f)["chatId"] == channel_id.as_str()
    })
    .await;
    assert_eq!(data(&post)["body"], "first post", "{post}");
}

/// The length of a session's sim inbox, read straight from Redis.
async fn inbox_len(c: &TestCluster, session: &str) -> i64 {
    let client = deadpool_redis::redis::Client::open("redis://127.0.0.1:6379").expect("redis");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis connection");
    deadpool_redis::redis::cmd("LLEN")
        .arg(format!("{}sim:inbox:{session}", c.prefix))
        .query_async(&mut conn)
        .await
        .expect("LLEN")
}

#[tokio::test]
async fn a_stalled_node_that_resumes_leaves_the_inbox_of_a_lost_session_to_its_successor() {
    const FX: &str = "15550006001";
    const FY: &str = "15550006002";
    // A long sweep: the lease lapses well before anyone takes the session over, so traffic waits in the
    // inbox while the stalled owner resumes (and gets the wakes it missed).
    let timings = Timings {
        ttl_ms: 3_000,
        heartbeat_ms: 1_000,
        sweep_ms: 10_000,
    };
    let c = TestCluster::start(env!("CARGO_BIN_EXE_wagate"), 3, timings)
        .await
        .expect("cluster");
    let x = create_linked(&c.client(2), "fence-x", FX)
        .await
        .expect("x on node c");
    let y = create_linked(&c.client(0), "fence-y", FY)
        .await
        .expect("y on node a");
    c.nodes[0].pause();
    // The lease lapses: node b's list no longer sees y loaded anywhere.
    let lapsed = async {
        loop {
            let list = c.client(1).get("/api/sessions").await.expect("list");
            let loaded = list
                .body
                .as_array()
                .or_else(|| list.body["data"].as_array())
                .and_then(|rows| rows.iter().find(|s| s["id"] == y.as_str()))
                .is_some_and(|s| s["engineLoaded"] == true);
            if !loaded {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), lapsed)
        .await
        .expect("the stalled owner's lease lapses");
    ok(c.client(2)
        .post(
            &at(&x, "/messages/send-text"),
            json!({ "chatId": jid(FY), "text": "sent while a was stalled" }),
        )
        .await
        .expect("send"));
    let queued = async {
        while inbox_len(&c, &y).await == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), queued)
        .await
        .expect("the message waits in y's inbox");

    c.nodes[0].resume();
    // Whoever runs y once things settle (a successor; or node a again, had its own sweep taken the lapsed
    // lease legitimately) has the message: the stale engine on node a never consumed it.
    c.wait_served_ready(1, &y, &[""], Duration::from_secs(60))
        .await
        .expect("y runs again");
    let mut last = String::new();
    let mut seen = false;
    for _ in 0..200 {
        let chats = c.client(1).get(&at(&y, "/chats")).await.expect("chats");
        if chats.status == 200 && chats.text.contains("sent while a was stalled") {
            seen = true;
            break;
        }
        let by = chats.header("x-wagate-served-by").unwrap_or("").to_string();
        last = format!("{} by {by}: {}", chats.status, chats.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen, "y's owner never got the message; chats: {last}");
    assert_eq!(inbox_len(&c, &y).await, 0);
    // Whether node a tried to drain before its heartbeat unloaded y (the race this guards) depends on
    // scheduling after SIGCONT; say which way this run went.
    let fenced = c.nodes[0].logs().contains("sim inbox left alone");
    eprintln!("node a tried to drain y's inbox after resuming and was refused: {fenced}");
}

/// Members of a Redis set, read straight from Redis.
async fn set_members(key: &str) -> Vec<String> {
    let client = deadpool_redis::redis::Client::open("redis://127.0.0.1:6379").expect("redis");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis connection");
    deadpool_redis::redis::cmd("SMEMBERS")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("SMEMBERS")
}

fn find_chat(list: &Value, id: &str) -> Value {
    list.as_array()
        .and_then(|rows| rows.iter().find(|c| c["id"] == id))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_session_taken_over_keeps_its_ringing_call_account_state_and_read_state() {
    const TX: &str = "15550007001";
    const TY: &str = "15550007002";
    let c = cluster().await;
    let x = create_linked(&c.client(2), "move-x", TX)
        .await
        .expect("x on node c");
    let y = create_linked(&c.client(0), "move-y", TY)
        .await
        .expect("y on node a");
    let mut ws = connect(&c.nodes[1], ADMIN_KEY).await;
    let (a, chat_x) = (c.client(0), jid(TX));

    // x (node c) writes to y (node a); x's auto acks end in `read` before anything moves.
    let sent = ok(c
        .client(2)
        .post(
            &at(&x, "/messages/send-text"),
            json!({ "chatId": jid(TY), "text": "read me later" }),
        )
        .await
        .expect("send"));
    let message_id = sent.str("messageId");
    until(&mut ws, |f| is_event(f, "message.received", &y)).await;
    until(&mut ws, |f| {
        is_event(f, "message.ack", &x) && data(f)["status"] == "read"
    })
    .await;

    // y's account state, set while node a serves it.
    let chat_body = |flag: &str| json!({ "chatId": chat_x, flag: true });
    ok(a.post(&at(&y, "/chats/archive"), chat_body("archive"))
        .await
        .expect("archive"));
    ok(a.post(&at(&y, "/chats/pin"), chat_body("pin"))
        .await
        .expect("pin"));
    let contact_x = at(&y, &format!("/contacts/{chat_x}"));
    ok(a.put(&contact_x, json!({ "firstName": "Xavier" }))
        .await
        .expect("save"));
    ok(
        a.put(&at(&y, "/labels/7"), json!({ "name": "VIP", "color": 3 }))
            .await
            .expect("label"),
    );
    ok(a.post(
        &at(&y, &format!("/labels/chat/{chat_x}")),
        json!({ "labelId": "7" }),
    )
    .await
    .expect("tag"));
    ok(a.put(&at(&y, "/profile/name"), json!({ "name": "Yvonne" }))
        .await
        .expect("name"));
    ok(a.put(
        &at(&y, "/profile/picture"),
        json!({ "base64": "iVBORw0KGgoAAAANSUhEUg==", "mimetype": "image/png" }),
    )
    .await
    .expect("picture"));
    let picture_path = at(&y, &format!("/contacts/{}/profile-picture", jid(TY)));
    let picture = ok(a.get(&picture_path).await.expect("picture")).body["url"].clone();
    assert!(picture.is_string(), "{picture}");
    // y follows x's presence: the subscription is listed while y's device is connected.
    ok(
        a.post(&at(&y, "/presence/subscribe"), json!({ "chatId": chat_x }))
            .await
            .expect("subscribe"),
    );
    let presubs = format!("{}sim:presubs:{chat_x}", c.prefix);
    assert_eq!(set_members(&presubs).await, vec![y.clone()]);
    // x calls y: it rings on node a.
    let call = ok(c
        .client(2)
        .post(
            &format!("/api/sim/sessions/{y}/call"),
            json!({ "from": chat_x, "isVideo": false }),
        )
        .await
        .expect("call"))
    .str("callId");
    until(&mut ws, |f| is_event(f, "call.received", &y)).await;

    // Node a drains: y moves to another node.
    ok(a.post_empty("/api/infra/drain").await.expect("drain"));
    let served = c
        .wait_served_ready(1, &y, &["node-a", ""], Duration::from_secs(60))
        .await
        .expect("y runs elsewhere");
    eprintln!("y taken over by {:?}", served.header("x-wagate-served-by"));
    assert!(
        set_members(&presubs).await.is_empty(),
        "the subscription ended with y's connection on node a"
    );

    let b = c.client(1);
    let chats = ok(b.get(&at(&y, "/chats")).await.expect("chats"));
    let summary = find_chat(&chats.body, &chat_x);
    assert_eq!(
        (
            summary["archived"].clone(),
            summary["pinned"].clone(),
            summary["unreadCount"].clone()
        ),
        (json!(true), json!(true), json!(1)),
        "{}",
        chats.text
    );
    let contact = ok(b.get(&contact_x).await.expect("contact"));
    assert_eq!(contact.body["name"], "Xavier", "{}", contact.text);
    let me = ok(b
        .get(&at(&y, &format!("/contacts/{}", jid(TY))))
        .await
        .expect("me"));
    assert_eq!(me.body["pushName"], "Yvonne", "{}", me.text);
    let moved_picture = ok(b.get(&picture_path).await.expect("picture")).body["url"].clone();
    assert_eq!(moved_picture, picture);
    // The label exists on the new owner: untagging and deleting it find it (an unknown one is 404).
    let unknown = b
        .delete(&at(&y, &format!("/labels/chat/{chat_x}/8")))
        .await
        .expect("untag unknown");
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    ok(b.delete(&at(&y, &format!("/labels/chat/{chat_x}/7")))
        .await
        .expect("untag"));
    ok(b.delete(&at(&y, "/labels/7")).await.expect("delete label"));

    // The call still rings for y: rejected on the new owner, x hears it.
    ok(b.post_empty(&at(&y, &format!("/calls/{call}/reject")))
        .await
        .expect("reject"));
    let rejected = until(&mut ws, |f| is_event(f, "call.rejected", &x)).await;
    assert_eq!(data(&rejected)["callId"], call.as_str(), "{rejected}");
    assert_eq!(data(&rejected)["from"], jid(TY).as_str(), "{rejected}");

    // y reads the chat on the new owner: y's chat has nothing unread. x's message read already (its auto
    // acks), so the receipt this read sends x moves nothing there and raises no second event.
    ok(b.post(&at(&y, "/chats/read"), json!({ "chatId": chat_x }))
        .await
        .expect("read"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let after = ok(b.get(&at(&y, "/chats")).await.expect("chats"));
        if find_chat(&after.body, &chat_x)["unreadCount"] == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", after.text);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let x_rows = ok(c
        .client(2)
        .get(&at(&x, "/messages"))
        .await
        .expect("x's messages"));
    let sent_row = x_rows.body.as_array().and_then(|rows| {
        rows.iter()
            .find(|m| m["waMessageId"] == message_id.as_str())
            .cloned()
    });
    assert_eq!(
        sent_row.map(|m| m["status"].clone()),
        Some(json!("read")),
        "{}",
        x_rows.text
    );
}

/// An automation rule's cooldown is the cluster's: a session that moves to another node does not reply to
/// the same chat again inside it.
#[tokio::test]
async fn an_automation_cooldown_follows_its_session_to_another_node() {
    let c = cluster().await;
    let s = create_linked(&c.client(0), "auto-moves", "15550003011")
        .await
        .expect("linked on node a");
    let rule = json!({
        "name": "price",
        "conditions": [{ "field": "body", "operator": "contains", "value": "price" }],
        "replyText": "Prices at example.com",
        "cooldownSeconds": 3600
    });
    ok(c.client(0)
        .post(&at(&s, "/automation-rules"), rule)
        .await
        .expect("rule"));
    let customer = jid("15550003099");
    let ask = |node: usize, body: &'static str| {
        let client = c.client(node);
        let (s, customer) = (s.clone(), customer.clone());
        async move {
            ok(client
                .post(
                    &format!("/api/sim/sessions/{s}/inbound"),
                    json!({ "from": customer, "type": "text", "body": body }),
                )
                .await
                .expect("inbound"));
        }
    };
    let replies = || async {
        c.client(1)
            .get(&at(&s, "/messages?direction=outgoing"))
            .await
            .expect("messages")
            .body
            .as_array()
            .map_or(0, Vec::len)
    };
    ask(0, "what is the price?").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while replies().await == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no first reply");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for action in ["stop", "start"] {
        let moved = c
            .client(1)
            .post_empty(&at(&s, &format!("/{action}")))
            .await
            .expect(action);
        assert_eq!(moved.status, 200, "{action}: {}", moved.text);
    }
    wait_status(&c.client(1), &s, "ready", Duration::from_secs(20))
        .await
        .expect("ready on b");
    assert!(
        c.row(&s).expect("row").starts_with("node-b|"),
        "moved to node b"
    );
    ask(1, "price again?").await;
    // The message is stored before the matcher runs; give the matcher the time a reply took the first time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let incoming = c
            .client(1)
            .get(&at(&s, "/messages?direction=incoming"))
            .await
            .expect("messages");
        if incoming.body.as_array().map_or(0, Vec::len) >= 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "second question not stored"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        replies().await,
        1,
        "one reply per cooldown, whichever node runs the session"
    );
}

/// A phone unlink of a stopped session is the network's, not one node's: asked of a node that never ran
/// the session, it is accepted, and the next start on either node asks for a new QR with no phone.
#[tokio::test]
async fn a_phone_unlink_of_a_stopped_session_through_another_node_holds_everywhere() {
    let c = cluster().await;
    let (a, b) = (c.client(0), c.client(1));
    let id = create_linked(&a, "sim-unlinked", "15550003011")
        .await
        .expect("linked on node a");
    let stopped = b
        .post_empty(&format!("/api/sessions/{id}/stop"))
        .await
        .expect("stop");
    assert_eq!(stopped.body["status"], "disconnected", "{}", stopped.text);
    let unlink = b
        .post_empty(&format!("/api/sim/sessions/{id}/unlink"))
        .await
        .expect("unlink");
    assert_eq!(unlink.status, 200, "{}", unlink.text);

    for client in [&b, &a] {
        let started = client
            .post_empty(&format!("/api/sessions/{id}/start"))
            .await
            .expect("start");
        assert_eq!(started.status, 200, "{}", started.text);
        let qr = wait_status(client, &id, "qr_ready", Duration::from_secs(20))
            .await
            .expect("qr_ready");
        assert!(qr.body["phone"].is_null(), "{}", qr.text);
        let stopped = client
            .post_empty(&format!("/api/sessions/{id}/stop"))
            .await
            .expect("stop");
        assert_eq!(stopped.status, 200, "{}", stopped.text);
    }
}
