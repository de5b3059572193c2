//! The last presence each chat reported to a loaded session, and the presence read that answers it.
//!
//! OpenWA's clients read presence as "the last presence reported for a chat, or None when none has been",
//! with `observedAt` the time the gateway received the report: presence cannot be fetched from the
//! network, only received. So every `presence.update` the session's loop hands to the event pipeline is
//! remembered here first (`PresenceMemory`, one per runtime), merged per participant, and a read answers
//! it. In memory only and bounded; an engine run's reports go with that run (a subscription lasts one
//! connection), and all of them with the runtime. An engine that pushes no presence (the browser engine)
//! is still asked on each read: what its page knows is all there is to report.

use std::collections::{BTreeMap, HashMap};

use wagate_proto::Jid;

use super::error::SessionResult;
use super::service::SessionService;
use crate::engine::PresenceEntry;
use crate::store::now_ms;

/// Chats remembered per session; the one reported longest ago makes room for a new one.
const MAX_CHATS: usize = 1024;
/// Participants remembered per chat (a group's member limit); later newcomers are not remembered.
const MAX_PARTICIPANTS: usize = 1024;

/// A chat's presence as last reported: each participant's latest entry, and when the latest report arrived.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ObservedPresence {
    pub participants: Vec<PresenceEntry>,
    /// Epoch milliseconds: when the gateway received the chat's latest report.
    pub observed_at_ms: i64,
}

#[derive(Debug, Default)]
struct ChatPresence {
    participants: BTreeMap<Jid, PresenceEntry>,
    observed_at_ms: i64,
}

/// What a session's presence reports said, per chat.
#[derive(Debug, Default)]
pub(crate) struct PresenceMemory {
    chats: HashMap<Jid, ChatPresence>,
}

impl PresenceMemory {
    /// Records a report received at `at_ms`.
    pub(crate) fn record(&mut self, chat: &Jid, participants: &[PresenceEntry], at_ms: i64) {
        if !self.chats.contains_key(chat) && self.chats.len() >= MAX_CHATS {
            self.forget_oldest();
        }
        let known = self.chats.entry(chat.clone()).or_default();
        known.observed_at_ms = at_ms;
        for entry in participants {
            let earlier = known.participants.get(&entry.id);
            if earlier.is_none() && known.participants.len() >= MAX_PARTICIPANTS {
                continue;
            }
            // Typing states carry no last-seen time: keep the one an earlier report gave.
            let last_seen = entry
                .last_seen
                .or_else(|| earlier.and_then(|e| e.last_seen));
            let merged = PresenceEntry {
                last_seen,
                ..entry.clone()
            };
            known.participants.insert(entry.id.clone(), merged);
        }
    }

    /// `None` while the chat reported nothing.
    pub(crate) fn read(&self, chat: &Jid) -> Option<ObservedPresence> {
        let known = self.chats.get(chat)?;
        Some(ObservedPresence {
            participants: known.participants.values().cloned().collect(),
            observed_at_ms: known.observed_at_ms,
        })
    }

    pub(crate) fn clear(&mut self) {
        self.chats.clear();
    }

    fn forget_oldest(&mut self) {
        let oldest = self
            .chats
            .iter()
            .min_by_key(|(_, c)| c.observed_at_ms)
            .map(|(chat, _)| chat.clone());
        if let Some(chat) = oldest {
            self.chats.remove(&chat);
        }
    }
}

impl SessionService {
    /// The chat's last reported presence; `None` when none was reported, or when the session has no
    /// running engine here (spec rule 5), whatever was reported before.
    pub(crate) async fn presence(
        &self,
        id: &str,
        chat: &Jid,
    ) -> SessionResult<Option<ObservedPresence>> {
        let Some(engine) = self.running_engine(id) else {
            return Ok(None);
        };
        if !self.capabilities().emits_presence {
            let entries = engine.presence(chat).await?;
            return Ok(entries.map(|participants| ObservedPresence {
                participants,
                observed_at_ms: now_ms(),
            }));
        }
        Ok(self.runtime(id).and_then(|r| r.last_presence(chat)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::PresenceState;

    fn jid(s: &str) -> Jid {
        Jid::parse(s).expect("jid")
    }

    fn entry(who: &str, state: PresenceState, last_seen: Option<i64>) -> PresenceEntry {
        PresenceEntry {
            id: jid(who),
            state,
            last_seen,
        }
    }

    #[test]
    fn a_chat_reads_null_until_it_reports_then_its_latest_report() {
        let mut memory = PresenceMemory::default();
        let ann = jid("4915100000001@c.us");
        assert_eq!(memory.read(&ann), None);
        let offline = entry("4915100000001@c.us", PresenceState::Unavailable, Some(7));
        memory.record(&ann, &[offline], 1_000);
        let typing = entry("4915100000001@c.us", PresenceState::Composing, None);
        memory.record(&ann, &[typing], 2_000);
        let read = memory.read(&ann).expect("reported");
        assert_eq!(read.observed_at_ms, 2_000);
        assert_eq!(
            read.participants,
            vec![entry(
                "4915100000001@c.us",
                PresenceState::Composing,
                Some(7)
            )]
        );
        memory.clear();
        assert_eq!(memory.read(&ann), None);
    }

    #[test]
    fn a_full_memory_forgets_the_chat_reported_longest_ago() {
        let mut memory = PresenceMemory::default();
        for n in 0..MAX_CHATS {
            let chat = jid(&format!("49151{n:08}@c.us"));
            let who = entry(&format!("49151{n:08}@c.us"), PresenceState::Available, None);
            memory.record(&chat, &[who], 10 + n as i64);
        }
        let newcomer = jid("4917700000000@c.us");
        let who = entry("4917700000000@c.us", PresenceState::Available, None);
        memory.record(&newcomer, &[who], 1_000_000);
        assert_eq!(memory.chats.len(), MAX_CHATS);
        assert!(memory.read(&jid("4915100000000@c.us")).is_none());
        assert!(memory.read(&newcomer).is_some());
    }
}
