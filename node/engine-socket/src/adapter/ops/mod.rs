//! Every socket-engine operation, one file per route family, as free functions over the library's
//! `Client` (plus our data DB where the library has no query: chats, contacts, stored messages,
//! statuses; and the node's media store for stored blobs and guarded URL fetches). What they share
//! lives here: library error -> `EngineError`, JID conversion, the message key of a stored message,
//! and the clock.

pub(crate) mod calls;
pub(crate) mod catalog;
pub(crate) mod channels;
pub(crate) mod chats;
pub(crate) mod contacts;
pub(crate) mod groups;
pub(crate) mod labels;
pub(crate) mod messaging;
pub(crate) mod presence;
pub(crate) mod preview;
pub(crate) mod profile;
pub(crate) mod send;
pub(crate) mod status;

use crate::build::wa;
use crate::failure::{self, Failure, FailureKind};
use crate::jid as wajid;
use crate::whatsapp_rust::Jid as WaJid;
use wagate_proto::Jid;

use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::store::{EngineStore, StoredMessage};
use wagate_engine_api::{EngineError, EngineResult};

pub(crate) use crate::whatsapp_rust::Client;

/// The node's data (the engine API's store interface) and the session id its rows are keyed by.
#[derive(Clone, Copy)]
pub(crate) struct Store<'a> {
    pub db: &'a dyn EngineStore,
    pub session_id: &'a str,
}

/// The node's media store and this session's proxy: stored media for forwards, and URL fetches (link
/// previews, catalog images) through the store's outbound-address guard.
#[derive(Clone, Copy)]
pub(crate) struct Media<'a> {
    pub store: &'a dyn EngineMedia,
    pub proxy_url: Option<&'a str>,
}

/// A library error as the gateway's `EngineError` (the spec's 503/5xx/403/404/400 rules).
pub(crate) fn fail<E: std::error::Error + 'static>(err: E) -> EngineError {
    from_failure(failure::classify(&err))
}

/// An `anyhow::Error` from the library (upload, raw IQ helpers).
pub(crate) fn fail_any(err: &anyhow::Error) -> EngineError {
    from_failure(failure::classify_dyn(err.as_ref()))
}

pub(crate) fn from_failure(f: Failure) -> EngineError {
    match f.kind {
        FailureKind::NotReady => EngineError::NotReady,
        FailureKind::Timeout => EngineError::Timeout,
        FailureKind::Network | FailureKind::Internal => EngineError::Network(f.message),
        FailureKind::Rejected => EngineError::Rejected(f.message),
        FailureKind::NotFound => EngineError::NotFound(f.message),
        FailureKind::BadInput => EngineError::BadInput(f.message),
    }
}

/// The library's JID for a gateway JID.
pub(crate) fn wa(jid: &Jid) -> EngineResult<WaJid> {
    wajid::to_wa(jid)
        .ok_or_else(|| EngineError::BadInput(format!("'{jid}' is not a valid WhatsApp id")))
}

pub(crate) fn was(jids: &[Jid]) -> EngineResult<Vec<WaJid>> {
    jids.iter().map(wa).collect()
}

/// The gateway's JID for a library JID (`None` for servers the gateway does not name).
pub(crate) fn wire(jid: &WaJid) -> Option<Jid> {
    wajid::from_wa(jid)
}

pub(crate) fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A stored message of this session by network (or row) id.
pub(crate) async fn stored(store: Store<'_>, id: &str) -> EngineResult<Option<StoredMessage>> {
    Ok(store.db.message(store.session_id, id).await?)
}

/// The protocol key of message `id` in `chat`: who sent it comes from our store. A message we never
/// stored is assumed to be the peer's in a one-to-one chat; in a group its author is unknown, so the
/// key cannot be built and the message counts as not found.
pub(crate) async fn message_key(
    store: Store<'_>,
    chat: &Jid,
    id: &str,
) -> EngineResult<wa::MessageKey> {
    let row = stored(store, id).await?;
    key_for(chat, id, row.as_ref())
}

pub(crate) fn key_for(
    chat: &Jid,
    id: &str,
    row: Option<&StoredMessage>,
) -> EngineResult<wa::MessageKey> {
    let remote = wa(chat)?.to_string();
    let from_me = row.is_some_and(|r| r.from_me);
    let participant = if chat.is_group() && !from_me {
        let author = row
            .and_then(|r| r.author.clone().or_else(|| Some(r.from_jid.clone())))
            .ok_or_else(|| EngineError::NotFound(format!("Message {id} not found")))?;
        let author = Jid::parse(&author).map_err(|e| EngineError::NotFound(e.to_string()))?;
        Some(wa(&author)?.to_string())
    } else {
        None
    };
    Ok(wa::MessageKey {
        remote_jid: Some(remote),
        from_me: Some(from_me),
        id: Some(
            row.map(|r| r.wa_message_id.clone())
                .unwrap_or_else(|| id.to_string()),
        ),
        participant,
    })
}

/// Who wrote a stored message, as the library's JID (own account for our messages).
pub(crate) fn author_of(client: &Client, chat: &Jid, row: &StoredMessage) -> EngineResult<WaJid> {
    if row.from_me {
        return client
            .pn()
            .map(|j| j.to_non_ad())
            .ok_or(EngineError::NotReady);
    }
    let raw = if chat.is_group() {
        row.author.as_deref().unwrap_or(&row.from_jid)
    } else {
        &row.from_jid
    };
    let jid = Jid::parse(raw).map_err(|e| EngineError::NotFound(e.to_string()))?;
    wa(&jid)
}
