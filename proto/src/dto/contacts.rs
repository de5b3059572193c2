//! Contact routes: contact records, number checks, profile pictures, phone lookups and address-book edits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactRecord {
    pub id: String,
    pub name: Option<String>,
    pub number: Option<String>,
    pub push_name: Option<String>,
    pub is_my_contact: bool,
    pub is_blocked: bool,
    pub profile_pic_url: Option<String>,
}

/// Only answered when the network answered: an unanswered check is a 503, never `exists: false`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactCheck {
    pub number: String,
    pub exists: bool,
    pub whatsapp_id: String,
}

/// A picture URL, `null` when there is none (or it is hidden).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PictureUrl {
    pub url: Option<String>,
}

/// `ids`: comma-separated JIDs; the first 50 are looked up.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProfilePicturesQuery {
    /// Comma-separated contact JIDs or phone numbers; the first 50 are looked up.
    pub ids: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProfilePictures {
    pub pictures: BTreeMap<String, Option<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContactPhone {
    pub contact_id: String,
    pub phone: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpsertContactRequest {
    pub first_name: String,
    pub last_name: Option<String>,
}
