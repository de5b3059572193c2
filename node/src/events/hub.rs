//! The live fan-out of events (WebSocket sockets, the automation matcher). Two in-process broadcast feeds:
//! `subscribe` carries the events raised on this node (automation, so a rule replies once, on the node that
//! owns the session), `subscribe_cluster` every event raised anywhere in the cluster (WebSockets).
//! In a cluster (`attach_cluster`) each event raised here is published once on the Redis channel
//! `{REDIS_KEY_PREFIX}events` with this node's id; every node's listener feeds the events of *other* nodes
//! into its cluster feed, so a socket on the raising node never sees an event twice. Scope and QR
//! visibility are applied by each socket on the receiving node, as for local events. The live feed is
//! best effort (webhooks are the durable path): an event published while Redis is away is not replayed.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use deadpool_redis::{Pool, redis};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use wagate_proto::EventName;

use super::Event;

/// How many events a slow live subscriber may fall behind before it misses some (it is told it lagged).
const BUS_CAPACITY: usize = 4096;
/// Events published to Redis in one round trip.
const PUBLISH_BATCH: usize = 256;
/// Pause before the listener reconnects after Redis went away.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

#[derive(Clone)]
pub(crate) struct Hub {
    local: broadcast::Sender<Arc<Event>>,
    cluster: broadcast::Sender<Arc<Event>>,
    /// The Redis publisher's queue, once the node joined a cluster.
    outbound: Arc<OnceLock<mpsc::UnboundedSender<Arc<Event>>>>,
}

impl Default for Hub {
    fn default() -> Self {
        let (local, _) = broadcast::channel(BUS_CAPACITY);
        let (cluster, _) = broadcast::channel(BUS_CAPACITY);
        Hub {
            local,
            cluster,
            outbound: Arc::new(OnceLock::new()),
        }
    }
}

/// An event as it crosses between nodes.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Wire {
    origin: String,
    name: EventName,
    session_id: String,
    data: serde_json::Value,
    occurred_at_ms: i64,
    idempotency_key: String,
}

/// Where a cluster's events meet.
pub(crate) struct ClusterLink {
    pub pool: Pool,
    pub redis_url: String,
    pub node_id: String,
    pub prefix: String,
}

impl ClusterLink {
    fn channel(&self) -> String {
        format!("{}events", self.prefix)
    }
}

impl Hub {
    /// An event raised on this node.
    pub(crate) fn publish(&self, event: Arc<Event>) {
        // No live subscriber is not an error: the outbox already holds what webhooks need.
        let _ = self.local.send(event.clone());
        if let Some(outbound) = self.outbound.get() {
            let _ = outbound.send(event.clone());
        }
        let _ = self.cluster.send(event);
    }

    /// Events raised on this node.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.local.subscribe()
    }

    /// Events raised on any node of the cluster (this node's only, in embedded mode).
    pub(crate) fn subscribe_cluster(&self) -> broadcast::Receiver<Arc<Event>> {
        self.cluster.subscribe()
    }

    /// Joins the cluster-wide fan-out: subscribes to the cluster's channel before returning (a node that
    /// answers requests already hears every other node's events), then starts the publisher and the
    /// listener (they end with `shutdown`).
    pub(crate) async fn attach_cluster(
        &self,
        link: ClusterLink,
        shutdown: CancellationToken,
    ) -> Result<(), redis::RedisError> {
        let client = redis::Client::open(link.redis_url.as_str())?;
        let first = subscribe(&client, &link.channel()).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        if self.outbound.set(tx).is_err() {
            return Ok(());
        }
        let link = Arc::new(link);
        tokio::spawn(publish_loop(link.clone(), rx, shutdown.clone()));
        let listener = listen_loop(link, client, first, self.cluster.clone(), shutdown);
        tokio::spawn(listener);
        Ok(())
    }
}

async fn subscribe(
    client: &redis::Client,
    channel: &str,
) -> Result<redis::aio::PubSub, redis::RedisError> {
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(channel).await?;
    Ok(pubsub)
}

async fn publish_loop(
    link: Arc<ClusterLink>,
    mut rx: mpsc::UnboundedReceiver<Arc<Event>>,
    shutdown: CancellationToken,
) {
    let channel = link.channel();
    let mut batch = Vec::with_capacity(PUBLISH_BATCH);
    loop {
        let got = tokio::select! {
            _ = shutdown.cancelled() => return,
            got = rx.recv_many(&mut batch, PUBLISH_BATCH) => got,
        };
        if got == 0 {
            return;
        }
        let mut pipe = redis::pipe();
        for event in batch.drain(..) {
            let wire = Wire {
                origin: link.node_id.clone(),
                name: event.name,
                session_id: event.session_id.clone(),
                data: event.data.clone(),
                occurred_at_ms: event.occurred_at_ms,
                idempotency_key: event.idempotency_key.clone(),
            };
            match serde_json::to_string(&wire) {
                Ok(text) => {
                    pipe.cmd("PUBLISH").arg(&channel).arg(text).ignore();
                }
                Err(error) => tracing::warn!(%error, "event not fanned out"),
            }
        }
        let sent = match link.pool.get().await {
            Ok(mut conn) => pipe
                .query_async::<()>(&mut *conn)
                .await
                .map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        };
        if let Err(error) = sent {
            tracing::warn!(%error, "events not fanned out to the cluster");
        }
    }
}

async fn listen_loop(
    link: Arc<ClusterLink>,
    client: redis::Client,
    first: redis::aio::PubSub,
    feed: broadcast::Sender<Arc<Event>>,
    shutdown: CancellationToken,
) {
    let channel = link.channel();
    let mut live = Some(first);
    while !shutdown.is_cancelled() {
        let subscribed = match live.take() {
            Some(pubsub) => Ok(pubsub),
            None => subscribe(&client, &channel).await,
        };
        let mut pubsub = match subscribed {
            Ok(pubsub) => pubsub,
            Err(error) => {
                tracing::warn!(%error, "cluster event listener cannot subscribe; retrying");
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
        };
        let mut messages = pubsub.on_message();
        loop {
            let msg = tokio::select! {
                _ = shutdown.cancelled() => return,
                msg = messages.next() => msg,
            };
            let Some(msg) = msg else { break };
            let Ok(text) = msg.get_payload::<String>() else {
                continue;
            };
            match serde_json::from_str::<Wire>(&text) {
                // Our own events reached our sockets when they were raised.
                Ok(wire) if wire.origin == link.node_id => {}
                Ok(wire) => {
                    let event = Event {
                        name: wire.name,
                        session_id: wire.session_id,
                        data: wire.data,
                        occurred_at_ms: wire.occurred_at_ms,
                        idempotency_key: wire.idempotency_key,
                        // Live fan-out only: another node's event has no deliveries here to trace.
                        trace: None,
                    };
                    let _ = feed.send(Arc::new(event));
                }
                Err(error) => tracing::warn!(%error, "unreadable cluster event skipped"),
            }
        }
        tracing::warn!("cluster event listener lost its connection; reconnecting");
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}
