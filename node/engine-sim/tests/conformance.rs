//! The sim engine against the engine conformance checks (`wagate_engine_api::conformance`), driven
//! through its control API the way the `/api/sim/...` routes drive it. Paused tokio time: the sim's link
//! and QR delays cost nothing.

use std::sync::Arc;

use async_trait::async_trait;
use wagate_engine_api::conformance::{self, Driver};
use wagate_engine_api::{EngineFactory, MessageType};
use wagate_engine_sim::control::InboundSpec;
use wagate_engine_sim::network::SimConfig;
use wagate_engine_sim::{SimFactory, SimNetwork};
use wagate_proto::Jid;

const PHONE: &str = "491111111111@c.us";
const PEER: &str = "492222222222@c.us";

struct SimDriver {
    net: SimNetwork,
}

fn jid(raw: &str) -> Jid {
    Jid::parse(raw).expect("test JID")
}

#[async_trait]
impl Driver for SimDriver {
    async fn link(&self, session_id: &str) -> Result<(), String> {
        self.net
            .scan(session_id, &jid(PHONE), Some("Conformance"))
            .map_err(|e| e.to_string())
    }

    fn peer(&self) -> Jid {
        jid(PEER)
    }

    async fn deliver(&self, session_id: &str, from: &Jid, body: &str) -> Result<(), String> {
        let spec = InboundSpec {
            from: from.clone(),
            chat_id: None,
            kind: MessageType::Text,
            body: Some(body.to_string()),
            media: None,
            quoted_id: None,
            mentioned_ids: Vec::new(),
        };
        self.net
            .inbound(session_id, spec)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

#[tokio::test(start_paused = true)]
async fn the_sim_engine_passes_the_conformance_checks() {
    let net = SimNetwork::new(SimConfig::default());
    let factory: Arc<dyn EngineFactory> = Arc::new(SimFactory::new(net.clone()));
    let driver = SimDriver { net };
    let outcome = conformance::run_all(factory.as_ref(), &driver, "conformance-sim").await;
    assert_eq!(outcome, Ok(()));
}
