//! The main DB's write path (API keys, audit log) as commands. A command is applied by one deterministic
//! function inside a transaction, whichever way the node keeps its main DB: embedded (`none`), the node
//! applies it to its local file at once; with raft, the leader commits it to the log and every replica's
//! state machine applies the same function, so the replicas' files stay identical. Everything that could
//! differ between replicas (ids, hashes, the clock) is decided by the submitter and carried in the command.

use serde::{Deserialize, Serialize};
use sqlx::SqliteConnection;
use wagate_proto::Role;

use std::net::IpAddr;

use crate::keys::{
    KeyChange, is_unrestricted_admin, is_usable_admin_from, restore_unrestricted_admin,
};
use crate::store::audit::{self as audit_store, AuditRow};
use crate::store::keys::{self as key_store, ApiKey};
use crate::store::{StoreError, StoreResult};

/// One change to the main DB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum MainCommand {
    CreateKey {
        key: ApiKey,
    },
    UpdateKey {
        id: String,
        change: KeyChangeWire,
        now: i64,
        /// The client address the change was asked from: an admin key usable from it must remain. Absent
        /// (entries written before it existed): an admin key usable from some address.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caller: Option<IpAddr>,
    },
    DeleteKey {
        id: String,
        now: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        caller: Option<IpAddr>,
    },
    /// Adds `key` unless a key with its hash exists (`API_MASTER_KEY`, applied once per cluster).
    EnsureKey {
        key: ApiKey,
    },
    /// Adds `key` unless some admin key exists (the generated first admin key: one per cluster).
    EnsureAdmin {
        key: ApiKey,
    },
    AddUsage {
        usage: Vec<UsageDelta>,
    },
    AppendAudit {
        rows: Vec<AuditRow>,
    },
    PruneAudit {
        before: i64,
    },
}

impl MainCommand {
    /// Whether applying it can change what a key check answers (the key cache must be reloaded).
    pub fn touches_keys(&self) -> bool {
        matches!(
            self,
            MainCommand::CreateKey { .. }
                | MainCommand::UpdateKey { .. }
                | MainCommand::DeleteKey { .. }
                | MainCommand::EnsureKey { .. }
                | MainCommand::EnsureAdmin { .. }
        )
    }
}

/// Key uses counted in memory since the last flush.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageDelta {
    pub id: String,
    pub count: i64,
    pub last_used_at: i64,
}

/// [`KeyChange`] as it travels in the log: a field absent is left alone, a field present as `null` is
/// cleared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KeyChangeWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "present")]
    pub allowed_sessions: Option<Option<Vec<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "present")]
    pub allowed_ips: Option<Option<Vec<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_active: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "present")]
    pub expires_at: Option<Option<i64>>,
}

