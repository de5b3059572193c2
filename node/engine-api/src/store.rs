//! `EngineStore`: what an engine may read and write of the node's data, keyed by session id. The node
//! implements it over its own tables (`node/src/engine/node_store.rs`); an engine never sees SQL, a pool
//! or a table name. Everything here is what the socket engine needs today because its library cannot
//! query it (chat and contact lists, live statuses, the key of a stored message); a new engine asks for
//! more by adding a method here, not by reaching into the node.

use async_trait::async_trait;
use wagate_proto::Jid;

use crate::context::EngineKind;
use crate::entities::{ChatSummary, StatusUpdate};
use crate::error::EngineError;
use crate::event::LinkedAccount;

/// Why the node's store did not answer (the database is down, a row is corrupt).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("data store: {0}")]
pub struct StoreFailure(pub String);

impl From<StoreFailure> for EngineError {
    /// A store that does not answer is an outage of the session's backend: retryable, like the network.
    fn from(err: StoreFailure) -> EngineError {
        EngineError::Network(err.to_string())
    }
}

pub type StoreResult<T> = Result<T, StoreFailure>;

/// A message the node stored for the session (sent, received or from history), as an engine needs it
/// to address it on the network again: quote, react, edit, revoke, forward, vote, mark read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredMessage {
    /// The network's id of the message (the API's id may be the row id).
    pub wa_message_id: String,
    pub chat_id: String,
    pub from_jid: String,
    /// The member who wrote it, in groups.
    pub author: Option<String>,
    /// The account's own message (sent from here or another device).
    pub from_me: bool,
    /// The message type as stored (`MessageType`'s wire name).
    pub kind: String,
    pub body: Option<String>,
    /// Unix seconds.
    pub timestamp: i64,
    /// The stored media's metadata (JSON: `key`, `mimetype`, `filename`, ...), when it has media.
    pub media: Option<String>,
    /// Type-specific extras (JSON: a poll's definition, a location ...).
    pub extra: Option<String>,
}

/// The node's data, as the engines of one node see it. Methods take the session id: one store serves
/// every session.
#[async_trait]
pub trait EngineStore: Send + Sync {
    /// The session's chats: one per chat with stored messages, overlaid with what history sync said
    /// about each (name, archived, pinned, muted, unread), plus chats history named without a message.
    /// Newest first.
    async fn chats(&self, session_id: &str) -> StoreResult<Vec<ChatSummary>>;

    /// The accounts of the session's one-to-one chats and those history named, each with the best
    /// name known (push name first, else the chat's name), ordered by id.
    async fn contact_names(&self, session_id: &str) -> StoreResult<Vec<(String, Option<String>)>>;

    /// Remembers the push names the network told the session, `(jid, name)` each.
    async fn save_push_names(
        &self,
        session_id: &str,
        names: &[(String, String)],
    ) -> StoreResult<()>;

    /// A stored message of the session by network id or row id.
    async fn message(&self, session_id: &str, id: &str) -> StoreResult<Option<StoredMessage>>;

    /// Live status posts (not yet expired at `now_ms`): every post the account sees, its own and its
    /// contacts' (`contact = None`), or one contact's.
    async fn live_statuses(
        &self,
        session_id: &str,
        contact: Option<&Jid>,
        now_ms: i64,
    ) -> StoreResult<Vec<StatusUpdate>>;

    /// Who the account's own status post was sent to; `None` when no such post is stored.
    async fn status_recipients(
        &self,
        session_id: &str,
        status_id: &str,
    ) -> StoreResult<Option<Vec<Jid>>>;

    /// Replaces the credentials the node keeps for the session under `kind` (handed back as
    /// `EngineContext::linked` at the next start), for an engine whose credentials change after
    /// `Authenticated` reported them: the browser stores its profile archive when it stops.
    async fn save_credentials(
        &self,
        session_id: &str,
        kind: EngineKind,
        account: &LinkedAccount,
    ) -> StoreResult<()>;
}

/// A store with nothing in it that accepts every write: for engines under test, and engines that keep
/// nothing of the node's.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmptyStore;

