//! `GET /api/settings` (any valid key): the effective settings, derived from the environment and read-only
//! at runtime (`PUT /api/settings` was removed and answers the JSON 404). No secret is reported.

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::common::Settings;

use super::auth::Caller;
use crate::app::ApiContext;
use crate::config::{Config, DatabaseType};

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new().routes(routes!(get_settings))
}

/// GET /api/settings
#[utoipa::path(get, path = "/api/settings", tag = "settings", responses((status = 200, body = Settings)))]
async fn get_settings(_caller: Caller, State(ctx): State<ApiContext>) -> Json<Settings> {
    Json(settings_of(&ctx.config))
}

fn settings_of(config: &Config) -> Settings {
    let database_type = match config.database_type {
        DatabaseType::Sqlite => "sqlite",
        DatabaseType::Postgres => "postgres",
    };
    Settings {
        version: wagate_proto::VERSION.to_string(),
        engine_type: config.engine_type.as_str().to_string(),
        node_id: config.node_id.clone(),
        database_type: database_type.to_string(),
        redis_enabled: config.redis_enabled,
        auto_start_sessions: config.auto_start_sessions,
        body_size_limit: config.body_size_limit,
        media_download_max_bytes: config.media_download_max_bytes,
        webhook_timeout_ms: config.webhook_timeout_ms,
        webhook_retry_delay_ms: config.webhook_retry_delay_ms,
        webhook_max_payload_bytes: config.webhook_max_payload_bytes,
        send_pacing_enabled: config.send_pacing_enabled,
        metrics_enabled: config.metrics_token.is_some(),
    }
}
