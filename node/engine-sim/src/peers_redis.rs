//! `RedisPeers`: the cluster-wide sim network over Redis (`REDIS_ENABLED=true` with `ENGINE_TYPE=sim`).
//! Keys, under `{REDIS_KEY_PREFIX}sim:`:
//! - `accounts` (set): phones that were ever on the network (linked, or written from through the control
//!   API), for contact lists; `senders` (set): phones written from through the control API. A phone exists
//!   while it is in `senders` or a session is linked to it (`linked:{phone}`, wire-notes §10);
//! - `linked:{phone}` (hash session -> node): sessions linked to a phone, wherever they run;
//! - `conn:{phone}` (hash `{session}@{node}` -> epoch ms) and `phones` (set): connected devices, the view
//!   that shows whether a session ever has two owners (a field per node, so two owners show as two fields);
//! - `contacts:{phone}` (set): accounts the phone exchanged a message with;
//! - `blocked:{phone}` (set): accounts the phone blocked;
//! - `presence:{phone}` (hash `available`, `lastSeen`), `presubs:{phone}` (set of sessions following it) and
//!   `subs:{session}` (set of phones the session follows, so its subscriptions go with its connection);
//! - `groups`, `channels`, `statuses` (hashes id -> JSON record), `msg:{id}` and `call:{id}` (JSON, kept a
//!   day);
//! - `acct:{phone}` (hash field -> JSON): per-account state (`accounts.rs`);
//! - `inbox:{session}` (list of JSON `Traffic`): traffic for a session, drained where it is online;
//! - `held:{session}` (hash held id -> JSON `Traffic`): traffic handed to the session's device and not
//!   acknowledged yet (`held.rs`), redelivered when the device next connects, on whichever node;
//! - `phone:{session}`: the phone a session is linked to (so any node accepts traffic for it);
//! - `creds:{session}`: the credentials its device holds, and `revoked` (set): credentials the phone
//!   revoked (an unlink through any node), which every node's reconnect answers as logged out;
//! - channel `wake`: a session id whose inbox just got traffic.
//!
//! The registry's `{REDIS_KEY_PREFIX}node:{nodeId}` keys (written by `cluster/registry.rs`) say which nodes
//! are live, and the leases' `{REDIS_KEY_PREFIX}lease:{sessionId}` (`cluster/lease_redis.rs`) which node may
//! drain a session's inbox. The Redis server itself is the only shared state: no process keeps a peer's data
//! beyond the copies it reads back before use.

use std::collections::HashSet;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_redis::{Pool, redis};
use futures::StreamExt;
use tokio::sync::mpsc;
use wagate_proto::Jid;

use super::peers::{ConnectedDevice, Op, PeerError, PeerResult, Peers, Record, Taken, Traffic};

/// Milliseconds since the Unix epoch (the clock of the shared keys' scores and ids).
fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Pushes the traffic to the inbox of every session linked to the phone but those in ARGV[4..], and wakes
/// them. One round trip per recipient phone, whatever the number of its sessions.
const TO_PHONE: &str = r"
local skip = {}
for i = 4, #ARGV do skip[ARGV[i]] = true end
local n = 0
for _, s in ipairs(redis.call('HKEYS', KEYS[1])) do
  if not skip[s] then
    redis.call('RPUSH', ARGV[2] .. s, ARGV[1])
    redis.call('PUBLISH', ARGV[3], s)
    n = n + 1
  end
end
return n
";

/// `TO_PHONE` for the sessions in a set (presence subscribers).
const TO_SET: &str = r"
local skip = {}
for i = 4, #ARGV do skip[ARGV[i]] = true end
local n = 0
for _, s in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not skip[s] then
    redis.call('RPUSH', ARGV[2] .. s, ARGV[1])
    redis.call('PUBLISH', ARGV[3], s)
    n = n + 1
  end
end
return n
";

/// `a` gets `b` as a contact when `b` exists, and the other way round.
const EXCHANGE: &str = r"
if redis.call('SISMEMBER', KEYS[1], ARGV[2]) == 1 then redis.call('SADD', KEYS[2], ARGV[2]) end
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then redis.call('SADD', KEYS[3], ARGV[1]) end
return 0
";

