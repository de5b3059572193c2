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
        let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            &bytes
        };
        serde_json::from_slice(text)
            .map(ApiJson)
            .map_err(|err| ApiError::bad_request(format!("Invalid request body: {err}")))
    }
}

fn bytes_rejection(rejection: BytesRejection) -> ApiError {
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
