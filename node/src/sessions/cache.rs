//! Session records served from memory for the read routes (`GET /api/sessions/{id}`, the session list, the
//! session check of every session-scoped route and of message and chat reads).
//!
//! Every write to a session row (create, config, proxy, delete, each lease claim, each fenced runtime-state
//! write, the normalisation at boot, a data import) calls `invalidate` after the write and before it is
//! acknowledged.
//!
//! Embedded mode (`Local`): this process is the only writer, so removing the entry is enough. A fill that
//! read the row before an invalidation must not store what it read: every invalidation bumps
//! `generation`, and a fill stores only if the generation is still the one it saw before reading, checked
//! under the entry's shard lock, which the invalidation's removal also takes.
//!
//! Cluster mode (`Shared`): other nodes write the same rows, so an entry is only as good as a version token
//! kept in Redis. `{prefix}rec:{id}` changes on every write of that row, `{prefix}rec:list` on every write
//! of any row, `{prefix}rec:all` on a data import. A writer sets fresh random tokens (one round trip) before
//! the write is acknowledged; a reader reads the tokens (one `MGET`) before it looks at memory or the data
//! DB, serves the entry only when it was filled under the same tokens, and otherwise reads the row and
//! stores it under the tokens it read first. A write that commits after the reader's `MGET` sets a new
//! token after committing, so the next read misses; a write acknowledged before the reader's `MGET` has
//! already changed the token. Random tokens (not counters) cannot come back after Redis loses its data, and
//! an absent token is never served from (it is seeded, then read again). A node that cannot read the tokens
//! (Redis away or slow) reads the data DB and stores nothing: it cannot be sure.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use dashmap::DashMap;
use deadpool_redis::redis;
use redis::aio::ConnectionManager;

use crate::store::sessions::SessionRecord;

/// How long a reader waits for the tokens before it reads the data DB instead.
const TOKEN_READ_TIMEOUT: Duration = Duration::from_millis(250);
/// Tokens expire (an absent token is seeded again): keys of deleted sessions do not stay in Redis.
const TOKEN_TTL_MS: u64 = 24 * 60 * 60 * 1000;
/// Pauses between a writer's attempts to change the tokens before it acknowledges anyway.
const BUMP_RETRIES: [Duration; 2] = [Duration::from_millis(20), Duration::from_millis(100)];
/// A writer that could not reach Redis keeps trying in the background for this long.
const BUMP_BACKGROUND: Duration = Duration::from_secs(60);
/// Distinct list pages kept (a dashboard polls one or two); more clears the lot.
const MAX_LISTS: usize = 32;

/// A page of the session list: `(limit, offset)`.
pub(crate) type ListKey = (i64, i64);

pub(crate) struct RecordCache {
    shared: Option<Shared>,
    /// Looked up on every session read: foldhash rather than SipHash.
    entries: DashMap<String, Stored<CachedRecord>, foldhash::fast::RandomState>,
    lists: DashMap<ListKey, Stored<ListPage>>,
    generation: AtomicU64,
}

struct Stored<T> {
    value: Arc<T>,
    /// The Redis tokens it was read under (cluster mode); `None` in embedded mode.
    token: Option<String>,
}

/// Where the version tokens of a cluster live.
struct Shared {
    /// The cluster's per-request lookup connection (`cluster::lookup_link`).
    conn: ConnectionManager,
    prefix: String,
}

/// A session row as the read routes take it, and the JSON body built from it, which cannot change until
/// the row's next write (when the entry is dropped with it).
pub(crate) struct CachedRecord {
    pub record: SessionRecord,
    /// `GET /api/sessions/{id}`'s body, by `engineLoaded` (read from the runtimes at each request).
    json: [OnceLock<Bytes>; 2],
}

impl CachedRecord {
    pub(crate) fn new(record: SessionRecord) -> CachedRecord {
        CachedRecord {
            record,
            json: [OnceLock::new(), OnceLock::new()],
        }
    }

