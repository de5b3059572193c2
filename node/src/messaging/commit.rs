//! Group commit for the message store's write path. Every session's runtime (and every send) records its
//! message events one at a time and waits for each; on SQLite each of those was a transaction of its own, and a
//! transaction costs a write-lock turn, an fsync and a few round trips to the connection's thread. `GroupCommit`
//! is one task that takes whatever writes are waiting, applies them inside ONE transaction (each with its
//! outbox rows, as before), commits, and only then answers each caller. Within the transaction the inserts go
//! in a few multi-row statements and the status moves in one (see `apply_all` for when that equals applying
//! them one by one), because each statement is a round trip to the connection. Engine events do not wait for their
//! commit (their session loop moves on, so many events share a transaction); sends do. An engine event's
//! acknowledgement to the network (`engine::Ack`) rides with its write and is settled here after the commit
//! (`events::pipeline::settle`), so nothing is acknowledged that is not stored. A batch that fails is
//! retried write by write, so one bad write fails alone; an engine event the network will not send again
//! whose write failed only for the moment (the database away) is retried until it is stored, before the
//! writer takes anything more from its queue (the other writes of its own group may commit first). A committed
//! group counts the sends the network failed in `wagate_messages_failed_total`, once per message
//! (`failed_sends`). Input: [`Write`]s from the `Recorder`; it owns no SQL of its own.

use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

use crate::engine::{Ack, AckStatus};
use crate::events::pipeline::{
    FIRST_RETRY_PAUSE, KEEP_RETRYING, MAX_RETRY_PAUSE, OutboxIds, is_permanent, settle,
};
use crate::events::{Event, Pipeline};
use std::collections::HashMap;

use crate::store::message_writes;
use crate::store::messages::{self as message_store, MessageRow, StatusMove};
use crate::store::reactions::{self, ReactionRow};
use crate::store::status_updates::{self, NewStatus};
use crate::store::{self, DataPool, DataTx, StoreError, StoreResult};

/// Writes committed together at most.
const MAX_GROUP: usize = 256;

/// One event's store change. The event is published only when the change took effect (a message already
/// stored under its network id publishes nothing).
pub(crate) enum Change {
    Insert(Box<MessageRow>),
    Status {
        session_id: String,
        message_id: String,
        status: AckStatus,
        rank: i64,
    },
    Revoke {
        session_id: String,
        message_id: String,
    },
    Edit {
        session_id: String,
        message_id: String,
        body: String,
    },
    Reaction(ReactionRow),
    /// A status post (received, or the session's own); a repeat of a stored one publishes nothing.
    StatusPost(Box<NewStatus>),
}

pub(crate) struct Write {
    pub change: Change,
    pub event: Option<Event>,
}

/// Writes waiting at most; a caller beyond that waits for room (backpressure on the sessions' event loops).
const QUEUE_DEPTH: usize = 8192;

/// Writes queued or being written, so a stopping process can wait for them (`GroupCommit::flush`).
#[derive(Default)]
struct InFlight {
    count: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

/// One write's place in [`InFlight`], given back when the write is over, whichever way.
struct Counted(std::sync::Arc<InFlight>);

impl Counted {
    fn new(in_flight: &std::sync::Arc<InFlight>) -> Counted {
        in_flight
            .count
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Counted(in_flight.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self
            .0
            .count
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
            == 1
        {
            self.0.idle.notify_waiters();
        }
    }
}

struct Waiting {
    write: Write,
    _counted: Counted,
    /// `None`: nobody waits for the outcome (an engine event); the outcome settles `ack` here.
    done: Option<oneshot::Sender<StoreResult<()>>>,
    /// The network's acknowledgement of the traffic behind an engine event (`Ack::none()` for sends).
    ack: Ack,
}

impl Waiting {
    /// An engine event the network will not send again (a receipt, a group or call notification; the
    /// library acknowledged it on receipt) and nobody waits for: if its write fails, only this writer can
    /// still store it.
    fn only_here(&self) -> bool {
        self.done.is_none() && !self.ack.is_owed()
    }

