//! Replicas in one process over an in-memory network that can kill nodes, cut links (partitions), drop and
//! delay messages. Every test ends by checking that the live replicas' main DBs are identical and hold every
//! acknowledged write. Waits are polls with generous budgets; nothing asserts on elapsed time.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use parking_lot::RwLock;

use super::network::{Rpc, Transport, TransportError, dispatch};
use super::*;
use crate::maindb::{self, MainCommand, MainOutcome, MainTables, WriteError};
use crate::store::audit::AuditRow;
use crate::store::backends::connect_main;

const BUDGET: Duration = Duration::from_secs(20);

#[derive(Default)]
struct MemNet {
    nodes: RwLock<HashMap<NodeId, Arc<MainRaft>>>,
    cut: RwLock<HashSet<(NodeId, NodeId)>>,
    drop_percent: AtomicU32,
    delay_ms: AtomicU64,
}

impl MemNet {
    fn is_cut(&self, a: NodeId, b: NodeId) -> bool {
        let cut = self.cut.read();
        cut.contains(&(a, b)) || cut.contains(&(b, a))
    }

    /// Cuts every link between the two groups.
    fn partition(&self, left: &[NodeId], right: &[NodeId]) {
        let mut cut = self.cut.write();
        for a in left {
            for b in right {
                cut.insert((*a, *b));
            }
        }
    }

    fn heal(&self) {
        self.cut.write().clear();
    }
}

struct MemTransport {
    from: NodeId,
    net: Arc<MemNet>,
}

#[async_trait]
impl Transport for MemTransport {
    async fn call(
        &self,
        target: NodeId,
        _member: &Member,
        rpc: Rpc,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let unreachable = || TransportError(format!("{target} unreachable"));
        if self.net.is_cut(self.from, target) {
            return Err(unreachable());
        }
        let drop = self.net.drop_percent.load(Ordering::Relaxed);
        if drop > 0 && rand::random_range(0..100) < drop {
            return Err(TransportError("dropped".into()));
        }
        let delay = self.net.delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(rand::random_range(0..=delay))).await;
        }
        let raft = self
            .net
            .nodes
            .read()
            .get(&target)
            .cloned()
            .ok_or_else(unreachable)?;
        tokio::time::timeout(timeout, dispatch(&raft, rpc, &body))
            .await
            .map_err(|_| TransportError("timed out".into()))?
            .map_err(|e| TransportError(e.to_string()))
    }
}

struct Replica {
    name: String,
    id: NodeId,
    dir: tempfile::TempDir,
    main: sqlx::SqlitePool,
    raft: Option<Arc<MainRaft>>,
}

struct Group {
    net: Arc<MemNet>,
    replicas: Vec<Replica>,
    voters: Vec<String>,
    snapshot_logs: u64,
}

impl Group {
    async fn start(size: usize, snapshot_logs: u64) -> Group {
        let voters: Vec<String> = (0..size).map(|i| format!("r{i}")).collect();
        let mut group = Group {
            net: Arc::new(MemNet::default()),
            replicas: Vec::new(),
            voters: voters.clone(),
            snapshot_logs,
        };
        for name in voters {
            let dir = tempfile::tempdir().expect("dir");
            let main = connect_main(&dir.path().join("main.sqlite"))
                .await
                .expect("main db");
            group.replicas.push(Replica {
                id: node_id_of(&name),
                name,
                dir,
                main,
                raft: None,
            });
        }
        for i in 0..size {
            group.boot(i).await;
        }
        group
    }

    async fn boot(&mut self, i: usize) {
        let r = &mut self.replicas[i];
        let options = RaftOptions {
            name: r.name.clone(),
            url: String::new(),
            voters: self.voters.clone(),
            heartbeat_ms: 50,
            election_timeout_min_ms: 300,
            election_timeout_max_ms: 600,
            snapshot_logs: self.snapshot_logs,
            write_timeout: Duration::from_secs(2),
            data_dir: r.dir.path().to_path_buf(),
        };
        let transport = Arc::new(MemTransport {
            from: r.id,
            net: self.net.clone(),
        });
        let raft = MainRaft::start(options, r.main.clone(), transport)
            .await
            .expect("raft starts");
        self.net.nodes.write().insert(r.id, raft.clone());
        r.raft = Some(raft);
    }

