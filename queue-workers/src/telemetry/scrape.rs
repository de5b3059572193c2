//! The metrics scrape's gate, the same in both processes: `Authorization: Bearer <METRICS_TOKEN>`; no token
//! configured answers 404, a wrong one 401. The compare takes the same time whatever the bytes are. Also the
//! worker's own scrape listener on `METRICS_PORT`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use super::metrics::Recorder;
use crate::db::DataPool;

/// What the gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Open,
    /// No `METRICS_TOKEN`: the route does not exist.
    NoToken,
    Refused,
}

/// Checks the request's bearer token against `METRICS_TOKEN` in constant time.
pub fn check(configured: Option<&str>, headers: &HeaderMap) -> Gate {
    let Some(expected) = configured else {
        return Gate::NoToken;
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .unwrap_or("");
    // `ct_eq` on slices of different lengths is false without comparing bytes; the length of a token is not
    // the secret.
    if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        Gate::Open
    } else {
        Gate::Refused
    }
}

/// The JSON error body every wagate error uses.
pub fn error_body(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({
        "statusCode": status.as_u16(),
        "message": message,
        "error": status.canonical_reason().unwrap_or("Error"),
    });
    (status, axum::Json(body)).into_response()
}

/// The scrape response: Prometheus text, version 0.0.4.
pub fn text_response(body: String) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

#[derive(Clone)]
struct WorkerScrape {
    token: Option<Arc<str>>,
    recorder: Recorder,
    pool: DataPool,
}

async fn worker_scrape(State(s): State<WorkerScrape>, headers: HeaderMap) -> Response {
    match check(s.token.as_deref(), &headers) {
        Gate::NoToken => error_body(StatusCode::NOT_FOUND, "Cannot GET /api/metrics"),
        Gate::Refused => error_body(StatusCode::UNAUTHORIZED, "Invalid metrics token"),
        Gate::Open => {
            crate::queue_view::sample_depth_gauges(&s.pool).await;
            text_response(s.recorder.render())
        }
    }
}

/// Serves `GET /api/metrics` (also `/metrics`) for `wagate-worker` on `addr` until `shutdown`.
pub async fn serve_worker_metrics(
    addr: SocketAddr,
    token: Option<String>,
    recorder: Recorder,
    pool: DataPool,
    shutdown: CancellationToken,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let state = WorkerScrape {
        token: token.map(Arc::from),
        recorder,
        pool,
    };
    let app = Router::new()
        .route("/api/metrics", get(worker_scrape))
        .route("/metrics", get(worker_scrape))
        .fallback(|| async { error_body(StatusCode::NOT_FOUND, "Not Found") })
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("could not listen on METRICS_PORT ({addr}): {e}"))?;
    tracing::info!(%addr, "worker metrics listening");
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "worker metrics listener stopped");
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bearer(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, v.parse().unwrap());
        h
    }

    #[test]
    fn the_token_rule() {
        assert_eq!(check(None, &bearer("Bearer x")), Gate::NoToken);
        assert_eq!(check(Some("s3cret"), &HeaderMap::new()), Gate::Refused);
        assert_eq!(
            check(Some("s3cret"), &bearer("Bearer s3cre")),
            Gate::Refused
        );
        assert_eq!(
            check(Some("s3cret"), &bearer("Bearer s3cret!")),
            Gate::Refused
        );
        assert_eq!(
            check(Some("s3cret"), &bearer("Basic s3cret")),
            Gate::Refused
        );
        assert_eq!(check(Some("s3cret"), &bearer("bearer s3cret")), Gate::Open);
        assert_eq!(check(Some("s3cret"), &bearer("Bearer s3cret")), Gate::Open);
    }
}
