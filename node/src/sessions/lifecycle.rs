//! Lifecycle operations of `SessionService`: start (with its budget), stop, logout, force-kill, QR and
//! pairing code, and access to a ready engine for every other route (409 before any 501). The operations
//! that load or unload a session run one at a time per session (`LifecycleGate`).

use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use tokio::sync::{Mutex, OwnedMutexGuard};
use wagate_proto::SessionStatus;

use super::error::{SessionError, SessionResult};
use super::proxy;
use super::run_state::RunState;
use super::runtime::Runtime;
use super::service::{SessionService, SessionView};
use super::state::{Effect, Teardown, TransitionError, Trigger};
use crate::engine::{Engine, EngineError};

impl SessionService {
    /// Loads the session on this node if needed, fires `Start` and waits for it to leave `initializing`.
    pub(crate) async fn start(&self, id: &str) -> SessionResult<SessionView> {
        let record = self.record(id).await?;
        self.check_no_teardown(id)?;
        if let Some(url) = record
            .proxy_url
            .as_deref()
            .filter(|u| proxy::is_unauthenticatable(u))
        {
            tracing::warn!(session_id = id, proxy = %proxy::view(Some(url)).proxy_host.unwrap_or_default(),
                "proxy_unauthenticatable: SOCKS4 sends the user name as user id and drops the password");
        }
        let runtime = {
            // Load and `Start` as one step: a stop, logout or force-kill comes before (this start loads
            // the session afresh) or after (its transition is what the wait below sees).
            let _gate = self.lifecycle_gate(id).await;
            self.check_no_teardown(id)?;
            let loaded_here = self.runtime(id).is_some();
            let runtime = self.load(id).await?;
            let mut st = runtime.lock().await;
            if !loaded_here && st.row_unsettled {
                settle_stale_status(&runtime, &mut st).await?;
            }
            st.row_unsettled = false;
            let before = (st.desired_running, st.policy, st.proxy_url.clone());
            st.desired_running = true;
            st.policy = super::backoff::ReconnectPolicy {
                base_delay_ms: record.config.reconnect_base_delay,
                max_attempts: record.config.max_reconnect_attempts,
            };
            st.proxy_url = record.proxy_url.clone();
            if let Err(err) = runtime.drive(&mut st, Trigger::Start).await {
                // A start refused on an active session leaves it as it runs: the config and proxy are
                // read once per start, and this was none.
                if matches!(
                    err,
                    SessionError::Transition(TransitionError::AlreadyActive(_))
                ) {
                    (st.desired_running, st.policy, st.proxy_url) = before;
                }
                return Err(err);
            }
            drop(st);
            runtime
        };
        if !runtime
            .wait_settled(Duration::from_millis(self.start_timeout_ms))
            .await
        {
            return Err(SessionError::StartTimeout(self.start_timeout_ms));
        }
        // A stop (logout, force-kill, delete) unloads the runtime before it lets go of the state, so with
        // the state held it either ended this start's run already (409: what it left is not a started
        // session) or comes after the answer, which shows the session as this start left it.
        let st = runtime.lock().await;
        if runtime.is_unloaded() {
            self.record(id).await?;
            return Err(SessionError::StartInterrupted);
        }
        let view = self.get(id).await;
        drop(st);
        view
    }

    /// The session's runtime on this node, loading it (lease first, then the row as the lease's previous
    /// holder left it) when it is not loaded. One load per session at a time, so two callers never claim
    /// two generations for one runtime.
    pub(super) async fn load(&self, id: &str) -> SessionResult<Arc<Runtime>> {
        if let Some(runtime) = self.runtime(id) {
            return Ok(runtime);
        }
        let gate = self.loading.entry(id.to_string()).or_default().clone();
        let loaded = {
            let _loading = gate.lock().await;
            self.load_now(id).await
        };
        // Our clone and the map's: nobody else waits on this gate.
        self.loading.remove_if(id, |_, g| Arc::strong_count(g) <= 2);
        loaded
    }

