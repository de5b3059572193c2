//! `EngineEvent`: everything an engine reports back to its session's supervisor, as one typed enum.
//! Engines send these on the context's channel; the supervisor drives the state table and the event
//! pipeline with them. No webhook naming here: the pipeline maps variants to event names.

use super::entities::{PresenceEntry, StatusUpdate};
use super::types::{AckStatus, HistoryBatch, InboundMessage, PollVote};
use serde::{Deserialize, Serialize};
use wagate_proto::Jid;

/// The credentials an engine hands out after linking, stored by the service and given back on the next
/// start so the session reconnects without a QR. `credentials` is opaque outside the engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LinkedAccount {
    pub phone: Jid,
    pub push_name: Option<String>,
    pub credentials: String,
}

/// What an engine observed. Each variant is emitted by the engine of one session only.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    /// Emitted when the engine has a (new) QR to show; repeats on every rotation until scanned.
    /// `data_url` is a `data:image/png;base64,...` URL.
    Qr { data_url: String },
    /// Emitted when a pairing code was issued for a phone number (also returned by the request).
    PairingCode { code: String },
    /// Emitted when the phone scanned the QR or accepted the pairing code; linking is under way.
    Authenticating,
    /// Emitted when the link is established; carries the credentials to store for later starts.
    Authenticated { account: LinkedAccount },
    /// Emitted when the session is connected and can send (after `Authenticated`).
    Ready,
    /// Emitted when the connection dropped without a logout; the supervisor decides on reconnecting.
    Disconnected { reason: String },
    /// Emitted when the phone (or the network) logged this device out; stored credentials are void.
    LoggedOut { reason: String },
    /// Emitted by an engine that reconnects by itself (the socket engine) each time a connection ends or an
    /// attempt fails, with what it does next. `failures` counts consecutive failed reconnect attempts (the
    /// first connect of a start and a connection that worked are none; a first connect that failed reports
    /// 0 with its `reason`); `reason` is why the last attempt failed (`None`: the connection worked, or the
    /// network asked for a restart); `next_delay_ms` is when the next attempt is made, scheduled with
    /// `EngineContext::reconnect` (`ReconnectPolicy::next_attempt`), or `None` when the policy's attempts are
    /// spent and the engine makes none.
    SelfRetry {
        failures: u32,
        reason: Option<String>,
        next_delay_ms: Option<u64>,
    },
    /// Emitted when the engine is connected but cannot go on until the user does something outside the
    /// service (`reason` says what); a session restart clears it.
    ActionRequired { reason: String },
    /// Emitted when the engine hit a terminal error after it started (the network refused this client).
    Failed { reason: String },
    /// Emitted when an account restriction is imposed (`active`) or lifted.
    Restriction {
        kind: String,
        active: bool,
        /// The network's own token for the cause, verbatim, when it names one; the gateway derives one
        /// from `kind` otherwise.
        code: Option<String>,
        /// Unix seconds.
        expires_at: Option<i64>,
    },
    /// Emitted when a message arrives from the network (including the account's own messages sent from
    /// another device, with `from_me`).
    Message(Box<InboundMessage>),
    /// Emitted when the delivery state of a message sent by this session changes.
    Ack {
        message_id: String,
        chat_id: Jid,
        status: AckStatus,
    },
    /// Emitted when a message in one of the account's chats was deleted for everyone.
    Revoked {
        id: String,
        revoked_id: String,
        chat_id: Jid,
        from: Jid,
        to: Jid,
        timestamp: i64,
    },
    /// Emitted when a message in one of the account's chats was edited.
    Edited {
        message_id: String,
        chat_id: Jid,
        body: String,
        from: Jid,
        from_me: bool,
        timestamp: i64,
    },
    /// Emitted when a reaction is added to (or, with an empty `reaction`, removed from) a message.
    Reaction {
        message_id: String,
        chat_id: Jid,
        reaction: String,
        sender_id: Jid,
    },
    /// Emitted when a subscribed contact's presence changes.
    Presence {
        chat_id: Jid,
        participants: Vec<PresenceEntry>,
    },
    /// Emitted when a group the account belongs to changes (roster, metadata, join requests).
    Group(GroupEvent),
    /// Emitted when a call rings, is picked up, declined or missed.
    Call(CallEvent),
    /// Emitted when a contact posts a status the account may see.
    Status(StatusUpdate),
    /// Emitted for each chunk of the account's message history the phone sends (after linking, and
    /// later on demand); stored without raising message events.
    History(Box<HistoryBatch>),
    /// Emitted when someone votes on (or withdraws a vote from) a poll in one of the account's chats.
    PollVote(PollVote),
}

/// What happened in a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupAction {
    Join,
    Leave,
    Update,
    JoinRequest,
}

/// Metadata changes carried by a group update; `None` fields did not change.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupChanges {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announce: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked: Option<bool>,
    /// Participants promoted to admin (`true`) or demoted (`false`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin: Option<bool>,
    /// The disappearing-message timer in seconds (0 = off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ephemeral_seconds: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_add_mode: Option<MemberAddMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub picture: Option<PictureChange>,
}

impl GroupChanges {
    /// Whether nothing changed (an update that must not be announced).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Who may add members, named as the settings route names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberAddMode {
    All,
    Admins,
}

impl MemberAddMode {
    pub fn admins_only(admins_only: bool) -> Self {
        if admins_only { Self::Admins } else { Self::All }
    }
}

/// A group picture was set (or replaced) or removed; the event carries no image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PictureChange {
    Set,
    Removed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupEvent {
    pub action: GroupAction,
    pub group_id: Jid,
    pub actor_id: Option<Jid>,
    pub participant_ids: Vec<Jid>,
    pub changes: Option<GroupChanges>,
    /// Unix seconds.
    pub timestamp: i64,
}

/// The stage of a call an event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallPhase {
    Received,
    Accepted,
    Rejected,
    Missed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallEvent {
    pub phase: CallPhase,
    pub call_id: String,
    pub from: Jid,
    pub is_video: bool,
    pub is_group: bool,
    /// Unix seconds.
    pub timestamp: i64,
}
