//! NUL characters out of the text an engine hands over. Network text may carry U+0000 (a sender's client
//! can put it there), PostgreSQL refuses it in `text` and `jsonb`, and a refused event is retried for as
//! long as the network redelivers it: one such message would hold its session's event loop for ever. The
//! characters carry nothing a reader sees, so they are dropped before anything is stored.

use crate::engine::{EngineEvent, InboundMessage};

/// Drops every NUL from the text fields of `event` that are stored or published.
pub(crate) fn strip_nul(event: &mut EngineEvent) {
    match event {
        EngineEvent::Message(message) => message_text(message),
        EngineEvent::Edited { body, .. } => clean(body),
        EngineEvent::Reaction { reaction, .. } => clean(reaction),
        EngineEvent::Status(status) => clean_opt(&mut status.caption),
        EngineEvent::History(batch) => {
            batch.messages.iter_mut().for_each(|(m, _)| message_text(m));
            batch.chats.iter_mut().for_each(|c| clean_opt(&mut c.name));
            batch.push_names.iter_mut().for_each(|(_, n)| clean(n));
        }
        EngineEvent::PollVote(vote) => vote.options.iter_mut().for_each(clean),
        EngineEvent::Group(group) => {
            if let Some(changes) = group.changes.as_mut() {
                clean_opt(&mut changes.subject);
                clean_opt(&mut changes.description);
            }
        }
        _ => {}
    }
}

fn message_text(message: &mut InboundMessage) {
    clean(&mut message.body);
    if let Some(media) = message.media.as_mut() {
        clean_opt(&mut media.filename);
    }
    if let Some(quoted) = message.quoted.as_mut() {
        clean(&mut quoted.body);
    }
    if let Some(location) = message.location.as_mut() {
        clean_opt(&mut location.description);
    }
    if let Some(poll) = message.poll.as_mut() {
        clean(&mut poll.name);
        poll.options.iter_mut().for_each(clean);
    }
}

fn clean(text: &mut String) {
    if text.contains('\0') {
        text.retain(|c| c != '\0');
    }
}

fn clean_opt(text: &mut Option<String>) {
    if let Some(text) = text.as_mut() {
        clean(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_is_dropped_and_other_text_kept() {
        let mut text = "héllo ✓ \u{0}x".to_owned();
        clean(&mut text);
        assert_eq!(text, "héllo ✓ x");
        let mut plain = "plain".to_owned();
        clean(&mut plain);
        assert_eq!(plain, "plain");
    }
}
