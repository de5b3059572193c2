//! Status posts, calls, call links and the catalog on the sim network. Status posts need recipients (the
//! socket rule) and reach their sessions as `Status` events; a ringing call can be rejected. Input:
//! `SimEngine`, and the control API's `call` and `/inbound` to `status@broadcast`. The catalog is fixed
//! sample data, not editable.

use super::control::InboundSpec;
use super::messaging::carried_media;
use super::network::{NetState, SimNetwork, now};
use super::peers::Record;
use serde::{Deserialize, Serialize};
use wagate_engine_api::{
    CallEvent, CallKind, CallPhase, Catalog, EngineError, EngineEvent, EngineResult, MessageType,
    Product, ProductPage, StatusContent, StatusMedia, StatusPost, StatusUpdate,
};
use wagate_proto::Jid;

/// Status posts live a day.
const STATUS_TTL_S: i64 = 24 * 60 * 60;
/// The spec's cap on status recipients.
const MAX_STATUS_RECIPIENTS: usize = 256;

/// A status post and who may see it; in a cluster also its shared record (`shared.rs`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct StatusRec {
    pub update: StatusUpdate,
    pub recipients: Vec<Jid>,
}

/// A call still ringing, kept so the callee can reject it; in a cluster also its shared record, so the
/// callee's session can reject it wherever it runs next.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct CallRec {
    pub session: String,
    pub event: CallEvent,
}

/// The sample catalog every sim account shows, so product routes can be exercised.
pub(super) fn default_catalog() -> Vec<Product> {
    vec![
        Product {
            id: "sim-product-1".into(),
            name: "Sim Coffee Beans 1kg".into(),
            description: "Whole beans, medium roast.".into(),
            price: 1999,
            currency: "EUR".into(),
            image_url: Some("https://pps.sim.invalid/p/sim-product-1.jpg".into()),
        },
        Product {
            id: "sim-product-2".into(),
            name: "Sim Mug".into(),
            description: "Ceramic, 300 ml.".into(),
            price: 899,
            currency: "EUR".into(),
            image_url: None,
        },
    ]
}

impl SimNetwork {
    pub async fn post_status(
        &self,
        session: &str,
        media_store: &dyn wagate_engine_api::media::EngineMedia,
        post: StatusPost,
    ) -> EngineResult<StatusUpdate> {
        if post.recipients.is_empty() {
            return Err(EngineError::BadInput(
                "recipients must be a non-empty list".into(),
            ));
        }
        if post.recipients.len() > MAX_STATUS_RECIPIENTS {
            return Err(EngineError::BadInput(format!(
                "at most {MAX_STATUS_RECIPIENTS} recipients"
            )));
        }
        let (kind, caption, media) = match &post.content {
            StatusContent::Text { text, .. } => (MessageType::Text, Some(text.clone()), None),
            StatusContent::Media {
                kind,
                source,
                mimetype,
                caption,
            } => {
                let (data, file) = carried_media(media_store, source).await?;
                let media = StatusMedia {
                    mimetype: mimetype.clone(),
                    data,
                    stored: Some(Box::new(file)),
                };
                (*kind, caption.clone(), Some(media))
            }
        };
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let posted_at = now();
        let update = StatusUpdate {
            status_id: self.next_id(&mut state),
            contact: me,
            kind,
            caption,
            has_media: media.is_some(),
            posted_at,
            expires_at: posted_at + STATUS_TTL_S,
            media,
        };
        for recipient in &post.recipients {
            state.deliver_to_phone(recipient, &EngineEvent::Status(update.clone()));
        }
        let rec = StatusRec {
            update: update.clone(),
            recipients: post.recipients,
        };
        state.share(Record::Status, &update.status_id, &rec);
        state.statuses.push(rec);
        Ok(update)
    }

    /// A status post by `spec.from` that `me` may see: the control API's `/inbound` to `status@broadcast`.
    /// Kept and shared as a post by another session is (`post_status`), so `me`'s status routes list it
    /// and serve its media; returned for delivery as `Status`.
    pub(super) fn inbound_status(
        &self,
        state: &mut NetState,
        me: &Jid,
        spec: InboundSpec,
    ) -> StatusUpdate {
        state.register_sender(&spec.from);
        let media = spec.media.map(|m| StatusMedia {
            mimetype: m.mimetype,
            data: m.data,
            stored: m.stored,
        });
        let posted_at = now();
        let update = StatusUpdate {
            status_id: self.next_id(state),
            contact: spec.from,
            kind: spec.kind,
            caption: spec.body.filter(|body| !body.is_empty()),
            has_media: media.is_some(),
            posted_at,
            expires_at: posted_at + STATUS_TTL_S,
            media,
        };
        let rec = StatusRec {
            update: update.clone(),
            recipients: vec![me.clone()],
        };
        state.share(Record::Status, &update.status_id, &rec);
        state.statuses.push(rec);
        update
    }

