//! Request extractors whose rejections are `ApiError`s, so malformed JSON, bad query strings and bad path
//! parameters answer the spec's error body instead of axum's plain text.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body. An empty body reads as `{}` (a request without a body), and the content type is not
/// insisted on, because clients of the service this replaces send JSON without it.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(bytes_rejection)?;
        let text: &[u8] = match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
            None => b"{}",
            // serde would fill a struct's fields from an array in order; every body is an object.
            Some(b'{') => &bytes,
            Some(_) => {
                return Err(ApiError::bad_request(
                    "Invalid request body: expected a JSON object",
                ));
            }
        };
        if carries_nul(text) {
            return Err(ApiError::bad_request(
                "Invalid request body: text must not contain NUL characters (\\u0000)",
            ));
        }
        serde_json::from_slice(text)
            .map(ApiJson)
            .map_err(|err| ApiError::bad_request(format!("Invalid request body: {err}")))
    }
}

/// Whether the JSON text escapes a NUL character (`\u0000`, the only way JSON can carry one). No store
/// keeps it (PostgreSQL refuses it in text), so it is refused as input rather than failing a write later.
fn carries_nul(json: &[u8]) -> bool {
    memchr::memmem::find_iter(json, b"u0000").any(|at| {
        // An escape only when the `u` follows an odd number of backslashes (`\\u0000` is text).
        let slashes = json[..at].iter().rev().take_while(|b| **b == b'\\').count();
        slashes % 2 == 1
    })
}

fn bytes_rejection(rejection: BytesRejection) -> ApiError {
    if let Some(stall) = super::serve::stalled(&rejection) {
        return stall.into();
    }
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Request body exceeds BODY_SIZE_LIMIT",
        )
    } else {
        ApiError::bad_request(format!("Could not read the request body: {rejection}"))
    }
}

/// A query string.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| ApiQuery(q.0))
            .map_err(|e: QueryRejection| {
                ApiError::bad_request(format!("Invalid query parameters: {}", e.body_text()))
            })
    }
}

/// Path parameters.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e: PathRejection| {
                ApiError::bad_request(format!("Invalid path parameter: {}", e.body_text()))
            })
    }
}

/// The raw query pairs, for rules serde cannot express (a repeated key, an empty value).
pub fn query_pairs(parts_query: Option<&str>) -> Vec<(String, String)> {
    url::form_urlencoded::parse(parts_query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// The `{sessionId}` of a session-scoped path, checked to be a UUID: sessions are never addressed by name.
pub struct SessionId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for SessionId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let params = axum::extract::RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| {
                ApiError::bad_request(format!("Invalid path parameter: {}", e.body_text()))
            })?;
        let raw = params
            .iter()
            .find(|(k, _)| *k == "sessionId")
            .map(|(_, v)| v.to_string())
            .unwrap_or_default();
        match canonical_session_id(&raw) {
            Some(id) => Ok(SessionId(id)),
            None => Err(named_session(&raw, parts.uri.path())),
        }
    }
}

/// A `{sessionId}` (already percent-decoded) as every session route takes it: a hyphenated UUID in any
/// case, answered canonical (lowercase hyphenated). The uuid crate also parses braced, `urn:uuid:` and
/// bare-hex spellings; those are refused here, so the routes, their scope checks and the forward to the
/// owner (`forward.rs`) all read one id the same way.
pub(crate) fn canonical_session_id(decoded: &str) -> Option<String> {
    if decoded.len() != 36 {
        return None;
    }
    uuid::Uuid::try_parse(decoded)
        .ok()
        .map(|id| id.hyphenated().to_string())
}

/// A session addressed by name (not a UUID): 404 on the status and catalog routes, otherwise 400 with the
/// spec's engine-lookup message (the name never resolves to an engine).
fn named_session(raw: &str, path: &str) -> ApiError {
    let resource = path
        .strip_prefix("/api/sessions/")
        .and_then(|rest| rest.split('/').nth(1));
    match resource {
        Some("status" | "catalog") => ApiError::not_found(format!("Session '{raw}' not found")),
        _ => ApiError::bad_request(format!("Session '{raw}' is not active")),
    }
}

#[cfg(test)]
mod session_id_tests {
    use super::canonical_session_id;

    #[test]
    fn only_the_hyphenated_spelling_is_a_session_id() {
        let id = "0b6f7c1e-5a3f-4c2e-9d1a-2f0e8b7c6d5a";
        assert_eq!(canonical_session_id(id).as_deref(), Some(id));
        assert_eq!(
            canonical_session_id(&id.to_uppercase()).as_deref(),
            Some(id)
        );
        for other in [
            format!("{{{id}}}"),
            format!("urn:uuid:{id}"),
            id.replace('-', ""),
            format!("{id} "),
            "my-session".to_string(),
        ] {
            assert_eq!(canonical_session_id(&other), None, "{other}");
        }
    }
}

#[cfg(test)]
mod nul_tests {
    use super::carries_nul;

    #[test]
    fn only_an_escaped_nul_counts() {
        assert!(carries_nul(br#"{"text":"a\u0000b"}"#));
        assert!(carries_nul(br#"{"text":"a\\\u0000b"}"#));
        assert!(!carries_nul(br#"{"text":"a\\u0000b"}"#));
        assert!(!carries_nul(br#"{"base64":"QUu0000zz"}"#));
    }
}
