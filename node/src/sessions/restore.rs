//! Boot restore for the embedded mode: sessions a stopped process left in an active status are marked
//! `disconnected` (nothing runs them any more) before the node serves, then, with
//! `AUTO_START_SESSIONS=true`, those that were meant to run are started again a few at a time
//! (`SESSION_RESTORE_CONCURRENCY`), never all at once.

use std::sync::Arc;

use futures::StreamExt;
use wagate_proto::SessionStatus;

use super::service::SessionService;
use crate::store::sessions::{self as session_store, SessionRecord};

fn was_active(status: SessionStatus) -> bool {
    matches!(
        status,
        SessionStatus::Initializing
            | SessionStatus::QrReady
            | SessionStatus::Authenticating
            | SessionStatus::Ready
            | SessionStatus::ActionRequired
    )
}

impl SessionService {
    async fn normalise_after_restart(&self, record: &SessionRecord) {
        let Ok(lease) = self.leases.acquire(&record.id, &self.deps.records).await else {
            return;
        };
        let mut state = super::run_state::RunState::from_record(record).to_runtime();
        state.status = Some(SessionStatus::Disconnected);
        let saved =
            session_store::save_runtime(&self.deps.db, &record.id, lease.generation, &state).await;
        self.deps.records.invalidate(&record.id).await;
        if let Err(err) = saved {
            tracing::warn!(session_id = %record.id, error = %err, "could not normalise session status at boot");
        }
        self.leases.release(&record.id, lease).await;
    }

    /// Runs once at boot, before the node serves: sessions a stopped process left in an active status
    /// are marked `disconnected`; answers those meant to run (with `auto_start`), to start again.
    pub(crate) async fn normalise_at_boot(&self, auto_start: bool) -> Vec<String> {
        let records = match session_store::list(&self.deps.db, i64::MAX, 0).await {
            Ok(records) => records,
            Err(err) => {
                tracing::error!(error = %err, "session restore could not list sessions");
                return Vec::new();
            }
        };
        for record in records.iter().filter(|r| was_active(r.status)) {
            self.normalise_after_restart(record).await;
        }
        if !auto_start {
            return Vec::new();
        }
        records
            .into_iter()
            .filter(|r| r.desired_running)
            .map(|r| r.id)
            .collect()
    }

    /// Starts the sessions `normalise_at_boot` answered, a few at a time; one a client started meanwhile
    /// is left as it runs.
    pub(crate) async fn start_restored(self: Arc<Self>, wanted: Vec<String>, concurrency: usize) {
        tracing::info!(sessions = wanted.len(), concurrency, "restoring sessions");
        futures::stream::iter(wanted)
            .for_each_concurrent(concurrency.max(1), |id| {
                let service = self.clone();
                async move {
                    if service.runtime(&id).is_some() {
                        return;
                    }
                    if let Err(err) = service.start(&id).await {
                        tracing::warn!(session_id = %id, error = %err, "session not restored");
                    }
                }
            })
            .await;
    }
}
