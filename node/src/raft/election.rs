//! Breaking split votes. openraft 0.9 draws a replica's election timeout once per process, so two voters
//! whose draws came out close keep starting their elections together, and a split vote repeats round after
//! round (seen as 2.6 and 4.1 s elections after a leader's kill -9). Each time this replica stands as a
//! candidate, it holds back its next candidacy for a fresh random time past the longest timeout: if the round
//! is lost, the retries of the voters no longer depend on their fixed draws, so they fall apart.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use openraft::ServerState;
use rand::Rng;

use super::TypeConfig;

/// Watches this replica's metrics until the replica shuts down.
pub(crate) fn spawn_split_vote_breaker(
    raft: openraft::Raft<TypeConfig>,
    election_timeout_min_ms: u64,
    election_timeout_max_ms: u64,
) {
    let mut metrics = raft.metrics();
    let span_ms = election_timeout_max_ms
        .saturating_sub(election_timeout_min_ms)
        .max(1);
    tokio::spawn(async move {
        let mut paused_term = None;
        let latest = Arc::new(AtomicU64::new(0));
        while metrics.changed().await.is_ok() {
            let (state, term) = {
                let m = metrics.borrow_and_update();
                (m.state, m.current_term)
            };
            if state == ServerState::Shutdown {
                break;
            }
            if state != ServerState::Candidate || paused_term == Some(term) {
                continue;
            }
            paused_term = Some(term);
            let generation = latest.fetch_add(1, Ordering::AcqRel) + 1;
            let hold = election_timeout_max_ms + rand::rng().random_range(0..span_ms);
            let hold = Duration::from_millis(hold);
            hold_back_candidacy(raft.clone(), hold, latest.clone(), generation);
        }
    });
}

/// Disables elections for `hold`, then enables them again unless a newer hold has started meanwhile.
fn hold_back_candidacy(
    raft: openraft::Raft<TypeConfig>,
    hold: Duration,
    latest: Arc<AtomicU64>,
    generation: u64,
) {
    raft.runtime_config().elect(false);
    tracing::debug!(
        hold_ms = hold.as_millis() as u64,
        "raft candidacy held back"
    );
    tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        if latest.load(Ordering::Acquire) == generation {
            raft.runtime_config().elect(true);
        }
    });
}