    /// The body for `engine_loaded`, built by `build` the first time only.
    pub(crate) fn json<E>(
        &self,
        engine_loaded: bool,
        build: impl FnOnce(&SessionRecord) -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        let slot = &self.json[usize::from(engine_loaded)];
        if let Some(body) = slot.get() {
            return Ok(body.clone());
        }
        let body = build(&self.record)?;
        Ok(slot.get_or_init(|| body).clone())
    }
}

/// A page of the session list: each row with its own JSON bodies (built on first use, as for one record),
/// and the whole page's body for the `engineLoaded` flags it was last asked with (the flags are read from
/// the runtimes at each request; they rarely change between two polls).
pub(crate) struct ListPage {
    pub rows: Vec<Arc<CachedRecord>>,
    body: Mutex<Option<(Vec<bool>, Bytes)>>,
}

impl ListPage {
    pub(crate) fn new(rows: Vec<Arc<CachedRecord>>) -> ListPage {
        ListPage {
            rows,
            body: Mutex::new(None),
        }
    }

    /// The page's body with these flags (one per row), built by `build` when the flags differ from the last.
    pub(crate) fn json<E>(
        &self,
        loaded: &[bool],
        build: impl FnOnce() -> Result<Bytes, E>,
    ) -> Result<Bytes, E> {
        if let Some((flags, body)) = self.body.lock().as_ref()
            && flags == loaded
        {
            return Ok(body.clone());
        }
        let body = build()?;
        *self.body.lock() = Some((loaded.to_vec(), body.clone()));
        Ok(body)
    }
}

/// What a lookup saw before the caller reads the data DB: pass it back to `fill`.
pub(crate) struct FillTicket {
    generation: u64,
    token: Option<String>,
    may_fill: bool,
}

pub(crate) enum Lookup<T> {
    Hit(Arc<T>),
    Miss(FillTicket),
}

impl RecordCache {
    /// Embedded mode: this process is the only writer of the data DB.
    pub(crate) fn local() -> RecordCache {
        RecordCache::with(None)
    }

    /// Cluster mode: entries are checked against the tokens in Redis (`prefix` is `REDIS_KEY_PREFIX`).
    pub(crate) fn shared(conn: ConnectionManager, prefix: &str) -> RecordCache {
        RecordCache::with(Some(Shared {
            conn,
            prefix: prefix.to_string(),
        }))
    }

    fn with(shared: Option<Shared>) -> RecordCache {
        RecordCache {
            shared,
            entries: DashMap::default(),
            lists: DashMap::new(),
            generation: AtomicU64::new(0),
        }
    }

    /// The record of session `id` if memory holds a current one; else a ticket for `fill`.
    pub(crate) async fn lookup(&self, id: &str) -> Lookup<CachedRecord> {
        let (generation, token) = match self.begin(|s| vec![s.record_key(id), s.all_key()]).await {
            Ok(seen) => seen,
            Err(ticket) => return Lookup::Miss(ticket),
        };
        if let Some(stored) = self.entries.get(id)
            && stored.token == token
        {
            return Lookup::Hit(stored.value.clone());
        }
        Lookup::Miss(FillTicket {
            generation,
            token,
            may_fill: true,
        })
    }

    /// Stores `record`, read after `lookup` gave `ticket`, unless anything was invalidated since.
    pub(crate) fn fill(&self, ticket: FillTicket, record: Arc<CachedRecord>) {
        if !ticket.may_fill {
            return;
        }
        let entry = self.entries.entry(record.record.id.clone());
        if self.generation.load(Ordering::SeqCst) != ticket.generation {
            return;
        }
        entry.insert(Stored {
            value: record,
            token: ticket.token,
        });
    }

    /// A page of the session list if memory holds a current one; else a ticket for `fill_list`.
    pub(crate) async fn lookup_list(&self, key: ListKey) -> Lookup<ListPage> {
        let (generation, token) = match self.begin(|s| vec![s.list_key(), s.all_key()]).await {
            Ok(seen) => seen,
            Err(ticket) => return Lookup::Miss(ticket),
        };
        if let Some(stored) = self.lists.get(&key)
            && stored.token == token
        {
            return Lookup::Hit(stored.value.clone());
        }
        Lookup::Miss(FillTicket {
            generation,
            token,
            may_fill: true,
        })
    }

