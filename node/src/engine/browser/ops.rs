//! `impl Engine for BrowserEngine`: each operation is one facade call plus the mapping of its answer.
//! Operations the browser column refuses keep the trait's `NotSupported` default (501); so do those the
//! facade does not expose yet. Error mapping: reload -> retryable 409, dead page -> 503 on the bounded
//! routes, launch failures -> `Network` (the supervisor retries with backoff).

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use wagate_engine_browser::BrowserError;
use wagate_proto::Jid;
use wagate_proto::jid::ChatKind;

use super::BrowserEngine;
use crate::engine::{
    ChatSummary, Contact, ContactCheck, Engine, EngineError, EngineResult, Label, MediaKind,
    MessageContent, Op, OutgoingMessage, SentMessage, send_op,
};

/// A lifecycle failure: a browser that cannot launch is a relaunch failure (retried with backoff).
pub(super) fn lifecycle_error(err: BrowserError) -> EngineError {
    match err {
        BrowserError::Launch(m) | BrowserError::Protocol(m) => EngineError::Network(m),
        other => call_error(other, Op::Start),
    }
}

/// Maps a call failure; `op` names the operation for the facade's own "unsupported".
fn call_error(err: BrowserError, op: Op) -> EngineError {
    let message = err.to_string();
    match err {
        BrowserError::NotReady => EngineError::NotReady,
        BrowserError::Reloading => EngineError::Busy(message),
        BrowserError::PageDead | BrowserError::Launch(_) | BrowserError::Protocol(_) => {
            EngineError::Network(message)
        }
        BrowserError::Timeout => EngineError::Timeout,
        BrowserError::Page { code, message } => match code.as_str() {
            "not_found" => EngineError::NotFound(message),
            "bad_input" => EngineError::BadInput(message),
            "rejected" => EngineError::Rejected(message),
            "unsupported" => EngineError::NotSupported(op),
            _ => EngineError::Network(message),
        },
    }
}

fn decode<T: DeserializeOwned>(value: Value) -> EngineResult<T> {
    serde_json::from_value(value)
        .map_err(|e| EngineError::Network(format!("unexpected bridge answer: {e}")))
}

