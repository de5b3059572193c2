//! Presence: the account's own online state (`PUT /presence {available}`), subscriptions to a chat's
//! presence through the library's `Presence` feature, and the last presence seen per chat, kept from the
//! session's own events (`PresenceBook`) because the network has no presence query: a read answers what
//! the subscription has reported so far.

use std::collections::HashMap;

use crate::whatsapp_rust::features::{PresenceError, PresenceStatus};
use parking_lot::Mutex;
use wagate_proto::Jid;

use super::{Client, fail, wa};
use wagate_engine_api::{EngineError, EngineEvent, EngineResult, PresenceEntry};

/// The spec's `{available: boolean}` as the protocol's two presence values.
fn status(available: bool) -> PresenceStatus {
    if available {
        PresenceStatus::Available
    } else {
        PresenceStatus::Unavailable
    }
}

fn presence_error(err: PresenceError) -> EngineError {
    match err {
        // The display name arrives by app-state sync shortly after linking; the network ignores a
        // presence without it, so this is "not yet", not a refusal.
        PresenceError::PushNameEmpty => EngineError::Busy(
            "The account's display name has not synced yet; set presence again shortly".into(),
        ),
        other => fail(other),
    }
}

pub(crate) async fn set(client: &Client, available: bool) -> EngineResult<()> {
    client
        .presence()
        .set(status(available))
        .await
        .map_err(presence_error)
}

/// Subscribes to a contact's presence (the library re-subscribes after a reconnect). Groups have no
/// presence subscription of their own: their members' typing arrives as chat state without one.
pub(crate) async fn subscribe(client: &Client, chat: &Jid) -> EngineResult<()> {
    if chat.is_group() {
        return Ok(());
    }
    client
        .presence()
        .subscribe(wa(chat)?)
        .await
        .map_err(presence_error)
}

/// The latest presence per participant of each chat, from the session's presence events.
#[derive(Debug, Default)]
pub(crate) struct PresenceBook {
    chats: Mutex<HashMap<Jid, HashMap<Jid, PresenceEntry>>>,
}

impl PresenceBook {
    /// Remembers what a presence event says; other events pass by.
    pub(crate) fn observe(&self, event: &EngineEvent) {
        let EngineEvent::Presence {
            chat_id,
            participants,
        } = event
        else {
            return;
        };
        let mut chats = self.chats.lock();
        let chat = chats.entry(chat_id.clone()).or_default();
        for entry in participants {
            let last_seen = entry.last_seen.or_else(|| {
                // Typing states carry no last-seen time: keep the one an earlier update gave.
                chat.get(&entry.id).and_then(|known| known.last_seen)
            });
            chat.insert(
                entry.id.clone(),
                PresenceEntry {
                    last_seen,
                    ..entry.clone()
                },
            );
        }
    }

    /// `None` while nothing was heard about the chat (the spec's null presence).
    pub(crate) fn read(&self, chat: &Jid) -> Option<Vec<PresenceEntry>> {
        let chats = self.chats.lock();
        let mut entries: Vec<PresenceEntry> = chats.get(chat)?.values().cloned().collect();
        entries.sort_by(|a, b| a.id.cmp(&b.id));
        Some(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wagate_engine_api::PresenceState;

    fn jid(s: &str) -> Jid {
        Jid::parse(s).unwrap()
    }

    fn presence(
        chat: &str,
        who: &str,
        state: PresenceState,
        last_seen: Option<i64>,
    ) -> EngineEvent {
        EngineEvent::Presence {
            chat_id: jid(chat),
            participants: vec![PresenceEntry {
                id: jid(who),
                state,
                last_seen,
            }],
        }
    }

    #[test]
    fn available_maps_to_the_protocols_available_and_false_to_unavailable() {
        assert_eq!(status(true), PresenceStatus::Available);
        assert_eq!(status(false), PresenceStatus::Unavailable);
        assert_eq!(status(true).as_str(), "available");
        assert_eq!(status(false).as_str(), "unavailable");
    }

    #[test]
    fn a_missing_display_name_is_a_retryable_conflict() {
        assert!(matches!(
            presence_error(PresenceError::PushNameEmpty),
            EngineError::Busy(_)
        ));
    }

    #[test]
    fn the_book_answers_null_until_a_chat_reports_then_its_latest_state() {
        let book = PresenceBook::default();
        let alice = "15550001111@c.us";
        assert_eq!(book.read(&jid(alice)), None);
        book.observe(&presence(
            alice,
            alice,
            PresenceState::Unavailable,
            Some(1_700_000_000),
        ));
        book.observe(&presence(alice, alice, PresenceState::Composing, None));
        let entries = book.read(&jid(alice)).unwrap();
        assert_eq!(
            entries,
            vec![PresenceEntry {
                id: jid(alice),
                state: PresenceState::Composing,
                last_seen: Some(1_700_000_000),
            }]
        );
    }

    #[test]
    fn a_group_collects_each_members_state() {
        let book = PresenceBook::default();
        let group = "120363000000000001@g.us";
        book.observe(&presence(
            group,
            "15550002222@c.us",
            PresenceState::Composing,
            None,
        ));
        book.observe(&presence(
            group,
            "15550001111@c.us",
            PresenceState::Recording,
            None,
        ));
        let states: Vec<(String, PresenceState)> = book
            .read(&jid(group))
            .unwrap()
            .into_iter()
            .map(|e| (e.id.to_string(), e.state))
            .collect();
        assert_eq!(
            states,
            vec![
                ("15550001111@c.us".to_string(), PresenceState::Recording),
                ("15550002222@c.us".to_string(), PresenceState::Composing),
            ]
        );
    }
}
