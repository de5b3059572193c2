//! One webhook delivery attempt: build the envelope body, sign it, POST it with the wire-notes headers and a
//! per-attempt timeout, and classify the outcome. Input: a [`Delivery`] assembled by the retry loop (or by the
//! node's test endpoint). It does not touch the database or decide about retries.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use wagate_proto::headers;

use super::WebhookSettings;
use super::guard::{self, GuardError, GuardedResolver};
use super::sign::signature_header;

/// A failure to build the HTTP client or the body.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    #[error("cannot build the webhook HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    #[error("stored envelope is not valid JSON: {0}")]
    Envelope(#[from] serde_json::Error),
}

/// The HTTP client for webhook deliveries. Built once per process from the settings: it carries the guarded
/// resolver, the redirect policy and the per-attempt timeout.
#[derive(Debug, Clone)]
pub struct WebhookClient {
    http: reqwest::Client,
    is_protected: bool,
}

impl WebhookClient {
    pub fn new(settings: &WebhookSettings) -> Result<WebhookClient, DeliverError> {
        install_crypto_provider();
        // Protected: a followed redirect would reach an address nobody vetted, so never follow.
        let redirects = if !settings.is_ssrf_protected && settings.is_redirect_followed {
            reqwest::redirect::Policy::limited(5)
        } else {
            reqwest::redirect::Policy::none()
        };
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_millis(settings.timeout_ms))
            .redirect(redirects)
            .user_agent(headers::webhook_user_agent());
        if settings.is_ssrf_protected {
            // A proxy would connect on our behalf to an address the resolver never saw.
            builder = builder.dns_resolver(GuardedResolver).no_proxy();
        }
        Ok(WebhookClient {
            http: builder.build()?,
            is_protected: settings.is_ssrf_protected,
        })
    }
}

/// Installs ring as the process-wide rustls provider; a second call (or the node's own) is harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Everything one attempt needs. `body` is the exact byte string that is signed and sent.
#[derive(Debug, Clone)]
pub struct Delivery<'a> {
    pub url: &'a str,
    pub event: &'a str,
    pub idempotency_key: &'a str,
    pub delivery_id: &'a str,
    /// 0 on the first attempt, then 1, 2, ... (`X-Wagate-Retry-Count`).
    pub retry_count: u32,
    pub secret: Option<&'a str>,
    /// The webhook's `headers` column: a JSON object of custom headers.
    pub custom_headers: Option<&'a str>,
    pub body: &'a [u8],
}

/// What one attempt came to. Any 2xx is `Delivered`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    Delivered {
        status_code: u16,
    },
    Failed {
        status_code: Option<u16>,
        error: String,
    },
}

impl AttemptOutcome {
    pub fn status_code(&self) -> Option<u16> {
        match self {
            AttemptOutcome::Delivered { status_code } => Some(*status_code),
            AttemptOutcome::Failed { status_code, .. } => *status_code,
        }
    }
}

/// The stored envelope (every field but `deliveryId`), borrowed so `data` is re-emitted byte for byte.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredEnvelope<'a> {
    #[serde(borrow)]
    event: &'a RawValue,
    #[serde(borrow)]
    timestamp: &'a RawValue,
    #[serde(borrow)]
    session_id: &'a RawValue,
    #[serde(borrow)]
    idempotency_key: &'a RawValue,
    #[serde(borrow)]
    data: &'a RawValue,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WireEnvelope<'a> {
    event: &'a RawValue,
    timestamp: &'a RawValue,
    session_id: &'a RawValue,
    idempotency_key: &'a RawValue,
    delivery_id: &'a str,
    data: &'a RawValue,
}

/// The wire body: the stored envelope with `deliveryId` inserted in its wire-notes place
/// (`{event, timestamp, sessionId, idempotencyKey, deliveryId, data}`).
pub fn envelope_body(stored_payload: &str, delivery_id: &str) -> Result<Vec<u8>, DeliverError> {
    let s: StoredEnvelope<'_> = serde_json::from_str(stored_payload)?;
    let wire = WireEnvelope {
        event: s.event,
        timestamp: s.timestamp,
        session_id: s.session_id,
        idempotency_key: s.idempotency_key,
        delivery_id,
        data: s.data,
    };
    Ok(serde_json::to_vec(&wire)?)
}

/// A wire body that fits `WEBHOOK_MAX_PAYLOAD_BYTES`, or the size of the smallest one that did not.
pub enum WireBody {
    Fits(Vec<u8>),
    TooLarge(usize),
}

