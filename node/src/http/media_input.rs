//! Media given to a picture or status route as `{url|base64, mimetype?}`: handed to the messaging
//! service, which stores it through the media store (cap, outbound-address guard, session proxy).

use wagate_proto::dto::status::MediaInput;

use super::error::ApiResult;
use crate::app::ApiContext;
use crate::messaging::ResourceMedia;

/// The content, mimetype and media object of `input` for session `session_id` (`default_mimetype` when
/// none was given or served); status posts keep the object's key to serve it again.
pub(crate) async fn load_stored_media(
    ctx: &ApiContext,
    session_id: &str,
    input: &MediaInput,
    default_mimetype: &str,
) -> ApiResult<ResourceMedia> {
    Ok(ctx
        .messaging
        .resource_media(session_id, input, default_mimetype)
        .await?)
}
