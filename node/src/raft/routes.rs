//! The internal raft routes (`POST /internal/raft/{rpc}`), mounted only with `MAIN_DB_REPLICATION=raft`. Every
//! request must carry the cluster secret (compared in constant time); without it the answer is 401 and the
//! body is never read. API keys are neither needed nor accepted here.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use subtle::ConstantTimeEq;

use super::network::{Rpc, SECRET_HEADER, dispatch};
use super::{MainRaft, RaftStatus};
use crate::http::error::ApiError;

#[derive(Clone)]
struct Internal {
    raft: Arc<MainRaft>,
    secret: Arc<String>,
}

pub(crate) fn router(raft: Arc<MainRaft>, secret: String, body_limit: usize) -> Router {
    let state = Internal {
        raft,
        secret: Arc::new(secret),
    };
    Router::new()
        .route("/internal/raft/status", get(status))
        .route("/internal/raft/{rpc}", post(serve))
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .layer(from_fn_with_state(state.clone(), require_secret))
        .with_state(state)
}

/// Whether `presented` is the cluster secret, in time independent of where they differ.
pub(crate) fn is_secret(presented: &[u8], secret: &str) -> bool {
    presented.ct_eq(secret.as_bytes()).into()
}

async fn require_secret(State(state): State<Internal>, req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if !is_secret(presented, &state.secret) {
        return ApiError::unauthorized("A valid cluster secret is required").into_response();
    }
    next.run(req).await
}

async fn serve(State(state): State<Internal>, Path(rpc): Path<String>, body: Bytes) -> Response {
    let Some(rpc) = Rpc::from_path(&rpc) else {
        return ApiError::not_found(format!("Cannot POST /internal/raft/{rpc}")).into_response();
    };
    match dispatch(&state.raft, rpc, &body).await {
        Ok(bytes) => (
            StatusCode::OK,
            [("content-type", "application/json")],
            bytes,
        )
            .into_response(),
        Err(err) => ApiError::bad_request(err.to_string()).into_response(),
    }
}

/// This replica's status for peers and test harnesses (the same as in `GET /api/infra/status`).
async fn status(State(state): State<Internal>) -> Json<RaftStatus> {
    Json(state.raft.status())
}