    pub(crate) fn fill_list(&self, ticket: FillTicket, key: ListKey, records: Arc<ListPage>) {
        if !ticket.may_fill {
            return;
        }
        if self.lists.len() >= MAX_LISTS {
            self.lists.clear();
        }
        let entry = self.lists.entry(key);
        if self.generation.load(Ordering::SeqCst) != ticket.generation {
            return;
        }
        entry.insert(Stored {
            value: records,
            token: ticket.token,
        });
    }

    /// The generation and (cluster mode) the tokens, read before anything else; `Err` when the tokens
    /// cannot be read, a ticket that stores nothing.
    async fn begin(
        &self,
        keys: impl FnOnce(&Shared) -> Vec<String>,
    ) -> Result<(u64, Option<String>), FillTicket> {
        let generation = self.generation.load(Ordering::SeqCst);
        let Some(shared) = &self.shared else {
            return Ok((generation, None));
        };
        match shared.tokens(&keys(shared)).await {
            Some(token) => Ok((generation, Some(token))),
            None => Err(FillTicket {
                generation,
                token: None,
                may_fill: false,
            }),
        }
    }

    /// Called after every write to the session's row, before the write is acknowledged.
    pub(crate) async fn invalidate(&self, id: &str) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.remove(id);
        self.lists.clear();
        if let Some(shared) = &self.shared {
            shared
                .bump(vec![shared.record_key(id), shared.list_key()])
                .await;
        }
    }

    /// After writes that may touch any row (a data import).
    pub(crate) async fn invalidate_all(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.entries.clear();
        self.lists.clear();
        if let Some(shared) = &self.shared {
            shared.bump(vec![shared.all_key(), shared.list_key()]).await;
        }
    }
}

impl Shared {
    fn record_key(&self, id: &str) -> String {
        format!("{}rec:{id}", self.prefix)
    }

    fn list_key(&self) -> String {
        format!("{}rec:list", self.prefix)
    }

    fn all_key(&self) -> String {
        format!("{}rec:all", self.prefix)
    }

    /// The tokens of `keys`, joined; absent ones are seeded first. `None` when Redis does not answer in time.
    async fn tokens(&self, keys: &[String]) -> Option<String> {
        let read = async {
            let mut conn = self.conn.clone();
            let got: Vec<Option<String>> = redis::cmd("MGET")
                .arg(keys)
                .query_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            if got.iter().all(Option::is_some) {
                return Ok(got);
            }
            // Seed only the absent ones (NX): a token a writer set meanwhile wins.
            let mut pipe = redis::pipe();
            for (key, _) in keys.iter().zip(&got).filter(|(_, v)| v.is_none()) {
                pipe.cmd("SET")
                    .arg(key)
                    .arg(fresh_token())
                    .arg("NX")
                    .arg("PX")
                    .arg(TOKEN_TTL_MS)
                    .ignore();
            }
            pipe.cmd("MGET").arg(keys);
            let (again,): (Vec<Option<String>>,) = pipe
                .query_async(&mut conn)
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(again)
        };
        match tokio::time::timeout(TOKEN_READ_TIMEOUT, read).await {
            Ok(Ok(tokens)) if tokens.iter().all(Option::is_some) => {
                Some(tokens.into_iter().flatten().collect::<Vec<_>>().join(":"))
            }
            Ok(Ok(_)) => None,
            Ok(Err(error)) => {
                tracing::debug!(%error, "record tokens not read; reading the data DB");
                None
            }
            Err(_) => {
                tracing::debug!("record tokens not read in time; reading the data DB");
                None
            }
        }
    }

