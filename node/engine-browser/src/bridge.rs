//! The page side: the versioned facade (`js/bridge.js`, compiled in), the injection expression (wa-js
//! bundle, then the facade; both no-ops when already installed) and the decoding of what the page pushes
//! through the `__wagateEmit` binding.

use serde::Deserialize;
use serde_json::Value;

/// The facade, one file: the only JS the engine owns.
pub const BRIDGE_JS: &str = include_str!("../js/bridge.js");
/// The facade version this engine speaks; a page announcing another is refused.
pub const BRIDGE_VERSION: u64 = 4;
/// The CDP binding the facade pushes events through.
pub(crate) const BINDING: &str = "__wagateEmit";

/// The expression that installs wa-js (unless the page has it) and then the facade.
pub(crate) fn injection(bundle: &str) -> String {
    format!("if (!window.WPP) {{\n{bundle}\n}}\n;{BRIDGE_JS}")
}

/// The expression that calls facade function `name` with `args` (JSON literals are JS literals).
pub(crate) fn call_expression(name: &str, args: &[Value]) -> String {
    let name = Value::String(name.to_string());
    let args = Value::Array(args.to_vec());
    format!("window.__wagate.call({name}, {args})")
}

/// What the facade answers a call with.
#[derive(Debug, Deserialize)]
pub(crate) struct CallAnswer {
    pub ok: bool,
    #[serde(default)]
    pub value: Value,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// The facade's view of WhatsApp Web (`bridge` events and the `state` call).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PageState {
    #[serde(default)]
    pub version: u64,
    #[serde(default)]
    pub authenticated: bool,
    #[serde(default)]
    pub main_ready: bool,
    #[serde(default)]
    pub me: Option<Me>,
}

/// The linked account as the page knows it.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Me {
    pub id: Option<String>,
    pub push_name: Option<String>,
}

/// One push from the page.
#[derive(Debug)]
pub(crate) enum PagePush {
    Installed,
    Bridge(PageState),
    BridgeError(String),
    Qr(String),
    Authenticated(Me),
    Ready(Me),
    LoggedOut,
    Message(Value),
    Ack(Value),
    Unknown(String),
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Value,
}

/// Decodes a binding payload; `None` for a payload that is not ours.
pub(crate) fn decode(payload: &str) -> Option<PagePush> {
    let env: Envelope = serde_json::from_str(payload).ok()?;
    let me = |data: Value| serde_json::from_value(data).unwrap_or_default();
    Some(match env.kind.as_str() {
        "installed" => PagePush::Installed,
        "bridge" => PagePush::Bridge(serde_json::from_value(env.data).unwrap_or_default()),
        "bridge_error" => PagePush::BridgeError(env.data.as_str().unwrap_or_default().to_string()),
        "qr" => PagePush::Qr(env.data.as_str()?.to_string()),
        "authenticated" => PagePush::Authenticated(me(env.data)),
        "ready" => PagePush::Ready(me(env.data)),
        "logged_out" => PagePush::LoggedOut,
        "message" => PagePush::Message(env.data),
        "ack" => PagePush::Ack(env.data),
        other => PagePush::Unknown(other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facade_declares_the_version_the_engine_speaks() {
        assert!(BRIDGE_JS.contains(&format!("const BRIDGE_VERSION = {BRIDGE_VERSION};")));
    }

    #[test]
    fn decodes_pushes_and_quotes_call_arguments() {
        assert!(
            matches!(decode(r#"{"type":"qr","data":"2@abc"}"#), Some(PagePush::Qr(q)) if q == "2@abc")
        );
        assert!(decode("not json").is_none());
        let expr = call_expression("sendText", &[Value::String("a\"); alert(1); (\"".into())]);
        assert_eq!(
            expr,
            r#"window.__wagate.call("sendText", ["a\"); alert(1); (\""])"#
        );
    }
}
