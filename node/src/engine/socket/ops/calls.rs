//! Calls: rejecting an incoming call (the library needs the caller and the call's creator, which the
//! event handler records in `RecentCalls` when the offer arrives) and call links, which need the
//! library's VoIP stack (cargo feature `voip`; 501 without it).

use std::collections::HashMap;
use std::sync::Mutex;

use wagate_engine_socket::whatsapp_rust::Jid as WaJid;

use super::{Client, fail};
use crate::engine::{CallKind, EngineError, EngineResult, Op};

/// Offers seen recently, by call id: `(peer, call creator)`. Bounded: the oldest are dropped.
#[derive(Debug, Default)]
pub(crate) struct RecentCalls {
    calls: Mutex<HashMap<String, (WaJid, WaJid)>>,
}

const MAX_REMEMBERED: usize = 256;

impl RecentCalls {
    pub(crate) fn remember(&self, call_id: &str, peer: WaJid, creator: WaJid) {
        if let Ok(mut calls) = self.calls.lock() {
            if calls.len() >= MAX_REMEMBERED {
                calls.clear();
            }
            calls.insert(call_id.to_string(), (peer, creator));
        }
    }

    pub(crate) fn get(&self, call_id: &str) -> Option<(WaJid, WaJid)> {
        self.calls.lock().ok()?.get(call_id).cloned()
    }
}

pub(crate) async fn reject(
    client: &Client,
    calls: &RecentCalls,
    call_id: &str,
) -> EngineResult<()> {
    let (peer, creator) = calls
        .get(call_id)
        .ok_or_else(|| EngineError::NotFound(format!("Call {call_id} not found")))?;
    client
        .voip()
        .reject_call(call_id, &peer, &creator)
        .await
        .map_err(fail)
}

#[cfg(feature = "voip")]
pub(crate) async fn create_link(client: &Client, kind: CallKind) -> EngineResult<String> {
    use wagate_engine_socket::whatsapp_rust::voip::CallLinkMedia;
    let media = match kind {
        CallKind::Audio => CallLinkMedia::Audio,
        CallKind::Video => CallLinkMedia::Video,
    };
    let link = client.voip().create_call_link(media).await.map_err(fail)?;
    Ok(link.url())
}

#[cfg(not(feature = "voip"))]
pub(crate) async fn create_link(_client: &Client, _kind: CallKind) -> EngineResult<String> {
    Err(EngineError::NotSupported(Op::CreateCallLink))
}