    /// Sets fresh tokens on `keys`. Tried a few times before the write is acknowledged; when Redis stays
    /// away, in the background (every node reads the data DB meanwhile if it cannot reach Redis either).
    async fn bump(&self, keys: Vec<String>) {
        let mut last = match self.set_fresh(&keys).await {
            Ok(()) => return,
            Err(error) => error,
        };
        for pause in BUMP_RETRIES {
            tokio::time::sleep(pause).await;
            match self.set_fresh(&keys).await {
                Ok(()) => return,
                Err(error) => last = error,
            }
        }
        tracing::warn!(error = %last, ?keys, "record tokens not changed after a write; retrying in the background");
        let shared = Shared {
            conn: self.conn.clone(),
            prefix: self.prefix.clone(),
        };
        tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + BUMP_BACKGROUND;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(500)).await;
                if shared.set_fresh(&keys).await.is_ok() {
                    return;
                }
            }
            tracing::error!(
                ?keys,
                "record tokens not changed after a write: other nodes may serve the old row until its next write"
            );
        });
    }

    async fn set_fresh(&self, keys: &[String]) -> Result<(), String> {
        let write = async {
            let mut conn = self.conn.clone();
            let mut pipe = redis::pipe();
            for key in keys {
                pipe.cmd("SET")
                    .arg(key)
                    .arg(fresh_token())
                    .arg("PX")
                    .arg(TOKEN_TTL_MS)
                    .ignore();
            }
            pipe.query_async::<()>(&mut conn)
                .await
                .map_err(|e| e.to_string())
        };
        match tokio::time::timeout(Duration::from_millis(500), write).await {
            Ok(done) => done,
            Err(_) => Err("timed out".to_string()),
        }
    }
}

