//! Group routes end to end on the sim: a two-session scenario (create, add, promote, subject, leave,
//! observed through the other session's group detail), invite codes and roles, settings, membership
//! requests and pictures.

mod resources_support;

use resources_support::{at, jid, key, linked_session, node};
use serde_json::{Value, json};

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
            json!({ "participants": [jid(BOB), jid(BOB)] }),
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
        "a partly refused batch is still 200"
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
            json!({ "base64": "aGVsbG8=", "mimetype": "image/jpeg" }),
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
