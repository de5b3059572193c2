//! What the session reports, as the engine API's `EngineEvent`s: QR payloads rendered to data URLs, the
//! linked account (its credentials are the profile archive, filled in on stop), messages and acks in
//! the engine API's types. Nothing is acknowledged to the network here: WhatsApp Web keeps its own.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::qr::qr_data_url;
use wagate_engine_api::{
    AckStatus, EngineEvent, EventSender, InboundMessage, LinkedAccount, Location, MessageType,
    Poll, QuotedRef,
};
use wagate_proto::Jid;

use super::media::received_media;
use crate::{BrowserEvent, BrowserSession, Me};

/// Forwards the session's events until either side is gone. A message's media is downloaded into the media
/// store before the message is handed on, so events keep the page's order.
pub(super) async fn forward(
    mut rx: UnboundedReceiver<BrowserEvent>,
    events: EventSender,
    account: Arc<Mutex<Option<LinkedAccount>>>,
    session: BrowserSession,
    media: Arc<dyn EngineMedia>,
) {
    while let Some(event) = rx.recv().await {
        let mut mapped = map(&event, &account);
        if let (BrowserEvent::Message(raw), [EngineEvent::Message(m)]) =
            (&event, mapped.as_mut_slice())
        {
            m.media = received_media(&session, media.as_ref(), raw).await;
        }
        for mapped in mapped {
            if events.send(mapped).is_err() {
                // The supervisor dropped this engine: the browser has no one to report to.
                let _ = session.kill().await;
                return;
            }
        }
    }
}

pub(super) fn map(
    event: &BrowserEvent,
    account: &Mutex<Option<LinkedAccount>>,
) -> Vec<EngineEvent> {
    match event {
        BrowserEvent::Qr(payload) => match qr_data_url(payload) {
            Ok(data_url) => vec![EngineEvent::Qr { data_url }],
            Err(err) => {
                tracing::warn!(error = %err, "QR from the page not rendered");
                Vec::new()
            }
        },
        BrowserEvent::Authenticated(me) => linked(me.clone(), account)
            .map(|account| vec![EngineEvent::Authenticated { account }])
            .unwrap_or_default(),
        BrowserEvent::Ready => vec![EngineEvent::Ready],
        BrowserEvent::LoggedOut => vec![EngineEvent::LoggedOut {
            reason: "logged out from the phone".into(),
        }],
        BrowserEvent::Disconnected(reason) => vec![EngineEvent::Disconnected {
            reason: reason.clone(),
        }],
        BrowserEvent::Message(m) => message(m)
            .map(|m| vec![EngineEvent::Message(Box::new(m))])
            .unwrap_or_default(),
        BrowserEvent::Ack(a) => acks(a),
    }
}

/// The account the page reports; the stored archive (if any) stays its credentials until the next stop.
fn linked(me: Me, account: &Mutex<Option<LinkedAccount>>) -> Option<LinkedAccount> {
    let Some(phone) = me.id.as_deref().and_then(|id| Jid::parse(id).ok()) else {
        tracing::warn!(id = ?me.id, "linked account without a usable id");
        return None;
    };
    let mut slot = account.lock();
    let credentials = slot
        .as_ref()
        .filter(|a| a.phone == phone)
        .map(|a| a.credentials.clone())
        .unwrap_or_default();
    let linked = LinkedAccount {
        phone,
        push_name: me.push_name,
        credentials,
    };
    *slot = Some(linked.clone());
    Some(linked)
}

fn jid(v: &Value) -> Option<Jid> {
    Jid::parse(v.as_str()?).ok()
}

pub(super) fn kind(t: &str) -> MessageType {
    match t {
        "chat" => MessageType::Text,
        "image" => MessageType::Image,
        "video" => MessageType::Video,
        "audio" => MessageType::Audio,
        "ptt" => MessageType::Voice,
        "document" => MessageType::Document,
        "sticker" => MessageType::Sticker,
        "location" => MessageType::Location,
        "vcard" | "multi_vcard" => MessageType::Contact,
        "poll_creation" => MessageType::Poll,
        "order" => MessageType::Order,
        "product" => MessageType::Product,
        _ => MessageType::Unknown,
    }
}

