//! Label and catalog routes: the label record and its edits, catalog info and paginated products.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Label {
    pub id: String,
    pub name: String,
    /// `#RRGGBB` of the label's palette colour.
    pub hex_color: String,
}

/// The label upsert's answer: the label as it now is, with `success` (what OpenWA's clients read).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelUpserted {
    pub success: bool,
    pub id: String,
    pub name: String,
    /// `#RRGGBB` of the label's palette colour.
    pub hex_color: String,
}

/// `color` is a palette index 0-19.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct UpsertLabelRequest {
    pub name: Option<String>,
    pub color: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddChatLabelRequest {
    pub label_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogInfo {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub product_count: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogProduct {
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    /// Major units (e.g. 12.5).
    pub price: f64,
    pub currency: String,
    pub price_formatted: String,
    pub image_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProductPagination {
    pub page: u32,
    pub limit: u32,
    pub total: usize,
    pub total_pages: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PaginatedProducts {
    pub products: Vec<CatalogProduct>,
    pub pagination: ProductPagination,
}

/// `page` 1-based (default 1), `limit` 1-100 (default 20).
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ProductsQuery {
    /// 1-based page number, default 1.
    #[param(minimum = 1)]
    pub page: Option<u32>,
    /// Page size: 1-100, default 20.
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<u32>,
}
