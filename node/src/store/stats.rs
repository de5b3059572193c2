//! Cross-session counts for `GET /api/stats/overview` and `GET /api/sessions/stats/overview`: sessions by
//! status, messages by direction, webhooks by state; whole-table for unrestricted keys, per session for
//! session-restricted ones (which count only their own sessions).

use wagate_workers::webhook::store::webhooks as webhook_store;

use super::{DataPool, StoreResult, on_pool};

const MESSAGES_BY_DIRECTION: &str =
    "SELECT direction, COUNT(*) AS n FROM messages GROUP BY direction";
const SESSION_STATUSES: &str = "SELECT id, status FROM sessions";
const MESSAGES_BY_SESSION_DIRECTION: &str =
    "SELECT session_id, direction, COUNT(*) AS n FROM messages GROUP BY session_id, direction";

pub(crate) async fn messages_by_direction(db: &DataPool) -> StoreResult<Vec<(String, i64)>> {
    Ok(on_pool!(db, |p| sqlx::query_as(MESSAGES_BY_DIRECTION)
        .fetch_all(p)
        .await)?)
}

pub(crate) async fn webhooks_by_active(db: &DataPool) -> StoreResult<Vec<(bool, i64)>> {
    Ok(webhook_store::count_by_active(db).await?)
}

/// `(status, count)` over the sessions `include` accepts.
pub(crate) async fn sessions_by_status_where(
    db: &DataPool,
    include: impl Fn(&str) -> bool,
) -> StoreResult<Vec<(String, i64)>> {
    let rows: Vec<(String, String)> =
        on_pool!(db, |p| sqlx::query_as(SESSION_STATUSES).fetch_all(p).await)?;
    Ok(tally(
        rows.into_iter()
            .filter(|(id, _)| include(id))
            .map(|(_, status)| (status, 1)),
    ))
}

/// `(direction, count)` over the messages of the sessions `include` accepts.
pub(crate) async fn messages_by_direction_where(
    db: &DataPool,
    include: impl Fn(&str) -> bool,
) -> StoreResult<Vec<(String, i64)>> {
    let rows: Vec<(String, String, i64)> =
        on_pool!(db, |p| sqlx::query_as(MESSAGES_BY_SESSION_DIRECTION)
            .fetch_all(p)
            .await)?;
    Ok(tally(
        rows.into_iter()
            .filter(|(id, _, _)| include(id))
            .map(|(_, direction, n)| (direction, n)),
    ))
}

/// `(active, count)` over the webhooks of the sessions `include` accepts.
pub(crate) async fn webhooks_by_active_where(
    db: &DataPool,
    include: impl Fn(&str) -> bool,
) -> StoreResult<Vec<(bool, i64)>> {
    let rows = webhook_store::count_by_session_active(db).await?;
    Ok(tally(
        rows.into_iter()
            .filter(|(id, _, _)| include(id))
            .map(|(_, active, n)| (active, n)),
    ))
}

fn tally<K: Ord>(pairs: impl Iterator<Item = (K, i64)>) -> Vec<(K, i64)> {
    let mut counts = std::collections::BTreeMap::new();
    for (key, n) in pairs {
        *counts.entry(key).or_insert(0) += n;
    }
    counts.into_iter().collect()
}
