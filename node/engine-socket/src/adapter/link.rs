//! The session's link as the socket engine sees it: the outcome of each connection attempt (from our
//! transport's dial errors and early closes, and the library's connection events), the schedule of the next
//! one on the session's reconnect policy (`attempt_ended`, driven by the engine's run loop in
//! `lifecycle.rs`: the library's own reconnect loop is off), and the library's connection events (QR,
//! pairing, connected, disconnected, logged out, bans, refusals) turned into the lifecycle `EngineEvent`s
//! the supervisor's state table consumes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::transport::TransportObserver;
use crate::whatsapp_rust::Client;
use crate::whatsapp_rust::types::events::{Event, TempBanReason};
use parking_lot::Mutex as SyncMutex;
use wagate_proto::Jid;

use wagate_engine_api::qr::qr_data_url;
use wagate_engine_api::{EngineEvent, LinkedAccount, ReconnectPolicy};

/// What the user must do when the server asks for a passkey (the gateway holds none).
pub(super) const PASSKEY_ACTION: &str = "WhatsApp asks for a passkey to link this device, which the gateway cannot \
     provide: link the session by scanning the QR code with the phone (or remove the passkey requirement in the \
     phone's WhatsApp settings), then start the session again";

/// Why an attempt that reached the server did not get anywhere, when the transport gave no better reason.
const CLOSED_EARLY: &str =
    "the server closed the connection before the WhatsApp handshake completed";

#[derive(Debug, Default)]
struct LinkState {
    /// Connection attempts of this engine instance (the first one is the start itself).
    attempts: u32,
    /// Consecutive failed reconnect attempts (the policy's count: neither the start's own connect nor a
    /// restart the network asked for is a reconnect).
    failures: u32,
    /// The current attempt is a reconnect (scheduled after a failed attempt or a drop).
    reconnecting: bool,
    /// The current attempt got past the handshake (the library reported a QR, a login or a drop).
    progressed: bool,
    /// The current connection's drop was reported (`Disconnected`).
    dropped: bool,
    /// Why the current attempt is failing, when known.
    reason: Option<String>,
    /// The engine reported an end the supervisor acts on (failed, logged out, QR codes exhausted with the
    /// client closed): no further attempt is made.
    finished: bool,
    /// The operator is stopping or logging out: the library's own disconnect/logout events are ours.
    tearing_down: bool,
    /// The device was logged out (by the phone, the server or the operator): its auth state is void.
    logged_out: bool,
}

/// What the engine's run loop does after an attempt ended: wait `delay`, then make the next attempt
/// (`reconnect`: whether it is one of the policy's reconnect attempts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NextAttempt {
    pub delay: Duration,
    pub reconnect: bool,
}

/// Shared by the engine, its transport factory and its library event handler.
pub(crate) struct LinkTracker {
    session_id: String,
    events: wagate_engine_api::EventSender,
    state: SyncMutex<LinkState>,
    /// The client, once built (the handler exists before it). Weak: the client owns the handler.
    client: SyncMutex<Weak<Client>>,
}

impl LinkTracker {
    pub(super) fn new(session_id: String, events: wagate_engine_api::EventSender) -> Self {
        Self {
            session_id,
            events,
            state: SyncMutex::new(LinkState::default()),
            client: SyncMutex::new(Weak::new()),
        }
    }

    pub(super) fn set_client(&self, client: &Arc<Client>) {
        *self.client.lock() = Arc::downgrade(client);
    }

    fn client(&self) -> Option<Arc<Client>> {
        self.client.lock().upgrade()
    }

    fn emit(&self, event: EngineEvent) {
        {
            // While the operator stops or logs out, the lifecycle is the operator's: a connect, drop or
            // retry seen now (a logout connects just to unlink) must not move the session after the
            // stop/logout did.
            let mut state = self.state.lock();
            if state.tearing_down {
                return;
            }
            // The supervisor stops or replaces an engine that failed or was logged out: it retries no more.
            if matches!(
                event,
                EngineEvent::Failed { .. } | EngineEvent::LoggedOut { .. }
            ) {
                state.finished = true;
            }
        }
        // A closed channel means the supervisor dropped this engine; nothing is listening any more.
        let _ = self.events.send(event);
    }

    pub(super) fn begin_teardown(&self) {
        self.state.lock().tearing_down = true;
    }

    pub(super) fn mark_logged_out(&self) {
        self.state.lock().logged_out = true;
    }

    pub(super) fn is_logged_out(&self) -> bool {
        self.state.lock().logged_out
    }

    #[cfg(test)]
    /// Consecutive failed reconnect attempts so far (tests read it).
    pub(super) fn failures(&self) -> u32 {
        self.state.lock().failures
    }

    #[cfg(test)]
    pub(super) fn attempts(&self) -> u32 {
        self.state.lock().attempts
    }

    /// The run loop starts a connection attempt (`reconnect`: one of the policy's reconnect attempts).
    pub(super) fn begin_attempt(&self, reconnect: bool) {
        let mut state = self.state.lock();
        state.attempts = state.attempts.saturating_add(1);
        state.reconnecting = reconnect;
        state.progressed = false;
        state.dropped = false;
        state.reason = None;
    }

