//! The `messages` table: every inbound and outbound message once (deduplicated on
//! `(session_id, wa_message_id)`), its delivery status, edit/revoke/star flags, and the list pages.
//! Writes that accompany an event take the caller's `DataTx`; the rules (who writes what) are in `messaging`.

use std::collections::HashSet;
use std::sync::LazyLock;

use super::{
    DataPool, DataTx, MultiRow, StoreError, StoreResult, execute, execute_tx, on_pool, on_tx,
    placeholders,
};

const INSERT: &str = "INSERT INTO messages (id, session_id, wa_message_id, chat_id, from_jid, to_jid, chat_name, \
     author, body, type, direction, status, timestamp, has_media, media, mentioned_ids, is_group, quoted_id, \
     extra, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
     $18, $19, $20) ON CONFLICT (session_id, wa_message_id) DO NOTHING";
/// [`INSERT`] for many rows (see [`MultiRow`]); answers the row ids actually inserted.
static INSERT_MANY: LazyLock<MultiRow> = LazyLock::new(|| {
    MultiRow::new(
        "INSERT INTO messages (id, session_id, wa_message_id, chat_id, from_jid, to_jid, chat_name, author, \
         body, type, direction, status, timestamp, has_media, media, mentioned_ids, is_group, quoted_id, extra, \
         created_at) VALUES",
        20,
        |n| placeholders(n, 20),
        "ON CONFLICT (session_id, wa_message_id) DO NOTHING RETURNING id",
    )
});
/// [`INSERT`] for many messages in ONE statement on SQLite: `$1` is a JSON array of rows, each an array of the
/// twenty columns in order. Each statement is a round trip to the connection's thread, and the fixed-size
/// multi-row texts took up to nine for a group of writes. `WHERE true` keeps `ON CONFLICT` from parsing as a
/// join constraint; `ORDER BY key` keeps the array's order, so a later duplicate is the one skipped.
const INSERT_MANY_SQLITE_JSON: &str = "INSERT INTO messages (id, session_id, wa_message_id, chat_id, from_jid, \
     to_jid, chat_name, author, body, type, direction, status, timestamp, has_media, media, mentioned_ids, \
     is_group, quoted_id, extra, created_at) \
     SELECT value ->> 0, value ->> 1, value ->> 2, value ->> 3, value ->> 4, value ->> 5, value ->> 6, \
     value ->> 7, value ->> 8, value ->> 9, value ->> 10, value ->> 11, value ->> 12, value ->> 13, \
     value ->> 14, value ->> 15, value ->> 16, value ->> 17, value ->> 18, value ->> 19 \
     FROM json_each($1) WHERE true ORDER BY key \
     ON CONFLICT (session_id, wa_message_id) DO NOTHING RETURNING id";
/// [`UPDATE_STATUS`] for many messages at once: `$1` is the list of `(session, network id, status, rank)`, a
/// JSON array of arrays on SQLite and four parallel arrays on PostgreSQL. Each message appears once in it.
const UPDATE_STATUS_MANY_SQLITE: &str = "UPDATE messages SET status = u.status, version = messages.version + 1 FROM \
     (SELECT value ->> 0 AS session_id, value ->> 1 AS wa_id, value ->> 2 AS status, value ->> 3 AS rank \
      FROM json_each($1)) AS u \
     WHERE messages.session_id = u.session_id AND messages.wa_message_id = u.wa_id \
     AND (CASE messages.status WHEN 'pending' THEN 0 WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 \
     WHEN 'read' THEN 3 ELSE 4 END) < u.rank RETURNING messages.wa_message_id";
const UPDATE_STATUS_MANY_POSTGRES: &str = "UPDATE messages SET status = u.status, version = messages.version + 1 FROM \
     UNNEST($1::text[], $2::text[], $3::text[], $4::bigint[]) AS u(session_id, wa_id, status, rank) \
     WHERE messages.session_id = u.session_id AND messages.wa_message_id = u.wa_id \
     AND (CASE messages.status WHEN 'pending' THEN 0 WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 \
     WHEN 'read' THEN 3 ELSE 4 END) < u.rank RETURNING messages.wa_message_id";
/// Moves the status forward only (pending < sent < delivered < read; failed is terminal).
const UPDATE_STATUS: &str = "UPDATE messages SET status = $3, version = version + 1 WHERE session_id = $1 AND wa_message_id = $2 \
     AND (CASE status WHEN 'pending' THEN 0 WHEN 'sent' THEN 1 WHEN 'delivered' THEN 2 WHEN 'read' THEN 3 \
     ELSE 4 END) < $4";
