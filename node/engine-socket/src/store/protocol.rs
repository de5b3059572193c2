//! `ProtocolStore` over the socket tables: per-device sender-key tracking, LID<->phone mappings, base-key
//! collision records, device lists, group metadata blobs, trusted-contact tokens, sent-message payloads
//! for retries and the pending-inbound durability buffer.

use async_trait::async_trait;
use whatsapp_rust::wacore::store::error::Result;
use whatsapp_rust::wacore::store::traits::{
    DeviceInfo, DeviceListRecord, LidPnMappingEntry, PendingInboundKey, PendingInboundRow,
    ProtocolStore, TcTokenEntry,
};
use whatsapp_rust::wacore::time::now_secs;

use wagate_db::table_spec::{TableSpec, flag, int, int_or, text, text_or};

use super::{SqlBackend, in_tx, on_db};

/// `socket_lid_mappings` as the spec's data export shows it (`lidMappings`); rows of another source without
/// this engine's bookkeeping columns get their defaults on import.
pub const LID_MAPPINGS_EXPORT: TableSpec = TableSpec {
    key: "lidMappings",
    name: "socket_lid_mappings",
    columns: &[
        text("session_id"),
        text("lid"),
        text("phone_number"),
        int("created_at"),
        int_or("updated_at", "0"),
        text_or("learning_source", "\"import\""),
        flag("pn_current", "true"),
    ],
    order_by: "session_id, lid",
};

const GET_SENDER_KEY_DEVICES: &str = "SELECT device_jid, has_key FROM socket_sender_key_devices \
     WHERE session_id = $1 AND group_jid = $2 ORDER BY device_jid";
const SET_SENDER_KEY_STATUS: &str = "INSERT INTO socket_sender_key_devices (session_id, group_jid, device_jid, has_key) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, group_jid, device_jid) DO UPDATE SET has_key = excluded.has_key";
const CLEAR_SENDER_KEY_DEVICES: &str =
    "DELETE FROM socket_sender_key_devices WHERE session_id = $1 AND group_jid = $2";
const DELETE_SENDER_KEY_DEVICE_ROWS: &str =
    "DELETE FROM socket_sender_key_devices WHERE session_id = $1 AND device_jid = $2";
const CLEAR_ALL_SENDER_KEY_DEVICES: &str =
    "DELETE FROM socket_sender_key_devices WHERE session_id = $1";

const GET_LID_MAPPING: &str = "SELECT lid, phone_number, created_at, updated_at, learning_source \
     FROM socket_lid_mappings WHERE session_id = $1 AND lid = $2";
const GET_PN_MAPPING: &str = "SELECT lid, phone_number, created_at, updated_at, learning_source \
     FROM socket_lid_mappings WHERE session_id = $1 AND phone_number = $2 AND pn_current \
     ORDER BY updated_at DESC, lid LIMIT 1";
const GET_ALL_LID_MAPPINGS: &str = "SELECT lid, phone_number, created_at, updated_at, learning_source \
     FROM socket_lid_mappings WHERE session_id = $1 ORDER BY lid";
/// The phone -> LID direction resolves to the LID written last for that phone (`pn_current`; should two
/// concurrent writers both mark a row, the read above picks the newest deterministically). Before
/// the upsert: the phone's previous holder loses the mark, and so does the LID's old phone when the LID
/// moves to another number (that phone then resolves to nothing until written again), exactly as the
/// reference backend's reverse index behaves.
const RELEASE_PN_CURRENT: &str = "UPDATE socket_lid_mappings SET pn_current = FALSE \
     WHERE session_id = $1 AND pn_current AND (phone_number = $3 OR phone_number = \
     (SELECT phone_number FROM socket_lid_mappings WHERE session_id = $1 AND lid = $2 AND phone_number <> $3))";
const PUT_LID_MAPPING: &str = "INSERT INTO socket_lid_mappings \
     (session_id, lid, phone_number, created_at, updated_at, learning_source, pn_current) \
     VALUES ($1, $2, $3, $4, $5, $6, TRUE) ON CONFLICT (session_id, lid) DO UPDATE SET \
     phone_number = excluded.phone_number, created_at = excluded.created_at, updated_at = excluded.updated_at, \
     learning_source = excluded.learning_source, pn_current = TRUE";