    async fn load_now(&self, id: &str) -> SessionResult<Arc<Runtime>> {
        if let Some(runtime) = self.runtime(id) {
            return Ok(runtime);
        }
        let lease = self.leases.acquire(id, &self.deps.records).await?;
        // While we hold the lease the session's webhook writes come here; before it, they went elsewhere.
        self.deps.pipeline.subscriptions().invalidate(id);
        let record = match self.record(id).await {
            Ok(record) => record,
            Err(err) => {
                self.leases.release(id, lease).await;
                return Err(err);
            }
        };
        let state = RunState::from_record(&record);
        let runtime = Runtime::spawn(self.deps.clone(), state, id.to_string(), lease);
        self.runtimes.insert(id.to_string(), runtime.clone());
        Ok(runtime)
    }

    /// Disconnects gracefully (forced teardown as fallback) and unloads the engine; credentials stay.
    pub(crate) async fn stop(&self, id: &str) -> SessionResult<SessionView> {
        self.record(id).await?;
        let effects = {
            let _gate = self.lifecycle_gate(id).await;
            let Some(runtime) = self.runtime(id) else {
                return self.get(id).await;
            };
            let mut st = runtime.lock().await;
            let teardown = teardown(runtime.engine()).await;
            st.desired_running = false;
            let effects = runtime.drive(&mut st, Trigger::Stop { teardown }).await?;
            self.unload_locked(&runtime).await;
            effects
        };
        if effects.contains(&Effect::ReportStopIncomplete) {
            return Err(SessionError::StopIncomplete);
        }
        self.get(id).await
    }

    /// Stops the session's engine here; an engine whose record is gone (a forced import left it
    /// running) is unloaded all the same, as nothing else can reach it any more.
    pub(crate) async fn unload_engine(&self, id: &str) -> SessionResult<()> {
        match self.stop(id).await {
            Err(SessionError::NotFound(_)) => {
                self.unload(id).await;
                Ok(())
            }
            other => other.map(|_| ()),
        }
    }

    /// Unlinks the device and forgets the credentials; 502 when the network did not confirm the unlink.
    /// A logout racing another logout (or a delete) runs after it instead of being refused: the
    /// teardown code is start's and delete's.
    pub(crate) async fn logout(&self, id: &str) -> SessionResult<SessionView> {
        self.record(id).await?;
        let (_teardown, waited) = self.wait_teardown(id).await;
        if waited {
            // A delete that went first left no session to log out.
            self.record(id).await?;
        }
        let effects = {
            let _gate = self.lifecycle_gate(id).await;
            let runtime = self.load(id).await?;
            let mut st = runtime.lock().await;
            let unlinked = self.unlink(&runtime, &st).await;
            st.desired_running = false;
            // The operator's own unlink: the QR a later start shows is expected, no relink to warn of.
            st.lost_link = false;
            let effects = runtime.drive(&mut st, Trigger::Logout { unlinked }).await?;
            self.unload_locked(&runtime).await;
            effects
        };
        if effects.contains(&Effect::ReportLogoutIncomplete) {
            return Err(SessionError::LogoutIncomplete);
        }
        self.get(id).await
    }

    /// Asks the network to unlink; a session with no engine loaded gets a short-lived one for it.
    async fn unlink(&self, runtime: &Runtime, st: &RunState) -> bool {
        if !st.has_credentials && runtime.engine().is_none() {
            return true;
        }
        let engine = match runtime.engine() {
            Some(engine) => engine,
            None => runtime.temporary_engine(st).await,
        };
        engine.logout().await.is_ok()
    }

    /// Tears the engine down without talking to the network.
    /// 400 when nothing runs here to kill: never started, already stopped or killed (the runtime went
    /// with it), or run by another node that did not get the request (OpenWA's clients expect that 400).
    pub(crate) async fn force_kill(&self, id: &str) -> SessionResult<SessionView> {
        self.record(id).await?;
        let no_engine =
            || SessionError::BadInput(format!("Session {id} has no running engine to kill"));
        {
            let _gate = self.lifecycle_gate(id).await;
            let runtime = self.runtime(id).ok_or_else(no_engine)?;
            let mut st = runtime.lock().await;
            // A relaunch pending between failed attempts is a run to kill too, though no engine is up.
            if !runtime.has_engine() && st.reconnect_at.is_none() {
                return Err(no_engine());
            }
            st.desired_running = false;
            runtime.drive(&mut st, Trigger::ForceKill).await?;
            self.unload_locked(&runtime).await;
        }
        self.get(id).await
    }

