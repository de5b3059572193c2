//! Group routes end to end on the sim: a two-session scenario (create, add, promote, subject, leave,
//! observed through the other session's group detail), invite codes and roles, settings, membership
//! requests and pictures; and what the members hear over the WebSocket: picture and settings changes as
//! `group.update`, participants named twice collapsed, and who may add members under each member add mode.

mod resources_support;

use reqwest::Method;
use resources_support::{at, jid, key, linked_session, node};
use serde_json::{Value, json};
use wagate_loadtest::harness::ws::{self, Socket};
use wagate_loadtest::harness::{ADMIN_KEY, Client, Node};

const ALICE: &str = "4915100000001";
const BOB: &str = "4915100000002";
const CAROL: &str = "4915100000003";

fn participant<'a>(detail: &'a Value, phone: &str) -> Option<&'a Value> {
    detail["participants"]
        .as_array()?
        .iter()
        .find(|p| p["id"] == jid(phone).as_str())
}

#[tokio::test]
async fn two_sessions_create_add_promote_rename_and_leave() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bob = linked_session(&c, "bob", BOB).await;

    let created = c
        .post(
            &at(&alice, "/groups"),
            json!({ "name": "Team", "participants": [] }),
        )
        .await
        .expect("create");
    assert_eq!(created.status, 400, "empty participants: {}", created.text);
    let created = c
        .post(
            &at(&alice, "/groups"),
            json!({ "name": "Team", "participants": [jid(CAROL)] }),
        )
        .await
        .expect("create");
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["name"], "Team");
    let group = created.str("id");
    assert!(group.ends_with("@g.us"));

    let added = c
        .post(
            &at(&alice, &format!("/groups/{group}/participants")),
            json!({ "participants": [jid(BOB), jid(CAROL)] }),
        )
        .await
        .expect("add");
    assert_eq!(added.status, 200, "{}", added.text);
    let results = added.body["results"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["success"], true);
    assert_eq!(
        results[1]["success"], false,
        "a partly refused batch (CAROL is already in) is still 200"
    );
    assert_eq!(added.body["success"], false);

    let promoted = c
        .post(
            &at(&alice, &format!("/groups/{group}/participants/promote")),
            json!({ "participants": [jid(BOB)] }),
        )
        .await
        .expect("promote");
    assert_eq!(promoted.status, 200, "{}", promoted.text);
    assert_eq!(promoted.body["success"], true);

    let renamed = c
        .put(
            &at(&alice, &format!("/groups/{group}/subject")),
            json!({ "subject": "Renamed" }),
        )
        .await
        .expect("subject");
    assert_eq!(renamed.status, 200, "{}", renamed.text);

    let seen = c
        .get(&at(&bob, &format!("/groups/{group}")))
        .await
        .expect("detail");
    assert_eq!(seen.status, 200, "{}", seen.text);
    assert_eq!(seen.body["name"], "Renamed");
    assert_eq!(seen.body["owner"], jid(ALICE).as_str());
    let bob_entry = participant(&seen.body, BOB).cloned().unwrap_or_default();
    assert_eq!(bob_entry["isAdmin"], true, "{}", seen.text);
    assert_eq!(bob_entry["number"], BOB);

    let listed = c.get(&at(&bob, "/groups")).await.expect("list");
    assert_eq!(listed.body, json!([{ "id": group, "name": "Renamed" }]));

    let left = c
        .post_empty(&at(&alice, &format!("/groups/{group}/leave")))
        .await
        .expect("leave");
    assert_eq!(left.status, 200, "{}", left.text);
    let after = c
        .get(&at(&bob, &format!("/groups/{group}")))
        .await
        .expect("detail");
    assert!(participant(&after.body, ALICE).is_none(), "{}", after.text);
    let gone = c
        .get(&at(&alice, &format!("/groups/{group}")))
        .await
        .expect("detail");
    assert!(
        gone.status >= 400,
        "a former member no longer reads the group: {}",
        gone.text
    );
}