const SAVE_BASE_KEY: &str = "INSERT INTO socket_base_keys (session_id, address, message_id, base_key) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (session_id, address, message_id) DO UPDATE SET base_key = excluded.base_key";
const GET_BASE_KEY: &str = "SELECT base_key FROM socket_base_keys \
     WHERE session_id = $1 AND address = $2 AND message_id = $3";
const DELETE_BASE_KEY: &str =
    "DELETE FROM socket_base_keys WHERE session_id = $1 AND address = $2 AND message_id = $3";

const UPDATE_DEVICE_LIST: &str = "INSERT INTO socket_device_lists \
     (session_id, user_id, devices, list_timestamp, phash, raw_id) VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (session_id, user_id) DO UPDATE SET devices = excluded.devices, \
     list_timestamp = excluded.list_timestamp, phash = excluded.phash, raw_id = excluded.raw_id";
const GET_DEVICES: &str = "SELECT user_id, devices, list_timestamp, phash, raw_id FROM socket_device_lists \
     WHERE session_id = $1 AND user_id = $2";
const DELETE_DEVICES: &str =
    "DELETE FROM socket_device_lists WHERE session_id = $1 AND user_id = $2";

const GET_GROUP_METADATA: &str =
    "SELECT metadata FROM socket_group_metadata WHERE session_id = $1 AND group_jid = $2";
const PUT_GROUP_METADATA: &str = "INSERT INTO socket_group_metadata (session_id, group_jid, metadata) VALUES ($1, $2, $3) \
     ON CONFLICT (session_id, group_jid) DO UPDATE SET metadata = excluded.metadata";
const DELETE_GROUP_METADATA: &str =
    "DELETE FROM socket_group_metadata WHERE session_id = $1 AND group_jid = $2";

const GET_TC_TOKEN: &str = "SELECT token, token_timestamp, sender_timestamp FROM socket_tc_tokens \
     WHERE session_id = $1 AND jid = $2";
const PUT_TC_TOKEN: &str = "INSERT INTO socket_tc_tokens (session_id, jid, token, token_timestamp, sender_timestamp) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, jid) DO UPDATE SET token = excluded.token, \
     token_timestamp = excluded.token_timestamp, sender_timestamp = excluded.sender_timestamp";
const DELETE_TC_TOKEN: &str = "DELETE FROM socket_tc_tokens WHERE session_id = $1 AND jid = $2";
const ALL_TC_TOKEN_JIDS: &str =
    "SELECT jid FROM socket_tc_tokens WHERE session_id = $1 ORDER BY jid";
/// A row goes only when neither the received token nor the sender bucket is live.
const DELETE_EXPIRED_TC_TOKENS: &str = "DELETE FROM socket_tc_tokens WHERE session_id = $1 AND NOT ( \
     (length(token) > 0 AND token_timestamp >= $2) OR (sender_timestamp IS NOT NULL AND sender_timestamp >= $3))";
/// Atomic max-merge of the sender bucket; a missing row becomes a byte-less placeholder.
const TOUCH_TC_SENDER: &str = "INSERT INTO socket_tc_tokens (session_id, jid, token, token_timestamp, sender_timestamp) \
     VALUES ($1, $2, $3, $4, $4) ON CONFLICT (session_id, jid) DO UPDATE SET sender_timestamp = CASE \
     WHEN socket_tc_tokens.sender_timestamp IS NULL OR socket_tc_tokens.sender_timestamp < excluded.sender_timestamp \
     THEN excluded.sender_timestamp ELSE socket_tc_tokens.sender_timestamp END";
/// Newer-wins on the token pair (a placeholder never blocks the first real token); the sender bucket
/// is never touched by this writer.
const STORE_RECEIVED_TC_TOKEN: &str = "INSERT INTO socket_tc_tokens (session_id, jid, token, token_timestamp, sender_timestamp) \
     VALUES ($1, $2, $3, $4, NULL) ON CONFLICT (session_id, jid) DO UPDATE SET token = excluded.token, \
     token_timestamp = excluded.token_timestamp \
     WHERE length(socket_tc_tokens.token) = 0 OR excluded.token_timestamp >= socket_tc_tokens.token_timestamp";