/// [`envelope_body`] within `max` bytes. An envelope over it whose message carries inline media is sent with
/// the omitted marker in the media's place (`{mimetype, filename?, omitted: true, sizeBytes}`), as media
/// too large to inline always is, rather than not at all: the inline cap is fixed, while the payload cap
/// is the operator's, and base64 plus the rest of the envelope can pass it even under the inline cap.
pub fn envelope_body_within(
    stored_payload: &str,
    delivery_id: &str,
    max: usize,
) -> Result<WireBody, DeliverError> {
    let body = envelope_body(stored_payload, delivery_id)?;
    if body.len() <= max {
        return Ok(WireBody::Fits(body));
    }
    let mut envelope: serde_json::Value = serde_json::from_str(stored_payload)?;
    let Some(media) = envelope
        .pointer_mut("/data/media")
        .and_then(serde_json::Value::as_object_mut)
        .filter(|m| m.contains_key("data"))
    else {
        return Ok(WireBody::TooLarge(body.len()));
    };
    media.remove("data");
    media.insert("omitted".to_owned(), serde_json::Value::Bool(true));
    let body = envelope_body(&envelope.to_string(), delivery_id)?;
    Ok(if body.len() <= max {
        WireBody::Fits(body)
    } else {
        WireBody::TooLarge(body.len())
    })
}

/// A fresh `dlv_<uuid>` delivery id.
pub fn new_delivery_id() -> String {
    format!("dlv_{}", uuid::Uuid::new_v4())
}

/// Headers a webhook's custom `headers` may not set: ours, and those the HTTP layer owns.
pub fn is_reserved_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("x-wagate-")
        || matches!(
            n.as_str(),
            "content-type" | "content-length" | "host" | "user-agent"
        )
}

/// The webhook's custom headers, reserved and malformed entries dropped. Non-string JSON values are sent in
/// their JSON text form.
pub fn custom_header_map(raw: Option<&str>) -> HeaderMap {
    let mut map = HeaderMap::new();
    let Some(obj) = raw
        .and_then(|r| serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(r).ok())
    else {
        return map;
    };
    for (name, value) in obj {
        if is_reserved_header(&name) {
            continue;
        }
        let text = match value {
            serde_json::Value::String(s) => s,
            serde_json::Value::Null => continue,
            other => other.to_string(),
        };
        if let (Ok(n), Ok(v)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(text),
        ) {
            map.insert(n, v);
        }
    }
    map
}

fn delivery_headers(d: &Delivery<'_>) -> HeaderMap {
    let mut map = custom_header_map(d.custom_headers);
    let mut set = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::try_from(value) {
            map.insert(HeaderName::from_static(name), v);
        }
    };
    set(headers::WEBHOOK_EVENT, d.event);
    set(headers::WEBHOOK_IDEMPOTENCY_KEY, d.idempotency_key);
    set(headers::WEBHOOK_DELIVERY_ID, d.delivery_id);
    set(headers::WEBHOOK_RETRY_COUNT, &d.retry_count.to_string());
    if let Some(secret) = d.secret.filter(|s| !s.is_empty()) {
        set(
            headers::WEBHOOK_SIGNATURE,
            &signature_header(secret, d.body),
        );
    }
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(ua) = HeaderValue::try_from(headers::webhook_user_agent()) {
        map.insert(USER_AGENT, ua);
    }
    map
}

/// Makes one attempt. Never errors: every failure is an [`AttemptOutcome::Failed`] with a readable reason.
pub async fn deliver_once(client: &WebhookClient, d: &Delivery<'_>) -> AttemptOutcome {
    let url = match guard::parse_url(d.url) {
        Ok(url) => url,
        Err(e) => return failed(None, e.to_string()),
    };
    if client.is_protected
        && let Err(e) = guard::check_literal(&url)
    {
        return failed(None, e.to_string());
    }
    let sent = client
        .http
        .post(url)
        .headers(delivery_headers(d))
        .body(d.body.to_vec())
        .send()
        .await;
    match sent {
        Ok(resp) if resp.status().is_success() => AttemptOutcome::Delivered {
            status_code: resp.status().as_u16(),
        },
        Ok(resp) => {
            let code = resp.status().as_u16();
            failed(Some(code), format!("receiver answered HTTP {code}"))
        }
        Err(e) => failed(None, describe(&e)),
    }
}

/// Whether a failed attempt never left this host because the SSRF guard refused its address.
pub fn is_blocked(outcome: &AttemptOutcome) -> bool {
    match outcome {
        AttemptOutcome::Failed {
            status_code: None,
            error,
        } => {
            error.starts_with("refused by the SSRF guard")
                || error.contains("resolves to a refused address")
        }
        _ => false,
    }
}

fn failed(status_code: Option<u16>, error: String) -> AttemptOutcome {
    AttemptOutcome::Failed { status_code, error }
}

