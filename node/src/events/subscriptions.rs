//! The per-session cache of active webhooks the pipeline matches events against, so the hot path does not
//! query. Filled on first use per session, invalidated by the webhook service on every change and when this
//! node loads the session (in a cluster the webhook writes of a session go to the node that runs it, so a
//! node that runs it again may hold what was true when it last did). Entries also age out after
//! `MAX_AGE`: a write that raced a session's move between nodes, or a data import on another node, is
//! seen within that bound rather than never. It does not evaluate filters (`filter.rs`) or write rows
//! (`pipeline.rs`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use wagate_proto::EventName;
use wagate_proto::dto::webhooks::FilterCondition;
use wagate_workers::webhook::store::webhooks as webhook_store;

use crate::store::{DataTx, StoreResult};

/// The part of an active webhook that matching needs.
#[derive(Debug, Clone)]
pub(crate) struct Subscription {
    pub webhook_id: String,
    /// `None` = `*` (every event).
    pub events: Option<Vec<EventName>>,
    pub conditions: Vec<FilterCondition>,
}

impl Subscription {
    pub(crate) fn wants(&self, name: EventName) -> bool {
        self.events.as_ref().is_none_or(|list| list.contains(&name))
    }
}

/// How long an entry is trusted without an invalidation: one query per session and interval at most.
const MAX_AGE: Duration = Duration::from_secs(10);

/// Cached subscriptions per session id.
pub(crate) struct SubscriptionCache {
    by_session: DashMap<String, (Arc<Vec<Subscription>>, Instant)>,
    /// Bumped by every invalidation: a load that started before one must not be cached, or it would
    /// re-install what the change just replaced.
    generation: AtomicU64,
}

impl SubscriptionCache {
    pub(crate) fn new() -> SubscriptionCache {
        SubscriptionCache {
            by_session: DashMap::new(),
            generation: AtomicU64::new(0),
        }
    }

    /// The active webhooks of a session, from the cache or (once) from the store, read on the open
    /// transaction's own connection: a second connection could be unavailable while it holds the write lock.
    pub(crate) async fn for_session_in(
        &self,
        tx: &mut DataTx,
        session_id: &str,
    ) -> StoreResult<Arc<Vec<Subscription>>> {
        if let Some(hit) = self.by_session.get(session_id)
            && hit.1.elapsed() < MAX_AGE
        {
            return Ok(hit.0.clone());
        }
        let generation = self.generation.load(Ordering::Acquire);
        let rows = webhook_store::list_active_for_session_in(tx, session_id).await?;
        Ok(self.install(session_id, generation, rows))
    }

    fn install(
        &self,
        session_id: &str,
        generation: u64,
        rows: Vec<webhook_store::WebhookRecord>,
    ) -> Arc<Vec<Subscription>> {
        let subs: Arc<Vec<Subscription>> = Arc::new(
            rows.into_iter()
                .map(|w| Subscription {
                    events: parse_events(&w.events),
                    conditions: w.filters.map(|f| f.conditions).unwrap_or_default(),
                    webhook_id: w.id,
                })
                .collect(),
        );
        if self.generation.load(Ordering::Acquire) == generation {
            self.by_session
                .insert(session_id.to_owned(), (subs.clone(), Instant::now()));
        }
        subs
    }

    /// Forget a session's entry; the next event reloads it.
    pub(crate) fn invalidate(&self, session_id: &str) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.by_session.remove(session_id);
    }

    /// Forget every session's entry (after a data import replaced the webhooks).
    pub(crate) fn invalidate_all(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.by_session.clear();
    }
}

/// `["*"]` (or no valid name at all, which validation never lets in) means every event.
fn parse_events(raw: &[String]) -> Option<Vec<EventName>> {
    if raw.iter().any(|e| e == "*") {
        return None;
    }
    Some(raw.iter().filter_map(|e| e.parse().ok()).collect())
}