const STORE_SENT_MESSAGE: &str = "INSERT INTO socket_sent_messages (session_id, chat_jid, message_id, payload, created_at) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (session_id, chat_jid, message_id) DO UPDATE SET \
     payload = excluded.payload, created_at = excluded.created_at";
/// Read and delete in one statement: a retry receipt consumes the payload exactly once.
const TAKE_SENT_MESSAGE: &str = "DELETE FROM socket_sent_messages \
     WHERE session_id = $1 AND chat_jid = $2 AND message_id = $3 RETURNING payload";
const DELETE_EXPIRED_SENT: &str =
    "DELETE FROM socket_sent_messages WHERE session_id = $1 AND created_at < $2";

const STORE_PENDING_INBOUND: &str = "INSERT INTO socket_pending_inbound \
     (session_id, chat_jid, sender_jid, message_id, message, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
     ON CONFLICT (session_id, chat_jid, sender_jid, message_id) DO UPDATE SET \
     message = excluded.message, created_at = excluded.created_at";
const GET_PENDING_INBOUND: &str = "SELECT message FROM socket_pending_inbound \
     WHERE session_id = $1 AND chat_jid = $2 AND sender_jid = $3 AND message_id = $4";
const DELETE_PENDING_INBOUND: &str = "DELETE FROM socket_pending_inbound \
     WHERE session_id = $1 AND chat_jid = $2 AND sender_jid = $3 AND message_id = $4";
const DELETE_EXPIRED_PENDING: &str =
    "DELETE FROM socket_pending_inbound WHERE session_id = $1 AND created_at < $2";

type LidRow = (String, String, i64, i64, String);
type DeviceListRow = (String, String, i64, Option<String>, Option<i64>);

fn lid_entry(
    (lid, phone_number, created_at, updated_at, learning_source): LidRow,
) -> LidPnMappingEntry {
    LidPnMappingEntry {
        lid,
        phone_number,
        created_at,
        updated_at,
        learning_source,
    }
}

/// Deleted-row counts as the trait's `u32` (saturating: a sweep never removes 4 billion rows).
fn count(rows: u64) -> u32 {
    u32::try_from(rows).unwrap_or(u32::MAX)
}

impl SqlBackend {
    fn device_list_from_row(&self, row: DeviceListRow) -> Result<DeviceListRecord> {
        let (user, devices, timestamp, phash, raw_id) = row;
        let devices: Vec<DeviceInfo> = serde_json::from_str(&devices)
            .map_err(|e| self.corrupt("get_devices", format!("device list JSON: {e}")))?;
        let raw_id = raw_id
            .map(|id| {
                u32::try_from(id)
                    .map_err(|_| self.corrupt("get_devices", format!("raw_id {id} out of range")))
            })
            .transpose()?;
        Ok(DeviceListRecord {
            user,
            devices,
            timestamp,
            phash,
            raw_id,
        })
    }

    fn device_list_json(&self, record: &DeviceListRecord) -> Result<String> {
        serde_json::to_string(&record.devices)
            .map_err(|e| self.corrupt("update_device_list", format!("device list JSON: {e}")))
    }
}

#[async_trait]
impl ProtocolStore for SqlBackend {
    async fn get_sender_key_devices(&self, group_jid: &str) -> Result<Vec<(String, bool)>> {
        on_db!(self, "get_sender_key_devices", |p| sqlx::query_as(
            GET_SENDER_KEY_DEVICES
        )
        .bind(&*self.session_id)
        .bind(group_jid)
        .fetch_all(p)
        .await)
    }

