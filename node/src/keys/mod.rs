//! API keys: issuing, checking and changing them. Checks are answered from an in-memory cache that every
//! change refreshes, so the request path never waits on the database; usage counters are flushed in batches.
//! Routes live in `http/keys.rs`; SQL in `store/keys.rs`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use dashmap::DashMap;
use rand::Rng;
use rand::distr::Alphanumeric;
use sha2::{Digest, Sha256};
use sqlx::SqlitePool;
use tokio::sync::Mutex;
use wagate_proto::Role;

use crate::store::keys::{self as key_store, ApiKey};
use crate::store::{StoreError, now_ms};

mod rules;

pub use rules::{KeyChange, NewKey};

/// Why a presented key is refused (always 401 to the caller).
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
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("API key not found")]
    NotFound,
    #[error("{0}")]
    Invalid(String),
    #[error("This change would leave no usable admin key")]
    LastAdmin,
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct KeyService {
    pool: SqlitePool,
    by_hash: ArcSwap<HashMap<String, Arc<ApiKey>>>,
    usage: DashMap<String, (i64, i64)>,
    /// Serialises changes so the "last usable admin key" rule cannot be raced.
    changes: Mutex<()>,
}

pub fn hash_key(plaintext: &str) -> String {
    hex::encode(Sha256::digest(plaintext.as_bytes()))
}

fn generate_plaintext() -> String {
    let body: String = rand::rng()
        .sample_iter(Alphanumeric)
        .take(40)
        .map(char::from)
        .collect();
    format!("wag_{body}")
}

impl KeyService {
    pub async fn load(pool: SqlitePool) -> Result<KeyService, StoreError> {
        let service = KeyService {
            pool,
            by_hash: ArcSwap::from_pointee(HashMap::new()),
            usage: DashMap::new(),
            changes: Mutex::new(()),
        };
        service.refresh().await?;
        Ok(service)
    }

    async fn refresh(&self) -> Result<(), StoreError> {
        let keys = key_store::list_keys(&self.pool).await?;
        let map = keys
            .into_iter()
            .map(|k| (k.key_hash.clone(), Arc::new(k)))
            .collect();
        self.by_hash.store(Arc::new(map));
        Ok(())
    }

    /// Checks a presented key; counts the use in memory.
    pub fn verify(
        &self,
        plaintext: &str,
        client: Option<IpAddr>,
    ) -> Result<Arc<ApiKey>, KeyRefusal> {
        let key = self
            .by_hash
            .load()
            .get(&hash_key(plaintext))
            .cloned()
            .ok_or(KeyRefusal::Invalid)?;
        let now = now_ms();
        if !key.is_active {
            return Err(KeyRefusal::Revoked);
        }
        if key.expires_at.is_some_and(|at| at <= now) {
            return Err(KeyRefusal::Expired);
        }
        if let Some(allowed) = &key.allowed_ips
            && !rules::ip_allowed(allowed, client)
        {
            return Err(KeyRefusal::AddressNotAllowed);
        }
        let mut entry = self.usage.entry(key.id.clone()).or_insert((0, now));
        entry.0 += 1;
        entry.1 = now;
        Ok(key)
    }

    /// The current record of a key by id, from the cache (used to re-validate live sockets).
    pub fn current(&self, id: &str) -> Option<Arc<ApiKey>> {
        self.by_hash.load().values().find(|k| k.id == id).cloned()
    }

    pub async fn list(&self) -> Result<Vec<ApiKey>, KeyError> {
        Ok(key_store::list_keys(&self.pool).await?)
    }

    pub async fn get(&self, id: &str) -> Result<ApiKey, KeyError> {
        key_store::get_key(&self.pool, id).await.map_err(not_found)
    }

    /// Issues a key; returns the record and the plaintext, which is never shown again.
    pub async fn create(&self, new: NewKey) -> Result<(ApiKey, String), KeyError> {
        let plaintext = generate_plaintext();
        let key = self.insert_with_plaintext(new, &plaintext).await?;
        Ok((key, plaintext))
    }

