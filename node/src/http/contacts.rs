//! Contact routes: records, number checks, profile pictures (one and many), phone lookups, blocking and
//! address-book edits. Static segments (`blocked`, `check`, `profile-pictures`) win over `{contactId}`.
//! A contact is a person: records, phone lookups, blocking and edits refuse a group, channel or broadcast
//! id (400); pictures take any chat id, as groups and channels have one too.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{RawQuery, State};
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::Jid;
use wagate_proto::dto::chats::PageQuery;
use wagate_proto::dto::common::SuccessResult;
use wagate_proto::dto::contacts::{
    ContactCheck, ContactPhone, ContactRecord, PictureUrl, ProfilePictures, ProfilePicturesQuery,
    UpsertContactRequest,
};
use wagate_proto::jid::ChatKind;

use super::engine_call::{Page, bounded, jid};
use super::error::{ApiError, ApiResult};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::engine::EngineError;

/// At most this many ids are looked up by one profile-pictures request.
const MAX_PICTURE_IDS: usize = 50;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(list_contacts))
        .routes(routes!(list_blocked_contacts))
        .routes(routes!(check_number))
        .routes(routes!(get_profile_pictures))
        .routes(routes!(get_contact, save_contact, delete_contact))
        .routes(routes!(get_profile_picture))
        .routes(routes!(get_contact_phone))
        .routes(routes!(block_contact, unblock_contact))
}

fn path_contact(path: &(String, String)) -> ApiResult<Jid> {
    jid("contactId", &path.1)
}

/// The `{contactId}` of a route about a person (record, phone, block, address-book edit): a group, channel
/// or broadcast id would only land in the blocked list or the address book as a contact.
fn path_person(path: &(String, String)) -> ApiResult<Jid> {
    let contact = path_contact(path)?;
    if contact.kind() != ChatKind::Individual {
        return Err(ApiError::bad_request(format!(
            "contactId must be an individual contact, not {contact}"
        )));
    }
    Ok(contact)
}

/// GET /api/sessions/{sessionId}/contacts
#[utoipa::path(get, path = "/api/sessions/{sessionId}/contacts", tag = "contacts", params(PageQuery),
    responses((status = 200, body = [ContactRecord])))]
async fn list_contacts(
    session: Scoped,
    State(ctx): State<ApiContext>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<ContactRecord>>> {
    let page = Page::parse(query.as_deref(), 1000, 1000)?;
    let engine = session.engine().await?;
    let contacts = bounded(&ctx, engine.list_contacts()).await?;
    Ok(Json(
        page.apply(contacts).into_iter().map(Into::into).collect(),
    ))
}

/// GET /api/sessions/{sessionId}/contacts/blocked
#[utoipa::path(get, path = "/api/sessions/{sessionId}/contacts/blocked", tag = "contacts",
    responses((status = 200, body = [String])))]
async fn list_blocked_contacts(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Vec<String>>> {
    let engine = session.engine().await?;
    let blocked = bounded(&ctx, engine.blocked()).await?;
    Ok(Json(blocked.iter().map(Jid::to_string).collect()))
}

/// GET /api/sessions/{sessionId}/contacts/check/{number}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/contacts/check/{number}", tag = "contacts",
    responses((status = 200, body = ContactCheck)))]
async fn check_number(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<ContactCheck>> {
    let digits = checked_number(&path.1)?;
    let engine = session.engine().await?;
    let check = bounded(&ctx, engine.check_number(&digits)).await?;
    Ok(Json(ContactCheck {
        number: check.number,
        exists: check.exists,
        whatsapp_id: check.whatsapp_id.to_string(),
    }))
}

/// The digits a number check asks about: a number in international format (a leading `+` allowed) or the
/// individual id `<number>@c.us` (`@s.whatsapp.net` reads as `@c.us`, as everywhere); any other suffix
/// (`@g.us`, `@lid`, ...) is a 400 rather than a check of the digits in front of it.
fn checked_number(raw: &str) -> ApiResult<String> {
    let refused = || {
        ApiError::bad_request(format!(
            "number must be a phone number in international format (digits, optionally with a leading +) \
             or <number>@c.us, got '{raw}'"
        ))
    };
    let digits = if raw.contains('@') {
        let contact = Jid::parse(raw).map_err(|_| refused())?;
        if contact.server() != "c.us" {
            return Err(refused());
        }
        contact.user().to_string()
    } else {
        raw.trim().trim_start_matches('+').to_string()
    };
    Jid::from_phone(&digits).map_err(|_| refused())?;
    Ok(digits)
}

/// GET /api/sessions/{sessionId}/contacts/profile-pictures
#[utoipa::path(get, path = "/api/sessions/{sessionId}/contacts/profile-pictures", tag = "contacts",
    params(ProfilePicturesQuery), responses((status = 200, body = ProfilePictures)))]
