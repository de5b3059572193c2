//! Messages the network has forgotten but the session stored. The embedded network holds its messages in
//! memory (a cluster's shares them through Redis), so after the process restarts it no longer knows the
//! messages sent or received before; the real network never needed them. A quote, reaction, edit, revoke,
//! pin, poll vote or forward naming such a message puts it back from the session's store first
//! (`EngineStore::message`), as the session recorded it.

use serde::Deserialize;
use wagate_engine_api::store::{EngineStore, StoredMessage as StoredRow};
use wagate_engine_api::{AckStatus, Location, MessageType, Poll, ReceivedMedia, StoredFile};
use wagate_proto::Jid;
use wagate_proto::jid::ChatKind;

use super::network::{SimNetwork, StoredMessage};

/// The stored row's `media` column: the object and how to present it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MediaColumn {
    key: String,
    mimetype: String,
    filename: Option<String>,
    size_bytes: u64,
}

/// The stored row's `extra` column.
#[derive(Deserialize, Default)]
struct ExtraColumn {
    location: Option<Location>,
    poll: Option<Poll>,
}

impl SimNetwork {
    /// Puts message `id` back from `session`'s store when neither this network nor its peers hold it.
    pub(super) async fn recall(&self, session: &str, store: &dyn EngineStore, id: &str) {
        self.pull_message(id).await;
        if self.lock().messages.contains_key(id) {
            return;
        }
        let row = match store.message(session, id).await {
            Ok(Some(row)) => row,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, session, id, "sim message not recalled from the store");
                return;
            }
        };
        let mut state = self.lock();
        let Some(me) = state.devices.get(session).and_then(|d| d.phone.clone()) else {
            return;
        };
        if let Some(msg) = from_row(&row, &me) {
            state.messages.entry(msg.id.clone()).or_insert(msg);
        }
    }
}

/// The network's record of a stored message, as account `me` stored it; `None` for a row naming no valid
/// JID.
fn from_row(row: &StoredRow, me: &Jid) -> Option<StoredMessage> {
    let chat = Jid::parse(&row.chat_id).ok()?;
    let from = Jid::parse(&row.from_jid).ok()?;
    let to = match chat.kind() {
        ChatKind::Individual if !row.from_me => me.clone(),
        _ => chat,
    };
    let kind = serde_json::from_value(serde_json::Value::String(row.kind.clone()))
        .unwrap_or(MessageType::Unknown);
    let extra: ExtraColumn = row
        .extra
        .as_deref()
        .and_then(|raw| serde_json::from_str(raw).ok())
        .unwrap_or_default();
    let media = row
        .media
        .as_deref()
        .and_then(|raw| serde_json::from_str::<MediaColumn>(raw).ok())
        .map(|m| ReceivedMedia {
            mimetype: m.mimetype,
            filename: m.filename,
            data: Vec::new(),
            stored: Some(Box::new(StoredFile {
                key: m.key,
                size: m.size_bytes,
            })),
        });
    Some(StoredMessage {
        id: row.wa_message_id.clone(),
        from,
        to,
        kind,
        body: row.body.clone().unwrap_or_default(),
        timestamp: row.timestamp,
        media,
        quoted: None,
        mentions: Vec::new(),
        location: extra.location,
        poll: extra.poll,
        ack: AckStatus::Sent,
        // The store keeps a message deleted for everyone as type `revoked`: recalled, it stays deleted.
        revoked: row.kind == "revoked",
        pinned: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message deleted for everyone is stored as type `revoked`: recalled, it is still deleted, so a
    /// late edit or revoke of it is refused as before the restart.
    #[test]
    fn a_row_stored_as_revoked_is_recalled_revoked() {
        let me = Jid::parse("491111111111@c.us").expect("test JID");
        let row = |kind: &str| StoredRow {
            wa_message_id: "3EB0FORGOTTEN".into(),
            chat_id: "495555555555@c.us".into(),
            from_jid: "495555555555@c.us".into(),
            kind: kind.into(),
            body: (kind == "text").then(|| "hi".into()),
            timestamp: 1,
            ..StoredRow::default()
        };
        let revoked = from_row(&row("revoked"), &me).map(|m| m.revoked);
        let live = from_row(&row("text"), &me).map(|m| m.revoked);
        assert_eq!((revoked, live), (Some(true), Some(false)));
    }
}
