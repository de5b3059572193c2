//! The acknowledgement an engine owes the network for traffic it received (`Ack`), and the channel that
//! carries engine events with it to the session's supervisor (`EventSender`, `Incoming`). The network keeps
//! traffic for a device until the device acknowledges it; the engine hands the acknowledgement over with the
//! event instead of sending it on receipt, and the event write path (`events::settle`) completes it only once
//! the event's transaction has committed. An `Ack` dropped without `complete` is a refusal: the network
//! redelivers the traffic (at the device's next connection, or sooner).

use std::fmt;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::EngineEvent;

/// Where an acknowledgement goes: told once whether the traffic was taken (`true`) or refused (`false`).
pub trait AckSink: Send + 'static {
    fn settle(self: Box<Self>, taken: bool);
}

impl<F: FnOnce(bool) + Send + 'static> AckSink for F {
    fn settle(self: Box<Self>, taken: bool) {
        (*self)(taken)
    }
}

/// The acknowledgement of one piece of received traffic. `complete` after the commit; dropping it
/// refuses the traffic. An `Ack::none()` owes nothing (lifecycle events, engines that acknowledge on their own).
#[must_use = "an Ack dropped without complete() makes the network redeliver"]
pub struct Ack {
    sink: Option<Box<dyn AckSink>>,
}

impl Ack {
    pub fn none() -> Ack {
        Ack { sink: None }
    }

    pub fn new(sink: impl AckSink) -> Ack {
        Ack {
            sink: Some(Box::new(sink)),
        }
    }

    /// Whether the network waits for this acknowledgement.
    pub fn is_owed(&self) -> bool {
        self.sink.is_some()
    }

    /// Lets go of the handle without an answer either way (the caller keeps the traffic itself).
    pub fn disarm(mut self) {
        self.sink.take();
    }

    /// The traffic is durably ours: the network may forget it.
    pub fn complete(mut self) {
        if let Some(sink) = self.sink.take() {
            sink.settle(true);
        }
    }
}

impl Drop for Ack {
    fn drop(&mut self) {
        if let Some(sink) = self.sink.take() {
            sink.settle(false);
        }
    }
}

impl fmt::Debug for Ack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_owed() {
            "Ack(owed)"
        } else {
            "Ack(none)"
        })
    }
}

/// An engine event with the acknowledgement its traffic is owed.
#[derive(Debug)]
pub struct Incoming {
    pub event: EngineEvent,
    pub ack: Ack,
}

/// The sending half of a session's event channel. Unbounded on purpose: engines (the sim above all) emit
/// while holding their own locks and must never wait on the supervisor.
#[derive(Debug, Clone)]
pub struct EventSender(UnboundedSender<Incoming>);

impl EventSender {
    /// Sends an event that owes the network nothing. Gives the event back when the receiver is gone.
    pub fn send(&self, event: EngineEvent) -> Result<(), Box<EngineEvent>> {
        self.send_acked(event, Ack::none())
            .map_err(|unsent| Box::new(unsent.event))
    }

    /// Sends received traffic with its acknowledgement. Gives both back when the receiver is gone.
    pub fn send_acked(&self, event: EngineEvent, ack: Ack) -> Result<(), Box<Incoming>> {
        self.0
            .send(Incoming { event, ack })
            .map_err(|unsent| Box::new(unsent.0))
    }

    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// A new event channel: the engine's sender and the supervisor's receiver.
pub fn event_channel() -> (EventSender, UnboundedReceiver<Incoming>) {
    let (tx, rx) = unbounded_channel();
    (EventSender(tx), rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI32, Ordering};

    fn counting() -> (Arc<AtomicI32>, Ack) {
        let seen = Arc::new(AtomicI32::new(0));
        let sink = seen.clone();
        let ack = Ack::new(move |taken: bool| {
            sink.store(if taken { 1 } else { -1 }, Ordering::SeqCst);
        });
        (seen, ack)
    }

    #[test]
    fn complete_takes_and_drop_refuses_once() {
        let (seen, ack) = counting();
        ack.complete();
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        let (seen, ack) = counting();
        drop(ack);
        assert_eq!(seen.load(Ordering::SeqCst), -1);
        assert!(!Ack::none().is_owed());
    }

    #[test]
    fn a_closed_channel_gives_the_ack_back_unsettled() {
        let (tx, rx) = event_channel();
        drop(rx);
        let (seen, ack) = counting();
        let unsent = tx.send_acked(EngineEvent::Ready, ack).unwrap_err();
        assert_eq!(seen.load(Ordering::SeqCst), 0);
        drop(unsent);
        assert_eq!(seen.load(Ordering::SeqCst), -1);
    }
}
