//! Operations on existing messages: react (empty emoji removes), edit, revoke for everyone or for me,
//! forward, pin/unpin, poll vote (with the poll's persisted secret), read receipts, mark unread, star,
//! and the buttons reply. The message's key (who sent it) comes from our store.

use crate::build;
use crate::whatsapp_rust::send::{PinDuration, RevokeType};

use super::{
    Client, Media, Store, author_of, fail, fail_any, message_key, now_secs, send, stored, wa,
};
use wagate_engine_api::{EngineError, EngineResult, SentMessage};
use wagate_proto::Jid;

pub(crate) async fn react(
    client: &Client,
    store: Store<'_>,
    chat: &Jid,
    id: &str,
    emoji: &str,
) -> EngineResult<()> {
    let key = message_key(store, chat, id).await?;
    client
        .send_reaction(wa(chat)?, key, emoji)
        .await
        .map_err(fail)?;
    Ok(())
}

/// Edits our own text message; the answer names the edited message.
pub(crate) async fn edit(
    client: &Client,
    chat: &Jid,
    id: &str,
    body: &str,
) -> EngineResult<SentMessage> {
    client
        .edit_message(wa(chat)?, id, build::edit_body(body))
        .await
        .map_err(fail)?;
    Ok(SentMessage {
        id: id.to_string(),
        timestamp: now_secs(),
    })
}

/// For everyone: our own message (sender revoke) or, in a group, another member's (admin revoke).
/// For me: an app-state "delete for me" on our devices only.
pub(crate) async fn revoke(
    client: &Client,
    store: Store<'_>,
    chat: &Jid,
    id: &str,
    for_everyone: bool,
) -> EngineResult<()> {
    let key = message_key(store, chat, id).await?;
    let from_me = key.from_me.unwrap_or(false);
    let participant = key
        .participant
        .as_deref()
        .and_then(|p| p.parse::<crate::whatsapp_rust::Jid>().ok());
    if for_everyone {
        let kind = match participant {
            Some(original_sender) if !from_me => RevokeType::Admin { original_sender },
            _ => RevokeType::Sender,
        };
        return client
            .revoke_message(wa(chat)?, id, kind)
            .await
            .map_err(fail);
    }
    let timestamp = stored(store, id).await?.map(|r| r.timestamp);
    client
        .chat_actions()
        .delete_message_for_me(
            &wa(chat)?,
            participant.as_ref(),
            id,
            from_me,
            true,
            timestamp,
        )
        .await
        .map_err(fail)
}

/// Re-sends a stored message's content to another chat, marked as forwarded (the library's forward
/// copy). We keep no protocol message, so the content is rebuilt from our row; media is uploaded
/// again from the media store object the row's media key names.
pub(crate) async fn forward(
    client: &Client,
    store: Store<'_>,
    media: Media<'_>,
    to: &Jid,
    id: &str,
) -> EngineResult<SentMessage> {
    let row = stored(store, id)
        .await?
        .ok_or_else(|| EngineError::NotFound(format!("Message {id} not found")))?;
    let original = send::stored_content(client, &row, media).await?;
    let message = build::forwarded(&original);
    let sent = client.send_message(wa(to)?, message).await.map_err(fail)?;
    Ok(SentMessage {
        id: sent.message_id,
        timestamp: now_secs(),
    })
}

/// The pin durations WhatsApp offers; another duration rounds up to the next one.
fn pin_duration(seconds: u32) -> PinDuration {
    match seconds {
        0..=86_400 => PinDuration::Hours24,
        86_401..=604_800 => PinDuration::Days7,
        _ => PinDuration::Days30,
    }
}

pub(crate) async fn pin(
    client: &Client,
    store: Store<'_>,
    chat: &Jid,
    id: &str,
    duration_s: u32,
) -> EngineResult<()> {
    let key = message_key(store, chat, id).await?;
    client
        .pin_message(wa(chat)?, key, pin_duration(duration_s))
        .await
        .map_err(fail)
}

pub(crate) async fn unpin(
    client: &Client,
    store: Store<'_>,
    chat: &Jid,
    id: &str,
) -> EngineResult<()> {
    let key = message_key(store, chat, id).await?;
    client.unpin_message(wa(chat)?, key).await.map_err(fail)
}

