//! The socket engine against the engine conformance checks (`wagate_engine_api::conformance`), as far as
//! they run offline. WhatsApp's servers are out of reach and no loopback fake speaks its Noise handshake,
//! so the linked half of `run_all` (a QR scanned, a send, a receive) has no phone and no peer to run
//! against. What runs, on the engine API's standalone context and a migrated SQLite data DB: the
//! capability table, a start against a loopback endpoint that refuses the dial (the engine reports a
//! self-retry, refuses a second start, then stops and is killed cleanly), and the credential wipe through
//! the factory (the engine's own auth state goes, the session row stays, the next start is unlinked).

use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;
use wagate_db::{DataPool, DatabaseKind};
use wagate_engine_api::conformance;
use wagate_engine_api::{
    EngineContext, EngineError, EngineEvent, EngineFactory, Incoming, ReconnectPolicy,
    event_channel,
};
use wagate_engine_socket::store::{SOCKET_TABLES, SqlBackend};
use wagate_engine_socket::transport::Endpoint;
use wagate_engine_socket::whatsapp_rust::wacore::store::traits::SignalStore;
use wagate_engine_socket::{SocketConfig, SocketFactory};

const SID: &str = "c0c0c0c0-0000-4000-8000-000000000001";
const PEER: &str = "15550001111:2@s.whatsapp.net";
/// A guard against a hung engine, not a timing assertion: the check passes as soon as the event comes.
const EVENT_WAIT: Duration = Duration::from_secs(20);

async fn data_db(dir: &std::path::Path) -> DataPool {
    let path = dir.join("data.sqlite");
    let pool = DataPool::connect(DatabaseKind::Sqlite, &path.display().to_string())
        .await
        .expect("sqlite");
    pool.migrate().await.expect("migrate");
    let sql = "INSERT INTO sessions (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)";
    wagate_db::on_pool!(&pool, |p| sqlx::query(sql)
        .bind(SID)
        .bind("conformance-socket")
        .bind(wagate_db::now_ms())
        .execute(p)
        .await
        .map(|_| ()))
    .expect("insert session");
    pool
}

/// A loopback address nothing listens on: the dial is refused at once.
async fn refused_endpoint() -> Endpoint {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        listener.local_addr().expect("addr").port()
    };
    Endpoint::parse(&format!("ws://127.0.0.1:{port}/ws/chat")).expect("endpoint")
}

async fn until(
    events: &mut UnboundedReceiver<Incoming>,
    mut pick: impl FnMut(&EngineEvent) -> bool,
) -> EngineEvent {
    let wait = async {
        while let Some(Incoming { event, ack }) = events.recv().await {
            ack.complete();
            if pick(&event) {
                return event;
            }
        }
        panic!("the engine closed its event channel");
    };
    tokio::time::timeout(EVENT_WAIT, wait)
        .await
        .expect("the expected event never came")
}

/// Rows of the socket store for the session, all tables together.
async fn socket_rows(pool: &DataPool) -> i64 {
    let mut total = 0;
    for table in SOCKET_TABLES {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE session_id = $1");
        let n: i64 = wagate_db::on_pool!(pool, |p| sqlx::query_scalar(sqlx::AssertSqlSafe(
            sql.clone()
        ))
        .bind(SID)
        .fetch_one(p)
        .await)
        .expect("count");
        total += n;
    }
    total
}

async fn session_rows(pool: &DataPool) -> i64 {
    wagate_db::on_pool!(pool, |p| sqlx::query_scalar(
        "SELECT COUNT(*) FROM sessions WHERE id = $1"
    )
    .bind(SID)
    .fetch_one(p)
    .await)
    .expect("count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_socket_engine_passes_the_offline_conformance_checks() {
    // reqwest is built without a default crypto provider (the node's boot installs ring the same way).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().expect("dir");
    let pool = data_db(dir.path()).await;
    let factory = SocketFactory::new(
        pool.clone(),
        SocketConfig {
            endpoint: refused_endpoint().await,
        },
    );

    // capabilities: what the checks use and the lifecycle.
    conformance::check_capabilities(&factory).expect("capabilities");

    // start: unlinked, against an endpoint that refuses; the engine retries by itself and says why.
    let (tx, mut events) = event_channel();
    let engine = factory.create(EngineContext::standalone(SID, tx, None));
    engine.start().await.expect("start");
    let retry = until(&mut events, |e| matches!(e, EngineEvent::SelfRetry { .. })).await;
    let EngineEvent::SelfRetry {
        failures,
        reason,
        next_delay_ms,
    } = retry
    else {
        unreachable!("picked a self-retry");
    };
    // The start's own connect failed: no reconnect spent yet, reconnect 1 after the policy's base delay.
    assert_eq!(failures, 0);
    assert_eq!(
        next_delay_ms,
        Some(ReconnectPolicy::default().base_delay_ms)
    );
    assert!(
        reason
            .as_deref()
            .unwrap_or_default()
            .contains("cannot reach"),
        "{reason:?}"
    );
    assert!(matches!(engine.start().await, Err(EngineError::Busy(_))));
    // Operations wait for a connected client.
    assert!(matches!(
        engine.list_chats().await,
        Err(EngineError::NotReady)
    ));

    // stop, then kill: both return with the client gone; a fresh instance starts again.
    engine.stop().await.expect("stop");
    engine.kill().await.expect("kill");
    drop(engine);

    // credential wipe: whatever the engine stored of the session goes; the session row is the node's.
    let backend = SqlBackend::new(pool.clone(), SID);
    backend.put_session(PEER, &[1, 2, 3]).await.expect("put");
    backend.put_identity(PEER, [7; 32]).await.expect("put");
    assert!(socket_rows(&pool).await > 0);
    factory.wipe_credentials(SID).await.expect("wipe");
    assert_eq!(
        socket_rows(&pool).await,
        0,
        "auth state left after the wipe"
    );
    assert!(!backend.has_session(PEER).await.expect("has"));
    assert_eq!(backend.load_identity(PEER).await.expect("load"), None);
    assert_eq!(session_rows(&pool).await, 1, "the wipe keeps the session");

    // The next start has nothing to reconnect with: it dials unlinked again and retries.
    let (tx, mut events) = event_channel();
    let engine = factory.create(EngineContext::standalone(SID, tx, None));
    engine.start().await.expect("restart");
    until(&mut events, |e| matches!(e, EngineEvent::SelfRetry { .. })).await;
    engine.kill().await.expect("kill");

    // Deleting the session (the node's row) takes what the engine wrote since.
    backend.put_session(PEER, &[4]).await.expect("put");
    wagate_db::on_pool!(&pool, |p| sqlx::query("DELETE FROM sessions WHERE id = $1")
        .bind(SID)
        .execute(p)
        .await
        .map(|_| ()))
    .expect("delete session");
    assert_eq!(socket_rows(&pool).await, 0, "the session's delete cascades");
}
