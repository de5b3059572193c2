//! The receive worker: one task per running client that takes the mapper's work in arrival order and
//! sends the finished `EngineEvent`s to the supervisor. Media is downloaded before its message goes out
//! (a failed download still sends the message, without media, and logs why), poll votes are decrypted,
//! history chunks decoded off the async threads. Keeping one ordered lane means a reaction or edit never
//! overtakes the message it refers to, at the cost of later events waiting behind a slow download.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use crate::store::SqlBackend;
use crate::whatsapp_rust::Client;
use crate::whatsapp_rust::Jid as LibJid;
use crate::whatsapp_rust::types::events::Event;
use parking_lot::Mutex as SyncMutex;
use tokio::sync::mpsc::UnboundedReceiver;
use wagate_db::DataPool;

use super::events::{EncryptedVote, Work};
use super::media::{self, Fetch};
use super::ops::Store;
use super::{history, votes};
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::store::EngineStore;
use wagate_engine_api::{EngineEvent, InboundMessage};
use wagate_proto::Jid;

/// The client, once built (the event handler exists before it). Weak: the engine owns the client.
pub(super) type ClientSlot = Arc<SyncMutex<Weak<Client>>>;

/// What the worker needs besides its queue.
pub(super) struct Receiver {
    pub session_id: String,
    pub events: wagate_engine_api::EventSender,
    /// The engine's own tables (message secrets of poll votes).
    pub pool: DataPool,
    /// The node's data (push names, stored messages) and media store.
    pub store: Arc<dyn EngineStore>,
    pub media: Arc<dyn EngineMedia>,
    pub client: ClientSlot,
    /// The account's JID while no client is there to ask (tests); the sender of its own history messages.
    pub own: Option<LibJid>,
    /// Overrides the client as the media source (tests: a downloader with loopback hosts).
    pub fetch: Option<Arc<dyn Fetch>>,
}

impl Receiver {
    /// Runs until the mapper (the client's event handler) is dropped and its queue drained.
    pub(super) async fn run(self, mut work: UnboundedReceiver<Work>) {
        let secrets = SqlBackend::new(self.pool.clone(), self.session_id.clone());
        let mut names = HashMap::new();
        while let Some(item) = work.recv().await {
            if let Work::Gated { items, done } = item {
                self.run_gated(items, done, &secrets, &mut names).await;
                continue;
            }
            for event in self.finish(item, &secrets, &mut names).await {
                // A closed channel means the supervisor dropped this engine.
                let _ = self.events.send(event);
            }
        }
    }

    /// The events one piece of work becomes, once its I/O is done.
    async fn finish(
        &self,
        item: Work,
        secrets: &SqlBackend,
        names: &mut HashMap<Jid, String>,
    ) -> Vec<EngineEvent> {
        match item {
            Work::Emit(event) => vec![event],
            Work::Download { message, payload } => {
                vec![EngineEvent::Message(
                    self.with_media(message, &payload).await,
                )]
            }
            Work::Vote(vote) => self.vote(&vote, secrets).await.into_iter().collect(),
            Work::History(event) => self.history(event).await.into_iter().collect(),
            Work::PushName { jid, name } => {
                self.remember_name(names, jid, name).await;
                Vec::new()
            }
            Work::Gated { done, .. } => {
                // Not nested by the gate; answered so the library never waits on it.
                let _ = done.send(false);
                Vec::new()
            }
        }
    }

    /// Sends the events of gated messages each with an acknowledgement; `done` answers once all of them
    /// are settled, `true` only if every one was committed (the library then acknowledges to the server).
    async fn run_gated(
        &self,
        items: Vec<Work>,
        done: tokio::sync::oneshot::Sender<bool>,
        secrets: &SqlBackend,
        names: &mut HashMap<Jid, String>,
    ) {
        let mut events = Vec::new();
        for item in items {
            events.extend(self.finish(item, secrets, names).await);
        }
        let settled = super::gate::Settlement::new(events.len(), done);
        for event in events {
            if let Err(unsent) = self.events.send_acked(event, settled.ack()) {
                // The supervisor is gone: that event is refused (the library redelivers the batch).
                drop(unsent);
            }
        }
    }

