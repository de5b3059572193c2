//! Protocol messages we build ourselves, one function per send type: text (mentions, quote, link
//! preview), media from the library's upload result, sticker, location, contact card, poll creation
//! with its secret, product, buttons reply and forward, and the raw catalog query the library lacks.
//! Pure functions over `waproto` types (and binary nodes), so each is unit-tested against what the
//! library itself would send (its builders and helpers are the oracle where it has them:
//! `proto_helpers`, `media`, `Polls::create`). Sending is the node's job.

mod catalog;
mod content;
mod media;
mod preview;
mod text;

pub use catalog::{CATALOG_XMLNS, CatalogItem, CatalogPage, catalog_request, parse_catalog};
pub use content::{
    POLL_SECRET_LEN, ProductSnapshot, buttons_reply, contact, edit_body, forwarded, location, poll,
    product, status_argb,
};
pub use media::{MediaKind, MediaOptions, Uploaded, media, media_type};
pub use preview::{LinkPreview, PageMeta, first_url, parse_html};
pub use text::{Quote, context, quoted_stand_in, text};

/// The library's protocol types, re-exported for the node's operation code.
pub use whatsapp_rust::waproto::whatsapp as wa;
