//! `RedisLeases` against a real Redis (127.0.0.1:6379, `WAGATE_TEST_REDIS_URL` overrides) and a SQLite data
//! DB: exclusivity, the fence only growing, compare-and-set renew and release, and expiry.

use std::time::Duration;

use wagate_proto::dto::sessions::SessionConfig;

use super::*;
use crate::store::backends;

struct Fixture {
    _dir: tempfile::TempDir,
    db: DataPool,
    pool: Pool,
    lookups: redis::aio::ConnectionManager,
    prefix: String,
    session: String,
    /// The acquiring nodes' record cache (the claims bump it; `a_claim_*` tests what that does).
    records: RecordCache,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = backends::connect_data_sqlite(&dir.path().join("data.sqlite"))
        .await
        .expect("data db");
    let session = uuid::Uuid::new_v4().to_string();
    sessions::insert(&db, &session, "lease-test", &SessionConfig::default(), None)
        .await
        .expect("session");
    let url =
        std::env::var("WAGATE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let pool = deadpool_redis::Config::from_url(url.as_str())
        .create_pool(Some(deadpool_redis::Runtime::Tokio1))
        .expect("redis pool");
    let prefix = format!("wagate-test:{}:", uuid::Uuid::new_v4().simple());
    let lookups = crate::cluster::lookup_link(&url).expect("redis link");
    Fixture {
        _dir: dir,
        db,
        pool,
        lookups,
        records: RecordCache::local(),
        prefix,
        session,
    }
}

impl Fixture {
    fn node(&self, id: &str, ttl_ms: u64) -> RedisLeases {
        RedisLeases::new(
            self.pool.clone(),
            self.lookups.clone(),
            self.db.clone(),
            id.into(),
            self.prefix.clone(),
            Duration::from_millis(ttl_ms),
        )
    }

