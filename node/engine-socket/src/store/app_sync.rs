//! `AppSyncStore` over the socket tables: app-state sync keys (and which one was written last),
//! collection versions (ltHash state) and mutation MACs.

use std::collections::HashMap;

use async_trait::async_trait;
use whatsapp_rust::wacore::appstate::hash::HashState;
use whatsapp_rust::wacore::appstate::processor::AppStateMutationMAC;
use whatsapp_rust::wacore::store::error::Result;
use whatsapp_rust::wacore::store::traits::{AppStateSyncKey, AppSyncStore};

use super::codec::{decode_index_values, encode_index_values};
use super::{SqlBackend, in_tx, on_db};

const GET_SYNC_KEY: &str = "SELECT key_data, fingerprint, key_timestamp FROM socket_sync_keys \
     WHERE session_id = $1 AND key_id = $2";
const SET_SYNC_KEY: &str = "INSERT INTO socket_sync_keys (session_id, key_id, key_data, fingerprint, key_timestamp) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, key_id) DO UPDATE SET \
     key_data = excluded.key_data, fingerprint = excluded.fingerprint, key_timestamp = excluded.key_timestamp";
/// The latest key is the last one written (not the newest timestamp), as in the reference backend.
const SET_LATEST_SYNC_KEY: &str = "INSERT INTO socket_meta (session_id, latest_sync_key_id) VALUES ($1, $2) \
     ON CONFLICT (session_id) DO UPDATE SET latest_sync_key_id = excluded.latest_sync_key_id";
const GET_LATEST_SYNC_KEY: &str =
    "SELECT latest_sync_key_id FROM socket_meta WHERE session_id = $1";

const GET_VERSION: &str = "SELECT version, hash, index_values, mac_mismatch_fatal FROM socket_app_state_versions \
     WHERE session_id = $1 AND collection = $2";
const SET_VERSION: &str = "INSERT INTO socket_app_state_versions \
     (session_id, collection, version, hash, index_values, mac_mismatch_fatal) VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (session_id, collection) DO UPDATE SET version = excluded.version, hash = excluded.hash, \
     index_values = excluded.index_values, mac_mismatch_fatal = excluded.mac_mismatch_fatal";

const PUT_MUTATION_MAC: &str = "INSERT INTO socket_mutation_macs (session_id, collection, index_mac, value_mac) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, collection, index_mac) DO UPDATE SET value_mac = excluded.value_mac";
const GET_MUTATION_MAC: &str = "SELECT value_mac FROM socket_mutation_macs \
     WHERE session_id = $1 AND collection = $2 AND index_mac = $3";
/// PostgreSQL takes the whole set in one round trip; SQLite (in-process) runs [`GET_MUTATION_MAC`] per MAC.
const GET_MUTATION_MACS_PG: &str = "SELECT index_mac, value_mac FROM socket_mutation_macs \
     WHERE session_id = $1 AND collection = $2 AND index_mac = ANY($3)";
const DELETE_MUTATION_MAC: &str =
    "DELETE FROM socket_mutation_macs WHERE session_id = $1 AND collection = $2 AND index_mac = $3";
const CLEAR_MUTATION_MACS: &str =
    "DELETE FROM socket_mutation_macs WHERE session_id = $1 AND collection = $2";

type VersionRow = (i64, Vec<u8>, Vec<u8>, bool);

#[async_trait]
impl AppSyncStore for SqlBackend {
    async fn get_sync_key(&self, key_id: &[u8]) -> Result<Option<AppStateSyncKey>> {
        let row: Option<(Vec<u8>, Vec<u8>, i64)> = on_db!(self, "get_sync_key", |p| {
            sqlx::query_as(GET_SYNC_KEY)
                .bind(&*self.session_id)
                .bind(key_id)
                .fetch_optional(p)
                .await
        })?;
        Ok(
            row.map(|(key_data, fingerprint, timestamp)| AppStateSyncKey {
                key_data,
                fingerprint,
                timestamp,
            }),
        )
    }

