//! Search over what the gateway stored, for `GET /api/search` (the built-in provider): full text over
//! message bodies (SQLite FTS5 or PostgreSQL full text) and the chats whose id or name holds the query.

use super::MessagingService;
use crate::store::StoreResult;
use crate::store::search::{SearchFilter, SearchPage, search};

impl MessagingService {
    /// The pages of message hits and chat matches with their totals for `filter` (its session scope
    /// included).
    pub(crate) async fn search(&self, filter: &SearchFilter) -> StoreResult<SearchPage> {
        search(&self.db, filter).await
    }
}
