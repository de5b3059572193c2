//! `raft`: the replicated main DB (`MAIN_DB_REPLICATION=raft`) on three `wagate` nodes (all voters) with
//! PostgreSQL and Redis, against one embedded node for comparison. Prints key-check latency on a follower
//! and on the embedded node (p50/p99, sequential), key-create latency through a follower (p50/p99,
//! sequential), key creations per second through the followers with C concurrent clients and the rate at
//! which their audit rows reached every node, and the time from kill -9 of the leader (during a stream of
//! key creations, `--kills` rounds, the victim restarted between rounds) until a survivor reports a new
//! leader in a higher term.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use wagate_loadtest::harness::cluster::{ClusterOptions, TestCluster, Timings};
use wagate_loadtest::harness::{CLUSTER_SECRET, Client, Node, NodeOptions};

use super::arg;

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)].as_secs_f64() * 1000.0
}

async fn status(client: &Client) -> Option<Value> {
    let req = client
        .raw(reqwest::Method::GET, "/internal/raft/status")
        .header("x-wagate-cluster-secret", CLUSTER_SECRET);
    let reply = tokio::time::timeout(Duration::from_millis(500), client.send(req))
        .await
        .ok()?
        .ok()?;
    (reply.status == 200).then_some(reply.body)
}

async fn leader(c: &TestCluster, among: &[usize], above_term: u64) -> anyhow::Result<(usize, u64)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        for i in among {
            if let Some(s) = status(&c.client(*i)).await
                && s["role"] == "leader"
                && s["term"].as_u64().unwrap_or(0) > above_term
            {
                return Ok((*i, s["term"].as_u64().unwrap_or(0)));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("no leader among {among:?}")
}

/// Sequential `POST /api/auth/validate` latencies.
async fn key_checks(client: &Client, count: usize) -> Vec<Duration> {
    let mut took = Vec::with_capacity(count);
    for _ in 0..count {
        let start = Instant::now();
        if let Ok(reply) = client.post_empty("/api/auth/validate").await
            && reply.status == 200
        {
            took.push(start.elapsed());
        }
    }
    took.sort();
    took
}

async fn create(client: &Client, name: &str) -> bool {
    client
        .post(
            "/api/auth/api-keys",
            json!({ "name": name, "role": "viewer" }),
        )
        .await
        .is_ok_and(|r| r.status == 201)
}

async fn audit_total(client: &Client) -> i64 {
    client
        .get("/api/audit?action=api_key_created&limit=1")
        .await
        .ok()
        .and_then(|r| r.body["total"].as_i64())
        .unwrap_or(0)
}

pub(crate) async fn run(args: &[String]) -> anyhow::Result<()> {
    let binary = arg(args, "--binary", "target/release/wagate");
    let checks: usize = arg(args, "--checks", "2000").parse()?;
    let creates: usize = arg(args, "--creates", "200").parse()?;
    let concurrency: usize = arg(args, "--concurrency", "8").parse()?;
    let kills: usize = arg(args, "--kills", "5").parse()?;
    let env = [
        ("MAIN_DB_REPLICATION", "raft"),
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
    let mut c = TestCluster::start_with(&binary, options).await?;
    let (lead, term) = leader(&c, &[0, 1, 2], 0).await?;
    let followers: Vec<usize> = (0..3).filter(|i| *i != lead).collect();
    let follower = c.client(followers[0]);
    // The admin key reaches every node through raft.
    let deadline = Instant::now() + Duration::from_secs(60);
    while follower.get("/api/auth/api-keys").await?.status != 200 {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the admin key never reached the follower"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let embedded = Node::start(NodeOptions::new(&binary)).await?;
    let on_follower = key_checks(&follower, checks).await;
    let on_embedded = key_checks(&embedded.client(), checks).await;
    println!(
        "key check (POST /api/auth/validate, sequential, {checks}): follower p50 {:.2} ms p99 {:.2} ms; embedded p50 {:.2} ms p99 {:.2} ms",
        percentile(&on_follower, 0.5),
        percentile(&on_follower, 0.99),
        percentile(&on_embedded, 0.5),
        percentile(&on_embedded, 0.99)
    );
    let mut took = Vec::with_capacity(creates);
    for n in 0..creates {
        let start = Instant::now();
        if create(&follower, &format!("bench-seq-{n}")).await {
            took.push(start.elapsed());
        }
    }
    took.sort();
    println!(
        "key create through a follower (sequential, {} ok of {creates}): p50 {:.2} ms p99 {:.2} ms",
        took.len(),
        percentile(&took, 0.5),
        percentile(&took, 0.99)
    );
    let before = audit_total(&c.client(lead)).await;
    let clients: Vec<Client> = followers.iter().map(|i| c.client(*i)).collect();
    let start = Instant::now();
    let ok = futures::stream::iter(0..creates * 2)
        .map(|n| {
            let client = clients[n % clients.len()].clone();
            async move { create(&client, &format!("bench-par-{n}")).await }
        })
        .buffer_unordered(concurrency)
        .filter(|ok| futures::future::ready(*ok))
        .count()
        .await;
    let writes = start.elapsed();
    let target = before + ok as i64;
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..3 {
        while audit_total(&c.client(i)).await < target {
            anyhow::ensure!(
                Instant::now() < deadline,
                "audit rows did not reach node {i}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let audited = start.elapsed();
    println!(
        "concurrent creates through the followers (c={concurrency}): {ok} in {:.2} s = {:.0}/s; their audit rows on every node after {:.2} s = {:.0} rows/s",
        writes.as_secs_f64(),
        ok as f64 / writes.as_secs_f64(),
        audited.as_secs_f64(),
        ok as f64 / audited.as_secs_f64()
    );
    // Kill -9 of the leader, `kills` times, each during a stream of key creations through the two other
    // nodes (so the survivors' logs may differ by the entries in flight); the victim restarts and rejoins
    // before the next round.
    let mut lead = lead;
    let mut term = term;
    let mut elections = Vec::with_capacity(kills);
    for round in 0..kills {
        let others: Vec<usize> = (0..3).filter(|i| *i != lead).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let streams: Vec<_> = others
            .iter()
            .map(|i| {
                let (client, stop) = (c.client(*i), stop.clone());
                tokio::spawn(async move {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let _ = create(&client, &format!("bench-kill-{round}-{n}")).await;
                    }
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let killed = Instant::now();
        c.nodes[lead].kill9();
        let (next, next_term) = leader(&c, &others, term).await?;
        let took = killed.elapsed();
        println!(
            "kill -9 of the leader ({}) during writes, round {}: {} leads term {next_term} after {:.2} s",
            c.ids[lead],
            round + 1,
            c.ids[next],
            took.as_secs_f64()
        );
        elections.push(took);
        stop.store(true, Ordering::Relaxed);
        for s in streams {
            let _ = s.await;
        }
        c.nodes[lead].restart().await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let back = status(&c.client(lead)).await;
            // Back as a follower of the current term (a restarted leader may briefly report its old term).
            if back.is_some_and(|s| {
                s["role"] == "follower" && s["term"].as_u64().unwrap_or(0) >= next_term
            }) {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "{} did not rejoin", c.ids[lead]);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        (lead, term) = leader(&c, &[0, 1, 2], next_term.saturating_sub(1)).await?;
    }
    elections.sort();
    println!(
        "time to elect after kill -9 (default timeouts, {} rounds): min {:.2} s, p50 {:.2} s, max {:.2} s",
        elections.len(),
        percentile(&elections, 0.0) / 1000.0,
        percentile(&elections, 0.5) / 1000.0,
        percentile(&elections, 1.0) / 1000.0
    );
    Ok(())
}