    /// Live status posts by `contact` that `session` may see (its own when `contact` is itself).
    pub fn statuses(
        &self,
        session: &str,
        contact: Option<&Jid>,
    ) -> EngineResult<Vec<StatusUpdate>> {
        let state = self.lock();
        let me = state.online_phone(session)?;
        let at = now();
        // Without a contact: every live post the account sees, its own and those sent to it.
        let sees = |s: &&StatusRec| s.update.contact == me || s.recipients.contains(&me);
        Ok(state
            .statuses
            .iter()
            .filter(|s| s.update.expires_at > at)
            .filter(|s| contact.is_none_or(|c| s.update.contact == *c))
            .filter(sees)
            .map(|s| s.update.clone())
            .collect())
    }

    pub fn delete_status(&self, session: &str, id: &str) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        let before = state.statuses.len();
        state
            .statuses
            .retain(|s| !(s.update.status_id == id && s.update.contact == me));
        if state.statuses.len() == before {
            return Err(EngineError::NotFound(format!("Status {id} not found")));
        }
        state.unshare(Record::Status, id);
        Ok(())
    }

    /// The callee rejects a ringing call: its session hears `rejected`, and so does every session of the
    /// caller's phone (wherever it runs), with the callee as `from`.
    pub fn reject_call(&self, session: &str, call_id: &str) -> EngineResult<()> {
        let mut state = self.lock();
        let me = state.online_phone(session)?;
        match state.calls.get(call_id) {
            Some(call) if call.session == session => {}
            _ => return Err(EngineError::NotFound(format!("Call {call_id} not found"))),
        }
        if let Some(call) = state.calls.remove(call_id) {
            state.unshare(Record::Call, call_id);
            let event = CallEvent {
                phase: CallPhase::Rejected,
                timestamp: now(),
                ..call.event
            };
            let caller = event.from.clone();
            let to_caller = CallEvent {
                from: me,
                ..event.clone()
            };
            state.deliver(session, EngineEvent::Call(event));
            state.deliver_to_phone(&caller, &EngineEvent::Call(to_caller));
        }
        Ok(())
    }

    pub fn create_call_link(
        &self,
        session: &str,
        kind: CallKind,
        start_time_ms: i64,
    ) -> EngineResult<String> {
        if start_time_ms < 0 {
            return Err(EngineError::BadInput(
                "startTime must be epoch milliseconds".into(),
            ));
        }
        let mut state = self.lock();
        state.online_phone(session)?;
        let kind = match kind {
            CallKind::Audio => "voice",
            CallKind::Video => "video",
        };
        Ok(format!(
            "https://call.whatsapp.com/{kind}/SIM{:012X}",
            state.next_seq()
        ))
    }

    pub fn catalog(&self, session: &str) -> EngineResult<Option<Catalog>> {
        let state = self.lock();
        let owner = state.online_phone(session)?;
        Ok(Some(Catalog {
            owner,
            products: state.catalog.clone(),
        }))
    }

    pub fn products(&self, session: &str, page: u32, limit: u32) -> EngineResult<ProductPage> {
        let state = self.lock();
        state.online_phone(session)?;
        let (page, limit) = (page.max(1), limit.clamp(1, 100));
        let skip = usize::try_from((page - 1).saturating_mul(limit)).unwrap_or(usize::MAX);
        let take = usize::try_from(limit).unwrap_or(usize::MAX);
        let products = state
            .catalog
            .iter()
            .skip(skip)
            .take(take)
            .cloned()
            .collect();
        Ok(ProductPage {
            products,
            page,
            limit,
            total: state.catalog.len(),
        })
    }

    pub fn product(&self, session: &str, id: &str) -> EngineResult<Option<Product>> {
        let state = self.lock();
        state.online_phone(session)?;
        Ok(state.catalog.iter().find(|p| p.id == id).cloned())
    }
}
