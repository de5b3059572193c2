//! The raft state machine: the node's own main DB (`main.sqlite`). A batch of committed entries is applied in
//! one transaction together with the last applied log id and membership (`raft_applied`), so a crash at any
//! point leaves the file at a batch boundary and the log replays the rest. A snapshot is the replicated
//! tables (keys and audit) plus that log id, kept as one file under `DATA_DIR`; installing one replaces the
//! tables in one transaction.

// openraft's storage traits fix `StorageError` (224 bytes) as the error type of every call.
#![allow(clippy::result_large_err)]

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{
    AnyError, EntryPayload, LogId, RaftLogId, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageError, StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};
use sqlx::{SqliteConnection, SqlitePool};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use super::{Entry, Member, NodeId, TypeConfig};
use crate::maindb::{self, MainOutcome, MainTables, Refusal};
use crate::store::StoreError;

type Membership = StoredMembership<NodeId, Member>;

fn sm_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

fn snap_err(e: impl std::error::Error + 'static) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}

/// What a snapshot file holds.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<NodeId, Member>,
    tables: MainTables,
}

#[derive(Clone)]
pub(crate) struct StateMachine {
    main: SqlitePool,
    snapshot_path: PathBuf,
    /// Bumped after every applied batch that changed keys (and after a snapshot install): the key cache
    /// reloads on it.
    keys_changed: Arc<watch::Sender<u64>>,
}

impl StateMachine {
    pub(crate) fn new(main: SqlitePool, data_dir: PathBuf) -> StateMachine {
        StateMachine {
            main,
            snapshot_path: data_dir.join("raft-snapshot.json"),
            keys_changed: Arc::new(watch::channel(0).0),
        }
    }

    pub(crate) fn keys_changed(&self) -> watch::Receiver<u64> {
        self.keys_changed.subscribe()
    }

    fn bump_keys(&self) {
        self.keys_changed.send_modify(|n| *n += 1);
    }
}

async fn read_applied(
    conn: &mut SqliteConnection,
) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
    let row: Option<(Option<String>, String)> =
        sqlx::query_as("SELECT last_applied, membership FROM raft_applied WHERE id = 1")
            .fetch_optional(&mut *conn)
            .await
            .map_err(sm_err)?;
    let Some((last, membership)) = row else {
        return Ok((None, Membership::default()));
    };
    let last = last
        .map(|t| serde_json::from_str(&t).map_err(sm_err))
        .transpose()?;
    let membership = serde_json::from_str(&membership).map_err(sm_err)?;
    Ok((last, membership))
}

async fn write_applied(
    conn: &mut SqliteConnection,
    last: &Option<LogId<NodeId>>,
    membership: &Membership,
) -> Result<(), StorageError<NodeId>> {
    let last = last
        .as_ref()
        .map(|l| serde_json::to_string(l).map_err(sm_err))
        .transpose()?;
    let membership = serde_json::to_string(membership).map_err(sm_err)?;
    sqlx::query(
        "INSERT INTO raft_applied (id, last_applied, membership) VALUES (1, $1, $2) \
         ON CONFLICT (id) DO UPDATE SET last_applied = excluded.last_applied, \
         membership = excluded.membership",
    )
    .bind(last)
    .bind(membership)
    .execute(&mut *conn)
    .await
    .map_err(sm_err)?;
    Ok(())
}

