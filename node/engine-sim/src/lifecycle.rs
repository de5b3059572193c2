//! Engine-side lifecycle on the sim network: start (QR, or straight to ready with credentials), the QR
//! rotation task, pairing codes, stop, logout and kill. Input comes from `SimEngine`; the phone's side
//! (scan, drop, unlink) is in `control.rs`. Reconnect policy is not decided here: that is the supervisor's.

use super::network::{Link, NetState, SimNetwork};
use super::peers::Op;
use wagate_engine_api::EventSender;
use wagate_engine_api::qr::qr_data_url;
use wagate_engine_api::{EngineError, EngineEvent, EngineResult, LinkedAccount};
use wagate_proto::Jid;

/// Alphabet of pairing codes: no 0/O or 1/I look-alikes.
const PAIRING_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTVWXYZ23456789";

impl SimNetwork {
    /// Connects `session`. With credentials (given, or, embedded, remembered from a link made on this network) the
    /// device goes online and emits `Authenticated` + `Ready`; otherwise it emits a first `Qr` now and
    /// rotates it until scanned.
    pub fn start_device(
        &self,
        session: &str,
        events: EventSender,
        linked: Option<&LinkedAccount>,
    ) -> EngineResult<()> {
        // In a cluster this process's memory of a link can be stale (the session was logged out while
        // another node ran it): there only the credentials the node presents count.
        let may_remember = self.peers().is_none();
        let mut state = self.lock();
        let device = state.devices.entry(session.to_string()).or_default();
        if device.failing_starts > 0 {
            device.failing_starts -= 1;
            return Err(EngineError::Network(
                "simulated engine launch failure".into(),
            ));
        }
        // A previous engine dropped without stop leaves a closed channel behind: that device is free.
        let abandoned = device.events.as_ref().is_none_or(|tx| tx.is_closed());
        if device.link != Link::Offline && !abandoned {
            return Err(EngineError::Busy("engine already started".into()));
        }
        device.link = Link::Offline;
        let remembered = match (&device.phone, &device.credentials) {
            (Some(phone), Some(credentials)) if may_remember => Some(LinkedAccount {
                phone: phone.clone(),
                push_name: None,
                credentials: credentials.clone(),
            }),
            _ => None,
        };
        match linked.cloned().or(remembered) {
            Some(account) => reconnect(&mut state, session, events, account),
            None => {
                device.events = Some(events);
                device.link = Link::AwaitingQr;
                // A code issued to an earlier engine run died with it.
                device.pairing_phone = None;
                device.qr_generation += 1;
                let generation = device.qr_generation;
                drop(state);
                self.emit_qr(session, generation, 0);
                let net = self.clone();
                let session = session.to_string();
                tokio::spawn(async move { net.rotate_qr(session, generation).await });
                Ok(())
            }
        }
    }

    /// Emits QR number `round` if the device still waits for this generation's scan.
    fn emit_qr(&self, session: &str, generation: u64, round: u64) -> bool {
        let data_url = match qr_data_url(&format!("sim:{session}:{generation}:{round}")) {
            Ok(url) => url,
            Err(error) => {
                tracing::warn!(session_id = session, %error, "sim QR rendering failed");
                return false;
            }
        };
        let mut state = self.lock();
        match state.devices.get(session) {
            Some(d) if d.link == Link::AwaitingQr && d.qr_generation == generation => {
                state.signal(session, EngineEvent::Qr { data_url });
                true
            }
            _ => false,
        }
    }

    async fn rotate_qr(self, session: String, generation: u64) {
        let interval = self.config().qr_interval;
        let mut round = 1;
        loop {
            tokio::time::sleep(interval).await;
            if !self.emit_qr(&session, generation, round) {
                return;
            }
            round += 1;
        }
    }

    /// Issues a pairing code while the device waits for a QR scan; `scan` then accepts it.
    pub fn pairing_code(&self, session: &str, phone: &str) -> EngineResult<String> {
        let phone = Jid::from_phone(phone).map_err(|e| EngineError::BadInput(e.to_string()))?;
        let mut state = self.lock();
        let seq = state.next_seq();
        let device = state
            .devices
            .get_mut(session)
            .ok_or(EngineError::NotReady)?;
        if device.link != Link::AwaitingQr {
            return Err(EngineError::Busy(
                "a pairing code can only be requested while a QR is waiting".into(),
            ));
        }
        device.pairing_phone = Some(phone);
        let code = pairing_code_for(seq);
        state.signal(session, EngineEvent::PairingCode { code: code.clone() });
        Ok(code)
    }

    /// Disconnects and keeps the link (a later start reconnects without a QR).
    pub fn stop_device(&self, session: &str) {
        let mut state = self.lock();
        if let Some(device) = state.devices.get_mut(session) {
            let was_online = device.link == Link::Online;
            device.link = Link::Offline;
            device.events = None;
            let phone = device.phone.clone().filter(|_| was_online);
            state.went_offline(session, phone, false);
        }
    }

