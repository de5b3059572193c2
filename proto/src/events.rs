//! The twenty-three event names of the spec and the webhook envelope (wire-notes §5).
//! Nobody else spells an event name: they all come from `EventName`.

use serde::{Deserialize, Serialize};
use std::str::FromStr;
use utoipa::ToSchema;

use crate::status::UnknownValue;

macro_rules! event_names {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// An event the gateway emits. Each variant says when it fires.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        pub enum EventName {
            $(#[doc = $doc] #[serde(rename = $name)] $variant,)*
        }

        impl EventName {
            pub const ALL: &'static [EventName] = &[$(EventName::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(EventName::$variant => $name,)* }
            }
        }

        impl FromStr for EventName {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok(EventName::$variant),)*
                    other => Err(UnknownValue(other.to_string())),
                }
            }
        }
    };
}

event_names! {
    MessageReceived => "message.received", "Emitted when an inbound message arrives.";
    MessageSent => "message.sent", "Emitted when an outbound message was sent.";
    MessageAck => "message.ack", "Emitted when a delivery or read receipt updates a message.";
    MessageFailed => "message.failed", "Emitted when an outbound message fails.";
    MessageRevoked => "message.revoked", "Emitted when a message is deleted for everyone.";
    MessageEdited => "message.edited", "Emitted when a message is edited.";
    MessageReaction => "message.reaction", "Emitted when a reaction is added or removed.";
    StatusReceived => "status.received", "Emitted when a contact's status post arrives.";
    SessionStatus => "session.status", "Emitted when a session's status changes.";
    SessionQr => "session.qr", "Emitted when a new QR code is available (operator and admin only).";
    SessionAuthenticated => "session.authenticated", "Emitted when a session authenticates.";
    SessionDisconnected => "session.disconnected", "Emitted when a session disconnects.";
    SessionReconnectLoop => "session.reconnect_loop", "Emitted on every fifth consecutive reconnect attempt.";
    SessionRestriction => "session.restriction", "Emitted when an account restriction is imposed or lifted.";
    PresenceUpdate => "presence.update", "Emitted when a subscribed contact's presence changes.";
    GroupJoin => "group.join", "Emitted when a participant joins a group.";
    GroupLeave => "group.leave", "Emitted when a participant leaves a group.";
    GroupUpdate => "group.update", "Emitted when group metadata changes.";
    GroupJoinRequest => "group.join_request", "Emitted on a join request to a group the session administers.";
    CallReceived => "call.received", "Emitted on an incoming call.";
    CallAccepted => "call.accepted", "Emitted when a call is picked up.";
    CallRejected => "call.rejected", "Emitted when a call is declined.";
    CallMissed => "call.missed", "Emitted when a call rings out.";
}

impl EventName {
    /// Whether only OPERATOR and ADMIN keys may receive this event (it carries a credential).
    pub fn is_credential(self) -> bool {
        matches!(self, EventName::SessionQr)
    }
}

/// The body of every webhook delivery; keys serialize in the wire-notes order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventEnvelope {
    /// An event name, or `test` for a test delivery.
    pub event: String,
    /// ISO 8601 time the event occurred.
    pub timestamp: String,
    pub session_id: String,
    /// Stable across retries of one occurrence, so receivers can drop duplicates.
    pub idempotency_key: String,
    /// `dlv_<uuid>`, one per webhook per dispatch.
    pub delivery_id: String,
    pub data: serde_json::Value,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn there_are_twenty_three_names_and_they_round_trip() {
        assert_eq!(EventName::ALL.len(), 23);
        for e in EventName::ALL {
            assert_eq!(e.as_str().parse::<EventName>(), Ok(*e));
        }
    }
}
