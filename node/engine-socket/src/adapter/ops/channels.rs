//! Channels (newsletters) in the socket column: create, info, subscribe by invite code, unsubscribe,
//! mute, and the owner-only writes the library has no method for (delete, admin demote, owner
//! transfer), sent as the MEX mutations WA Web uses, with the library's own operation documents.

use crate::whatsapp_rust::features::{MexRequest, NewsletterMetadata, NewsletterRole};
use crate::whatsapp_rust::wacore::iq::mex_operations::{
    change_newsletter_owner, delete_newsletter, demote_newsletter_admin,
};
use wagate_proto::Jid;

use super::{Client, fail, wa, wire};
use wagate_engine_api::{Channel, EngineError, EngineResult};

fn channel(meta: &NewsletterMetadata) -> EngineResult<Channel> {
    Ok(Channel {
        id: wire(&meta.jid)
            .ok_or_else(|| EngineError::Network(format!("unexpected channel id {}", meta.jid)))?,
        name: meta.name.clone(),
        description: meta.description.clone().unwrap_or_default(),
        invite_code: meta.invite_code.clone().unwrap_or_default(),
        subscriber_count: usize::try_from(meta.subscriber_count).unwrap_or(usize::MAX),
        picture: meta.picture_url.clone(),
        verified: format!("{:?}", meta.verification).eq_ignore_ascii_case("verified"),
        created_at: meta.creation_time.map(|t| t as i64).unwrap_or(0),
        is_owner: matches!(meta.role, Some(NewsletterRole::Owner)),
        is_muted: false,
    })
}

pub(crate) async fn create(
    client: &Client,
    name: &str,
    description: Option<&str>,
) -> EngineResult<Channel> {
    let meta = client
        .newsletter()
        .create(name, description)
        .await
        .map_err(fail)?;
    channel(&meta)
}

pub(crate) async fn info(client: &Client, id: &Jid) -> EngineResult<Channel> {
    let meta = client
        .newsletter()
        .get_metadata(&wa(id)?)
        .await
        .map_err(fail)?;
    channel(&meta)
}

pub(crate) async fn subscribe(client: &Client, invite_code: &str) -> EngineResult<Channel> {
    let code = invite_code.rsplit('/').next().unwrap_or(invite_code);
    let found = client
        .newsletter()
        .get_metadata_by_invite(code)
        .await
        .map_err(fail)?;
    let joined = client.newsletter().join(&found.jid).await.map_err(fail)?;
    channel(&joined)
}

pub(crate) async fn unsubscribe(client: &Client, id: &Jid) -> EngineResult<()> {
    client.newsletter().leave(&wa(id)?).await.map_err(fail)
}

pub(crate) async fn mute(client: &Client, id: &Jid, mute: bool) -> EngineResult<()> {
    client
        .newsletter()
        .set_follower_mute(&wa(id)?, mute)
        .await
        .map_err(fail)
}

pub(crate) async fn delete(client: &Client, id: &Jid) -> EngineResult<()> {
    let vars = delete_newsletter::Variables {
        newsletter_id: Some(wa(id)?.to_string()),
    };
    let request = MexRequest::new(delete_newsletter::NAME, delete_newsletter::DOC_ID, vars);
    mutate(client, request, "xwa2_newsletter_delete_v2").await
}

pub(crate) async fn demote_admin(client: &Client, id: &Jid, user: &Jid) -> EngineResult<()> {
    let vars = demote_newsletter_admin::Variables {
        newsletter_id: Some(wa(id)?.to_string()),
        user_id: Some(wa(user)?.to_string()),
    };
    let request = MexRequest::new(
        demote_newsletter_admin::NAME,
        demote_newsletter_admin::DOC_ID,
        vars,
    );
    mutate(client, request, "xwa2_newsletter_admin_demote").await
}

pub(crate) async fn transfer_owner(client: &Client, id: &Jid, new_owner: &Jid) -> EngineResult<()> {
    let vars = change_newsletter_owner::Variables {
        newsletter_id: Some(wa(id)?.to_string()),
        user_id: Some(wa(new_owner)?.to_string()),
    };
    let request = MexRequest::new(
        change_newsletter_owner::NAME,
        change_newsletter_owner::DOC_ID,
        vars,
    );
    mutate(client, request, "xwa2_newsletter_change_owner").await
}

/// Runs a mutation; an answer without the operation's field is a refusal (as the library's own
/// newsletter methods treat it).
async fn mutate<V: serde::Serialize>(
    client: &Client,
    request: MexRequest<V>,
    field: &str,
) -> EngineResult<()> {
    let answer = client.mex().mutate(request).await.map_err(fail)?;
    let done = answer.data.as_ref().is_some_and(|d| !d[field].is_null());
    if done {
        Ok(())
    } else {
        Err(EngineError::Rejected(format!(
            "WhatsApp refused the channel change ({field})"
        )))
    }
}