    pub(super) async fn unload(&self, id: &str) {
        if let Some((_, runtime)) = self.runtimes.remove(id) {
            runtime.unload().await;
            self.leases.release(id, runtime.lease).await;
        }
    }

    /// Unloads `runtime` while the caller still holds its state, right after the transition that ends
    /// its run: no engine event is applied in between (the loop waits on that state and then finds the
    /// runtime unloaded). A runtime the map no longer holds was unloaded by someone else already.
    async fn unload_locked(&self, runtime: &Arc<Runtime>) {
        let removed = self
            .runtimes
            .remove_if(&runtime.id, |_, loaded| Arc::ptr_eq(loaded, runtime));
        if removed.is_some() {
            runtime.unload().await;
            self.leases.release(&runtime.id, runtime.lease).await;
        }
    }

    /// Waits for the session's lifecycle gate: start (its load and `Start`), stop, logout, force-kill, the
    /// runtime part of delete and of a takeover hold it, so no two of them load, drive or unload one
    /// session at the same time (a start would otherwise drive a runtime a stop was unloading and wait
    /// out its budget on it). Held only while those run, never while a start waits for its engine.
    pub(super) async fn lifecycle_gate(&self, id: &str) -> LifecycleGate<'_> {
        let gate = self.lifecycle.entry(id.to_string()).or_default().clone();
        LifecycleGate {
            gates: &self.lifecycle,
            id: id.to_string(),
            held: Some(gate.lock_owned().await),
        }
    }

    /// The cached QR (400 when none is cached).
    pub(crate) async fn qr(&self, id: &str) -> SessionResult<(String, SessionStatus)> {
        self.record(id).await?;
        let runtime = self.runtime(id).ok_or(SessionError::NoQr)?;
        let st = runtime.lock().await;
        match &st.qr {
            Some(qr) if st.status == SessionStatus::QrReady => Ok((qr.clone(), st.status)),
            _ => Err(SessionError::NoQr),
        }
    }

    /// Issues a pairing code; only while `qr_ready` (409 otherwise).
    pub(crate) async fn pairing_code(
        &self,
        id: &str,
        phone: &str,
    ) -> SessionResult<(String, SessionStatus)> {
        if !is_pairing_phone(phone) {
            return Err(SessionError::BadInput(
                "phoneNumber must be digits only, in international format".into(),
            ));
        }
        self.record(id).await?;
        let Some(runtime) = self.runtime(id) else {
            return Err(super::state::TransitionError::PairingNotAllowed(
                self.record(id).await?.status,
            )
            .into());
        };
        let mut st = runtime.lock().await;
        runtime.drive(&mut st, Trigger::PairingRequested).await?;
        let engine = runtime.engine().ok_or(SessionError::NotConnected)?;
        let code = engine.request_pairing_code(phone).await?;
        Ok((code, st.status))
    }

    /// The engine of a `ready` session; 409 `Session is not connected` otherwise (checked before any 501).
    pub(crate) fn ready_engine(&self, id: &str) -> SessionResult<Arc<dyn Engine>> {
        let runtime = self.runtime(id).ok_or(SessionError::NotConnected)?;
        if runtime.status() != SessionStatus::Ready {
            return Err(SessionError::NotConnected);
        }
        runtime.engine().ok_or(SessionError::NotConnected)
    }

    /// The engine of a session that is connected: `ready`, or `action_required` (the spec's "engine running
    /// and connected", where only sends answer 409, so reads and chat, group and profile actions go on).
    pub(crate) fn connected_engine(&self, id: &str) -> SessionResult<Arc<dyn Engine>> {
        let runtime = self.runtime(id).ok_or(SessionError::NotConnected)?;
        if !matches!(
            runtime.status(),
            SessionStatus::Ready | SessionStatus::ActionRequired
        ) {
            return Err(SessionError::NotConnected);
        }
        runtime.engine().ok_or(SessionError::NotConnected)
    }

    /// Records the push name a profile-name change gave the account (no-op when not loaded here).
    pub(crate) async fn record_push_name(&self, id: &str, push_name: &str) -> SessionResult<()> {
        match self.runtime(id) {
            Some(runtime) => runtime.rename_account(push_name).await,
            None => Ok(()),
        }
    }

    /// The loaded session's own phone from its in-memory state (which the stored row mirrors), so a send
    /// needs no database read; `None` when the session is not loaded here or a transition holds its state.
    pub(crate) fn loaded_phone(&self, id: &str) -> Option<Option<String>> {
        let runtime = self.runtime(id)?;
        let state = runtime.try_lock()?;
        Some(state.phone.clone())
    }

    /// The engine if one is loaded, whatever the status.
    pub(crate) fn loaded_engine(&self, id: &str) -> Option<Arc<dyn Engine>> {
        self.runtime(id).and_then(|r| r.engine())
    }

    /// The engine of a session whose engine runs: loaded, in a status only a running engine is in. `None`
    /// when the session is created, stopped, failed, between relaunch attempts (a failed launch leaves no
    /// engine) or `disconnected` (the dropped run is over; a relaunch brings a new one), so a presence read
    /// answers null there (spec rule 5) rather than the 409 of an engine that cannot answer.
    pub(crate) fn running_engine(&self, id: &str) -> Option<Arc<dyn Engine>> {
        let runtime = self.runtime(id)?;
        if !super::takeover::is_engine_status(runtime.status()) {
            return None;
        }
        runtime.engine()
    }
}

