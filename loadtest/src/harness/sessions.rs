//! Session helpers for tests and load scenarios: create, start, link on the sim network, wait for a status.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Client, Reply};

/// Creates a session and returns its id (panics are the caller's business: this returns errors).
pub async fn create(client: &Client, name: &str) -> anyhow::Result<String> {
    let reply = client
        .post("/api/sessions", json!({ "name": name }))
        .await?;
    anyhow::ensure!(
        reply.status == 201,
        "create {name}: {} {}",
        reply.status,
        reply.text
    );
    Ok(reply.str("id"))
}

pub async fn get(client: &Client, id: &str) -> anyhow::Result<Reply> {
    client.get(&format!("/api/sessions/{id}")).await
}

/// Polls until the session has `status`; returns the last session body.
pub async fn wait_status(
    client: &Client,
    id: &str,
    status: &str,
    budget: Duration,
) -> anyhow::Result<Reply> {
    let deadline = Instant::now() + budget;
    loop {
        let reply = get(client, id).await?;
        if reply.body["status"] == status {
            return Ok(reply);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "session {id} not {status} in {budget:?}: {}",
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts a session and scans its QR with `phone` on the sim network; waits until it is ready.
pub async fn link(client: &Client, id: &str, phone: &str) -> anyhow::Result<Reply> {
    let started = client
        .post_empty(&format!("/api/sessions/{id}/start"))
        .await?;
    anyhow::ensure!(
        started.status == 200,
        "start: {} {}",
        started.status,
        started.text
    );
    let scan = client
        .post(
            &format!("/api/sim/sessions/{id}/scan"),
            json!({ "phone": phone }),
        )
        .await?;
    anyhow::ensure!(scan.status == 200, "scan: {} {}", scan.status, scan.text);
    wait_status(client, id, "ready", Duration::from_secs(10)).await
}

/// Creates and links a session in one go.
pub async fn create_linked(client: &Client, name: &str, phone: &str) -> anyhow::Result<String> {
    let id = create(client, name).await?;
    link(client, &id, phone).await?;
    Ok(id)
}