    async fn row(&self) -> (i64, Option<String>) {
        let r = sessions::get(&self.db, &self.session).await.expect("row");
        (r.lease_generation, r.owner_node)
    }
}

#[tokio::test]
async fn a_held_lease_refuses_other_nodes_and_is_written_to_the_row() {
    let f = fixture().await;
    let (a, b) = (f.node("a", 10_000), f.node("b", 10_000));
    let lease = a.acquire(&f.session, &f.records).await.expect("a acquires");
    assert!(matches!(
        b.acquire(&f.session, &f.records).await,
        Err(LeaseError::HeldElsewhere)
    ));
    assert_eq!(f.row().await, (lease.generation, Some("a".into())));
    let owner = b.owner(&f.session).await.expect("owner").expect("held");
    assert_eq!(owner.node_id, "a");
    assert_eq!(owner.generation, lease.generation);
    assert!(a.is_current(&f.session, lease));
}

#[tokio::test]
async fn release_hands_over_with_a_newer_generation_and_the_old_holder_cannot_renew() {
    let f = fixture().await;
    let (a, b) = (f.node("a", 10_000), f.node("b", 10_000));
    let first = a.acquire(&f.session, &f.records).await.expect("a acquires");
    a.release(&f.session, first).await;
    let second = b.acquire(&f.session, &f.records).await.expect("b acquires");
    assert!(second.generation > first.generation);
    assert!(!a.renew(&f.session, first.generation).await.expect("renew"));
    a.release(&f.session, first).await;
    assert_eq!(
        b.owner(&f.session).await.expect("owner").map(|o| o.node_id),
        Some("b".into())
    );
    assert!(b.renew(&f.session, second.generation).await.expect("renew"));
}

#[tokio::test]
async fn the_generation_never_falls_below_the_rows() {
    let f = fixture().await;
    sessions::claim(&f.db, &f.session, 41, "elsewhere")
        .await
        .expect("claim");
    let lease = f
        .node("a", 10_000)
        .acquire(&f.session, &f.records)
        .await
        .expect("acquire");
    assert_eq!(lease.generation, 42);
}

#[tokio::test]
async fn an_expired_lease_is_taken_and_its_holder_knows_it_is_not_current() {
    let f = fixture().await;
    let (a, b) = (f.node("a", 200), f.node("b", 10_000));
    let old = a.acquire(&f.session, &f.records).await.expect("a acquires");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!a.is_current(&f.session, old));
    let new = b
        .acquire(&f.session, &f.records)
        .await
        .expect("b takes the expired lease");
    assert!(new.generation > old.generation);
    assert!(!a.renew(&f.session, old.generation).await.expect("renew"));
    assert!(matches!(
        sessions::save_runtime(&f.db, &f.session, old.generation, &Default::default()).await,
        Err(StoreError::StaleLease)
    ));
    assert_eq!(
        a.unheld(std::slice::from_ref(&f.session), |id| format!(
            "{}handover:{id}",
            f.prefix
        ))
        .await
        .expect("mget"),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn other_nodes_see_a_held_lease_as_loaded_and_a_deleted_session_leaves_no_counter() {
    let f = fixture().await;
    let (a, b) = (f.node("a", 10_000), f.node("b", 10_000));
    let lease = a.acquire(&f.session, &f.records).await.expect("a acquires");
    let ids = [f.session.as_str(), "never-held"];
    assert_eq!(b.held_elsewhere(&ids).await, vec![f.session.clone()]);
    assert!(a.held_elsewhere(&ids).await.is_empty(), "its own lease");

    a.release(&f.session, lease).await;
    a.forget_session(&f.session).await;
    let mut conn = f.pool.get().await.expect("conn");
    let left: i64 = redis::cmd("EXISTS")
        .arg(format!("{}leasegen:{}", f.prefix, f.session))
        .query_async(&mut *conn)
        .await
        .expect("exists");
    assert_eq!(left, 0);
}

#[tokio::test]
async fn owner_with_reads_the_holder_and_its_announcement_in_one_call() {
    let f = fixture().await;
    let (a, b) = (f.node("node-a:x", 10_000), f.node("b", 10_000));
    let node_prefix = format!("{}node:", f.prefix);
    let mark = format!("{}handover:{}", f.prefix, f.session);
    assert_eq!(
        b.owner_with(&f.session, &node_prefix, &mark)
            .await
            .expect("read"),
        (None, false)
    );
    let lease = a.acquire(&f.session, &f.records).await.expect("a acquires");
    let (owner, announcement) = b
        .owner_with(&f.session, &node_prefix, &mark)
        .await
        .expect("read")
        .0
        .expect("held");
    assert_eq!(
        (owner.node_id.as_str(), owner.generation),
        ("node-a:x", lease.generation)
    );
    assert_eq!(announcement, None, "a has not announced itself");
    let mut conn = f.pool.get().await.expect("redis");
    let () = redis::cmd("SET")
        .arg(format!("{node_prefix}node-a:x"))
        .arg("{\"announced\":true}")
        .query_async(&mut *conn)
        .await
        .expect("announce");
    let () = redis::cmd("SET")
        .arg(&mark)
        .arg("b")
        .query_async(&mut *conn)
        .await
        .expect("mark");
    let (found, is_marked) = b
        .owner_with(&f.session, &node_prefix, &mark)
        .await
        .expect("read");
    let (_, announcement) = found.expect("held");
    assert_eq!(announcement.as_deref(), Some("{\"announced\":true}"));
    assert!(is_marked);
    a.release(&f.session, lease).await;
    assert_eq!(
        b.unheld(std::slice::from_ref(&f.session), |_| mark.clone())
            .await
            .expect("mget"),
        Vec::<String>::new(),
        "a session marked in a handover is not an orphan"
    );
}

#[tokio::test]
async fn renew_many_renews_only_what_is_still_ours() {
    let f = fixture().await;
    let a = f.node("a", 10_000);
    let other = uuid::Uuid::new_v4().to_string();
    sessions::insert(
        &f.db,
        &other,
        "lease-test-2",
        &SessionConfig::default(),
        None,
    )
    .await
    .expect("session");
    let first = a.acquire(&f.session, &f.records).await.expect("first");
    let second = a.acquire(&other, &f.records).await.expect("second");
    let asked = vec![
        (f.session.clone(), first.generation),
        (other.clone(), second.generation + 1),
    ];
    assert_eq!(
        a.renew_many(&asked).await.expect("renew"),
        vec![true, false]
    );
    assert!(a.renew_many(&[]).await.expect("nothing").is_empty());
}

/// A claim writes the row's owner and generation: another node's cached record of the session is a miss
/// at its next read (and the claiming node's own entry is gone), so no node shows the former owner.
#[tokio::test]
async fn a_claim_makes_every_nodes_cached_record_stale() {
    use crate::sessions::cache::{CachedRecord, Lookup};
    let f = fixture().await;
    let tokens = format!("{}records:", f.prefix);
    let (cache_a, cache_b) = (
        RecordCache::shared(f.lookups.clone(), &tokens),
        RecordCache::shared(f.lookups.clone(), &tokens),
    );
    for cache in [&cache_a, &cache_b] {
        let Lookup::Miss(ticket) = cache.lookup(&f.session).await else {
            panic!("a cold cache hit");
        };
        let row = sessions::get(&f.db, &f.session).await.expect("row");
        cache.fill(ticket, std::sync::Arc::new(CachedRecord::new(row)));
        let Lookup::Hit(cached) = cache.lookup(&f.session).await else {
            panic!("a filled cache missed");
        };
        assert_eq!(cached.record.owner_node, None);
    }
    let lease = f
        .node("a", 10_000)
        .acquire(&f.session, &cache_a)
        .await
        .expect("a acquires");
    for (name, cache) in [("a", &cache_a), ("b", &cache_b)] {
        assert!(
            matches!(cache.lookup(&f.session).await, Lookup::Miss(_)),
            "node {name} still serves the record from before the claim"
        );
    }
    assert_eq!(f.row().await, (lease.generation, Some("a".into())));

    // A claim refused by the fence wrote nothing and leaves the caches alone.
    let Lookup::Miss(ticket) = cache_b.lookup(&f.session).await else {
        panic!("stale entry served");
    };
    let row = sessions::get(&f.db, &f.session).await.expect("row");
    cache_b.fill(ticket, std::sync::Arc::new(CachedRecord::new(row)));
    assert!(matches!(
        crate::cluster::lease::claim(&f.db, &cache_a, &f.session, lease.generation, "c").await,
        Err(StoreError::StaleLease)
    ));
    let Lookup::Hit(cached) = cache_b.lookup(&f.session).await else {
        panic!("a refused claim dropped the entry");
    };
    assert_eq!(cached.record.owner_node.as_deref(), Some("a"));
}

/// Embedded mode: the claim drops the node's own entry (the only cache there is).
#[tokio::test]
async fn a_local_claim_drops_the_cached_record() {
    use crate::cluster::lease::LocalLeases;
    use crate::sessions::cache::{CachedRecord, Lookup};
    let f = fixture().await;
    let Lookup::Miss(ticket) = f.records.lookup(&f.session).await else {
        panic!("a cold cache hit");
    };
    let row = sessions::get(&f.db, &f.session).await.expect("row");
    f.records
        .fill(ticket, std::sync::Arc::new(CachedRecord::new(row)));
    let leases = LocalLeases::new(f.db.clone(), "solo".into());
    let lease = leases
        .acquire(&f.session, &f.records)
        .await
        .expect("acquire");
    assert!(matches!(
        f.records.lookup(&f.session).await,
        Lookup::Miss(_)
    ));
    assert_eq!(f.row().await, (lease.generation, Some("solo".into())));
}