async fn get_profile_pictures(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiQuery(query): ApiQuery<ProfilePicturesQuery>,
) -> ApiResult<Json<ProfilePictures>> {
    let raw = query.ids.unwrap_or_default();
    let ids: Vec<Jid> = raw
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .take(MAX_PICTURE_IDS)
        .map(|s| jid("ids", s))
        .collect::<ApiResult<_>>()?;
    if ids.is_empty() {
        return Err(ApiError::bad_request(
            "ids must list at least one contact id",
        ));
    }
    let engine = session.engine().await?;
    let lookups = async {
        let mut pictures = BTreeMap::new();
        for contact in &ids {
            let url = match engine.profile_picture(contact).await {
                Err(EngineError::NotFound(_)) => None,
                other => other?,
            };
            pictures.insert(contact.to_string(), url);
        }
        Ok::<_, EngineError>(pictures)
    };
    let pictures = bounded(&ctx, lookups).await?;
    Ok(Json(ProfilePictures { pictures }))
}

/// GET /api/sessions/{sessionId}/contacts/{contactId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/contacts/{contactId}", tag = "contacts",
    responses((status = 200, body = ContactRecord)))]
async fn get_contact(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<ContactRecord>> {
    let contact = path_person(&path)?;
    let engine = session.engine().await?;
    Ok(Json(
        bounded(&ctx, engine.get_contact(&contact)).await?.into(),
    ))
}

/// PUT /api/sessions/{sessionId}/contacts/{contactId}
#[utoipa::path(put, path = "/api/sessions/{sessionId}/contacts/{contactId}", tag = "contacts",
    request_body = UpsertContactRequest, responses((status = 200, body = SuccessResult)))]
async fn save_contact(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<UpsertContactRequest>,
) -> ApiResult<Json<SuccessResult>> {
    let contact = path_person(&path)?;
    if body.first_name.trim().is_empty() {
        return Err(ApiError::bad_request("firstName must not be empty"));
    }
    crate::names::printable("firstName", &body.first_name).map_err(ApiError::bad_request)?;
    if let Some(last) = &body.last_name {
        crate::names::printable("lastName", last).map_err(ApiError::bad_request)?;
    }
    let engine = session.engine().await?;
    let save = engine.save_contact(&contact, &body.first_name, body.last_name.as_deref());
    bounded(&ctx, save).await?;
    Ok(Json(SuccessResult::ok()))
}

/// DELETE /api/sessions/{sessionId}/contacts/{contactId}
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/contacts/{contactId}", tag = "contacts",
    responses((status = 200, body = SuccessResult)))]
async fn delete_contact(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let contact = path_person(&path)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.delete_contact(&contact)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// GET /api/sessions/{sessionId}/contacts/{contactId}/profile-picture
#[utoipa::path(get, path = "/api/sessions/{sessionId}/contacts/{contactId}/profile-picture", tag = "contacts",
    responses((status = 200, body = PictureUrl)))]
async fn get_profile_picture(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<PictureUrl>> {
    let contact = path_contact(&path)?;
    let engine = session.engine().await?;
    let url = bounded(&ctx, engine.profile_picture(&contact)).await?;
    Ok(Json(PictureUrl { url }))
}

/// GET /api/sessions/{sessionId}/contacts/{contactId}/phone
#[utoipa::path(get, path = "/api/sessions/{sessionId}/contacts/{contactId}/phone", tag = "contacts",
    responses((status = 200, body = ContactPhone)))]
async fn get_contact_phone(
    session: Scoped,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<ContactPhone>> {
    let contact = path_person(&path)?;
    session.engine().await?;
    // A phone number is only knowable from a phone-number JID; a @lid hides it.
    let phone = (contact.server() == "c.us").then(|| contact.user().to_string());
    Ok(Json(ContactPhone {
        contact_id: contact.to_string(),
        phone,
    }))
}

/// POST /api/sessions/{sessionId}/contacts/{contactId}/block
#[utoipa::path(post, path = "/api/sessions/{sessionId}/contacts/{contactId}/block", tag = "contacts",
    responses((status = 200, body = SuccessResult)))]
async fn block_contact(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let contact = path_person(&path)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.block(&contact)).await?;
    Ok(Json(SuccessResult::ok()))
}

/// DELETE /api/sessions/{sessionId}/contacts/{contactId}/block
#[utoipa::path(delete, path = "/api/sessions/{sessionId}/contacts/{contactId}/block", tag = "contacts",
    responses((status = 200, body = SuccessResult)))]
async fn unblock_contact(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<SuccessResult>> {
    let contact = path_person(&path)?;
    let engine = session.engine().await?;
    bounded(&ctx, engine.unblock(&contact)).await?;
    Ok(Json(SuccessResult::ok()))
}