/// Votes with the poll's secret, which the library persisted (in our store's backend) when the poll
/// was sent or received; without it the vote cannot be encrypted. Empty `options` encrypt an empty
/// selection, which is how WhatsApp withdraws a vote (the receive side reads it back that way).
pub(crate) async fn vote_poll(
    client: &Client,
    store: Store<'_>,
    chat: &Jid,
    poll_id: &str,
    options: &[String],
) -> EngineResult<()> {
    let row = stored(store, poll_id)
        .await?
        .ok_or_else(|| EngineError::NotFound(format!("Message {poll_id} not found")))?;
    let creator = author_of(client, chat, &row)?;
    let chat_wa = wa(chat)?;
    let backend = client.persistence_manager().backend();
    let mut secret = None;
    for sender in [
        creator.to_non_ad(),
        client
            .lid()
            .map(|l| l.to_non_ad())
            .unwrap_or_else(|| creator.to_non_ad()),
    ] {
        secret = backend
            .get_msg_secret(
                &chat_wa.to_non_ad().to_string(),
                &sender.to_string(),
                &row.wa_message_id,
            )
            .await
            .map_err(|e| EngineError::Network(format!("poll secret lookup: {e}")))?;
        if secret.is_some() {
            break;
        }
    }
    let secret = secret.ok_or_else(|| {
        EngineError::NotFound(format!(
            "Poll {poll_id} has no stored secret (it was not seen by this session)"
        ))
    })?;
    client
        .polls()
        .vote(chat_wa, &row.wa_message_id, &creator, &secret, options)
        .await
        .map_err(fail)?;
    Ok(())
}

/// Read receipts for the given messages (the socket engine honours `messageIds`), or the whole chat
/// read through the app-state action when none are named.
pub(crate) async fn mark_read(
    client: &Client,
    store: Store<'_>,
    chat: &Jid,
    ids: &[String],
) -> EngineResult<()> {
    let chat_wa = wa(chat)?;
    if ids.is_empty() {
        return client
            .chat_actions()
            .mark_chat_as_read(&chat_wa, true, None)
            .await
            .map_err(fail);
    }
    let mut by_sender: Vec<(Option<crate::whatsapp_rust::Jid>, Vec<String>)> = Vec::new();
    for id in ids {
        let row = stored(store, id).await?;
        let sender = match (&row, chat.is_group()) {
            (Some(r), true) => Some(author_of(client, chat, r)?),
            _ => None,
        };
        let wa_id = row.map(|r| r.wa_message_id).unwrap_or_else(|| id.clone());
        match by_sender.iter_mut().find(|(s, _)| *s == sender) {
            Some((_, list)) => list.push(wa_id),
            None => by_sender.push((sender, vec![wa_id])),
        }
    }
    for (sender, list) in by_sender {
        let refs: Vec<&str> = list.iter().map(String::as_str).collect();
        client
            .mark_as_read(&chat_wa, sender.as_ref(), &refs)
            .await
            .map_err(|e| fail_any(&e))?;
    }
    Ok(())
}

pub(crate) async fn mark_unread(client: &Client, chat: &Jid) -> EngineResult<()> {
    client
        .chat_actions()
        .mark_chat_as_read(&wa(chat)?, false, None)
        .await
        .map_err(fail)
}

pub(crate) async fn star(
    client: &Client,
    store: Store<'_>,
    chat: &Jid,
    id: &str,
    star: bool,
) -> EngineResult<()> {
    let key = message_key(store, chat, id).await?;
    let from_me = key.from_me.unwrap_or(false);
    let participant = key
        .participant
        .as_deref()
        .and_then(|p| p.parse::<crate::whatsapp_rust::Jid>().ok());
    let msg_id = key.id.unwrap_or_else(|| id.to_string());
    let chat_wa = wa(chat)?;
    let actions = client.chat_actions();
    let result = if star {
        actions
            .star_message(&chat_wa, participant.as_ref(), &msg_id, from_me)
            .await
    } else {
        actions
            .unstar_message(&chat_wa, participant.as_ref(), &msg_id, from_me)
            .await
    };
    result.map_err(fail)
}

/// Answers a buttons message: a `buttonsResponseMessage` quoting it.
pub(crate) async fn click_button(
    client: &Client,
    store: Store<'_>,
    chat: &Jid,
    id: &str,
    button_id: &str,
    text: Option<&str>,
) -> EngineResult<SentMessage> {
    let row = stored(store, id)
        .await?
        .ok_or_else(|| EngineError::NotFound(format!("Message {id} not found")))?;
    let chat_wa = wa(chat)?;
    let quote = build::Quote {
        id: row.wa_message_id.clone(),
        sender: author_of(client, chat, &row)?,
        chat: chat_wa.clone(),
        message: build::quoted_stand_in(row.body.as_deref().unwrap_or_default()),
    };
    let ctx = build::context(&chat_wa, &[], Some(&quote));
    let message = build::buttons_reply(button_id, text.unwrap_or(button_id), ctx);
    let sent = client.send_message(chat_wa, message).await.map_err(fail)?;
    Ok(SentMessage {
        id: sent.message_id,
        timestamp: now_secs(),
    })
}
