//! Search for the built-in search provider: full text over the `messages` table (FTS5 `messages_fts`,
//! migration 0030, on SQLite; a generated `tsvector` column on PostgreSQL) and the chats whose id or name
//! contains the query (the chats of the stored messages and of `chat_states`, named as the chat list
//! names them: the name history sync gave, else the contact's push name). Reads only; the rows
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

/// The chats a search may match, as `(session_id, chat_id)` with what names and dates them: every chat
/// of a stored message or of `chat_states`, in the sessions `$2` (one) and `$4` (a JSON array of ids, the
/// key's scope) and the chat `$3`, when given. `$1` is the query, lowercased.
macro_rules! chats_sqlite {
    () => {
        "FROM (SELECT session_id, chat_id FROM messages WHERE ($2 IS NULL OR session_id = $2) \
          AND ($3 IS NULL OR chat_id = $3) \
          AND ($4 IS NULL OR session_id IN (SELECT value FROM json_each($4))) \
         UNION SELECT session_id, chat_id FROM chat_states WHERE ($2 IS NULL OR session_id = $2) \
          AND ($3 IS NULL OR chat_id = $3) \
          AND ($4 IS NULL OR session_id IN (SELECT value FROM json_each($4)))) k \
         LEFT JOIN (SELECT session_id, chat_id, MAX(chat_name) AS name, MAX(is_group) AS is_group, \
          MAX(timestamp) AS ts FROM messages WHERE ($2 IS NULL OR session_id = $2) \
          AND ($3 IS NULL OR chat_id = $3) \
          AND ($4 IS NULL OR session_id IN (SELECT value FROM json_each($4))) \
          GROUP BY session_id, chat_id) m ON m.session_id = k.session_id AND m.chat_id = k.chat_id \
         LEFT JOIN chat_states s ON s.session_id = k.session_id AND s.chat_id = k.chat_id \
         LEFT JOIN contact_names n ON n.session_id = k.session_id AND n.jid = k.chat_id \
         WHERE instr(lower(k.chat_id), $1) > 0 \
          OR instr(lower(coalesce(s.name, n.push_name, m.name, '')), $1) > 0"
    };
}
const CHATS_SQLITE: &str = concat!(
    "SELECT k.session_id, k.chat_id, coalesce(s.name, n.push_name, m.name) AS name, \
     (coalesce(m.is_group, 0) OR coalesce(s.is_group, 0)) AS is_group, \
     max(coalesce(m.ts, 0), coalesce(s.last_message_at, 0)) AS timestamp ",
    chats_sqlite!(),
    " ORDER BY timestamp DESC, k.session_id, k.chat_id LIMIT $5 OFFSET $6"
);
const COUNT_CHATS_SQLITE: &str = concat!("SELECT COUNT(*) ", chats_sqlite!());

/// [`chats_sqlite`] on PostgreSQL.
macro_rules! chats_pg {
    () => {
        "FROM (SELECT session_id, chat_id FROM messages WHERE ($2::text IS NULL OR session_id = $2) \
          AND ($3::text IS NULL OR chat_id = $3) \
          AND ($4::text IS NULL OR session_id IN (SELECT jsonb_array_elements_text($4::jsonb))) \
         UNION SELECT session_id, chat_id FROM chat_states WHERE ($2::text IS NULL OR session_id = $2) \
          AND ($3::text IS NULL OR chat_id = $3) \
          AND ($4::text IS NULL OR session_id IN (SELECT jsonb_array_elements_text($4::jsonb)))) k \
         LEFT JOIN (SELECT session_id, chat_id, MAX(chat_name) AS name, bool_or(is_group) AS is_group, \
          MAX(timestamp) AS ts FROM messages WHERE ($2::text IS NULL OR session_id = $2) \
          AND ($3::text IS NULL OR chat_id = $3) \
          AND ($4::text IS NULL OR session_id IN (SELECT jsonb_array_elements_text($4::jsonb))) \
          GROUP BY session_id, chat_id) m ON m.session_id = k.session_id AND m.chat_id = k.chat_id \
         LEFT JOIN chat_states s ON s.session_id = k.session_id AND s.chat_id = k.chat_id \
         LEFT JOIN contact_names n ON n.session_id = k.session_id AND n.jid = k.chat_id \
         WHERE strpos(lower(k.chat_id), $1::text) > 0 \
          OR strpos(lower(coalesce(s.name, n.push_name, m.name, '')), $1::text) > 0"
    };
}
const CHATS_PG: &str = concat!(
    "SELECT k.session_id, k.chat_id, coalesce(s.name, n.push_name, m.name) AS name, \
     (coalesce(m.is_group, FALSE) OR coalesce(s.is_group, FALSE)) AS is_group, \
     GREATEST(coalesce(m.ts, 0), coalesce(s.last_message_at, 0))::bigint AS timestamp ",
    chats_pg!(),
    " ORDER BY timestamp DESC, k.session_id, k.chat_id LIMIT $5 OFFSET $6"
);
const COUNT_CHATS_PG: &str = concat!("SELECT COUNT(*) ", chats_pg!());

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

