//! The webhook service: the rules of the webhook resource (validation, write-only fields, cache
//! invalidation), the test delivery and the redrive of the delivery-failure log. Input: parsed requests from
//! `http/webhooks.rs`. The SQL of the webhook tables, signing and the HTTP attempt are the workers crate's
//! (`wagate_workers::webhook::store`, `deliver`).

mod delivery;
mod rules;

use wagate_proto::dto::webhooks::{CreateWebhookRequest, UpdateWebhookRequest, WebhookFilters};
use wagate_workers::WebhookSettings;
use wagate_workers::webhook::deliver::{DeliverError, WebhookClient};
use wagate_workers::webhook::store::StoreError as WebhookStoreError;
use wagate_workers::webhook::store::webhooks as webhook_store;

pub(crate) use delivery::RedriveSelection;
pub(crate) use wagate_workers::webhook::store::failures::FailureRow;
pub(crate) use wagate_workers::webhook::store::webhooks::WebhookRecord;

use crate::events::Pipeline;
use crate::store::{DataPool, StoreError, now_ms};

/// Why a webhook operation was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebhookError {
    /// A field broke a rule; the message names the field.
    #[error("{0}")]
    Invalid(String),
    #[error("Webhook {0} not found")]
    NotFound(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<WebhookStoreError> for WebhookError {
    fn from(err: WebhookStoreError) -> Self {
        WebhookError::Store(err.into())
    }
}

pub(crate) type WebhookResult<T> = Result<T, WebhookError>;

/// Created once at boot; handlers reach it through `ApiContext::webhooks`.
pub(crate) struct WebhookService {
    db: DataPool,
    pipeline: Pipeline,
    client: WebhookClient,
    settings: WebhookSettings,
}

impl WebhookService {
    pub(crate) fn new(
        db: DataPool,
        pipeline: Pipeline,
        settings: WebhookSettings,
    ) -> Result<WebhookService, DeliverError> {
        Ok(WebhookService {
            client: WebhookClient::new(&settings)?,
            db,
            pipeline,
            settings,
        })
    }

    pub(crate) async fn create(
        &self,
        session_id: &str,
        req: CreateWebhookRequest,
    ) -> WebhookResult<WebhookRecord> {
        let now = now_ms();
        let record = WebhookRecord {
            id: uuid::Uuid::new_v4().to_string(),
            session_id: session_id.to_owned(),
            url: rules::url(&req.url, self.settings.is_ssrf_protected).await?,
            events: rules::events(req.events.unwrap_or_else(|| vec!["*".to_owned()]))?,
            secret: rules::new_secret(req.secret)?,
            headers: rules::headers(req.headers.unwrap_or_default()),
            active: req.active.unwrap_or(true),
            filters: rules::filters(req.filters)?,
            retry_count: rules::retry_count(req.retry_count)?,
            last_triggered_at: None,
            created_at: now,
            updated_at: now,
        };
        // The row's one foreign key is its session: a violation means a delete of the session raced this.
        webhook_store::insert(&self.db, &record)
            .await
            .map_err(|e| StoreError::from(e).in_session(session_id))?;
        self.pipeline.subscriptions().invalidate(session_id);
        Ok(record)
    }

    pub(crate) async fn get(&self, session_id: &str, id: &str) -> WebhookResult<WebhookRecord> {
        webhook_store::get(&self.db, session_id, id)
            .await
            .map_err(|e| not_found(e.into(), id))
    }

    pub(crate) async fn list(&self, session_id: &str) -> WebhookResult<Vec<WebhookRecord>> {
        Ok(webhook_store::list_for_session(&self.db, session_id).await?)
    }

    /// Every webhook the caller may see (`allowed` = its sessions, `None` = all), paged.
    pub(crate) async fn list_all(
        &self,
        allowed: Option<&[String]>,
        limit: usize,
        offset: usize,
    ) -> WebhookResult<Vec<WebhookRecord>> {
        let all = webhook_store::list_all(&self.db).await?;
        Ok(all
            .into_iter()
            .filter(|w| allowed.is_none_or(|list| list.contains(&w.session_id)))
            .skip(offset)
            .take(limit)
            .collect())
    }

    pub(crate) async fn update(
        &self,
        session_id: &str,
        id: &str,
        req: UpdateWebhookRequest,
    ) -> WebhookResult<WebhookRecord> {
        let mut w = self.get(session_id, id).await?;
        if let Some(url) = req.url {
            w.url = rules::url(&url, self.settings.is_ssrf_protected).await?;
        }
        if let Some(events) = req.events {
            w.events = rules::events(events)?;
        }
        if let Some(secret) = req.secret {
            w.secret = rules::secret(Some(secret))?;
        }
        if let Some(headers) = req.headers {
            w.headers = rules::headers(headers.unwrap_or_default());
        }
        if let Some(active) = req.active {
            w.active = active;
        }
        if let Some(filters) = req.filters {
            w.filters = rules::filters(filters)?;
        }
        if req.retry_count.is_some() {
            w.retry_count = rules::retry_count(req.retry_count)?;
        }
        w.updated_at = now_ms();
        webhook_store::update(&self.db, &w)
            .await
            .map_err(|e| not_found(e.into(), id))?;
        self.pipeline.subscriptions().invalidate(session_id);
        Ok(w)
    }

    pub(crate) async fn delete(&self, session_id: &str, id: &str) -> WebhookResult<()> {
        webhook_store::delete(&self.db, session_id, id)
            .await
            .map_err(|e| not_found(e.into(), id))?;
        self.pipeline.subscriptions().invalidate(session_id);
        Ok(())
    }
}

/// The fields of a webhook row a data import brings (`admin/import.rs`), held to the rules of `create`
/// except that the URL's host is not resolved: an export made elsewhere may name hosts this machine
/// cannot resolve (deliveries resolve and vet each attempt anyway). `None` is a field the row lacks,
/// which the database refuses or defaults on its own.
pub(crate) fn check_imported(
    url: Option<&str>,
    events: Option<Vec<String>>,
    filters: Option<WebhookFilters>,
    retry_count: Option<i64>,
    is_ssrf_protected: bool,
) -> WebhookResult<()> {
    if let Some(url) = url {
        rules::url_form(url, is_ssrf_protected)?;
    }
    if let Some(events) = events {
        rules::events(events)?;
    }
    rules::filters(filters)?;
    if retry_count.is_some() {
        rules::retry_count(retry_count)?;
    }
    Ok(())
}

fn not_found(err: StoreError, id: &str) -> WebhookError {
    match err {
        StoreError::NotFound => WebhookError::NotFound(id.to_owned()),
        other => WebhookError::Store(other),
    }
}
