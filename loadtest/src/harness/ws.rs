//! A client of a node's `/api/ws`: connect with a key, subscribe to every session's events, and read the
//! JSON frames that follow (keep-alive pongs skipped), so event tests read one socket the same way.

use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use super::Node;

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long a test waits for the next frame before treating the socket as silent.
const FRAME_WAIT: Duration = Duration::from_secs(20);

/// A socket on `node` authenticated by `key` and subscribed to every event of every session it may see.
pub async fn subscribed(node: &Node, key: &str) -> anyhow::Result<Socket> {
    let mut req = format!("ws://127.0.0.1:{}/api/ws", node.port).into_client_request()?;
    req.headers_mut().insert("X-API-Key", key.parse()?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await?;
    let sub = json!({ "type": "subscribe", "sessionId": "*", "events": ["*"], "requestId": "s" });
    ws.send(Message::Text(sub.to_string().into())).await?;
    let ack = next_frame(&mut ws)
        .await
        .context("socket closed before the subscribe ack")?;
    if ack["type"] != "subscribed" {
        bail!("expected a subscribed ack, got {ack}");
    }
    Ok(ws)
}

/// The next JSON frame other than a pong; `None` once the socket closes, fails or stays silent.
pub async fn next_frame(ws: &mut Socket) -> Option<Value> {
    loop {
        match tokio::time::timeout(FRAME_WAIT, ws.next()).await.ok()?? {
            Ok(Message::Text(t)) => {
                let frame: Value = serde_json::from_str(&t).ok()?;
                if frame["type"] != "pong" {
                    return Some(frame);
                }
            }
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => continue,
        }
    }
}

/// Every frame up to and including the first that satisfies `pred`; an error if the socket ends first.
pub async fn collect_until(
    ws: &mut Socket,
    pred: impl Fn(&Value) -> bool,
) -> anyhow::Result<Vec<Value>> {
    let mut seen = Vec::new();
    loop {
        let frame = next_frame(ws)
            .await
            .context("socket closed before the awaited frame")?;
        let is_last = pred(&frame);
        seen.push(frame);
        if is_last {
            return Ok(seen);
        }
    }
}

/// The first frame that satisfies `pred`.
pub async fn until(ws: &mut Socket, pred: impl Fn(&Value) -> bool) -> anyhow::Result<Value> {
    let mut frames = collect_until(ws, pred).await?;
    frames.pop().context("no frame")
}
