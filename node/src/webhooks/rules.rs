//! Field rules of the webhook resource: each function takes the request's value and answers the stored one
//! or a message naming the field. The URL rule resolves the host (spec delivery rule 5).

use serde_json::{Map, Value};
use wagate_proto::EventName;
use wagate_proto::dto::webhooks::WebhookFilters;
use wagate_workers::resolve_check;
use wagate_workers::webhook::deliver::is_reserved_header;
use wagate_workers::webhook::guard::{check_literal, parse_url};

use super::{WebhookError, WebhookResult};
use crate::events::filter;

pub(crate) const MIN_SECRET_CHARS: usize = 16;
pub(crate) const MAX_RETRY_COUNT: i64 = 10;
pub(crate) const DEFAULT_RETRY_COUNT: i32 = 3;

fn invalid(message: impl Into<String>) -> WebhookError {
    WebhookError::Invalid(message.into())
}

/// The URL parses as http(s) and its host resolves (and, protected, to no refused address).
pub(crate) async fn url(raw: &str, is_protected: bool) -> WebhookResult<String> {
    let raw = url_form(raw, is_protected)?;
    resolve_check(raw, is_protected)
        .await
        .map_err(|e| invalid(format!("url: {e}")))?;
    Ok(raw.to_owned())
}

/// What [`url`] checks without asking DNS: not blank, http(s) with a host and, protected, no refused IP
/// literal. Answers the URL as stored (trimmed).
pub(crate) fn url_form(raw: &str, is_protected: bool) -> WebhookResult<&str> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(invalid("url must not be empty"));
    }
    let parsed = parse_url(raw).map_err(|e| invalid(format!("url: {e}")))?;
    if is_protected {
        check_literal(&parsed).map_err(|e| invalid(format!("url: {e}")))?;
    }
    Ok(raw)
}

/// Known event names, or the single entry `*`.
pub(crate) fn events(list: Vec<String>) -> WebhookResult<Vec<String>> {
    if list.is_empty() {
        return Err(invalid(
            "events must not be empty (use [\"*\"] for every event)",
        ));
    }
    if list.iter().any(|e| e == "*") {
        if list.len() > 1 {
            return Err(invalid("events: \"*\" must be the only entry"));
        }
        return Ok(list);
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for name in list {
        if name.parse::<EventName>().is_err() {
            return Err(invalid(format!("events: unknown event name '{name}'")));
        }
        if !out.contains(&name) {
            out.push(name);
        }
    }
    Ok(out)
}

/// A new webhook's secret: absent means none; `""` is a secret shorter than the minimum, since only an
/// update gives the empty string its "clear the secret" meaning (spec "Webhook").
pub(crate) fn new_secret(raw: Option<String>) -> WebhookResult<Option<String>> {
    match raw {
        Some(s) if s.is_empty() => Err(invalid(format!(
            "secret must be at least {MIN_SECRET_CHARS} characters"
        ))),
        other => secret(other),
    }
}

/// At least 16 characters; `""` (or absent) means no secret.
pub(crate) fn secret(raw: Option<String>) -> WebhookResult<Option<String>> {
    match raw {
        None => Ok(None),
        Some(s) if s.is_empty() => Ok(None),
        Some(s) if s.chars().count() < MIN_SECRET_CHARS => Err(invalid(format!(
            "secret must be at least {MIN_SECRET_CHARS} characters"
        ))),
        Some(s) => Ok(Some(s)),
    }
}

/// Custom headers with the reserved names dropped and `null` values removed.
pub(crate) fn headers(raw: Map<String, Value>) -> Map<String, Value> {
    raw.into_iter()
        .filter(|(name, value)| !is_reserved_header(name) && !value.is_null())
        .collect()
}

pub(crate) fn filters(raw: Option<WebhookFilters>) -> WebhookResult<Option<WebhookFilters>> {
    let Some(f) = raw else { return Ok(None) };
    filter::validate(&f.conditions).map_err(invalid)?;
    Ok((!f.conditions.is_empty()).then_some(f))
}

pub(crate) fn retry_count(raw: Option<i64>) -> WebhookResult<i32> {
    match raw {
        None => Ok(DEFAULT_RETRY_COUNT),
        Some(n) if (0..=MAX_RETRY_COUNT).contains(&n) => Ok(i32::try_from(n).unwrap_or(0)),
        Some(_) => Err(invalid(format!(
            "retryCount must be between 0 and {MAX_RETRY_COUNT}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_lists() {
        assert!(events(vec!["*".into()]).is_ok());
        assert!(events(vec!["*".into(), "message.ack".into()]).is_err());
        assert!(events(vec![]).is_err());
        let err = events(vec!["message.nope".into()]).unwrap_err();
        assert!(err.to_string().contains("message.nope"));
        assert_eq!(
            events(vec!["message.ack".into(), "message.ack".into()]).unwrap(),
            vec!["message.ack".to_string()]
        );
    }

    #[test]
    fn secrets_and_retries() {
        assert!(
            secret(Some("short".into()))
                .unwrap_err()
                .to_string()
                .contains("secret")
        );
        assert_eq!(secret(Some(String::new())).unwrap(), None);
        assert!(new_secret(Some(String::new())).is_err());
        assert_eq!(new_secret(None).unwrap(), None);
        assert!(secret(Some("0123456789abcdef".into())).unwrap().is_some());
        assert_eq!(retry_count(None).unwrap(), 3);
        assert!(retry_count(Some(11)).is_err());
        assert!(retry_count(Some(-1)).is_err());
    }

    #[test]
    fn url_forms_without_dns() {
        assert_eq!(
            url_form(" https://hooks.invalid/x ", true).unwrap(),
            "https://hooks.invalid/x"
        );
        assert!(url_form("not a url", false).is_err());
        assert!(url_form("ftp://example.com/x", false).is_err());
        assert!(url_form("  ", false).is_err());
        assert!(url_form("http://127.0.0.1:9/hook", false).is_ok());
        assert!(url_form("http://127.0.0.1:9/hook", true).is_err());
    }

    #[test]
    fn reserved_headers_are_dropped() {
        let raw: Map<String, Value> = serde_json::from_str(
            r#"{"X-Tenant":"a","X-Wagate-Signature":"x","Content-Type":"y","X-Null":null}"#,
        )
        .unwrap();
        let kept = headers(raw);
        assert_eq!(kept.len(), 1);
        assert!(kept.contains_key("X-Tenant"));
    }
}
