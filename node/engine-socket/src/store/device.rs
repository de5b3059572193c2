//! `DeviceStore` over `socket_device`: the session's one device record (noise and identity keys,
//! registration, the paired account), stored as the library's own serde form in JSON. JSON because the
//! struct grows fields release to release with `#[serde(default)]`, which only a self-describing format
//! reads back; the record is small and written only when the device changes.

use std::sync::Arc;

use async_trait::async_trait;
use whatsapp_rust::wacore::client_profile::ClientProfile;
use whatsapp_rust::wacore::stats::StorageResourceReport;
use whatsapp_rust::wacore::store::Device;
use whatsapp_rust::wacore::store::device::DEVICE_PROPS;
use whatsapp_rust::wacore::store::error::{Result, StoreError};
use whatsapp_rust::wacore::store::traits::DeviceStore;

use super::{SqlBackend, in_tx, on_db};

const SAVE_DEVICE: &str = "INSERT INTO socket_device (session_id, device, linked, updated_at) VALUES ($1, $2, $3, $4) \
     ON CONFLICT (session_id) DO UPDATE SET device = excluded.device, linked = excluded.linked, \
     updated_at = excluded.updated_at";
const LOAD_DEVICE: &str = "SELECT device FROM socket_device WHERE session_id = $1";
const DEVICE_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM socket_device WHERE session_id = $1)";
/// `create` materialises a fresh device only when none is stored (never overwrites keys).
const CREATE_DEVICE: &str = "INSERT INTO socket_device (session_id, device, linked, updated_at) VALUES ($1, $2, FALSE, $3) \
     ON CONFLICT (session_id) DO NOTHING";
const COUNT_CREATE: &str = "INSERT INTO socket_meta (session_id, device_creates) VALUES ($1, 1) \
     ON CONFLICT (session_id) DO UPDATE SET device_creates = socket_meta.device_creates + 1 \
     RETURNING device_creates";

impl SqlBackend {
    fn encode_device(&self, op: &'static str, device: &Device) -> Result<String> {
        serde_json::to_string(device).map_err(|e| {
            StoreError::Serialization(Box::new(SerdeContext {
                what: format!("socket store {op} (session {})", self.session_id),
                source: e,
            }))
        })
    }
}

/// A device record that did not (de)serialise, with the operation and session.
#[derive(Debug, thiserror::Error)]
#[error("{what}: device JSON: {source}")]
struct SerdeContext {
    what: String,
    #[source]
    source: serde_json::Error,
}

#[async_trait]
impl DeviceStore for SqlBackend {
    async fn save(&self, device: &Device) -> Result<()> {
        let json = self.encode_device("save", device)?;
        on_db!(self, "save", |p| sqlx::query(SAVE_DEVICE)
            .bind(&*self.session_id)
            .bind(&json)
            .bind(device.pn.is_some())
            .bind(wagate_db::now_ms())
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// The runtime-only fields the serde form skips come back as the library's defaults, as its own
    /// SQLite store does: `device_props` (re-applied before every pairing) and the client profile.
    async fn load(&self) -> Result<Option<Device>> {
        let json: Option<String> = on_db!(self, "load", |p| sqlx::query_scalar(LOAD_DEVICE)
            .bind(&*self.session_id)
            .fetch_optional(p)
            .await)?;
        let Some(json) = json else {
            return Ok(None);
        };
        let mut device: Device = serde_json::from_str(&json).map_err(|e| {
            StoreError::Serialization(Box::new(SerdeContext {
                what: format!("socket store load (session {})", self.session_id),
                source: e,
            }))
        })?;
        device.device_props = Arc::new(DEVICE_PROPS.clone());
        device.client_profile = ClientProfile::web();
        Ok(Some(device))
    }

    async fn exists(&self) -> Result<bool> {
        on_db!(self, "exists", |p| sqlx::query_scalar(DEVICE_EXISTS)
            .bind(&*self.session_id)
            .fetch_one(p)
            .await)
    }

    /// Stores a fresh device when none exists and returns the session's running count of `create`
    /// calls (1, 2, ...): the library only logs this id; one session has exactly one device row.
    async fn create(&self) -> Result<i32> {
        let fresh = self.encode_device("create", &Device::new())?;
        let now = wagate_db::now_ms();
        let creates: i64 = in_tx!(self, "create", |tx| {
            sqlx::query(CREATE_DEVICE)
                .bind(&*self.session_id)
                .bind(&fresh)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            sqlx::query_scalar(COUNT_CREATE)
                .bind(&*self.session_id)
                .fetch_one(&mut *tx)
                .await
        })?;
        i32::try_from(creates).map_err(|_| self.corrupt("create", format!("device id {creates}")))
    }

    /// Debug snapshots (the library's `debug-snapshots` feature, off in our build) copy a local SQLite
    /// file; this state lives in the shared data DB and every write is already committed, so there is
    /// nothing to snapshot or flush.
    async fn snapshot_db(&self, name: &str, _extra_content: Option<&[u8]>) -> Result<()> {
        tracing::debug!(session_id = %self.session_id, snapshot = name, "socket store: snapshot not taken, state is already durable in the data DB");
        Ok(())
    }

    /// No per-session memory: rows live in the data DB, this handle holds a pool clone and an id.
    async fn resource_report(&self) -> StorageResourceReport {
        StorageResourceReport {
            memory_bytes: Some(0),
            ..StorageResourceReport::default()
        }
    }
}