    async fn set_sync_key(&self, key_id: &[u8], key: AppStateSyncKey) -> Result<()> {
        in_tx!(self, "set_sync_key", |tx| {
            sqlx::query(SET_SYNC_KEY)
                .bind(&*self.session_id)
                .bind(key_id)
                .bind(&key.key_data)
                .bind(&key.fingerprint)
                .bind(key.timestamp)
                .execute(&mut *tx)
                .await?;
            sqlx::query(SET_LATEST_SYNC_KEY)
                .bind(&*self.session_id)
                .bind(key_id)
                .execute(&mut *tx)
                .await?;
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn get_version(&self, name: &str) -> Result<HashState> {
        let row: Option<VersionRow> = on_db!(self, "get_version", |p| {
            sqlx::query_as(GET_VERSION)
                .bind(&*self.session_id)
                .bind(name)
                .fetch_optional(p)
                .await
        })?;
        let Some((version, hash, index_values, mac_mismatch_fatal)) = row else {
            return Ok(HashState::default());
        };
        let version = u64::try_from(version)
            .map_err(|_| self.corrupt("get_version", format!("negative version {version}")))?;
        let hash = <[u8; 128]>::try_from(hash.as_slice())
            .map_err(|_| self.corrupt("get_version", format!("ltHash of {} bytes", hash.len())))?;
        let index_value_map =
            decode_index_values(&index_values).map_err(|e| self.corrupt("get_version", e))?;
        Ok(HashState {
            version,
            hash,
            index_value_map,
            mac_mismatch_fatal,
        })
    }

    async fn set_version(&self, name: &str, state: HashState) -> Result<()> {
        let version = i64::try_from(state.version).map_err(|_| {
            self.corrupt(
                "set_version",
                format!("version {} exceeds BIGINT", state.version),
            )
        })?;
        let index_values = encode_index_values(&state.index_value_map)
            .map_err(|e| self.corrupt("set_version", e))?;
        on_db!(self, "set_version", |p| sqlx::query(SET_VERSION)
            .bind(&*self.session_id)
            .bind(name)
            .bind(version)
            .bind(state.hash.as_slice())
            .bind(&index_values)
            .bind(state.mac_mismatch_fatal)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn put_mutation_macs(
        &self,
        name: &str,
        _version: u64,
        mutations: &[AppStateMutationMAC],
    ) -> Result<()> {
        if mutations.is_empty() {
            return Ok(());
        }
        in_tx!(self, "put_mutation_macs", |tx| {
            for m in mutations {
                sqlx::query(PUT_MUTATION_MAC)
                    .bind(&*self.session_id)
                    .bind(name)
                    .bind(&m.index_mac)
                    .bind(&m.value_mac)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn get_mutation_mac(&self, name: &str, index_mac: &[u8]) -> Result<Option<Vec<u8>>> {
        on_db!(self, "get_mutation_mac", |p| sqlx::query_scalar(
            GET_MUTATION_MAC
        )
        .bind(&*self.session_id)
        .bind(name)
        .bind(index_mac)
        .fetch_optional(p)
        .await)
    }

    async fn get_mutation_macs(
        &self,
        name: &str,
        index_macs: &[[u8; 32]],
    ) -> Result<HashMap<[u8; 32], Vec<u8>>> {
        let mut out = HashMap::with_capacity(index_macs.len());
        if index_macs.is_empty() {
            return Ok(out);
        }
        match &self.pool {
            wagate_db::DataPool::Postgres(p) => {
                let wanted: Vec<Vec<u8>> = index_macs.iter().map(|m| m.to_vec()).collect();
                let rows: Vec<(Vec<u8>, Vec<u8>)> = sqlx::query_as(GET_MUTATION_MACS_PG)
                    .bind(&*self.session_id)
                    .bind(name)
                    .bind(wanted)
                    .fetch_all(p)
                    .await
                    .map_err(|e| self.db_err("get_mutation_macs", e))?;
                for (index_mac, value_mac) in rows {
                    if let Ok(key) = <[u8; 32]>::try_from(index_mac.as_slice()) {
                        out.insert(key, value_mac);
                    }
                }
            }
            wagate_db::DataPool::Sqlite(p) => {
                let mut conn = p
                    .acquire()
                    .await
                    .map_err(|e| self.db_err("get_mutation_macs", e))?;
                for index_mac in index_macs {
                    let value: Option<Vec<u8>> = sqlx::query_scalar(GET_MUTATION_MAC)
                        .bind(&*self.session_id)
                        .bind(name)
                        .bind(index_mac.as_slice())
                        .fetch_optional(&mut *conn)
                        .await
                        .map_err(|e| self.db_err("get_mutation_macs", e))?;
                    if let Some(value) = value {
                        out.insert(*index_mac, value);
                    }
                }
            }
        }
        Ok(out)
    }

    async fn delete_mutation_macs(&self, name: &str, index_macs: &[Vec<u8>]) -> Result<()> {
        if index_macs.is_empty() {
            return Ok(());
        }
        in_tx!(self, "delete_mutation_macs", |tx| {
            for index_mac in index_macs {
                sqlx::query(DELETE_MUTATION_MAC)
                    .bind(&*self.session_id)
                    .bind(name)
                    .bind(index_mac)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn clear_mutation_macs(&self, name: &str) -> Result<()> {
        on_db!(self, "clear_mutation_macs", |p| sqlx::query(
            CLEAR_MUTATION_MACS
        )
        .bind(&*self.session_id)
        .bind(name)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn get_latest_sync_key_id(&self) -> Result<Option<Vec<u8>>> {
        let row: Option<Option<Vec<u8>>> = on_db!(self, "get_latest_sync_key_id", |p| {
            sqlx::query_scalar(GET_LATEST_SYNC_KEY)
                .bind(&*self.session_id)
                .fetch_optional(p)
                .await
        })?;
        Ok(row.flatten())
    }
}
