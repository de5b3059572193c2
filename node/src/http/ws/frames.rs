//! Server frames of the WebSocket (wire-notes §6), built as JSON text (key order is not significant).

use axum::extract::ws::Message;
use serde_json::{Map, Value, json};

use crate::events::Event;
use crate::store::now_ms;

fn now_iso() -> String {
    wagate_proto::iso_ms(now_ms())
}

fn text(value: Value) -> Message {
    Message::Text(value.to_string().into())
}

/// `{type: "error", code, message, requestId?}`.
pub(super) fn error_frame(code: &str, message: &str, request_id: Option<Value>) -> Message {
    let mut frame = json!({ "type": "error", "code": code, "message": message });
    if let (Some(id), Some(obj)) = (request_id, frame.as_object_mut()) {
        obj.insert("requestId".into(), id);
    }
    text(frame)
}

/// `{type, ...fields, requestId, timestamp}` for `subscribed`, `unsubscribed` and `pong`.
pub(super) fn reply_frame(
    kind: &str,
    fields: Map<String, Value>,
    request_id: Option<Value>,
) -> Message {
    let mut frame = Map::new();
    frame.insert("type".into(), json!(kind));
    frame.extend(fields);
    frame.insert("requestId".into(), request_id.unwrap_or(Value::Null));
    frame.insert("timestamp".into(), json!(now_iso()));
    text(Value::Object(frame))
}

/// `{type: "event", timestamp, payload: {event, sessionId, data}}`.
pub(super) fn event_frame(event: &Event) -> Message {
    text(json!({
        "type": "event",
        "timestamp": event.timestamp_iso(),
        "payload": { "event": event.name.as_str(), "sessionId": event.session_id, "data": event.data },
    }))
}