    fn finish(self, result: StoreResult<()>) {
        match self.done {
            Some(done) => {
                let _ = done.send(result);
            }
            None => {
                let session_id = self
                    .write
                    .event
                    .as_ref()
                    .map_or("", |e| e.session_id.as_str());
                settle(self.ack, session_id, &result);
            }
        }
    }
}

#[derive(Clone)]
pub(crate) struct GroupCommit {
    writes: mpsc::Sender<Waiting>,
    in_flight: std::sync::Arc<InFlight>,
}

/// The writer is gone (shutdown): a failure that passes, so an engine event's traffic is redelivered.
fn stopped() -> StoreError {
    StoreError::Db(sqlx::Error::PoolClosed)
}

impl GroupCommit {
    /// Starts the committing task; it ends when every handle is dropped.
    pub(crate) fn spawn(db: DataPool, pipeline: Pipeline) -> GroupCommit {
        let (tx, rx) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(run(db, pipeline, rx));
        GroupCommit {
            writes: tx,
            in_flight: std::sync::Arc::default(),
        }
    }

    /// Waits (at most `budget`) until every write queued so far is committed or failed: a stopping
    /// process calls it after its sessions handed over their last events.
    pub(crate) async fn flush(&self, budget: std::time::Duration) {
        let idle = async {
            loop {
                let notified = self.in_flight.idle.notified();
                if self
                    .in_flight
                    .count
                    .load(std::sync::atomic::Ordering::Acquire)
                    == 0
                {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(budget, idle).await;
    }

    /// Applies `write` and publishes its event; answers once it is committed (or failed).
    pub(crate) async fn commit(&self, write: Write) -> StoreResult<()> {
        let (done, answer) = oneshot::channel();
        let waiting = Waiting {
            write,
            _counted: Counted::new(&self.in_flight),
            done: Some(done),
            ack: Ack::none(),
        };
        self.writes.send(waiting).await.map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    /// Queues `write` behind every earlier one (so a session's events keep their order) without waiting for
    /// its commit: an engine event's session loop goes on to its next event, and the writes of many events
    /// share a transaction. Waits only while the queue is full. `ack` is settled after the commit; it is
    /// dropped (the traffic redelivered) when the writer has stopped.
    pub(crate) async fn submit(&self, write: Write, ack: Ack) -> StoreResult<()> {
        let waiting = Waiting {
            write,
            _counted: Counted::new(&self.in_flight),
            done: None,
            ack,
        };
        self.writes.send(waiting).await.map_err(|_| stopped())
    }
}

async fn run(db: DataPool, pipeline: Pipeline, mut rx: mpsc::Receiver<Waiting>) {
    let mut recent = RecentStatuses::default();
    while let Some(first) = rx.recv().await {
        let mut group = vec![first];
        while group.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(more) => group.push(more),
                Err(_) => break,
            }
        }
        for w in &mut group {
            recent.apply_to(&mut w.write.change);
        }
        let span = group_span(&group);
        let writes: Vec<&Write> = group.iter().map(|w| &w.write).collect();
        match commit_group(&db, &pipeline, &writes).instrument(span).await {
            Ok((events, outbox)) => {
                pipeline.after_commit(events, outbox).await;
                for w in group {
                    w.finish(Ok(()));
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, writes = group.len(), "group commit failed; writing one by one");
                let mut unowed = Vec::new();
                for w in group {
                    match commit_one(&db, &pipeline, &w.write).await {
                        Err(e) if w.only_here() && !is_permanent(&e) => unowed.push(w),
                        result => w.finish(result),
                    }
                }
                retry_until_stored(&db, &pipeline, unowed).await;
            }
        }
    }
}

/// How long a status stays noted for a message whose row may still come, and how many are noted at most.
const RECENT_STATUS_KEEP: std::time::Duration = std::time::Duration::from_secs(60);
const RECENT_STATUS_MAX: usize = 65_536;

/// The statuses asked for lately, by message. An acknowledgement can reach the writer before the row of its
/// message (the network answers a send before the send path recorded it, or a receipt outruns the copy from
/// another device); applied alone it finds no row, and the row would then be stored with its first status
/// and stay there. Every insert takes the highest status noted for its message instead.
#[derive(Default)]
struct RecentStatuses {
    by_message: HashMap<(String, String), (AckStatus, i64, std::time::Instant)>,
}

impl RecentStatuses {
    /// Notes a status change; raises an insert's status to the highest noted for its message.
    fn apply_to(&mut self, change: &mut Change) {
        match change {
            Change::Status {
                session_id,
                message_id,
                status,
                rank,
            } => self.note(session_id, message_id, *status, *rank),
            Change::Insert(row) => {
                let noted = self
                    .by_message
                    .get(&(row.session_id.clone(), row.wa_message_id.clone()));
                if let Some((status, rank, at)) = noted
                    && at.elapsed() < RECENT_STATUS_KEEP
                    && *rank > stored_rank(&row.status)
                {
                    row.status = status.as_str().to_owned();
                }
            }
            _ => {}
        }
    }

    fn note(&mut self, session_id: &str, message_id: &str, status: AckStatus, rank: i64) {
        let now = std::time::Instant::now();
        if self.by_message.len() >= RECENT_STATUS_MAX {
            self.by_message
                .retain(|_, (_, _, at)| now.duration_since(*at) < RECENT_STATUS_KEEP);
            if self.by_message.len() >= RECENT_STATUS_MAX {
                self.by_message.clear();
            }
        }
        let entry = self
            .by_message
            .entry((session_id.to_owned(), message_id.to_owned()))
            .or_insert((status, rank, now));
        if rank > entry.1 {
            *entry = (status, rank, now);
        }
    }
}

/// The rank of a stored status, in the order `UPDATE_STATUS` moves forward by.
fn stored_rank(status: &str) -> i64 {
    match status {
        "pending" => 0,
        "sent" => 1,
        "delivered" => 2,
        "read" => 3,
        _ => 4,
    }
}

/// Writes that failed only for the moment and that nobody else keeps (see [`Waiting::only_here`]): retried
/// in order, with growing pauses, before the writer takes anything more from its queue, for up to
/// [`KEEP_RETRYING`].
/// Meanwhile the queue fills and the sessions' event loops wait for room (backpressure); past the budget a
/// write fails as before (logged and counted by `settle`).
async fn retry_until_stored(db: &DataPool, pipeline: &Pipeline, unowed: Vec<Waiting>) {
    if unowed.is_empty() {
        return;
    }
    tracing::warn!(
        writes = unowed.len(),
        "event writes failed for now; retrying them before anything else"
    );
    let deadline = tokio::time::Instant::now() + KEEP_RETRYING;
    let mut pause = FIRST_RETRY_PAUSE;
    let mut queue = std::collections::VecDeque::from(unowed);
    while let Some(w) = queue.pop_front() {
        match commit_one(db, pipeline, &w.write).await {
            Err(e) if !is_permanent(&e) && tokio::time::Instant::now() < deadline => {
                queue.push_front(w);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_RETRY_PAUSE);
            }
            result => w.finish(result),
        }
    }
}

/// One write in a transaction of its own, published after its commit.
async fn commit_one(db: &DataPool, pipeline: &Pipeline, write: &Write) -> StoreResult<()> {
    let (events, outbox) = commit_group(db, pipeline, &[write]).await?;
    pipeline.after_commit(events, outbox).await;
    Ok(())
}

/// The group commit's span: with traces exported, part of the first traced event's trace (the others' traces
/// continue from their own outbox-write spans).
fn group_span(group: &[Waiting]) -> tracing::Span {
    use wagate_workers::telemetry::{propagation, tracing_enabled};
    if !tracing_enabled() {
        return tracing::debug_span!("message_group_commit", writes = group.len());
    }
    let span = tracing::info_span!("message_group_commit", writes = group.len());
    let first = group
        .iter()
        .find_map(|w| w.write.event.as_ref().and_then(|e| e.trace.as_deref()));
    propagation::adopt_traceparent(&span, first);
    span
}

/// Applies the writes in one transaction with their outbox rows; returns the events to publish and the
/// outbox ids to enqueue.
async fn commit_group(
    db: &DataPool,
    pipeline: &Pipeline,
    writes: &[&Write],
) -> StoreResult<(Vec<Event>, OutboxIds)> {
    let mut tx = store::begin(db).await?;
    let effective = apply_all(&mut tx, writes).await?;
    let failed = failed_sends(&mut tx, writes, &effective).await?;
    let events: Vec<Event> = writes
        .iter()
        .zip(&effective)
        .filter(|(_, took)| **took)
        .filter_map(|(w, _)| w.event.clone())
        .collect();
    let outbox = pipeline.publish_in(&mut tx, &events).await?;
    let committed = tx.commit().await;
    message_writes::changed(writes.iter().map(|w| key(&w.change).0));
    committed?;
    for kind in failed {
        metrics::counter!(
            wagate_workers::telemetry::metrics::MESSAGES_FAILED,
            "type" => kind
        )
        .increment(1);
    }
    Ok((events, outbox))
}

/// The types of the sent messages this group records as failed by the network, for
/// `wagate_messages_failed_total` (counted once the group commits), each message once: a `failed` status
/// that took effect on a stored outgoing message, or an outgoing message stored already failed (its status
/// came first and was noted: [`RecentStatuses`]). A status that moved nothing (the message had failed
/// already) is not counted again, nor is a message without a row; a send the engine refused never has one,
/// and the send path counted it.
async fn failed_sends(
    tx: &mut DataTx,
    writes: &[&Write],
    effective: &[bool],
) -> StoreResult<Vec<&'static str>> {
    let mut counted: Vec<(&str, &str)> = Vec::new();
    let mut kinds = Vec::new();
    for (w, took) in writes.iter().zip(effective) {
        if !*took {
            continue;
        }
        let kind = match &w.change {
            Change::Status {
                session_id,
                message_id,
                status: AckStatus::Failed,
                ..
            } => match message_store::kind_and_direction(tx, session_id, message_id).await? {
                Some((kind, direction)) if direction == "outgoing" => kind,
                _ => continue,
            },
            Change::Insert(row)
                if w.event.is_some() && row.status == "failed" && row.direction == "outgoing" =>
            {
                row.kind.clone()
            }
            _ => continue,
        };
        let message = key(&w.change);
        if !counted.contains(&message) {
            counted.push(message);
            kinds.push(type_label(&kind));
        }
    }
    Ok(kinds)
}

/// A stored message type as a bounded metric label (`unknown` for anything else, e.g. `revoked`).
fn type_label(kind: &str) -> &'static str {
    crate::engine::MessageType::ALL
        .iter()
        .find(|t| t.as_str() == kind)
        .map_or("unknown", |t| t.as_str())
}

/// The message a change is about.
fn key(change: &Change) -> (&str, &str) {
    match change {
        Change::Insert(row) => (&row.session_id, &row.wa_message_id),
        Change::Status {
            session_id,
            message_id,
            ..
        }
        | Change::Revoke {
            session_id,
            message_id,
        }
        | Change::Edit {
            session_id,
            message_id,
            ..
        } => (session_id, message_id),
        Change::Reaction(row) => (&row.session_id, &row.wa_message_id),
        Change::StatusPost(row) => (&row.session_id, &row.status_id),
    }
}

/// Whether the group may be applied as: every insert first (a few multi-row statements), then every status
/// move (one statement), then the rest in order. That gives the same rows as applying them one by one unless
/// a change comes before an insert of its own message (it would have found no row), so then the group is
/// applied in order. Status moves, revokes, edits, reactions and status posts touch different columns or
/// tables, so they commute with each other, and a message's status moves add up to the highest one.
fn batchable(writes: &[&Write]) -> bool {
    let mut last_insert: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, w) in writes.iter().enumerate() {
        if let Change::Insert(_) = w.change {
            last_insert.insert(key(&w.change), i);
        }
    }
    writes.iter().enumerate().all(|(i, w)| {
        matches!(w.change, Change::Insert(_))
            || last_insert.get(&key(&w.change)).is_none_or(|at| *at < i)
    })
}

