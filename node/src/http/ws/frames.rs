//! Server frames of the WebSocket (wire-notes §6), built as JSON text. Key order is not significant to a
//! JSON reader, but the frames keep the order wire-notes writes them in, for people reading raw frames.

use axum::extract::ws::Message;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::events::Event;
use crate::store::now_ms;

fn now_iso() -> String {
    wagate_proto::iso_ms(now_ms())
}

/// `{type: "error", code, message, requestId?}`.
pub(super) fn error_frame(code: &str, message: &str, request_id: Option<Value>) -> Message {
    #[derive(Serialize)]
    struct Error<'a> {
        r#type: &'static str,
        code: &'a str,
        message: &'a str,
        #[serde(rename = "requestId", skip_serializing_if = "Option::is_none")]
        request_id: Option<Value>,
    }
    serialized(&Error {
        r#type: "error",
        code,
        message,
        request_id,
    })
}

/// `{type, ...fields, requestId, timestamp}` for `subscribed`, `unsubscribed` and `pong`.
pub(super) fn reply_frame(
    kind: &str,
    fields: Map<String, Value>,
    request_id: Option<Value>,
) -> Message {
    #[derive(Serialize)]
    struct Reply<'a> {
        r#type: &'a str,
        #[serde(flatten)]
        fields: Map<String, Value>,
        #[serde(rename = "requestId")]
        request_id: Value,
        timestamp: String,
    }
    serialized(&Reply {
        r#type: kind,
        fields,
        request_id: request_id.unwrap_or(Value::Null),
        timestamp: now_iso(),
    })
}

/// `{type: "event", timestamp, payload: {event, sessionId, data}}`.
pub(super) fn event_frame(event: &Event) -> Message {
    #[derive(Serialize)]
    struct Payload<'a> {
        event: &'a str,
        #[serde(rename = "sessionId")]
        session_id: &'a str,
        data: &'a Value,
    }
    #[derive(Serialize)]
    struct Frame<'a> {
        r#type: &'static str,
        timestamp: String,
        payload: Payload<'a>,
    }
    serialized(&Frame {
        r#type: "event",
        timestamp: event.timestamp_iso(),
        payload: Payload {
            event: event.name.as_str(),
            session_id: &event.session_id,
            data: &event.data,
        },
    })
}

/// Serialising these frames cannot fail (string keys, no maps keyed otherwise); an empty object stands in
/// rather than a panic.
fn serialized(frame: &impl Serialize) -> Message {
    Message::Text(
        serde_json::to_string(frame)
            .unwrap_or_else(|_| "{}".into())
            .into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wagate_proto::EventName;

    fn text_of(message: Message) -> String {
        match message {
            Message::Text(text) => text.to_string(),
            other => panic!("not a text frame: {other:?}"),
        }
    }

    #[test]
    fn frames_keep_the_wire_notes_key_order() {
        let event = Event::new(
            EventName::SessionStatus,
            "s1",
            serde_json::json!({ "status": "ready" }),
        );
        let frame = text_of(event_frame(&event));
        assert!(
            frame.starts_with(r#"{"type":"event","timestamp":""#),
            "{frame}"
        );
        assert!(
            frame.contains(r#""payload":{"event":"session.status","sessionId":"s1","data":"#),
            "{frame}"
        );
        let error = text_of(error_frame("INVALID_MESSAGE", "bad", None));
        assert_eq!(
            error,
            r#"{"type":"error","code":"INVALID_MESSAGE","message":"bad"}"#
        );
        let mut fields = Map::new();
        fields.insert("sessionId".into(), Value::from("*"));
        let reply = text_of(reply_frame("subscribed", fields, None));
        assert!(
            reply.starts_with(
                r#"{"type":"subscribed","sessionId":"*","requestId":null,"timestamp":"#
            ),
            "{reply}"
        );
    }
}
