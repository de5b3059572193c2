//! Label edits (the socket column refuses label reads): create or rename, delete, and chat
//! associations, all app-state actions through the library's `Labels`.

use wagate_proto::Jid;

use super::{Client, fail, wa};
use wagate_engine_api::{EngineResult, Label, LabelUpsert};

/// A new label gets the next free numeric id WA uses (milliseconds keep ids unique per account).
pub(crate) async fn upsert(client: &Client, label: LabelUpsert) -> EngineResult<Label> {
    let id = label
        .id
        .unwrap_or_else(|| (chrono::Utc::now().timestamp_millis() % 1_000_000_000).to_string());
    let name = label.name.unwrap_or_else(|| format!("Label {id}"));
    let color = label.color.unwrap_or(0);
    client
        .labels()
        .create_label(&id, &name, i32::from(color))
        .await
        .map_err(fail)?;
    Ok(Label { id, name, color })
}

pub(crate) async fn delete(client: &Client, id: &str) -> EngineResult<()> {
    client.labels().delete_label(id).await.map_err(fail)
}

pub(crate) async fn chat_label(
    client: &Client,
    chat: &Jid,
    id: &str,
    add: bool,
) -> EngineResult<()> {
    let jid = wa(chat)?;
    let labels = client.labels();
    let done = if add {
        labels.add_chat_label(id, &jid).await
    } else {
        labels.remove_chat_label(id, &jid).await
    };
    done.map_err(fail)
}
