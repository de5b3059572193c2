//! `SignalStore` over the socket tables: identities, Signal sessions, one-time and signed pre-keys,
//! sender keys. The hot path (session/identity/sender-key get and put) is one statement each; batches
//! run in one transaction.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use wagate_db::DataPool;
use whatsapp_rust::bytes::Bytes;
use whatsapp_rust::wacore::store::error::Result;
use whatsapp_rust::wacore::store::traits::SignalStore;

use super::{SqlBackend, id_from_db, id_to_db, in_tx, on_db};

const PUT_IDENTITY: &str = "INSERT INTO socket_identities (session_id, address, identity_key) VALUES ($1, $2, $3) \
     ON CONFLICT (session_id, address) DO UPDATE SET identity_key = excluded.identity_key";
const LOAD_IDENTITY: &str =
    "SELECT identity_key FROM socket_identities WHERE session_id = $1 AND address = $2";
const DELETE_IDENTITY: &str =
    "DELETE FROM socket_identities WHERE session_id = $1 AND address = $2";

const GET_SESSION: &str =
    "SELECT record FROM socket_signal_sessions WHERE session_id = $1 AND address = $2";
const PUT_SESSION: &str = "INSERT INTO socket_signal_sessions (session_id, address, record) VALUES ($1, $2, $3) \
     ON CONFLICT (session_id, address) DO UPDATE SET record = excluded.record";
const DELETE_SESSION: &str =
    "DELETE FROM socket_signal_sessions WHERE session_id = $1 AND address = $2";
const HAS_SESSION: &str =
    "SELECT EXISTS (SELECT 1 FROM socket_signal_sessions WHERE session_id = $1 AND address = $2)";
/// `user@server` (device 0) or `user:device@server`: the address starts with the user and `@` or `:`.
const HAS_STATE_FOR_USER: &str = "SELECT EXISTS (SELECT 1 FROM socket_signal_sessions \
       WHERE session_id = $1 AND substr(address, 1, length($2) + 1) IN ($2 || '@', $2 || ':')) \
     OR EXISTS (SELECT 1 FROM socket_identities \
       WHERE session_id = $1 AND substr(address, 1, length($2) + 1) IN ($2 || '@', $2 || ':'))";

const STORE_PREKEY: &str = "INSERT INTO socket_prekeys (session_id, prekey_id, record, uploaded) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (session_id, prekey_id) DO UPDATE SET record = excluded.record, uploaded = excluded.uploaded";
const LOAD_PREKEY: &str =
    "SELECT record FROM socket_prekeys WHERE session_id = $1 AND prekey_id = $2";
const LOAD_PREKEYS_PG: &str =
    "SELECT prekey_id, record FROM socket_prekeys WHERE session_id = $1 AND prekey_id = ANY($2)";
/// UPDATE on purpose: a key consumed between the upload snapshot and this call stays deleted.
const MARK_PREKEY_UPLOADED: &str =
    "UPDATE socket_prekeys SET uploaded = TRUE WHERE session_id = $1 AND prekey_id = $2";
const REMOVE_PREKEY: &str = "DELETE FROM socket_prekeys WHERE session_id = $1 AND prekey_id = $2";
const MAX_PREKEY_ID: &str =
    "SELECT COALESCE(MAX(prekey_id), 0) FROM socket_prekeys WHERE session_id = $1";

const STORE_SIGNED_PREKEY: &str = "INSERT INTO socket_signed_prekeys (session_id, prekey_id, record) VALUES ($1, $2, $3) \
     ON CONFLICT (session_id, prekey_id) DO UPDATE SET record = excluded.record";
const LOAD_SIGNED_PREKEY: &str =
    "SELECT record FROM socket_signed_prekeys WHERE session_id = $1 AND prekey_id = $2";
const LOAD_ALL_SIGNED_PREKEYS: &str =
    "SELECT prekey_id, record FROM socket_signed_prekeys WHERE session_id = $1 ORDER BY prekey_id";
const REMOVE_SIGNED_PREKEY: &str =
    "DELETE FROM socket_signed_prekeys WHERE session_id = $1 AND prekey_id = $2";

const PUT_SENDER_KEY: &str = "INSERT INTO socket_sender_keys (session_id, address, record) VALUES ($1, $2, $3) \
     ON CONFLICT (session_id, address) DO UPDATE SET record = excluded.record";
const GET_SENDER_KEY: &str =
    "SELECT record FROM socket_sender_keys WHERE session_id = $1 AND address = $2";
const DELETE_SENDER_KEY: &str =
    "DELETE FROM socket_sender_keys WHERE session_id = $1 AND address = $2";