const EXISTS: &str = "SELECT 1 FROM messages WHERE session_id = $1 AND wa_message_id = $2";
const KIND_AND_DIRECTION: &str =
    "SELECT type, direction FROM messages WHERE session_id = $1 AND wa_message_id = $2";
/// Deleted for everyone: the row stays (the chat keeps its place for the message, and `revoked` refuses
/// later actions on it) as type `revoked` with no body and no media, so reads, the chat's last message
/// and search (the FTS triggers and the generated tsvector follow `body`) no longer show what was said.
/// The media object itself stays: it is content-addressed per session and may back other rows.
/// Only a live row: a message is revoked once, so a revoke delivered again changes nothing.
const SET_REVOKED: &str = "UPDATE messages SET revoked = TRUE, type = 'revoked', body = NULL, \
     has_media = FALSE, media = NULL, version = version + 1 WHERE session_id = $1 AND wa_message_id = $2 \
     AND revoked = FALSE";
/// A revoked message keeps no body: a late edit of it (the network may deliver one after the revoke)
/// must not bring text back.
const SET_BODY: &str = "UPDATE messages SET body = $3, version = version + 1 WHERE session_id = $1 AND wa_message_id = $2 \
     AND revoked = FALSE";
const SET_STARRED: &str = "UPDATE messages SET starred = $3, version = version + 1 WHERE session_id = $1 AND wa_message_id = $2";
const FIND: &str =
    "SELECT * FROM messages WHERE session_id = $1 AND (id = $2 OR wa_message_id = $2) LIMIT 1";
/// The rows of a page as `[id, version, has no media, version of the quoted row]`, in page order: what the
/// page cache needs to serve the rows it holds without reading them (see `messaging/page_cache.rs`). A row's
/// JSON shows the text of the message it quotes, so the quoted row's version (NULL when it is not stored) is
/// part of what the kept JSON was built from. The join runs on the page's rows only, by the
/// `(session_id, wa_message_id)` key.
const PAGE_KEYS_SQLITE_JSON: &str = "SELECT json_group_array(json_array(p.id, p.version, \
     json(iif(p.media IS NULL, 'true', 'false')), q.version) ORDER BY p.created_at DESC, p.id DESC) \
     FROM (SELECT id, version, media, quoted_id, created_at FROM messages \
     WHERE session_id = $1 \
     AND ($2 IS NULL OR chat_id = $2) AND ($3 IS NULL OR from_jid = $3) \
     AND ($4 IS NULL OR direction = $4) AND ($5 IS NULL OR type = $5) \
     AND ($6 IS NULL OR created_at < $6 OR (created_at = $6 AND id < $7)) \
     ORDER BY created_at DESC, id DESC LIMIT $8 OFFSET $9) AS p \
     LEFT JOIN messages q ON q.session_id = $1 AND q.wa_message_id = p.quoted_id";
const PAGE_KEYS: &str = "SELECT p.id, p.version, p.plain, q.version AS quoted_version FROM \
     (SELECT id, version, media IS NULL AS plain, quoted_id, created_at FROM messages WHERE session_id = $1 \
     AND ($2 IS NULL OR chat_id = $2) AND ($3 IS NULL OR from_jid = $3) \
     AND ($4 IS NULL OR direction = $4) AND ($5 IS NULL OR type = $5) \
     AND ($6 IS NULL OR created_at < $6 OR (created_at = $6 AND id < $7)) \
     ORDER BY created_at DESC, id DESC LIMIT $8 OFFSET $9) AS p \
     LEFT JOIN messages q ON q.session_id = $1 AND q.wa_message_id = p.quoted_id \
     ORDER BY p.created_at DESC, p.id DESC";
/// The session's rows of the ids in `$2` (a JSON array), each as `[version, [columns of MessageRow], quoted
/// row's version, quoted row's body]`: the quoted row joined in the same statement (one read per page, not
/// one per reply). A quoted row deleted for everyone gives no body, whatever its column still holds.
const VERSIONED_ROWS_SQLITE_JSON: &str = "SELECT json_group_array(json_array(m.version, json_array(m.id, \
     m.session_id, m.wa_message_id, m.chat_id, m.from_jid, m.to_jid, m.chat_name, m.author, m.body, m.type, \
     m.direction, m.status, m.timestamp, json(iif(m.has_media, 'true', 'false')), m.media, m.mentioned_ids, \
     json(iif(m.is_group, 'true', 'false')), m.quoted_id, m.extra, json(iif(m.starred, 'true', 'false')), \
     json(iif(m.revoked, 'true', 'false')), m.created_at), q.version, iif(q.revoked, NULL, q.body))) \
     FROM messages m LEFT JOIN messages q ON q.session_id = m.session_id AND q.wa_message_id = m.quoted_id \
     WHERE m.session_id = $1 AND m.id IN (SELECT value FROM json_each($2))";