    /// Stores a push name when it differs from the last one this worker stored for the account, so a busy
    /// chat costs one write per name, not one per message.
    async fn remember_name(&self, seen: &mut HashMap<Jid, String>, jid: Jid, name: String) {
        if seen.get(&jid) == Some(&name) {
            return;
        }
        let row = [(jid.to_string(), name.clone())];
        match self.store.save_push_names(&self.session_id, &row).await {
            Ok(()) => {
                seen.insert(jid, name);
            }
            Err(error) => {
                tracing::warn!(session_id = %self.session_id, %error, "push name not stored");
            }
        }
    }

    fn client(&self) -> Option<Arc<Client>> {
        self.client.lock().upgrade()
    }

    fn store(&self) -> Store<'_> {
        Store {
            db: self.store.as_ref(),
            session_id: &self.session_id,
        }
    }

    pub(super) async fn with_media(
        &self,
        mut message: Box<InboundMessage>,
        payload: &crate::whatsapp_rust::waproto::whatsapp::Message,
    ) -> Box<InboundMessage> {
        let client = self.client();
        let fetch: Option<&dyn Fetch> = match (&self.fetch, &client) {
            (Some(fetch), _) => Some(fetch.as_ref()),
            (None, Some(client)) => Some(client.as_ref()),
            (None, None) => None,
        };
        let result = match fetch {
            Some(fetch) => media::download(fetch, self.media.as_ref(), payload).await,
            None => Err("the client is gone".to_string()),
        };
        match result {
            Ok(media) => message.media = Some(media),
            Err(reason) => tracing::warn!(
                session_id = %self.session_id, message_id = %message.id, %reason,
                "received media not downloaded; message stored without it"
            ),
        }
        message
    }

    pub(super) async fn vote(
        &self,
        vote: &EncryptedVote,
        secrets: &SqlBackend,
    ) -> Option<EngineEvent> {
        let alternates = match self.client() {
            Some(client) => counterparts(&client, &vote.creator, &vote.voter).await,
            None => None,
        };
        match votes::decrypt(vote, secrets, self.store(), alternates).await {
            Ok(decrypted) => Some(EngineEvent::PollVote(decrypted)),
            Err(error) => {
                tracing::warn!(session_id = %self.session_id, poll_id = %vote.poll_id, %error, "poll vote not read");
                None
            }
        }
    }

    async fn history(&self, event: Arc<Event>) -> Option<EngineEvent> {
        let own = self
            .client()
            .and_then(|c| c.pn())
            .or_else(|| self.own.clone())
            .map(|j| j.to_non_ad());
        let decoded = tokio::task::spawn_blocking(move || match event.as_ref() {
            Event::HistorySync(lazy) => lazy.get().map(|sync| history::batch(sync, own.as_ref())),
            _ => None,
        })
        .await;
        match decoded {
            Ok(Some(batch)) => Some(EngineEvent::History(Box::new(batch))),
            Ok(None) => {
                tracing::warn!(session_id = %self.session_id, "history sync chunk did not decode; skipped");
                None
            }
            Err(error) => {
                tracing::warn!(session_id = %self.session_id, %error, "history sync decoding failed");
                None
            }
        }
    }
}

/// The LID/PN counterparts of the poll's creator and the voter, when the client knows both.
async fn counterparts(
    client: &Client,
    creator: &LibJid,
    voter: &LibJid,
) -> Option<(LibJid, LibJid)> {
    Some((swap(client, creator).await?, swap(client, voter).await?))
}

async fn swap(client: &Client, jid: &LibJid) -> Option<LibJid> {
    let entry = client.get_lid_pn_entry(jid).await.ok()??;
    let raw = if jid.is_lid() {
        format!("{}@s.whatsapp.net", entry.phone_number)
    } else {
        format!("{}@lid", entry.lid)
    };
    raw.parse().ok()
}
