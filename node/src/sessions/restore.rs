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
    /// Marks a session this boot will not run as `disconnected` (if it was active) and, when this boot
    /// starts nothing, as no longer meant to run: a later boot restarts only what was running when the node
    /// stopped. Subscribers hear of a status change as of any other.
    async fn normalise_after_restart(&self, record: &SessionRecord, auto_start: bool) {
        let Ok(lease) = self.leases.acquire(&record.id, &self.deps.records).await else {
            return;
        };
        let changed = was_active(record.status);
        let mut state = super::run_state::RunState::from_record(record).to_runtime();
        if changed {
            state.status = Some(SessionStatus::Disconnected);
        }
        state.desired_running &= auto_start;
        let saved =
            session_store::save_runtime(&self.deps.db, &record.id, lease.generation, &state).await;
        self.deps.records.invalidate(&record.id).await;
        self.leases.release(&record.id, lease).await;
        match saved {
            Ok(()) if changed => {
                self.publish_status(&record.id, SessionStatus::Disconnected)
                    .await
            }
            Ok(()) => {}
            Err(err) => {
                tracing::warn!(session_id = %record.id, error = %err, "could not normalise session status at boot");
            }
        }
    }

    async fn publish_status(&self, id: &str, status: SessionStatus) {
        let data = serde_json::json!({ "sessionId": id, "status": status });
        let event = crate::events::Event::new(wagate_proto::EventName::SessionStatus, id, data);
        if let Err(err) = self.deps.pipeline.publish_kept(event).await {
            tracing::error!(session_id = id, error = %err, "session event not persisted");
        }
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
        let stale = |r: &&SessionRecord| was_active(r.status) || (!auto_start && r.desired_running);
        for record in records.iter().filter(stale) {
            self.normalise_after_restart(record, auto_start).await;
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