#[tokio::test]
async fn invite_codes_settings_requests_and_pictures() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bob = linked_session(&c, "bob", BOB).await;
    let group = c
        .post(
            &at(&alice, "/groups"),
            json!({ "name": "Club", "participants": [jid(CAROL)] }),
        )
        .await
        .expect("create")
        .str("id");

    let viewer = node.client_with_key(Some(&key(&c, "viewer", None).await));
    let denied = viewer
        .get(&at(&alice, &format!("/groups/{group}/invite-code")))
        .await
        .expect("code");
    assert_eq!(denied.status, 403, "VIEWER may not read an invite code");
    let code = c
        .get(&at(&alice, &format!("/groups/{group}/invite-code")))
        .await
        .expect("code");
    assert_eq!(code.status, 200, "{}", code.text);
    let invite = code.str("inviteCode");
    assert_eq!(
        code.str("inviteLink"),
        format!("https://chat.whatsapp.com/{invite}")
    );

    let info = c
        .get(&at(&bob, &format!("/groups/join-info?code={invite}")))
        .await
        .expect("info");
    assert_eq!(info.status, 200, "{}", info.text);
    assert_eq!(info.body["name"], "Club");
    let by_invite_code = c
        .get(&at(&bob, &format!("/groups/join-info?inviteCode={invite}")))
        .await
        .expect("info by inviteCode");
    assert_eq!(by_invite_code.status, 200, "{}", by_invite_code.text);
    assert_eq!(by_invite_code.body["name"], "Club");
    let joined = c
        .post(&at(&bob, "/groups/join"), json!({ "inviteCode": invite }))
        .await
        .expect("join");
    assert_eq!(joined.body, json!({ "success": true, "groupId": group }));

    let revoked = c
        .post_empty(&at(&alice, &format!("/groups/{group}/invite-code/revoke")))
        .await
        .expect("revoke");
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    assert_ne!(revoked.str("inviteCode"), invite);

    let path = at(&alice, &format!("/groups/{group}/settings"));
    let put = c
        .put(
            &path,
            json!({ "announce": true, "memberAddMode": "admins" }),
        )
        .await
        .expect("put");
    assert_eq!(put.status, 200, "{}", put.text);
    let got = c.get(&path).await.expect("get");
    assert_eq!(got.body["announce"], true);
    assert_eq!(got.body["memberAddMode"], "admins");
    assert_eq!(got.body["locked"], false);

    let requests = c
        .get(&at(&alice, &format!("/groups/{group}/membership-requests")))
        .await
        .expect("requests");
    assert_eq!(requests.body, json!([]));
    let approve = c
        .post(
            &at(
                &alice,
                &format!("/groups/{group}/membership-requests/approve"),
            ),
            json!({}),
        )
        .await
        .expect("approve");
    assert_eq!(approve.status, 200, "{}", approve.text);

    let picture = at(&alice, &format!("/groups/{group}/picture"));
    let set = c
        .put(
            &picture,
            json!({ "base64": "/9j/4AAQ", "mimetype": "image/jpeg" }),
        )
        .await
        .expect("set");
    assert_eq!(set.status, 200, "{}", set.text);
    assert!(c.get(&picture).await.expect("get").body["url"].is_string());
    assert_eq!(c.delete(&picture).await.expect("delete").status, 200);
    assert!(c.get(&picture).await.expect("get").body["url"].is_null());

    let desc = c
        .put(
            &at(&alice, &format!("/groups/{group}/description")),
            json!({ "description": "" }),
        )
        .await
        .expect("description");
    assert_eq!(desc.status, 200, "{}", desc.text);
}

/// A socket subscribed to every session's events.
async fn subscribed(node: &Node) -> Socket {
    ws::subscribed(node, ADMIN_KEY)
        .await
        .expect("subscribed socket")
}

async fn next_frame(socket: &mut Socket) -> Value {
    ws::next_frame(socket).await.expect("a frame")
}

