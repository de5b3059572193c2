//! The replicated main DB with real processes: three `wagate` nodes (`MAIN_DB_REPLICATION=raft`, all three
//! voters) on one PostgreSQL data DB and Redis. A key created through one node works on another at once and
//! its revocation reaches every node; kill -9 of the leader during key writes elects another leader and
//! loses no acknowledged key and no audit row, nor does kill -9 of a node right after a burst of answers; a voter stopped past its election timeout and resumed never
//! gives two leaders in one term; the internal raft routes refuse requests without the cluster secret; a
//! node restarted after a key was revoked while it was down never accepts that key (it waits for its
//! replica to catch up, or answers 503, before it says ready).
//! Polls with budgets; no assertion on elapsed time (figures are printed).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
use wagate_loadtest::harness::sessions::create;
use wagate_loadtest::harness::{CLUSTER_SECRET, Client};

const BUDGET: Duration = Duration::from_secs(30);

async fn raft_cluster() -> TestCluster {
    let env = [
        ("MAIN_DB_REPLICATION", "raft"),
        // The default raft timeouts (100 ms heartbeat, 500-800 ms election timeouts).
        ("RAFT_VOTERS", "node-a,node-b,node-c"),
    ];
    let options = ClusterOptions {
        size: 3,
        timings: Timings::default(),
        worker_binary: None,
        env: env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let c = TestCluster::start_with(&binary(), options)
        .await
        .expect("cluster");
    // The admin key is applied through raft once a leader exists; each node then knows it.
    for i in 0..3 {
        wait_status(&c.client(i), "/api/auth/api-keys", 200).await;
    }
    c
}

/// The node binary: `WAGATE_TEST_BINARY` when set (a copy taken right after the build, since the shared target
/// dir's binary can be replaced by a concurrent build of another checkout), else cargo's.
fn binary() -> String {
    std::env::var("WAGATE_TEST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_wagate").to_string())
}

