//! `GET /api/search`: matches for messages and chats through the built-in provider: full text over stored
//! message bodies (SQLite FTS5 or PostgreSQL full text) and the chats whose id or name contains the query.
//! Strict query parsing (integers only for `limit`/`offset`), scoped keys see only their sessions, and a
//! provider that does not answer within 10 seconds is a 503.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{RawQuery, State};
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_proto::dto::search::{SearchChatHit, SearchHit, SearchQuery, SearchResults};

use super::auth::{Caller, canonical_session};
use super::engine_call::whole;
use super::error::{ApiError, ApiResult};
use super::extract::query_pairs;
use crate::app::ApiContext;
use crate::messaging::validate::jid_filter;
use crate::store::search::{ChatMatch, SearchFilter, SearchRow};

/// The spec's search timeout.
const SEARCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The name the built-in provider answers with.
const PROVIDER: &str = "builtin-fts";

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(search_messages))
}

/// Integers at or above this are Unix milliseconds (the published clients' unit); below it, Unix seconds
/// (10^11 seconds is the year 5138, 10^11 milliseconds is 1973).
const MILLIS_FROM: i64 = 100_000_000_000;

/// Which end of a range an instant bounds: a message stamped in whole seconds is inside `[from, to]` in
/// milliseconds when its second is at or after `from` rounded up, and at or before `to` rounded down.
#[derive(Clone, Copy)]
enum Bound {
    From,
    To,
}

/// ISO 8601 (date or date-time), Unix milliseconds or Unix seconds; in Unix seconds.
fn instant(field: &str, raw: &str, bound: Bound) -> ApiResult<i64> {
    if let Ok(number) = raw.parse::<i64>() {
        if number.unsigned_abs() < MILLIS_FROM.unsigned_abs() {
            return Ok(number);
        }
        return Ok(match bound {
            Bound::From => number.div_euclid(1000) + i64::from(number.rem_euclid(1000) != 0),
            Bound::To => number.div_euclid(1000),
        });
    }
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(raw) {
        return Ok(at.timestamp());
    }
    chrono::NaiveDate::parse_from_str(raw, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc().timestamp())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "{field} must be ISO 8601, Unix milliseconds or Unix seconds"
            ))
        })
}

fn parse(caller: &Caller, query: Option<&str>) -> ApiResult<SearchFilter> {
    let mut f = SearchFilter {
        limit: 20,
        ..SearchFilter::default()
    };
    let some = |v: &str| Some(v.to_string()).filter(|v| !v.is_empty());
    for (key, value) in query_pairs(query) {
        // Neither FTS5 nor PostgreSQL takes a NUL inside a text value: refuse it rather than fail.
        if value.contains('\0') && !key.is_empty() {
            return Err(ApiError::bad_request(format!(
                "{key} must not contain NUL characters"
            )));
        }
        match key.as_str() {
            "q" => f.text = value.trim().to_string(),
            "sessionId" => f.session_id = some(&canonical_session(&value)),
            "chatId" => f.chat_id = jid_filter("chatId", Some(&value))?,
            "direction" => f.direction = some(&value),
            "type" => f.kind = some(&value),
            "from" => f.from = jid_filter("from", Some(&value))?,
            "dateFrom" => f.date_from = Some(instant("dateFrom", &value, Bound::From)?),
            "dateTo" => f.date_to = Some(instant("dateTo", &value, Bound::To)?),
            "limit" => f.limit = whole("limit", &value, 1, 100)? as i64,
            "offset" => f.offset = whole("offset", &value, 0, 1_000_000)? as i64,
            _ => {}
        }
    }
    if f.text.is_empty() {
        return Err(ApiError::bad_request("q is required"));
    }
    if f.direction
        .as_deref()
        .is_some_and(|d| d != "incoming" && d != "outgoing")
    {
        return Err(ApiError::bad_request(
            "direction must be incoming or outgoing",
        ));
    }
    if let Some(session) = &f.session_id {
        caller.require_session(session)?;
    }
    if caller.is_scoped() {
        f.sessions = caller.key.allowed_sessions.clone();
    }
    Ok(f)
}

fn hit(row: SearchRow) -> SearchHit {
    SearchHit {
        message_id: row.id,
        wa_message_id: row.wa_message_id,
        session_id: row.session_id,
        chat_id: row.chat_id,
        body: row.body,
        snippet: row.snippet,
        timestamp: row.timestamp,
        kind: row.kind,
        direction: row.direction,
        from: row.from_jid,
        score: Some(row.score),
    }
}

fn chat_hit(row: ChatMatch) -> SearchChatHit {
    // Unnamed, a chat goes by its number (the user part of its JID), as in the chat list.
    let name = row.name.filter(|n| !n.is_empty()).unwrap_or_else(|| {
        let user = row.chat_id.split('@').next().unwrap_or_default();
        user.to_string()
    });
    SearchChatHit {
        session_id: row.session_id,
        is_group: row.is_group,
        timestamp: row.timestamp,
        name,
        id: row.chat_id,
    }
}

/// The spec's 503 covers a provider that failed as well as one that did not answer (the query itself was
/// checked before it reached the provider).
fn provider_failure(err: crate::store::StoreError) -> ApiError {
    tracing::error!(error = %err, "search provider failed");
    ApiError::unavailable("Search provider failed")
}

/// GET /api/search
#[utoipa::path(get, path = "/api/search", tag = "search", params(SearchQuery),
    responses((status = 200, body = SearchResults)))]
async fn search_messages(
    caller: Caller,
    State(ctx): State<ApiContext>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<SearchResults>> {
    caller.require(Role::Viewer)?;
    let filter = parse(&caller, query.as_deref())?;
    let started = Instant::now();
    let page = tokio::time::timeout(SEARCH_TIMEOUT, ctx.messaging.search(&filter))
        .await
        .map_err(|_| ApiError::unavailable("Search provider did not answer in time"))?
        .map_err(provider_failure)?;
    Ok(Json(SearchResults {
        hits: page.hits.into_iter().map(hit).collect(),
        total: page.total,
        chats: page.chats.into_iter().map(chat_hit).collect(),
        chat_total: page.chat_total,
        took_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        provider: PROVIDER.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::{Bound, instant};

    #[test]
    fn instants_read_milliseconds_seconds_and_iso() {
        assert_eq!(
            instant("d", "1700000000", Bound::From).ok(),
            Some(1_700_000_000)
        );
        assert_eq!(
            instant("d", "1700000000000", Bound::From).ok(),
            Some(1_700_000_000)
        );
        assert_eq!(
            instant("d", "1700000000500", Bound::From).ok(),
            Some(1_700_000_001)
        );
        assert_eq!(
            instant("d", "1700000000500", Bound::To).ok(),
            Some(1_700_000_000)
        );
        assert_eq!(
            instant("d", "2023-11-14", Bound::To).ok(),
            Some(1_699_920_000)
        );
        assert!(instant("d", "soon", Bound::To).is_err());
    }
}