const VERSIONED_ROWS: &str = "SELECT m.*, q.version AS quoted_version, \
     CASE WHEN q.revoked THEN NULL ELSE q.body END AS quoted_body \
     FROM messages m LEFT JOIN messages q ON q.session_id = m.session_id AND q.wa_message_id = m.quoted_id \
     WHERE m.session_id = $1 AND m.id = ANY($2)";
/// Every row's version moved past any it had before: imported rows come in at version 0, and a node may
/// hold a row of the same id from before the import.
const RESTAMP_VERSIONS: &str = "UPDATE messages SET version = $1";
/// One row per chat: its name, newest message time and body, and inbound messages not read yet.
const CHATS: &str = "SELECT chat_id, MAX(chat_name) AS name, MAX(timestamp) AS ts, \
     SUM(CASE WHEN direction = 'incoming' AND status <> 'read' THEN 1 ELSE 0 END) AS unread, \
     (SELECT body FROM messages l WHERE l.session_id = $1 AND l.chat_id = m.chat_id \
      ORDER BY l.timestamp DESC, l.id DESC LIMIT 1) AS last_body \
     FROM messages m WHERE session_id = $1 GROUP BY chat_id ORDER BY ts DESC";
const DIRECT_CHATS: &str = "SELECT chat_id, MAX(chat_name) FROM messages \
     WHERE session_id = $1 AND is_group = FALSE GROUP BY chat_id ORDER BY chat_id";
const CHAT_EXISTS: &str =
    "SELECT COUNT(*) FROM messages WHERE session_id = $1 AND chat_id = $2 AND id <> $3";

/// A message row, as written and as read back (as a row, or as a JSON array in field order on SQLite pages).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub(crate) struct MessageRow {
    pub id: String,
    pub session_id: String,
    pub wa_message_id: String,
    pub chat_id: String,
    pub from_jid: String,
    pub to_jid: String,
    pub chat_name: Option<String>,
    pub author: Option<String>,
    pub body: Option<String>,
    #[sqlx(rename = "type")]
    pub kind: String,
    pub direction: String,
    pub status: String,
    pub timestamp: i64,
    pub has_media: bool,
    /// JSON: `{key, mimetype, filename?, sizeBytes}` (the media file's content-addressed key).
    pub media: Option<String>,
    /// JSON array of JIDs.
    pub mentioned_ids: Option<String>,
    pub is_group: bool,
    pub quoted_id: Option<String>,
    pub extra: Option<String>,
    pub starred: bool,
    pub revoked: bool,
    pub created_at: i64,
}

/// A row of a page as the page cache sees it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Deserialize)]
pub(crate) struct PageKey {
    pub id: String,
    pub version: i64,
    /// Without media, a row's JSON depends on the row and the row it quotes alone (media JSON reads the
    /// media store).
    pub plain: bool,
    /// The version of the row this one quotes; `None` when it quotes none, or one this session does not store.
    pub quoted_version: Option<i64>,
}

/// A row with the version it was read at, and what its JSON shows of the message it quotes.
#[derive(Debug, Clone, sqlx::FromRow, serde::Deserialize)]
pub(crate) struct VersionedRow {
    pub version: i64,
    #[sqlx(flatten)]
    pub row: MessageRow,
    /// As [`PageKey::quoted_version`], read in the same statement as the row.
    pub quoted_version: Option<i64>,
    /// The quoted row's body; `None` when it is not stored, has none, or was deleted for everyone.
    pub quoted_body: Option<String>,
}

/// What a page of `GET /messages` asks for; `None` filters match everything.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageQuery {
    pub chat_id: Option<String>,
    pub from: Option<String>,
    pub direction: Option<String>,
    pub kind: Option<String>,
    /// `(created_at, id)` of the previous page's last row.
    pub after: Option<(i64, String)>,
    pub limit: i64,
    pub offset: i64,
}

