//! The live fan-out of events on this node (WebSocket sockets, the automation matcher). One in-process
//! broadcast channel today; cluster fan-out over Redis pub/sub would slot in behind the same two methods.

use std::sync::Arc;

use tokio::sync::broadcast;

use super::Event;

/// How many events a slow live subscriber may fall behind before it misses some (it is told it lagged).
const BUS_CAPACITY: usize = 4096;

#[derive(Clone)]
pub(crate) struct Hub {
    bus: broadcast::Sender<Arc<Event>>,
}

impl Default for Hub {
    fn default() -> Self {
        let (bus, _) = broadcast::channel(BUS_CAPACITY);
        Hub { bus }
    }
}

impl Hub {
    pub(crate) fn publish(&self, event: Arc<Event>) {
        // No live subscriber is not an error: the outbox already holds what webhooks need.
        let _ = self.bus.send(event);
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.bus.subscribe()
    }
}