#[derive(serde::Deserialize)]
struct Sent {
    id: String,
    timestamp: i64,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageChat {
    id: String,
    name: Option<String>,
    #[serde(default)]
    unread_count: u32,
    #[serde(default)]
    timestamp: i64,
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    pinned: bool,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageContact {
    id: String,
    name: Option<String>,
    push_name: Option<String>,
    #[serde(default)]
    is_my_contact: bool,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageLabel {
    id: String,
    name: String,
    #[serde(default)]
    color_index: u8,
}

impl PageContact {
    fn into_contact(self) -> Option<Contact> {
        Some(Contact {
            id: Jid::parse(&self.id).ok()?,
            name: self.name,
            push_name: self.push_name,
            is_blocked: false,
            is_my_contact: self.is_my_contact,
            profile_pic_url: None,
        })
    }
}

impl BrowserEngine {
    async fn call(&self, op: Op, name: &str, args: &[Value]) -> EngineResult<Value> {
        self.session()
            .call(name, args)
            .await
            .map_err(|e| call_error(e, op))
    }

    async fn call_sent(&self, op: Op, name: &str, args: &[Value]) -> EngineResult<SentMessage> {
        let sent: Sent = decode(self.call(op, name, args).await?)?;
        Ok(SentMessage {
            id: sent.id,
            timestamp: sent.timestamp,
        })
    }
}

fn media_type(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Image => "image",
        MediaKind::Video => "video",
        MediaKind::Audio | MediaKind::Voice => "audio",
        MediaKind::Document => "document",
        MediaKind::Sticker => "sticker",
    }
}

#[async_trait]
impl Engine for BrowserEngine {
    async fn start(&self) -> EngineResult<()> {
        self.start_browser().await
    }
    async fn stop(&self) -> EngineResult<()> {
        self.stop_browser(true).await
    }
    async fn kill(&self) -> EngineResult<()> {
        self.stop_browser(false).await
    }
    async fn logout(&self) -> EngineResult<()> {
        let unlinked = self.session().logout().await;
        // The profile is the credential: once unlinked (or abandoned) it is worthless.
        if let Err(err) = wagate_engine_browser::profile::delete(self.session().profile_dir()) {
            tracing::warn!(error = %err, "browser profile not deleted");
        }
        match unlinked {
            Ok(()) | Err(BrowserError::NotReady) => Ok(()),
            Err(err) => Err(lifecycle_error(err)),
        }
    }
    async fn request_pairing_code(&self, phone: &str) -> EngineResult<String> {
        let code = self
            .call(Op::RequestPairingCode, "pairingCode", &[json!(phone)])
            .await?;
        let code: String = decode(code)?;
        let _ = self
            .ctx
            .events
            .send(crate::engine::EngineEvent::PairingCode { code: code.clone() });
        Ok(code)
    }

    async fn send(&self, msg: OutgoingMessage) -> EngineResult<SentMessage> {
        let to = json!(msg.to.to_string());
        let op = send_op(&msg.content);
        match msg.content {
            MessageContent::Text {
                body, link_preview, ..
            } => {
                let mentions: Vec<String> = msg.mentions.iter().map(ToString::to_string).collect();
                let opts = json!({"linkPreview": link_preview, "quotedId": msg.quoted_id, "mentions": mentions});
                self.call_sent(op, "sendText", &[to, json!(body), opts])
                    .await
            }
            MessageContent::Media(media) => {
                if msg.to.kind() == ChatKind::Channel {
                    return Err(EngineError::NotSupported(op));
                }
                let bytes = media
                    .source
                    .load(self.ctx.media.as_ref())
                    .await
                    .map_err(|e| EngineError::BadInput(format!("media not readable: {e}")))?;
                let data_url = format!("data:{};base64,{}", media.mimetype, STANDARD.encode(bytes));
                let opts = json!({
                    "type": media_type(media.kind),
                    "filename": media.filename,
                    "caption": media.caption,
                    "mimetype": media.mimetype,
                    "isPtt": media.kind == MediaKind::Voice,
                    "quotedId": msg.quoted_id,
                });
                self.call_sent(op, "sendFile", &[to, json!(data_url), opts])
                    .await
            }
            MessageContent::Location(loc) => {
                let args = [
                    to,
                    json!(loc.latitude),
                    json!(loc.longitude),
                    json!(loc.description),
                ];
                self.call_sent(op, "sendLocation", &args).await
            }
            MessageContent::Poll(poll) => {
                let selectable = if poll.allow_multiple {
                    poll.options.len()
                } else {
                    1
                };
                let args = [to, json!(poll.name), json!(poll.options), json!(selectable)];
                self.call_sent(op, "sendPoll", &args).await
            }
            MessageContent::Contact(card) => {
                let id = format!("{}@c.us", card.number.trim_start_matches('+'));
                self.call_sent(op, "sendContact", &[to, json!(id), json!(card.name)])
                    .await
            }
            MessageContent::Product { .. } => Err(EngineError::NotSupported(op)),
        }
    }
    async fn react(&self, _chat: &Jid, message_id: &str, emoji: &str) -> EngineResult<()> {
        self.call(Op::React, "react", &[json!(message_id), json!(emoji)])
            .await?;
        Ok(())
    }
    async fn edit(&self, _chat: &Jid, message_id: &str, body: &str) -> EngineResult<SentMessage> {
        self.call_sent(Op::Edit, "edit", &[json!(message_id), json!(body)])
            .await
    }
    async fn revoke(&self, chat: &Jid, message_id: &str, for_everyone: bool) -> EngineResult<()> {
        let args = [
            json!(chat.to_string()),
            json!(message_id),
            json!(for_everyone),
        ];
        self.call(Op::Revoke, "revoke", &args).await?;
        Ok(())
    }
    /// Chat-level receipt: the browser engine ignores `message_ids` (the spec's table).
    async fn mark_read(&self, chat: &Jid, _message_ids: &[String]) -> EngineResult<()> {
        self.call(Op::MarkRead, "markRead", &[json!(chat.to_string())])
            .await?;
        Ok(())
    }
    async fn mark_unread(&self, chat: &Jid) -> EngineResult<()> {
        self.call(Op::MarkUnread, "markUnread", &[json!(chat.to_string())])
            .await?;
        Ok(())
    }

    async fn list_chats(&self) -> EngineResult<Vec<ChatSummary>> {
        let chats: Vec<PageChat> = decode(self.call(Op::ListChats, "chats", &[]).await?)?;
        Ok(chats
            .into_iter()
            .filter_map(|c| {
                Some(ChatSummary {
                    id: Jid::parse(&c.id).ok()?,
                    name: c.name.unwrap_or_default(),
                    archived: c.archived,
                    pinned: c.pinned,
                    muted: false,
                    mute_expiration: 0,
                    unread_count: c.unread_count,
                    timestamp: c.timestamp,
                    last_message: None,
                })
            })
            .collect())
    }
    async fn list_contacts(&self) -> EngineResult<Vec<Contact>> {
        let contacts: Vec<PageContact> =
            decode(self.call(Op::ListContacts, "contacts", &[]).await?)?;
        Ok(contacts
            .into_iter()
            .filter_map(PageContact::into_contact)
            .collect())
    }
    async fn get_contact(&self, id: &Jid) -> EngineResult<Contact> {
        let contact: PageContact = decode(
            self.call(Op::GetContact, "contact", &[json!(id.to_string())])
                .await?,
        )?;
        contact
            .into_contact()
            .ok_or_else(|| EngineError::NotFound("Contact not found".into()))
    }
    async fn check_number(&self, number: &str) -> EngineResult<ContactCheck> {
        let answer = self
            .call(Op::CheckNumber, "checkNumber", &[json!(number)])
            .await?;
        let exists = answer["exists"].as_bool().unwrap_or(false);
        let whatsapp_id = answer["id"]
            .as_str()
            .and_then(|id| Jid::parse(id).ok())
            .or_else(|| Jid::from_phone(number).ok())
            .ok_or_else(|| EngineError::BadInput(format!("'{number}' is not a phone number")))?;
        Ok(ContactCheck {
            number: number.to_string(),
            exists,
            whatsapp_id,
        })
    }
    async fn list_labels(&self) -> EngineResult<Vec<Label>> {
        let labels: Vec<PageLabel> = decode(self.call(Op::ListLabels, "labels", &[]).await?)?;
        Ok(labels
            .into_iter()
            .map(|l| Label {
                id: l.id,
                name: l.name,
                color: l.color_index.min(19),
            })
            .collect())
    }
    async fn set_profile_name(&self, name: &str) -> EngineResult<()> {
        self.call(Op::SetProfileName, "setProfileName", &[json!(name)])
            .await?;
        Ok(())
    }
    async fn set_profile_status(&self, status: &str) -> EngineResult<()> {
        self.call(Op::SetProfileStatus, "setProfileStatus", &[json!(status)])
            .await?;
        Ok(())
    }
}
