//! The per-session cache of active webhooks the pipeline matches events against, so the hot path does not
//! query (`memo.rs`: aged out, and not kept past an invalidation). Filled on first use per session,
//! invalidated by the webhook service on every change and when this node loads the session: in a cluster
//! the webhook writes of a session go to the node that runs it, so a node that runs it again may hold what
//! was true when it last did. It does not evaluate filters (`filter.rs`) or write rows (`pipeline.rs`).

use std::sync::Arc;

use wagate_proto::EventName;
use wagate_proto::dto::webhooks::FilterCondition;
use wagate_workers::webhook::store::webhooks as webhook_store;

use super::memo::SessionMemo;
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

/// Cached subscriptions per session id.
pub(crate) struct SubscriptionCache {
    memo: SessionMemo<Vec<Subscription>>,
}

impl SubscriptionCache {
    pub(crate) fn new() -> SubscriptionCache {
        SubscriptionCache {
            memo: SessionMemo::new(),
        }
    }

    /// The active webhooks of a session, from the cache or (once) from the store, read on the open
    /// transaction's own connection: a second connection could be unavailable while it holds the write lock.
    pub(crate) async fn for_session_in(
        &self,
        tx: &mut DataTx,
        session_id: &str,
    ) -> StoreResult<Arc<Vec<Subscription>>> {
        if let Some(hit) = self.memo.fresh(session_id) {
            return Ok(hit);
        }
        let ticket = self.memo.ticket();
        let rows = webhook_store::list_active_for_session_in(tx, session_id).await?;
        let subs: Arc<Vec<Subscription>> = Arc::new(
            rows.into_iter()
                .map(|w| Subscription {
                    events: parse_events(&w.events),
                    conditions: w.filters.map(|f| f.conditions).unwrap_or_default(),
                    webhook_id: w.id,
                })
                .collect(),
        );
        self.memo.keep(session_id, ticket, subs.clone());
        Ok(subs)
    }

    /// Forget a session's entry; the next event reloads it.
    pub(crate) fn invalidate(&self, session_id: &str) {
        self.memo.invalidate(session_id);
    }

    /// Forget every session's entry (after a data import replaced the webhooks).
    pub(crate) fn invalidate_all(&self) {
        self.memo.invalidate_all();
    }
}

/// `["*"]` (or no valid name at all, which validation never lets in) means every event.
fn parse_events(raw: &[String]) -> Option<Vec<EventName>> {
    if raw.iter().any(|e| e == "*") {
        return None;
    }
    Some(raw.iter().filter_map(|e| e.parse().ok()).collect())
}