/// `session`'s group events, up to and including the first `group.update` that renames the group to
/// `marker` (a change made last, so every event before it has arrived).
async fn group_events_until(ws: &mut Socket, session: &str, marker: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let f = next_frame(ws).await;
        let p = &f["payload"];
        let grouped = f["type"] == "event"
            && p["sessionId"] == session
            && p["event"].as_str().is_some_and(|e| e.starts_with("group."));
        if !grouped {
            continue;
        }
        let last = p["event"] == "group.update" && p["data"]["changes"]["subject"] == marker;
        seen.push(p.clone());
        if last {
            return seen;
        }
    }
}

fn named<'a>(events: &'a [Value], name: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == name).collect()
}

async fn rename(c: &Client, session: &str, group: &str, subject: &str) {
    let renamed = c
        .put(
            &at(session, &format!("/groups/{group}/subject")),
            json!({ "subject": subject }),
        )
        .await
        .expect("subject");
    assert_eq!(renamed.status, 200, "{}", renamed.text);
}

async fn group_with(c: &Client, owner: &str, participants: Value) -> String {
    let created = c
        .post(
            &at(owner, "/groups"),
            json!({ "name": "G", "participants": participants }),
        )
        .await
        .expect("create");
    assert_eq!(created.status, 201, "{}", created.text);
    created.str("id")
}

#[tokio::test]
async fn picture_and_settings_changes_reach_members_as_group_update_with_their_changes() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bob = linked_session(&c, "bob", BOB).await;
    let mut ws = subscribed(&node).await;
    let group = group_with(&c, &alice, json!([jid(BOB)])).await;

    let picture = at(&alice, &format!("/groups/{group}/picture"));
    let image = json!({ "base64": "iVBORw0KGgoAAAANSUhEUg==", "mimetype": "image/png" });
    assert_eq!(c.put(&picture, image).await.expect("set").status, 200);
    assert_eq!(c.delete(&picture).await.expect("remove").status, 200);
    let settings = at(&alice, &format!("/groups/{group}/settings"));
    let change = json!({ "ephemeralSeconds": 86400, "memberAddMode": "all" });
    let put = c.put(&settings, change.clone()).await.expect("settings");
    assert_eq!(put.status, 200, "{}", put.text);

    // Nothing of these changes anything, so none may reach the members.
    for body in [json!({}), json!({ "bogus": true })] {
        let refused = c.put(&settings, body.clone()).await.expect("settings");
        assert_eq!(refused.status, 400, "{body}: {}", refused.text);
        assert_eq!(refused.body["statusCode"], 400, "{}", refused.text);
        assert!(
            refused.str("message").contains("at least one"),
            "{}",
            refused.text
        );
    }
    let again = c.put(&settings, change.clone()).await.expect("settings");
    assert_eq!(again.status, 200, "an unchanged setting is still a success");
    assert_eq!(c.delete(&picture).await.expect("remove").status, 200);
    rename(&c, &alice, &group, "marker").await;

    let heard = group_events_until(&mut ws, &bob, "marker").await;
    let updates = named(&heard, "group.update");
    let changes: Vec<&Value> = updates.iter().map(|u| &u["data"]["changes"]).collect();
    assert_eq!(
        changes,
        [
            &json!({ "picture": "set" }),
            &json!({ "picture": "removed" }),
            &change,
            &json!({ "subject": "marker" }),
        ],
        "{heard:?}"
    );
    for update in updates {
        assert_eq!(update["data"]["actorId"], jid(ALICE).as_str(), "{update}");
        assert_eq!(update["data"]["groupId"], group.as_str(), "{update}");
    }
    let got = c.get(&settings).await.expect("get");
    assert_eq!(got.body["ephemeralSeconds"], 86400, "{}", got.text);
    assert_eq!(got.body["memberAddMode"], "all", "{}", got.text);
}

