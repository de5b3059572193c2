//! Business catalog queries (`w:biz:catalog`). The library has no catalog API, so the node sends these
//! IQ stanzas raw (`Client::send_iq_node`): this module builds the request stanza for one page of a
//! business's product catalog and reads the answer into plain structs. Node shapes follow what WhatsApp
//! Web and public clients send: `<iq xmlns="w:biz:catalog" type="get" to="s.whatsapp.net">` with a
//! `<product_catalog jid=... allow_shop_source="true">` child holding `<limit>`, the thumbnail
//! `<width>`/`<height>` and, after the first page, the `<after>` cursor; the answer repeats
//! `<product_catalog>` with `<product>` children and a `<paging><after>` cursor while more pages remain.

use whatsapp_rust::Jid;
use whatsapp_rust::wacore_binary::builder::NodeBuilder;
use whatsapp_rust::wacore_binary::{Node, Server};

/// The IQ namespace of catalog queries.
pub const CATALOG_XMLNS: &str = "w:biz:catalog";
/// Side of the product thumbnails the server is asked to render (pixels); what WhatsApp Web asks for.
const THUMBNAIL_SIDE: &str = "100";

/// One product of a catalog page, as the server describes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogItem {
    pub id: String,
    pub name: String,
    pub description: String,
    /// Thousandths of the currency's major unit (the protocol's `price_amount1000` scale).
    pub price_1000: i64,
    pub currency: String,
    pub retailer_id: Option<String>,
    pub url: Option<String>,
    /// The full-size image, else the thumbnail the request asked for.
    pub image_url: Option<String>,
    pub image_count: u32,
    pub is_hidden: bool,
}

/// One page of a catalog and the cursor of the next one (`None` on the last page).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogPage {
    pub items: Vec<CatalogItem>,
    pub next_cursor: Option<String>,
}

fn text_node(tag: &'static str, value: &str) -> Node {
    NodeBuilder::new(tag)
        .bytes(value.as_bytes().to_vec())
        .build()
}

/// The IQ stanza asking for `limit` products of `owner`'s catalog, starting after `cursor`. The stanza id
/// is left for the client to fill.
pub fn catalog_request(owner: &Jid, limit: u32, cursor: Option<&str>) -> Node {
    let mut params = vec![
        text_node("limit", &limit.to_string()),
        text_node("width", THUMBNAIL_SIDE),
        text_node("height", THUMBNAIL_SIDE),
    ];
    if let Some(cursor) = cursor.filter(|c| !c.is_empty()) {
        params.push(text_node("after", cursor));
    }
    let catalog = NodeBuilder::new("product_catalog")
        .attr("jid", owner.to_non_ad())
        .attr("allow_shop_source", "true")
        .children(params)
        .build();
    NodeBuilder::new("iq")
        .attr("xmlns", CATALOG_XMLNS)
        .attr("type", "get")
        .attr("to", Jid::new("", Server::Pn))
        .children([catalog])
        .build()
}