fn fresh_token() -> String {
    format!("{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wagate_proto::SessionStatus;
    use wagate_proto::dto::sessions::SessionConfig;

    fn record(id: &str, status: SessionStatus) -> Arc<CachedRecord> {
        Arc::new(CachedRecord::new(SessionRecord {
            id: id.to_string(),
            name: "cached".to_string(),
            status,
            phone: None,
            push_name: None,
            last_error: None,
            config: SessionConfig::default(),
            proxy_url: None,
            restriction: None,
            desired_running: false,
            has_credentials: false,
            lease_generation: 0,
            owner_node: None,
            connected_at: None,
            last_active: None,
            created_at: 0,
            updated_at: 0,
        }))
    }

    fn ticket(lookup: Lookup<CachedRecord>) -> FillTicket {
        match lookup {
            Lookup::Miss(ticket) => ticket,
            Lookup::Hit(_) => panic!("expected a miss"),
        }
    }

    fn status(lookup: Lookup<CachedRecord>) -> Option<SessionStatus> {
        match lookup {
            Lookup::Hit(cached) => Some(cached.record.status),
            Lookup::Miss(_) => None,
        }
    }

    #[tokio::test]
    async fn a_fill_that_read_before_an_invalidation_is_not_stored() {
        let cache = RecordCache::local();
        let before = ticket(cache.lookup("a").await);
        cache.invalidate("a").await;
        cache.fill(before, record("a", SessionStatus::Created));
        assert!(status(cache.lookup("a").await).is_none());
        let after = ticket(cache.lookup("a").await);
        cache.fill(after, record("a", SessionStatus::Ready));
        assert_eq!(status(cache.lookup("a").await), Some(SessionStatus::Ready));
        cache.invalidate("a").await;
        assert!(status(cache.lookup("a").await).is_none());
    }

    #[tokio::test]
    async fn any_row_write_drops_the_cached_lists() {
        let cache = RecordCache::local();
        let Lookup::Miss(t) = cache.lookup_list((100, 0)).await else {
            panic!("empty cache hit");
        };
        cache.fill_list(t, (100, 0), Arc::new(ListPage::new(vec![])));
        assert!(matches!(cache.lookup_list((100, 0)).await, Lookup::Hit(_)));
        cache.invalidate("b").await;
        assert!(matches!(cache.lookup_list((100, 0)).await, Lookup::Miss(_)));
    }

    fn redis_link() -> ConnectionManager {
        let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        crate::cluster::lookup_link(&url).expect("redis link")
    }

    /// Two nodes' caches on one Redis: a write through one is a miss on the other at its next read.
    #[tokio::test]
    async fn a_write_on_one_node_is_a_miss_on_the_other() {
        let prefix = format!("wagate-cache-test-{}:", uuid::Uuid::new_v4());
        let a = RecordCache::shared(redis_link(), &prefix);
        let b = RecordCache::shared(redis_link(), &prefix);
        let t = ticket(b.lookup("s").await);
        assert!(t.may_fill, "the tokens are seeded on the first read");
        b.fill(t, record("s", SessionStatus::Created));
        assert_eq!(status(b.lookup("s").await), Some(SessionStatus::Created));
        let Lookup::Miss(lt) = b.lookup_list((10, 0)).await else {
            panic!("empty list hit");
        };
        b.fill_list(lt, (10, 0), Arc::new(ListPage::new(vec![])));
        assert!(matches!(b.lookup_list((10, 0)).await, Lookup::Hit(_)));

        a.invalidate("s").await;
        assert!(
            status(b.lookup("s").await).is_none(),
            "stale after a write elsewhere"
        );
        assert!(matches!(b.lookup_list((10, 0)).await, Lookup::Miss(_)));

        // A fill that read its tokens before the write stores under the old tokens: never served.
        let stale = ticket(b.lookup("s").await);
        a.invalidate("s").await;
        b.fill(stale, record("s", SessionStatus::Created));
        assert!(status(b.lookup("s").await).is_none());

        // An import elsewhere invalidates every record.
        let t = ticket(b.lookup("s").await);
        b.fill(t, record("s", SessionStatus::Ready));
        assert_eq!(status(b.lookup("s").await), Some(SessionStatus::Ready));
        a.invalidate_all().await;
        assert!(status(b.lookup("s").await).is_none());
    }

    #[test]
    fn the_body_is_built_once_per_engine_state() {
        let cached = record("a", SessionStatus::Ready);
        let mut builds = 0;
        for loaded in [false, true, false, true] {
            let body = cached
                .json(loaded, |r| {
                    builds += 1;
                    Ok::<_, ()>(Bytes::from(format!("{}:{loaded}", r.id)))
                })
                .expect("built");
            assert_eq!(body, Bytes::from(format!("a:{loaded}")));
        }
        assert_eq!(builds, 2);
    }

    /// No Redis to ask: nothing is served from memory and nothing is stored.
    #[tokio::test]
    async fn a_node_that_cannot_read_the_tokens_reads_the_db() {
        let link = crate::cluster::lookup_link("redis://127.0.0.1:1").expect("redis link");
        let cache = RecordCache::shared(link, "wagate-cache-test-unreachable:");
        let t = ticket(cache.lookup("s").await);
        assert!(!t.may_fill);
        cache.fill(t, record("s", SessionStatus::Ready));
        assert!(status(cache.lookup("s").await).is_none());
    }

    #[test]
    fn a_list_body_is_rebuilt_when_an_engine_flag_changes() {
        let page = ListPage::new(vec![
            record("a", SessionStatus::Ready),
            record("b", SessionStatus::Disconnected),
        ]);
        let builds = std::cell::Cell::new(0);
        let body = |loaded: &[bool]| {
            page.json(loaded, || {
                builds.set(builds.get() + 1);
                Ok::<_, ()>(Bytes::from(format!("{loaded:?}")))
            })
        };
        assert_eq!(body(&[true, false]), Ok(Bytes::from("[true, false]")));
        assert_eq!(body(&[true, false]), Ok(Bytes::from("[true, false]")));
        assert_eq!(builds.get(), 1, "the same flags reuse the body");
        assert_eq!(body(&[false, false]), Ok(Bytes::from("[false, false]")));
        assert_eq!(builds.get(), 2);
    }
}
