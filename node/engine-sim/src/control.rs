//! The sim control API (wire-notes §10): the phone's and the rest of the network's side, keyed by session
//! id. Called by the `/api/sim/...` routes and by tests; each call mutates the network and emits the events
//! a real network would. Group events and calls live here too; nothing here is reachable by an engine.

use super::network::{Link, NetState, OutboxEntry, SimNetwork, StoredMessage, now};
use super::peers::{Op, Record, Traffic};
use std::time::Duration;
use wagate_engine_api::{
    AckStatus, CallEvent, CallPhase, EngineError, EngineEvent, EngineResult, LinkedAccount,
    MessageType, QuotedRef, ReceivedMedia, StatusUpdate,
};
use wagate_proto::Jid;
use wagate_proto::jid::ChatKind;

/// A message arriving from another account (the control API's `inbound`).
#[derive(Debug, Clone, PartialEq)]
pub struct InboundSpec {
    pub from: Jid,
    /// Defaults to `from` (a direct chat).
    pub chat_id: Option<Jid>,
    pub kind: MessageType,
    pub body: Option<String>,
    pub media: Option<ReceivedMedia>,
    pub quoted_id: Option<String>,
    pub mentioned_ids: Vec<Jid>,
}

/// What an `/inbound` became: a chat message, or a status post.
enum Arrival {
    /// Boxed: a message with its media reference is much larger than a status update.
    Message(Box<StoredMessage>),
    Status(StatusUpdate),
}

impl SimNetwork {
    /// The phone scans the QR (or accepts the pairing code): `Authenticating` now, then after the link
    /// delay `Authenticated` + `Ready`. In a cluster the phone's traffic is routed to the session from now
    /// on (`flush_peers` waits for that to reach the peers).
    pub fn scan(&self, session: &str, phone: &Jid, push_name: Option<&str>) -> EngineResult<()> {
        let mut state = self.lock();
        let credentials = format!("sim1:{session}:{phone}:{}", state.next_seq());
        let device = state
            .devices
            .get_mut(session)
            .ok_or(EngineError::NotFound(no_session(session)))?;
        if device.link != Link::AwaitingQr {
            return Err(EngineError::Busy("no QR is waiting to be scanned".into()));
        }
        if device.pairing_phone.as_ref().is_some_and(|p| p != phone) {
            return Err(EngineError::BadInput(
                "the pairing code was issued for another number".into(),
            ));
        }
        device.link = Link::Linking;
        device.phone = Some(phone.clone());
        device.credentials = Some(credentials.clone());
        device.pairing_phone = None;
        state.emit(Op::Linked {
            session: session.to_string(),
            phone: phone.clone(),
        });
        state.emit(Op::Credentials {
            session: session.to_string(),
            credentials: credentials.clone(),
        });
        let account = state.register(phone);
        if let Some(name) = push_name {
            account.push_name = Some(name.to_string());
        }
        let linked = LinkedAccount {
            phone: phone.clone(),
            push_name: account.push_name.clone(),
            credentials,
        };
        state.signal(session, EngineEvent::Authenticating);
        drop(state);
        let (net, session) = (self.clone(), session.to_string());
        tokio::spawn(async move {
            tokio::time::sleep(net.config().link_delay).await;
            let mut state = net.lock();
            if state
                .devices
                .get(&session)
                .is_some_and(|d| d.link == Link::Linking)
            {
                state.signal(&session, EngineEvent::Authenticated { account: linked });
                state.signal(&session, EngineEvent::Ready);
                state.go_online(&session);
            }
        });
        Ok(())
    }

    /// The link drops: the engine reports `Disconnected`; a later start reconnects with the credentials.
    pub fn drop_link(&self, session: &str) -> EngineResult<()> {
        let mut state = self.lock();
        let device = state
            .devices
            .get_mut(session)
            .ok_or(EngineError::NotFound(no_session(session)))?;
        if device.link == Link::Offline {
            return Err(EngineError::NotReady);
        }
        let phone = device.phone.clone().filter(|_| device.link == Link::Online);
        device.link = Link::Offline;
        state.went_offline(session, phone, false);
        state.signal(
            session,
            EngineEvent::Disconnected {
                reason: "connection lost".into(),
            },
        );
        if let Some(device) = state.devices.get_mut(session) {
            device.events = None;
        }
        Ok(())
    }

