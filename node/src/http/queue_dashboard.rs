//! The queue dashboard, `GET /api/admin/queues` (admin keys not restricted to sessions): a page served from
//! this binary (HTML, script, style and icon embedded; no CDN) under a strict Content-Security-Policy, and the
//! JSON it reads and acts through under `/api/admin/queues/...`. Counts, jobs, retry and remove come from
//! `wagate_workers::queue_view`, which reads our outbox and ingress tables (they, not apalis, hold each job's
//! state). Retries and removals are audited.
//!
//! A browser navigation carries no API key, so a navigation without one gets the page itself, which holds no
//! data: it asks for the key, keeps it in `sessionStorage` and sends it with every data request. Any other
//! request without a valid admin key is refused as everywhere else.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Role;
use wagate_workers::queue_view::{self, Action, JobView, Listing, QueueName};

use super::auth::{Caller, presented_key};
use super::error::{ApiError, ApiResult};
use super::extract::ApiPath;
use crate::app::ApiContext;

const PAGE: &str = include_str!("queue_dashboard/index.html");
const SCRIPT: &str = include_str!("queue_dashboard/app.js");
const STYLE: &str = include_str!("queue_dashboard/app.css");
const ICON: &str = include_str!("queue_dashboard/icon.svg");

/// Only this origin's own files and API: no inline script or style, no frames, no other hosts.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Jobs listed per queue and listing.
const LIST_LIMIT: i64 = 50;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(get_dashboard))
        .routes(routes!(get_asset))
        .routes(routes!(get_queues))
        .routes(routes!(retry_job))
        .routes(routes!(remove_job))
}

fn with_security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn page() -> Response {
    with_security_headers(
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response(),
    )
}

/// A top-level browser navigation (it cannot carry the API key header).
fn is_navigation(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-mode")
        .is_some_and(|v| v.as_bytes() == b"navigate")
}

fn require_dashboard(caller: &Caller) -> ApiResult<()> {
    caller.require(Role::Admin)?;
    caller.require_unscoped()
}

/// GET /api/admin/queues
///
/// The queue dashboard page (HTML) for `webhook-queue` and `ingress-queue`.
#[utoipa::path(get, path = "/api/admin/queues", tag = "admin",
    responses((status = 200, description = "The dashboard page", content_type = "text/html", body = String),
        (status = 401), (status = 403)))]
async fn get_dashboard(caller: Result<Caller, ApiError>, headers: HeaderMap) -> Response {
    match caller {
        Ok(caller) => match require_dashboard(&caller) {
            Ok(()) => page(),
            Err(e) => e.into_response(),
        },
        Err(_) if is_navigation(&headers) && presented_key(&headers).is_none() => page(),
        Err(e) => e.into_response(),
    }
}

/// GET /api/admin/queues/assets/{file}
///
/// The dashboard's script, style sheet and icon (public: code, no data).
#[utoipa::path(get, path = "/api/admin/queues/assets/{file}", tag = "admin",
    params(("file" = String, Path, description = "app.js, app.css or icon.svg")),
    responses((status = 200, description = "The asset (JavaScript, CSS or SVG)", content_type = "text/plain", body = String),
        (status = 404)))]
async fn get_asset(ApiPath(file): ApiPath<String>) -> Response {
    let (body, content_type) = match file.as_str() {
        "app.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "app.css" => (STYLE, "text/css; charset=utf-8"),
        "icon.svg" => (ICON, "image/svg+xml"),
        _ => {
            return ApiError::not_found(format!("Cannot GET /api/admin/queues/assets/{file}"))
                .into_response();
        }
    };
    with_security_headers(([(header::CONTENT_TYPE, content_type)], body).into_response())
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct QueueCountsBody {
    waiting: u64,
    active: u64,
    delayed: u64,
    completed: u64,
    failed: u64,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct QueueBody {
    name: String,
    /// Where the state shown is read from.
    source: String,
    /// What puts jobs on this queue, in one sentence for the page.
    fed_by: String,
    /// False when nothing in this build produces jobs for the queue (it is shown, empty, as the spec lists it).
    producer_built: bool,
    counts: QueueCountsBody,
    #[schema(value_type = Vec<Object>)]
    recent: Vec<JobView>,
    #[schema(value_type = Vec<Object>)]
    failed: Vec<JobView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct QueuesBody {
    queues: Vec<QueueBody>,
    generated_at: String,
}

/// The spec's `ingress-queue` carries requests of the signed integration ingress receiver (plugins and
/// integrations, not built yet); inbound WhatsApp events do not pass through it: they are committed with their
/// outbox rows and leave through `webhook-queue`. So the page says plainly that nothing feeds it yet, rather
/// than showing an empty queue as if it were idle.
fn fed_by(queue: QueueName) -> &'static str {
    match queue {
        QueueName::Webhook => {
            "Webhook deliveries: every event (inbound messages included) is committed with one outbox row per \
             matching webhook, and each row is delivered through this queue."
        }
        QueueName::Ingress => {
            "Requests of the integration ingress receiver. This build has no integration receiver yet, so \
             nothing puts jobs on this queue; inbound WhatsApp events are delivered through webhook-queue."
        }
    }
}

async fn queue_body(ctx: &ApiContext, queue: QueueName) -> ApiResult<QueueBody> {
    let unreadable = |e: queue_view::ViewError| ApiError::unavailable(e.to_string());
    let counts = ctx.infra.queue_counts(queue).await.map_err(unreadable)?;
    let recent = ctx
        .infra
        .queue_jobs(queue, Listing::Recent, LIST_LIMIT)
        .await
        .map_err(unreadable)?;
    let failed = ctx
        .infra
        .queue_jobs(queue, Listing::Failed, LIST_LIMIT)
        .await
        .map_err(unreadable)?;
    Ok(QueueBody {
        name: queue.as_str().to_owned(),
        source: match queue {
            QueueName::Webhook => "webhook_outbox_events",
            QueueName::Ingress => "ingress_events",
        }
        .to_owned(),
        fed_by: fed_by(queue).to_owned(),
        producer_built: matches!(queue, QueueName::Webhook),
        counts: QueueCountsBody {
            waiting: counts.waiting,
            active: counts.active,
            delayed: counts.delayed,
            completed: counts.completed,
            failed: counts.failed,
        },
        recent,
        failed,
    })
}

/// GET /api/admin/queues/data
///
/// Both queues: counts per state, the most recent jobs and the failed ones.
#[utoipa::path(get, path = "/api/admin/queues/data", tag = "admin",
    responses((status = 200, body = QueuesBody), (status = 401), (status = 403), (status = 503)))]
