//! The `status_updates` table: status posts the session made (with the key of their media object in the
//! media store, so it can be served again) and statuses it received. Rows are written inside the event
//! path's transaction (`messaging/commit.rs`) after the engine posted or reported them; reads of live
//! statuses go to the engine, only media is served from here. Rows written before migration 0060 still
//! hold their media inline until the boot pass moves it (`inline_media`, `set_media_key`).

use super::{DataPool, DataTx, StoreError, StoreResult, execute, execute_tx, now_ms, on_pool};

const INSERT: &str = "INSERT INTO status_updates (id, session_id, status_id, contact, direction, type, \
     caption, has_media, media, media_key, recipients, posted_at, expires_at, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
     ON CONFLICT (session_id, status_id) DO NOTHING";
const SELECT_MEDIA: &str =
    "SELECT media, media_key FROM status_updates WHERE session_id = $1 AND status_id = $2";
const SELECT_INLINE_MEDIA: &str = "SELECT id, session_id, media FROM status_updates \
     WHERE media_key IS NULL AND media IS NOT NULL ORDER BY id LIMIT $1";
const SET_MEDIA_KEY: &str =
    "UPDATE status_updates SET media = $2, media_key = $3 WHERE id = $1 AND media_key IS NULL";
/// A deleted status keeps its row as a tombstone, so a repeated delete can tell "already deleted" from
/// "never posted": it stops being live at `$3` (now) and its media is dropped (the media route answers 404).
const RETIRE: &str = "UPDATE status_updates SET \
     expires_at = CASE WHEN expires_at > $3 THEN $3 ELSE expires_at END, media = NULL, media_key = NULL \
     WHERE session_id = $1 AND status_id = $2";
const OWN_EXPIRY: &str = "SELECT expires_at FROM status_updates \
     WHERE session_id = $1 AND status_id = $2 AND direction = 'outgoing'";
const LIVE: &str = "SELECT status_id, contact, type, caption, has_media, posted_at, expires_at \
     FROM status_updates WHERE session_id = $1 AND ($2 IS NULL OR direction = $2) AND expires_at > $3 \
     AND ($4 IS NULL OR contact = $4) ORDER BY posted_at DESC";
const RECIPIENTS: &str = "SELECT recipients FROM status_updates \
     WHERE session_id = $1 AND status_id = $2 AND direction = 'outgoing'";

/// A live status: `(status id, contact, type, caption, has media, posted at ms, expires at ms)`.
pub(crate) type LiveStatusRow = (String, String, String, Option<String>, bool, i64, i64);

/// Statuses of `direction` (`None`: both) not expired at `now_ms`, newest first; `contact` narrows to one
/// account.
pub(crate) async fn live(
    db: &DataPool,
    session_id: &str,
    direction: Option<StatusDirection>,
    now_ms: i64,
    contact: Option<&str>,
) -> StoreResult<Vec<LiveStatusRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(LIVE)
        .bind(session_id)
        .bind(direction.map(StatusDirection::as_str))
        .bind(now_ms)
        .bind(contact)
        .fetch_all(p)
        .await)?)
}

/// The recipients (JSON array) of an own status post; outer `None` when no such post is stored.
pub(crate) async fn recipients(
    db: &DataPool,
    session_id: &str,
    status_id: &str,
) -> StoreResult<Option<Option<String>>> {
    let row: Option<(Option<String>,)> = on_pool!(db, |p| sqlx::query_as(RECIPIENTS)
        .bind(session_id)
        .bind(status_id)
        .fetch_optional(p)
        .await)?;
    Ok(row.map(|(r,)| r))
}

/// Whether the session posted the status or received it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusDirection {
    Outgoing,
    Incoming,
}

impl StatusDirection {
    fn as_str(self) -> &'static str {
        match self {
            Self::Outgoing => "outgoing",
            Self::Incoming => "incoming",
        }
    }
}

/// A status row to write. Times are epoch milliseconds; `media` and `recipients` are JSON text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NewStatus {
    pub session_id: String,
    pub status_id: String,
    pub contact: String,
    pub direction: StatusDirection,
    pub kind: String,
    pub caption: Option<String>,
    pub has_media: bool,
    pub media: Option<String>,
    /// The media object's key in the media store.
    pub media_key: Option<String>,
    pub recipients: Option<String>,
    pub posted_at_ms: i64,
    pub expires_at_ms: i64,
}

