//! Automation rules end to end on the sim: the first enabled matching rule replies through the messaging
//! send path, once per cooldown per chat; non-matching messages get nothing.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{inbound, node, ready_session, wait_for};

#[tokio::test]
async fn first_matching_rule_replies_once_per_cooldown_per_chat() {
    let n = node().await;
    let c = n.client();
    let s = ready_session(&c, "auto").await;
    let base = format!("/api/sessions/{s}/automation-rules");
    let price = json!([{ "field": "body", "operator": "contains", "value": "price" }]);
    let off = c.post(&base, json!({ "name": "off", "enabled": false, "conditions": price, "replyText": "disabled" })).await.unwrap();
    assert_eq!(off.status, 201, "{}", off.text);
    let on = c.post(&base, json!({ "name": "on", "conditions": price, "replyText": "Prices at example.com", "cooldownSeconds": 3600 })).await.unwrap();
    assert_eq!(on.status, 201, "{}", on.text);
    let outbox = format!("/api/sim/sessions/{s}/outbox");
    let sent = || async {
        c.get(&outbox)
            .await
            .unwrap()
            .body
            .as_array()
            .cloned()
            .unwrap_or_default()
    };

    inbound(&c, &s, "15553334444@c.us", "hello there").await;
    inbound(&c, &s, "15553334444@c.us", "what is the PRICE?").await;
    wait_for(Duration::from_secs(10), || async {
        !sent().await.is_empty()
    })
    .await;
    inbound(&c, &s, "15553334444@c.us", "price again?").await;
    inbound(&c, &s, "15556667777@c.us", "price for me?").await;
    wait_for(Duration::from_secs(10), || async {
        sent().await.len() >= 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let all = sent().await;
    assert_eq!(
        all.len(),
        2,
        "one reply per chat within the cooldown: {all:?}"
    );
    let mut to: Vec<&str> = all.iter().filter_map(|m| m["to"].as_str()).collect();
    to.sort();
    assert_eq!(to, ["15553334444@c.us", "15556667777@c.us"]);
    assert!(all.iter().all(|m| m["body"] == "Prices at example.com"));
    // The reply took the send path: stored as the session's own message (and announced as message.sent).
    let stored = c
        .get(&format!(
            "/api/sessions/{s}/messages?chatId=15556667777@c.us"
        ))
        .await
        .unwrap();
    let mine: Vec<_> = stored
        .body
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m["direction"] == "outgoing")
        .collect();
    assert_eq!(mine.len(), 1, "{}", stored.text);
    assert_eq!(mine[0]["body"], "Prices at example.com");
}