    /// The phone logs the device out: `LoggedOut`, and its credentials stop working.
    pub fn unlink(&self, session: &str) -> EngineResult<()> {
        {
            let mut state = self.lock();
            let device = state
                .devices
                .get(session)
                .ok_or(EngineError::NotFound(no_session(session)))?;
            if device.phone.is_none() {
                return Err(EngineError::NotReady);
            }
            let event = EngineEvent::LoggedOut {
                reason: "device unlinked from the phone".into(),
            };
            state.signal(session, event);
        }
        self.logout_device(session);
        Ok(())
    }

    /// `unlink` as the phone does it on a cluster-wide network: the phone knows the session whether or not a
    /// node runs it, so the unlink is accepted on any node. The shared link (`phone:`/`creds:` in Redis) is
    /// what counts: its credentials are revoked for every node, and a device of the session connected
    /// here is logged out too. Embedded, it is `unlink`.
    pub async fn unlink_anywhere(&self, session: &str) -> EngineResult<()> {
        let Some(peers) = self.peers().cloned() else {
            return self.unlink(session);
        };
        // This process's own link writes land first, so a session linked here a moment ago is found.
        self.flush_peers().await;
        let phone = peers
            .unlink(session)
            .await
            .map_err(|e| EngineError::Network(e.to_string()))?
            .ok_or_else(|| EngineError::NotFound(no_session(session)))?;
        let is_here = self
            .lock()
            .devices
            .get(session)
            .is_some_and(|d| d.phone.as_ref() == Some(&phone));
        if is_here {
            self.unlink(session)?;
        }
        self.flush_peers().await;
        Ok(())
    }

    pub fn restrict(
        &self,
        session: &str,
        kind: &str,
        active: bool,
        expires_at: Option<i64>,
    ) -> EngineResult<()> {
        let mut state = self.lock();
        state.online_phone(session)?;
        // The sim's network names no cause beyond the kind.
        let event = EngineEvent::Restriction {
            kind: kind.to_string(),
            active,
            code: None,
            expires_at,
        };
        state.signal(session, event);
        Ok(())
    }

    /// A message from `spec.from` reaches `session` (a status post, sent to `status@broadcast`); `from`
    /// becomes an existing account. Returns its id.
    pub fn inbound(&self, session: &str, spec: InboundSpec) -> EngineResult<String> {
        let mut state = self.lock();
        let me = linked_phone(&state, session)?;
        match self.arrival(&mut state, &me, spec)? {
            Arrival::Message(msg) => {
                let id = msg.id.clone();
                state.touch_chat(&me, &msg.chat_for(&me), &msg, true);
                state.deliver(session, EngineEvent::Message(Box::new(msg.to_inbound(&me))));
                // A session taken over can still quote it, and `mark-read` there finds it.
                state.share(Record::Message, &id, &msg);
                state.messages.insert(id.clone(), *msg);
                Ok(id)
            }
            Arrival::Status(update) => {
                let id = update.status_id.clone();
                state.deliver(session, EngineEvent::Status(update));
                Ok(id)
            }
        }
    }

    /// `inbound` for any linked session, as the real network takes a message for a linked device whether
    /// or not it is connected: a session this process knows goes through `inbound`; in a cluster any other
    /// session linked to a phone (served by another node, or by none right now) gets the message in its
    /// shared inbox, held there for whichever node serves it next. Answers once the message reached Redis
    /// (held or in the inbox), so a node that dies after answering loses nothing.
    pub async fn inbound_anywhere(&self, session: &str, spec: InboundSpec) -> EngineResult<String> {
        let is_known_here = linked_phone(&self.lock(), session).is_ok();
        let Some(peers) = self.peers().filter(|_| !is_known_here).cloned() else {
            let id = self.inbound(session, spec)?;
            self.flush_peers().await;
            return Ok(id);
        };
        let phone = peers
            .phone_of(session)
            .await
            .map_err(|e| EngineError::Network(e.to_string()))?
            .ok_or_else(|| EngineError::NotFound(no_session(session)))?;
        let id = {
            let mut state = self.lock();
            let to_session = |traffic| Op::ToSession {
                session: session.to_string(),
                traffic: Box::new(traffic),
            };
            match self.arrival(&mut state, &phone, spec)? {
                Arrival::Message(msg) => {
                    let id = msg.id.clone();
                    state.emit(to_session(Traffic::Message { msg: msg.clone() }));
                    state.share(Record::Message, &id, &msg);
                    state.messages.insert(id.clone(), *msg);
                    id
                }
                Arrival::Status(update) => {
                    let id = update.status_id.clone();
                    state.emit(to_session(Traffic::Status { update }));
                    id
                }
            }
        };
        self.flush_peers().await;
        Ok(id)
    }

