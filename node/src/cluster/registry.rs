//! The live-node registry: each node publishes `{prefix}node:{nodeId}` (its URL, loaded session count,
//! draining flag, whether it hosts sessions, heartbeat time) with a TTL on every heartbeat and lists itself
//! in `{prefix}nodes`. A node whose key expired is not live. Written by `heartbeat.rs`, read by forwarding,
//! the takeover sweep, the handover and the raft membership (a `ROLE=worker` node is listed, so a raft
//! replica on it stays reachable, but as no session host).

use std::time::Duration;

use deadpool_redis::{Pool, redis};
use serde::{Deserialize, Serialize};

use super::lease_redis::RedisError;

/// One live node as it last announced itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeInfo {
    pub node_id: String,
    pub url: String,
    pub sessions: usize,
    pub is_draining: bool,
    /// False for a `ROLE=worker` node: placement and handover deal it nothing. An announcement without
    /// the field (a node older than it) is a session host, as every node was then.
    #[serde(default = "hosts_by_default")]
    pub hosts_sessions: bool,
    pub heartbeat_at: i64,
}

fn hosts_by_default() -> bool {
    true
}

impl NodeInfo {
    /// Whether placement and handover may deal sessions to this node.
    pub(crate) fn takes_sessions(&self) -> bool {
        self.hosts_sessions && !self.is_draining
    }
}

#[derive(Clone)]
pub(crate) struct Registry {
    pool: Pool,
    prefix: String,
    ttl: Duration,
}

impl Registry {
    pub(crate) fn new(pool: Pool, prefix: String, ttl: Duration) -> Registry {
        Registry { pool, prefix, ttl }
    }

    fn set_key(&self) -> String {
        format!("{}nodes", self.prefix)
    }

    fn node_key(&self, node_id: &str) -> String {
        format!("{}{node_id}", self.node_key_prefix())
    }

    /// A node's announcement key is this prefix followed by its id.
    pub(crate) fn node_key_prefix(&self) -> String {
        format!("{}node:", self.prefix)
    }

    /// Reads an announcement as stored.
    pub(crate) fn parse(text: &str) -> Option<NodeInfo> {
        serde_json::from_str(text).ok()
    }

    /// Announces (or refreshes) this node for one TTL.
    pub(crate) async fn announce(&self, info: &NodeInfo) -> Result<(), RedisError> {
        let text = serde_json::to_string(info).unwrap_or_default();
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let mut conn = self.pool.get().await?;
        let () = redis::pipe()
            .cmd("SET")
            .arg(self.node_key(&info.node_id))
            .arg(text)
            .arg("PX")
            .arg(ttl_ms)
            .ignore()
            .cmd("SADD")
            .arg(self.set_key())
            .arg(&info.node_id)
            .ignore()
            .query_async(&mut *conn)
            .await?;
        Ok(())
    }

    /// Leaves the registry at once (graceful shutdown), so peers stop counting this node.
    pub(crate) async fn withdraw(&self, node_id: &str) -> Result<(), RedisError> {
        let mut conn = self.pool.get().await?;
        let () = redis::pipe()
            .cmd("DEL")
            .arg(self.node_key(node_id))
            .ignore()
            .cmd("SREM")
            .arg(self.set_key())
            .arg(node_id)
            .ignore()
            .query_async(&mut *conn)
            .await?;
        Ok(())
    }

    /// Every node whose announcement has not expired, sorted by node id.
    pub(crate) async fn live_nodes(&self) -> Result<Vec<NodeInfo>, RedisError> {
        let mut conn = self.pool.get().await?;
        let mut ids: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.set_key())
            .query_async(&mut *conn)
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        ids.sort();
        let keys: Vec<String> = ids.iter().map(|id| self.node_key(id)).collect();
        let values: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&keys)
            .query_async(&mut *conn)
            .await?;
        let gone: Vec<&String> = ids
            .iter()
            .zip(&values)
            .filter(|(_, v)| v.is_none())
            .map(|(id, _)| id)
            .collect();
        if !gone.is_empty() {
            let _: Result<i64, _> = redis::cmd("SREM")
                .arg(self.set_key())
                .arg(&gone)
                .query_async(&mut *conn)
                .await;
        }
        Ok(values
            .into_iter()
            .flatten()
            .filter_map(|text| Registry::parse(&text))
            .collect())
    }

    /// How long `node_id`'s announcement has left; `None` when it is gone or never expires.
    pub(crate) async fn expires_in(&self, node_id: &str) -> Result<Option<Duration>, RedisError> {
        let mut conn = self.pool.get().await?;
        let left_ms: i64 = redis::cmd("PTTL")
            .arg(self.node_key(node_id))
            .query_async(&mut *conn)
            .await?;
        Ok(u64::try_from(left_ms).ok().map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_announcement_without_the_host_flag_is_a_session_host() {
        let old =
            r#"{"nodeId":"a","url":"http://a","sessions":1,"isDraining":false,"heartbeatAt":5}"#;
        let node = Registry::parse(old).expect("parsed");
        assert!(node.hosts_sessions && node.takes_sessions());
        let worker = r#"{"nodeId":"w","url":"http://w","sessions":0,"isDraining":false,"hostsSessions":false,"heartbeatAt":5}"#;
        assert!(!Registry::parse(worker).expect("parsed").takes_sessions());
    }
}
