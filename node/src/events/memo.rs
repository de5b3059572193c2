//! A per-session memo of rows the event path reads for every event (a session's active webhooks, its
//! automation rules), so that path does not query each time. Whoever changes those rows invalidates the
//! session's entry. In a cluster a node cannot see every change (one made while the session ran on
//! another node, a data import elsewhere), so entries also age out after `MAX_AGE`: such a change is
//! seen within that bound rather than never. A read that began before an invalidation is not kept.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;

/// How long an entry is trusted without an invalidation: one read per session and interval at most.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(10);

pub(crate) struct SessionMemo<T> {
    entries: DashMap<String, (Arc<T>, Instant)>,
    /// Bumped by every invalidation; a read keeps its result only if none came since it began.
    generation: AtomicU64,
}

/// Taken before reading the rows; hands them to [`SessionMemo::keep`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadTicket(u64);

impl<T> SessionMemo<T> {
    pub(crate) fn new() -> SessionMemo<T> {
        SessionMemo {
            entries: DashMap::new(),
            generation: AtomicU64::new(0),
        }
    }

    /// The session's entry if it is younger than `MAX_AGE`.
    pub(crate) fn fresh(&self, session_id: &str) -> Option<Arc<T>> {
        self.entries
            .get(session_id)
            .filter(|entry| entry.1.elapsed() < MAX_AGE)
            .map(|entry| entry.0.clone())
    }

    pub(crate) fn ticket(&self) -> ReadTicket {
        ReadTicket(self.generation.load(Ordering::Acquire))
    }

    /// Keeps what a read returned unless an invalidation came since its ticket. Checked under the entry's
    /// shard lock, which an invalidation's removal also takes, so none can slip between check and insert.
    pub(crate) fn keep(&self, session_id: &str, ticket: ReadTicket, value: Arc<T>) {
        let entry = self.entries.entry(session_id.to_owned());
        if self.generation.load(Ordering::Acquire) != ticket.0 {
            return;
        }
        let kept = (value, Instant::now());
        match entry {
            Entry::Occupied(mut occupied) => {
                occupied.insert(kept);
            }
            Entry::Vacant(vacant) => {
                vacant.insert(kept);
            }
        }
    }

    pub(crate) fn invalidate(&self, session_id: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries.remove(session_id);
    }

    pub(crate) fn invalidate_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_began_before_an_invalidation_is_not_kept() {
        let memo = SessionMemo::new();
        let ticket = memo.ticket();
        memo.invalidate("s");
        memo.keep("s", ticket, Arc::new(1));
        assert!(memo.fresh("s").is_none());
        let ticket = memo.ticket();
        memo.keep("s", ticket, Arc::new(2));
        assert_eq!(memo.fresh("s").as_deref(), Some(&2));
        memo.invalidate_all();
        assert!(memo.fresh("s").is_none());
    }
}