    async fn insert_with_plaintext(
        &self,
        new: NewKey,
        plaintext: &str,
    ) -> Result<ApiKey, KeyError> {
        let key = new.into_key(plaintext)?;
        let _guard = self.changes.lock().await;
        key_store::insert_key(&self.pool, &key).await?;
        self.refresh().await?;
        Ok(key)
    }

    pub async fn update(&self, id: &str, change: KeyChange) -> Result<ApiKey, KeyError> {
        let _guard = self.changes.lock().await;
        let mut key = key_store::get_key(&self.pool, id)
            .await
            .map_err(not_found)?;
        change.apply(&mut key)?;
        self.ensure_admin_remains(Some(&key), id).await?;
        key_store::update_key(&self.pool, &key).await?;
        self.refresh().await?;
        Ok(key)
    }

    pub async fn revoke(&self, id: &str) -> Result<ApiKey, KeyError> {
        self.update(
            id,
            KeyChange {
                is_active: Some(false),
                ..KeyChange::default()
            },
        )
        .await
    }

    pub async fn delete(&self, id: &str) -> Result<ApiKey, KeyError> {
        let _guard = self.changes.lock().await;
        let key = key_store::get_key(&self.pool, id)
            .await
            .map_err(not_found)?;
        self.ensure_admin_remains(None, id).await?;
        key_store::delete_key(&self.pool, id).await?;
        self.refresh().await?;
        Ok(key)
    }

    /// Refuses a change after which no active, unexpired, unscoped admin key would remain.
    async fn ensure_admin_remains(
        &self,
        changed: Option<&ApiKey>,
        id: &str,
    ) -> Result<(), KeyError> {
        let now = now_ms();
        let keys = key_store::list_keys(&self.pool).await?;
        let remains = keys
            .iter()
            .map(|k| if k.id == id { changed } else { Some(k) })
            .any(|k| k.is_some_and(|k| rules::is_usable_admin(k, now)));
        if remains {
            Ok(())
        } else {
            Err(KeyError::LastAdmin)
        }
    }

    /// Boot: makes `API_MASTER_KEY` an admin key, or on first boot generates one. Returns a generated
    /// plaintext so the caller can print it once and write it to `DATA_DIR/.api-key`.
    ///
    /// The recovery path for a locked-out operator: whatever was changed on the master key's record
    /// (revoked, demoted, restricted to sessions or addresses, expired), a boot with `API_MASTER_KEY` set
    /// restores it to an active, unrestricted admin key.
    pub async fn ensure_master(&self, master: Option<&str>) -> Result<Option<String>, KeyError> {
        let keys = self.by_hash.load_full();
        if let Some(master) = master {
            match keys.get(&hash_key(master)) {
                None => {
                    self.insert_with_plaintext(NewKey::master(), master).await?;
                }
                Some(record) if !rules::is_unrestricted_admin(record, now_ms()) => {
                    let mut restored = ApiKey::clone(record);
                    rules::restore_unrestricted_admin(&mut restored);
                    restored.updated_at = now_ms();
                    let _guard = self.changes.lock().await;
                    key_store::update_key(&self.pool, &restored).await?;
                    self.refresh().await?;
                    tracing::warn!(
                        key_id = %restored.id,
                        "API_MASTER_KEY was restricted, revoked or expired; restored it to an unrestricted admin key"
                    );
                }
                Some(_) => {}
            }
            return Ok(None);
        }
        if keys.values().any(|k| k.role == Role::Admin) {
            return Ok(None);
        }
        let (_, plaintext) = self.create(NewKey::master()).await?;
        Ok(Some(plaintext))
    }

    /// Writes the usage counted since the last flush. Called periodically and at shutdown.
    pub async fn flush_usage(&self) {
        let pending: Vec<(String, (i64, i64))> = self
            .usage
            .iter()
            .map(|e| (e.key().clone(), *e.value()))
            .collect();
        self.usage.clear();
        for (id, (count, last_used)) in pending {
            if let Err(err) = key_store::add_usage(&self.pool, &id, count, last_used).await {
                tracing::warn!(key_id = %id, error = %err, "could not record key usage");
            }
        }
    }
}

fn not_found(err: StoreError) -> KeyError {
    match err {
        StoreError::NotFound => KeyError::NotFound,
        other => KeyError::Store(other),
    }
}

#[cfg(test)]
mod tests;