/// A message as the facade serialises it; `None` when its ids are not WhatsApp ids.
pub(super) fn message(m: &Value) -> Option<InboundMessage> {
    let from = jid(&m["from"])?;
    let to = jid(&m["to"])?;
    let from_me = m["fromMe"].as_bool().unwrap_or(false);
    let chat_id = if from_me { to.clone() } else { from.clone() };
    Some(InboundMessage {
        id: m["id"].as_str()?.to_string(),
        chat_id,
        from,
        to,
        author: jid(&m["author"]),
        from_me,
        kind: kind(m["type"].as_str().unwrap_or("chat")),
        body: m["body"].as_str().unwrap_or_default().to_string(),
        timestamp: m["timestamp"].as_i64().unwrap_or_default(),
        media: None,
        quoted: quoted(m),
        mentioned_ids: m["mentionedIds"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(jid)
            .collect(),
        location: location(&m["location"]),
        poll: poll(&m["poll"]),
    })
}

fn quoted(m: &Value) -> Option<QuotedRef> {
    Some(QuotedRef {
        id: m["quotedId"].as_str()?.to_string(),
        body: m["quotedBody"].as_str().unwrap_or_default().to_string(),
    })
}

fn location(l: &Value) -> Option<Location> {
    Some(Location {
        latitude: l["lat"].as_f64()?,
        longitude: l["lng"].as_f64()?,
        description: l["description"].as_str().map(str::to_string),
    })
}

fn poll(p: &Value) -> Option<Poll> {
    Some(Poll {
        name: p["name"].as_str()?.to_string(),
        options: p["options"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o.as_str().map(str::to_string))
            .collect(),
        allow_multiple: p["allowMultiple"].as_bool().unwrap_or(true),
    })
}

/// wa-js ack levels: -1 failed, 0 pending (clock), 1 sent, 2 delivered, 3 read, 4 played.
fn acks(a: &Value) -> Vec<EngineEvent> {
    let status = match a["ack"].as_i64() {
        Some(-1) => AckStatus::Failed,
        Some(0) => AckStatus::Pending,
        Some(1) => AckStatus::Sent,
        Some(2) => AckStatus::Delivered,
        Some(3..) => AckStatus::Read,
        _ => return Vec::new(),
    };
    let Some(chat_id) = jid(&a["chat"]) else {
        return Vec::new();
    };
    a["ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|id| EngineEvent::Ack {
            message_id: id.to_string(),
            chat_id: chat_id.clone(),
            status,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_messages_acks_and_the_linked_account() {
        let account = Mutex::new(None);
        let msg = json!({"id": "false_1555@c.us_AB", "from": "1555@c.us", "to": "1666@c.us",
            "fromMe": false, "type": "chat", "body": "hi", "timestamp": 7});
        match map(&BrowserEvent::Message(msg), &account).as_slice() {
            [EngineEvent::Message(m)] => {
                assert_eq!(
                    (m.body.as_str(), m.kind, m.chat_id.to_string()),
                    ("hi", MessageType::Text, "1555@c.us".into())
                );
            }
            other => panic!("{other:?}"),
        }
        let acks = map(
            &BrowserEvent::Ack(json!({"ack": 3, "chat": "1555@c.us", "ids": ["a", "b"]})),
            &account,
        );
        assert_eq!(acks.len(), 2);
        assert!(matches!(
            &acks[0],
            EngineEvent::Ack {
                status: AckStatus::Read,
                ..
            }
        ));
        let me = Me {
            id: Some("15550001111@c.us".into()),
            push_name: Some("P".into()),
        };
        assert!(matches!(
            map(&BrowserEvent::Authenticated(me), &account).as_slice(),
            [EngineEvent::Authenticated { .. }]
        ));
        assert!(account.lock().is_some());
        assert!(
            map(
                &BrowserEvent::Message(json!({"from": "nonsense"})),
                &account
            )
            .is_empty()
        );
    }
}