    /// What `/inbound` puts on the network for `me`: on WhatsApp a message to `status@broadcast` is a
    /// status post (the socket engine maps it so too), never a chat message.
    fn arrival(&self, state: &mut NetState, me: &Jid, spec: InboundSpec) -> EngineResult<Arrival> {
        if spec
            .chat_id
            .as_ref()
            .is_some_and(|chat| chat.kind() == ChatKind::Status)
        {
            return Ok(Arrival::Status(self.inbound_status(state, me, spec)));
        }
        let msg = self.inbound_record(state, me, spec)?;
        Ok(Arrival::Message(Box::new(msg)))
    }

    /// The network's record of a message from `spec.from` to `me` (or the group), with a fresh id.
    fn inbound_record(
        &self,
        state: &mut NetState,
        me: &Jid,
        spec: InboundSpec,
    ) -> EngineResult<StoredMessage> {
        let quoted = resolve_quote(state, spec.quoted_id.as_deref())?;
        let chat = spec.chat_id.clone().unwrap_or_else(|| spec.from.clone());
        state.register_sender(&spec.from);
        let id = self.next_id(state);
        let msg = StoredMessage {
            id,
            from: spec.from.clone(),
            // A group, channel, status or broadcast message is addressed to that chat; a direct one to us.
            to: if matches!(chat.kind(), wagate_proto::jid::ChatKind::Individual) {
                me.clone()
            } else {
                chat
            },
            kind: spec.kind,
            body: spec.body.unwrap_or_default(),
            timestamp: now(),
            media: spec.media,
            quoted,
            mentions: spec.mentioned_ids,
            location: None,
            poll: None,
            ack: AckStatus::Delivered,
            revoked: false,
            pinned: false,
        };
        state.note_exchange(me, &spec.from);
        Ok(msg)
    }

    /// The other side moves a message `session` sent to `status`.
    pub fn ack(&self, session: &str, message_id: &str, status: AckStatus) -> EngineResult<()> {
        let mut state = self.lock();
        let me = linked_phone(&state, session)?;
        let msg = find_message(&mut state, message_id)?;
        msg.ack = status;
        let event = EngineEvent::Ack {
            message_id: msg.id.clone(),
            chat_id: msg.chat_for(&me),
            status,
        };
        state.deliver(session, event);
        Ok(())
    }

    /// `from` reacts to a message in one of `session`'s chats (empty `emoji` removes the reaction).
    pub fn react(
        &self,
        session: &str,
        message_id: &str,
        emoji: &str,
        from: &Jid,
    ) -> EngineResult<()> {
        let mut state = self.lock();
        let me = linked_phone(&state, session)?;
        let chat_id = find_message(&mut state, message_id)?.chat_for(&me);
        let event = EngineEvent::Reaction {
            message_id: message_id.to_string(),
            chat_id,
            reaction: emoji.to_string(),
            sender_id: from.clone(),
        };
        state.deliver(session, event);
        Ok(())
    }

    /// The sender deletes a message for everyone. One deleted for everyone already is 404 with no second
    /// `message.revoked`: the network has nothing left to delete.
    pub fn revoke(&self, session: &str, message_id: &str) -> EngineResult<()> {
        let mut state = self.lock();
        let me = linked_phone(&state, session)?;
        // Refused before an id is spent, so a refusal leaves the ids that follow as they were.
        live_message(&mut state, message_id)?;
        let id = self.next_id(&mut state);
        let msg = find_message(&mut state, message_id)?;
        msg.revoked = true;
        let copy = msg.clone();
        let event = EngineEvent::Revoked {
            id,
            revoked_id: copy.id.clone(),
            chat_id: copy.chat_for(&me),
            from: copy.from.clone(),
            to: copy.to.clone(),
            timestamp: now(),
        };
        // A cluster's other nodes refuse a later edit or revoke of it too.
        state.share(Record::Message, message_id, &copy);
        state.deliver(session, event);
        Ok(())
    }

