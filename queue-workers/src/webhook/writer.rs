//! Group commit for the delivery worker's outbox writes. Every job claims its rows and then records its
//! successes; on SQLite each of those was a transaction of its own, and each commit waits for the process's
//! one write turn and an fsync (about a millisecond here), so concurrent jobs queued behind each other's
//! commits. `OutboxWriter` is one task that takes every claim and every settle waiting, applies them in ONE
//! transaction (`outbox::claim_and_settle`), and answers each caller with its own part. A group that fails is
//! retried op by op, so one bad op fails alone. Failures and retries stay row by row in `retry.rs`.

use tokio::sync::{mpsc, oneshot};

use crate::db::{DataPool, now_ms};

use super::store::StoreError;
use super::store::outbox::{self, ClaimedAttempt, Success};

/// Ops applied together at most.
const MAX_GROUP: usize = 64;

enum Op {
    Claim {
        ids: Vec<String>,
        done: oneshot::Sender<Result<Vec<ClaimedAttempt>, StoreError>>,
    },
    Settle {
        successes: Vec<Success>,
        done: oneshot::Sender<Result<(), StoreError>>,
    },
}

/// A handle on the writing task; cheap to clone.
#[derive(Debug, Clone)]
pub struct OutboxWriter {
    ops: mpsc::UnboundedSender<Op>,
}

/// What the writing task owns: the pool and the name its claims are made in.
struct Target {
    pool: DataPool,
    claimer: String,
}

fn stopped() -> StoreError {
    StoreError::WriterStopped
}

impl OutboxWriter {
    /// Starts the writing task (inside a tokio runtime); it ends when every handle is dropped. Claims are made
    /// in the name of `claimer` (this process's `NODE_ID`).
    pub fn spawn(pool: DataPool, claimer: String) -> OutboxWriter {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(Target { pool, claimer }, rx));
        OutboxWriter { ops: tx }
    }

    /// Claims one attempt of every due, waiting row among `ids` (see `outbox::claim_many`).
    pub async fn claim(&self, ids: Vec<String>) -> Result<Vec<ClaimedAttempt>, StoreError> {
        let (done, answer) = oneshot::channel();
        self.ops
            .send(Op::Claim { ids, done })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Records 2xx attempts (see `outbox::record_successes`).
    pub async fn settle(&self, successes: Vec<Success>) -> Result<(), StoreError> {
        if successes.is_empty() {
            return Ok(());
        }
        let (done, answer) = oneshot::channel();
        self.ops
            .send(Op::Settle { successes, done })
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

async fn run(target: Target, mut rx: mpsc::UnboundedReceiver<Op>) {
    let mut group = Vec::with_capacity(MAX_GROUP);
    while rx.recv_many(&mut group, MAX_GROUP).await > 0 {
        let ops = std::mem::take(&mut group);
        if ops.len() == 1 {
            for op in ops {
                apply_alone(&target, op).await;
            }
            continue;
        }
        let mut claim_ids: Vec<String> = Vec::new();
        let mut successes: Vec<Success> = Vec::new();
        for op in &ops {
            match op {
                Op::Claim { ids, .. } => claim_ids.extend(ids.iter().cloned()),
                Op::Settle { successes: s, .. } => successes.extend(s.iter().cloned()),
            }
        }
        let (pool, claimer) = (&target.pool, target.claimer.as_str());
        match outbox::claim_and_settle(pool, &claim_ids, claimer, &successes, now_ms()).await {
            Ok(claimed) => hand_out(ops, claimed),
            Err(e) => {
                tracing::debug!(error = %e, ops = ops.len(), "outbox group failed; writing op by op");
                for op in ops {
                    apply_alone(&target, op).await;
                }
            }
        }
    }
}

/// Gives each claimer the rows it asked for; a row two jobs asked for goes to the first (it was claimed once).
fn hand_out(ops: Vec<Op>, claimed: Vec<ClaimedAttempt>) {
    let mut claimed: std::collections::HashMap<String, ClaimedAttempt> =
        claimed.into_iter().map(|c| (c.id.clone(), c)).collect();
    for op in ops {
        match op {
            Op::Claim { ids, done } => {
                let mine = ids.iter().filter_map(|id| claimed.remove(id)).collect();
                let _ = done.send(Ok(mine));
            }
            Op::Settle { done, .. } => {
                let _ = done.send(Ok(()));
            }
        }
    }
}

async fn apply_alone(target: &Target, op: Op) {
    let (pool, claimer) = (&target.pool, target.claimer.as_str());
    match op {
        Op::Claim { ids, done } => {
            let _ = done.send(outbox::claim_and_settle(pool, &ids, claimer, &[], now_ms()).await);
        }
        Op::Settle { successes, done } => {
            let result = outbox::claim_and_settle(pool, &[], claimer, &successes, now_ms())
                .await
                .map(|_| ());
            let _ = done.send(result);
        }
    }
}