/// `Some(value)` is written as the value (which may be `null`); absence is `None`.
mod present {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: Serialize>(
        value: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

impl From<KeyChange> for KeyChangeWire {
    fn from(c: KeyChange) -> KeyChangeWire {
        let KeyChange {
            name,
            role,
            allowed_sessions,
            allowed_ips,
            is_active,
            expires_at,
        } = c;
        KeyChangeWire {
            name,
            role,
            allowed_sessions,
            allowed_ips,
            is_active,
            expires_at,
        }
    }
}

impl From<KeyChangeWire> for KeyChange {
    fn from(c: KeyChangeWire) -> KeyChange {
        KeyChange {
            name: c.name,
            role: c.role,
            allowed_sessions: c.allowed_sessions,
            allowed_ips: c.allowed_ips,
            is_active: c.is_active,
            expires_at: c.expires_at,
        }
    }
}

/// What a command did. A refused command changes nothing (on every replica alike).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum MainOutcome {
    Done,
    /// The key as stored after the change (or as it was before a delete).
    Key {
        key: ApiKey,
    },
    /// Whether an `Ensure*` command added its key.
    Ensured {
        is_added: bool,
    },
    Refused {
        refusal: Refusal,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "camelCase")]
pub enum Refusal {
    NotFound,
    LastAdmin,
    Invalid { message: String },
}

fn refused(refusal: Refusal) -> MainOutcome {
    MainOutcome::Refused { refusal }
}

/// Applies one command on `conn` (the caller owns the transaction). Deterministic: the outcome and the
/// rows written depend only on the stored rows and the command.
pub async fn apply(conn: &mut SqliteConnection, command: &MainCommand) -> StoreResult<MainOutcome> {
    match command {
        MainCommand::CreateKey { key } => {
            key_store::insert_key(&mut *conn, key).await?;
            Ok(MainOutcome::Key { key: key.clone() })
        }
        MainCommand::UpdateKey {
            id,
            change,
            now,
            caller,
        } => {
            let Some(mut key) = find_key(conn, id).await? else {
                return Ok(refused(Refusal::NotFound));
            };
            if let Err(err) = KeyChange::from(change.clone()).apply(&mut key) {
                return Ok(refused(Refusal::Invalid {
                    message: err.to_string(),
                }));
            }
            key.updated_at = *now;
            if !admin_remains(conn, Some(&key), id, *now, *caller).await? {
                return Ok(refused(Refusal::LastAdmin));
            }
            key_store::update_key(&mut *conn, &key).await?;
            Ok(MainOutcome::Key { key })
        }
        MainCommand::DeleteKey { id, now, caller } => {
            let Some(key) = find_key(conn, id).await? else {
                return Ok(refused(Refusal::NotFound));
            };
            if !admin_remains(conn, None, id, *now, *caller).await? {
                return Ok(refused(Refusal::LastAdmin));
            }
            key_store::delete_key(&mut *conn, id).await?;
            Ok(MainOutcome::Key { key })
        }
        MainCommand::EnsureKey { key } => {
            let keys = key_store::list_keys(&mut *conn).await?;
            let Some(existing) = keys.into_iter().find(|k| k.key_hash == key.key_hash) else {
                key_store::insert_key(&mut *conn, key).await?;
                return Ok(MainOutcome::Ensured { is_added: true });
            };
            // The recovery path for a locked-out operator: whatever was changed on the master key's
            // record, a boot with `API_MASTER_KEY` makes it an active, unrestricted admin again.
            if !is_unrestricted_admin(&existing, key.updated_at) {
                let mut restored = existing;
                restore_unrestricted_admin(&mut restored);
                restored.updated_at = key.updated_at;
                key_store::update_key(&mut *conn, &restored).await?;
                tracing::warn!(
                    key_id = %restored.id,
                    "API_MASTER_KEY was restricted, revoked or expired; restored it to an unrestricted admin key"
                );
            }
            Ok(MainOutcome::Ensured { is_added: false })
        }
        MainCommand::EnsureAdmin { key } => {
            let keys = key_store::list_keys(&mut *conn).await?;
            let is_added = !keys.iter().any(|k| k.role == Role::Admin);
            if is_added {
                key_store::insert_key(&mut *conn, key).await?;
            }
            Ok(MainOutcome::Ensured { is_added })
        }
        MainCommand::AddUsage { usage } => {
            for delta in usage {
                key_store::add_usage(&mut *conn, &delta.id, delta.count, delta.last_used_at)
                    .await?;
            }
            Ok(MainOutcome::Done)
        }
        MainCommand::AppendAudit { rows } => {
            for row in rows {
                audit_store::insert(&mut *conn, row).await?;
            }
            Ok(MainOutcome::Done)
        }
        MainCommand::PruneAudit { before } => {
            audit_store::prune(&mut *conn, *before).await?;
            Ok(MainOutcome::Done)
        }
    }
}

async fn find_key(conn: &mut SqliteConnection, id: &str) -> StoreResult<Option<ApiKey>> {
    match key_store::get_key(&mut *conn, id).await {
        Ok(key) => Ok(Some(key)),
        Err(StoreError::NotFound) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Whether an admin key usable from `caller` remains once key `id` becomes `changed` (`None`: deleted).
async fn admin_remains(
    conn: &mut SqliteConnection,
    changed: Option<&ApiKey>,
    id: &str,
    now: i64,
    caller: Option<IpAddr>,
) -> StoreResult<bool> {
    let keys = key_store::list_keys(&mut *conn).await?;
    Ok(keys
        .iter()
        .map(|k| if k.id == id { changed } else { Some(k) })
        .any(|k| k.is_some_and(|k| is_usable_admin_from(k, now, caller))))
}

/// The replicated tables as one value: a raft snapshot's payload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MainTables {
    pub keys: Vec<ApiKey>,
    pub audit: Vec<AuditRow>,
}

pub async fn read_tables(conn: &mut SqliteConnection) -> StoreResult<MainTables> {
    Ok(MainTables {
        keys: key_store::list_keys(&mut *conn).await?,
        audit: audit_store::all(&mut *conn).await?,
    })
}

/// Replaces the replicated tables with `tables` (snapshot install).
pub async fn replace_tables(conn: &mut SqliteConnection, tables: &MainTables) -> StoreResult<()> {
    key_store::delete_all(&mut *conn).await?;
    audit_store::delete_all(&mut *conn).await?;
    for key in &tables.keys {
        key_store::restore_key(&mut *conn, key).await?;
    }
    for row in &tables.audit {
        audit_store::insert(&mut *conn, row).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_keeps_absent_null_and_set_apart_on_the_wire() {
        let change = KeyChangeWire {
            allowed_ips: Some(None),
            expires_at: Some(Some(5)),
            ..KeyChangeWire::default()
        };
        let text = serde_json::to_string(&change).expect("json");
        assert_eq!(text, r#"{"allowed_ips":null,"expires_at":5}"#);
        let back: KeyChangeWire = serde_json::from_str(&text).expect("back");
        assert_eq!(back, change);
        assert_eq!(back.allowed_sessions, None);
    }
}

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// No quorum (or no leader) committed it in time.
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where the main DB's writes go: straight into the local file (embedded), or through raft.
#[derive(Clone)]
pub enum MainWriter {
    Local(LocalWriter),
    Raft(std::sync::Arc<crate::raft::MainRaft>),
}

/// The embedded mode's writer: one command at a time, each in its own transaction.
#[derive(Clone)]
pub struct LocalWriter {
    pool: sqlx::SqlitePool,
    turn: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl MainWriter {
    pub fn local(pool: sqlx::SqlitePool) -> MainWriter {
        MainWriter::Local(LocalWriter {
            pool,
            turn: std::sync::Arc::new(tokio::sync::Mutex::new(())),
        })
    }

    pub fn raft(&self) -> Option<&std::sync::Arc<crate::raft::MainRaft>> {
        match self {
            MainWriter::Raft(raft) => Some(raft),
            MainWriter::Local(_) => None,
        }
    }

    /// Applies `command` and returns its outcome; with raft, after a majority committed it and this
    /// replica applied it.
    pub async fn write(&self, command: MainCommand) -> Result<MainOutcome, WriteError> {
        match self {
            MainWriter::Local(local) => {
                let _turn = local.turn.lock().await;
                let mut tx = local
                    .pool
                    .begin_with("BEGIN IMMEDIATE")
                    .await
                    .map_err(StoreError::from)?;
                let outcome = apply(&mut tx, &command).await?;
                tx.commit().await.map_err(StoreError::from)?;
                Ok(outcome)
            }
            MainWriter::Raft(raft) => raft.write(command).await,
        }
    }
}
