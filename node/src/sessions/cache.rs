//! Session records served from memory for the read routes (`GET /api/sessions/{id}`, the existence check of
//! message and chat reads). Only in the embedded mode, where this process is the only writer of the data DB:
//! every write to a session row in this process (create, config, proxy, delete, runtime state, import)
//! invalidates its entry before the write is acknowledged. In a cluster other nodes write the same rows, so
//! reads go to the data DB there (or to the owner, through the forward).
//!
//! A fill that read the row before an invalidation must not store what it read: every invalidation bumps
//! `generation`, and a fill stores only if the generation is still the one it saw before reading, checked
//! under the entry's shard lock, which the invalidation's removal also takes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;

use crate::store::sessions::SessionRecord;

pub(crate) struct RecordCache {
    enabled: bool,
    entries: DashMap<String, Arc<SessionRecord>>,
    generation: AtomicU64,
}

/// What a fill saw before reading the row.
#[derive(Clone, Copy)]
pub(crate) struct FillTicket(u64);

impl RecordCache {
    /// `enabled` is false in a cluster: then nothing is ever stored.
    pub(crate) fn new(enabled: bool) -> RecordCache {
        RecordCache {
            enabled,
            entries: DashMap::new(),
            generation: AtomicU64::new(0),
        }
    }

    pub(crate) fn get(&self, id: &str) -> Option<Arc<SessionRecord>> {
        if !self.enabled {
            return None;
        }
        self.entries.get(id).map(|e| e.value().clone())
    }

    /// Taken before reading the row from the data DB.
    pub(crate) fn ticket(&self) -> FillTicket {
        FillTicket(self.generation.load(Ordering::SeqCst))
    }

    /// Stores `record` unless anything was invalidated since `ticket` was taken.
    pub(crate) fn fill(&self, ticket: FillTicket, record: Arc<SessionRecord>) {
        if !self.enabled {
            return;
        }
        let entry = self.entries.entry(record.id.clone());
        if self.generation.load(Ordering::SeqCst) != ticket.0 {
            return;
        }
        entry.insert(record);
    }

    /// Called after every write to the session's row, before the write is acknowledged.
    pub(crate) fn invalidate(&self, id: &str) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.remove(id);
    }

    /// After writes that may touch any row (a data import).
    pub(crate) fn invalidate_all(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wagate_proto::SessionStatus;
    use wagate_proto::dto::sessions::SessionConfig;

    fn record(id: &str, status: SessionStatus) -> Arc<SessionRecord> {
        Arc::new(SessionRecord {
            id: id.to_string(),
            name: "cached".to_string(),
            status,
            phone: None,
            push_name: None,
            last_error: None,
            config: SessionConfig::default(),
            proxy_url: None,
            restriction: None,
            desired_running: false,
            has_credentials: false,
            lease_generation: 0,
            owner_node: None,
            connected_at: None,
            last_active: None,
            created_at: 0,
            updated_at: 0,
        })
    }

    #[test]
    fn a_fill_that_read_before_an_invalidation_is_not_stored() {
        let cache = RecordCache::new(true);
        let before = cache.ticket();
        cache.invalidate("a");
        cache.fill(before, record("a", SessionStatus::Created));
        assert!(cache.get("a").is_none());
        let after = cache.ticket();
        cache.fill(after, record("a", SessionStatus::Ready));
        assert_eq!(cache.get("a").map(|r| r.status), Some(SessionStatus::Ready));
        cache.invalidate("a");
        assert!(cache.get("a").is_none());
    }

    #[test]
    fn a_disabled_cache_stores_nothing() {
        let cache = RecordCache::new(false);
        cache.fill(cache.ticket(), record("a", SessionStatus::Created));
        assert!(cache.get("a").is_none());
    }
}
