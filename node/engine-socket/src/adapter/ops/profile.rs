//! The account's profile: push name, about text, picture.

use super::{Client, fail};
use wagate_engine_api::media::EngineMedia;
use wagate_engine_api::{EngineResult, MediaSource};

pub(crate) async fn set_name(client: &Client, name: &str) -> EngineResult<()> {
    client.profile().set_push_name(name).await.map_err(fail)
}

pub(crate) async fn set_status(client: &Client, status: &str) -> EngineResult<()> {
    client.profile().set_status_text(status).await.map_err(fail)
}

pub(crate) async fn set_picture(
    client: &Client,
    media: &dyn EngineMedia,
    image: MediaSource,
) -> EngineResult<()> {
    let bytes = image.load(media).await?;
    client
        .profile()
        .set_profile_picture(bytes)
        .await
        .map_err(fail)?;
    Ok(())
}

pub(crate) async fn remove_picture(client: &Client) -> EngineResult<()> {
    client
        .profile()
        .remove_profile_picture()
        .await
        .map_err(fail)?;
    Ok(())
}