/// Inserts a message; false when `(session_id, wa_message_id)` was already stored, `SessionGone` when the
/// session was deleted meanwhile (a group commit that fails retries its writes one by one through here).
pub(crate) async fn insert(tx: &mut DataTx, m: &MessageRow) -> StoreResult<bool> {
    let done = execute_tx!(
        tx,
        sqlx::query(INSERT)
            .bind(&m.id)
            .bind(&m.session_id)
            .bind(&m.wa_message_id)
            .bind(&m.chat_id)
            .bind(&m.from_jid)
            .bind(&m.to_jid)
            .bind(&m.chat_name)
            .bind(&m.author)
            .bind(&m.body)
            .bind(&m.kind)
            .bind(&m.direction)
            .bind(&m.status)
            .bind(m.timestamp)
            .bind(m.has_media)
            .bind(&m.media)
            .bind(&m.mentioned_ids)
            .bind(m.is_group)
            .bind(&m.quoted_id)
            .bind(&m.extra)
            .bind(m.created_at)
    )
    .map_err(|e| StoreError::from(e).in_session(&m.session_id))?;
    Ok(done == 1)
}

/// Inserts many messages in a few statements, in order (a later duplicate of an earlier row is skipped, as
/// one by one); answers the row ids that were inserted (the others were already stored).
pub(crate) async fn insert_many(
    tx: &mut DataTx,
    rows: &[&MessageRow],
) -> StoreResult<HashSet<String>> {
    if let (DataTx::Sqlite(t, _), [_, _, ..]) = (&mut *tx, rows) {
        let ids: Vec<String> = sqlx::query_scalar(INSERT_MANY_SQLITE_JSON)
            .bind(super::to_json(
                &rows.iter().map(|m| JsonColumns::of(m)).collect::<Vec<_>>(),
            )?)
            .fetch_all(&mut **t)
            .await?;
        return Ok(ids.into_iter().collect());
    }
    let mut inserted = HashSet::with_capacity(rows.len());
    for (sql, chunk) in INSERT_MANY.chunks(tx, rows) {
        let ids: Vec<String> = on_tx!(tx, |c| {
            let mut q = sqlx::query_scalar(sql);
            for m in chunk {
                q = q
                    .bind(&m.id)
                    .bind(&m.session_id)
                    .bind(&m.wa_message_id)
                    .bind(&m.chat_id)
                    .bind(&m.from_jid)
                    .bind(&m.to_jid)
                    .bind(&m.chat_name)
                    .bind(&m.author)
                    .bind(&m.body)
                    .bind(&m.kind)
                    .bind(&m.direction)
                    .bind(&m.status)
                    .bind(m.timestamp)
                    .bind(m.has_media)
                    .bind(&m.media)
                    .bind(&m.mentioned_ids)
                    .bind(m.is_group)
                    .bind(&m.quoted_id)
                    .bind(&m.extra)
                    .bind(m.created_at);
            }
            q.fetch_all(c).await
        })?;
        inserted.extend(ids);
    }
    Ok(inserted)
}

/// A row's columns in [`INSERT_MANY_SQLITE_JSON`]'s order, serialized as a JSON array (booleans become 1/0
/// through `->>`).
#[derive(serde::Serialize)]
#[allow(clippy::type_complexity)]
struct JsonColumns<'a>(
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
    &'a str,
    &'a str,
    i64,
    bool,
    Option<&'a str>,
    Option<&'a str>,
    bool,
    Option<&'a str>,
    Option<&'a str>,
    i64,
);

impl<'a> JsonColumns<'a> {
    fn of(m: &'a MessageRow) -> JsonColumns<'a> {
        JsonColumns(
            &m.id,
            &m.session_id,
            &m.wa_message_id,
            &m.chat_id,
            &m.from_jid,
            &m.to_jid,
            m.chat_name.as_deref(),
            m.author.as_deref(),
            m.body.as_deref(),
            &m.kind,
            &m.direction,
            &m.status,
            m.timestamp,
            m.has_media,
            m.media.as_deref(),
            m.mentioned_ids.as_deref(),
            m.is_group,
            m.quoted_id.as_deref(),
            m.extra.as_deref(),
            m.created_at,
        )
    }
}

/// One forward move of a message's status (see [`update_status`]).
#[derive(Debug, Clone)]
pub(crate) struct StatusMove<'a> {
    pub session_id: &'a str,
    pub wa_message_id: &'a str,
    pub status: &'a str,
    pub rank: i64,
}

