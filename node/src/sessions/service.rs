//! `SessionService`: the rules of the session resource (create, list, read, delete, config, proxy) and
//! the registry of sessions loaded on this node. Lifecycle operations are in `lifecycle.rs`.

use std::sync::Arc;

use dashmap::{DashMap, DashSet};
use wagate_proto::dto::sessions::SessionConfig;

use super::cache::{CachedRecord, ListPage, Lookup};
use super::deps::Deps;
use super::error::{SessionError, SessionResult};
use super::proxy;
use super::runtime::Runtime;
use crate::cluster::lease::Leases;
use crate::engine::{Capabilities, EngineKind};
use crate::store::StoreError;
use crate::store::sessions::{self as session_store, SessionRecord};

/// Where engines run, as `running_engines_everywhere` found them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RunningEngines {
    pub here: Vec<String>,
    pub elsewhere: Vec<String>,
}

/// A session as the API shows it: the stored row plus whether an engine is loaded here.
#[derive(Debug, Clone)]
pub(crate) struct SessionView {
    pub record: SessionRecord,
    pub engine_loaded: bool,
}

pub(crate) struct SessionService {
    pub(super) deps: Arc<Deps>,
    pub(super) leases: Arc<dyn Leases>,
    /// Looked up for every session of every list read: hashed with foldhash rather than SipHash.
    pub(super) runtimes: DashMap<String, Arc<Runtime>, foldhash::fast::RandomState>,
    /// One gate per session being loaded (see `load`); removed once nobody waits on it.
    pub(super) loading: DashMap<String, Arc<tokio::sync::Mutex<()>>>,
    /// One gate per session a lifecycle operation is loading, driving or unloading (`lifecycle_gate`);
    /// removed once nobody holds or waits on it.
    pub(super) lifecycle: DashMap<String, Arc<tokio::sync::Mutex<()>>>,
    /// Sessions whose credentials are being torn down (logout, delete): start and delete are refused,
    /// a logout waits for it to end (`wait_teardown`).
    pub(super) teardowns: DashSet<String>,
    /// Woken whenever a teardown ends.
    pub(super) teardown_ended: tokio::sync::Notify,
    pub(super) start_timeout_ms: u64,
    /// This node's cluster membership (set at boot with `REDIS_ENABLED=true`), for `drain`.
    pub(super) cluster: std::sync::OnceLock<Arc<crate::cluster::Cluster>>,
}

/// A config change: for each field `None` = unchanged, `Some(None)` = back to default, `Some(Some(v))` = set.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConfigChange {
    pub auto_reject_calls: Option<Option<bool>>,
    pub max_reconnect_attempts: Option<Option<u32>>,
    pub reconnect_base_delay: Option<Option<u64>>,
}

impl ConfigChange {
    pub(crate) fn apply(&self, config: &mut SessionConfig) {
        let defaults = SessionConfig::default();
        if let Some(v) = self.auto_reject_calls {
            config.auto_reject_calls = v.unwrap_or(defaults.auto_reject_calls);
        }
        if let Some(v) = self.max_reconnect_attempts {
            config.max_reconnect_attempts = v;
        }
        if let Some(v) = self.reconnect_base_delay {
            config.reconnect_base_delay = v.unwrap_or(defaults.reconnect_base_delay);
        }
    }
}

impl SessionService {
    pub(crate) fn new(
        deps: Arc<Deps>,
        leases: Arc<dyn Leases>,
        start_timeout_ms: u64,
    ) -> SessionService {
        SessionService {
            deps,
            leases,
            runtimes: DashMap::default(),
            loading: DashMap::new(),
            lifecycle: DashMap::new(),
            teardowns: DashSet::new(),
            teardown_ended: tokio::sync::Notify::new(),
            start_timeout_ms,
            cluster: std::sync::OnceLock::new(),
        }
    }

    #[allow(dead_code)] // capability reads (key check, docs)
    pub(crate) fn engine_kind(&self) -> EngineKind {
        self.deps.factory.kind()
    }

    #[allow(dead_code)]
    pub(crate) fn capabilities(&self) -> &Capabilities {
        self.deps.factory.capabilities()
    }

    pub(crate) fn runtime(&self, id: &str) -> Option<Arc<Runtime>> {
        self.runtimes.get(id).map(|r| r.clone())
    }

    /// Whether the session's engine runs on this node (without taking a reference to its runtime).
    fn engine_runs_here(&self, id: &str) -> bool {
        self.runtimes.get(id).is_some_and(|r| r.has_engine())
    }

    /// For a process that is stopping: every session loaded here stops taking traffic and stores what its
    /// engine already handed over (`Runtime::quiesce`), all at once, within `budget`.
    pub(crate) async fn quiesce_all(&self, budget: std::time::Duration) {
        let loaded: Vec<Arc<Runtime>> = self.runtimes.iter().map(|r| r.value().clone()).collect();
        futures::future::join_all(loaded.iter().map(|r| r.quiesce(budget))).await;
    }

