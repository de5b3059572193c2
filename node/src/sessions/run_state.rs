//! `RunState`: what the supervisor knows about a loaded session between transitions. Built from the stored
//! row when the session is loaded and written back (whole, fenced) after every transition.

use tokio::time::Instant;
use wagate_proto::SessionStatus;

use super::backoff::ReconnectPolicy;
use crate::engine::LinkedAccount;
use crate::store::sessions::{RuntimeState, SessionRecord};

#[derive(Debug, Clone)]
pub(crate) struct RunState {
    pub status: SessionStatus,
    pub phone: Option<String>,
    pub push_name: Option<String>,
    pub last_error: Option<String>,
    pub restriction: Option<serde_json::Value>,
    pub has_credentials: bool,
    pub desired_running: bool,
    pub connected_at: Option<i64>,
    pub last_active: Option<i64>,
    pub proxy_url: Option<String>,
    /// Read once per start from the session config.
    pub policy: ReconnectPolicy,
    /// Consecutive failed reconnect attempts.
    pub failed_attempts: u32,
    /// The QR a client can fetch now; dropped when the engine dies or the link completes.
    pub qr: Option<String>,
    /// Inputs of the next transition, set by the event that triggers it.
    pub pending_qr: Option<String>,
    pub pending_account: Option<LinkedAccount>,
    pub pending_disconnect: Option<String>,
    pub pending_restriction: Option<PendingRestriction>,
    pub reconnect_at: Option<Instant>,
    /// The phone logged this linked session out and it has not linked again (the table's `lost_link`).
    /// Kept in memory only: a node restart in between forgets it, and the relink then goes unwarned.
    pub lost_link: bool,
    /// The status read from the row still stands as the previous engine left it: the first start on this
    /// runtime settles it (a stale engine status becomes disconnected) and clears this, so a start racing
    /// it finds a running session instead of settling, and tearing down, the one just started.
    pub row_unsettled: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingRestriction {
    pub kind: String,
    pub active: bool,
    /// Never empty: the engine's token for the cause, or the kind upper-cased when it gave none.
    pub code: String,
    pub expires_at: Option<i64>,
}

impl RunState {
    pub(crate) fn from_record(record: &SessionRecord) -> RunState {
        RunState {
            status: record.status,
            phone: record.phone.clone(),
            push_name: record.push_name.clone(),
            last_error: record.last_error.clone(),
            restriction: record.restriction.clone(),
            has_credentials: record.has_credentials,
            desired_running: record.desired_running,
            connected_at: record.connected_at,
            last_active: record.last_active,
            proxy_url: record.proxy_url.clone(),
            policy: ReconnectPolicy {
                base_delay_ms: record.config.reconnect_base_delay,
                max_attempts: record.config.max_reconnect_attempts,
            },
            failed_attempts: 0,
            qr: None,
            pending_qr: None,
            pending_account: None,
            pending_disconnect: None,
            pending_restriction: None,
            reconnect_at: None,
            lost_link: false,
            row_unsettled: true,
        }
    }

    pub(crate) fn to_runtime(&self) -> RuntimeState {
        RuntimeState {
            status: Some(self.status),
            phone: self.phone.clone(),
            push_name: self.push_name.clone(),
            last_error: self.last_error.clone(),
            restriction: self.restriction.clone(),
            desired_running: self.desired_running,
            has_credentials: self.has_credentials,
            connected_at: self.connected_at,
            last_active: self.last_active,
        }
    }
}