#[tokio::test]
async fn participants_named_twice_are_added_changed_and_announced_once() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bob = linked_session(&c, "bob", BOB).await;
    linked_session(&c, "carol", CAROL).await;
    let mut ws = subscribed(&node).await;

    let created = c
        .post(
            &at(&alice, "/groups"),
            json!({ "name": "Y", "participants": [jid(BOB), jid(BOB)] }),
        )
        .await
        .expect("create");
    assert_eq!(created.status, 201, "{}", created.text);
    assert_eq!(created.body["participantsCount"], 2, "{}", created.text);
    let group = created.str("id");
    let roster = |rest: &str| at(&alice, &format!("/groups/{group}/participants{rest}"));
    let twice = json!({ "participants": [jid(CAROL), jid(CAROL)] });
    let remove = c.raw(Method::DELETE, &roster("")).json(&twice);
    for reply in [
        c.post(&roster(""), twice.clone()).await.expect("add"),
        c.post(&roster("/promote"), twice.clone())
            .await
            .expect("promote"),
        c.post(&roster("/demote"), twice.clone())
            .await
            .expect("demote"),
        c.send(remove).await.expect("remove"),
    ] {
        assert_eq!(reply.status, 200, "{}", reply.text);
        assert_eq!(reply.body["success"], true, "{}", reply.text);
        assert_eq!(
            reply.body["results"].as_array().map(Vec::len),
            Some(1),
            "{}",
            reply.text
        );
    }
    rename(&c, &alice, &group, "marker").await;

    let heard = group_events_until(&mut ws, &bob, "marker").await;
    let ids = |e: &&Value| e["data"]["participantIds"].clone();
    let joins: Vec<Value> = named(&heard, "group.join").iter().map(ids).collect();
    assert_eq!(joins, [json!([jid(BOB)]), json!([jid(CAROL)])], "{heard:?}");
    let leaves: Vec<Value> = named(&heard, "group.leave").iter().map(ids).collect();
    assert_eq!(leaves, [json!([jid(CAROL)])], "{heard:?}");
    let roles: Vec<Value> = named(&heard, "group.update")
        .iter()
        .filter(|e| !e["data"]["changes"]["admin"].is_null())
        .map(ids)
        .collect();
    assert_eq!(
        roles,
        [json!([jid(CAROL)]), json!([jid(CAROL)])],
        "{heard:?}"
    );
}

#[tokio::test]
async fn member_add_mode_all_lets_any_member_add_but_not_remove_or_promote() {
    let node = node().await;
    let c = node.client();
    let alice = linked_session(&c, "alice", ALICE).await;
    let bob = linked_session(&c, "bob", BOB).await;
    linked_session(&c, "carol", CAROL).await;
    let group = group_with(&c, &alice, json!([jid(BOB)])).await;
    let settings = at(&alice, &format!("/groups/{group}/settings"));
    let by_bob = |rest: &str| at(&bob, &format!("/groups/{group}/participants{rest}"));
    let carol = json!({ "participants": [jid(CAROL)] });

    let admins = c.put(&settings, json!({ "memberAddMode": "admins" })).await;
    assert_eq!(admins.expect("settings").status, 200);
    let refused = c.post(&by_bob(""), carol.clone()).await.expect("add");
    assert_eq!(refused.status, 403, "{}", refused.text);

    let all = c.put(&settings, json!({ "memberAddMode": "all" })).await;
    assert_eq!(all.expect("settings").status, 200);
    let added = c.post(&by_bob(""), carol.clone()).await.expect("add");
    assert_eq!(added.status, 200, "{}", added.text);
    assert_eq!(added.body["success"], true, "{}", added.text);

    let promote = c
        .post(&by_bob("/promote"), carol.clone())
        .await
        .expect("promote");
    assert_eq!(promote.status, 403, "{}", promote.text);
    let remove = c.raw(Method::DELETE, &by_bob("")).json(&carol);
    let removed = c.send(remove).await.expect("remove");
    assert_eq!(removed.status, 403, "{}", removed.text);
    let detail = c
        .get(&at(&alice, &format!("/groups/{group}")))
        .await
        .expect("detail");
    assert!(
        participant(&detail.body, CAROL).is_some(),
        "{}",
        detail.text
    );
}
