//! `StatsService`: the cross-session aggregates of `GET /api/stats/overview` and
//! `GET /api/sessions/stats/overview` (sessions by status, stored messages by direction, webhooks by active
//! flag), over every session or only those a scoped key covers.

use crate::store::{DataPool, StoreResult, sessions as session_store, stats};

/// The raw counts; the handler shapes them for the wire.
pub(crate) struct Overview {
    pub sessions_by_status: Vec<(String, i64)>,
    pub messages_by_direction: Vec<(String, i64)>,
    pub webhooks_by_active: Vec<(bool, i64)>,
}

#[derive(Clone)]
pub(crate) struct StatsService {
    db: DataPool,
}

impl StatsService {
    pub(crate) fn new(db: DataPool) -> StatsService {
        StatsService { db }
    }

    /// `(status, count)` over the sessions `include` accepts, or over all of them when it is `None`.
    pub(crate) async fn sessions_by_status(
        &self,
        include: Option<impl Fn(&str) -> bool>,
    ) -> StoreResult<Vec<(String, i64)>> {
        match include {
            Some(mine) => stats::sessions_by_status_where(&self.db, mine).await,
            None => session_store::count_by_status(&self.db).await,
        }
    }

    /// Counts over the sessions `include` accepts, or over all of them when it is `None`.
    pub(crate) async fn overview(
        &self,
        include: Option<impl Fn(&str) -> bool + Copy>,
    ) -> StoreResult<Overview> {
        let db = &self.db;
        Ok(match include {
            Some(mine) => Overview {
                sessions_by_status: self.sessions_by_status(Some(mine)).await?,
                messages_by_direction: stats::messages_by_direction_where(db, mine).await?,
                webhooks_by_active: stats::webhooks_by_active_where(db, mine).await?,
            },
            None => Overview {
                sessions_by_status: self.sessions_by_status(None::<fn(&str) -> bool>).await?,
                messages_by_direction: stats::messages_by_direction(db).await?,
                webhooks_by_active: stats::webhooks_by_active(db).await?,
            },
        })
    }
}