#[async_trait]
impl SignalStore for SqlBackend {
    async fn put_identity(&self, address: &str, key: [u8; 32]) -> Result<()> {
        on_db!(self, "put_identity", |p| sqlx::query(PUT_IDENTITY)
            .bind(&*self.session_id)
            .bind(address)
            .bind(key.as_slice())
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn put_identities_batch(&self, identities: &[(Arc<str>, [u8; 32])]) -> Result<()> {
        if identities.is_empty() {
            return Ok(());
        }
        in_tx!(self, "put_identities_batch", |tx| {
            for (address, key) in identities {
                sqlx::query(PUT_IDENTITY)
                    .bind(&*self.session_id)
                    .bind(&**address)
                    .bind(key.as_slice())
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn load_identity(&self, address: &str) -> Result<Option<[u8; 32]>> {
        let row: Option<Vec<u8>> =
            on_db!(self, "load_identity", |p| sqlx::query_scalar(LOAD_IDENTITY)
                .bind(&*self.session_id)
                .bind(address)
                .fetch_optional(p)
                .await)?;
        row.map(|bytes| {
            <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
                self.corrupt(
                    "load_identity",
                    format!("identity key of {} bytes", bytes.len()),
                )
            })
        })
        .transpose()
    }

    async fn delete_identity(&self, address: &str) -> Result<()> {
        on_db!(self, "delete_identity", |p| sqlx::query(DELETE_IDENTITY)
            .bind(&*self.session_id)
            .bind(address)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn get_session(&self, address: &str) -> Result<Option<Bytes>> {
        let row: Option<Vec<u8>> =
            on_db!(self, "get_session", |p| sqlx::query_scalar(GET_SESSION)
                .bind(&*self.session_id)
                .bind(address)
                .fetch_optional(p)
                .await)?;
        Ok(row.map(Bytes::from))
    }

    async fn put_session(&self, address: &str, session: &[u8]) -> Result<()> {
        on_db!(self, "put_session", |p| sqlx::query(PUT_SESSION)
            .bind(&*self.session_id)
            .bind(address)
            .bind(session)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn put_sessions_batch(&self, sessions: &[(Arc<str>, Bytes)]) -> Result<()> {
        if sessions.is_empty() {
            return Ok(());
        }
        in_tx!(self, "put_sessions_batch", |tx| {
            for (address, record) in sessions {
                sqlx::query(PUT_SESSION)
                    .bind(&*self.session_id)
                    .bind(&**address)
                    .bind(record.as_ref())
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn delete_session(&self, address: &str) -> Result<()> {
        on_db!(self, "delete_session", |p| sqlx::query(DELETE_SESSION)
            .bind(&*self.session_id)
            .bind(address)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn has_session(&self, address: &str) -> Result<bool> {
        on_db!(self, "has_session", |p| sqlx::query_scalar(HAS_SESSION)
            .bind(&*self.session_id)
            .bind(address)
            .fetch_one(p)
            .await)
    }

    async fn has_signal_state_for_user(&self, user: &str) -> Result<bool> {
        on_db!(self, "has_signal_state_for_user", |p| sqlx::query_scalar(
            HAS_STATE_FOR_USER
        )
        .bind(&*self.session_id)
        .bind(user)
        .fetch_one(p)
        .await)
    }

    async fn store_prekey(&self, id: u32, record: &[u8], uploaded: bool) -> Result<()> {
        on_db!(self, "store_prekey", |p| sqlx::query(STORE_PREKEY)
            .bind(&*self.session_id)
            .bind(id_to_db(id))
            .bind(record)
            .bind(uploaded)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn store_prekeys_batch(&self, keys: &[(u32, Bytes)], uploaded: bool) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        in_tx!(self, "store_prekeys_batch", |tx| {
            for (id, record) in keys {
                sqlx::query(STORE_PREKEY)
                    .bind(&*self.session_id)
                    .bind(id_to_db(*id))
                    .bind(record.as_ref())
                    .bind(uploaded)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn load_prekey(&self, id: u32) -> Result<Option<Bytes>> {
        let row: Option<Vec<u8>> =
            on_db!(self, "load_prekey", |p| sqlx::query_scalar(LOAD_PREKEY)
                .bind(&*self.session_id)
                .bind(id_to_db(id))
                .fetch_optional(p)
                .await)?;
        Ok(row.map(Bytes::from))
    }

    /// Results in the order of `ids`, missing ones skipped (duplicates repeat, as in the reference).
    /// PostgreSQL answers the whole set in one round trip; SQLite (in-process) looks each id up on one
    /// connection, without taking the write lock a transaction would.
    async fn load_prekeys_batch(&self, ids: &[u32]) -> Result<Vec<(u32, Bytes)>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found: HashMap<u32, Bytes> = HashMap::with_capacity(ids.len());
        match &self.pool {
            DataPool::Postgres(p) => {
                let wanted: Vec<i64> = ids.iter().map(|id| id_to_db(*id)).collect();
                let rows: Vec<(i64, Vec<u8>)> = sqlx::query_as(LOAD_PREKEYS_PG)
                    .bind(&*self.session_id)
                    .bind(wanted)
                    .fetch_all(p)
                    .await
                    .map_err(|e| self.db_err("load_prekeys_batch", e))?;
                for (id, record) in rows {
                    found.insert(
                        id_from_db(self, "load_prekeys_batch", id)?,
                        Bytes::from(record),
                    );
                }
            }
            DataPool::Sqlite(p) => {
                let mut conn = p
                    .acquire()
                    .await
                    .map_err(|e| self.db_err("load_prekeys_batch", e))?;
                for &id in ids {
                    if found.contains_key(&id) {
                        continue;
                    }
                    let row: Option<Vec<u8>> = sqlx::query_scalar(LOAD_PREKEY)
                        .bind(&*self.session_id)
                        .bind(id_to_db(id))
                        .fetch_optional(&mut *conn)
                        .await
                        .map_err(|e| self.db_err("load_prekeys_batch", e))?;
                    if let Some(record) = row {
                        found.insert(id, Bytes::from(record));
                    }
                }
            }
        }
        Ok(ids
            .iter()
            .filter_map(|id| found.get(id).map(|record| (*id, record.clone())))
            .collect())
    }

    async fn mark_prekeys_uploaded(&self, ids: &[u32]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        in_tx!(self, "mark_prekeys_uploaded", |tx| {
            for &id in ids {
                sqlx::query(MARK_PREKEY_UPLOADED)
                    .bind(&*self.session_id)
                    .bind(id_to_db(id))
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn remove_prekey(&self, id: u32) -> Result<()> {
        on_db!(self, "remove_prekey", |p| sqlx::query(REMOVE_PREKEY)
            .bind(&*self.session_id)
            .bind(id_to_db(id))
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn get_max_prekey_id(&self) -> Result<u32> {
        let max: i64 = on_db!(self, "get_max_prekey_id", |p| sqlx::query_scalar(
            MAX_PREKEY_ID
        )
        .bind(&*self.session_id)
        .fetch_one(p)
        .await)?;
        id_from_db(self, "get_max_prekey_id", max)
    }

    async fn store_signed_prekey(&self, id: u32, record: &[u8]) -> Result<()> {
        on_db!(self, "store_signed_prekey", |p| sqlx::query(
            STORE_SIGNED_PREKEY
        )
        .bind(&*self.session_id)
        .bind(id_to_db(id))
        .bind(record)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn load_signed_prekey(&self, id: u32) -> Result<Option<Vec<u8>>> {
        on_db!(self, "load_signed_prekey", |p| sqlx::query_scalar(
            LOAD_SIGNED_PREKEY
        )
        .bind(&*self.session_id)
        .bind(id_to_db(id))
        .fetch_optional(p)
        .await)
    }

    /// Ordered by id (the in-memory reference returns map order, which the trait leaves open).
    async fn load_all_signed_prekeys(&self) -> Result<Vec<(u32, Vec<u8>)>> {
        let rows: Vec<(i64, Vec<u8>)> = on_db!(self, "load_all_signed_prekeys", |p| {
            sqlx::query_as(LOAD_ALL_SIGNED_PREKEYS)
                .bind(&*self.session_id)
                .fetch_all(p)
                .await
        })?;
        rows.into_iter()
            .map(|(id, record)| Ok((id_from_db(self, "load_all_signed_prekeys", id)?, record)))
            .collect()
    }

    async fn remove_signed_prekey(&self, id: u32) -> Result<()> {
        on_db!(self, "remove_signed_prekey", |p| sqlx::query(
            REMOVE_SIGNED_PREKEY
        )
        .bind(&*self.session_id)
        .bind(id_to_db(id))
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn put_sender_key(&self, address: &str, record: &[u8]) -> Result<()> {
        on_db!(self, "put_sender_key", |p| sqlx::query(PUT_SENDER_KEY)
            .bind(&*self.session_id)
            .bind(address)
            .bind(record)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn put_sender_keys_batch(&self, sender_keys: &[(Arc<str>, Bytes)]) -> Result<()> {
        if sender_keys.is_empty() {
            return Ok(());
        }
        in_tx!(self, "put_sender_keys_batch", |tx| {
            for (address, record) in sender_keys {
                sqlx::query(PUT_SENDER_KEY)
                    .bind(&*self.session_id)
                    .bind(&**address)
                    .bind(record.as_ref())
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn get_sender_key(&self, address: &str) -> Result<Option<Vec<u8>>> {
        on_db!(self, "get_sender_key", |p| sqlx::query_scalar(
            GET_SENDER_KEY
        )
        .bind(&*self.session_id)
        .bind(address)
        .fetch_optional(p)
        .await)
    }

    async fn delete_sender_key(&self, address: &str) -> Result<()> {
        on_db!(self, "delete_sender_key", |p| sqlx::query(
            DELETE_SENDER_KEY
        )
        .bind(&*self.session_id)
        .bind(address)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }
}