    /// The run loop's attempt ended (the library's run returned): reports it to the supervisor as a
    /// `SelfRetry` and answers when to make the next one, on the session's reconnect `policy`, or `None`
    /// when none is made (stopping, a failed or logged-out engine the supervisor acts on, the policy's
    /// attempts spent, or a drop with no reconnect allowed, which the supervisor already failed).
    ///
    /// - A connection that dropped: reconnect attempt 1 after `policy.delay_ms(1)`, as the supervisor
    ///   would schedule after a drop.
    /// - A connection that got somewhere and ended without a drop (the restart the network asks for
    ///   after pairing): the next attempt at once; it is not a reconnect.
    /// - A failed attempt: a failed reconnect counts (the start's own connect does not), and the next
    ///   reconnect waits `base * 2^(n-1)` capped at 5 minutes (`ReconnectPolicy::next_attempt`).
    pub(super) fn attempt_ended(&self, policy: &ReconnectPolicy) -> Option<NextAttempt> {
        let (event, next) = {
            let mut state = self.state.lock();
            if state.tearing_down || state.finished {
                return None;
            }
            if state.progressed {
                state.failures = 0;
                let next = if state.dropped {
                    let (_, delay_ms) = policy.next_attempt(0)?;
                    NextAttempt {
                        delay: Duration::from_millis(delay_ms),
                        reconnect: true,
                    }
                } else {
                    NextAttempt {
                        delay: Duration::ZERO,
                        reconnect: false,
                    }
                };
                let event = EngineEvent::SelfRetry {
                    failures: 0,
                    reason: None,
                    next_delay_ms: Some(duration_ms(next.delay)),
                };
                (event, Some(next))
            } else {
                if state.reconnecting {
                    state.failures = state.failures.saturating_add(1);
                }
                let reason = state
                    .reason
                    .take()
                    .unwrap_or_else(|| CLOSED_EARLY.to_string());
                let next = policy
                    .next_attempt(state.failures)
                    .map(|(_, delay_ms)| NextAttempt {
                        delay: Duration::from_millis(delay_ms),
                        reconnect: true,
                    });
                let event = EngineEvent::SelfRetry {
                    failures: state.failures,
                    reason: Some(reason),
                    next_delay_ms: next.map(|n| duration_ms(n.delay)),
                };
                (event, next)
            }
        };
        self.emit(event);
        next
    }

    /// Maps a library connection event; `false` when it is not one (the caller maps it as data).
    pub(super) fn on_event(&self, event: &Event) -> bool {
        let out: Vec<EngineEvent> = match event {
            Event::PairingQrCode(qr) => {
                self.progressed();
                match qr_data_url(&qr.code) {
                    Ok(data_url) => vec![EngineEvent::Qr { data_url }],
                    Err(error) => {
                        tracing::warn!(session_id = %self.session_id, %error, "QR rendering failed");
                        vec![]
                    }
                }
            }
            Event::PairingCode(code) => vec![EngineEvent::PairingCode {
                code: code.code.clone(),
            }],
            Event::PairSuccess(_) => {
                self.progressed();
                vec![EngineEvent::Authenticating]
            }
            Event::PairError(e) => vec![EngineEvent::Failed {
                reason: format!("Linking the device failed: {}; start the session again for a new QR", e.error),
            }],
            Event::PairPasskeyRequest(_) => vec![EngineEvent::ActionRequired {
                reason: PASSKEY_ACTION.to_string(),
            }],
            Event::PairPasskeyError(e) => vec![EngineEvent::Failed {
                reason: format!("Linking with a passkey failed: {e:?}"),
            }],
            Event::QrScannedWithoutMultidevice(_) => vec![EngineEvent::ActionRequired {
                reason: "The phone that scanned the QR code cannot link devices: update WhatsApp on the phone, then \
                         start the session again"
                    .into(),
            }],
            Event::PairingQrCodesExhausted(exhausted) => {
                {
                    let mut state = self.state.lock();
                    state.progressed = true;
                    // The library closed the client for good: the supervisor relaunches after this drop.
                    state.finished |= exhausted.disconnected;
                }
                vec![EngineEvent::Disconnected {
                    reason: "no phone scanned the QR codes in time".into(),
                }]
            }
            Event::Connected(_) => {
                {
                    let mut state = self.state.lock();
                    state.progressed = true;
                    state.failures = 0;
                    state.reason = None;
                }
                let account = self.account();
                let mut out = Vec::with_capacity(2);
                if let Some(account) = account {
                    out.push(EngineEvent::Authenticated { account });
                }
                out.push(EngineEvent::Ready);
                out
            }
            Event::Disconnected(d) => {
                let tearing_down = {
                    let mut state = self.state.lock();
                    state.progressed = true;
                    state.dropped = true;
                    state.tearing_down
                };
                if tearing_down {
                    vec![]
                } else {
                    vec![EngineEvent::Disconnected {
                        reason: d.reason.to_string(),
                    }]
                }
            }
            Event::LoggedOut(l) => {
                let tearing_down = {
                    let mut state = self.state.lock();
                    state.progressed = true;
                    state.logged_out = true;
                    state.tearing_down
                };
                if tearing_down {
                    vec![]
                } else {
                    vec![EngineEvent::LoggedOut {
                        reason: format!("logged out ({:?})", l.reason),
                    }]
                }
            }
            Event::StreamReplaced(_) => vec![EngineEvent::Failed {
                reason: "Another client connected with this session's credentials (stream replaced); start the \
                         session again to take the link back"
                    .into(),
            }],
            Event::TemporaryBan(ban) => {
                let secs = ban.expire.num_seconds();
                let expires_at = chrono::Utc::now().timestamp().saturating_add(secs);
                vec![
                    // The network refuses the connection itself, which OpenWA's clients call a
                    // `tos_block` (as opposed to a `reachout_timelock`, under which chats go on).
                    EngineEvent::Restriction {
                        kind: "tos_block".into(),
                        active: true,
                        code: Some(ban_code(&ban.code)),
                        expires_at: Some(expires_at),
                    },
                    EngineEvent::Failed {
                        reason: format!(
                            "WhatsApp banned this account temporarily ({:?}) for {} seconds; start the session \
                             again after the ban",
                            ban.code, secs
                        ),
                    },
                ]
            }
            Event::ClientOutdated(_) => vec![EngineEvent::Failed {
                reason: "WhatsApp refused this client version as outdated: update wagate".into(),
            }],
            Event::ConnectFailure(f) => {
                if f.reason.should_reconnect() {
                    // The attempt fails; the run loop reports this as its reason and schedules the next.
                    self.state.lock().reason = Some(format!(
                        "WhatsApp refused the connection ({:?}{})",
                        f.reason,
                        f.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
                    ));
                    vec![]
                } else {
                    vec![EngineEvent::Failed {
                        reason: format!(
                            "WhatsApp refused to authenticate this device ({:?}{})",
                            f.reason,
                            f.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
                        ),
                    }]
                }
            }
            _ => return false,
        };
        for event in out {
            self.emit(event);
        }
        true
    }