async fn get_queues(caller: Caller, State(ctx): State<ApiContext>) -> ApiResult<Json<QueuesBody>> {
    require_dashboard(&caller)?;
    let webhook = queue_body(&ctx, QueueName::Webhook).await?;
    let ingress = queue_body(&ctx, QueueName::Ingress).await?;
    Ok(Json(QueuesBody {
        queues: vec![webhook, ingress],
        generated_at: wagate_proto::iso_ms(crate::store::now_ms()),
    }))
}

fn queue_named(name: &str) -> ApiResult<QueueName> {
    QueueName::parse(name).ok_or_else(|| ApiError::not_found(format!("Queue {name} not found")))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
struct JobActionBody {
    queue: String,
    job_id: String,
    action: String,
}

/// POST /api/admin/queues/{queue}/jobs/{jobId}/retry
///
/// Retries a failed job: it waits again with its attempts reset and is delivered by the next worker.
#[utoipa::path(post, path = "/api/admin/queues/{queue}/jobs/{jobId}/retry", tag = "admin",
    params(("queue" = String, Path), ("jobId" = String, Path)),
    responses((status = 200, body = JobActionBody), (status = 401), (status = 403), (status = 404)))]
async fn retry_job(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiPath((queue, job_id)): ApiPath<(String, String)>,
) -> ApiResult<Json<JobActionBody>> {
    require_dashboard(&caller)?;
    let name = queue_named(&queue)?;
    let done = ctx
        .infra
        .retry_job(name, &job_id)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    if done == Action::NotFound {
        return Err(ApiError::not_found(format!(
            "Failed job {job_id} not found in {queue}"
        )));
    }
    ctx.audit.record(
        "queue_job_retried",
        &caller.actor(),
        None,
        200,
        Some(serde_json::json!({ "queue": queue, "jobId": job_id })),
    );
    Ok(Json(JobActionBody {
        queue,
        job_id,
        action: "retried".into(),
    }))
}

/// DELETE /api/admin/queues/{queue}/jobs/{jobId}
///
/// Removes a job (its outbox or ingress row) and, for a webhook job, its delivery-failure entry.
#[utoipa::path(delete, path = "/api/admin/queues/{queue}/jobs/{jobId}", tag = "admin",
    params(("queue" = String, Path), ("jobId" = String, Path)),
    responses((status = 200, body = JobActionBody), (status = 401), (status = 403), (status = 404)))]
async fn remove_job(
    caller: Caller,
    State(ctx): State<ApiContext>,
    ApiPath((queue, job_id)): ApiPath<(String, String)>,
) -> ApiResult<Json<JobActionBody>> {
    require_dashboard(&caller)?;
    let name = queue_named(&queue)?;
    let done = ctx
        .infra
        .remove_job(name, &job_id)
        .await
        .map_err(|e| ApiError::unavailable(e.to_string()))?;
    if done == Action::NotFound {
        return Err(ApiError::not_found(format!(
            "Job {job_id} not found in {queue}"
        )));
    }
    ctx.audit.record(
        "queue_job_removed",
        &caller.actor(),
        None,
        200,
        Some(serde_json::json!({ "queue": queue, "jobId": job_id })),
    );
    Ok(Json(JobActionBody {
        queue,
        job_id,
        action: "removed".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for text in [PAGE, SCRIPT, STYLE] {
            assert!(!text.contains("http://") && !text.contains("https://"));
        }
        assert!(!PAGE.contains("<script>") && !PAGE.contains("style="));
        assert!(PAGE.contains(r#"src="/api/admin/queues/assets/app.js""#));
    }
}
