//! A throwaway engine written against `wagate-engine-api` alone (no node internals): an in-memory
//! "network" where a link is a flag and a peer is a function call. It proves the crate is enough to write
//! an engine, and runs the conformance checks every engine must pass.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use wagate_engine_api::conformance::{self, Driver};
use wagate_engine_api::qr::qr_data_url;
use wagate_engine_api::{
    Ack, Capabilities, Engine, EngineContext, EngineError, EngineEvent, EngineFactory, EngineKind,
    EngineResult, EventSender, InboundMessage, LinkedAccount, MessageType, OutgoingMessage,
    SentMessage,
};
use wagate_proto::Jid;

const PHONE: &str = "15550001111@c.us";
const PEER: &str = "15550002222@c.us";

fn jid(raw: &str) -> Jid {
    Jid::parse(raw).expect("test JID")
}

/// What the toy network knows per session: the connected engine's events, and the credentials it keeps on
/// its own (what `wipe_credentials` forgets).
#[derive(Default)]
struct Device {
    events: Option<EventSender>,
    remembered: Option<LinkedAccount>,
}

#[derive(Default, Clone)]
struct ToyNet {
    devices: Arc<Mutex<HashMap<String, Device>>>,
}

impl ToyNet {
    fn with<T>(&self, session: &str, f: impl FnOnce(&mut Device) -> T) -> T {
        let mut devices = self.devices.lock().expect("toy network lock");
        f(devices.entry(session.to_string()).or_default())
    }
}

struct ToyEngine {
    net: ToyNet,
    ctx: EngineContext,
}

#[async_trait]
impl Engine for ToyEngine {
    async fn start(&self) -> EngineResult<()> {
        let events = self.ctx.events.clone();
        let linked = self.ctx.linked.clone();
        let remembered = self.net.with(&self.ctx.session_id, |d| {
            d.events = Some(events.clone());
            d.remembered.clone()
        });
        let send = |e| events.send(e).map_err(|_| EngineError::NotReady);
        match linked.or(remembered) {
            Some(account) => {
                send(EngineEvent::Authenticated { account })?;
                send(EngineEvent::Ready)
            }
            None => {
                let data_url = qr_data_url(&format!("toy:{}", self.ctx.session_id))
                    .map_err(|e| EngineError::Network(e.to_string()))?;
                send(EngineEvent::Qr { data_url })
            }
        }
    }

    async fn stop(&self) -> EngineResult<()> {
        self.net.with(&self.ctx.session_id, |d| d.events = None);
        Ok(())
    }

    async fn kill(&self) -> EngineResult<()> {
        self.stop().await
    }

    async fn send(&self, msg: OutgoingMessage) -> EngineResult<SentMessage> {
        let online = self.net.with(&self.ctx.session_id, |d| {
            d.events.is_some() && d.remembered.is_some()
        });
        if !online {
            return Err(EngineError::NotReady);
        }
        Ok(SentMessage {
            id: format!("TOY-{}", msg.to.user()),
            timestamp: 1,
        })
    }
}

struct ToyFactory {
    net: ToyNet,
}

#[async_trait]
impl EngineFactory for ToyFactory {
    fn create(&self, ctx: EngineContext) -> Arc<dyn Engine> {
        Arc::new(ToyEngine {
            net: self.net.clone(),
            ctx,
        })
    }

    fn capabilities(&self) -> &Capabilities {
        &Capabilities::SOCKET
    }

    fn kind(&self) -> EngineKind {
        EngineKind::Sim
    }

    async fn wipe_credentials(&self, session_id: &str) -> EngineResult<()> {
        self.net.with(session_id, |d| d.remembered = None);
        Ok(())
    }
}

/// Plays the phone and the peer on the toy network.
struct ToyDriver {
    net: ToyNet,
}

#[async_trait]
impl Driver for ToyDriver {
    async fn link(&self, session_id: &str) -> Result<(), String> {
        let account = LinkedAccount {
            phone: jid(PHONE),
            push_name: None,
            credentials: format!("toy:{session_id}"),
        };
        let events = self.net.with(session_id, |d| {
            d.remembered = Some(account.clone());
            d.events.clone()
        });
        let events = events.ok_or("no engine is waiting for a link")?;
        for event in [
            EngineEvent::Authenticating,
            EngineEvent::Authenticated { account },
            EngineEvent::Ready,
        ] {
            events.send(event).map_err(|_| "engine gone")?;
        }
        Ok(())
    }

    fn peer(&self) -> Jid {
        jid(PEER)
    }

    async fn deliver(&self, session_id: &str, from: &Jid, body: &str) -> Result<(), String> {
        let events = self.net.with(session_id, |d| d.events.clone());
        let events = events.ok_or("the session is offline")?;
        let message = InboundMessage {
            id: "TOY-IN-1".into(),
            chat_id: from.clone(),
            from: from.clone(),
            to: jid(PHONE),
            author: None,
            from_me: false,
            kind: MessageType::Text,
            body: body.to_string(),
            timestamp: 1,
            media: None,
            quoted: None,
            mentioned_ids: Vec::new(),
            location: None,
            poll: None,
        };
        // The toy network learns whether the node took the message, as a real one would.
        let ack = Ack::new(|_taken: bool| {});
        events
            .send_acked(EngineEvent::Message(Box::new(message)), ack)
            .map_err(|_| "engine gone".to_string())
    }
}

#[tokio::test]
async fn a_throwaway_engine_passes_the_conformance_checks() {
    let net = ToyNet::default();
    let factory = ToyFactory { net: net.clone() };
    let outcome = conformance::run_all(&factory, &ToyDriver { net }, "toy-1").await;
    assert_eq!(outcome, Ok(()));
}

#[tokio::test]
async fn an_engine_that_keeps_its_link_after_a_wipe_fails_the_checks() {
    /// Like the toy, but its wipe forgets nothing.
    struct Forgetful(ToyFactory);
    #[async_trait]
    impl EngineFactory for Forgetful {
        fn create(&self, ctx: EngineContext) -> Arc<dyn Engine> {
            self.0.create(ctx)
        }
        fn capabilities(&self) -> &Capabilities {
            self.0.capabilities()
        }
        fn kind(&self) -> EngineKind {
            self.0.kind()
        }
        async fn wipe_credentials(&self, _session_id: &str) -> EngineResult<()> {
            Ok(())
        }
    }
    let net = ToyNet::default();
    let factory = Forgetful(ToyFactory { net: net.clone() });
    let outcome = conformance::run_all(&factory, &ToyDriver { net }, "toy-2").await;
    assert_eq!(outcome.map_err(|f| f.step), Err("credential wipe"));
}