/// A reqwest error in words: the guard's refusal when that is the cause, else the error chain.
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out".to_owned();
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut parts = Vec::new();
    while let Some(err) = source {
        if let Some(g) = err.downcast_ref::<GuardError>() {
            return format!("refused by the SSRF guard: {g}");
        }
        parts.push(err.to_string());
        source = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_id_goes_between_idempotency_key_and_data() {
        let stored = r#"{"event":"message.received","timestamp":"2026-01-01T00:00:00Z","sessionId":"s1","idempotencyKey":"k1","data":{"z":1,"a":[1, 2]}}"#;
        let body = envelope_body(stored, "dlv_x").unwrap();
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"event":"message.received","timestamp":"2026-01-01T00:00:00Z","sessionId":"s1","idempotencyKey":"k1","deliveryId":"dlv_x","data":{"z":1,"a":[1, 2]}}"#
        );
    }

    #[test]
    fn inline_media_over_the_payload_cap_goes_as_the_omitted_marker() {
        let data = "A".repeat(400);
        let stored = format!(
            r#"{{"event":"message.received","timestamp":"t","sessionId":"s1","idempotencyKey":"k1","data":{{"id":"m1","media":{{"mimetype":"image/png","data":"{data}","sizeBytes":300}}}}}}"#
        );
        let Ok(WireBody::Fits(whole)) = envelope_body_within(&stored, "dlv_x", 10_000) else {
            panic!("fits whole");
        };
        assert!(String::from_utf8(whole).unwrap().contains(&data));
        let Ok(WireBody::Fits(marked)) = envelope_body_within(&stored, "dlv_x", 300) else {
            panic!("fits with the marker");
        };
        let marked: serde_json::Value = serde_json::from_slice(&marked).unwrap();
        assert_eq!(
            marked["data"]["media"],
            serde_json::json!({"mimetype": "image/png", "omitted": true, "sizeBytes": 300})
        );
        assert_eq!(marked["deliveryId"], "dlv_x");
        assert!(matches!(
            envelope_body_within(&stored, "dlv_x", 100),
            Ok(WireBody::TooLarge(_))
        ));
        let plain = r#"{"event":"x","timestamp":"t","sessionId":"s","idempotencyKey":"k","data":{"body":"long enough"}}"#;
        assert!(matches!(
            envelope_body_within(plain, "dlv_x", 20),
            Ok(WireBody::TooLarge(_))
        ));
    }

    #[test]
    fn reserved_custom_headers_are_stripped() {
        let map = custom_header_map(Some(
            r#"{"X-Tenant":"t1","x-wagate-signature":"forged","Host":"evil","Content-Type":"text/plain","User-Agent":"x","content-length":"1","X-Num":5,"bad name":"v"}"#,
        ));
        assert_eq!(map.len(), 2);
        assert_eq!(map["x-tenant"], "t1");
        assert_eq!(map["x-num"], "5");
    }

    #[test]
    fn malformed_custom_headers_are_ignored() {
        assert!(custom_header_map(Some("not json")).is_empty());
        assert!(custom_header_map(None).is_empty());
    }
}

#[cfg(test)]
mod guard_tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn refused_delivery(host: &str) -> (AttemptOutcome, bool) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = WebhookClient::new(&WebhookSettings::default()).unwrap();
        let url = format!("http://{host}:{port}/hook");
        let d = Delivery {
            url: &url,
            event: "test",
            idempotency_key: "k",
            delivery_id: "dlv_1",
            retry_count: 0,
            secret: None,
            custom_headers: None,
            body: b"{}",
        };
        let outcome = deliver_once(&client, &d).await;
        let accepted =
            tokio::time::timeout(std::time::Duration::from_millis(200), listener.accept())
                .await
                .is_ok();
        (outcome, accepted)
    }

    #[tokio::test]
    async fn protected_delivery_to_loopback_literal_is_refused_before_connecting() {
        let (outcome, accepted) = refused_delivery("127.0.0.1").await;
        let AttemptOutcome::Failed {
            status_code: None,
            error,
        } = outcome
        else {
            panic!("{outcome:?}")
        };
        assert!(error.contains("refused"), "{error}");
        assert!(!accepted, "the receiver must never see a connection");
    }

    #[tokio::test]
    async fn protected_delivery_to_a_name_resolving_to_loopback_is_refused() {
        let (outcome, accepted) = refused_delivery("localhost").await;
        let AttemptOutcome::Failed {
            status_code: None,
            error,
        } = outcome
        else {
            panic!("{outcome:?}")
        };
        assert!(error.contains("refused by the SSRF guard"), "{error}");
        assert!(!accepted);
    }
}