#[async_trait]
impl EngineStore for EmptyStore {
    async fn chats(&self, _session_id: &str) -> StoreResult<Vec<ChatSummary>> {
        Ok(Vec::new())
    }
    async fn contact_names(&self, _session_id: &str) -> StoreResult<Vec<(String, Option<String>)>> {
        Ok(Vec::new())
    }
    async fn save_push_names(
        &self,
        _session_id: &str,
        _names: &[(String, String)],
    ) -> StoreResult<()> {
        Ok(())
    }
    async fn message(&self, _session_id: &str, _id: &str) -> StoreResult<Option<StoredMessage>> {
        Ok(None)
    }
    async fn live_statuses(
        &self,
        _session_id: &str,
        _contact: Option<&Jid>,
        _now_ms: i64,
    ) -> StoreResult<Vec<StatusUpdate>> {
        Ok(Vec::new())
    }
    async fn status_recipients(
        &self,
        _session_id: &str,
        _status_id: &str,
    ) -> StoreResult<Option<Vec<Jid>>> {
        Ok(None)
    }
    async fn save_credentials(
        &self,
        _session_id: &str,
        _kind: EngineKind,
        _account: &LinkedAccount,
    ) -> StoreResult<()> {
        Ok(())
    }
}

/// A store in memory for engines under test: it answers `message` from the messages put in with
/// `insert_message` and remembers the push names and credentials engines write (read back with
/// `push_names` and `credentials`); chats, contacts and statuses answer empty.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: std::sync::Mutex<Memory>,
}

#[derive(Debug, Default)]
struct Memory {
    messages: Vec<(String, StoredMessage)>,
    push_names: std::collections::BTreeMap<(String, String), String>,
    credentials: Vec<(String, EngineKind, LinkedAccount)>,
}

impl MemoryStore {
    fn memory(&self) -> StoreResult<std::sync::MutexGuard<'_, Memory>> {
        self.inner
            .lock()
            .map_err(|_| StoreFailure("memory store poisoned".into()))
    }

    /// Stores a message of `session_id`, found afterwards by its network id.
    pub fn insert_message(&self, session_id: &str, message: StoredMessage) -> StoreResult<()> {
        self.memory()?
            .messages
            .push((session_id.to_string(), message));
        Ok(())
    }

    /// The push names written for `session_id`, `(jid, name)` ordered by jid.
    pub fn push_names(&self, session_id: &str) -> StoreResult<Vec<(String, String)>> {
        Ok(self
            .memory()?
            .push_names
            .iter()
            .filter(|((session, _), _)| session == session_id)
            .map(|((_, jid), name)| (jid.clone(), name.clone()))
            .collect())
    }

    /// The credentials written for `session_id`, oldest first.
    pub fn credentials(&self, session_id: &str) -> StoreResult<Vec<(EngineKind, LinkedAccount)>> {
        Ok(self
            .memory()?
            .credentials
            .iter()
            .filter(|(session, _, _)| session == session_id)
            .map(|(_, kind, account)| (*kind, account.clone()))
            .collect())
    }
}

#[async_trait]
impl EngineStore for MemoryStore {
    async fn chats(&self, _session_id: &str) -> StoreResult<Vec<ChatSummary>> {
        Ok(Vec::new())
    }
    async fn contact_names(&self, session_id: &str) -> StoreResult<Vec<(String, Option<String>)>> {
        Ok(self
            .push_names(session_id)?
            .into_iter()
            .map(|(jid, name)| (jid, Some(name)))
            .collect())
    }
    async fn save_push_names(
        &self,
        session_id: &str,
        names: &[(String, String)],
    ) -> StoreResult<()> {
        let mut memory = self.memory()?;
        for (jid, name) in names {
            memory
                .push_names
                .insert((session_id.to_string(), jid.clone()), name.clone());
        }
        Ok(())
    }
    async fn message(&self, session_id: &str, id: &str) -> StoreResult<Option<StoredMessage>> {
        Ok(self
            .memory()?
            .messages
            .iter()
            .find(|(session, m)| session == session_id && m.wa_message_id == id)
            .map(|(_, m)| m.clone()))
    }
    async fn live_statuses(
        &self,
        _session_id: &str,
        _contact: Option<&Jid>,
        _now_ms: i64,
    ) -> StoreResult<Vec<StatusUpdate>> {
        Ok(Vec::new())
    }
    async fn status_recipients(
        &self,
        _session_id: &str,
        _status_id: &str,
    ) -> StoreResult<Option<Vec<Jid>>> {
        Ok(None)
    }
    async fn save_credentials(
        &self,
        session_id: &str,
        kind: EngineKind,
        account: &LinkedAccount,
    ) -> StoreResult<()> {
        self.memory()?
            .credentials
            .push((session_id.to_string(), kind, account.clone()));
        Ok(())
    }
}
