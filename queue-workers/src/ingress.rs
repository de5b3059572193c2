//! The ingress worker's store step: mark one `ingress_events` row processed. Input: an `IngressJob` from
//! `ingress-queue`. It does not receive or verify integration requests (the node's ingress route does).

use crate::db::{DataPool, now_ms, write_turn};
use crate::on_pool;
use wagate_db::table_spec::{TableSpec, int, int_or, json, text};

/// `ingress_events` as the spec's data export shows it (`ingressEvents`).
pub const INGRESS_EVENTS_EXPORT: TableSpec = TableSpec {
    key: "ingressEvents",
    name: "ingress_events",
    columns: &[
        text("id"),
        text("source"),
        text("session_id"),
        json("payload"),
        text("status"),
        int_or("attempts", "0"),
        text("last_error"),
        int("created_at"),
        int("processed_at"),
    ],
    order_by: "id",
};

const MARK_PROCESSED: &str = "UPDATE ingress_events \
     SET status = 'processed', attempts = attempts + 1, last_error = NULL, processed_at = $2 \
     WHERE id = $1 AND status <> 'processed'";

#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    #[error("ingress database error: {0}")]
    Db(#[from] sqlx::Error),
}

/// Marks the row processed; `false` when it is missing or was already processed (a duplicate job).
pub async fn process_ingress(
    pool: &DataPool,
    ingress_event_id: &str,
) -> Result<bool, IngressError> {
    let _turn = write_turn(pool).await;
    let done = on_pool!(pool, |p| sqlx::query(MARK_PROCESSED)
        .bind(ingress_event_id)
        .bind(now_ms())
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
    Ok(done == 1)
}
