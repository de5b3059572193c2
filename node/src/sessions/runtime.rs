//! One session loaded on this node: its engine, its in-memory state, and the loop that turns engine events
//! and reconnect timers into transitions of the state table. Every transition is persisted (fenced by the
//! lease generation) before its events are published; a stale lease tears the engine down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex as SyncMutex;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::{Mutex, MutexGuard, Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wagate_proto::{Jid, SessionStatus};

use super::deps::Deps;
use super::effects;
use super::error::{SessionError, SessionResult};
use super::presence::{ObservedPresence, PresenceMemory};
use super::run_state::RunState;
use super::state::{Context, Effect, TransitionError, Trigger, transition};
use crate::cluster::lease::Lease;
use crate::engine::media::EngineMedia;
use crate::engine::node_media::SessionMedia;
use crate::engine::{
    Ack, Engine, EngineContext, EngineError, EventSender, Incoming, LinkedAccount, PresenceEntry,
    event_channel,
};
use crate::store::{StoreError, now_ms, sessions as session_store};

pub(crate) struct Runtime {
    pub id: String,
    pub lease: Lease,
    pub(super) deps: Arc<Deps>,
    state: Mutex<RunState>,
    /// The engine instance, swapped on every launch. A sync mutex: it is held only to clone the Arc.
    engine: SyncMutex<Option<Arc<dyn Engine>>>,
    status: watch::Sender<SessionStatus>,
    /// Wakes the loop when the reconnect deadline changes.
    wake: Notify,
    events_tx: EventSender,
    cancel: CancellationToken,
    is_stale: AtomicBool,
    /// Set by `quiesce`: the loop stores what the engine already handed over, then ends.
    is_quiescing: AtomicBool,
    /// Set by `unload` (under the engine slot's lock): no transition is applied and no engine launched from
    /// now on, so a caller still holding this runtime cannot write a status or run an engine nobody drives.
    is_unloaded: AtomicBool,
    /// Cancelled when the loop has ended.
    loop_done: CancellationToken,
    /// The presence the current engine run reported, per chat (`presence.rs`). A sync mutex: held only to
    /// copy in or out.
    presence: SyncMutex<PresenceMemory>,
}

impl Runtime {
    /// Loads a session on this node and starts its event loop. The engine is launched by the first
    /// `Start` trigger, not here.
    pub(crate) fn spawn(
        deps: Arc<Deps>,
        state: RunState,
        id: String,
        lease: Lease,
    ) -> Arc<Runtime> {
        let (events_tx, events_rx) = event_channel();
        let (status, _) = watch::channel(state.status);
        let runtime = Arc::new(Runtime {
            cancel: deps.shutdown.child_token(),
            id,
            lease,
            deps,
            state: Mutex::new(state),
            engine: SyncMutex::new(None),
            status,
            wake: Notify::new(),
            events_tx,
            is_stale: AtomicBool::new(false),
            is_quiescing: AtomicBool::new(false),
            is_unloaded: AtomicBool::new(false),
            loop_done: CancellationToken::new(),
            presence: SyncMutex::new(PresenceMemory::default()),
        });
        tokio::spawn(runtime.clone().run(events_rx));
        runtime
    }

    pub(crate) fn engine(&self) -> Option<Arc<dyn Engine>> {
        self.engine.lock().clone()
    }

    pub(crate) fn has_engine(&self) -> bool {
        self.engine.lock().is_some()
    }

    pub(crate) fn status(&self) -> SessionStatus {
        *self.status.borrow()
    }

    /// Remembers a presence report as received now; one arriving after its engine was torn down is not.
    pub(crate) fn remember_presence(&self, chat: &Jid, participants: &[PresenceEntry]) {
        if self.has_engine() {
            self.presence.lock().record(chat, participants, now_ms());
        }
    }

    /// The chat's last presence report in this engine run, if it made one.
    pub(crate) fn last_presence(&self, chat: &Jid) -> Option<ObservedPresence> {
        self.presence.lock().read(chat)
    }

    pub(crate) async fn lock(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().await
    }

