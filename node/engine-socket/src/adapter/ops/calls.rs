//! Calls: rejecting an incoming call (the library needs the caller and the call's creator, which the
//! event handler records in `RecentCalls` when the offer arrives) and call links, which need the
//! library's VoIP stack (cargo feature `voip`; 501 without it).

use std::collections::HashMap;
use std::sync::Mutex;

use crate::whatsapp_rust::Jid as WaJid;

use super::{Client, fail};
#[cfg(not(feature = "voip"))]
use wagate_engine_api::Op;
use wagate_engine_api::{CallKind, EngineError, EngineResult};

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

/// The library's media mode for the API's call kind.
#[cfg(feature = "voip")]
fn link_media(kind: CallKind) -> crate::whatsapp_rust::voip::CallLinkMedia {
    use crate::whatsapp_rust::voip::CallLinkMedia;
    match kind {
        CallKind::Audio => CallLinkMedia::Audio,
        CallKind::Video => CallLinkMedia::Video,
    }
}

/// Asks the call service for a new link (the library's `link_create` request, answered with a token) and
/// answers its shareable URL.
#[cfg(feature = "voip")]
pub(crate) async fn create_link(client: &Client, kind: CallKind) -> EngineResult<String> {
    let link = client
        .voip()
        .create_call_link(link_media(kind))
        .await
        .map_err(fail)?;
    Ok(link.url())
}

#[cfg(not(feature = "voip"))]
pub(crate) async fn create_link(_client: &Client, _kind: CallKind) -> EngineResult<String> {
    Err(EngineError::NotSupported(Op::CreateCallLink))
}

#[cfg(all(test, feature = "voip"))]
mod tests {
    use crate::whatsapp_rust::NodeBuilder;
    use crate::whatsapp_rust::wacore::stanza::group_call::{
        build_call_link_create, parse_call_link_create_ack,
    };

    use super::link_media;
    use wagate_engine_api::CallKind;

    #[test]
    fn a_call_link_request_carries_the_kind_and_its_answer_becomes_the_link() {
        for (kind, media) in [(CallKind::Audio, "audio"), (CallKind::Video, "video")] {
            // What `create_link` sends: a `<call>` to the call service holding `<link_create media=..>`.
            let request = build_call_link_create(link_media(kind), "REQ-1").expect("request");
            assert_eq!(request.tag, "call");
            let action = request
                .as_node_ref()
                .get_optional_child("link_create")
                .map(|n| n.get_attr("media").map(|v| v.as_str().into_owned()));
            assert_eq!(action, Some(Some(media.to_string())));

            // The service's answer, as the library parses it, becomes the URL the route returns.
            let ack = NodeBuilder::new("ack")
                .attr("class", "call")
                .attr("type", "link_create")
                .attr("id", "REQ-1")
                .children([NodeBuilder::new("link_create")
                    .attr("token", "TOKEN123")
                    .attr("media", media)
                    .build()])
                .build();
            let link = parse_call_link_create_ack(&ack.as_node_ref()).expect("ack");
            assert_eq!(link.media, link_media(kind));
            assert_eq!(
                link.url(),
                format!("https://call.whatsapp.com/{media}/TOKEN123")
            );
        }
    }
}
