//! Every engine operation as one enum (`Op`), and each engine's capabilities declared as data.
//! Input: the spec's "Engine support differences" table. This file decides nothing at run time beyond
//! `Capabilities::supports`; the 501 mapping itself lives in the HTTP error module.

use std::fmt;

macro_rules! ops {
    ($($variant:ident => $name:literal,)*) => {
        /// One operation an engine may or may not support. Its `as_str` is the `<operation>` in the 501
        /// message `Operation not supported by the active engine: <operation>`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Op {
            $($variant,)*
        }

        impl Op {
            pub const ALL: &'static [Op] = &[$(Op::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Op::$variant => $name,)*
                }
            }
        }
    };
}

ops! {
    Start => "start",
    Stop => "stop",
    Logout => "logout",
    Kill => "forceKill",
    RequestPairingCode => "requestPairingCode",
    SendText => "sendText",
    SendMedia => "sendMedia",
    SendLocation => "sendLocation",
    SendContact => "sendContact",
    SendPoll => "sendPoll",
    SendProduct => "sendProduct",
    React => "react",
    Edit => "edit",
    Revoke => "delete",
    Forward => "forward",
    Pin => "pin",
    Unpin => "unpin",
    VotePoll => "votePoll",
    MarkRead => "markRead",
    MarkUnread => "markUnread",
    Star => "star",
    ClickButton => "clickButton",
    ListChats => "getChats",
    ArchiveChat => "archiveChat",
    PinChat => "pinChat",
    MuteChat => "muteChat",
    SetChatState => "setChatState",
    ClearChat => "clearChat",
    DeleteChat => "deleteChat",
    ListContacts => "getContacts",
    GetContact => "getContact",
    CheckNumber => "checkNumber",
    ProfilePicture => "getProfilePicture",
    Block => "blockContact",
    Unblock => "unblockContact",
    BlockedList => "getBlockedContacts",
    SaveContact => "saveContact",
    DeleteContact => "deleteContact",
    ListGroups => "getGroups",
    CreateGroup => "createGroup",
    GroupInfo => "getGroupInfo",
    AddParticipants => "addParticipants",
    RemoveParticipants => "removeParticipants",
    PromoteParticipants => "promoteParticipants",
    DemoteParticipants => "demoteParticipants",
    SetGroupSubject => "setGroupSubject",
    SetGroupDescription => "setGroupDescription",
    GroupInviteCode => "getGroupInviteCode",
    RevokeGroupInvite => "revokeGroupInvite",
    JoinGroup => "joinGroup",
    GroupJoinInfo => "getGroupJoinInfo",
    LeaveGroup => "leaveGroup",
    MembershipRequests => "getMembershipRequests",
    ApproveMembership => "approveMembershipRequests",
    RejectMembership => "rejectMembershipRequests",
    GroupSettings => "getGroupSettings",
    UpdateGroupSettings => "updateGroupSettings",
    GroupPicture => "getGroupPicture",
    SetGroupPicture => "setGroupPicture",
    RemoveGroupPicture => "removeGroupPicture",
    ListChannels => "getChannels",
    CreateChannel => "createChannel",
    ChannelInfo => "getChannel",
    ChannelMessages => "getChannelMessages",
    SubscribeChannel => "subscribeChannel",
    UnsubscribeChannel => "unsubscribeChannel",
    DeleteChannel => "deleteChannel",
    MuteChannel => "muteChannel",
    DemoteChannelAdmin => "demoteChannelAdmin",
    TransferChannelOwner => "transferChannelOwnership",
    ListLabels => "getLabels",
    GetLabel => "getLabel",
    LabelChats => "getLabelChats",
    ChatLabels => "getChatLabels",
    UpsertLabel => "upsertLabel",
    DeleteLabel => "deleteLabel",
    AddChatLabel => "addChatLabel",
    RemoveChatLabel => "removeChatLabel",
    PostStatus => "sendStatus",
    ListStatuses => "getStatuses",
    ContactStatuses => "getContactStatuses",
    DeleteStatus => "deleteStatus",
    RejectCall => "rejectCall",
    CreateCallLink => "createCallLink",
    SetProfileName => "setProfileName",
    SetProfileStatus => "setProfileStatus",
    SetProfilePicture => "setProfilePicture",
    RemoveProfilePicture => "removeProfilePicture",
    Catalog => "getCatalog",
    ListProducts => "getProducts",
    GetProduct => "getProduct",
    SetPresence => "setPresence",
    SubscribePresence => "subscribePresence",
    GetPresence => "getPresence",
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an engine can do, as data, so the supervisor and the docs can ask without calling the engine.
/// Created once per engine kind (the consts below); engines return it from their factory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// Operations that answer 501 on this engine. A list of refusals is shorter than a list of grants,
    /// and a new `Op` is then supported-by-declaration until someone decides otherwise.
    pub unsupported: &'static [Op],
    /// `presence.update` can fire.
    pub emits_presence: bool,
    /// `call.*` events can fire and `autoRejectCalls` has an effect.
    pub emits_calls: bool,
    /// Status posts need a non-empty `recipients` list (400 otherwise); `false` means it is ignored.
    pub status_recipients_required: bool,
    /// Chat read honours `messageIds`; `false` means a chat-level receipt.
    pub honours_read_message_ids: bool,
    /// Media can be sent to a `@newsletter` recipient (text always can).
    pub media_to_channels: bool,
}