    fn progressed(&self) {
        self.state.lock().progressed = true;
    }

    /// The linked account as the client knows it after login.
    fn account(&self) -> Option<LinkedAccount> {
        let client = self.client()?;
        let pn = client.pn()?;
        let phone = match Jid::from_phone(&pn.user) {
            Ok(phone) => phone,
            Err(error) => {
                tracing::warn!(session_id = %self.session_id, %error, "own phone number not usable");
                return None;
            }
        };
        let push_name = Some(client.push_name()).filter(|n| !n.is_empty());
        // The auth state itself lives in the engine's store (keyed by session id); this only records who.
        let credentials =
            serde_json::json!({ "store": "socket", "jid": pn.to_string() }).to_string();
        Some(LinkedAccount {
            phone,
            push_name,
            credentials,
        })
    }
}

/// The transport reports why an attempt failed before the library could say anything; the attempts
/// themselves are counted by the run loop (`begin_attempt`).
impl TransportObserver for LinkTracker {
    fn attempt(&self) {}

    fn dial_failed(&self, reason: &str) {
        self.state.lock().reason = Some(reason.to_string());
    }

    fn closed(&self, reason: &str) {
        let mut state = self.state.lock();
        if !state.progressed && state.reason.is_none() {
            state.reason = Some(format!("{CLOSED_EARLY} ({reason})"));
        }
    }
}

fn duration_ms(delay: Duration) -> u64 {
    u64::try_from(delay.as_millis()).unwrap_or(u64::MAX)
}

/// The network's reason for a temporary ban as a restriction `code`: the library's name for it, in the
/// upper-case token style OpenWA's clients read (`SENT_TO_TOO_MANY_PEOPLE`); a reason the library does not
/// name keeps the network's number verbatim.
fn ban_code(reason: &TempBanReason) -> String {
    let name = match reason {
        TempBanReason::SentToTooManyPeople => "SENT_TO_TOO_MANY_PEOPLE",
        TempBanReason::BlockedByUsers => "BLOCKED_BY_USERS",
        TempBanReason::CreatedTooManyGroups => "CREATED_TOO_MANY_GROUPS",
        TempBanReason::SentTooManySameMessage => "SENT_TOO_MANY_SAME_MESSAGE",
        TempBanReason::BroadcastList => "BROADCAST_LIST",
        TempBanReason::Unknown(_) => return reason.code().to_string(),
    };
    name.to_string()
}

#[cfg(test)]
mod ban_code_tests {
    use super::*;

    #[test]
    fn a_ban_names_its_reason_and_an_unnamed_one_keeps_the_number() {
        assert_eq!(ban_code(&TempBanReason::BlockedByUsers), "BLOCKED_BY_USERS");
        assert_eq!(ban_code(&TempBanReason::Unknown(105)), "105");
    }
}