/// A chat whose id or name contains the query.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub(crate) struct ChatMatch {
    pub session_id: String,
    pub chat_id: String,
    /// The name the gateway knows for the chat (`None`: none stored).
    pub name: Option<String>,
    pub is_group: bool,
    /// Unix seconds of the chat's newest activity the gateway knows (0: none).
    pub timestamp: i64,
}

/// What one search found: a page of message hits and a page of chat matches, each with its total.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SearchPage {
    pub hits: Vec<SearchRow>,
    pub total: i64,
    pub chats: Vec<ChatMatch>,
    pub chat_total: i64,
}

impl SearchFilter {
    /// Chats have no direction, type, sender or single date: a search narrowed by one of those asks
    /// about messages only, and matches no chat.
    fn matches_chats(&self) -> bool {
        self.direction.is_none()
            && self.kind.is_none()
            && self.from.is_none()
            && self.date_from.is_none()
            && self.date_to.is_none()
    }
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

/// The chat-match statements' binds: the lowercased query, the session, the chat and the scope.
macro_rules! bind_chats {
    ($query:expr, $needle:expr, $f:expr, $scope:expr) => {
        $query
            .bind($needle)
            .bind(&$f.session_id)
            .bind(&$f.chat_id)
            .bind($scope)
    };
}

/// The spec's search timeout, for each statement of a search's transaction on PostgreSQL.
const PG_STATEMENT_TIMEOUT: &str = "SET LOCAL statement_timeout = '10s'";

/// One page of message hits, best first, and one of chat matches, newest first (the same `limit` and
/// `offset` for each), with their totals, all read from one snapshot (a message committed between the
/// statements must not make a count disagree with its page).
pub(crate) async fn search(db: &DataPool, f: &SearchFilter) -> StoreResult<SearchPage> {
    let scope = f
        .sessions
        .as_ref()
        .map(|s| serde_json::Value::from(s.clone()).to_string());
    // Case-insensitive containment: both sides lowercased (SQLite's `lower` folds ASCII letters only).
    let needle = f.text.to_lowercase();
    let mut page = SearchPage::default();
    match db {
        DataPool::Sqlite(p) => {
            let mut tx = p.begin().await?;
            let text = fts5_query(&f.text);
            page.hits = bind_filters!(
                sqlx::query_as::<_, SearchRow>(SEARCH_SQLITE),
                &text,
                f,
                &scope
            )
            .bind(f.limit)
            .bind(f.offset)
            .fetch_all(&mut *tx)
            .await?;
            page.total =
                bind_filters!(sqlx::query_scalar::<_, i64>(COUNT_SQLITE), &text, f, &scope)
                    .fetch_one(&mut *tx)
                    .await?;
            if f.matches_chats() {
                page.chats = bind_chats!(
                    sqlx::query_as::<_, ChatMatch>(CHATS_SQLITE),
                    &needle,
                    f,
                    &scope
                )
                .bind(f.limit)
                .bind(f.offset)
                .fetch_all(&mut *tx)
                .await?;
                page.chat_total = bind_chats!(
                    sqlx::query_scalar::<_, i64>(COUNT_CHATS_SQLITE),
                    &needle,
                    f,
                    &scope
                )
                .fetch_one(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        }
        DataPool::Postgres(p) => {
            let mut tx = p
                .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                .await?;
            // The route stops waiting after 10 s, but a dropped query keeps running on the server: bound it
            // there too, so abandoned searches cannot pile up on the database.
            sqlx::query(PG_STATEMENT_TIMEOUT).execute(&mut *tx).await?;
            page.hits = bind_filters!(
                sqlx::query_as::<_, SearchRow>(SEARCH_PG),
                &f.text,
                f,
                &scope
            )
            .bind(f.limit)
            .bind(f.offset)
            .fetch_all(&mut *tx)
            .await?;
            page.total = bind_filters!(sqlx::query_scalar::<_, i64>(COUNT_PG), &f.text, f, &scope)
                .fetch_one(&mut *tx)
                .await?;
            if f.matches_chats() {
                page.chats =
                    bind_chats!(sqlx::query_as::<_, ChatMatch>(CHATS_PG), &needle, f, &scope)
                        .bind(f.limit)
                        .bind(f.offset)
                        .fetch_all(&mut *tx)
                        .await?;
                page.chat_total = bind_chats!(
                    sqlx::query_scalar::<_, i64>(COUNT_CHATS_PG),
                    &needle,
                    f,
                    &scope
                )
                .fetch_one(&mut *tx)
                .await?;
            }
            tx.commit().await?;
        }
    }
    Ok(page)
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
