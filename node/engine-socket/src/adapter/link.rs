//! The session's link as the socket engine sees it: connect attempts and failures reported by our transport
//! (the library retries silently, so this is the only place a retry is visible), and the library's
//! connection events (QR, pairing, connected, disconnected, logged out, bans, refusals) turned into the
//! lifecycle `EngineEvent`s the supervisor's state table consumes.

use std::sync::{Arc, Weak};

use crate::transport::TransportObserver;
use crate::whatsapp_rust::Client;
use crate::whatsapp_rust::types::events::{Event, TempBanReason};
use parking_lot::Mutex as SyncMutex;
use wagate_proto::Jid;

use wagate_engine_api::qr::qr_data_url;
use wagate_engine_api::{EngineEvent, LinkedAccount};

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
    /// Consecutive failed attempts.
    failures: u32,
    /// The current attempt got past the handshake (the library reported a QR, a login or a drop).
    progressed: bool,
    /// The current attempt's failure was already reported (a dial error).
    reported: bool,
    /// Why the current attempt is failing, when known.
    reason: Option<String>,
    /// The operator is stopping or logging out: the library's own disconnect/logout events are ours.
    tearing_down: bool,
    /// The device was logged out (by the phone, the server or the operator): its auth state is void.
    logged_out: bool,
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
        // While the operator stops or logs out, the lifecycle is the operator's: a connect, drop or retry
        // seen now (a logout connects just to unlink) must not move the session after the stop/logout did.
        if self.state.lock().tearing_down {
            return;
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
    /// Consecutive failed attempts so far (tests and the benchmark read it).
    pub(super) fn failures(&self) -> u32 {
        self.state.lock().failures
    }

    #[cfg(test)]
    pub(super) fn attempts(&self) -> u32 {
        self.state.lock().attempts
    }

    fn fail(&self, state: &mut LinkState, reason: String) -> EngineEvent {
        state.failures = state.failures.saturating_add(1);
        state.reported = true;
        EngineEvent::SelfRetry {
            failures: state.failures,
            reason: Some(reason),
        }
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
            Event::PairingQrCodesExhausted(_) => {
                self.progressed();
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
                    // The library retries; the next attempt reports this as the failure's reason.
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

impl TransportObserver for LinkTracker {
    fn attempt(&self) {
        let event = {
            let mut state = self.state.lock();
            state.attempts = state.attempts.saturating_add(1);
            let event = if state.attempts == 1 {
                None
            } else if state.progressed {
                state.failures = 0;
                Some(EngineEvent::SelfRetry {
                    failures: 0,
                    reason: None,
                })
            } else if !state.reported {
                let reason = state
                    .reason
                    .take()
                    .unwrap_or_else(|| CLOSED_EARLY.to_string());
                Some(self.fail(&mut state, reason))
            } else {
                None
            };
            state.progressed = false;
            state.reported = false;
            state.reason = None;
            event
        };
        if let Some(event) = event {
            self.emit(event);
        }
    }

    fn dial_failed(&self, reason: &str) {
        let event = {
            let mut state = self.state.lock();
            self.fail(&mut state, reason.to_string())
        };
        self.emit(event);
    }

    fn closed(&self, reason: &str) {
        let mut state = self.state.lock();
        if !state.progressed && state.reason.is_none() {
            state.reason = Some(format!("{CLOSED_EARLY} ({reason})"));
        }
    }
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
