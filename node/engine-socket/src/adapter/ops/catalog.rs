//! Catalog reads of the session's own business catalog (catalog info, a page of products, one
//! product) and the product a product message shows. The library has no catalog API: pages are raw
//! `w:biz:catalog` IQs (stanza and parser in the leaf crate's `build::catalog`). The network pages by
//! cursor while the routes page by number and report a total, so the catalog is walked whole (bounded
//! by `MAX_PAGES`) and sliced here.

use crate::build::{self, CatalogItem};
use crate::whatsapp_rust::Jid as WaJid;

use super::{Client, fail, wire};
use wagate_engine_api::{Catalog, EngineError, EngineResult, Product, ProductPage};

/// Products asked for per IQ (WhatsApp Web's own pages are of this order).
const PAGE_SIZE: u32 = 50;
/// At most this many IQs per read: 1,000 products, well inside the engine query budget.
const MAX_PAGES: usize = 20;

/// The account's own catalog: the business JID products are sent from.
fn owner(client: &Client) -> EngineResult<WaJid> {
    Ok(client.pn().ok_or(EngineError::NotReady)?.to_non_ad())
}

async fn page(
    client: &Client,
    owner: &WaJid,
    cursor: Option<&str>,
) -> EngineResult<build::CatalogPage> {
    let request = build::catalog_request(owner, PAGE_SIZE, cursor);
    let response = client.send_iq_node(request, None).await.map_err(fail)?;
    Ok(build::parse_catalog(&response.to_owned_node()))
}

/// Every product of the catalog (up to the page bound); `None` when the account has none (the server
/// answers "not found" for an account without a catalog).
pub(crate) async fn items(client: &Client) -> EngineResult<Option<Vec<CatalogItem>>> {
    let owner = owner(client)?;
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let next = match page(client, &owner, cursor.as_deref()).await {
            Ok(next) => next,
            Err(EngineError::NotFound(_)) if items.is_empty() => return Ok(None),
            Err(err) => return Err(err),
        };
        items.extend(next.items);
        match next.next_cursor {
            // A cursor that does not move would loop until the bound; stop at once instead.
            Some(after) if cursor.as_deref() != Some(after.as_str()) => cursor = Some(after),
            _ => break,
        }
    }
    Ok(Some(items))
}

/// The gateway's product (minor units: the protocol's thousandths over ten).
pub(crate) fn product_of(item: &CatalogItem) -> Product {
    Product {
        id: item.id.clone(),
        name: item.name.clone(),
        description: item.description.clone(),
        price: item.price_1000 / 10,
        currency: item.currency.clone(),
        image_url: item.image_url.clone(),
    }
}

pub(crate) async fn catalog(client: &Client) -> EngineResult<Option<Catalog>> {
    let owner_jid = wire(&owner(client)?).ok_or(EngineError::NotReady)?;
    Ok(items(client).await?.map(|items| Catalog {
        owner: owner_jid,
        products: items.iter().map(product_of).collect(),
    }))
}

/// Page `page` (1-based) of `limit` products; an account without a catalog has an empty one.
pub(crate) async fn products(client: &Client, page: u32, limit: u32) -> EngineResult<ProductPage> {
    let all = items(client).await?.unwrap_or_default();
    Ok(slice(&all, page, limit))
}

fn slice(all: &[CatalogItem], page: u32, limit: u32) -> ProductPage {
    let size = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
    let skip = usize::try_from(page.saturating_sub(1))
        .unwrap_or(usize::MAX)
        .saturating_mul(size);
    ProductPage {
        products: all.iter().skip(skip).take(size).map(product_of).collect(),
        page,
        limit,
        total: all.len(),
    }
}

/// One catalog item by product id (or retailer id, which businesses often quote instead).
pub(crate) async fn find(client: &Client, id: &str) -> EngineResult<Option<CatalogItem>> {
    let all = items(client).await?.unwrap_or_default();
    Ok(all
        .iter()
        .find(|item| item.id == id)
        .or_else(|| {
            all.iter()
                .find(|item| item.retailer_id.as_deref() == Some(id))
        })
        .cloned())
}

pub(crate) async fn product(client: &Client, id: &str) -> EngineResult<Option<Product>> {
    Ok(find(client, id).await?.as_ref().map(product_of))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str) -> CatalogItem {
        CatalogItem {
            id: id.into(),
            name: format!("Item {id}"),
            price_1000: 12_990,
            currency: "EUR".into(),
            ..Default::default()
        }
    }

    #[test]
    fn prices_become_minor_units() {
        let p = product_of(&item("1"));
        assert_eq!((p.price, p.currency.as_str()), (1299, "EUR"));
    }

    #[test]
    fn numbered_pages_are_slices_of_the_walked_catalog() {
        let all: Vec<CatalogItem> = (1..=5).map(|i| item(&i.to_string())).collect();
        let second = slice(&all, 2, 2);
        let ids: Vec<&str> = second.products.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["3", "4"]);
        assert_eq!((second.page, second.limit, second.total), (2, 2, 5));
        assert!(slice(&all, 4, 2).products.is_empty());
        assert_eq!(slice(&all, 3, 2).products.len(), 1);
    }
}