    /// The sender edits a message. One deleted for everyone is 404 and raises no `message.edited`: its
    /// text must not come back to anyone consuming the events.
    pub fn edit(&self, session: &str, message_id: &str, body: &str) -> EngineResult<()> {
        let mut state = self.lock();
        let me = linked_phone(&state, session)?;
        let msg = live_message(&mut state, message_id)?;
        msg.body = body.to_string();
        let copy = msg.clone();
        let event = EngineEvent::Edited {
            message_id: copy.id.clone(),
            chat_id: copy.chat_for(&me),
            body: body.to_string(),
            from: copy.from.clone(),
            from_me: copy.from == me,
            timestamp: now(),
        };
        state.share(Record::Message, message_id, &copy);
        state.deliver(session, event);
        Ok(())
    }

    /// `from` calls `session`: `call.received`, then the outcome if one is given (else it keeps ringing
    /// until rejected). Returns the call id.
    pub fn call(
        &self,
        session: &str,
        from: &Jid,
        is_video: bool,
        outcome: Option<CallPhase>,
    ) -> EngineResult<String> {
        let mut state = self.lock();
        state.online_phone(session)?;
        state.register_sender(from);
        let call_id = self.next_id(&mut state);
        let event = |phase| CallEvent {
            phase,
            call_id: call_id.clone(),
            from: from.clone(),
            is_video,
            is_group: false,
            timestamp: now(),
        };
        state.deliver(session, EngineEvent::Call(event(CallPhase::Received)));
        match outcome {
            Some(phase) if phase != CallPhase::Received => {
                state.deliver(session, EngineEvent::Call(event(phase)));
            }
            _ => {
                let ringing = super::extras::CallRec {
                    session: session.into(),
                    event: event(CallPhase::Received),
                };
                state.share(Record::Call, &call_id, &ringing);
                state.calls.insert(call_id.clone(), ringing);
            }
        }
        Ok(call_id)
    }

    /// What `session` has put on the network, oldest first: in a cluster from every node that ran it.
    pub async fn outbox(&self, session: &str) -> Vec<OutboxEntry> {
        if let Some(peers) = self.shared_peers() {
            // This process's own sends first reach the peers, so a send is listed as soon as it answered.
            self.flush_peers().await;
            match peers.outbox(session).await {
                Ok(entries) => {
                    return entries
                        .iter()
                        .filter_map(|raw| serde_json::from_str(raw).ok())
                        .collect();
                }
                Err(error) => tracing::warn!(%error, session, "sim outbox not read from the peers"),
            }
        }
        let state = self.lock();
        state
            .devices
            .get(session)
            .map(|d| d.outbox.clone())
            .unwrap_or_default()
    }

    /// Makes the next `count` starts of `session` fail as a relaunch failure (`Network`).
    pub fn fail_next_starts(&self, session: &str, count: u32) {
        self.lock()
            .devices
            .entry(session.to_string())
            .or_default()
            .failing_starts = count;
    }

    /// Delays every engine query answer by `delay` (`None` answers at once).
    pub fn set_query_delay(&self, delay: Option<Duration>) {
        self.lock().query_delay = delay;
    }
}

pub(super) fn no_session(session: &str) -> String {
    format!("Session '{session}' has no device on the sim network")
}

/// The phone linked to `session`, online or not.
pub(super) fn linked_phone(state: &NetState, session: &str) -> EngineResult<Jid> {
    state
        .devices
        .get(session)
        .and_then(|d| d.phone.clone())
        .ok_or_else(|| EngineError::NotFound(no_session(session)))
}

pub(super) fn find_message<'a>(
    state: &'a mut NetState,
    id: &str,
) -> EngineResult<&'a mut StoredMessage> {
    state
        .messages
        .get_mut(id)
        .ok_or_else(|| EngineError::NotFound(format!("Message {id} not found")))
}

/// A message still in its chat: one deleted for everyone is gone for edits and revokes (404, worded as
/// the node words it for a stored revoked row, `messaging/ops.rs`).
pub(super) fn live_message<'a>(
    state: &'a mut NetState,
    id: &str,
) -> EngineResult<&'a mut StoredMessage> {
    match find_message(state, id)? {
        msg if msg.revoked => Err(EngineError::NotFound(format!("Message {id} not found"))),
        msg => Ok(msg),
    }
}

pub(super) fn resolve_quote(state: &NetState, id: Option<&str>) -> EngineResult<Option<QuotedRef>> {
    let Some(id) = id else { return Ok(None) };
    match state.messages.get(id) {
        Some(msg) if !msg.revoked => Ok(Some(QuotedRef {
            id: msg.id.clone(),
            body: msg.body.clone(),
        })),
        _ => Err(EngineError::NotFound(format!("Message {id} not found"))),
    }
}