/// Applies the changes; answers, per write, whether it took effect in a way that publishes its event.
async fn apply_all(tx: &mut DataTx, writes: &[&Write]) -> StoreResult<Vec<bool>> {
    if writes.len() < 2 || !batchable(writes) {
        let mut effective = Vec::with_capacity(writes.len());
        for w in writes {
            effective.push(apply(tx, &w.change).await?);
        }
        return Ok(effective);
    }
    let rows: Vec<&MessageRow> = writes
        .iter()
        .filter_map(|w| match &w.change {
            Change::Insert(row) => Some(row.as_ref()),
            _ => None,
        })
        .collect();
    let inserted = message_store::insert_many(tx, &rows).await?;
    // The highest status asked for each message, in first-asked order.
    let mut moves: Vec<StatusMove<'_>> = Vec::new();
    let mut slot: HashMap<(&str, &str), usize> = HashMap::new();
    for w in writes {
        if let Change::Status {
            session_id,
            message_id,
            status,
            rank,
        } = &w.change
        {
            let mv = StatusMove {
                session_id,
                wa_message_id: message_id,
                status: status.as_str(),
                rank: *rank,
            };
            match slot
                .get(&(session_id.as_str(), message_id.as_str()))
                .and_then(|&i| moves.get_mut(i))
            {
                Some(earlier) => {
                    if earlier.rank < *rank {
                        *earlier = mv;
                    }
                }
                None => {
                    slot.insert((session_id, message_id), moves.len());
                    moves.push(mv);
                }
            }
        }
    }
    let moved = message_store::update_status_many(tx, &moves).await?;
    let mut stale: HashMap<(&str, &str), bool> = HashMap::new();
    let mut effective = Vec::with_capacity(writes.len());
    for w in writes {
        effective.push(match &w.change {
            Change::Insert(row) => inserted.contains(&row.id),
            Change::Status {
                session_id,
                message_id,
                ..
            } => {
                moved.contains(message_id)
                    || !is_stale_status(tx, &mut stale, session_id, message_id).await?
            }
            other => apply(tx, other).await?,
        });
    }
    Ok(effective)
}

