//! Raft traffic between nodes. openraft's `RaftNetwork` is implemented once over a [`Transport`] that carries
//! an RPC's JSON body to a member and brings the reply back: over HTTP between processes (`HttpTransport`,
//! `POST {url}/internal/raft/{rpc}` with the cluster secret) and in memory in tests. The receiving side is
//! [`dispatch`], shared by the HTTP route and the in-memory transport.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use parking_lot::RwLock;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{MainRaft, Member, NodeId, TypeConfig};

/// The RPCs one node makes to another: raft's own, and the two the gateway adds (a write forwarded to the
/// leader, and the leader's read index for a follower that must catch up before answering).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rpc {
    Append,
    Vote,
    Snapshot,
    Write,
    ReadIndex,
}

impl Rpc {
    pub fn path(self) -> &'static str {
        match self {
            Rpc::Append => "append",
            Rpc::Vote => "vote",
            Rpc::Snapshot => "snapshot",
            Rpc::Write => "write",
            Rpc::ReadIndex => "read-index",
        }
    }

    pub fn from_path(path: &str) -> Option<Rpc> {
        [
            Rpc::Append,
            Rpc::Vote,
            Rpc::Snapshot,
            Rpc::Write,
            Rpc::ReadIndex,
        ]
        .into_iter()
        .find(|r| r.path() == path)
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TransportError(pub String);

/// Carries one RPC body to `target` and returns the reply body.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    async fn call(
        &self,
        target: NodeId,
        member: &Member,
        rpc: Rpc,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError>;
}

/// The header that carries `CLUSTER_SECRET` between nodes.
pub const SECRET_HEADER: &str = "x-wagate-cluster-secret";

/// HTTP between nodes. A member's URL comes from the node registry (refreshed by the membership task), so
/// a node that comes back on a new address is still reached; the URL recorded in the membership is the
/// fallback.
pub struct HttpTransport {
    client: reqwest::Client,
    secret: String,
    urls: RwLock<HashMap<String, String>>,
}

impl HttpTransport {
    pub fn new(secret: String) -> HttpTransport {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true)
            .build()
            .unwrap_or_default();
        HttpTransport {
            client,
            secret,
            urls: RwLock::new(HashMap::new()),
        }
    }

    /// Replaces the known URLs by node name (from the registry).
    pub fn set_urls(&self, urls: HashMap<String, String>) {
        *self.urls.write() = urls;
    }

    fn url_of(&self, member: &Member) -> Option<String> {
        self.urls
            .read()
            .get(&member.name)
            .cloned()
            .or_else(|| (!member.url.is_empty()).then(|| member.url.clone()))
    }
}

#[async_trait]
impl Transport for HttpTransport {
    async fn call(
        &self,
        _target: NodeId,
        member: &Member,
        rpc: Rpc,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let base = self
            .url_of(member)
            .ok_or_else(|| TransportError(format!("no known URL for node {}", member.name)))?;
        let url = format!(
            "{}/internal/raft/{}",
            base.trim_end_matches('/'),
            rpc.path()
        );
        let reply = self
            .client
            .post(url)
            .header(SECRET_HEADER, &self.secret)
            .header("content-type", "application/json")
            .timeout(timeout)
            .body(body)
            .send()
            .await
            .map_err(|e| TransportError(e.to_string()))?;
        if !reply.status().is_success() {
            return Err(TransportError(format!(
                "{} answered {}",
                member.name,
                reply.status()
            )));
        }
        let bytes = reply
            .bytes()
            .await
            .map_err(|e| TransportError(e.to_string()))?;
        Ok(bytes.to_vec())
    }
}

/// Builds one client per peer for openraft.
#[derive(Clone)]
pub struct NetworkFactory {
    pub transport: Arc<dyn Transport>,
}

pub struct Peer {
    target: NodeId,
    member: Member,
    transport: Arc<dyn Transport>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, node: &Member) -> Peer {
        Peer {
            target,
            member: node.clone(),
            transport: self.transport.clone(),
        }
    }
}

impl Peer {
    async fn rpc<Req, Resp, E>(
        &self,
        rpc: Rpc,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, Member, E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let bytes = self
            .transport
            .call(self.target, &self.member, rpc, body, option.hard_ttl())
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        let reply: Result<Resp, E> =
            serde_json::from_slice(&bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        reply.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId>>> {
        self.rpc(Rpc::Append, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, Member, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.rpc(Rpc::Snapshot, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Member, RaftError<NodeId>>> {
        self.rpc(Rpc::Vote, &rpc, &option).await
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("the request body is not a valid {0} request: {1}")]
    BadRequest(&'static str, String),
}

fn parse<T: DeserializeOwned>(rpc: Rpc, body: &[u8]) -> Result<T, DispatchError> {
    serde_json::from_slice(body).map_err(|e| DispatchError::BadRequest(rpc.path(), e.to_string()))
}

fn reply<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// Serves one RPC received from a peer (already authenticated) on this node's raft.
pub async fn dispatch(raft: &MainRaft, rpc: Rpc, body: &[u8]) -> Result<Vec<u8>, DispatchError> {
    Ok(match rpc {
        Rpc::Append => reply(&raft.raft.append_entries(parse(rpc, body)?).await),
        Rpc::Vote => reply(&raft.raft.vote(parse(rpc, body)?).await),
        Rpc::Snapshot => reply(&raft.raft.install_snapshot(parse(rpc, body)?).await),
        Rpc::Write => reply(&raft.write_as_leader(parse(rpc, body)?).await),
        Rpc::ReadIndex => reply(&raft.read_index_as_leader().await),
    })
}
