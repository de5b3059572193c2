//! `SessionService` as the cluster's `SessionHost`: taking over a session another node left behind (claim,
//! the spec's "takeover sweep" status rules fenced by the fresh generation, then a start when it should run),
//! giving up a session whose lease was lost, releasing every session (drain, graceful shutdown), and both
//! sides of a planned handover (`cluster/handover.rs`): letting a session go without a write, and bringing
//! a handed-over one up from the stored credentials.

use async_trait::async_trait;
use tokio::time::Instant;
use wagate_proto::SessionStatus;

use super::error::SessionResult;
use super::run_state::RunState;
use super::service::SessionService;
use super::state::Trigger;
use crate::cluster::SessionHost;
use crate::store::sessions::SessionRecord;

/// Whether a session with no live lease needs the sweep: it should run (linked, so it can), or its status
/// claims an engine.
fn needs_takeover(record: &SessionRecord) -> bool {
    use SessionStatus::*;
    (record.desired_running && record.phone.is_some())
        || matches!(
            record.status,
            Ready | Initializing | Authenticating | ActionRequired
        )
        || (record.status == QrReady && record.phone.is_none())
}

/// How long a session let go of may take to store the events its engine already handed over, and the
/// writer to commit them (each).
const LET_GO_BUDGET: std::time::Duration = std::time::Duration::from_secs(3);

impl SessionService {
    /// Lets a session go while its lease is still ours: the engine stops taking traffic, the events it
    /// already handed over are stored (the network will not send receipts or notifications again), and
    /// only then is the runtime given up and the lease released for the next owner.
    async fn let_go(&self, runtime: &super::runtime::Runtime) {
        runtime.quiesce(LET_GO_BUDGET).await;
        self.deps.ingest.flush(LET_GO_BUDGET).await;
        runtime.abandon().await;
        self.leases.release(&runtime.id, runtime.lease).await;
    }

    async fn take_over_session(&self, id: &str) -> SessionResult<()> {
        let record = {
            // The claim, the sweep and an unload as one lifecycle step (the start below takes the gate
            // itself).
            let _gate = self.lifecycle_gate(id).await;
            if self.runtime(id).is_some() {
                return Ok(());
            }
            let runtime = self.load(id).await?;
            // Read after the claim: the previous holder's last write is in, and it can write no more.
            let record = self.record(id).await?;
            if !needs_takeover(&record) {
                self.unload(id).await;
                return Ok(());
            }
            {
                let mut st = runtime.lock().await;
                *st = RunState::from_record(&record);
                runtime.drive(&mut st, Trigger::TakeoverSweep).await?;
            }
            if !(record.desired_running && record.phone.is_some()) {
                self.unload(id).await;
            }
            record
        };
        // A linked session comes back; one that was waiting for its QR to be scanned stays
        // `disconnected` (the spec's sweep row), as no phone is there to scan a new one.
        if record.desired_running && record.phone.is_some() {
            self.start(id).await?;
        }
        Ok(())
    }

    /// A handed-over session: claimed here (the old owner released it after its last write), then started
    /// from the stored credentials when it should run. Its stored status is the old owner's (its engine
    /// stopped without a write), so the start begins from `disconnected` as after a planned stop.
    async fn receive_session(&self, id: &str, budget: Instant) -> SessionResult<bool> {
        let (runtime, was_ready) = {
            // As in a takeover: the claim and the state reset as one lifecycle step.
            let _gate = self.lifecycle_gate(id).await;
            if self.runtime(id).is_some() {
                return Ok(true);
            }
            let runtime = self.load(id).await?;
            let record = self.record(id).await?;
            if !record.desired_running {
                self.unload(id).await;
                return Ok(false);
            }
            let was_ready = record.status == SessionStatus::Ready;
            {
                let mut st = runtime.lock().await;
                *st = RunState::from_record(&record);
                if is_engine_status(st.status) {
                    st.status = SessionStatus::Disconnected;
                }
            }
            (runtime, was_ready)
        };
        self.start(id).await?;
        // A linked session is back once ready; answering requests before that would be a 409.
        Ok(!was_ready || runtime.wait_ready(budget).await)
    }
}

/// Statuses only a running engine can be in.
pub(super) fn is_engine_status(status: SessionStatus) -> bool {
    use SessionStatus::*;
    matches!(
        status,
        Ready | Initializing | Authenticating | QrReady | ActionRequired
    )
}

#[async_trait]
impl SessionHost for SessionService {
    fn loaded_count(&self) -> usize {
        self.runtimes.len()
    }

    async fn lease_lost(&self, session_id: &str, generation: i64) {
        let removed = self
            .runtimes
            .remove_if(session_id, |_, rt| rt.lease.generation == generation);
        if let Some((_, runtime)) = removed {
            runtime.abandon().await;
        }
    }

    async fn take_over(&self, session_id: &str) {
        match self.take_over_session(session_id).await {
            Ok(()) => {
                metrics::counter!(wagate_workers::telemetry::metrics::TAKEOVERS).increment(1);
                tracing::info!(session_id, "session taken over")
            }
            Err(err) => tracing::warn!(session_id, error = %err, "session not taken over"),
        }
    }

    fn loaded_ids(&self) -> Vec<String> {
        self.runtimes.iter().map(|e| e.key().clone()).collect()
    }

    async fn hand_out(&self, session_id: &str) {
        if let Some((_, runtime)) = self.runtimes.remove(session_id) {
            self.let_go(&runtime).await;
        }
    }

    async fn take_handover(&self, session_id: &str, budget: Instant) -> bool {
        match self.receive_session(session_id, budget).await {
            Ok(is_up) => is_up,
            Err(err) => {
                tracing::warn!(session_id, error = %err, "handed-over session not brought up");
                false
            }
        }
    }

    async fn release_all(&self) -> usize {
        let ids: Vec<String> = self.runtimes.iter().map(|e| e.key().clone()).collect();
        let mut released = 0;
        for id in ids {
            if let Some((_, runtime)) = self.runtimes.remove(&id) {
                self.let_go(&runtime).await;
                released += 1;
            }
        }
        released
    }
}
