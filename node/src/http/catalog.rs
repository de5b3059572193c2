//! Catalog routes (business accounts): catalog info, a page of products, one product. No catalog or no
//! such product answers `null` with 200, not 404.

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};
use wagate_proto::dto::labels::{
    CatalogInfo, CatalogProduct, PaginatedProducts, ProductPagination, ProductsQuery,
};

use super::engine_call::bounded;
use super::error::{ApiError, ApiResult};
use super::extract::{ApiPath, ApiQuery};
use super::session_scope::Scoped;
use crate::app::ApiContext;
use crate::engine::Product;

pub(crate) fn router() -> OpenApiRouter<ApiContext> {
    OpenApiRouter::new()
        .routes(routes!(get_catalog))
        .routes(routes!(list_products))
        .routes(routes!(get_product))
}

fn product(p: Product) -> CatalogProduct {
    // Minor units to major: the wire shows prices as decimals.
    let price = p.price as f64 / 100.0;
    CatalogProduct {
        price_formatted: format!("{price:.2} {}", p.currency),
        id: p.id,
        name: p.name,
        description: Some(p.description).filter(|d| !d.is_empty()),
        price,
        currency: p.currency,
        image_url: p.image_url,
    }
}

/// GET /api/sessions/{sessionId}/catalog
#[utoipa::path(get, path = "/api/sessions/{sessionId}/catalog", tag = "catalog",
    responses((status = 200, body = Option<CatalogInfo>)))]
async fn get_catalog(
    session: Scoped,
    State(ctx): State<ApiContext>,
) -> ApiResult<Json<Option<CatalogInfo>>> {
    let engine = session.engine().await?;
    let catalog = bounded(&ctx, engine.catalog()).await?;
    Ok(Json(catalog.map(|c| CatalogInfo {
        id: c.owner.to_string(),
        name: c.owner.user().to_string(),
        description: None,
        product_count: c.products.len(),
    })))
}

/// GET /api/sessions/{sessionId}/catalog/products
#[utoipa::path(get, path = "/api/sessions/{sessionId}/catalog/products", tag = "catalog",
    params(ProductsQuery), responses((status = 200, body = PaginatedProducts)))]
async fn list_products(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiQuery(query): ApiQuery<ProductsQuery>,
) -> ApiResult<Json<PaginatedProducts>> {
    let page = query.page.unwrap_or(1);
    let limit = query.limit.unwrap_or(20);
    if page == 0 || !(1..=100).contains(&limit) {
        return Err(ApiError::bad_request("page must be >= 1 and limit 1-100"));
    }
    let engine = session.engine().await?;
    let found = bounded(&ctx, engine.products(page, limit)).await?;
    let per_page = usize::try_from(found.limit.max(1)).unwrap_or(1);
    Ok(Json(PaginatedProducts {
        pagination: ProductPagination {
            page: found.page,
            limit: found.limit,
            total: found.total,
            total_pages: found.total.div_ceil(per_page),
        },
        products: found.products.into_iter().map(product).collect(),
    }))
}

/// GET /api/sessions/{sessionId}/catalog/products/{productId}
#[utoipa::path(get, path = "/api/sessions/{sessionId}/catalog/products/{productId}", tag = "catalog",
    responses((status = 200, body = Option<CatalogProduct>)))]
async fn get_product(
    session: Scoped,
    State(ctx): State<ApiContext>,
    ApiPath(path): ApiPath<(String, String)>,
) -> ApiResult<Json<Option<CatalogProduct>>> {
    let engine = session.engine().await?;
    Ok(Json(
        bounded(&ctx, engine.product(&path.1)).await?.map(product),
    ))
}
