//! Administration of data: the data export and import (`export.rs`, `import.rs`) over the sixteen tables of
//! [`TABLES`], and media archives (`storage.rs`) through the media store (`list`/`stream`/`put_object`), whichever backend
//! `STORAGE_TYPE` chose. Handlers in
//! `http/infra.rs` parse and authorise; the rules (budget, credential stripping, orphans, the one
//! transaction, the API's rules for imported rows in `import_rules.rs`, archive paths and expiry) live here.

mod export;
mod import;
mod import_rules;
pub(crate) mod storage;

use std::path::PathBuf;
use std::sync::Arc;

use wagate_db::table_spec::TableSpec;
use wagate_workers::webhook::store as webhook_store;

use crate::automation::AutomationService;
use crate::events::Pipeline;
use crate::media::{MediaError, MediaStore};
use crate::sessions::SessionService;
use crate::store::{DataPool, StoreError, data_tables};

pub(crate) use import::ImportRequest;

/// The spec's sixteen exported tables, in the order an import writes them (parents before children) and
/// the spec lists them: the node's own (`store::data_tables`), the webhook and ingress tables the workers
/// crate describes beside their SQL, and the socket engine's LID mappings, which that engine owns.
pub(crate) static TABLES: [&TableSpec; 16] = [
    &data_tables::SESSIONS,
    &webhook_store::webhooks::WEBHOOKS_EXPORT,
    &data_tables::MESSAGES,
    &data_tables::MESSAGE_BATCHES,
    &data_tables::TEMPLATES,
    &data_tables::BAILEYS_STORED_MESSAGES,
    &wagate_engine_socket::store::LID_MAPPINGS_EXPORT,
    &data_tables::CHAT_STATES,
    &data_tables::PLUGIN_INSTANCES,
    &data_tables::CONVERSATION_MAPPINGS,
    &wagate_workers::ingress::INGRESS_EVENTS_EXPORT,
    &webhook_store::failures::WEBHOOK_DELIVERY_FAILURES_EXPORT,
    &webhook_store::outbox::WEBHOOK_OUTBOX_EVENTS_EXPORT,
    &data_tables::INTEGRATION_DELIVERY_FAILURES,
    &data_tables::STATUS_UPDATES,
    &data_tables::AUTOMATION_RULES,
];

/// Why an administrative action failed; `http/error.rs` maps each to its status.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AdminError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The media backend refused or could not be reached: 503, nothing changed.
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl From<MediaError> for AdminError {
    fn from(err: MediaError) -> Self {
        match err {
            MediaError::Unavailable(_) => AdminError::Unavailable(err.to_string()),
            MediaError::BadInput(_) | MediaError::TooLarge(_) => {
                AdminError::BadRequest(err.to_string())
            }
            other => AdminError::Internal(other.to_string()),
        }
    }
}

pub(crate) type AdminResult<T> = Result<T, AdminError>;

/// Stops a session's engine on the other node of a cluster that runs it. The HTTP layer supplies it: it
/// knows how to reach peers (the import's orphan handling calls it with `stopOrphans`).
#[async_trait::async_trait]
pub(crate) trait RemoteStop: Send + Sync {
    async fn stop(&self, session_id: &str) -> Result<(), String>;
}

pub(crate) struct DataAdmin {
    db: DataPool,
    media: MediaStore,
    sessions: Arc<SessionService>,
    pipeline: Pipeline,
    automation: Arc<AutomationService>,
    inline_budget: u64,
    data_dir: PathBuf,
    export_ttl_ms: u64,
    /// `WEBHOOK_SSRF_PROTECT`: an imported webhook URL is held to the same IP-literal rule as a created one.
    webhook_ssrf_protect: bool,
}

impl DataAdmin {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        db: DataPool,
        media: MediaStore,
        sessions: Arc<SessionService>,
        pipeline: Pipeline,
        automation: Arc<AutomationService>,
        inline_budget: u64,
        data_dir: PathBuf,
        export_ttl_ms: u64,
        webhook_ssrf_protect: bool,
    ) -> DataAdmin {
        DataAdmin {
            db,
            media,
            sessions,
            pipeline,
            automation,
            inline_budget,
            data_dir,
            export_ttl_ms,
            webhook_ssrf_protect,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sixteen_tables_in_the_spec_order() {
        let keys: Vec<&str> = TABLES.iter().map(|t| t.key).collect();
        assert_eq!(
            keys,
            [
                "sessions",
                "webhooks",
                "messages",
                "messageBatches",
                "templates",
                "baileysStoredMessages",
                "lidMappings",
                "chatStates",
                "pluginInstances",
                "conversationMappings",
                "ingressEvents",
                "webhookDeliveryFailures",
                "webhookOutboxEvents",
                "integrationDeliveryFailures",
                "statusUpdates",
                "automationRules"
            ]
        );
        let webhooks = TABLES[1].column_keys();
        assert!(!webhooks.iter().any(|k| k == "secret" || k == "headers"));
    }
}