async fn wait_status(client: &Client, path: &str, status: u16) -> Value {
    let deadline = Instant::now() + BUDGET;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(reply) = client.get(path).await {
            if reply.status == status {
                return reply.body;
            }
            last = format!("{} {}", reply.status, reply.text);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{path} never answered {status}; last: {last}");
}

/// A node's raft status from its internal route (the harness holds the cluster secret).
async fn raft_status(client: &Client) -> Option<Value> {
    let req = client
        .raw(reqwest::Method::GET, "/internal/raft/status")
        .header("x-wagate-cluster-secret", CLUSTER_SECRET);
    // A stopped node never answers: a short budget keeps the observers moving.
    let reply = tokio::time::timeout(Duration::from_millis(500), client.send(req))
        .await
        .ok()?
        .ok()?;
    (reply.status == 200).then_some(reply.body)
}

/// The index of the node that leads, as the live nodes among `among` report it.
async fn leader_of(c: &TestCluster, among: &[usize]) -> usize {
    let deadline = Instant::now() + BUDGET;
    while Instant::now() < deadline {
        for i in among {
            if let Some(s) = raft_status(&c.client(*i)).await
                && s["role"] == "leader"
            {
                return *i;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no leader among {among:?}");
}

/// Creates an operator key; `(0, null)` when the node did not answer.
async fn create_key(client: &Client, name: &str) -> (u16, Value) {
    match client
        .post(
            "/api/auth/api-keys",
            json!({ "name": name, "role": "operator" }),
        )
        .await
    {
        Ok(reply) => (reply.status, reply.body),
        Err(_) => (0, Value::Null),
    }
}

#[tokio::test]
async fn a_key_created_on_one_node_works_on_another_at_once_and_a_revocation_reaches_every_node() {
    let c = raft_cluster().await;
    let (status, created) = create_key(&c.client(0), "made-on-a").await;
    assert_eq!(status, 201, "{created}");
    let plaintext = created["apiKey"].as_str().expect("plaintext").to_string();
    let id = created["id"].as_str().expect("id").to_string();
    // At once on node C: never a false 401 (an unknown key is checked against the leader first).
    let on_c = c.client(2).with_key(&plaintext);
    let check = on_c
        .post_empty("/api/auth/validate")
        .await
        .expect("validate");
    assert_eq!(check.status, 200, "{}", check.text);
    let revoked = c
        .client(2)
        .post_empty(&format!("/api/auth/api-keys/{id}/revoke"))
        .await
        .expect("revoke");
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    let on_a = c.client(0).with_key(&plaintext);
    let started = Instant::now();
    let deadline = started + BUDGET;
    loop {
        let reply = on_a
            .post_empty("/api/auth/validate")
            .await
            .expect("validate");
        if reply.status == 401 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the revoked key still works on A"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("revocation on C refused on A after {:?}", started.elapsed());
    // Every node lists the same keys, and every node's audit log has the rows of the others.
    let listed: Vec<BTreeSet<String>> = futures_ids(&c).await;
    assert!(listed.iter().all(|ids| ids == &listed[0]), "{listed:?}");
    let deadline = Instant::now() + BUDGET;
    loop {
        let mut seen = 0;
        for i in 0..3 {
            let audit = c
                .client(i)
                .get("/api/audit?action=api_key_revoked&limit=200")
                .await
                .expect("audit");
            seen +=
                usize::from(audit.body["data"].as_array().is_some_and(|rows| {
                    rows.iter().any(|r| r["metadata"]["keyId"] == id.as_str())
                }));
        }
        if seen == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the revocation's audit row is not on every node"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The internal routes take the cluster secret, never an API key.
    for secret in [None, Some("wrong-secret")] {
        let mut req = c
            .client(1)
            .raw(reqwest::Method::POST, "/internal/raft/vote")
            .body("{}");
        if let Some(secret) = secret {
            req = req.header("x-wagate-cluster-secret", secret);
        }
        let reply = c.client(1).send(req).await.expect("internal");
        assert_eq!(reply.status, 401, "{}", reply.text);
        assert_eq!(reply.body["message"], "A valid cluster secret is required");
    }
    let status = raft_status(&c.client(1)).await.expect("status");
    assert_eq!(status["members"].as_array().map(Vec::len), Some(3));
}

/// Operator writes with `key` on `client` in a loop until `stop`, from before the node listens; the status
/// of each answer, and whether it came after `ready` was set (the node's restart returned: it said ready).
fn hammer_config(
    client: Client,
    path: String,
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(u16, bool, String)>> {
    tokio::spawn(async move {
        let mut answers = Vec::new();
        let mut flip = false;
        while !stop.load(Ordering::Relaxed) {
            flip = !flip;
            let after_ready = ready.load(Ordering::Relaxed);
            match client
                .patch(&path, json!({ "autoRejectCalls": flip }))
                .await
            {
                Ok(reply) => answers.push((reply.status, after_ready, reply.text)),
                // Not listening yet.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
        answers
    })
}

#[tokio::test]
async fn a_node_restarted_after_a_revocation_made_while_it_was_down_never_accepts_the_revoked_key()
{
    let mut c = raft_cluster().await;
    let leader = leader_of(&c, &[0, 1, 2]).await;
    let down = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    let (status, created) = create_key(&c.client(leader), "revoked-while-down").await;
    assert_eq!(status, 201, "{created}");
    let plaintext = created["apiKey"].as_str().expect("plaintext").to_string();
    let id = created["id"].as_str().expect("id").to_string();
    let session = create(&c.client(leader), "revoked-while-down")
        .await
        .expect("session");
    let config = format!("/api/sessions/{session}/config");
    // The node to be stopped knows the key (its files hold it as active).
    wait_status(&c.client(down).with_key(&plaintext), &config, 200).await;
    c.nodes[down].kill9();
    let revoked = c
        .client(leader)
        .post_empty(&format!("/api/auth/api-keys/{id}/revoke"))
        .await
        .expect("revoke");
    assert_eq!(revoked.status, 200, "{}", revoked.text);
    wait_status(&c.client(other).with_key(&plaintext), &config, 401).await;

    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let hammer = hammer_config(
        c.client(down).with_key(&plaintext),
        config.clone(),
        stop.clone(),
        ready.clone(),
    );
    c.nodes[down].restart().await.expect("the node restarts");
    ready.store(true, Ordering::Relaxed);
    // Keep asking for a while after it said ready (the window the audit saw lasted up to 1.3 s).
    let on_down = c.client(down).with_key(&plaintext);
    for _ in 0..100 {
        let reply = on_down.get(&config).await.expect("config read");
        assert_eq!(reply.status, 401, "after ready: {}", reply.text);
    }
    stop.store(true, Ordering::Relaxed);
    let answers = hammer.await.expect("hammer");
    let accepted: Vec<&(u16, bool, String)> = answers.iter().filter(|(s, _, _)| *s < 300).collect();
    assert!(
        accepted.is_empty(),
        "the revoked key was accepted {} times out of {}: {accepted:?}",
        accepted.len(),
        answers.len()
    );
    assert!(
        answers
            .iter()
            .all(|(s, after_ready, _)| *s == 401 || (*s == 503 && !after_ready)),
        "{answers:?}"
    );
    let waiting = answers.iter().filter(|(s, _, _)| *s == 503).count();
    println!(
        "restarted node: {} answers with the revoked key, {waiting} of them 503 (catching up)",
        answers.len()
    );
}

async fn futures_ids(c: &TestCluster) -> Vec<BTreeSet<String>> {
    let mut all = Vec::new();
    for i in 0..3 {
        let body = wait_status(&c.client(i), "/api/auth/api-keys", 200).await;
        all.push(
            body.as_array()
                .map(|keys| {
                    keys.iter()
                        .filter_map(|k| k["id"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        );
    }
    all
}

#[tokio::test]
async fn kill_9_of_the_leader_during_key_writes_loses_no_acknowledged_key_and_no_audit_row() {
    let mut c = raft_cluster().await;
    let leader = leader_of(&c, &[0, 1, 2]).await;
    let old_term = raft_status(&c.client(leader)).await.expect("status")["term"]
        .as_u64()
        .unwrap_or(0);
    let writers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(parking_lot::Mutex::new(Vec::<String>::new()));
    let mut streams = Vec::new();
    for (w, node) in writers.iter().enumerate() {
        let (client, stop, acked) = (c.client(*node), stop.clone(), acked.clone());
        streams.push(tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                // Each creation is a key write and an audit row (`api_key_created`).
                if let (201, body) = create_key(&client, &format!("stream-{w}-{n}")).await
                    && let Some(id) = body["id"].as_str()
                {
                    acked.lock().push(id.to_string());
                }
            }
        }));
    }
    let deadline = Instant::now() + BUDGET;
    while acked.lock().len() < 10 {
        assert!(Instant::now() < deadline, "no key writes acknowledged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed_at = Instant::now();
    c.nodes[leader].kill9();
    let new_leader = leader_of(&c, &writers).await;
    let new_term = raft_status(&c.client(new_leader)).await.expect("status")["term"]
        .as_u64()
        .unwrap_or(0);
    println!("new leader after kill -9 in {:?}", killed_at.elapsed());
    assert!(new_term > old_term);
    let count_at_election = acked.lock().len();
    let deadline = Instant::now() + BUDGET;
    while acked.lock().len() < count_at_election + 10 {
        assert!(
            Instant::now() < deadline,
            "no key writes after the election"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for s in streams {
        let _ = s.await;
    }
    c.nodes[leader]
        .restart()
        .await
        .expect("old leader restarts");
    wait_status(&c.client(leader), "/api/auth/api-keys", 200).await;
    // A burst of key creations through one node, then kill -9 of that node the moment the last answer
    // arrived: each answered creation's audit row was on its disk before the answer, so none is lost.
    let burst_node = writers[0];
    let burst = futures::future::join_all((0..20).map(|n| {
        let client = c.client(burst_node);
        async move { create_key(&client, &format!("burst-{n}")).await }
    }))
    .await;
    c.nodes[burst_node].kill9();
    let burst_ids: Vec<String> = burst
        .iter()
        .filter(|(status, _)| *status == 201)
        .filter_map(|(_, body)| body["id"].as_str().map(str::to_string))
        .collect();
    assert!(
        !burst_ids.is_empty(),
        "no creation of the burst was answered"
    );
    acked.lock().extend(burst_ids);
    c.nodes[burst_node]
        .restart()
        .await
        .expect("the burst node restarts");
    let acked: BTreeSet<String> = acked.lock().iter().cloned().collect();
    // Every acknowledged key on every node, and its creation's audit row on every node.
    let deadline = Instant::now() + BUDGET;
    loop {
        let ids = futures_ids(&c).await;
        let mut audited: Vec<BTreeSet<String>> = Vec::new();
        for i in 0..3 {
            audited.push(audit_key_ids(&c.client(i), "api_key_created").await);
        }
        let keys_ok = ids.iter().all(|set| acked.is_subset(set));
        let audit_ok = audited.iter().all(|set| acked.is_subset(set));
        if keys_ok && audit_ok && ids.iter().all(|s| s == &ids[0]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "acknowledged writes missing: keys {:?}, audit {:?}",
            ids.iter()
                .map(|s| acked.difference(s).count())
                .collect::<Vec<_>>(),
            audited
                .iter()
                .map(|s| acked.difference(s).count())
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The `keyId`s of every audit row of `action` a node lists.
async fn audit_key_ids(client: &Client, action: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut offset = 0;
    loop {
        let page = client
            .get(&format!(
                "/api/audit?action={action}&limit=200&offset={offset}"
            ))
            .await
            .expect("audit");
        let rows = page.body["data"].as_array().cloned().unwrap_or_default();
        for r in &rows {
            if let Some(id) = r["metadata"]["keyId"].as_str() {
                ids.insert(id.to_string());
            }
        }
        if rows.len() < 200 {
            return ids;
        }
        offset += 200;
    }
}

#[tokio::test]
async fn a_voter_stopped_past_its_election_timeout_and_resumed_never_makes_two_leaders_in_a_term() {
    let c = raft_cluster().await;
    // The leader is the voter stopped: the others elect a new one while it still believes it leads.
    let paused = leader_of(&c, &[0, 1, 2]).await;
    let others: Vec<usize> = (0..3).filter(|i| *i != paused).collect();
    // term -> the nodes that said they led in it.
    let mut leaders: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    c.nodes[paused].pause();
    // Past the election timeout (lease 0.8 s + at most 0.8 s): a new leader among the others.
    leader_of(&c, &others).await;
    for _ in 0..10 {
        observe(&c, &mut leaders).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.nodes[paused].resume();
    for _ in 0..30 {
        observe(&c, &mut leaders).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!leaders.is_empty());
    for (term, names) in &leaders {
        assert_eq!(names.len(), 1, "term {term} had leaders {names:?}");
    }
    // The cluster still commits writes through the resumed node.
    let (status, body) = create_key(&c.client(paused), "after-resume").await;
    assert_eq!(status, 201, "{body}");
}

/// Records which node claims to lead in which term, as each node reports itself.
async fn observe(c: &TestCluster, leaders: &mut BTreeMap<u64, BTreeSet<String>>) {
    for i in 0..3 {
        if let Some(s) = raft_status(&c.client(i)).await
            && s["role"] == "leader"
        {
            let term = s["term"].as_u64().unwrap_or(0);
            let name = s["nodeId"].as_str().unwrap_or_default().to_string();
            leaders.entry(term).or_default().insert(name);
        }
    }
}
