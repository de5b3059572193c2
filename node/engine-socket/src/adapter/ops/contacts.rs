//! Contacts: number check, profile picture, block list, save/delete (app-state contact action), and
//! the contact list, which the library cannot query: one-to-one chats we stored, with the names the
//! network gave us, marked against the live block list.

use std::collections::HashSet;

use crate::build::wa as proto;
use crate::whatsapp_rust::Jid as WaJid;
use crate::whatsapp_rust::schemas;
use wagate_proto::Jid;

use super::{Client, Store, fail, wa, wire};
use wagate_engine_api::{Contact, ContactCheck, EngineError, EngineResult};

pub(crate) async fn list(client: &Client, store: Store<'_>) -> EngineResult<Vec<Contact>> {
    let blocked: HashSet<Jid> = blocked(client).await?.into_iter().collect();
    let rows = store.db.contact_names(store.session_id).await?;
    Ok(rows
        .into_iter()
        .filter_map(|(id, name)| Jid::parse(&id).ok().map(|id| (id, name)))
        .filter(|(id, _)| matches!(id.server(), "c.us" | "lid"))
        .map(|(id, name)| Contact {
            is_blocked: blocked.contains(&id),
            id,
            name: None,
            push_name: name,
            is_my_contact: false,
            profile_pic_url: None,
        })
        .collect())
}

pub(crate) async fn get(client: &Client, store: Store<'_>, id: &Jid) -> EngineResult<Contact> {
    let known = list(client, store).await?.into_iter().find(|c| &c.id == id);
    let mut contact = match known {
        Some(c) => c,
        None => Contact {
            id: id.clone(),
            name: None,
            push_name: None,
            is_blocked: client.blocking().is_blocked(&wa(id)?).await.map_err(fail)?,
            is_my_contact: false,
            profile_pic_url: None,
        },
    };
    contact.profile_pic_url = picture(client, id).await?;
    Ok(contact)
}

/// Asks the network; `exists: false` only when it answered (an unanswered query is a timeout).
pub(crate) async fn check(client: &Client, number: &str) -> EngineResult<ContactCheck> {
    let wire_jid = Jid::from_phone(number).map_err(|e| EngineError::BadInput(e.to_string()))?;
    let results = client
        .contacts()
        .is_on_whatsapp(&[wa(&wire_jid)?])
        .await
        .map_err(fail)?;
    let hit = results.into_iter().find(|r| {
        r.jid.user == wire_jid.user()
            || r.pn_jid.as_ref().is_some_and(|p| p.user == wire_jid.user())
    });
    let exists = hit.as_ref().is_some_and(|r| r.is_registered);
    let whatsapp_id = hit
        .and_then(|r| r.pn_jid.as_ref().or(Some(&r.jid)).and_then(wire))
        .unwrap_or_else(|| wire_jid.clone());
    Ok(ContactCheck {
        number: wire_jid.user().to_string(),
        exists,
        whatsapp_id,
    })
}

/// The full-size picture URL of a contact or group; `None` when there is none or it is hidden.
pub(crate) async fn picture(client: &Client, id: &Jid) -> EngineResult<Option<String>> {
    let pic = client
        .contacts()
        .get_profile_picture(&wa(id)?, false)
        .await
        .map_err(fail)?;
    Ok(pic.map(|p| p.url).filter(|u| !u.is_empty()))
}

pub(crate) async fn block(client: &Client, id: &Jid, block: bool) -> EngineResult<()> {
    let jid = wa(id)?;
    let blocking = client.blocking();
    let done = if block {
        blocking.block(&jid).await
    } else {
        blocking.unblock(&jid).await
    };
    done.map_err(fail)
}

pub(crate) async fn blocked(client: &Client) -> EngineResult<Vec<Jid>> {
    let list = client.blocking().get_blocklist().await.map_err(fail)?;
    Ok(list.iter().filter_map(|e| wire(&e.jid)).collect())
}

/// Saves the number in the account's address book (the primary phone's too).
pub(crate) async fn save(
    client: &Client,
    id: &Jid,
    first: &str,
    last: Option<&str>,
) -> EngineResult<()> {
    let full = match last {
        Some(last) if !last.is_empty() => format!("{first} {last}"),
        _ => first.to_string(),
    };
    client
        .chat_actions()
        .save_contact(&phone_jid(id)?, Some(full), Some(first.to_string()), true)
        .await
        .map_err(fail)
}

/// Drops the name from the address book: the contact action with no names and not saved on the
/// primary address book. (The library only sends app-state SET mutations, not REMOVE.)
pub(crate) async fn delete(client: &Client, id: &Jid) -> EngineResult<()> {
    let jid = phone_jid(id)?.to_string();
    let value = proto::SyncActionValue {
        contact_action: crate::whatsapp_rust::buffa::MessageField::some(
            proto::sync_action_value::ContactAction {
                save_on_primary_addressbook: Some(false),
                ..Default::default()
            },
        ),
        timestamp: Some(chrono::Utc::now().timestamp_millis()),
        ..Default::default()
    };
    client
        .send_app_state_action(&schemas::CONTACT, &[jid.as_str()], &value)
        .await
        .map_err(fail)
}

fn phone_jid(id: &Jid) -> EngineResult<WaJid> {
    if id.server() != "c.us" {
        return Err(EngineError::BadInput(format!(
            "'{id}' is not a phone-number contact"
        )));
    }
    wa(id)
}
