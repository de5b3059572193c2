//! Webhook filter conditions (wire-notes §4), shared with automation rules: shape validation at the API, and
//! evaluation against an event's `data`. Pure; no I/O. A condition on a field the payload lacks (or holds
//! as `null`) cannot match, so it suppresses the event.

use serde_json::Value;
use wagate_proto::dto::webhooks::{FilterCondition, FilterField, FilterOperator, FilterValue};

/// At most this many conditions per webhook or rule.
pub(crate) const MAX_CONDITIONS: usize = 20;

/// Why a condition list was refused at the API.
pub(crate) fn validate(conditions: &[FilterCondition]) -> Result<(), String> {
    if conditions.len() > MAX_CONDITIONS {
        return Err(format!(
            "filters.conditions must have at most {MAX_CONDITIONS} conditions"
        ));
    }
    for (i, c) in conditions.iter().enumerate() {
        match (&c.value, c.operator) {
            (FilterValue::List(list), _) if list.is_empty() => {
                return Err(format!(
                    "filters.conditions[{i}].value must not be an empty list"
                ));
            }
            (FilterValue::Bool(_), FilterOperator::Contains) => {
                return Err(format!(
                    "filters.conditions[{i}]: operator contains needs a string or string[] value"
                ));
            }
            _ => {}
        }
        if c.field == FilterField::Kind && c.operator != FilterOperator::Contains {
            check_kinds(i, &c.value)?;
        }
        if is_boolean(c.field) && !is_boolean_value(&c.value) {
            return Err(format!(
                "filters.conditions[{i}].value must be true or false for field {}",
                c.field.data_key()
            ));
        }
    }
    Ok(())
}

/// The chat kinds the spec names: an exact comparison with any other word could never match and would
/// silently suppress every event (or, negated, none).
const CHAT_KINDS: [&str; 6] = [
    "individual",
    "group",
    "channel",
    "status",
    "broadcast",
    "unknown",
];

fn check_kinds(index: usize, value: &FilterValue) -> Result<(), String> {
    let words = match value {
        FilterValue::Text(t) => std::slice::from_ref(t),
        FilterValue::List(list) => list.as_slice(),
        FilterValue::Bool(_) => &[],
    };
    let is_kind = |w: &String| CHAT_KINDS.iter().any(|k| k.eq_ignore_ascii_case(w.trim()));
    match words.iter().find(|w| !is_kind(w)) {
        None if !matches!(value, FilterValue::Bool(_)) => Ok(()),
        _ => Err(format!(
            "filters.conditions[{index}].value must name chat kinds ({}) for field kind",
            CHAT_KINDS.join(", ")
        )),
    }
}

/// Fields whose payload value is a boolean: any other operand could never match and would silently
/// suppress every event.
fn is_boolean(field: FilterField) -> bool {
    matches!(
        field,
        FilterField::IsGroup | FilterField::FromMe | FilterField::HasMedia
    )
}

fn is_boolean_value(value: &FilterValue) -> bool {
    let word = |t: &str| t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false");
    match value {
        FilterValue::Bool(_) => true,
        FilterValue::Text(t) => word(t),
        FilterValue::List(list) => list.iter().all(|t| word(t)),
    }
}

/// Why an event did not pass: the first failing condition's field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Suppressed {
    pub field: FilterField,
    /// The field is missing from the payload (as opposed to present but not matching).
    pub is_missing: bool,
}

/// `Ok` when every condition holds for `data`.
pub(crate) fn evaluate(conditions: &[FilterCondition], data: &Value) -> Result<(), Suppressed> {
    for c in conditions {
        let Some(actual) = field_value(c.field, data) else {
            return Err(Suppressed {
                field: c.field,
                is_missing: true,
            });
        };
        if !holds(c, actual) {
            return Err(Suppressed {
                field: c.field,
                is_missing: false,
            });
        }
    }
    Ok(())
}

/// The value a condition reads. The sender of a group message is its `author` where the engine names one
/// apart from `from` (the browser engine's `from` is the group there).
fn field_value(field: FilterField, data: &Value) -> Option<&Value> {
    let present = |key: &str| data.get(key).filter(|v| !v.is_null());
    match field {
        FilterField::Sender => present("author").or_else(|| present("from")),
        other => present(other.data_key()),
    }
}

