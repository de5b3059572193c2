//! Full-text search over the `messages` table for the built-in search provider: FTS5 (`messages_fts`,
//! migration 0030) on SQLite, a generated `tsvector` column on PostgreSQL. Reads only; the messages
//! themselves are written by the message store.

use super::{DataPool, StoreResult};

/// Ordering and paging of a hit page.
macro_rules! page {
    () => {
        " ORDER BY score DESC, m.timestamp DESC LIMIT $10 OFFSET $11"
    };
}

/// The WHERE clause shared by the SQLite page and count (a macro so the statements stay literals).
macro_rules! filters_sqlite {
    () => {
        "messages_fts MATCH $1 \
     AND ($2 IS NULL OR m.session_id = $2) AND ($3 IS NULL OR m.chat_id = $3) \
     AND ($4 IS NULL OR m.direction = $4) AND ($5 IS NULL OR m.type = $5) \
     AND ($6 IS NULL OR m.from_jid = $6) AND ($7 IS NULL OR m.timestamp >= $7) \
     AND ($8 IS NULL OR m.timestamp <= $8) \
     AND ($9 IS NULL OR m.session_id IN (SELECT value FROM json_each($9)))"
    };
}
const SEARCH_SQLITE: &str = concat!(
    "SELECT m.id, m.wa_message_id, m.session_id, m.chat_id, \
     coalesce(m.body, '') AS body, snippet(messages_fts, 0, '<mark>', '</mark>', '…', 16) AS snippet, \
     m.timestamp, m.type AS kind, m.direction, m.from_jid, -bm25(messages_fts) AS score \
     FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid WHERE ",
    filters_sqlite!(),
    page!()
);
const COUNT_SQLITE: &str = concat!(
    "SELECT COUNT(*) FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid WHERE ",
    filters_sqlite!()
);

/// The WHERE clause shared by the PostgreSQL page and count.
macro_rules! filters_pg {
    () => {
        "m.body_tsv @@ q \
     AND ($2::text IS NULL OR m.session_id = $2) AND ($3::text IS NULL OR m.chat_id = $3) \
     AND ($4::text IS NULL OR m.direction = $4) AND ($5::text IS NULL OR m.type = $5) \
     AND ($6::text IS NULL OR m.from_jid = $6) AND ($7::bigint IS NULL OR m.timestamp >= $7) \
     AND ($8::bigint IS NULL OR m.timestamp <= $8) \
     AND ($9::text IS NULL OR m.session_id IN (SELECT jsonb_array_elements_text($9::jsonb)))"
    };
}
const SEARCH_PG: &str = concat!(
    "SELECT m.id, m.wa_message_id, m.session_id, m.chat_id, \
     coalesce(m.body, '') AS body, \
     ts_headline('simple', coalesce(m.body, ''), q, 'StartSel=<mark>, StopSel=</mark>, MaxWords=16, MinWords=4') AS snippet, \
     m.timestamp, m.type AS kind, m.direction, m.from_jid, ts_rank(m.body_tsv, q)::float8 AS score \
     FROM messages m, plainto_tsquery('simple', $1) q WHERE ",
    filters_pg!(),
    page!()
);
const COUNT_PG: &str = concat!(
    "SELECT COUNT(*) FROM messages m, plainto_tsquery('simple', $1) q WHERE ",
    filters_pg!()
);

/// What to look for; `None` filters are not applied. Times are Unix seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SearchFilter {
    /// The user's words; each backend turns them into its own query syntax.
    pub text: String,
    pub session_id: Option<String>,
    pub chat_id: Option<String>,
    pub direction: Option<String>,
    pub kind: Option<String>,
    pub from: Option<String>,
    pub date_from: Option<i64>,
    pub date_to: Option<i64>,
    /// The sessions a scoped key may see; `None` = all.
    pub sessions: Option<Vec<String>>,
    pub limit: i64,
    pub offset: i64,
}

#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub(crate) struct SearchRow {
    pub id: String,
    pub wa_message_id: String,
    pub session_id: String,
    pub chat_id: String,
    pub body: String,
    pub snippet: String,
    pub timestamp: i64,
    pub kind: String,
    pub direction: String,
    pub from_jid: String,
    pub score: f64,
}

/// FTS5 query syntax: every word a quoted phrase (quotes doubled), all of them required.
fn fts5_query(text: &str) -> String {
    text.split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" ")
}

macro_rules! bind_filters {
    ($query:expr, $text:expr, $f:expr, $scope:expr) => {
        $query
            .bind($text)
            .bind(&$f.session_id)
            .bind(&$f.chat_id)
            .bind(&$f.direction)
            .bind(&$f.kind)
            .bind(&$f.from)
            .bind($f.date_from)
            .bind($f.date_to)
            .bind($scope)
    };
}

/// One page of hits, best first, and the total number of matches, both read from one snapshot (a message
/// committed between the two statements must not make the count disagree with the page).
pub(crate) async fn search(db: &DataPool, f: &SearchFilter) -> StoreResult<(Vec<SearchRow>, i64)> {
    let scope = f
        .sessions
        .as_ref()
        .map(|s| serde_json::Value::from(s.clone()).to_string());
    Ok(match db {
        DataPool::Sqlite(p) => {
            let mut tx = p.begin().await?;
            let text = fts5_query(&f.text);
            let rows = bind_filters!(
                sqlx::query_as::<_, SearchRow>(SEARCH_SQLITE),
                &text,
                f,
                &scope
            )
            .bind(f.limit)
            .bind(f.offset)
            .fetch_all(&mut *tx)
            .await?;
            let total = bind_filters!(sqlx::query_scalar::<_, i64>(COUNT_SQLITE), &text, f, &scope)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            (rows, total)
        }
        DataPool::Postgres(p) => {
            let mut tx = p
                .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await?;
            let rows = bind_filters!(
                sqlx::query_as::<_, SearchRow>(SEARCH_PG),
                &f.text,
                f,
                &scope
            )
            .bind(f.limit)
            .bind(f.offset)
            .fetch_all(&mut *tx)
            .await?;
            let total = bind_filters!(sqlx::query_scalar::<_, i64>(COUNT_PG), &f.text, f, &scope)
                .fetch_one(&mut *tx)
                .await?;
            tx.commit().await?;
            (rows, total)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::fts5_query;

    #[test]
    fn user_words_become_quoted_fts5_phrases() {
        assert_eq!(fts5_query("hello  world"), "\"hello\" \"world\"");
        assert_eq!(fts5_query("say \"hi\" OR"), "\"say\" \"\"\"hi\"\"\" \"OR\"");
    }
}