/// Label reads and the channel list/messages: the socket column's 501 rows.
const SOCKET_UNSUPPORTED: &[Op] = &[
    Op::ListLabels,
    Op::GetLabel,
    Op::LabelChats,
    Op::ChatLabels,
    Op::ListChannels,
    Op::ChannelMessages,
];

/// The browser column's 501 rows (call rejection included: the browser engine has no call detection).
const BROWSER_UNSUPPORTED: &[Op] = &[
    Op::CreateGroup,
    Op::DemoteChannelAdmin,
    Op::TransferChannelOwner,
    Op::UpsertLabel,
    Op::DeleteLabel,
    Op::AddChatLabel,
    Op::RemoveChatLabel,
    Op::SubscribeChannel,
    Op::Catalog,
    Op::ListProducts,
    Op::GetProduct,
    Op::SendProduct,
    Op::RejectCall,
    // The wire notes make click-button socket only.
    Op::ClickButton,
];

impl Capabilities {
    /// The socket engine's column of the spec's table; the sim engine follows it too.
    pub const SOCKET: Capabilities = Capabilities {
        unsupported: SOCKET_UNSUPPORTED,
        emits_presence: true,
        emits_calls: true,
        status_recipients_required: true,
        honours_read_message_ids: true,
        media_to_channels: true,
    };

    /// The browser engine's column of the spec's table.
    pub const BROWSER: Capabilities = Capabilities {
        unsupported: BROWSER_UNSUPPORTED,
        emits_presence: false,
        emits_calls: false,
        status_recipients_required: false,
        honours_read_message_ids: false,
        media_to_channels: false,
    };

    pub fn supports(&self, op: Op) -> bool {
        !self.unsupported.contains(&op)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn op_names_are_unique() {
        let names: HashSet<_> = Op::ALL.iter().map(|op| op.as_str()).collect();
        assert_eq!(names.len(), Op::ALL.len());
    }

    #[test]
    fn socket_refuses_label_reads_and_channel_lists_only() {
        let caps = Capabilities::SOCKET;
        assert!(!caps.supports(Op::ListLabels) && !caps.supports(Op::ListChannels));
        assert!(caps.supports(Op::UpsertLabel) && caps.supports(Op::CreateGroup));
        assert!(caps.supports(Op::SendProduct) && caps.supports(Op::RejectCall));
    }

    #[test]
    fn browser_refuses_group_create_and_catalog() {
        let caps = Capabilities::BROWSER;
        assert!(!caps.supports(Op::CreateGroup) && !caps.supports(Op::Catalog));
        assert!(caps.supports(Op::ListLabels) && caps.supports(Op::ListChannels));
    }
}
