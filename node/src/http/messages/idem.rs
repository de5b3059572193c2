//! `Idempotency-Key` on single sends: a handler asks `Idem::begin` first (a stored answer is replayed
//! as it was, a reused key with another body answers 422) and answers through `Idem::respond`, which
//! keeps a fresh successful answer for 24 h. The rules live in `messaging::idempotency`.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::app::ApiContext;
use crate::http::error::{ApiError, ApiResult};
use crate::messaging::idempotency::request_hash;

pub(crate) const HEADER: &str = "idempotency-key";

pub(crate) enum Idem {
    /// No key: nothing to remember.
    Off,
    Fresh {
        key: String,
        hash: String,
    },
    Replay(Response),
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut resp = (status, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

impl Idem {
    pub(crate) async fn begin<T: Serialize>(
        ctx: &ApiContext,
        session_id: &str,
        headers: &HeaderMap,
        route: &str,
        body: &T,
    ) -> ApiResult<Idem> {
        let Some(key) = headers.get(HEADER) else {
            return Ok(Idem::Off);
        };
        let key = key
            .to_str()
            .map_err(|_| ApiError::bad_request("Idempotency-Key must be visible ASCII"))?
            .to_string();
        let bytes = serde_json::to_vec(body).map_err(ApiError::internal)?;
        let hash = request_hash(route, &bytes);
        match ctx.messaging.replay(session_id, &key, &hash).await? {
            Some((status, body)) => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                Ok(Idem::Replay(json_response(status, body)))
            }
            None => Ok(Idem::Fresh { key, hash }),
        }
    }

    /// Answers `status` with `body`, remembering it when a key was given.
    pub(crate) async fn respond<T: Serialize>(
        self,
        ctx: &ApiContext,
        session_id: &str,
        status: StatusCode,
        body: &T,
    ) -> ApiResult<Response> {
        let text = serde_json::to_string(body).map_err(ApiError::internal)?;
        if let Idem::Fresh { key, hash } = &self {
            ctx.messaging
                .remember(session_id, key, hash, status.as_u16(), text.clone())
                .await?;
        }
        Ok(json_response(status, text))
    }
}
