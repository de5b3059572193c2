//! Acknowledgement after commit for the socket engine. whatsapp-rust 0.7 defers its acknowledgement of a
//! received message (the delivery receipt or transport ack that makes the server drop it from the device's
//! offline queue) while an `InboundDurabilityHook` is registered: it buffers the decrypted message in the
//! session's store (`socket_*` pending-inbound rows), calls the hook, and acknowledges only when the hook
//! answers `Ok`; on `Err` or a crash the server redelivers and the library replays from its buffer.
//! `CommitGate` is that hook: it hands the batch's messages to the session's receive worker as
//! `Work::Gated`, whose events carry acknowledgements (`engine::Ack`) the event write path settles after
//! the commit, and answers `Ok` only once every one of them was committed. `Settlement` collects them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::whatsapp_rust::types::events::InboundMessage as LibInbound;
use crate::whatsapp_rust::{Client, InboundDurabilityHook};
use async_trait::async_trait;
use parking_lot::Mutex;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use super::events::{Work, classify_batch};
use wagate_engine_api::Ack;

/// The library's durability hook for one client.
pub(super) struct CommitGate {
    work: UnboundedSender<Work>,
}

impl CommitGate {
    pub(super) fn new(work: UnboundedSender<Work>) -> CommitGate {
        CommitGate { work }
    }
}

#[async_trait]
impl InboundDurabilityHook for CommitGate {
    async fn on_messages(&self, _client: Arc<Client>, batch: &[LibInbound]) -> anyhow::Result<()> {
        let (done, committed) = oneshot::channel();
        let gated = Work::Gated {
            items: classify_batch(batch),
            done,
        };
        if self.work.send(gated).is_err() {
            anyhow::bail!("the session's receive worker has stopped; the server redelivers");
        }
        match committed.await {
            Ok(true) => Ok(()),
            _ => anyhow::bail!("not committed; the server redelivers"),
        }
    }
}

/// Answers `done` once `count` acknowledgements are settled: `true` only if all were taken.
pub(crate) struct Settlement {
    left: AtomicUsize,
    all_taken: AtomicBool,
    done: Mutex<Option<oneshot::Sender<bool>>>,
}

impl Settlement {
    pub(crate) fn new(count: usize, done: oneshot::Sender<bool>) -> Arc<Settlement> {
        let settlement = Arc::new(Settlement {
            left: AtomicUsize::new(count),
            all_taken: AtomicBool::new(true),
            done: Mutex::new(Some(done)),
        });
        if count == 0 {
            settlement.answer();
        }
        settlement
    }

    /// The acknowledgement of one of the `count` events.
    pub(crate) fn ack(self: &Arc<Self>) -> Ack {
        let settlement = self.clone();
        Ack::new(move |taken: bool| {
            if !taken {
                settlement.all_taken.store(false, Ordering::SeqCst);
            }
            if settlement.left.fetch_sub(1, Ordering::SeqCst) == 1 {
                settlement.answer();
            }
        })
    }

    fn answer(&self) {
        if let Some(done) = self.done.lock().take() {
            let _ = done.send(self.all_taken.load(Ordering::SeqCst));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_is_committed_only_when_every_event_was() {
        let (done, answer) = oneshot::channel();
        let settled = Settlement::new(2, done);
        let (a, b) = (settled.ack(), settled.ack());
        a.complete();
        b.complete();
        assert_eq!(answer.await.ok(), Some(true));

        let (done, answer) = oneshot::channel();
        let settled = Settlement::new(2, done);
        let (a, b) = (settled.ack(), settled.ack());
        a.complete();
        drop(b);
        assert_eq!(answer.await.ok(), Some(false), "one refused: redelivered");

        let (done, answer) = oneshot::channel();
        let _ = Settlement::new(0, done);
        assert_eq!(answer.await.ok(), Some(true), "nothing to commit");
    }
}
