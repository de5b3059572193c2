//! `wagate-bare-route`: the yardstick of `wagate-loadtest reads`. One axum route, `GET /bare`, that checks
//! `X-API-Key` against `BARE_ROUTE_KEY` and answers a small JSON body, on tokio's default runtime like the
//! node; whatever the node costs beyond this is the gateway's own work. Listens on 127.0.0.1:`--port`.

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

async fn bare(expected: &'static str, headers: HeaderMap) -> Response {
    let presented = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    if presented == Some(expected) {
        ([("content-type", "application/json")], r#"{"status":"ok"}"#).into_response()
    } else {
        (StatusCode::UNAUTHORIZED, r#"{"statusCode":401}"#).into_response()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let port: u16 = std::env::args()
        .skip_while(|a| a != "--port")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("usage: wagate-bare-route --port PORT"))?;
    let key: &'static str = std::env::var("BARE_ROUTE_KEY")
        .map_err(|_| anyhow::anyhow!("BARE_ROUTE_KEY is not set"))?
        .leak();
    let app = Router::new().route("/bare", get(move |headers: HeaderMap| bare(key, headers)));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
