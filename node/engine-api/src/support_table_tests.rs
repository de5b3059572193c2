//! The spec's "Engine support differences" table, row by row, against `Capabilities::SOCKET` and
//! `Capabilities::BROWSER`: every operation a row names, and every flag it implies.

use super::op::{Capabilities, Op};

/// What a table cell says about an engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    Supported,
    Refused,
    /// "n/a": the spec makes no promise; not checked.
    NotApplicable,
}

use Cell::{NotApplicable as NA, Refused as No, Supported as Yes};

/// (row, operations, browser, socket)
const OP_ROWS: &[(&str, &[Op], Cell, Cell)] = &[
    ("Create a group", &[Op::CreateGroup], No, Yes),
    (
        "Channel owner transfer, channel admin demote",
        &[Op::TransferChannelOwner, Op::DemoteChannelAdmin],
        No,
        Yes,
    ),
    (
        "Label reads",
        &[Op::ListLabels, Op::GetLabel, Op::LabelChats, Op::ChatLabels],
        Yes,
        No,
    ),
    (
        "Label edits",
        &[
            Op::UpsertLabel,
            Op::DeleteLabel,
            Op::AddChatLabel,
            Op::RemoveChatLabel,
        ],
        NA,
        Yes,
    ),
    (
        "List channels, read channel messages",
        &[Op::ListChannels, Op::ChannelMessages],
        Yes,
        No,
    ),
    (
        "Subscribe to a channel by invite code",
        &[Op::SubscribeChannel],
        No,
        Yes,
    ),
    (
        "Catalog reads, send-product",
        &[
            Op::Catalog,
            Op::ListProducts,
            Op::GetProduct,
            Op::SendProduct,
        ],
        No,
        Yes,
    ),
    (
        "Call rejection, autoRejectCalls",
        &[Op::RejectCall],
        No,
        Yes,
    ),
    ("Send-poll", &[Op::SendPoll], Yes, Yes),
    ("Pairing code", &[Op::RequestPairingCode], Yes, Yes),
];

/// (row, flag, browser, socket)
type Flag = fn(&Capabilities) -> bool;
const FLAG_ROWS: &[(&str, Flag, bool, bool)] = &[
    (
        "Media send to @newsletter",
        |c| c.media_to_channels,
        false,
        true,
    ),
    ("Event presence.update", |c| c.emits_presence, false, true),
    (
        "Events call.*, autoRejectCalls",
        |c| c.emits_calls,
        false,
        true,
    ),
    (
        "Status posts recipients required",
        |c| c.status_recipients_required,
        false,
        true,
    ),
    (
        "Chat read messageIds honoured",
        |c| c.honours_read_message_ids,
        false,
        true,
    ),
];

fn check(caps: &Capabilities, engine: &str, row: &str, op: Op, cell: Cell) {
    match cell {
        Yes => assert!(
            caps.supports(op),
            "{engine}: {row}: {op} should be supported"
        ),
        No => assert!(
            !caps.supports(op),
            "{engine}: {row}: {op} should answer 501"
        ),
        NA => {}
    }
}

#[test]
fn every_operation_row_matches_both_columns() {
    for (row, ops, browser, socket) in OP_ROWS {
        for op in *ops {
            check(&Capabilities::BROWSER, "browser", row, *op, *browser);
            check(&Capabilities::SOCKET, "socket", row, *op, *socket);
        }
    }
}

#[test]
fn every_flag_row_matches_both_columns() {
    for (row, flag, browser, socket) in FLAG_ROWS {
        assert_eq!(flag(&Capabilities::BROWSER), *browser, "browser: {row}");
        assert_eq!(flag(&Capabilities::SOCKET), *socket, "socket: {row}");
    }
}

#[test]
fn socket_refuses_only_what_the_table_refuses() {
    let refused: Vec<Op> = OP_ROWS
        .iter()
        .filter(|(_, _, _, socket)| *socket == No)
        .flat_map(|(_, ops, _, _)| ops.iter().copied())
        .collect();
    for op in Op::ALL {
        assert_eq!(
            Capabilities::SOCKET.supports(*op),
            !refused.contains(op),
            "socket: {op} is refused only if a table row says so"
        );
    }
}