/// Writes a status once inside `tx`; a repeat of the same `(session, status id)` is ignored. Answers
/// whether the row was new; `SessionGone` when the session was deleted meanwhile.
pub(crate) async fn insert_in(tx: &mut DataTx, row: &NewStatus) -> StoreResult<bool> {
    let id = uuid::Uuid::now_v7().to_string();
    let written = execute_tx!(
        tx,
        sqlx::query(INSERT)
            .bind(&id)
            .bind(&row.session_id)
            .bind(&row.status_id)
            .bind(&row.contact)
            .bind(row.direction.as_str())
            .bind(&row.kind)
            .bind(&row.caption)
            .bind(row.has_media)
            .bind(&row.media)
            .bind(&row.media_key)
            .bind(&row.recipients)
            .bind(row.posted_at_ms)
            .bind(row.expires_at_ms)
            .bind(now_ms())
    )
    .map_err(|e| StoreError::from(e).in_session(&row.session_id))?;
    Ok(written > 0)
}

/// The stored media JSON of a status and its object key, `None` when the status or its media is unknown.
pub(crate) async fn media(
    db: &DataPool,
    session_id: &str,
    status_id: &str,
) -> StoreResult<Option<(String, Option<String>)>> {
    let found: Option<(Option<String>, Option<String>)> =
        on_pool!(db, |p| sqlx::query_as(SELECT_MEDIA)
            .bind(session_id)
            .bind(status_id)
            .fetch_optional(p)
            .await)?;
    Ok(found.and_then(|(media, key)| media.map(|m| (m, key))))
}

/// A row whose media is still inline base64 (written before the media store held status media).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub(crate) struct InlineMediaRow {
    pub id: String,
    pub session_id: String,
    pub media: String,
}

/// Up to `limit` rows whose media has not moved to the media store yet.
pub(crate) async fn inline_media(db: &DataPool, limit: i64) -> StoreResult<Vec<InlineMediaRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(SELECT_INLINE_MEDIA)
        .bind(limit)
        .fetch_all(p)
        .await)?)
}

/// Points a row at its media object and replaces the inline base64 with `media` (the metadata).
pub(crate) async fn set_media_key(
    db: &DataPool,
    id: &str,
    media: &str,
    key: &str,
) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(SET_MEDIA_KEY).bind(id).bind(media).bind(key)
    )?;
    Ok(())
}

/// Marks a deleted status: no longer live from `now_ms`, without its media; the row stays (`RETIRE`).
pub(crate) async fn retire(
    db: &DataPool,
    session_id: &str,
    status_id: &str,
    now_ms: i64,
) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(RETIRE)
            .bind(session_id)
            .bind(status_id)
            .bind(now_ms)
    )?;
    Ok(())
}

/// When an own status post stops (or stopped) being live, epoch ms; `None` when the session has no such
/// post stored.
pub(crate) async fn own_expiry(
    db: &DataPool,
    session_id: &str,
    status_id: &str,
) -> StoreResult<Option<i64>> {
    let row: Option<(i64,)> = on_pool!(db, |p| sqlx::query_as(OWN_EXPIRY)
        .bind(session_id)
        .bind(status_id)
        .fetch_optional(p)
        .await)?;
    Ok(row.map(|(at,)| at))
}

const SET_TEXT_STYLE: &str = "UPDATE status_updates SET background_color = $3, font = $4 \
     WHERE session_id = $1 AND status_id = $2";
const TEXT_STYLES: &str = "SELECT status_id, background_color, font FROM status_updates \
     WHERE session_id = $1 AND (background_color IS NOT NULL OR font IS NOT NULL)";

/// A text status's style: `(status id, background colour, font)`.
pub(crate) type TextStyleRow = (String, Option<String>, Option<i64>);

/// Records the style an own text status was posted with (its row is written by the post itself).
pub(crate) async fn set_text_style(
    db: &DataPool,
    session_id: &str,
    status_id: &str,
    background_color: Option<&str>,
    font: Option<i64>,
) -> StoreResult<()> {
    execute!(
        db,
        sqlx::query(SET_TEXT_STYLE)
            .bind(session_id)
            .bind(status_id)
            .bind(background_color)
            .bind(font)
    )?;
    Ok(())
}

/// The styles of the session's stored statuses that have one.
pub(crate) async fn text_styles(db: &DataPool, session_id: &str) -> StoreResult<Vec<TextStyleRow>> {
    Ok(on_pool!(db, |p| sqlx::query_as(TEXT_STYLES)
        .bind(session_id)
        .fetch_all(p)
        .await)?)
}
