//! The `AutomationSender` the node installs: a rule's reply goes out as a text message through the
//! session's ready engine (`SessionService::ready_engine`). It does not persist the message or publish
//! `message.sent`; that belongs to the send path of the messages resource.

use std::sync::Arc;

use wagate_proto::Jid;

use super::AutomationSender;
use crate::engine::{MessageContent, OutgoingMessage};
use crate::sessions::SessionService;

pub(crate) struct SessionSender {
    sessions: Arc<SessionService>,
}

impl SessionSender {
    pub(crate) fn new(sessions: Arc<SessionService>) -> SessionSender {
        SessionSender { sessions }
    }
}

#[async_trait::async_trait]
impl AutomationSender for SessionSender {
    async fn send_text(&self, session_id: &str, chat_id: &str, text: &str) -> Result<(), String> {
        let to = Jid::parse(chat_id).map_err(|e| e.to_string())?;
        let engine = self
            .sessions
            .ready_engine(session_id)
            .map_err(|e| e.to_string())?;
        let msg = OutgoingMessage {
            to,
            content: MessageContent::Text {
                body: text.to_owned(),
                link_preview: false,
            },
            quoted_id: None,
            mentions: Vec::new(),
        };
        engine
            .send(msg)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