    /// Ids of the sessions with an engine running on this node.
    pub(crate) fn running_engine_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .runtimes
            .iter()
            .filter(|r| r.value().has_engine())
            .map(|r| r.key().clone())
            .collect();
        ids.sort();
        ids
    }

    /// Ids of the sessions with an engine running anywhere: on this node, or (in a cluster) on another
    /// live node that holds the session's lease. `elsewhere` are those of other nodes.
    pub(crate) async fn running_engines_everywhere(&self) -> SessionResult<RunningEngines> {
        let all: Vec<String> = session_store::list(&self.deps.db, i64::MAX, 0)
            .await?
            .into_iter()
            .map(|r| r.id)
            .collect();
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        let mut elsewhere = self.leases.held_elsewhere(&all).await;
        elsewhere.sort();
        Ok(RunningEngines {
            here: self.running_engine_ids(),
            elsewhere,
        })
    }

    pub(super) fn view(&self, record: SessionRecord) -> SessionView {
        let engine_loaded = self.engine_runs_here(&record.id);
        SessionView {
            record,
            engine_loaded,
        }
    }

    pub(crate) async fn record(&self, id: &str) -> SessionResult<SessionRecord> {
        session_store::get(&self.deps.db, id)
            .await
            .map_err(|err| match err {
                StoreError::NotFound => SessionError::NotFound(id.to_string()),
                other => other.into(),
            })
    }

    /// The record for the read routes: from memory when current (`cache.rs`), else from the data DB.
    pub(crate) async fn cached_record(&self, id: &str) -> SessionResult<Arc<CachedRecord>> {
        let ticket = match self.deps.records.lookup(id).await {
            Lookup::Hit(record) => return Ok(record),
            Lookup::Miss(ticket) => ticket,
        };
        let record = Arc::new(CachedRecord::new(self.record(id).await?));
        self.deps.records.fill(ticket, record.clone());
        Ok(record)
    }

    pub(crate) async fn get(&self, id: &str) -> SessionResult<SessionView> {
        let cached = self.cached_record(id).await?;
        Ok(self.view(cached.record.clone()))
    }

    /// The cached record and whether an engine runs it here (not cached: the runtimes say so).
    pub(crate) async fn get_cached(&self, id: &str) -> SessionResult<(Arc<CachedRecord>, bool)> {
        let cached = self.cached_record(id).await?;
        let engine_loaded = self.engine_runs_here(id);
        Ok((cached, engine_loaded))
    }

    /// After a data import, which may have changed any session row.
    pub(crate) async fn forget_cached_records(&self) {
        self.deps.records.invalidate_all().await;
    }

    pub(crate) async fn create(
        &self,
        name: &str,
        change: &ConfigChange,
        proxy_url: Option<&str>,
    ) -> SessionResult<SessionView> {
        check_name(name)?;
        if let Some(url) = proxy_url {
            proxy::parse(url)?;
        }
        let mut config = SessionConfig::default();
        change.apply(&mut config);
        let id = uuid::Uuid::new_v4().to_string();
        let inserted = session_store::insert(&self.deps.db, &id, name, &config, proxy_url).await;
        // A new row changes the list.
        self.deps.records.invalidate(&id).await;
        match inserted {
            Err(StoreError::Conflict { .. }) => Err(SessionError::NameTaken(name.to_string())),
            other => Ok(self.view(other?)),
        }
    }

    /// A page of sessions, or the one with exactly `name`, each with whether an engine runs it (here, or on
    /// another node by its lease: not cached, read at each request).
    pub(crate) async fn list(
        &self,
        limit: i64,
        offset: i64,
        name: Option<&str>,
    ) -> SessionResult<Vec<(Arc<CachedRecord>, bool)>> {
        let records: Vec<Arc<CachedRecord>> = match name {
            Some(name) => session_store::find_by_name(&self.deps.db, name)
                .await?
                .into_iter()
                // The one match is a list of one, paged like any other.
                .skip(usize::try_from(offset).unwrap_or(usize::MAX))
                .take(usize::try_from(limit).unwrap_or(0))
                .map(|r| Arc::new(CachedRecord::new(r)))
                .collect(),
            None => self.cached_list(limit, offset).await?.rows.clone(),
        };
        let loaded = self.engines_loaded(&records).await;
        Ok(records.into_iter().zip(loaded).collect())
    }

    /// A page of sessions as kept in memory (`cache.rs`), with whether an engine runs each one.
    pub(crate) async fn list_page(
        &self,
        limit: i64,
        offset: i64,
    ) -> SessionResult<(Arc<ListPage>, Vec<bool>)> {
        let page = self.cached_list(limit, offset).await?;
        let loaded = self.engines_loaded(&page.rows).await;
        Ok((page, loaded))
    }

    /// Whether an engine runs each session, here or on another node by its lease (in a cluster a list is
    /// answered here, but an engine may run elsewhere): not cached, read at each request.
    async fn engines_loaded(&self, records: &[Arc<CachedRecord>]) -> Vec<bool> {
        let ids: Vec<&str> = records.iter().map(|r| r.record.id.as_str()).collect();
        let elsewhere: std::collections::HashSet<String> =
            self.leases.held_elsewhere(&ids).await.into_iter().collect();
        ids.iter()
            .map(|id| self.engine_runs_here(id) || elsewhere.contains(*id))
            .collect()
    }

    /// A page of the session list: from memory when current (`cache.rs`), else from the data DB.
    async fn cached_list(&self, limit: i64, offset: i64) -> SessionResult<Arc<ListPage>> {
        let ticket = match self.deps.records.lookup_list((limit, offset)).await {
            Lookup::Hit(records) => return Ok(records),
            Lookup::Miss(ticket) => ticket,
        };
        let rows = session_store::list(&self.deps.db, limit, offset).await?;
        let records = Arc::new(ListPage::new(
            rows.into_iter()
                .map(|r| Arc::new(CachedRecord::new(r)))
                .collect(),
        ));
        self.deps
            .records
            .fill_list(ticket, (limit, offset), records.clone());
        Ok(records)
    }

    /// The status of every session loaded on this node.
    pub(crate) fn loaded_statuses(&self) -> Vec<wagate_proto::SessionStatus> {
        self.runtimes.iter().map(|r| r.value().status()).collect()
    }

    pub(crate) async fn count_by_status(&self) -> SessionResult<Vec<(String, i64)>> {
        Ok(session_store::count_by_status(&self.deps.db).await?)
    }

    pub(crate) async fn update_config(
        &self,
        id: &str,
        change: &ConfigChange,
    ) -> SessionResult<SessionConfig> {
        let mut config = self.record(id).await?.config;
        change.apply(&mut config);
        let written = session_store::update_config(&self.deps.db, id, &config).await;
        self.deps.records.invalidate(id).await;
        written?;
        Ok(config)
    }

    /// Stores a new proxy URL (applies at the next start); `None` clears it.
    pub(crate) async fn update_proxy(
        &self,
        id: &str,
        url: Option<&str>,
    ) -> SessionResult<Option<String>> {
        self.record(id).await?;
        if let Some(url) = url {
            proxy::parse(url)?;
        }
        let written = session_store::update_proxy(&self.deps.db, id, url).await;
        self.deps.records.invalidate(id).await;
        written?;
        Ok(url.map(str::to_string))
    }

    /// Deletes the session, its engine, its credentials (both engines' auth data) and its media objects.
    pub(crate) async fn delete(&self, id: &str) -> SessionResult<()> {
        self.record(id).await?;
        let _teardown = self.begin_teardown(id)?;
        {
            // After a start that holds the gate; one that waits for it finds the teardown and refuses.
            let _gate = self.lifecycle_gate(id).await;
            self.unload(id).await;
        }
        self.deps.forget_credentials(id).await?;
        let deleted = session_store::delete(&self.deps.db, id).await;
        self.deps.records.invalidate(id).await;
        deleted?;
        self.leases.forget_session(id).await;
        let dir = self.deps.sessions_dir.join(id);
        if let Err(err) = tokio::fs::remove_dir_all(&dir).await
            && err.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(session_id = id, error = %err, "engine auth directory not removed");
        }
        // The rows are gone, so an object left behind is unreachable garbage, not lost data: a
        // storage failure here is logged rather than failing a delete that already happened.
        match self.deps.media.delete_session(id).await {
            Ok(removed) => tracing::debug!(session_id = id, removed, "session media deleted"),
            Err(err) => tracing::warn!(session_id = id, error = %err, "session media not deleted"),
        }
        Ok(())
    }

    /// Marks a credential teardown; refused while another is in flight. Ends when the guard drops.
    pub(super) fn begin_teardown(&self, id: &str) -> SessionResult<TeardownGuard<'_>> {
        if !self.teardowns.insert(id.to_string()) {
            return Err(SessionError::TeardownPending);
        }
        Ok(TeardownGuard {
            set: &self.teardowns,
            ended: &self.teardown_ended,
            id: id.to_string(),
        })
    }

    /// Marks a credential teardown once none is in flight for the session, waiting for the one that
    /// is; `true` when it waited.
    pub(super) async fn wait_teardown(&self, id: &str) -> (TeardownGuard<'_>, bool) {
        let mut waited = false;
        loop {
            // Registered before the check, so a teardown ending in between still wakes us.
            let ended = self.teardown_ended.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if let Ok(guard) = self.begin_teardown(id) {
                return (guard, waited);
            }
            waited = true;
            ended.await;
        }
    }

    pub(super) fn check_no_teardown(&self, id: &str) -> SessionResult<()> {
        if self.teardowns.contains(id) {
            Err(SessionError::TeardownPending)
        } else {
            Ok(())
        }
    }
}

pub(super) struct TeardownGuard<'a> {
    set: &'a DashSet<String>,
    ended: &'a tokio::sync::Notify,
    id: String,
}

impl Drop for TeardownGuard<'_> {
    fn drop(&mut self) {
        self.set.remove(&self.id);
        self.ended.notify_waiters();
    }
}

/// 3-50 characters, alphanumeric and hyphens.
pub(crate) fn check_name(name: &str) -> SessionResult<()> {
    let len = name.chars().count();
    if !(3..=50).contains(&len) || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(SessionError::BadInput(
            "name must be 3-50 characters, letters, digits and hyphens only".into(),
        ));
    }
    Ok(())
}
