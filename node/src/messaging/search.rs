//! Full-text search over stored messages, for `GET /api/search` (the built-in provider: SQLite FTS5 or
//! PostgreSQL full text).

use super::MessagingService;
use crate::store::StoreResult;
use crate::store::search::{SearchFilter, SearchRow, search};

impl MessagingService {
    /// The page of hits and the total count for `filter` (its session scope included).
    pub(crate) async fn search(&self, filter: &SearchFilter) -> StoreResult<(Vec<SearchRow>, i64)> {
        search(&self.db, filter).await
    }
}
