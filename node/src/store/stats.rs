//! Cross-session counts for `GET /api/stats/overview`: messages by direction, webhooks by state.

use super::{DataPool, StoreResult, with_pool};

const MESSAGES_BY_DIRECTION: &str =
    "SELECT direction, COUNT(*) AS n FROM messages GROUP BY direction";
const WEBHOOKS_BY_ACTIVE: &str = "SELECT active, COUNT(*) AS n FROM webhooks GROUP BY active";

pub(crate) async fn messages_by_direction(db: &DataPool) -> StoreResult<Vec<(String, i64)>> {
    Ok(with_pool!(db, p => sqlx::query_as(MESSAGES_BY_DIRECTION).fetch_all(p).await)?)
}

pub(crate) async fn webhooks_by_active(db: &DataPool) -> StoreResult<Vec<(bool, i64)>> {
    Ok(with_pool!(db, p => sqlx::query_as(WEBHOOKS_BY_ACTIVE).fetch_all(p).await)?)
}
