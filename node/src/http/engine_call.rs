//! What every engine-backed session route shares besides reaching its engine (`session_scope::Scoped`):
//! the engine query budget (503), JID parsing of body and path fields, and the strict `limit`/`offset`
//! paging of list routes. No status decisions beyond 400s for malformed input: engine failures map in
//! `error.rs`.

use std::future::Future;
use std::time::Duration;

use wagate_proto::Jid;

use super::error::{ApiError, ApiResult};
use super::extract::query_pairs;
use crate::app::ApiContext;
use crate::engine::EngineError;

/// Bounds an engine query by `ENGINE_QUERY_TIMEOUT_MS` (the spec's 30-second budget): an unanswered
/// query is `Timeout` (503), never a guessed answer. Routes the spec says never answer 503 (group and
/// channel create, status posts, call-link create) do not use it.
pub(crate) async fn bounded<T, E: From<EngineError>>(
    ctx: &ApiContext,
    query: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let budget = Duration::from_millis(ctx.config.engine_query_timeout_ms);
    let query =
        tracing::Instrument::instrument(query, tracing::info_span!("engine_call", op = "query"));
    tokio::time::timeout(budget, query)
        .await
        .unwrap_or_else(|_| {
            metrics::counter!(
                wagate_workers::telemetry::metrics::ENGINE_QUERY_TIMEOUTS,
                "engine" => ctx.sessions.engine_kind().as_str()
            )
            .increment(1);
            Err(EngineError::Timeout.into())
        })
}

/// A JID from a body or path field, 400 naming the field otherwise.
pub(crate) fn jid(field: &str, raw: &str) -> ApiResult<Jid> {
    Jid::parse(raw).map_err(|e| ApiError::bad_request(format!("{field}: {e}")))
}

/// A non-empty list of JIDs.
pub(crate) fn jids(field: &str, raw: &[String]) -> ApiResult<Vec<Jid>> {
    if raw.is_empty() {
        return Err(ApiError::bad_request(format!(
            "{field} must be a non-empty array"
        )));
    }
    raw.iter().map(|r| jid(field, r)).collect()
}

/// `limit`/`offset` of a list route, integers only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Page {
    pub limit: usize,
    pub offset: usize,
}

impl Page {
    /// Parses `limit` (1..=`max_limit`, default `default_limit`) and `offset` (default 0).
    pub(crate) fn parse(
        query: Option<&str>,
        default_limit: usize,
        max_limit: usize,
    ) -> ApiResult<Page> {
        let mut page = Page {
            limit: default_limit,
            offset: 0,
        };
        for (key, value) in query_pairs(query) {
            match key.as_str() {
                "limit" => page.limit = whole("limit", &value, 1, max_limit)?,
                "offset" => page.offset = whole("offset", &value, 0, usize::MAX)?,
                _ => {}
            }
        }
        Ok(page)
    }

    pub(crate) fn apply<T>(self, items: Vec<T>) -> Vec<T> {
        items
            .into_iter()
            .skip(self.offset)
            .take(self.limit)
            .collect()
    }
}

/// A decimal integer in `min..=max` (no sign, fraction or exponent).
pub(crate) fn whole(field: &str, raw: &str, min: usize, max: usize) -> ApiResult<usize> {
    raw.parse::<usize>()
        .ok()
        .filter(|n| (min..=max).contains(n) && raw.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "{field} must be an integer between {min} and {max}"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_defaults_and_bounds() {
        assert_eq!(
            Page::parse(None, 1000, 1000).ok(),
            Some(Page {
                limit: 1000,
                offset: 0
            })
        );
        assert_eq!(
            Page::parse(Some("limit=5&offset=2"), 1000, 1000).ok(),
            Some(Page {
                limit: 5,
                offset: 2
            })
        );
        for bad in [
            "limit=0",
            "limit=1001",
            "limit=1.5",
            "offset=-1",
            "limit=1e2",
        ] {
            assert!(Page::parse(Some(bad), 1000, 1000).is_err(), "{bad}");
        }
    }

    #[test]
    fn page_applies_offset_then_limit() {
        let page = Page {
            limit: 2,
            offset: 1,
        };
        assert_eq!(page.apply(vec![1, 2, 3, 4]), vec![2, 3]);
    }
}