/// Takes a whole inbox atomically, fenced by the lease: only the node named in the session's lease key
/// (`{nodeId}:{generation}`) takes anything; any other caller gets nil and the inbox stays as it is. What is
/// taken moves to the session's held traffic (KEYS[3]) under ids ARGV[2] .. index, kept until acknowledged;
/// with ARGV[3] = '1' (the device just connected) what was held already comes back too.
const TAKE: &str = r"
local lease = redis.call('GET', KEYS[2])
if not lease or string.match(lease, '^(.*):%-?%d+$') ~= ARGV[1] then return false end
local held = {}
if ARGV[3] == '1' then held = redis.call('HGETALL', KEYS[3]) end
local items = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1])
local fresh = {}
for i, item in ipairs(items) do
  local id = ARGV[2] .. string.format('%06d', i)
  redis.call('HSET', KEYS[3], id, item)
  fresh[#fresh + 1] = id
  fresh[#fresh + 1] = item
end
return {held, fresh}
";

/// The phone unlinks a session (KEYS: `phone:`, `creds:`, `revoked`, `held:` and `inbox:` of it; ARGV[1]
/// the `linked:` key prefix, ARGV[2] the session): its credentials are revoked and it is linked no more.
/// Returns its phone, or false when it is not linked.
const UNLINK: &str = r"
local phone = redis.call('GET', KEYS[1])
if not phone then return false end
local creds = redis.call('GET', KEYS[2])
if creds then redis.call('SADD', KEYS[3], creds) end
redis.call('HDEL', ARGV[1] .. phone, ARGV[2])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[4], KEYS[5])
return phone
";

/// Forgets a session's link (KEYS[1] = its `phone:` key; ARGV[1] the `linked:` key prefix, ARGV[2] the
/// session): it is linked to no phone any more.
const FORGET: &str = r"
local phone = redis.call('GET', KEYS[1])
if phone then redis.call('HDEL', ARGV[1] .. phone, ARGV[2]) end
redis.call('DEL', KEYS[1])
return 0
";

/// Revokes ARGV[1] (KEYS[2]), and forgets them as the session's (KEYS[1]) if they still are.
const REVOKE: &str = r"
redis.call('SADD', KEYS[2], ARGV[1])
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0
";

/// Ends every presence subscription of a session (KEYS[1] = its `subs:` set; ARGV[1] the `presubs:` key
/// prefix, ARGV[2] the session): subscriptions last one connection, as on the real network.
const DROP_SUBS: &str = r"
for _, p in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('SREM', ARGV[1] .. p, ARGV[2])
end
redis.call('DEL', KEYS[1])
return 0
";

/// How long a message or call record stays readable by other nodes (the sim is a test network).
const MESSAGE_TTL_S: u64 = 24 * 60 * 60;
/// The newest entries of a session's outbox kept in Redis (the control API's view; the process keeps
/// its own in memory).
const OUTBOX_KEPT: i64 = 10_000;

/// Whether this process holds a session's lease now (`Peers::holds_lease`).
pub type Fence = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// How long the wake listener waits before reconnecting after Redis went away.
const RECONNECT_DELAY: Duration = Duration::from_millis(500);

pub struct RedisPeers {
    pool: Pool,
    /// A client of its own for the subscription (a pooled connection cannot subscribe).
    client: redis::Client,
    node_id: String,
    /// `REDIS_KEY_PREFIX` (the registry's keys live under it).
    prefix: String,
    /// The lease check of local deliveries; none (always may) unless set.
    fence: Option<Fence>,
    /// Makes the held ids of inbox traffic taken by this process unique.
    takes: std::sync::atomic::AtomicU64,
}

fn err(e: impl std::fmt::Display) -> PeerError {
    PeerError(e.to_string())
}

/// `[id, json, id, json, ...]` as `(id, traffic)`; an unreadable item is logged and skipped.
fn pairs(session: &str, flat: Vec<String>) -> Vec<(String, Traffic)> {
    flat.chunks_exact(2)
        .filter_map(|pair| match serde_json::from_str(&pair[1]) {
            Ok(traffic) => Some((pair[0].clone(), traffic)),
            Err(error) => {
                tracing::warn!(%error, session_id = session, "unreadable sim traffic dropped");
                None
            }
        })
        .collect()
}

impl RedisPeers {
    pub fn new(
        pool: Pool,
        redis_url: &str,
        node_id: String,
        prefix: String,
    ) -> PeerResult<RedisPeers> {
        Ok(RedisPeers {
            pool,
            client: redis::Client::open(redis_url).map_err(err)?,
            node_id,
            prefix,
            fence: None,
            takes: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Local deliveries to a session's device go through its inbox instead once `fence` says this process
    /// no longer holds the session's lease.
    pub fn with_fence(mut self, fence: Fence) -> RedisPeers {
        self.fence = Some(fence);
        self
    }

    fn key(&self, rest: &str) -> String {
        format!("{}sim:{rest}", self.prefix)
    }

    fn wake_channel(&self) -> String {
        self.key("wake")
    }

    /// The hash of a kind of record, or (messages) the key prefix of one record.
    fn record_key(&self, record: Record) -> String {
        self.key(match record {
            Record::Group => "groups",
            Record::Channel => "channels",
            Record::Status => "statuses",
            Record::Message => "msg:",
            Record::Call => "call:",
        })
    }

    /// Ends `session`'s presence subscriptions (its connection changed).
    fn drop_subs(&self, pipe: &mut redis::Pipeline, session: &str) {
        pipe.cmd("EVAL")
            .arg(DROP_SUBS)
            .arg(1)
            .arg(self.key(&format!("subs:{session}")))
            .arg(self.key("presubs:"))
            .arg(session)
            .ignore();
    }

    fn push_to_session(
        &self,
        pipe: &mut redis::Pipeline,
        session: &str,
        traffic: &Traffic,
    ) -> PeerResult<()> {
        let payload = serde_json::to_string(traffic).map_err(err)?;
        pipe.cmd("RPUSH")
            .arg(self.key(&format!("inbox:{session}")))
            .arg(payload)
            .ignore()
            .cmd("PUBLISH")
            .arg(self.wake_channel())
            .arg(session)
            .ignore();
        Ok(())
    }

    fn push_account_field(
        &self,
        pipe: &mut redis::Pipeline,
        phone: &Jid,
        field: &str,
        json: Option<&String>,
    ) {
        let key = self.key(&format!("acct:{phone}"));
        match json {
            Some(json) => pipe.cmd("HSET").arg(key).arg(field).arg(json).ignore(),
            None => pipe.cmd("HDEL").arg(key).arg(field).ignore(),
        };
    }

    fn push_linked(&self, pipe: &mut redis::Pipeline, session: &str, phone: &Jid) {
        pipe.cmd("SADD")
            .arg(self.key("accounts"))
            .arg(phone.to_string())
            .ignore()
            .cmd("HSET")
            .arg(self.key(&format!("linked:{phone}")))
            .arg(session)
            .arg(&self.node_id)
            .ignore()
            .cmd("SET")
            .arg(self.key(&format!("phone:{session}")))
            .arg(phone.to_string())
            .ignore();
    }

    fn field(&self, session: &str) -> String {
        format!("{session}@{}", self.node_id)
    }

    fn push_op(&self, pipe: &mut redis::Pipeline, op: &Op) -> PeerResult<()> {
        match op {
            Op::ToPhone {
                phone,
                traffic,
                skip,
            } => {
                let payload = serde_json::to_string(traffic).map_err(err)?;
                pipe.cmd("EVAL")
                    .arg(TO_PHONE)
                    .arg(1)
                    .arg(self.key(&format!("linked:{phone}")))
                    .arg(payload)
                    .arg(self.key("inbox:"))
                    .arg(self.wake_channel())
                    .arg(skip)
                    .ignore();
            }
            Op::ToSession { session, traffic } => self.push_to_session(pipe, session, traffic)?,
            Op::AccountField { phone, field, json } => {
                self.push_account_field(pipe, phone, field, json.as_ref());
            }
            Op::Account(phone) => {
                pipe.cmd("SADD")
                    .arg(self.key("accounts"))
                    .arg(phone.to_string())
                    .ignore();
            }
            Op::Sender(phone) => {
                for set in ["accounts", "senders"] {
                    pipe.cmd("SADD")
                        .arg(self.key(set))
                        .arg(phone.to_string())
                        .ignore();
                }
            }
            Op::Forget(session) => {
                pipe.cmd("EVAL")
                    .arg(FORGET)
                    .arg(1)
                    .arg(self.key(&format!("phone:{session}")))
                    .arg(self.key("linked:"))
                    .arg(session)
                    .ignore();
            }
            Op::Exchange(a, b) => {
                pipe.cmd("EVAL")
                    .arg(EXCHANGE)
                    .arg(3)
                    .arg(self.key("accounts"))
                    .arg(self.key(&format!("contacts:{a}")))
                    .arg(self.key(&format!("contacts:{b}")))
                    .arg(a.to_string())
                    .arg(b.to_string())
                    .ignore();
            }
            Op::Linked { session, phone } => self.push_linked(pipe, session, phone),
            Op::Online { session, phone } => {
                self.push_linked(pipe, session, phone);
                pipe.cmd("HSET")
                    .arg(self.key(&format!("conn:{phone}")))
                    .arg(self.field(session))
                    .arg(now_ms())
                    .ignore()
                    .cmd("SADD")
                    .arg(self.key("phones"))
                    .arg(phone.to_string())
                    .ignore();
                self.drop_subs(pipe, session);
            }
            Op::Credentials {
                session,
                credentials,
            } => {
                pipe.cmd("SET")
                    .arg(self.key(&format!("creds:{session}")))
                    .arg(credentials)
                    .ignore();
            }
            Op::Revoke {
                session,
                credentials,
            } => {
                pipe.cmd("EVAL")
                    .arg(REVOKE)
                    .arg(2)
                    .arg(self.key(&format!("creds:{session}")))
                    .arg(self.key("revoked"))
                    .arg(credentials)
                    .ignore();
            }
            Op::Hold {
                session,
                id,
                traffic,
            } => {
                let payload = serde_json::to_string(traffic).map_err(err)?;
                pipe.cmd("HSET")
                    .arg(self.key(&format!("held:{session}")))
                    .arg(id)
                    .arg(payload)
                    .ignore();
            }
            Op::Release { session, id } => {
                pipe.cmd("HDEL")
                    .arg(self.key(&format!("held:{session}")))
                    .arg(id)
                    .ignore();
            }
            Op::ForgetHeld(session) => {
                pipe.cmd("DEL")
                    .arg(self.key(&format!("held:{session}")))
                    .ignore();
            }
            Op::Offline {
                session,
                phone,
                unlinked,
            } => {
                pipe.cmd("HDEL")
                    .arg(self.key(&format!("conn:{phone}")))
                    .arg(self.field(session))
                    .ignore();
                self.drop_subs(pipe, session);
                if *unlinked {
                    pipe.cmd("HDEL")
                        .arg(self.key(&format!("linked:{phone}")))
                        .arg(session)
                        .ignore()
                        .cmd("DEL")
                        .arg(self.key(&format!("phone:{session}")))
                        .ignore();
                }
            }
            Op::Put { record, id, json } => {
                if record.is_keyed() {
                    pipe.cmd("SET")
                        .arg(format!("{}{id}", self.record_key(*record)))
                        .arg(json)
                        .arg("EX")
                        .arg(MESSAGE_TTL_S)
                        .ignore();
                } else {
                    pipe.cmd("HSET")
                        .arg(self.record_key(*record))
                        .arg(id)
                        .arg(json)
                        .ignore();
                }
            }
            Op::Sent { session, entry } => {
                let key = self.key(&format!("outbox:{session}"));
                pipe.cmd("RPUSH")
                    .arg(&key)
                    .arg(serde_json::to_string(entry).map_err(err)?)
                    .ignore()
                    .cmd("LTRIM")
                    .arg(&key)
                    .arg(-OUTBOX_KEPT)
                    .arg(-1)
                    .ignore()
                    .cmd("EXPIRE")
                    .arg(&key)
                    .arg(MESSAGE_TTL_S)
                    .ignore();
            }
            Op::Delete { record, id } => {
                if record.is_keyed() {
                    pipe.cmd("DEL")
                        .arg(format!("{}{id}", self.record_key(*record)))
                        .ignore();
                } else {
                    pipe.cmd("HDEL")
                        .arg(self.record_key(*record))
                        .arg(id)
                        .ignore();
                }
            }
            Op::Block {
                phone,
                target,
                blocked,
            } => {
                pipe.cmd(if *blocked { "SADD" } else { "SREM" })
                    .arg(self.key(&format!("blocked:{phone}")))
                    .arg(target.to_string())
                    .ignore();
            }
            Op::Presence {
                phone,
                available,
                last_seen,
            } => {
                let key = self.key(&format!("presence:{phone}"));
                pipe.cmd("HSET")
                    .arg(&key)
                    .arg("available")
                    .arg(i64::from(*available))
                    .ignore();
                match last_seen {
                    Some(at) => pipe.cmd("HSET").arg(&key).arg("lastSeen").arg(*at).ignore(),
                    None => pipe.cmd("HDEL").arg(&key).arg("lastSeen").ignore(),
                };
            }
            Op::Subscribe { phone, session } => {
                pipe.cmd("SADD")
                    .arg(self.key(&format!("presubs:{phone}")))
                    .arg(session)
                    .ignore()
                    .cmd("SADD")
                    .arg(self.key(&format!("subs:{session}")))
                    .arg(phone.to_string())
                    .ignore();
            }
            Op::ToSubscribers {
                phone,
                traffic,
                skip,
            } => {
                let payload = serde_json::to_string(traffic).map_err(err)?;
                pipe.cmd("EVAL")
                    .arg(TO_SET)
                    .arg(1)
                    .arg(self.key(&format!("presubs:{phone}")))
                    .arg(payload)
                    .arg(self.key("inbox:"))
                    .arg(self.wake_channel())
                    .arg(skip)
                    .ignore();
            }
            Op::Drain(_) | Op::Flush(_) => {}
        }
        Ok(())
    }

    /// The nodes whose registry entry exists now. Read *before* the connections: a node that lost its
    /// lease drops its connection before it announces itself again, so a view read in this order never
    /// shows a returning node's stale connection as live.
    async fn live_nodes(
        &self,
        conn: &mut deadpool_redis::Connection,
    ) -> PeerResult<HashSet<String>> {
        let known: Vec<String> = redis::cmd("SMEMBERS")
            .arg(format!("{}nodes", self.prefix))
            .query_async(&mut **conn)
            .await
            .map_err(err)?;
        let mut live = HashSet::new();
        for node in known {
            let n: i64 = redis::cmd("EXISTS")
                .arg(format!("{}node:{node}", self.prefix))
                .query_async(&mut **conn)
                .await
                .map_err(err)?;
            if n > 0 {
                live.insert(node);
            }
        }
        Ok(live)
    }
}

#[async_trait]
impl Peers for RedisPeers {
    async fn apply(&self, ops: &[Op]) -> PeerResult<()> {
        let mut pipe = redis::pipe();
        for op in ops {
            self.push_op(&mut pipe, op)?;
        }
        let mut conn = self.pool.get().await.map_err(err)?;
        pipe.query_async::<()>(&mut *conn).await.map_err(err)
    }

    async fn take_inbox(&self, session: &str, redeliver: bool) -> PeerResult<Option<Taken>> {
        let take = self
            .takes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Held ids sort by time across nodes (as `held.rs` ids do): milliseconds, node, take, index.
        let id_prefix = format!("{:013}{}-{take}-", now_ms(), self.node_id);
        let mut conn = self.pool.get().await.map_err(err)?;
        let raw: Option<(Vec<String>, Vec<String>)> = redis::cmd("EVAL")
            .arg(TAKE)
            .arg(3)
            .arg(self.key(&format!("inbox:{session}")))
            .arg(format!("{}lease:{session}", self.prefix))
            .arg(self.key(&format!("held:{session}")))
            .arg(&self.node_id)
            .arg(id_prefix)
            .arg(if redeliver { "1" } else { "0" })
            .query_async(&mut *conn)
            .await
            .map_err(err)?;
        let Some((held, fresh)) = raw else {
            return Ok(None);
        };
        Ok(Some(Taken {
            held: pairs(session, held),
            fresh: pairs(session, fresh),
        }))
    }

    async fn phone_of(&self, session: &str) -> PeerResult<Option<Jid>> {
        let mut conn = self.pool.get().await.map_err(err)?;
        let raw: Option<String> = redis::cmd("GET")
            .arg(self.key(&format!("phone:{session}")))
            .query_async(&mut *conn)
            .await
            .map_err(err)?;
        Ok(raw.and_then(|p| Jid::parse(&p).ok()))
    }

    async fn unlink(&self, session: &str) -> PeerResult<Option<Jid>> {
        let mut conn = self.pool.get().await.map_err(err)?;
        let raw: Option<String> = redis::cmd("EVAL")
            .arg(UNLINK)
            .arg(5)
            .arg(self.key(&format!("phone:{session}")))
            .arg(self.key(&format!("creds:{session}")))
            .arg(self.key("revoked"))
            .arg(self.key(&format!("held:{session}")))
            .arg(self.key(&format!("inbox:{session}")))
            .arg(self.key("linked:"))
            .arg(session)
            .query_async(&mut *conn)
            .await
            .map_err(err)?;
        Ok(raw.and_then(|p| Jid::parse(&p).ok()))
    }

    async fn is_revoked(&self, credentials: &str) -> PeerResult<bool> {
        let mut conn = self.pool.get().await.map_err(err)?;
        redis::cmd("SISMEMBER")
            .arg(self.key("revoked"))
            .arg(credentials)
            .query_async::<bool>(&mut *conn)
            .await
            .map_err(err)
    }

    fn holds_lease(&self, session: &str) -> bool {
        self.fence.as_ref().is_none_or(|holds| holds(session))
    }

    async fn account(&self, phone: &Jid) -> PeerResult<Vec<(String, String)>> {
        let mut conn = self.pool.get().await.map_err(err)?;
        redis::cmd("HGETALL")
            .arg(self.key(&format!("acct:{phone}")))
            .query_async(&mut *conn)
            .await
            .map_err(err)
    }

    async fn exists(&self, phone: &Jid) -> PeerResult<bool> {
        let mut conn = self.pool.get().await.map_err(err)?;
        let (wrote, linked): (bool, i64) = redis::pipe()
            .cmd("SISMEMBER")
            .arg(self.key("senders"))
            .arg(phone.to_string())
            .cmd("HLEN")
            .arg(self.key(&format!("linked:{phone}")))
            .query_async(&mut *conn)
            .await
            .map_err(err)?;
        Ok(wrote || linked > 0)
    }

    async fn contacts(&self, phone: &Jid) -> PeerResult<Vec<Jid>> {
        let mut conn = self.pool.get().await.map_err(err)?;
        let raw: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.key(&format!("contacts:{phone}")))
            .query_async(&mut *conn)
            .await
            .map_err(err)?;
        Ok(raw.iter().filter_map(|j| Jid::parse(j).ok()).collect())
    }

    async fn is_linked(&self, phone: &Jid) -> PeerResult<bool> {
        let mut conn = self.pool.get().await.map_err(err)?;
        let n: i64 = redis::cmd("HLEN")
            .arg(self.key(&format!("linked:{phone}")))
            .query_async(&mut *conn)
            .await
            .map_err(err)?;
        Ok(n > 0)
    }

    async fn records(&self, record: Record) -> PeerResult<Vec<String>> {
        if record.is_keyed() {
            return Ok(Vec::new());
        }
        let mut conn = self.pool.get().await.map_err(err)?;
        redis::cmd("HVALS")
            .arg(self.record_key(record))
            .query_async(&mut *conn)
            .await
            .map_err(err)
    }

    async fn outbox(&self, session: &str) -> PeerResult<Vec<String>> {
        let mut conn = self.pool.get().await.map_err(err)?;
        redis::cmd("LRANGE")
            .arg(self.key(&format!("outbox:{session}")))
            .arg(0)
            .arg(-1)
            .query_async(&mut *conn)
            .await
            .map_err(err)
    }

    async fn record(&self, record: Record, id: &str) -> PeerResult<Option<String>> {
        let mut conn = self.pool.get().await.map_err(err)?;
        let cmd = if record.is_keyed() {
            let mut cmd = redis::cmd("GET");
            cmd.arg(format!("{}{id}", self.record_key(record)));
            cmd
        } else {
            let mut cmd = redis::cmd("HGET");
            cmd.arg(self.record_key(record)).arg(id);
            cmd
        };
        cmd.query_async(&mut *conn).await.map_err(err)
    }

    async fn blocked(&self, phones: &[Jid]) -> PeerResult<Vec<Vec<Jid>>> {
        if phones.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for phone in phones {
            pipe.cmd("SMEMBERS")
                .arg(self.key(&format!("blocked:{phone}")));
        }
        let mut conn = self.pool.get().await.map_err(err)?;
        let raw: Vec<Vec<String>> = pipe.query_async(&mut *conn).await.map_err(err)?;
        Ok(raw
            .iter()
            .map(|set| set.iter().filter_map(|j| Jid::parse(j).ok()).collect())
            .collect())
    }

    async fn presence(&self, phone: &Jid) -> PeerResult<Option<(bool, Option<i64>)>> {
        let mut conn = self.pool.get().await.map_err(err)?;
        let (available, last_seen): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
            .arg(self.key(&format!("presence:{phone}")))
            .arg("available")
            .arg("lastSeen")
            .query_async(&mut *conn)
            .await
            .map_err(err)?;
        Ok(available.map(|a| (a != 0, last_seen)))
    }

    async fn connected(&self, phone: Option<&Jid>) -> PeerResult<Vec<ConnectedDevice>> {
        let mut conn = self.pool.get().await.map_err(err)?;
        let phones: Vec<String> = match phone {
            Some(phone) => vec![phone.to_string()],
            None => redis::cmd("SMEMBERS")
                .arg(self.key("phones"))
                .query_async(&mut *conn)
                .await
                .map_err(err)?,
        };
        let live = self.live_nodes(&mut conn).await?;
        let mut devices = Vec::new();
        for raw in phones {
            let Ok(phone) = Jid::parse(&raw) else {
                continue;
            };
            let fields: Vec<(String, i64)> = redis::cmd("HGETALL")
                .arg(self.key(&format!("conn:{raw}")))
                .query_async(&mut *conn)
                .await
                .map_err(err)?;
            for (field, connected_at) in fields {
                let Some((session, node)) = field.rsplit_once('@') else {
                    continue;
                };
                let is_node_live = live.contains(node);
                devices.push(ConnectedDevice {
                    phone: phone.clone(),
                    session_id: session.to_string(),
                    node_id: node.to_string(),
                    connected_at,
                    is_node_live,
                });
            }
        }
        devices.sort_by(|a, b| (&a.phone, &a.session_id).cmp(&(&b.phone, &b.session_id)));
        Ok(devices)
    }

    async fn listen(
        &self,
        wake: mpsc::UnboundedSender<Op>,
        resync: Box<dyn Fn() -> Vec<String> + Send + Sync>,
    ) {
        let channel = self.wake_channel();
        while !wake.is_closed() {
            let mut pubsub = match self.client.get_async_pubsub().await {
                Ok(pubsub) => pubsub,
                Err(error) => {
                    tracing::warn!(%error, "sim wake listener cannot connect; retrying");
                    tokio::time::sleep(RECONNECT_DELAY).await;
                    continue;
                }
            };
            if let Err(error) = pubsub.subscribe(&channel).await {
                tracing::warn!(%error, "sim wake listener cannot subscribe; retrying");
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
            // Wakes sent while we were not subscribed are lost: look into every local inbox once.
            for session in resync() {
                let _ = wake.send(Op::Drain(session));
            }
            let mut messages = pubsub.on_message();
            while let Some(msg) = messages.next().await {
                let Ok(session) = msg.get_payload::<String>() else {
                    continue;
                };
                if wake.send(Op::Drain(session)).is_err() {
                    return;
                }
            }
            tracing::warn!("sim wake listener lost its connection; reconnecting");
            tokio::time::sleep(RECONNECT_DELAY).await;
        }
    }
}
