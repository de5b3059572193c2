//! The `AutomationSender` the node installs: a rule's reply is an ordinary text send through the messaging
//! service, so it is paced, stored and announced as `message.sent` like any send from the API.

use std::sync::Arc;

use wagate_proto::Jid;

use super::AutomationSender;
use crate::engine::MessageContent;
use crate::messaging::MessagingService;
use crate::messaging::draft::{Draft, DraftContent};

pub(crate) struct SessionSender {
    messaging: Arc<MessagingService>,
}

impl SessionSender {
    pub(crate) fn new(messaging: Arc<MessagingService>) -> SessionSender {
        SessionSender { messaging }
    }
}

#[async_trait::async_trait]
impl AutomationSender for SessionSender {
    async fn send_text(&self, session_id: &str, chat_id: &str, text: &str) -> Result<(), String> {
        let to = Jid::parse(chat_id).map_err(|e| e.to_string())?;
        let draft = Draft {
            to,
            content: DraftContent::Ready(MessageContent::Text {
                body: text.to_owned(),
                link_preview: false,
                custom_preview: None,
            }),
            quoted_id: None,
            mentions: Vec::new(),
        };
        self.messaging
            .send(session_id, draft)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