/// Moves many messages' statuses forward in one statement; each message must appear at most once.
/// Answers the network ids of the messages whose status moved.
pub(crate) async fn update_status_many(
    tx: &mut DataTx,
    moves: &[StatusMove<'_>],
) -> StoreResult<HashSet<String>> {
    let moved: Vec<String> = match moves {
        [] => Vec::new(),
        [one] => {
            let moved =
                update_status(tx, one.session_id, one.wa_message_id, one.status, one.rank).await?;
            if moved {
                vec![one.wa_message_id.to_owned()]
            } else {
                Vec::new()
            }
        }
        _ => match tx {
            DataTx::Sqlite(t, _) => {
                let list: Vec<(&str, &str, &str, i64)> = moves
                    .iter()
                    .map(|m| (m.session_id, m.wa_message_id, m.status, m.rank))
                    .collect();
                sqlx::query_scalar(UPDATE_STATUS_MANY_SQLITE)
                    .bind(super::to_json(&list)?)
                    .fetch_all(&mut **t)
                    .await?
            }
            DataTx::Postgres(t) => {
                let (mut sessions, mut wa_ids, mut statuses, mut ranks) =
                    (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for m in moves {
                    sessions.push(m.session_id.to_owned());
                    wa_ids.push(m.wa_message_id.to_owned());
                    statuses.push(m.status.to_owned());
                    ranks.push(m.rank);
                }
                sqlx::query_scalar(UPDATE_STATUS_MANY_POSTGRES)
                    .bind(sessions)
                    .bind(wa_ids)
                    .bind(statuses)
                    .bind(ranks)
                    .fetch_all(&mut **t)
                    .await?
            }
        },
    };
    Ok(moved.into_iter().collect())
}

/// Whether the session stores the message of network id `wa_id`.
pub(crate) async fn exists(tx: &mut DataTx, session_id: &str, wa_id: &str) -> StoreResult<bool> {
    let found: Option<i32> = on_tx!(tx, |c| {
        sqlx::query_scalar(EXISTS)
            .bind(session_id)
            .bind(wa_id)
            .fetch_optional(c)
            .await
    })?;
    Ok(found.is_some())
}

/// The stored type and direction (`outgoing`, `incoming`) of the message of network id `wa_id`.
pub(crate) async fn kind_and_direction(
    tx: &mut DataTx,
    session_id: &str,
    wa_id: &str,
) -> StoreResult<Option<(String, String)>> {
    Ok(on_tx!(tx, |c| {
        sqlx::query_as(KIND_AND_DIRECTION)
            .bind(session_id)
            .bind(wa_id)
            .fetch_optional(c)
            .await
    })?)
}

/// Moves a message's status forward to `status` of `rank`; false when nothing changed.
pub(crate) async fn update_status(
    tx: &mut DataTx,
    session_id: &str,
    wa_id: &str,
    status: &str,
    rank: i64,
) -> StoreResult<bool> {
    let done = execute_tx!(
        tx,
        sqlx::query(UPDATE_STATUS)
            .bind(session_id)
            .bind(wa_id)
            .bind(status)
            .bind(rank)
    )?;
    Ok(done > 0)
}

/// Whether a live row was revoked.
pub(crate) async fn mark_revoked(
    tx: &mut DataTx,
    session_id: &str,
    wa_id: &str,
) -> StoreResult<bool> {
    let done = execute_tx!(tx, sqlx::query(SET_REVOKED).bind(session_id).bind(wa_id))?;
    Ok(done > 0)
}

/// Whether a live row took the new body.
pub(crate) async fn set_body(
    tx: &mut DataTx,
    session_id: &str,
    wa_id: &str,
    body: &str,
) -> StoreResult<bool> {
    let done = execute_tx!(
        tx,
        sqlx::query(SET_BODY)
            .bind(session_id)
            .bind(wa_id)
            .bind(body)
    )?;
    Ok(done > 0)
}

pub(crate) async fn set_starred(
    db: &DataPool,
    session_id: &str,
    wa_id: &str,
    starred: bool,
) -> StoreResult<()> {
    let done = execute!(
        db,
        sqlx::query(SET_STARRED)
            .bind(session_id)
            .bind(wa_id)
            .bind(starred)
    );
    super::message_writes::changed([session_id]);
    done?;
    Ok(())
}

/// The message whose row id or network id is `id`.
pub(crate) async fn find(
    db: &DataPool,
    session_id: &str,
    id: &str,
) -> StoreResult<Option<MessageRow>> {
    let db = &super::backends::read_pool(db);
    Ok(on_pool!(db, |p| sqlx::query_as(FIND)
        .bind(session_id)
        .bind(id)
        .fetch_optional(p)
        .await)?)
}

/// Per chat of the session: `(chat id, name, newest time, unread inbound count, newest body)`, newest
/// first (the chat list of engines that cannot ask the network for it).
pub(crate) type ChatRow = (String, Option<String>, i64, i64, Option<String>);

pub(crate) async fn chats(db: &DataPool, session_id: &str) -> StoreResult<Vec<ChatRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(CHATS)
        .bind(session_id)
        .fetch_all(p)
        .await)?)
}