/// A refused constraint (the same on every replica) is an outcome; anything else stops the replica.
fn outcome_of(
    result: Result<MainOutcome, StoreError>,
) -> Result<MainOutcome, StorageError<NodeId>> {
    match result {
        Ok(outcome) => Ok(outcome),
        Err(StoreError::Conflict { what }) => Ok(MainOutcome::Refused {
            refusal: Refusal::Invalid {
                message: format!("{what} already exists"),
            },
        }),
        Err(err) => Err(sm_err(err)),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        // One read transaction: the tables and the applied id are from the same instant.
        let mut tx = self.main.begin().await.map_err(snap_err)?;
        let (last, membership) = read_applied(&mut tx).await?;
        let tables = maindb::read_tables(&mut tx).await.map_err(snap_err)?;
        tx.commit().await.map_err(snap_err)?;
        let snapshot_id = match &last {
            Some(l) => format!(
                "{}-{}-{}",
                l.leader_id,
                l.index,
                uuid::Uuid::new_v4().simple()
            ),
            None => format!("empty-{}", uuid::Uuid::new_v4().simple()),
        };
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: membership,
            snapshot_id,
        };
        let file = SnapshotFile { meta, tables };
        let bytes = serde_json::to_vec(&file).map_err(snap_err)?;
        save_file(&self.snapshot_path, &bytes).await?;
        Ok(Snapshot {
            meta: file.meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

/// Written beside (a name of its own, so a build and an install never share it), synced, renamed over, and
/// the directory synced: a crash leaves the old file or the new one, never half of one.
async fn save_file(path: &Path, bytes: &[u8]) -> Result<(), StorageError<NodeId>> {
    let tmp = path.with_extension(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut file = tokio::fs::File::create(&tmp).await.map_err(snap_err)?;
    file.write_all(bytes).await.map_err(snap_err)?;
    file.sync_all().await.map_err(snap_err)?;
    drop(file);
    if let Err(err) = tokio::fs::rename(&tmp, path).await {
        let _ = tokio::fs::remove_file(&tmp).await;
        return Err(snap_err(err));
    }
    if let Some(dir) = path.parent() {
        let dir = tokio::fs::File::open(dir).await.map_err(snap_err)?;
        dir.sync_all().await.map_err(snap_err)?;
    }
    Ok(())
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, Membership), StorageError<NodeId>> {
        let mut conn = self.main.acquire().await.map_err(sm_err)?;
        read_applied(&mut conn).await
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<MainOutcome>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut tx = self
            .main
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(sm_err)?;
        let (mut last, mut membership) = read_applied(&mut tx).await?;
        let mut outcomes = Vec::new();
        let mut is_keys_changed = false;
        for entry in entries {
            last = Some(*entry.get_log_id());
            let outcome = match &entry.payload {
                EntryPayload::Blank => MainOutcome::Done,
                EntryPayload::Normal(command) => {
                    is_keys_changed |= command.touches_keys();
                    outcome_of(maindb::apply(&mut tx, command).await)?
                }
                EntryPayload::Membership(m) => {
                    membership = Membership::new(last, m.clone());
                    MainOutcome::Done
                }
            };
            outcomes.push(outcome);
        }
        write_applied(&mut tx, &last, &membership).await?;
        tx.commit().await.map_err(sm_err)?;
        if is_keys_changed {
            self.bump_keys();
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> StateMachine {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, Member>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let bytes = snapshot.into_inner();
        let file: SnapshotFile = serde_json::from_slice(&bytes).map_err(snap_err)?;
        let file = SnapshotFile {
            meta: meta.clone(),
            tables: file.tables,
        };
        // The file first: a crash before the tables commit leaves a snapshot ahead of the state machine,
        // which the leader sends again; the other order could leave a purged log behind an older file.
        save_file(
            &self.snapshot_path,
            &serde_json::to_vec(&file).map_err(snap_err)?,
        )
        .await?;
        let mut tx = self
            .main
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(sm_err)?;
        maindb::replace_tables(&mut tx, &file.tables)
            .await
            .map_err(sm_err)?;
        write_applied(&mut tx, &meta.last_log_id, &meta.last_membership).await?;
        tx.commit().await.map_err(sm_err)?;
        self.bump_keys();
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let bytes = match tokio::fs::read(&self.snapshot_path).await {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(snap_err(err)),
        };
        let file: SnapshotFile = serde_json::from_slice(&bytes).map_err(snap_err)?;
        Ok(Some(Snapshot {
            meta: file.meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}
