//! The checks every engine must pass, run against an `EngineFactory` and a `Driver` that plays the phone
//! and the other accounts on the engine's network. The sim engine runs them in its tests; a new engine
//! runs them against its own test network. They cover the lifecycle the session supervisor relies on:
//! start (a QR when unlinked), link (`Authenticated` + `Ready`), send, receive (an acknowledged
//! `Message`), stop, restart with the stored credentials, and credential wipe (the next start links again).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc::UnboundedReceiver;
use wagate_proto::Jid;

use crate::{
    Engine, EngineContext, EngineEvent, EngineFactory, Incoming, LinkedAccount, MessageContent, Op,
    OutgoingMessage, event_channel,
};

/// How long a check waits for an event before it fails, unless the driver says otherwise. A guard against
/// a hung engine, not a timing assertion: every check passes as soon as the event arrives.
const EVENT_WAIT: Duration = Duration::from_secs(10);

/// The test network's side of the checks: what a phone and a peer do that no engine call can.
#[async_trait]
pub trait Driver: Send + Sync {
    /// Completes the link the session's engine is waiting for (scans its QR).
    async fn link(&self, session_id: &str) -> Result<(), String>;
    /// An account the linked session can send to and receive from.
    fn peer(&self) -> Jid;
    /// Has `from` send a text message with `body` to the session.
    async fn deliver(&self, session_id: &str, from: &Jid, body: &str) -> Result<(), String>;
    /// Where the session's engine may keep files (a fresh directory per run).
    fn data_dir(&self, session_id: &str) -> PathBuf {
        std::env::temp_dir()
            .join("wagate-conformance")
            .join(session_id)
    }
    /// How long a check waits for an event (10 s): an engine that starts a browser on a shared machine
    /// may need longer.
    fn event_wait(&self) -> Duration {
        EVENT_WAIT
    }
}

/// A failed check: which step, and what happened instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub step: &'static str,
    pub detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "conformance step '{}' failed: {}",
            self.step, self.detail
        )
    }
}

impl std::error::Error for Failure {}

fn fail(step: &'static str, detail: impl std::fmt::Display) -> Failure {
    Failure {
        step,
        detail: detail.to_string(),
    }
}

/// One engine instance and the receiving end of its event channel.
struct Run {
    engine: Arc<dyn Engine>,
    events: UnboundedReceiver<Incoming>,
    wait: Duration,
}

impl Run {
    fn new(
        factory: &dyn EngineFactory,
        driver: &dyn Driver,
        session_id: &str,
        linked: Option<LinkedAccount>,
    ) -> Run {
        let (tx, events) = event_channel();
        let mut ctx = EngineContext::standalone(session_id, tx, linked);
        ctx.data_dir = driver.data_dir(session_id);
        let engine = factory.create(ctx);
        Run {
            engine,
            events,
            wait: driver.event_wait(),
        }
    }

    /// Waits for the first event `pick` accepts, completing every acknowledgement on the way (as the
    /// node does once an event is recorded).
    async fn until<T>(
        &mut self,
        step: &'static str,
        mut pick: impl FnMut(&EngineEvent) -> Option<T>,
    ) -> Result<T, Failure> {
        let budget = self.wait;
        let wait = async {
            while let Some(Incoming { event, ack }) = self.events.recv().await {
                ack.complete();
                if let Some(found) = pick(&event) {
                    return Ok(found);
                }
            }
            Err(fail(step, "the engine closed its event channel"))
        };
        tokio::time::timeout(budget, wait)
            .await
            .map_err(|_| fail(step, "the expected event never came"))?
    }
}

/// Runs every check in order on a fresh session `session_id`. Each engine's test calls this once.
pub async fn run_all(
    factory: &dyn EngineFactory,
    driver: &dyn Driver,
    session_id: &str,
) -> Result<(), Failure> {
    check_capabilities(factory)?;

    // start: an unlinked session asks for a link.
    let mut run = Run::new(factory, driver, session_id, None);
    run.engine.start().await.map_err(|e| fail("start", e))?;
    run.until("start", |e| {
        matches!(e, EngineEvent::Qr { .. }).then_some(())
    })
    .await?;

    // link: the phone scans; the engine hands out credentials, then is ready.
    driver.link(session_id).await.map_err(|e| fail("link", e))?;
    let account = run
        .until("link", |e| match e {
            EngineEvent::Authenticated { account } => Some(account.clone()),
            _ => None,
        })
        .await?;
    run.until("link", |e| matches!(e, EngineEvent::Ready).then_some(()))
        .await?;

    // send: a text to the peer answers a message id.
    let peer = driver.peer();
    let sent = run
        .engine
        .send(OutgoingMessage {
            to: peer.clone(),
            content: MessageContent::Text {
                body: "conformance ping".into(),
                link_preview: false,
                custom_preview: None,
            },
            quoted_id: None,
            mentions: Vec::new(),
        })
        .await
        .map_err(|e| fail("send", e))?;
    if sent.id.is_empty() {
        return Err(fail("send", "the sent message has no id"));
    }

    // receive: the peer's message arrives as a `Message` event from the peer's chat.
    driver
        .deliver(session_id, &peer, "conformance pong")
        .await
        .map_err(|e| fail("receive", e))?;
    let received = run
        .until("receive", |e| match e {
            EngineEvent::Message(m) if m.body == "conformance pong" => Some(m.clone()),
            _ => None,
        })
        .await?;
    if received.from_me || received.chat_id != peer {
        return Err(fail(
            "receive",
            format!("wrong chat or direction: {received:?}"),
        ));
    }

    // stop keeps the link: a new instance with the stored credentials is ready without a QR.
    run.engine.stop().await.map_err(|e| fail("stop", e))?;
    drop(run);
    let mut run = Run::new(factory, driver, session_id, Some(account));
    run.engine.start().await.map_err(|e| fail("restart", e))?;
    run.until("restart", |e| match e {
        EngineEvent::Ready => Some(Ok(())),
        EngineEvent::Qr { .. } => Some(Err(())),
        _ => None,
    })
    .await?
    .map_err(|()| fail("restart", "asked for a QR despite stored credentials"))?;
    run.engine.stop().await.map_err(|e| fail("stop", e))?;
    drop(run);

    // credential wipe: the engine's own state is gone, so the next start links again.
    factory
        .wipe_credentials(session_id)
        .await
        .map_err(|e| fail("credential wipe", e))?;
    let mut run = Run::new(factory, driver, session_id, None);
    run.engine
        .start()
        .await
        .map_err(|e| fail("credential wipe", e))?;
    run.until("credential wipe", |e| match e {
        EngineEvent::Qr { .. } => Some(Ok(())),
        EngineEvent::Ready => Some(Err(())),
        _ => None,
    })
    .await?
    .map_err(|()| {
        fail(
            "credential wipe",
            "reconnected after its credentials were wiped",
        )
    })?;
    run.engine.kill().await.map_err(|e| fail("stop", e))?;
    Ok(())
}

/// The capability table must admit what the checks use, and the lifecycle an engine cannot lack. Public
/// for engines that cannot run `run_all` where their tests run (no test network to link on).
pub fn check_capabilities(factory: &dyn EngineFactory) -> Result<(), Failure> {
    let caps = factory.capabilities();
    for op in [Op::Start, Op::Stop, Op::Kill, Op::SendText] {
        if !caps.supports(op) {
            return Err(fail(
                "capabilities",
                format!("{} engine lacks {op}", factory.kind()),
            ));
        }
    }
    Ok(())
}