/// `(chat id, name)` of the session's one-to-one chats, by id.
pub(crate) async fn direct_chats(
    db: &DataPool,
    session_id: &str,
) -> StoreResult<Vec<(String, Option<String>)>> {
    Ok(on_pool!(db, |p| sqlx::query_as(DIRECT_CHATS)
        .bind(session_id)
        .fetch_all(p)
        .await)?)
}

/// The rows a page holds, newest first, as `(id, version, no media, quoted row's version)`. Read on the
/// read-only pool (see `backends::read_pool`), whose connections keep the statement prepared (the text is
/// constant: absent filters are bound as NULL, not left out).
pub(crate) async fn page_keys(
    db: &DataPool,
    session_id: &str,
    q: &PageQuery,
) -> StoreResult<Vec<PageKey>> {
    let db = &super::backends::read_pool(db);
    let (after_at, after_id) = match &q.after {
        Some((at, id)) => (Some(*at), Some(id.as_str())),
        None => (None, None),
    };
    macro_rules! bind_page {
        ($query:expr) => {
            $query
                .bind(session_id)
                .bind(&q.chat_id)
                .bind(&q.from)
                .bind(&q.direction)
                .bind(&q.kind)
                .bind(after_at)
                .bind(after_id)
                .bind(q.limit)
                .bind(q.offset)
        };
    }
    match db {
        DataPool::Sqlite(p) => {
            let text: String = bind_page!(sqlx::query_scalar(PAGE_KEYS_SQLITE_JSON))
                .fetch_one(p)
                .await?;
            super::from_json(&text)
        }
        DataPool::Postgres(p) => Ok(bind_page!(sqlx::query_as(PAGE_KEYS)).fetch_all(p).await?),
    }
}

/// The session's rows among `ids`, in no particular order (a row deleted since is absent).
pub(crate) async fn versioned_rows(
    db: &DataPool,
    session_id: &str,
    ids: &[&str],
) -> StoreResult<Vec<VersionedRow>> {
    let db = &super::backends::read_pool(db);
    match db {
        DataPool::Sqlite(p) => {
            let text: String = sqlx::query_scalar(VERSIONED_ROWS_SQLITE_JSON)
                .bind(session_id)
                .bind(super::to_json(&ids)?)
                .fetch_one(p)
                .await?;
            type Columns = (i64, MessageRow, Option<i64>, Option<String>);
            let rows: Vec<Columns> = super::from_json(&text)?;
            Ok(rows
                .into_iter()
                .map(|(version, row, quoted_version, quoted_body)| VersionedRow {
                    version,
                    row,
                    quoted_version,
                    quoted_body,
                })
                .collect())
        }
        DataPool::Postgres(p) => Ok(sqlx::query_as(VERSIONED_ROWS)
            .bind(session_id)
            .bind(ids)
            .fetch_all(p)
            .await?),
    }
}

/// Moves every message row's version to `stamp` (a data import; see [`RESTAMP_VERSIONS`]).
pub(crate) async fn restamp_versions(tx: &mut DataTx, stamp: i64) -> StoreResult<()> {
    execute_tx!(tx, sqlx::query(RESTAMP_VERSIONS).bind(stamp))?;
    Ok(())
}

/// Whether the chat has any stored message other than `except_id` (pacing's first-contact test).
pub(crate) async fn chat_has_history(
    db: &DataPool,
    session_id: &str,
    chat_id: &str,
    except_id: &str,
) -> StoreResult<bool> {
    let n: i64 = on_pool!(db, |p| sqlx::query_scalar(CHAT_EXISTS)
        .bind(session_id)
        .bind(chat_id)
        .bind(except_id)
        .fetch_one(p)
        .await)?;
    Ok(n > 0)
}