    /// Forgets the link a stopped device remembers, without revoking its credentials (the session's
    /// credential wipe, on delete too): the next start without credentials asks for a QR, and the phone is
    /// off the network unless another session links it or it wrote through the control API (wire-notes
    /// §10). A running device is left alone.
    pub fn forget_link(&self, session: &str) {
        let mut state = self.lock();
        let phone = match state.devices.get_mut(session) {
            Some(device) if device.link != Link::Offline => return,
            Some(device) => {
                device.credentials = None;
                device.pairing_phone = None;
                device.phone.take()
            }
            None => None,
        };
        if let Some(phone) = phone {
            state.unlist_if_unlinked(&phone);
        }
        // Wherever the session ran last (its device may be unknown here), the shared directory drops it.
        state.emit(Op::Forget(session.to_string()));
    }

    /// In a cluster, learns whether the credentials a start presents were revoked through any node (a
    /// phone unlink while no engine of the session ran here), so `reconnect` answers them `LoggedOut`; a
    /// stopped device here that still remembers them forgets its link, so nothing stale applies later.
    pub async fn pull_revoked(&self, session: &str, linked: Option<&LinkedAccount>) {
        let (Some(peers), Some(account)) = (self.peers().cloned(), linked) else {
            return;
        };
        match peers.is_revoked(&account.credentials).await {
            Ok(true) => {
                let mut state = self.lock();
                state.revoked.insert(account.credentials.clone());
                if let Some(device) = state.devices.get_mut(session)
                    && device.link == Link::Offline
                    && device.credentials.as_ref() == Some(&account.credentials)
                {
                    device.credentials = None;
                    device.phone = None;
                    device.pairing_phone = None;
                }
            }
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, session_id = session, "sim revoked credentials not read");
            }
        }
    }

    /// Unlinks the device: its credentials stop working and its phone is forgotten.
    pub fn logout_device(&self, session: &str) {
        let mut state = self.lock();
        if let Some(device) = state.devices.get_mut(session) {
            let credentials = device.credentials.take();
            let phone = device.phone.take();
            device.pairing_phone = None;
            device.link = Link::Offline;
            device.events = None;
            if let Some(credentials) = credentials {
                // In a cluster every node's reconnect must refuse them too (`pull_revoked`).
                state.emit(Op::Revoke {
                    session: session.to_string(),
                    credentials: credentials.clone(),
                });
                state.revoked.insert(credentials);
            }
            state.forget_held(session);
            if let Some(phone) = &phone {
                state.unlist_if_unlinked(phone);
            }
            state.went_offline(session, phone, true);
        }
    }
}

/// Brings a device with credentials online: `Authenticated` + `Ready`, then queued traffic; credentials
/// the phone revoked get `LoggedOut` and the device stays offline.
fn reconnect(
    state: &mut NetState,
    session: &str,
    events: EventSender,
    account: LinkedAccount,
) -> EngineResult<()> {
    if state.revoked.contains(&account.credentials) {
        // As the real network answers a device the phone unlinked (while no engine of it ran): the
        // connection is accepted, then closed as logged out. The engine reports that as an event, not a
        // failed start, so the supervisor can relink (a new QR) rather than fail the session.
        let _ = events.send(EngineEvent::LoggedOut {
            reason: "the device was logged out from the phone".into(),
        });
        return Ok(());
    }
    let known = state
        .accounts
        .get(&account.phone)
        .and_then(|a| a.push_name.clone());
    // In a cluster the name known here was just read back from the account's shared profile, which a
    // profile change on the previous node updated and the stored credentials did not.
    let push_name = if state.is_clustered() {
        known.or_else(|| account.push_name.clone())
    } else {
        account.push_name.clone().or(known)
    };
    state.register(&account.phone).push_name = push_name.clone();
    let device = state.devices.entry(session.to_string()).or_default();
    device.phone = Some(account.phone.clone());
    device.credentials = Some(account.credentials.clone());
    device.events = Some(events);
    state.emit(Op::Credentials {
        session: session.to_string(),
        credentials: account.credentials.clone(),
    });
    state.signal(
        session,
        EngineEvent::Authenticated {
            account: LinkedAccount {
                push_name,
                ..account
            },
        },
    );
    state.signal(session, EngineEvent::Ready);
    state.go_online(session);
    Ok(())
}

/// 8 characters from the network counter, scrambled so consecutive codes do not look alike.
fn pairing_code_for(seq: u64) -> String {
    let base = PAIRING_ALPHABET.len() as u64;
    let mut value = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..8)
        .map(|_| {
            let index = usize::try_from(value % base).unwrap_or(0);
            value /= base;
            char::from(PAIRING_ALPHABET[index])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::pairing_code_for;

    #[test]
    fn pairing_codes_are_eight_characters_and_vary() {
        let (a, b) = (pairing_code_for(1), pairing_code_for(2));
        assert_eq!((a.len(), b.len()), (8, 8));
        assert_ne!(a, b);
    }
}
