//! Property tests of the parsers that take outside input inside the node: the webhook filter (as decoded from
//! JSON, validated and evaluated), the session-name, pairing-phone and free-text-name rules (the environment
//! value rules have theirs in `wagate-config`). No input may panic them; values that print and parse back
//! must round-trip.

use proptest::prelude::*;
use serde_json::{Value, json};
use wagate_proto::dto::webhooks::{FilterCondition, WebhookFilters};

use crate::events::filter;
use crate::names::printable;
use crate::sessions::lifecycle::is_pairing_phone;
use crate::sessions::service::check_name;

const FIELDS: [&str; 10] = [
    "sender",
    "recipient",
    "chatId",
    "body",
    "type",
    "isGroup",
    "kind",
    "fromMe",
    "hasMedia",
    "mentions",
];
const OPERATORS: [&str; 4] = ["is", "isNot", "contains", "equals"];

fn operand() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        ".{0,12}".prop_map(Value::String),
        prop::collection::vec(".{0,8}", 0..4).prop_map(|l| json!(l)),
    ]
}

fn condition() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(FIELDS.to_vec()),
        prop::sample::select(OPERATORS.to_vec()),
        operand(),
        prop::option::of(any::<bool>()),
    )
        .prop_map(|(field, operator, value, case)| {
            let mut c = json!({ "field": field, "operator": operator, "value": value });
            if let Some(case) = case {
                c["caseSensitive"] = json!(case);
            }
            c
        })
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        ".{0,12}".prop_map(Value::String),
        prop::collection::vec(".{0,8}", 0..3).prop_map(|l| json!(l)),
    ]
}

/// An event `data` object holding any subset of the filterable keys, with values of any JSON kind.
fn event_data() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(
        prop::sample::select(vec![
            "from",
            "to",
            "chatId",
            "body",
            "type",
            "isGroup",
            "kind",
            "fromMe",
            "hasMedia",
            "mentionedIds",
        ]),
        scalar(),
        0..10,
    )
    .prop_map(|m| json!(m))
}

proptest! {
    #[test]
    fn any_json_decodes_to_filters_or_an_error_without_panicking(raw in any::<String>()) {
        if let Ok(filters) = serde_json::from_str::<WebhookFilters>(&raw) {
            let _ = filter::validate(&filters.conditions);
        }
    }

    #[test]
    fn generated_filters_validate_evaluate_and_round_trip(
        conditions in prop::collection::vec(condition(), 0..24),
        data in event_data(),
    ) {
        let raw = json!({ "conditions": conditions });
        let filters: WebhookFilters = serde_json::from_value(raw).expect("well-formed conditions decode");
        let verdict = filter::validate(&filters.conditions);
        if filters.conditions.len() > filter::MAX_CONDITIONS {
            prop_assert!(verdict.is_err());
        }
        let _ = filter::evaluate(&filters.conditions, &data);
        let printed = serde_json::to_value(&filters).expect("filters serialise");
        let again: WebhookFilters = serde_json::from_value(printed).expect("and decode again");
        prop_assert_eq!(again, filters);
    }

    #[test]
    fn is_and_is_not_disagree_on_a_present_field(condition in condition(), data in event_data()) {
        let is: FilterCondition = serde_json::from_value(json!({
            "field": condition["field"], "operator": "is", "value": condition["value"],
        })).expect("decodes");
        let present = data.get(is.field.data_key()).is_some_and(|v| !v.is_null());
        let is_not = FilterCondition { operator: wagate_proto::dto::webhooks::FilterOperator::IsNot, ..is.clone() };
        let holds = filter::evaluate(std::slice::from_ref(&is), &data).is_ok();
        let holds_not = filter::evaluate(std::slice::from_ref(&is_not), &data).is_ok();
        if present {
            prop_assert_ne!(holds, holds_not);
        } else {
            prop_assert!(!holds && !holds_not, "a missing field suppresses either way");
        }
    }

    #[test]
    fn session_names_are_exactly_3_to_50_letters_digits_and_hyphens(raw in any::<String>()) {
        let expected = (3..=50).contains(&raw.chars().count())
            && raw.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        prop_assert_eq!(check_name(&raw).is_ok(), expected);
    }

    #[test]
    fn well_formed_session_names_are_accepted(raw in "[A-Za-z0-9-]{3,50}") {
        prop_assert!(check_name(&raw).is_ok());
    }

    #[test]
    fn pairing_phones_are_exactly_1_to_15_digits(raw in any::<String>(), digits in "[0-9]{1,15}") {
        let expected = (1..=15).contains(&raw.len()) && raw.bytes().all(|b| b.is_ascii_digit());
        prop_assert_eq!(is_pairing_phone(&raw), expected);
        prop_assert!(is_pairing_phone(&digits));
        let plus = format!("+{digits}");
        prop_assert!(!is_pairing_phone(&plus));
    }

    #[test]
    fn names_pass_unless_they_hold_a_control_character(raw in any::<String>()) {
        prop_assert_eq!(printable("name", &raw).is_ok(), !raw.chars().any(char::is_control));
    }
}
