//! API keys: issuing, checking and changing them. Checks are answered from an in-memory cache that every
//! change refreshes, so the request path never waits on the database; usage counters are flushed in batches.
//! Changes are commands (`maindb.rs`) written to the local file or, with raft, committed through the leader;
//! the cache reloads when a change is applied. With raft, a (re)started replica answers no check from its
//! cache before it caught up with the cluster's commits (a key may have been revoked while it was down).
//! Routes live in `http/keys.rs`; SQL in `store/keys.rs`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use dashmap::DashMap;
use rand::Rng;
use rand::distr::Alphanumeric;
use sha2::{Digest, Sha256};
use sqlx::SqlitePool;
use tokio_util::sync::CancellationToken;
use wagate_proto::Role;

use crate::maindb::{MainCommand, MainOutcome, MainWriter, Refusal, UsageDelta, WriteError};
use crate::store::keys::{self as key_store, ApiKey};
use crate::store::{StoreError, now_ms};

mod rules;

pub use rules::{KeyChange, NewKey};
pub(crate) use rules::{is_unrestricted_admin, is_usable_admin_from, restore_unrestricted_admin};

/// Why a presented key is refused (401 to the caller, except [`KeyRefusal::CatchingUp`]: 503).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefusal {
    #[error("API key is missing")]
    Missing,
    #[error("Invalid API key")]
    Invalid,
    #[error("API key is revoked")]
    Revoked,
    #[error("API key has expired")]
    Expired,
    #[error("API key is not allowed from this address")]
    AddressNotAllowed,
    /// Raft: this replica has not yet caught up with what the cluster committed since it (re)started, so
    /// its keys may be stale (a revocation made while it was down); no verdict on the key.
    #[error(
        "This node's copy of the API keys has not yet caught up with the cluster (no raft leader with a quorum has answered); try again shortly"
    )]
    CatchingUp,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("API key not found")]
    NotFound,
    #[error("{0}")]
    Invalid(String),
    #[error("This change would leave no usable admin key")]
    LastAdmin,
    /// The replicated main DB has no quorum (503).
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a revoke answers: the key as it now is, and whether this call revoked it (`false`: it already was,
/// and nothing was written).
#[derive(Debug, Clone)]
pub struct Revocation {
    pub key: ApiKey,
    pub is_new: bool,
}

/// One way of checking a presented key: counting its use or not.
type KeyCheck = fn(&KeyService, &str, Option<IpAddr>) -> Result<Arc<ApiKey>, KeyRefusal>;

pub struct KeyService {
    pool: SqlitePool,
    /// Where changes go: the local file, or the raft leader.
    writer: MainWriter,
    /// Keyed by the SHA-256 digest itself: the request path hashes the presented key and looks it up without
    /// spelling the digest out in hex (an allocation and an encode per request).
    by_hash: ArcSwap<HashMap<KeyDigest, Arc<ApiKey>>>,
    /// The state machine's key-change count the cache was last loaded at (raft only).
    loaded_version: AtomicU64,
    /// Whether the cache holds every change the cluster committed before this node (re)started: always
    /// embedded; with raft, once the replica caught up and the cache was reloaded after it.
    is_current: AtomicBool,
    usage: DashMap<String, (i64, i64)>,
}

/// A key's SHA-256 digest.
type KeyDigest = [u8; 32];

fn digest_key(plaintext: &str) -> KeyDigest {
    Sha256::digest(plaintext.as_bytes()).into()
}

/// The digest a key record stores, as its hex text (`key_hash`); `None` for text that is not one.
fn stored_digest(key_hash: &str) -> Option<KeyDigest> {
    let mut digest = [0u8; 32];
    hex::decode_to_slice(key_hash, &mut digest).ok()?;
    Some(digest)
}

pub fn hash_key(plaintext: &str) -> String {
    hex::encode(digest_key(plaintext))
}

fn generate_plaintext() -> String {
    let body: String = rand::rng()
        .sample_iter(Alphanumeric)
        .take(40)
        .map(char::from)
        .collect();
    format!("wag_{body}")
}

impl From<Refusal> for KeyError {
    fn from(refusal: Refusal) -> KeyError {
        match refusal {
            Refusal::NotFound => KeyError::NotFound,
            Refusal::LastAdmin => KeyError::LastAdmin,
            Refusal::Invalid { message } => KeyError::Invalid(message),
        }
    }
}

impl From<WriteError> for KeyError {
    fn from(err: WriteError) -> KeyError {
        match err {
            WriteError::Unavailable(message) => KeyError::Unavailable(message),
            WriteError::Store(store) => KeyError::Store(store),
        }
    }
}

/// How long a key unknown here, or any key on a replica that has not caught up since it (re)started, may
/// wait for this replica to catch up with the leader.
const CATCH_UP_BUDGET: Duration = Duration::from_secs(1);

impl KeyService {
    /// The embedded mode: changes are written to the local main DB at once.
    pub async fn load(pool: SqlitePool) -> Result<KeyService, StoreError> {
        let writer = MainWriter::local(pool.clone());
        KeyService::load_with(pool, writer).await
    }

    /// Keys read from `pool` (this node's main DB), changed through `writer`.
    pub async fn load_with(pool: SqlitePool, writer: MainWriter) -> Result<KeyService, StoreError> {
        let service = KeyService {
            pool,
            by_hash: ArcSwap::from_pointee(HashMap::new()),
            loaded_version: AtomicU64::new(0),
            is_current: AtomicBool::new(writer.raft().is_none()),
            usage: DashMap::new(),
            writer,
        };
        service.refresh().await?;
        Ok(service)
    }

    async fn refresh(&self) -> Result<(), StoreError> {
        let version = self.changes_applied();
        let keys = key_store::list_keys(&self.pool).await?;
        let map = keys
            .into_iter()
            .filter_map(|k| Some((stored_digest(&k.key_hash)?, Arc::new(k))))
            .collect();
        self.by_hash.store(Arc::new(map));
        self.loaded_version.store(version, Ordering::SeqCst);
        Ok(())
    }

    fn changes_applied(&self) -> u64 {
        self.writer
            .raft()
            .map(|raft| *raft.keys_changed().borrow())
            .unwrap_or(0)
    }

    /// With raft: reloads the cache each time the state machine applies a key change (from any node).
    pub async fn follow_changes(self: Arc<Self>, shutdown: CancellationToken) {
        let Some(mut changes) = self.writer.raft().map(|raft| raft.keys_changed()) else {
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
            }
            if let Err(err) = self.refresh().await {
                tracing::warn!(error = %err, "key cache not reloaded");
            }
        }
    }

    /// Whether key checks may be answered from the cache; with raft, waits up to `budget` for a (re)started
    /// replica to catch up, then reloads the cache if a change was applied since it was loaded. Once true it
    /// stays true, so the request path pays one atomic load. Readiness asks with no budget.
    pub async fn settle(&self, budget: Duration) -> bool {
        if self.is_current.load(Ordering::Acquire) {
            return true;
        }
        let Some(raft) = self.writer.raft() else {
            return true;
        };
        if !raft.wait_caught_up(budget).await {
            return false;
        }
        if self.changes_applied() != self.loaded_version.load(Ordering::SeqCst)
            && let Err(err) = self.refresh().await
        {
            tracing::warn!(error = %err, "key cache not reloaded after the catch-up");
            return false;
        }
        self.is_current.store(true, Ordering::Release);
        true
    }

    /// Readiness: key checks are answered from a current cache, or (raft) this replica found no leader to
    /// catch up from, in which case it says ready so an ordered start of the voters can go on, and checks
    /// answer 503 ([`KeyRefusal::CatchingUp`]) until it caught up.
    pub async fn is_ready(&self) -> bool {
        self.settle(Duration::ZERO).await
            || self.writer.raft().is_some_and(|raft| raft.is_leaderless())
    }

    /// Checks a presented key; counts the use in memory.
    pub fn verify(
        &self,
        plaintext: &str,
        client: Option<IpAddr>,
    ) -> Result<Arc<ApiKey>, KeyRefusal> {
        let key = self.admit(plaintext, client)?;
        let now = now_ms();
        // The id is cloned only for a key's first use since the last flush.
        match self.usage.get_mut(&key.id) {
            Some(mut entry) => *entry = (entry.0 + 1, now),
            None => {
                let mut entry = self.usage.entry(key.id.clone()).or_insert((0, now));
                *entry = (entry.0 + 1, now);
            }
        }
        Ok(key)
    }

    /// Checks a presented key without counting a use.
    fn admit(&self, plaintext: &str, client: Option<IpAddr>) -> Result<Arc<ApiKey>, KeyRefusal> {
        let key = self
            .by_hash
            .load()
            .get(&digest_key(plaintext))
            .cloned()
            .ok_or(KeyRefusal::Invalid)?;
        let now = now_ms();
        if !key.is_active {
            return Err(KeyRefusal::Revoked);
        }
        if key.expires_at.is_some_and(|at| at <= now) {
            return Err(KeyRefusal::Expired);
        }
        if !address_allowed(&key, client) {
            return Err(KeyRefusal::AddressNotAllowed);
        }
        Ok(key)
    }

    /// [`verify`](Self::verify), except that with raft nothing is answered before a (re)started replica
    /// caught up with the cluster (bounded wait, then [`KeyRefusal::CatchingUp`]), and a key unknown here is
    /// looked for again after this replica caught up with the leader (it may have been created through
    /// another node a moment ago). Once caught up, known keys never wait.
    pub async fn verify_fresh(
        &self,
        plaintext: &str,
        client: Option<IpAddr>,
    ) -> Result<Arc<ApiKey>, KeyRefusal> {
        self.fresh(plaintext, client, Self::verify).await
    }

    /// [`verify_fresh`](Self::verify_fresh) without counting a use: a node that forwards a request checks
    /// the key too (a revocation through it holds at once, whatever the owner's replica applied yet), and
    /// the owner, which serves it, counts it.
    pub async fn admit_fresh(
        &self,
        plaintext: &str,
        client: Option<IpAddr>,
    ) -> Result<Arc<ApiKey>, KeyRefusal> {
        self.fresh(plaintext, client, Self::admit).await
    }

    async fn fresh(
        &self,
        plaintext: &str,
        client: Option<IpAddr>,
        check: KeyCheck,
    ) -> Result<Arc<ApiKey>, KeyRefusal> {
        let arrived = Instant::now();
        if !self.settle(CATCH_UP_BUDGET).await {
            return Err(KeyRefusal::CatchingUp);
        }
        match check(self, plaintext, client) {
            Err(KeyRefusal::Invalid) => {
                let Some(raft) = self.writer.raft() else {
                    return Err(KeyRefusal::Invalid);
                };
                raft.catch_up(arrived, CATCH_UP_BUDGET).await;
                if self.changes_applied() != self.loaded_version.load(Ordering::SeqCst)
                    && let Err(err) = self.refresh().await
                {
                    tracing::warn!(error = %err, "key cache not reloaded");
                }
                check(self, plaintext, client)
            }
            other => other,
        }
    }

    /// The current record of a key by id, from the cache (used to re-validate live sockets).
    pub fn current(&self, id: &str) -> Option<Arc<ApiKey>> {
        self.by_hash.load().values().find(|k| k.id == id).cloned()
    }

    pub async fn list(&self) -> Result<Vec<ApiKey>, KeyError> {
        let keys = key_store::list_keys(&self.pool).await?;
        Ok(keys
            .into_iter()
            .map(|k| self.with_pending_usage(k))
            .collect())
    }

    pub async fn get(&self, id: &str) -> Result<ApiKey, KeyError> {
        let key = key_store::get_key(&self.pool, id)
            .await
            .map_err(not_found)?;
        Ok(self.with_pending_usage(key))
    }

    /// The stored record plus the uses this node counted since its last flush, so a key read right after it
    /// was used shows that use (`lastUsedAt`, `usageCount`) without a write per request.
    fn with_pending_usage(&self, mut key: ApiKey) -> ApiKey {
        if let Some(pending) = self.usage.get(&key.id) {
            let (count, last_used_at) = *pending;
            key.usage_count = key.usage_count.saturating_add(count);
            key.last_used_at = Some(
                key.last_used_at
                    .map_or(last_used_at, |at| at.max(last_used_at)),
            );
        }
        key
    }

    /// Writes `command`, reloads the cache when keys changed, and turns a refusal into its error.
    async fn change(&self, command: MainCommand) -> Result<MainOutcome, KeyError> {
        let touches_keys = command.touches_keys();
        let outcome = self.writer.write(command).await?;
        if touches_keys {
            self.refresh().await?;
        }
        match outcome {
            MainOutcome::Refused { refusal } => Err(refusal.into()),
            outcome => Ok(outcome),
        }
    }

    async fn change_key(&self, command: MainCommand) -> Result<ApiKey, KeyError> {
        match self.change(command).await? {
            MainOutcome::Key { key } => Ok(key),
            other => Err(KeyError::Store(StoreError::Corrupt(format!(
                "unexpected outcome of a key change: {other:?}"
            )))),
        }
    }

    /// Issues a key; returns the record and the plaintext, which is never shown again.
    pub async fn create(&self, new: NewKey) -> Result<(ApiKey, String), KeyError> {
        let plaintext = generate_plaintext();
        let key = new.into_key(&plaintext)?;
        let key = self.change_key(MainCommand::CreateKey { key }).await?;
        Ok((key, plaintext))
    }

    /// Applies `change`, asked for from `caller` (the client address). The last-admin rule is checked where
    /// the change is applied, against the keys as they are then (on every replica alike): an admin key usable
    /// from `caller` must remain, so nobody locks themselves out through the API.
    pub async fn update(
        &self,
        id: &str,
        change: KeyChange,
        caller: Option<IpAddr>,
    ) -> Result<ApiKey, KeyError> {
        let now = now_ms();
        change.check_at(now)?;
        self.change_key(MainCommand::UpdateKey {
            id: id.to_string(),
            change: change.into(),
            now,
            caller,
        })
        .await
    }

    /// Revokes a key. A key already revoked is answered as it is, with no write (its `updatedAt` stays
    /// that of the first revoke) and `is_new: false`, so the caller records no second audit row. A key this
    /// replica does not know (yet) goes to the write, which decides (404 or revoked).
    pub async fn revoke(&self, id: &str, caller: Option<IpAddr>) -> Result<Revocation, KeyError> {
        match self.get(id).await {
            Ok(key) if !key.is_active => return Ok(Revocation { key, is_new: false }),
            Ok(_) | Err(KeyError::NotFound) => {}
            Err(err) => return Err(err),
        }
        let change = KeyChange {
            is_active: Some(false),
            ..KeyChange::default()
        };
        let key = self.update(id, change, caller).await?;
        Ok(Revocation { key, is_new: true })
    }

    pub async fn delete(&self, id: &str, caller: Option<IpAddr>) -> Result<ApiKey, KeyError> {
        self.change_key(MainCommand::DeleteKey {
            id: id.to_string(),
            now: now_ms(),
            caller,
        })
        .await
    }

    /// Boot: makes `API_MASTER_KEY` an admin key, or on first boot generates one. Returns a generated
    /// plaintext so the caller can print it once and write it to `DATA_DIR/.api-key`. With raft both are
    /// applied once for the whole cluster: the first node's generated key is every node's admin key.
    ///
    /// The recovery path for a locked-out operator: whatever was changed on the master key's record
    /// (revoked, demoted, restricted to sessions or addresses, expired), a boot with `API_MASTER_KEY` set
    /// restores it to an active, unrestricted admin key (`MainCommand::EnsureKey`).
    pub async fn ensure_master(&self, master: Option<&str>) -> Result<Option<String>, KeyError> {
        let keys = self.by_hash.load_full();
        if let Some(master) = master {
            let current = keys.get(&digest_key(master));
            if !current.is_some_and(|record| rules::is_unrestricted_admin(record, now_ms())) {
                let key = NewKey::master().into_key(master)?;
                self.change(MainCommand::EnsureKey { key }).await?;
            }
            return Ok(None);
        }
        if keys.values().any(|k| k.role == Role::Admin) {
            return Ok(None);
        }
        let plaintext = generate_plaintext();
        let key = NewKey::master().into_key(&plaintext)?;
        match self.change(MainCommand::EnsureAdmin { key }).await? {
            MainOutcome::Ensured { is_added: true } => Ok(Some(plaintext)),
            _ => Ok(None),
        }
    }

    /// Writes the usage counted since the last flush, in one command. Called periodically and at shutdown.
    /// The counts stay in memory (so key reads include them) until written, and only what was written is
    /// taken off; counts that could not be written stay for the next flush.
    pub async fn flush_usage(&self) {
        let pending: Vec<(String, (i64, i64))> = self
            .usage
            .iter()
            .map(|e| (e.key().clone(), *e.value()))
            .collect();
        if pending.is_empty() {
            return;
        }
        let usage = pending
            .iter()
            .map(|(id, (count, last_used_at))| UsageDelta {
                id: id.clone(),
                count: *count,
                last_used_at: *last_used_at,
            })
            .collect();
        if let Err(err) = self.writer.write(MainCommand::AddUsage { usage }).await {
            return tracing::warn!(error = %err, "could not record key usage; kept for the next flush");
        }
        for (id, (written, _)) in pending {
            // Uses counted while the write ran stay for the next flush.
            self.usage.remove_if_mut(&id, |_, entry| {
                entry.0 -= written;
                entry.0 <= 0
            });
        }
    }
}

fn not_found(err: StoreError) -> KeyError {
    match err {
        StoreError::NotFound => KeyError::NotFound,
        other => KeyError::Store(other),
    }
}

/// Whether the key's `allowedIps` (none = any address) admit `client`.
pub(crate) fn address_allowed(key: &ApiKey, client: Option<IpAddr>) -> bool {
    key.allowed_ips
        .as_deref()
        .is_none_or(|allowed| rules::ip_allowed(allowed, client))
}

#[cfg(test)]
mod tests;