    /// The state when no transition holds it right now.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, RunState>> {
        self.state.try_lock().ok()
    }

    /// Whether the runtime was unloaded (it is no longer the session's runtime on this node).
    pub(crate) fn is_unloaded(&self) -> bool {
        self.is_unloaded.load(Ordering::SeqCst)
    }

    /// Waits until the session has left `initializing`, or until nothing drives this runtime any more
    /// (unloaded by a stop, logout, delete or lease loss: its status will not change); false when the
    /// budget ran out first.
    pub(crate) async fn wait_settled(&self, budget: Duration) -> bool {
        let mut rx = self.status.subscribe();
        let settled = async {
            tokio::select! {
                _ = rx.wait_for(|s| *s != SessionStatus::Initializing) => {}
                _ = self.cancel.cancelled() => {}
            }
        };
        tokio::time::timeout(budget, settled).await.is_ok()
    }

    /// Waits until the session is `ready`; false when `deadline` passed first.
    pub(crate) async fn wait_ready(&self, deadline: Instant) -> bool {
        let mut rx = self.status.subscribe();
        let ready = rx.wait_for(|s| *s == SessionStatus::Ready);
        matches!(tokio::time::timeout_at(deadline, ready).await, Ok(Ok(_)))
    }

    /// Stops the loop and drops the engine (without talking to the network). A launch racing this either
    /// installed its engine first (killed here) or finds the runtime unloaded and starts none.
    pub(crate) async fn unload(&self) {
        let engine = {
            let mut slot = self.engine.lock();
            self.is_unloaded.store(true, Ordering::SeqCst);
            slot.take()
        };
        self.cancel.cancel();
        if let Some(engine) = engine {
            let _ = engine.kill().await;
        }
    }

    /// For a process that is stopping: kills the engine (so it takes no more traffic from the network),
    /// then lets the loop store the events it already handed over (the network will not send receipts,
    /// group or call notifications again) before the loop ends. No transition is persisted: the stored
    /// status stays what it was, for the restore at the next boot. Waits at most `budget`.
    pub(crate) async fn quiesce(&self, budget: Duration) {
        self.is_quiescing.store(true, Ordering::SeqCst);
        let engine = self.engine.lock().take();
        if let Some(engine) = engine {
            let _ = engine.kill().await;
        }
        self.cancel.cancel();
        let _ = tokio::time::timeout(budget, self.loop_done.cancelled()).await;
    }

    /// Gives the session up without another write (its lease is lost or handed over): no event is
    /// handled and no state persisted from now on, and the engine is killed.
    pub(crate) async fn abandon(&self) {
        self.is_stale.store(true, Ordering::SeqCst);
        self.unload().await;
    }

    /// Applies `trigger` and whatever it leads to (a failed launch becomes the next trigger).
    /// Returns every effect applied, so callers can see `Report*Incomplete`.
    pub(crate) async fn drive(
        &self,
        st: &mut RunState,
        trigger: Trigger,
    ) -> SessionResult<Vec<Effect>> {
        let mut applied = Vec::new();
        let mut next = Some(trigger);
        while let Some(trigger) = next.take() {
            let (effects, follow) = self.apply(st, trigger).await?;
            applied.extend(effects);
            next = follow;
        }
        Ok(applied)
    }

    async fn apply(
        &self,
        st: &mut RunState,
        trigger: Trigger,
    ) -> SessionResult<(Vec<Effect>, Option<Trigger>)> {
        if self.is_unloaded() {
            return Err(TransitionError::Unloaded.into());
        }
        let ctx = Context {
            has_phone: st.phone.is_some(),
            lost_link: st.lost_link,
            reconnect: st.policy,
            failed_attempts: st.failed_attempts,
        };
        let step = transition(st.status, &trigger, &ctx)?;
        if matches!(trigger, Trigger::ReconnectFailed { .. }) {
            st.failed_attempts = st.failed_attempts.saturating_add(1);
        }
        // An engine that reconnects by itself announces each attempt it schedules: one automatic reconnect,
        // as a relaunch is (`on_reconnect_due`), unless the policy's attempts are spent.
        if matches!(trigger, Trigger::SelfRetry { .. }) && step.to != SessionStatus::Failed {
            metrics::counter!(wagate_workers::telemetry::metrics::RECONNECTS).increment(1);
        }
        st.status = step.to;
        for effect in &step.effects {
            effects::apply_local(self, st, effect).await?;
        }
        self.persist(st).await?;
        self.status.send_replace(st.status);
        for effect in &step.effects {
            effects::emit(self, st, effect, &trigger).await;
        }
        let mut follow = None;
        for effect in &step.effects {
            match effect {
                Effect::LaunchEngine => {
                    let relaunch = matches!(trigger, Trigger::ReconnectBegan);
                    follow = self
                        .launch(st)
                        .await
                        .err()
                        .map(|e| launch_failure(e, relaunch));
                }
                Effect::StopEngine => self.stop_engine(false).await,
                Effect::KillEngine => self.stop_engine(true).await,
                _ => {}
            }
        }
        Ok((step.effects, follow))
    }

    /// The account's own display name changed through the API: the record shows it from now on.
    pub(crate) async fn rename_account(&self, push_name: &str) -> SessionResult<()> {
        let mut st = self.lock().await;
        st.push_name = Some(push_name.to_owned());
        self.persist(&st).await
    }

    async fn persist(&self, st: &RunState) -> SessionResult<()> {
        let saved = if self.is_stale.load(Ordering::SeqCst)
            || !self.deps.leases.is_current(&self.id, self.lease)
        {
            Err(StoreError::StaleLease)
        } else {
            let saved = session_store::save_runtime(
                &self.deps.db,
                &self.id,
                self.lease.generation,
                &st.to_runtime(),
            )
            .await;
            self.deps.records.invalidate(&self.id).await;
            saved
        };
        match saved {
            Err(StoreError::StaleLease) => {
                tracing::warn!(session_id = %self.id, "lease lost to another node; tearing the engine down");
                self.is_stale.store(true, Ordering::SeqCst);
                self.cancel.cancel();
                self.stop_engine(true).await;
                Err(SessionError::Store(StoreError::StaleLease))
            }
            other => other.map_err(SessionError::from),
        }
    }

    pub(super) fn wake_loop(&self) {
        self.wake.notify_one();
    }

    async fn stop_engine(&self, kill: bool) {
        // The run's presence subscriptions end with it, and what they reported with them.
        self.presence.lock().clear();
        let engine = self.engine.lock().take();
        if let Some(engine) = engine {
            let done = if kill {
                engine.kill().await
            } else {
                engine.stop().await
            };
            if let Err(err) = done {
                tracing::debug!(session_id = %self.id, error = %err, "engine teardown reported an error");
            }
        }
    }

    /// Creates a fresh engine instance with the stored credentials and starts it.
    async fn launch(&self, st: &RunState) -> Result<(), EngineError> {
        self.stop_engine(true).await;
        // A read that fails is a failed launch (retried with backoff), never "no credentials": starting
        // without them would throw a linked session back to a QR (seen when a takeover starved the pool).
        let linked = self.load_credentials().await.map_err(|err| {
            EngineError::Network(format!("could not load engine credentials: {err}"))
        })?;
        let data_dir = self
            .deps
            .sessions_dir
            .join(&self.id)
            .join(self.deps.factory.kind().as_str());
        let ctx = EngineContext {
            session_id: self.id.clone(),
            events: self.events_tx.clone(),
            data_dir,
            proxy_url: st.proxy_url.clone(),
            linked,
            store: self.deps.engine_store.clone(),
            media: self.engine_media(),
            reconnect: st.policy,
        };
        let engine = self.deps.factory.create(ctx);
        {
            let mut slot = self.engine.lock();
            if self.is_unloaded() {
                return Err(EngineError::Internal("the session was unloaded".into()));
            }
            *slot = Some(engine.clone());
        }
        let started = engine.start().await;
        if started.is_err() {
            // A launch that failed leaves no running engine: between relaunch attempts `engineLoaded` reads
            // false and presence reads answer null (spec rule 5), as for a session never started.
            let failed = {
                let mut slot = self.engine.lock();
                match slot.as_ref() {
                    Some(current) if Arc::ptr_eq(current, &engine) => slot.take(),
                    _ => None,
                }
            };
            if let Some(failed) = failed
                && let Err(err) = failed.kill().await
            {
                tracing::debug!(session_id = %self.id, error = %err, "failed engine teardown reported an error");
            }
        }
        started
    }

    /// An engine with the stored credentials that is never started (to unlink a session that is not loaded).
    pub(crate) async fn temporary_engine(&self, st: &RunState) -> Arc<dyn Engine> {
        let ctx = EngineContext {
            session_id: self.id.clone(),
            events: self.events_tx.clone(),
            data_dir: self
                .deps
                .sessions_dir
                .join(&self.id)
                .join(self.deps.factory.kind().as_str()),
            proxy_url: st.proxy_url.clone(),
            linked: self.load_credentials().await.unwrap_or_else(|err| {
                tracing::warn!(session_id = %self.id, error = %err, "could not load engine credentials");
                None
            }),
            store: self.deps.engine_store.clone(),
            media: self.engine_media(),
            reconnect: st.policy,
        };
        self.deps.factory.create(ctx)
    }

    /// The media store as this session's engine reaches it (`EngineContext::media`).
    fn engine_media(&self) -> Arc<dyn EngineMedia> {
        Arc::new(SessionMedia::new(self.deps.media.clone(), self.id.as_str()))
    }

    async fn load_credentials(&self) -> Result<Option<LinkedAccount>, StoreError> {
        let kind = self.deps.factory.kind().as_str();
        let stored = session_store::load_engine_auth(&self.deps.db, &self.id, kind).await?;
        Ok(stored.and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// The session's loop: engine events and reconnect timers, one at a time.
    async fn run(self: Arc<Self>, mut events: UnboundedReceiver<Incoming>) {
        loop {
            let deadline = self.state.lock().await.reconnect_at;
            tokio::select! {
                _ = self.cancel.cancelled() => break,
                Some(event) = events.recv() => self.on_event(event).await,
                _ = sleep_until(deadline) => self.on_reconnect_due().await,
                _ = self.wake.notified() => {}
            }
        }
        if self.is_quiescing.load(Ordering::SeqCst) {
            self.store_what_is_queued(&mut events).await;
        }
        self.loop_done.cancel();
    }

    /// The traffic events still queued when a stopping process quiesced the session; lifecycle events (the
    /// engine's own end among them) change nothing now.
    async fn store_what_is_queued(&self, events: &mut UnboundedReceiver<Incoming>) {
        while let Ok(incoming) = events.try_recv() {
            if effects::is_lifecycle(&incoming.event) {
                incoming.ack.complete();
            } else {
                self.on_event(incoming).await;
            }
        }
    }

    async fn on_reconnect_due(&self) {
        let mut st = self.state.lock().await;
        if st.reconnect_at.is_some_and(|at| at <= Instant::now()) {
            st.reconnect_at = None;
            metrics::counter!(wagate_workers::telemetry::metrics::RECONNECTS).increment(1);
            self.drive_logged(&mut st, Trigger::ReconnectBegan).await;
        }
    }

    pub(super) async fn drive_logged(&self, st: &mut RunState, trigger: Trigger) {
        if let Err(err) = self.drive(st, trigger).await {
            tracing::debug!(session_id = %self.id, error = %err, "engine event did not change the session");
        }
    }

    /// One engine event. Received traffic's acknowledgement goes with it to the write path, which settles it
    /// after the commit; a stale runtime drops it unsettled, so the network redelivers to the lease's holder.
    async fn on_event(&self, incoming: Incoming) {
        let Incoming { event, mut ack } = incoming;
        if self.is_stale.load(Ordering::SeqCst) {
            drop(ack);
            return;
        }
        if self.deps.ack_on_receipt {
            std::mem::replace(&mut ack, Ack::none()).complete();
        }
        if !effects::is_lifecycle(&event) {
            let ingest = async {
                super::event_hooks::before_ingest(self, &event).await;
                self.deps.ingest.handle(&self.id, event, ack).await;
            };
            if wagate_workers::telemetry::tracing_enabled() {
                // The root of the event's trace: commit, outbox, job and delivery attempts descend from it.
                let span = tracing::info_span!(
                    parent: None,
                    "engine_event",
                    session_id = %self.id,
                    trace_id = tracing::field::Empty
                );
                wagate_workers::telemetry::propagation::record_trace_id(&span);
                tracing::Instrument::instrument(ingest, span).await;
            } else {
                ingest.await;
            }
            return;
        }
        ack.complete();
        let mut st = self.state.lock().await;
        if let Some(trigger) = effects::prepare(self, &mut st, event).await {
            self.drive_logged(&mut st, trigger).await;
        }
    }
}

/// The trigger a failed launch fires. Only an automatic relaunch (`relaunch`) spends one of the
/// `maxReconnectAttempts`; a start's own launch failing is what starts the relaunches.
fn launch_failure(err: EngineError, relaunch: bool) -> Trigger {
    let retryable = |reason: String| {
        if relaunch {
            Trigger::ReconnectFailed { reason }
        } else {
            Trigger::LaunchFailed { reason }
        }
    };
    match err {
        EngineError::Network(reason) => retryable(reason),
        EngineError::Timeout => retryable("the network did not answer".into()),
        EngineError::Rejected(reason) => Trigger::AuthFailed { reason },
        other => Trigger::EngineFailed {
            reason: other.to_string(),
        },
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