fn child_text(node: &Node, tag: &str) -> Option<String> {
    node.get_optional_child(tag)
        .and_then(Node::content_as_string)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Reads an answer to `catalog_request`. Products without an id are skipped (nothing could name them);
/// an answer without `<product_catalog>` is an empty last page.
pub fn parse_catalog(response: &Node) -> CatalogPage {
    let Some(catalog) = response.get_optional_child("product_catalog") else {
        return CatalogPage::default();
    };
    let items = catalog
        .get_children_by_tag("product")
        .filter_map(parse_product)
        .collect();
    let next_cursor = catalog
        .get_optional_child("paging")
        .and_then(|paging| child_text(paging, "after"));
    CatalogPage { items, next_cursor }
}

fn parse_product(node: &Node) -> Option<CatalogItem> {
    let id = child_text(node, "id")?;
    let images: Vec<&Node> = node
        .get_optional_child("media")
        .map(|media| media.get_children_by_tag("image").collect())
        .unwrap_or_default();
    let image_url = images.first().and_then(|image| {
        child_text(image, "original_image_url").or_else(|| child_text(image, "request_image_url"))
    });
    let is_hidden = node
        .attrs
        .get("is_hidden")
        .is_some_and(|v| v.as_str() == "true");
    Some(CatalogItem {
        id,
        name: child_text(node, "name").unwrap_or_default(),
        description: child_text(node, "description").unwrap_or_default(),
        price_1000: child_text(node, "price")
            .and_then(|p| p.parse().ok())
            .unwrap_or(0),
        currency: child_text(node, "currency").unwrap_or_default(),
        retailer_id: child_text(node, "retailer_id"),
        url: child_text(node, "url"),
        image_url,
        image_count: u32::try_from(images.len()).unwrap_or(u32::MAX),
        is_hidden,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jid(s: &str) -> Jid {
        s.parse().unwrap()
    }

    fn leaf(tag: &'static str, value: &str) -> Node {
        text_node(tag, value)
    }

    #[test]
    fn the_first_page_asks_for_the_owners_catalog_with_thumbnails_and_no_cursor() {
        let node = catalog_request(&jid("15551234567:3@s.whatsapp.net"), 20, None);
        let expected = NodeBuilder::new("iq")
            .attr("xmlns", "w:biz:catalog")
            .attr("type", "get")
            .attr("to", jid("s.whatsapp.net"))
            .children([NodeBuilder::new("product_catalog")
                .attr("jid", jid("15551234567@s.whatsapp.net"))
                .attr("allow_shop_source", "true")
                .children([
                    leaf("limit", "20"),
                    leaf("width", "100"),
                    leaf("height", "100"),
                ])
                .build()])
            .build();
        assert_eq!(node, expected);
    }

    #[test]
    fn a_later_page_carries_the_cursor_last() {
        let node = catalog_request(&jid("15551234567@s.whatsapp.net"), 5, Some("CURSOR=="));
        let params = node
            .get_optional_child("product_catalog")
            .and_then(Node::children)
            .unwrap();
        let tags: Vec<&str> = params.iter().map(|n| n.tag.as_ref()).collect();
        assert_eq!(tags, ["limit", "width", "height", "after"]);
        assert_eq!(params[3].content_as_string().as_deref(), Some("CURSOR=="));
    }

    fn product(id: &str, price: &str, hidden: bool, images: &[(&str, &str)]) -> Node {
        let media = NodeBuilder::new("media")
            .children(images.iter().map(|(requested, original)| {
                NodeBuilder::new("image")
                    .children([
                        leaf("request_image_url", requested),
                        leaf("original_image_url", original),
                    ])
                    .build()
            }))
            .build();
        let mut builder = NodeBuilder::new("product");
        if hidden {
            builder = builder.attr("is_hidden", "true");
        }
        builder
            .children([
                leaf("id", id),
                leaf("name", "Blue mug"),
                leaf("description", "Holds coffee"),
                leaf("price", price),
                leaf("currency", "EUR"),
                leaf("retailer_id", "SKU-1"),
                leaf("url", "https://shop.example/mug"),
                media,
                NodeBuilder::new("status_info")
                    .children([leaf("status", "APPROVED")])
                    .build(),
            ])
            .build()
    }

    #[test]
    fn an_answer_becomes_products_and_the_next_cursor() {
        let response = NodeBuilder::new("iq")
            .attr("type", "result")
            .children([NodeBuilder::new("product_catalog")
                .children([
                    product(
                        "7001",
                        "12500",
                        false,
                        &[
                            ("https://cdn.example/t1", "https://cdn.example/o1"),
                            ("https://cdn.example/t2", "https://cdn.example/o2"),
                        ],
                    ),
                    product("7002", "990", true, &[]),
                    NodeBuilder::new("product")
                        .children([leaf("name", "no id")])
                        .build(),
                    NodeBuilder::new("paging")
                        .children([leaf("after", "NEXT")])
                        .build(),
                ])
                .build()])
            .build();
        let page = parse_catalog(&response);
        assert_eq!(page.next_cursor.as_deref(), Some("NEXT"));
        assert_eq!(page.items.len(), 2);
        assert_eq!(
            page.items[0],
            CatalogItem {
                id: "7001".into(),
                name: "Blue mug".into(),
                description: "Holds coffee".into(),
                price_1000: 12_500,
                currency: "EUR".into(),
                retailer_id: Some("SKU-1".into()),
                url: Some("https://shop.example/mug".into()),
                image_url: Some("https://cdn.example/o1".into()),
                image_count: 2,
                is_hidden: false,
            }
        );
        assert!(page.items[1].is_hidden);
        assert_eq!(page.items[1].image_url, None);
        assert_eq!(page.items[1].image_count, 0);
    }

    #[test]
    fn the_last_page_has_no_cursor_and_a_bare_answer_is_empty() {
        let last = NodeBuilder::new("iq")
            .children([NodeBuilder::new("product_catalog")
                .children([product("1", "1000", false, &[])])
                .build()])
            .build();
        assert_eq!(parse_catalog(&last).next_cursor, None);
        assert_eq!(parse_catalog(&last).items.len(), 1);
        let bare = NodeBuilder::new("iq").attr("type", "result").build();
        assert_eq!(parse_catalog(&bare), CatalogPage::default());
    }
}