    /// Stops a replica as a crash would look to its peers (its files stay).
    async fn kill(&mut self, i: usize) {
        let r = &mut self.replicas[i];
        self.net.nodes.write().remove(&r.id);
        if let Some(raft) = r.raft.take() {
            raft.shutdown().await;
        }
    }

    /// Kills a replica and deletes its files; it comes back empty.
    async fn wipe(&mut self, i: usize) {
        self.kill(i).await;
        let r = &mut self.replicas[i];
        r.main.close().await;
        r.dir = tempfile::tempdir().expect("dir");
        r.main = connect_main(&r.dir.path().join("main.sqlite"))
            .await
            .expect("main db");
    }

    fn raft(&self, i: usize) -> &Arc<MainRaft> {
        self.replicas[i].raft.as_ref().expect("live replica")
    }

    fn live(&self) -> Vec<usize> {
        (0..self.replicas.len())
            .filter(|i| self.replicas[*i].raft.is_some())
            .collect()
    }

    /// The replica that leads, once the live ones agree on one.
    async fn leader(&self, among: &[usize]) -> usize {
        let deadline = Instant::now() + BUDGET;
        while Instant::now() < deadline {
            for i in among {
                let raft = self.raft(*i);
                if raft.is_leader() {
                    return *i;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no leader among {among:?}");
    }

    /// Waits until every live replica applied the same index, then returns their tables.
    async fn converged(&self) -> Vec<MainTables> {
        let live = self.live();
        let deadline = Instant::now() + BUDGET;
        loop {
            let applied: Vec<u64> = live.iter().map(|i| self.raft(*i).applied_index()).collect();
            let logs: Vec<u64> = live
                .iter()
                .map(|i| self.raft(*i).status().last_log_index)
                .collect();
            let top = logs.iter().copied().max().unwrap_or(0);
            if applied.iter().all(|a| *a == top) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "replicas did not converge: applied {applied:?}, logs {logs:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut all = Vec::new();
        for i in live {
            let mut conn = self.replicas[i].main.acquire().await.expect("conn");
            all.push(maindb::read_tables(&mut conn).await.expect("tables"));
        }
        all
    }
}

fn audit(id: &str) -> MainCommand {
    MainCommand::AppendAudit {
        rows: vec![AuditRow {
            id: id.to_string(),
            action: "test_write".into(),
            severity: "info".into(),
            created_at: 1,
            ..AuditRow::default()
        }],
    }
}

/// Writes `audit(id)` through replica `via`, retrying while there is no quorum; true once acknowledged.
async fn write_until_acked(group: &Group, via: usize, id: &str) -> bool {
    let deadline = Instant::now() + BUDGET;
    while Instant::now() < deadline {
        match group.raft(via).write(audit(id)).await {
            Ok(MainOutcome::Done) => return true,
            Ok(other) => panic!("unexpected outcome {other:?}"),
            Err(WriteError::Unavailable(_)) => {}
            Err(err) => panic!("write failed: {err}"),
        }
    }
    false
}

fn assert_identical_with(tables: &[MainTables], acked: &[String]) {
    let first = &tables[0];
    for (i, t) in tables.iter().enumerate() {
        assert_eq!(t, first, "replica {i} differs from replica 0");
    }
    let ids: HashSet<&str> = first.audit.iter().map(|r| r.id.as_str()).collect();
    for id in acked {
        assert!(ids.contains(id.as_str()), "acknowledged write {id} missing");
    }
}

#[tokio::test]
async fn three_replicas_commit_writes_from_any_node_and_stay_identical() {
    let group = Group::start(3, 1_000).await;
    let leader = group.leader(&[0, 1, 2]).await;
    let mut acked = Vec::new();
    for i in 0..30 {
        let via = i % 3;
        let id = format!("w{i}");
        assert!(write_until_acked(&group, via, &id).await);
        // Read-your-write: the replica that took the write has applied it when the write returns.
        let mut conn = group.replicas[via].main.acquire().await.expect("conn");
        let tables = maindb::read_tables(&mut conn).await.expect("tables");
        assert!(
            tables.audit.iter().any(|r| r.id == id),
            "{id} not applied on {via}"
        );
        acked.push(id);
    }
    let key = crate::keys::NewKey {
        name: "replicated".into(),
        ..Default::default()
    }
    .into_key("wag_plaintext_for_test")
    .expect("key");
    let follower = (leader + 1) % 3;
    let created = group
        .raft(follower)
        .write(MainCommand::CreateKey { key: key.clone() })
        .await
        .expect("create through a follower");
    assert_eq!(created, MainOutcome::Key { key: key.clone() });
    let tables = group.converged().await;
    assert_identical_with(&tables, &acked);
    assert_eq!(tables[0].keys, vec![key]);
    let status = group.raft(leader).status();
    assert_eq!(status.role, "leader");
    assert_eq!(status.members.len(), 3);
    assert!(status.members.iter().all(|m| m.role == "voter"));
}

#[tokio::test]
async fn killing_the_leader_of_five_elects_another_and_loses_no_acknowledged_write() {
    let mut group = Group::start(5, 1_000).await;
    let first = group.leader(&[0, 1, 2, 3, 4]).await;
    let mut acked = Vec::new();
    for i in 0..10 {
        let id = format!("before{i}");
        assert!(write_until_acked(&group, (first + 1 + i) % 5, &id).await);
        acked.push(id);
    }
    let term_before = group.raft((first + 1) % 5).status().term;
    group.kill(first).await;
    let rest: Vec<usize> = group.live();
    let second = group.leader(&rest).await;
    assert_ne!(second, first);
    assert!(group.raft(second).status().term > term_before);
    for i in 0..10 {
        let id = format!("after{i}");
        assert!(write_until_acked(&group, rest[i % rest.len()], &id).await);
        acked.push(id);
    }
    assert_identical_with(&group.converged().await, &acked);
    // The old leader comes back from its files and catches up.
    group.boot(first).await;
    assert_identical_with(&group.converged().await, &acked);
}

#[tokio::test]
async fn a_minority_partition_cannot_commit_while_the_majority_goes_on() {
    let mut group = Group::start(5, 1_000).await;
    let leader = group.leader(&[0, 1, 2, 3, 4]).await;
    let ids: Vec<NodeId> = group.replicas.iter().map(|r| r.id).collect();
    let minority = [leader, (leader + 1) % 5];
    let majority: Vec<usize> = (0..5).filter(|i| !minority.contains(i)).collect();
    group.partition_groups(&ids, &minority, &majority);
    // The old leader cannot reach a quorum: its write is refused as unavailable, never acknowledged.
    let refused = group.raft(leader).write(audit("minority")).await;
    assert!(
        matches!(refused, Err(WriteError::Unavailable(_))),
        "{refused:?}"
    );
    let new_leader = group.leader(&majority).await;
    let mut acked = Vec::new();
    for i in 0..10 {
        let id = format!("majority{i}");
        assert!(write_until_acked(&group, majority[i % 3], &id).await);
        acked.push(id);
    }
    assert!(majority.contains(&new_leader));
    group.net.heal();
    assert_identical_with(&group.converged().await, &acked);
    // One leader per term: after healing, all agree on the majority's leader (or a later one).
    let leaders: HashSet<Option<String>> = group
        .live()
        .iter()
        .map(|i| group.raft(*i).status().leader)
        .collect();
    assert_eq!(leaders.len(), 1, "{leaders:?}");
    let _ = group.kill(0).await;
}

#[tokio::test]
async fn every_replica_restarts_from_its_files_to_the_same_state() {
    let mut group = Group::start(3, 1_000).await;
    group.leader(&[0, 1, 2]).await;
    let mut acked = Vec::new();
    for i in 0..20 {
        let id = format!("w{i}");
        assert!(write_until_acked(&group, i % 3, &id).await);
        acked.push(id);
    }
    let before = group.converged().await;
    for i in 0..3 {
        group.kill(i).await;
    }
    for i in 0..3 {
        group.boot(i).await;
    }
    group.leader(&[0, 1, 2]).await;
    assert!(write_until_acked(&group, 1, "after-restart").await);
    acked.push("after-restart".to_string());
    let after = group.converged().await;
    assert_identical_with(&after, &acked);
    assert_eq!(after[0].audit.len(), before[0].audit.len() + 1);
}

#[tokio::test]
async fn a_restarted_replica_is_caught_up_only_once_it_applied_what_was_committed_while_it_was_down()
 {
    let mut group = Group::start(3, 1_000).await;
    let leader = group.leader(&[0, 1, 2]).await;
    for i in 0..3 {
        assert!(group.raft(i).wait_caught_up(BUDGET).await, "replica {i}");
    }
    let down = (leader + 1) % 3;
    group.kill(down).await;
    for i in 0..10 {
        assert!(write_until_acked(&group, leader, &format!("while-down-{i}")).await);
    }
    let committed = group.raft(leader).applied_index();
    group.boot(down).await;
    let restarted = group.raft(down).clone();
    assert!(restarted.wait_caught_up(BUDGET).await);
    assert!(
        restarted.applied_index() >= committed,
        "caught up at {} before applying {committed}",
        restarted.applied_index()
    );
    // Alone (no quorum), a restarted replica cannot learn what the cluster committed: it stays behind
    // until a majority is back.
    let others: Vec<usize> = (0..3).filter(|i| *i != down).collect();
    for i in [down, others[0], others[1]] {
        group.kill(i).await;
    }
    group.boot(down).await;
    let alone = group.raft(down).clone();
    assert!(!alone.wait_caught_up(Duration::from_secs(2)).await);
    assert!(!alone.is_caught_up());
    group.boot(others[0]).await;
    assert!(alone.wait_caught_up(BUDGET).await);
}

#[tokio::test]
async fn a_wiped_replica_catches_up_by_snapshot() {
    let mut group = Group::start(3, 20).await;
    let leader = group.leader(&[0, 1, 2]).await;
    let mut acked = Vec::new();
    for i in 0..80 {
        let id = format!("w{i}");
        assert!(write_until_acked(&group, leader, &id).await);
        acked.push(id);
    }
    group.converged().await;
    // The leader has compacted its log: entries 1.. are gone and only a snapshot can bring a new replica up.
    let deadline = Instant::now() + BUDGET;
    while group.raft(leader).raft.metrics().borrow().purged.is_none() {
        assert!(Instant::now() < deadline, "the leader never purged its log");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Every replica restarts from its files: the compacted log, the vote and the snapshot file.
    let snapshots: Vec<Option<u64>> = (0..3)
        .map(|i| group.raft(i).status().snapshot_index)
        .collect();
    for i in 0..3 {
        group.kill(i).await;
    }
    for (i, snapshot) in snapshots.iter().enumerate() {
        group.boot(i).await;
        let file = group.replicas[i].dir.path().join("raft-snapshot.json");
        assert!(
            file.exists() || snapshot.is_none(),
            "replica {i} lost its snapshot file"
        );
        let deadline = Instant::now() + BUDGET;
        while group.raft(i).status().snapshot_index < *snapshot {
            assert!(
                Instant::now() < deadline,
                "replica {i} did not load its snapshot"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let leader = group.leader(&[0, 1, 2]).await;
    assert_identical_with(&group.converged().await, &acked);
    // A replica wiped after that catches up from the snapshot the leader loaded from disk.
    let wiped = (leader + 1) % 3;
    group.wipe(wiped).await;
    group.boot(wiped).await;
    let tables = group.converged().await;
    assert_identical_with(&tables, &acked);
    assert!(group.raft(wiped).status().snapshot_index.is_some());
    assert!(
        group.replicas[wiped]
            .dir
            .path()
            .join("raft-snapshot.json")
            .exists(),
        "the installed snapshot is not kept on disk"
    );
}

#[tokio::test]
async fn audit_rows_recorded_while_answering_are_on_disk_before_the_answer() {
    let group = Group::start(3, 1_000).await;
    group.leader(&[0, 1, 2]).await;
    let raft = group.raft(1).clone();
    let log = crate::audit::AuditLog::replicated(group.replicas[1].main.clone(), raft.clone());
    let actor = crate::audit::AuditActor::default();
    // Forty requests at once, each recording rows; no drain task runs here, so the rows stay spooled.
    let requests = (0..40).map(|n| {
        let (log, actor) = (log.clone(), actor.clone());
        crate::audit::with_durable_audit(async move {
            for k in 0..3 {
                log.record(
                    "test_row",
                    &actor,
                    None,
                    200,
                    Some(serde_json::json!({"n": n, "k": k})),
                );
            }
        })
    });
    futures::future::join_all(requests).await;
    assert_eq!(raft.spool.pending().await.expect("spool"), 120);
    // Another connection (the file as a restarted process would open it) sees them too.
    let reopened = log_store::open(&group.replicas[1].dir.path().join("raft.sqlite"))
        .await
        .expect("raft file");
    let on_disk: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit_spool")
        .fetch_one(&reopened)
        .await
        .expect("count");
    assert_eq!(on_disk, 120);
}

#[tokio::test]
async fn writes_survive_dropped_and_delayed_messages() {
    let group = Group::start(3, 1_000).await;
    group.leader(&[0, 1, 2]).await;
    group.net.drop_percent.store(15, Ordering::Relaxed);
    group.net.delay_ms.store(20, Ordering::Relaxed);
    let mut acked = Vec::new();
    for i in 0..20 {
        let id = format!("lossy{i}");
        if write_until_acked(&group, i % 3, &id).await {
            acked.push(id);
        }
    }
    group.net.drop_percent.store(0, Ordering::Relaxed);
    group.net.delay_ms.store(0, Ordering::Relaxed);
    assert!(!acked.is_empty());
    assert_identical_with(&group.converged().await, &acked);
}

#[tokio::test]
async fn the_last_admin_guard_is_decided_by_the_state_machine_on_every_replica() {
    let group = Group::start(3, 1_000).await;
    group.leader(&[0, 1, 2]).await;
    let admin = crate::keys::NewKey {
        name: "only-admin".into(),
        role: Some(wagate_proto::Role::Admin),
        ..Default::default()
    }
    .into_key("wag_admin_plaintext")
    .expect("key");
    group
        .raft(0)
        .write(MainCommand::CreateKey { key: admin.clone() })
        .await
        .expect("created");
    let refused = group
        .raft(1)
        .write(MainCommand::DeleteKey {
            id: admin.id.clone(),
            now: 2,
            caller: None,
        })
        .await
        .expect("committed");
    assert_eq!(
        refused,
        MainOutcome::Refused {
            refusal: maindb::Refusal::LastAdmin
        }
    );
    let tables = group.converged().await;
    assert_identical_with(&tables, &[]);
    assert_eq!(tables[0].keys.len(), 1);
}

impl Group {
    fn partition_groups(&self, ids: &[NodeId], left: &[usize], right: &[usize]) {
        let l: Vec<NodeId> = left.iter().map(|i| ids[*i]).collect();
        let r: Vec<NodeId> = right.iter().map(|i| ids[*i]).collect();
        self.net.partition(&l, &r);
    }
}