/// A held lifecycle gate (`SessionService::lifecycle_gate`); the gate is forgotten when nobody else
/// holds or waits for it.
pub(super) struct LifecycleGate<'a> {
    gates: &'a DashMap<String, Arc<Mutex<()>>>,
    id: String,
    held: Option<OwnedMutexGuard<()>>,
}

impl Drop for LifecycleGate<'_> {
    fn drop(&mut self) {
        // Released first, so the map's is the only reference left unless another caller waits.
        drop(self.held.take());
        self.gates
            .remove_if(&self.id, |_, gate| Arc::strong_count(gate) <= 1);
    }
}

/// Graceful stop, then forced, reporting which one worked.
async fn teardown(engine: Option<Arc<dyn Engine>>) -> Teardown {
    let Some(engine) = engine else {
        return Teardown::Graceful;
    };
    if engine.stop().await.is_ok() {
        return Teardown::Graceful;
    }
    match engine.kill().await {
        Ok(()) | Err(EngineError::NotSupported(_)) => Teardown::Forced,
        Err(_) => Teardown::Failed,
    }
}

/// A pairing `phoneNumber`: digits only, international format without `+` (the spec), at most 15 digits
/// (E.164).
pub(crate) fn is_pairing_phone(phone: &str) -> bool {
    (1..=15).contains(&phone.len()) && phone.bytes().all(|b| b.is_ascii_digit())
}

/// A session just loaded here runs no engine, whatever status its row shows: a row left `ready` (or any
/// status only an engine holds) by a node that died before the takeover sweep reached it. The sweep's own
/// rule applies first (`disconnected`, with its event); a `qr_ready` that rule keeps (the phone is known)
/// starts from `disconnected` too, so the start launches the engine instead of answering that the session
/// is already active and leaving it without one.
async fn settle_stale_status(runtime: &Runtime, st: &mut RunState) -> SessionResult<()> {
    if !super::takeover::is_engine_status(st.status) {
        return Ok(());
    }
    runtime.drive(st, Trigger::TakeoverSweep).await?;
    if super::takeover::is_engine_status(st.status) {
        st.status = SessionStatus::Disconnected;
    }
    Ok(())
}