/// The payload's top-level keys (for the `webhook_filter_suppressed` debug line).
pub(crate) fn available_fields(data: &Value) -> Vec<String> {
    data.as_object()
        .map(|o| {
            o.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}

fn holds(c: &FilterCondition, actual: &Value) -> bool {
    let sensitive = c.case_sensitive.unwrap_or(false);
    let operands: Vec<String> = match &c.value {
        FilterValue::Bool(b) => vec![b.to_string()],
        FilterValue::Text(s) => vec![s.clone()],
        FilterValue::List(list) => list.clone(),
    };
    // An array field (mentions) matches when any element does.
    let items: Vec<String> = match actual {
        Value::Array(items) => items.iter().map(scalar_text).collect(),
        other => vec![scalar_text(other)],
    };
    let fold = |s: &str| {
        if sensitive {
            s.to_owned()
        } else {
            s.to_lowercase()
        }
    };
    let any = |test: &dyn Fn(&str, &str) -> bool| {
        items
            .iter()
            .any(|item| operands.iter().any(|op| test(&fold(item), &fold(op))))
    };
    match c.operator {
        FilterOperator::Is | FilterOperator::Equals => any(&|a, b| a == b),
        FilterOperator::IsNot => !any(&|a, b| a == b),
        FilterOperator::Contains => any(&|a, b| a.contains(b)),
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cond(v: Value) -> Vec<FilterCondition> {
        vec![serde_json::from_value(v).unwrap()]
    }

    fn msg() -> Value {
        json!({"id": "m1", "from": "111@c.us", "to": "222@c.us", "chatId": "111@c.us", "body": "Hello World",
               "type": "text", "fromMe": false, "isGroup": false, "kind": "individual", "hasMedia": false,
               "mentionedIds": ["333@c.us"]})
    }

    #[test]
    fn sender_is_matches_from_and_drops_events_without_it() {
        let c = cond(json!({"field": "sender", "operator": "is", "value": "111@c.us"}));
        assert!(evaluate(&c, &msg()).is_ok());
        let ack = json!({"id": "m1", "messageId": "m1", "status": "read", "chatId": "111@c.us"});
        let err = evaluate(&c, &ack).unwrap_err();
        assert!(err.is_missing);
        assert_eq!(err.field, FilterField::Sender);
    }

    #[test]
    fn the_sender_of_a_group_message_is_its_author() {
        let c = cond(json!({"field": "sender", "operator": "is", "value": "111@c.us"}));
        let group = json!({"id": "m2", "from": "999@g.us", "author": "111@c.us", "isGroup": true});
        assert!(evaluate(&c, &group).is_ok());
        let other = json!({"id": "m3", "from": "999@g.us", "author": "444@c.us", "isGroup": true});
        assert!(evaluate(&c, &other).is_err());
    }

    #[test]
    fn a_kind_condition_names_only_the_spec_chat_kinds() {
        let kind = |value: Value, operator: &str| {
            validate(&cond(
                json!({"field": "kind", "operator": operator, "value": value}),
            ))
        };
        assert!(kind(json!("galaxy"), "is").is_err());
        assert!(kind(json!(["group", "galaxy"]), "isNot").is_err());
        assert!(kind(json!(true), "is").is_err());
        assert!(kind(json!(["group", "Status"]), "is").is_ok());
        assert!(kind(json!("grou"), "contains").is_ok());
    }

    #[test]
    fn operators_and_case() {
        let contains = cond(json!({"field": "body", "operator": "contains", "value": "hello"}));
        assert!(evaluate(&contains, &msg()).is_ok());
        let sensitive = cond(
            json!({"field": "body", "operator": "contains", "value": "hello", "caseSensitive": true}),
        );
        assert!(evaluate(&sensitive, &msg()).is_err());
        let is_not =
            cond(json!({"field": "type", "operator": "isNot", "value": ["image", "video"]}));
        assert!(evaluate(&is_not, &msg()).is_ok());
        let list = cond(json!({"field": "type", "operator": "is", "value": ["image", "text"]}));
        assert!(evaluate(&list, &msg()).is_ok());
        let boolean = cond(json!({"field": "isGroup", "operator": "equals", "value": true}));
        assert!(evaluate(&boolean, &msg()).is_err());
        let mentions = cond(json!({"field": "mentions", "operator": "contains", "value": "333"}));
        assert!(evaluate(&mentions, &msg()).is_ok());
    }

    #[test]
    fn shape_rules() {
        assert!(
            serde_json::from_value::<FilterCondition>(
                json!({"field": "nope", "operator": "is", "value": "x"})
            )
            .is_err()
        );
        let many: Vec<FilterCondition> = (0..21)
            .map(|_| {
                serde_json::from_value(json!({"field": "body", "operator": "is", "value": "x"}))
                    .unwrap()
            })
            .collect();
        assert!(validate(&many).is_err());
        assert!(validate(&many[..20]).is_ok());
        let bad = cond(json!({"field": "fromMe", "operator": "contains", "value": true}));
        assert!(validate(&bad).is_err());
        let yes = cond(json!({"field": "isGroup", "operator": "is", "value": "yes"}));
        assert!(validate(&yes).is_err());
        let word = cond(json!({"field": "hasMedia", "operator": "is", "value": "true"}));
        assert!(validate(&word).is_ok());
    }
}
