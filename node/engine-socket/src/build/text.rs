//! Text messages: the plain body, the `contextInfo` that carries mentions and a quote, and the link
//! preview fields. WA Web sends a bare body as `conversation` and switches to `extendedTextMessage`
//! once context or a preview is attached; the library's `MessageBuilderExt` does the same.

use whatsapp_rust::Jid;
use whatsapp_rust::buffa::MessageField;
use whatsapp_rust::proto_helpers::{MessageBuilderExt, build_quote_context_with_info};

use super::preview::LinkPreview;
use super::wa;

/// The message a reply quotes: its id, who wrote it, the chat it is in, and its content.
#[derive(Debug, Clone)]
pub struct Quote {
    pub id: String,
    pub sender: Jid,
    pub chat: Jid,
    pub message: wa::Message,
}

/// The `contextInfo` for mentions and a quote; `None` when there is neither (a bare body stays a
/// `conversation`). The quote part is the library's `build_quote_context_with_info`.
pub fn context(target: &Jid, mentions: &[Jid], quote: Option<&Quote>) -> Option<wa::ContextInfo> {
    if mentions.is_empty() && quote.is_none() {
        return None;
    }
    let mut ctx = match quote {
        Some(q) => build_quote_context_with_info(&q.id, &q.sender, &q.chat, target, &q.message),
        None => wa::ContextInfo::default(),
    };
    ctx.mentioned_jid = mentions.iter().map(|j| j.to_string()).collect();
    Some(ctx)
}

/// A text message with optional context and link preview.
pub fn text(
    body: &str,
    ctx: Option<wa::ContextInfo>,
    preview: Option<&LinkPreview>,
) -> wa::Message {
    match (ctx, preview) {
        (None, None) => wa::Message::text(body),
        (Some(ctx), None) => wa::Message::text_with_context(body, ctx),
        (ctx, Some(p)) => wa::Message {
            extended_text_message: MessageField::some(wa::message::ExtendedTextMessage {
                text: Some(body.to_string()),
                matched_text: Some(p.url.clone()),
                title: p.title.clone(),
                description: p.description.clone(),
                jpeg_thumbnail: p.thumbnail.clone(),
                preview_type: Some(wa::message::extended_text_message::PreviewType::NONE),
                context_info: ctx.map(MessageField::some).unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        },
    }
}

/// What a quote carries when we only have the stored row, not the original protocol message: the
/// text the receiver sees (body or caption). Clients render the quote bubble from it.
pub fn quoted_stand_in(body: &str) -> wa::Message {
    wa::Message::text(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;
    use whatsapp_rust::proto_helpers::MessageExt;

    fn jid(raw: &str) -> Jid {
        Jid::from_str(raw).expect("test jid")
    }

    #[test]
    fn a_bare_body_is_the_library_conversation() {
        assert_eq!(text("hello", None, None), wa::Message::text("hello"));
    }

    #[test]
    fn mentions_go_into_extended_text_context() {
        let chat = jid("120363025246125888@g.us");
        let ann = jid("4915112345678@s.whatsapp.net");
        let ctx = context(&chat, std::slice::from_ref(&ann), None);
        let msg = text("hi @4915112345678", ctx, None);
        let oracle = wa::Message::text_with_context(
            "hi @4915112345678",
            wa::ContextInfo {
                mentioned_jid: vec!["4915112345678@s.whatsapp.net".into()],
                ..Default::default()
            },
        );
        assert_eq!(msg, oracle);
    }

    #[test]
    fn a_quote_is_the_library_quote_context() {
        let chat = jid("4915112345678@s.whatsapp.net");
        let original = wa::Message::text("original");
        let quote = Quote {
            id: "3EB0AABBCC".into(),
            sender: chat.clone(),
            chat: chat.clone(),
            message: original.clone(),
        };
        let msg = text("reply", context(&chat, &[], Some(&quote)), None);
        let oracle = wa::Message::text_with_context(
            "reply",
            build_quote_context_with_info("3EB0AABBCC", &chat, &chat, &chat, &original),
        );
        assert_eq!(msg, oracle);
        let ctx = msg
            .extended_text_message
            .as_option()
            .and_then(|m| m.context_info.as_option());
        assert_eq!(ctx.and_then(|c| c.stanza_id.as_deref()), Some("3EB0AABBCC"));
        assert_eq!(msg.text_content(), Some("reply"));
    }

    #[test]
    fn a_quote_and_mentions_share_one_context() {
        let chat = jid("120363025246125888@g.us");
        let ann = jid("4915112345678@s.whatsapp.net");
        let quote = Quote {
            id: "ID1".into(),
            sender: ann.clone(),
            chat: chat.clone(),
            message: quoted_stand_in("earlier"),
        };
        let ctx = context(&chat, std::slice::from_ref(&ann), Some(&quote));
        let ctx = ctx.unwrap_or_default();
        assert_eq!(
            ctx.participant.as_deref(),
            Some("4915112345678@s.whatsapp.net")
        );
        assert_eq!(
            ctx.mentioned_jid,
            vec!["4915112345678@s.whatsapp.net".to_string()]
        );
        // Same chat: no remoteJid (WA Web sets it only for a cross-chat quote).
        assert_eq!(ctx.remote_jid, None);
    }

    #[test]
    fn a_link_preview_fills_the_extended_text_fields() {
        let preview = LinkPreview {
            url: "https://example.org/a".into(),
            title: Some("Example".into()),
            description: Some("An example page".into()),
            thumbnail: Some(vec![0xff, 0xd8]),
        };
        let msg = text("see https://example.org/a", None, Some(&preview));
        let ext = msg.extended_text_message.as_option();
        assert!(msg.conversation.is_none());
        assert_eq!(
            ext.and_then(|e| e.matched_text.as_deref()),
            Some("https://example.org/a")
        );
        assert_eq!(ext.and_then(|e| e.title.as_deref()), Some("Example"));
        assert_eq!(
            ext.and_then(|e| e.description.as_deref()),
            Some("An example page")
        );
        assert_eq!(
            ext.and_then(|e| e.jpeg_thumbnail.as_deref()),
            Some(&[0xff, 0xd8][..])
        );
        assert_eq!(msg.text_content(), Some("see https://example.org/a"));
        assert!(ext.is_some_and(|e| e.context_info.as_option().is_none()));
    }
}