/// Whether a status that moved nothing was stale: its message is stored with that status or a later one
/// (a receipt the network handed over again, e.g. after a restart), so its event went out before. A
/// status for a message not stored yet still publishes (its row may come later). Asked once per message.
async fn is_stale_status<'a>(
    tx: &mut DataTx,
    known: &mut HashMap<(&'a str, &'a str), bool>,
    session_id: &'a str,
    message_id: &'a str,
) -> StoreResult<bool> {
    if let Some(stale) = known.get(&(session_id, message_id)) {
        return Ok(*stale);
    }
    let stale = message_store::exists(tx, session_id, message_id).await?;
    known.insert((session_id, message_id), stale);
    Ok(stale)
}

/// Whether the change took effect in a way that publishes its event.
async fn apply(tx: &mut DataTx, change: &Change) -> StoreResult<bool> {
    match change {
        Change::Insert(row) => message_store::insert(tx, row).await,
        Change::Status {
            session_id,
            message_id,
            status,
            rank,
        } => {
            let moved =
                message_store::update_status(tx, session_id, message_id, status.as_str(), *rank)
                    .await?;
            Ok(moved || !message_store::exists(tx, session_id, message_id).await?)
        }
        Change::Revoke {
            session_id,
            message_id,
        } => {
            // A revoke delivered again, or an edit of a message deleted for everyone, changes no stored row
            // and announces nothing: a consumer would otherwise see the message revoked twice or its text
            // come back. A change to a message not stored (yet) still publishes.
            let revoked = message_store::mark_revoked(tx, session_id, message_id).await?;
            Ok(revoked || !message_store::exists(tx, session_id, message_id).await?)
        }
        Change::Edit {
            session_id,
            message_id,
            body,
        } => {
            let edited = message_store::set_body(tx, session_id, message_id, body).await?;
            Ok(edited || !message_store::exists(tx, session_id, message_id).await?)
        }
        Change::Reaction(row) => {
            reactions::apply(tx, row).await?;
            Ok(true)
        }
        Change::StatusPost(row) => status_updates::insert_in(tx, row).await,
    }
}
