//! The facade's answers (`js/bridge.js`, camelCase JSON) as the engine API's entity types. Ids the page
//! reports that are not WhatsApp ids are dropped from lists, never guessed; a single record with a bad id
//! is an unexpected bridge answer.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use wagate_engine_api::{
    Channel, ChatSummary, Contact, EngineError, EngineResult, GroupInfo, GroupParticipant,
    GroupSettings, GroupSummary, InboundMessage, Label, MembershipRequest, ParticipantResult,
    PresenceEntry, PresenceState, StatusUpdate,
};
use wagate_proto::Jid;

use super::events;

/// How long a status post stays visible.
const STATUS_LIFETIME_S: i64 = 24 * 60 * 60;

pub(super) fn decode<T: DeserializeOwned>(value: Value) -> EngineResult<T> {
    serde_json::from_value(value).map_err(|e| unexpected(&e))
}

fn unexpected(what: &dyn std::fmt::Display) -> EngineError {
    EngineError::Network(format!("unexpected bridge answer: {what}"))
}

fn jid(raw: &str) -> EngineResult<Jid> {
    Jid::parse(raw).map_err(|e| unexpected(&e))
}

#[derive(Deserialize)]
pub(super) struct Sent {
    pub id: String,
    pub timestamp: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PageChat {
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
    #[serde(default)]
    muted: bool,
    #[serde(default)]
    mute_expiration: i64,
}

impl PageChat {
    pub(super) fn into_summary(self) -> Option<ChatSummary> {
        Some(ChatSummary {
            id: Jid::parse(&self.id).ok()?,
            name: self.name.unwrap_or_default(),
            archived: self.archived,
            pinned: self.pinned,
            muted: self.muted,
            mute_expiration: if self.muted { self.mute_expiration } else { 0 },
            unread_count: self.unread_count,
            timestamp: self.timestamp,
            last_message: None,
        })
    }
}

pub(super) fn chats(value: Value) -> EngineResult<Vec<ChatSummary>> {
    let chats: Vec<PageChat> = decode(value)?;
    Ok(chats
        .into_iter()
        .filter_map(PageChat::into_summary)
        .collect())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PageContact {
    id: String,
    name: Option<String>,
    push_name: Option<String>,
    #[serde(default)]
    is_my_contact: bool,
    #[serde(default)]
    is_blocked: bool,
    profile_pic_url: Option<String>,
}

impl PageContact {
    pub(super) fn into_contact(self) -> Option<Contact> {
        Some(Contact {
            id: Jid::parse(&self.id).ok()?,
            name: self.name,
            push_name: self.push_name,
            is_blocked: self.is_blocked,
            is_my_contact: self.is_my_contact,
            profile_pic_url: self.profile_pic_url,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageLabel {
    id: String,
    name: String,
    #[serde(default)]
    color_index: u8,
}

fn label(l: PageLabel) -> Label {
    Label {
        id: l.id,
        name: l.name,
        color: l.color_index.min(19),
    }
}

pub(super) fn labels(value: Value) -> EngineResult<Vec<Label>> {
    let labels: Vec<PageLabel> = decode(value)?;
    Ok(labels.into_iter().map(label).collect())
}

pub(super) fn one_label(value: Value) -> EngineResult<Label> {
    decode(value).map(label)
}

pub(super) fn jids(value: Value) -> EngineResult<Vec<Jid>> {
    let ids: Vec<String> = decode(value)?;
    Ok(ids.iter().filter_map(|id| Jid::parse(id).ok()).collect())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageGroup {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    participants_count: usize,
    #[serde(default)]
    is_admin: bool,
}

pub(super) fn groups(value: Value) -> EngineResult<Vec<GroupSummary>> {
    let groups: Vec<PageGroup> = decode(value)?;
    Ok(groups
        .into_iter()
        .filter_map(|g| {
            Some(GroupSummary {
                id: Jid::parse(&g.id).ok()?,
                name: g.name,
                participants_count: g.participants_count,
                is_admin: g.is_admin,
            })
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageParticipant {
    id: String,
    #[serde(default)]
    is_admin: bool,
    #[serde(default)]
    is_super_admin: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageGroupInfo {
    id: String,
    #[serde(default)]
    subject: String,
    #[serde(default)]
    description: String,
    owner: Option<String>,
    #[serde(default)]
    created_at: i64,
    #[serde(default)]
    participants: Vec<PageParticipant>,
}

pub(super) fn group_info(value: Value) -> EngineResult<GroupInfo> {
    let g: PageGroupInfo = decode(value)?;
    let id = jid(&g.id)?;
    let participants: Vec<GroupParticipant> = g
        .participants
        .into_iter()
        .filter_map(|p| {
            Some(GroupParticipant {
                id: Jid::parse(&p.id).ok()?,
                is_admin: p.is_admin || p.is_super_admin,
                is_super_admin: p.is_super_admin,
            })
        })
        .collect();
    // An invite preview may hide the owner: the super admin owns the group then.
    let owner = g
        .owner
        .as_deref()
        .and_then(|o| Jid::parse(o).ok())
        .or_else(|| {
            participants
                .iter()
                .find(|p| p.is_super_admin)
                .map(|p| p.id.clone())
        })
        .unwrap_or_else(|| id.clone());
    Ok(GroupInfo {
        id,
        subject: g.subject,
        description: g.description,
        owner,
        created_at: g.created_at,
        participants,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageParticipantResult {
    id: String,
    #[serde(default)]
    success: bool,
    #[serde(default)]
    status: u16,
    #[serde(default)]
    message: String,
}

pub(super) fn participant_results(value: Value) -> EngineResult<Vec<ParticipantResult>> {
    let results: Vec<PageParticipantResult> = decode(value)?;
    Ok(results
        .into_iter()
        .filter_map(|r| {
            Some(ParticipantResult {
                id: Jid::parse(&r.id).ok()?,
                success: r.success,
                status: r.status,
                message: r.message,
            })
        })
        .collect())
}

#[derive(Deserialize)]
struct PageRequest {
    id: String,
    #[serde(default)]
    t: i64,
}

pub(super) fn membership_requests(value: Value) -> EngineResult<Vec<MembershipRequest>> {
    let requests: Vec<PageRequest> = decode(value)?;
    Ok(requests
        .into_iter()
        .filter_map(|r| {
            Some(MembershipRequest {
                participant_id: Jid::parse(&r.id).ok()?,
                requested_at: r.t,
            })
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageGroupSettings {
    #[serde(default)]
    announce: bool,
    #[serde(default)]
    locked: bool,
    #[serde(default)]
    ephemeral_seconds: u32,
    #[serde(default)]
    admin_add_only: bool,
}

pub(super) fn group_settings(value: Value) -> EngineResult<GroupSettings> {
    let s: PageGroupSettings = decode(value)?;
    Ok(GroupSettings {
        announce: s.announce,
        locked: s.locked,
        ephemeral_seconds: s.ephemeral_seconds,
        admin_add_only: s.admin_add_only,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageChannel {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    invite_code: String,
    #[serde(default)]
    subscriber_count: usize,
    picture: Option<String>,
    #[serde(default)]
    verified: bool,
    #[serde(default)]
    created_at: i64,
    #[serde(default)]
    is_owner: bool,
    #[serde(default)]
    is_muted: bool,
}

impl PageChannel {
    fn into_channel(self) -> Option<Channel> {
        Some(Channel {
            id: Jid::parse(&self.id).ok()?,
            name: self.name,
            description: self.description,
            invite_code: self.invite_code,
            subscriber_count: self.subscriber_count,
            picture: self.picture,
            verified: self.verified,
            created_at: self.created_at,
            is_owner: self.is_owner,
            is_muted: self.is_muted,
        })
    }
}

pub(super) fn channels(value: Value) -> EngineResult<Vec<Channel>> {
    let channels: Vec<PageChannel> = decode(value)?;
    Ok(channels
        .into_iter()
        .filter_map(PageChannel::into_channel)
        .collect())
}

pub(super) fn channel(value: Value) -> EngineResult<Channel> {
    let c: PageChannel = decode(value)?;
    let id = c.id.clone();
    c.into_channel()
        .ok_or_else(|| unexpected(&format!("channel id {id}")))
}

/// A channel's posts: the page may leave out the recipient (a channel post has none) or the sender.
pub(super) fn channel_messages(channel: &Jid, value: Value) -> EngineResult<Vec<InboundMessage>> {
    let messages: Vec<Value> = decode(value)?;
    Ok(messages
        .into_iter()
        .filter_map(|mut m| {
            for field in ["from", "to"] {
                if m[field].as_str().and_then(|s| Jid::parse(s).ok()).is_none() {
                    m[field] = Value::String(channel.to_string());
                }
            }
            let mut message = events::message(&m)?;
            message.chat_id = channel.clone();
            Some(message)
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageStatus {
    id: String,
    contact: Option<String>,
    #[serde(rename = "type", default)]
    kind: String,
    caption: Option<String>,
    #[serde(default)]
    has_media: bool,
    #[serde(default)]
    timestamp: i64,
}

/// A status post as a `StatusUpdate`; `owner` when the page did not name the poster.
pub(super) fn posted_status(
    value: Value,
    owner: &Jid,
    kind: wagate_engine_api::MessageType,
    caption: Option<String>,
) -> EngineResult<StatusUpdate> {
    let s: Sent = decode(value)?;
    Ok(StatusUpdate {
        status_id: s.id,
        contact: owner.clone(),
        kind,
        caption,
        has_media: kind.has_media(),
        posted_at: s.timestamp,
        expires_at: s.timestamp + STATUS_LIFETIME_S,
        media: None,
    })
}

pub(super) fn statuses(value: Value, owner: &Jid) -> EngineResult<Vec<StatusUpdate>> {
    let list: Vec<PageStatus> = decode(value)?;
    Ok(list
        .into_iter()
        .map(|s| {
            let contact = s
                .contact
                .as_deref()
                .and_then(|c| Jid::parse(c).ok())
                .unwrap_or_else(|| owner.clone());
            let kind = events::kind(&s.kind);
            StatusUpdate {
                status_id: s.id,
                contact,
                kind,
                caption: s.caption.filter(|c| !c.is_empty()),
                has_media: s.has_media || kind.has_media(),
                posted_at: s.timestamp,
                expires_at: s.timestamp + STATUS_LIFETIME_S,
                media: None,
            }
        })
        .collect())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PagePresence {
    id: String,
    state: String,
    last_seen: Option<i64>,
}

/// `None`: nothing heard for the chat yet.
pub(super) fn presence(value: Value) -> EngineResult<Option<Vec<PresenceEntry>>> {
    let entries: Option<Vec<PagePresence>> = decode(value)?;
    Ok(entries.map(|list| {
        list.into_iter()
            .filter_map(|p| {
                let state = match p.state.as_str() {
                    "available" => PresenceState::Available,
                    "composing" => PresenceState::Composing,
                    "recording" => PresenceState::Recording,
                    "paused" => PresenceState::Paused,
                    _ => PresenceState::Unavailable,
                };
                Some(PresenceEntry {
                    id: Jid::parse(&p.id).ok()?,
                    state,
                    last_seen: p.last_seen,
                })
            })
            .collect()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_groups_channels_statuses_and_presence() {
        let info = group_info(json!({"id": "120363000000000001@g.us", "subject": "G",
            "participants": [{"id": "15550001111@c.us", "isSuperAdmin": true}, {"id": "junk"}]}))
        .unwrap();
        assert_eq!(info.participants.len(), 1);
        assert!(info.participants[0].is_admin);
        assert_eq!(info.owner.to_string(), "15550001111@c.us");

        let chan = channel(json!({"id": "120363000000000002@newsletter", "name": "C",
            "subscriberCount": 4, "isOwner": true}))
        .unwrap();
        assert_eq!((chan.subscriber_count, chan.is_owner), (4, true));
        assert!(channel(json!({"id": "nope"})).is_err());

        let me = Jid::parse("15550001111@c.us").unwrap();
        let list = statuses(
            json!([{"id": "s1", "type": "image", "caption": "", "timestamp": 10}]),
            &me,
        )
        .unwrap();
        assert_eq!(
            (
                list[0].contact.clone(),
                list[0].has_media,
                list[0].caption.clone()
            ),
            (me.clone(), true, None)
        );
        assert_eq!(list[0].expires_at, 10 + STATUS_LIFETIME_S);

        assert_eq!(presence(Value::Null).unwrap(), None);
        let heard = presence(json!([{"id": "15550002222@c.us", "state": "composing"}]))
            .unwrap()
            .unwrap();
        assert_eq!(heard[0].state, PresenceState::Composing);
    }

    #[test]
    fn a_channel_post_gets_its_channel_as_chat_and_sender() {
        let chan = Jid::parse("120363000000000002@newsletter").unwrap();
        let posts = channel_messages(
            &chan,
            json!([{"id": "p1", "from": null, "type": "chat", "body": "news", "timestamp": 5}]),
        )
        .unwrap();
        assert_eq!(posts.len(), 1);
        assert_eq!(
            (posts[0].chat_id.clone(), posts[0].from.clone()),
            (chan.clone(), chan)
        );
    }
}