    async fn set_sender_key_status(&self, group_jid: &str, entries: &[(&str, bool)]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        in_tx!(self, "set_sender_key_status", |tx| {
            for (device_jid, has_key) in entries {
                sqlx::query(SET_SENDER_KEY_STATUS)
                    .bind(&*self.session_id)
                    .bind(group_jid)
                    .bind(*device_jid)
                    .bind(*has_key)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn clear_sender_key_devices(&self, group_jid: &str) -> Result<()> {
        on_db!(self, "clear_sender_key_devices", |p| sqlx::query(
            CLEAR_SENDER_KEY_DEVICES
        )
        .bind(&*self.session_id)
        .bind(group_jid)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn delete_sender_key_device_rows(&self, device_jids: &[&str]) -> Result<()> {
        if device_jids.is_empty() {
            return Ok(());
        }
        in_tx!(self, "delete_sender_key_device_rows", |tx| {
            for device_jid in device_jids {
                sqlx::query(DELETE_SENDER_KEY_DEVICE_ROWS)
                    .bind(&*self.session_id)
                    .bind(*device_jid)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn clear_all_sender_key_devices(&self) -> Result<()> {
        on_db!(self, "clear_all_sender_key_devices", |p| sqlx::query(
            CLEAR_ALL_SENDER_KEY_DEVICES
        )
        .bind(&*self.session_id)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn get_lid_mapping(&self, lid: &str) -> Result<Option<LidPnMappingEntry>> {
        let row: Option<LidRow> =
            on_db!(self, "get_lid_mapping", |p| sqlx::query_as(GET_LID_MAPPING)
                .bind(&*self.session_id)
                .bind(lid)
                .fetch_optional(p)
                .await)?;
        Ok(row.map(lid_entry))
    }

    async fn get_pn_mapping(&self, phone: &str) -> Result<Option<LidPnMappingEntry>> {
        let row: Option<LidRow> =
            on_db!(self, "get_pn_mapping", |p| sqlx::query_as(GET_PN_MAPPING)
                .bind(&*self.session_id)
                .bind(phone)
                .fetch_optional(p)
                .await)?;
        Ok(row.map(lid_entry))
    }

    async fn put_lid_mapping(&self, entry: &LidPnMappingEntry) -> Result<()> {
        self.put_lid_mappings(std::slice::from_ref(entry)).await
    }

    async fn put_lid_mappings(&self, entries: &[LidPnMappingEntry]) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        in_tx!(self, "put_lid_mappings", |tx| {
            for entry in entries {
                sqlx::query(RELEASE_PN_CURRENT)
                    .bind(&*self.session_id)
                    .bind(&entry.lid)
                    .bind(&entry.phone_number)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(PUT_LID_MAPPING)
                    .bind(&*self.session_id)
                    .bind(&entry.lid)
                    .bind(&entry.phone_number)
                    .bind(entry.created_at)
                    .bind(entry.updated_at)
                    .bind(&entry.learning_source)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    /// Ordered by LID (the reference returns map order, which the trait leaves open).
    async fn get_all_lid_mappings(&self) -> Result<Vec<LidPnMappingEntry>> {
        let rows: Vec<LidRow> = on_db!(self, "get_all_lid_mappings", |p| sqlx::query_as(
            GET_ALL_LID_MAPPINGS
        )
        .bind(&*self.session_id)
        .fetch_all(p)
        .await)?;
        Ok(rows.into_iter().map(lid_entry).collect())
    }

    async fn save_base_key(&self, address: &str, message_id: &str, base_key: &[u8]) -> Result<()> {
        on_db!(self, "save_base_key", |p| sqlx::query(SAVE_BASE_KEY)
            .bind(&*self.session_id)
            .bind(address)
            .bind(message_id)
            .bind(base_key)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn has_same_base_key(
        &self,
        address: &str,
        message_id: &str,
        current_base_key: &[u8],
    ) -> Result<bool> {
        let stored: Option<Vec<u8>> = on_db!(self, "has_same_base_key", |p| sqlx::query_scalar(
            GET_BASE_KEY
        )
        .bind(&*self.session_id)
        .bind(address)
        .bind(message_id)
        .fetch_optional(p)
        .await)?;
        Ok(stored.is_some_and(|stored| stored == current_base_key))
    }

    async fn delete_base_key(&self, address: &str, message_id: &str) -> Result<()> {
        on_db!(self, "delete_base_key", |p| sqlx::query(DELETE_BASE_KEY)
            .bind(&*self.session_id)
            .bind(address)
            .bind(message_id)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn update_device_list(&self, record: DeviceListRecord) -> Result<()> {
        let devices = self.device_list_json(&record)?;
        on_db!(self, "update_device_list", |p| sqlx::query(
            UPDATE_DEVICE_LIST
        )
        .bind(&*self.session_id)
        .bind(&record.user)
        .bind(&devices)
        .bind(record.timestamp)
        .bind(record.phash.as_deref())
        .bind(record.raw_id.map(i64::from))
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn update_device_lists(&self, records: Vec<DeviceListRecord>) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let encoded = records
            .iter()
            .map(|record| self.device_list_json(record))
            .collect::<Result<Vec<String>>>()?;
        in_tx!(self, "update_device_lists", |tx| {
            for (record, devices) in records.iter().zip(&encoded) {
                sqlx::query(UPDATE_DEVICE_LIST)
                    .bind(&*self.session_id)
                    .bind(&record.user)
                    .bind(devices)
                    .bind(record.timestamp)
                    .bind(record.phash.as_deref())
                    .bind(record.raw_id.map(i64::from))
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn get_devices(&self, user: &str) -> Result<Option<DeviceListRecord>> {
        let row: Option<DeviceListRow> =
            on_db!(self, "get_devices", |p| sqlx::query_as(GET_DEVICES)
                .bind(&*self.session_id)
                .bind(user)
                .fetch_optional(p)
                .await)?;
        row.map(|row| self.device_list_from_row(row)).transpose()
    }

    async fn delete_devices(&self, user: &str) -> Result<()> {
        on_db!(self, "delete_devices", |p| sqlx::query(DELETE_DEVICES)
            .bind(&*self.session_id)
            .bind(user)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn get_group_metadata(&self, group_jid: &str) -> Result<Option<Vec<u8>>> {
        on_db!(self, "get_group_metadata", |p| sqlx::query_scalar(
            GET_GROUP_METADATA
        )
        .bind(&*self.session_id)
        .bind(group_jid)
        .fetch_optional(p)
        .await)
    }

    async fn put_group_metadata(&self, group_jid: &str, blob: &[u8]) -> Result<()> {
        on_db!(self, "put_group_metadata", |p| sqlx::query(
            PUT_GROUP_METADATA
        )
        .bind(&*self.session_id)
        .bind(group_jid)
        .bind(blob)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn delete_group_metadata(&self, group_jid: &str) -> Result<()> {
        on_db!(self, "delete_group_metadata", |p| sqlx::query(
            DELETE_GROUP_METADATA
        )
        .bind(&*self.session_id)
        .bind(group_jid)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn get_tc_token(&self, jid: &str) -> Result<Option<TcTokenEntry>> {
        let row: Option<(Vec<u8>, i64, Option<i64>)> = on_db!(self, "get_tc_token", |p| {
            sqlx::query_as(GET_TC_TOKEN)
                .bind(&*self.session_id)
                .bind(jid)
                .fetch_optional(p)
                .await
        })?;
        Ok(
            row.map(|(token, token_timestamp, sender_timestamp)| TcTokenEntry {
                token,
                token_timestamp,
                sender_timestamp,
            }),
        )
    }

    async fn put_tc_token(&self, jid: &str, entry: &TcTokenEntry) -> Result<()> {
        on_db!(self, "put_tc_token", |p| sqlx::query(PUT_TC_TOKEN)
            .bind(&*self.session_id)
            .bind(jid)
            .bind(&entry.token)
            .bind(entry.token_timestamp)
            .bind(entry.sender_timestamp)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn delete_tc_token(&self, jid: &str) -> Result<()> {
        on_db!(self, "delete_tc_token", |p| sqlx::query(DELETE_TC_TOKEN)
            .bind(&*self.session_id)
            .bind(jid)
            .execute(p)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Ordered by JID (the reference returns map order, which the trait leaves open).
    async fn get_all_tc_token_jids(&self) -> Result<Vec<String>> {
        on_db!(self, "get_all_tc_token_jids", |p| sqlx::query_scalar(
            ALL_TC_TOKEN_JIDS
        )
        .bind(&*self.session_id)
        .fetch_all(p)
        .await)
    }

    async fn delete_expired_tc_tokens(&self, token_cutoff: i64, sender_cutoff: i64) -> Result<u32> {
        let rows = on_db!(self, "delete_expired_tc_tokens", |p| sqlx::query(
            DELETE_EXPIRED_TC_TOKENS
        )
        .bind(&*self.session_id)
        .bind(token_cutoff)
        .bind(sender_cutoff)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(count(rows))
    }

    async fn touch_tc_token_sender_timestamp(
        &self,
        jid: &str,
        sender_timestamp: i64,
    ) -> Result<()> {
        on_db!(self, "touch_tc_token_sender_timestamp", |p| sqlx::query(
            TOUCH_TC_SENDER
        )
        .bind(&*self.session_id)
        .bind(jid)
        .bind(Vec::<u8>::new())
        .bind(sender_timestamp)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn store_received_tc_token(
        &self,
        jid: &str,
        token: &[u8],
        token_timestamp: i64,
    ) -> Result<()> {
        on_db!(self, "store_received_tc_token", |p| sqlx::query(
            STORE_RECEIVED_TC_TOKEN
        )
        .bind(&*self.session_id)
        .bind(jid)
        .bind(token)
        .bind(token_timestamp)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn store_sent_message(
        &self,
        chat_jid: &str,
        message_id: &str,
        payload: &[u8],
    ) -> Result<()> {
        on_db!(self, "store_sent_message", |p| sqlx::query(
            STORE_SENT_MESSAGE
        )
        .bind(&*self.session_id)
        .bind(chat_jid)
        .bind(message_id)
        .bind(payload)
        .bind(now_secs())
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn take_sent_message(&self, chat_jid: &str, message_id: &str) -> Result<Option<Vec<u8>>> {
        on_db!(self, "take_sent_message", |p| sqlx::query_scalar(
            TAKE_SENT_MESSAGE
        )
        .bind(&*self.session_id)
        .bind(chat_jid)
        .bind(message_id)
        .fetch_optional(p)
        .await)
    }

    async fn delete_expired_sent_messages(&self, cutoff_timestamp: i64) -> Result<u32> {
        let rows = on_db!(self, "delete_expired_sent_messages", |p| sqlx::query(
            DELETE_EXPIRED_SENT
        )
        .bind(&*self.session_id)
        .bind(cutoff_timestamp)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(count(rows))
    }

    async fn store_pending_inbound(
        &self,
        chat: &str,
        sender: &str,
        id: &str,
        message: &[u8],
    ) -> Result<()> {
        on_db!(self, "store_pending_inbound", |p| sqlx::query(
            STORE_PENDING_INBOUND
        )
        .bind(&*self.session_id)
        .bind(chat)
        .bind(sender)
        .bind(id)
        .bind(message)
        .bind(now_secs())
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn get_pending_inbound(
        &self,
        chat: &str,
        sender: &str,
        id: &str,
    ) -> Result<Option<Vec<u8>>> {
        on_db!(self, "get_pending_inbound", |p| sqlx::query_scalar(
            GET_PENDING_INBOUND
        )
        .bind(&*self.session_id)
        .bind(chat)
        .bind(sender)
        .bind(id)
        .fetch_optional(p)
        .await)
    }

    async fn delete_pending_inbound(&self, chat: &str, sender: &str, id: &str) -> Result<()> {
        on_db!(self, "delete_pending_inbound", |p| sqlx::query(
            DELETE_PENDING_INBOUND
        )
        .bind(&*self.session_id)
        .bind(chat)
        .bind(sender)
        .bind(id)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(())
    }

    async fn delete_expired_pending_inbound(&self, cutoff_timestamp: i64) -> Result<u32> {
        let rows = on_db!(self, "delete_expired_pending_inbound", |p| sqlx::query(
            DELETE_EXPIRED_PENDING
        )
        .bind(&*self.session_id)
        .bind(cutoff_timestamp)
        .execute(p)
        .await
        .map(|r| r.rows_affected()))?;
        Ok(count(rows))
    }

    async fn store_pending_inbound_batch(&self, rows: &[PendingInboundRow<'_>]) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let now = now_secs();
        in_tx!(self, "store_pending_inbound_batch", |tx| {
            for row in rows {
                sqlx::query(STORE_PENDING_INBOUND)
                    .bind(&*self.session_id)
                    .bind(row.chat)
                    .bind(row.sender)
                    .bind(row.id)
                    .bind(row.message)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }

    async fn delete_pending_inbound_batch(&self, keys: &[PendingInboundKey<'_>]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        in_tx!(self, "delete_pending_inbound_batch", |tx| {
            for key in keys {
                sqlx::query(DELETE_PENDING_INBOUND)
                    .bind(&*self.session_id)
                    .bind(key.chat)
                    .bind(key.sender)
                    .bind(key.id)
                    .execute(&mut *tx)
                    .await?;
            }
            Ok::<(), sqlx::Error>(())
        })
    }
}
