//! The non-media, non-text send types: location, contact card, poll creation (with the secret voters
//! need), product, buttons reply, forward and edit bodies, and the status background colour. Where the
//! library has a builder (`Polls::create`, `prepare_for_forward`, `MessageBuilderExt`) we produce the
//! same message; the poll and forward paths are pinned against it in the tests.

use whatsapp_rust::buffa::MessageField;
use whatsapp_rust::proto_helpers::{MessageBuilderExt, MessageExt};

use super::wa;

/// Bytes of a poll's `messageSecret` (WA Web generates 32 random bytes per poll).
pub const POLL_SECRET_LEN: usize = 32;

/// A shared location; `description` is the place name shown under the map.
pub fn location(
    latitude: f64,
    longitude: f64,
    description: Option<&str>,
    ctx: Option<wa::ContextInfo>,
) -> wa::Message {
    wa::Message {
        location_message: MessageField::some(wa::message::LocationMessage {
            degrees_latitude: Some(latitude),
            degrees_longitude: Some(longitude),
            name: description.map(str::to_string),
            context_info: ctx.map(MessageField::some).unwrap_or_default(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A contact card: the display name and the vCard text.
pub fn contact(display_name: &str, vcard: &str, ctx: Option<wa::ContextInfo>) -> wa::Message {
    wa::Message {
        contact_message: MessageField::some(wa::message::ContactMessage {
            display_name: Some(display_name.to_string()),
            vcard: Some(vcard.to_string()),
            context_info: ctx.map(MessageField::some).unwrap_or_default(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A poll, as the library's `Polls::create` builds it: `pollCreationMessageV3` for single choice and
/// `pollCreationMessage` (v1) for multiple choice, `pollContentType` TEXT, options without hashes, and
/// the secret in `messageContextInfo` (the send path persists it, which is what lets votes on it be
/// encrypted and decrypted later). Multiple choice allows every option, the library's upper bound.
pub fn poll(
    name: &str,
    options: &[String],
    allow_multiple: bool,
    secret: [u8; POLL_SECRET_LEN],
    ctx: Option<wa::ContextInfo>,
) -> wa::Message {
    let selectable = if allow_multiple {
        options.len() as u32
    } else {
        1
    };
    let creation = wa::message::PollCreationMessage {
        name: Some(name.to_string()),
        options: options
            .iter()
            .map(|o| wa::message::poll_creation_message::Option {
                option_name: Some(o.clone()),
                option_hash: None,
            })
            .collect(),
        selectable_options_count: Some(selectable),
        poll_content_type: Some(wa::message::PollContentType::TEXT),
        context_info: ctx.map(MessageField::some).unwrap_or_default(),
        ..Default::default()
    };
    let mut msg = if selectable == 1 {
        wa::Message {
            poll_creation_message_v3: MessageField::some(creation),
            ..Default::default()
        }
    } else {
        wa::Message {
            poll_creation_message: MessageField::some(creation),
            ..Default::default()
        }
    };
    msg.message_context_info = MessageField::some(wa::MessageContextInfo {
        message_secret: Some(secret.to_vec()),
        ..Default::default()
    });
    msg
}

/// One catalog product as a product message shows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProductSnapshot {
    pub id: String,
    pub title: String,
    pub description: String,
    pub currency: String,
    /// Thousandths of the currency's major unit, the protocol's own scale (so three-decimal currencies
    /// keep their precision).
    pub price_1000: i64,
    pub retailer_id: Option<String>,
    pub url: Option<String>,
    pub image_count: u32,
    /// The product's first image, uploaded as an image message: the card shows it.
    pub image: Option<wa::message::ImageMessage>,
}

impl From<&super::CatalogItem> for ProductSnapshot {
    fn from(item: &super::CatalogItem) -> Self {
        ProductSnapshot {
            id: item.id.clone(),
            title: item.name.clone(),
            description: item.description.clone(),
            currency: item.currency.clone(),
            price_1000: item.price_1000,
            retailer_id: item.retailer_id.clone(),
            url: item.url.clone(),
            image_count: item.image_count,
            image: None,
        }
    }
}

/// A product message from the business `owner`'s catalog.
pub fn product(
    p: &ProductSnapshot,
    owner: &str,
    body: Option<&str>,
    ctx: Option<wa::ContextInfo>,
) -> wa::Message {
    wa::Message {
        product_message: MessageField::some(wa::message::ProductMessage {
            product: MessageField::some(wa::message::product_message::ProductSnapshot {
                product_id: Some(p.id.clone()),
                title: Some(p.title.clone()),
                description: Some(p.description.clone()),
                currency_code: Some(p.currency.clone()),
                price_amount1000: Some(p.price_1000),
                retailer_id: p.retailer_id.clone(),
                url: p.url.clone(),
                product_image_count: Some(p.image_count),
                product_image: p.image.clone().map(MessageField::some).unwrap_or_default(),
                ..Default::default()
            }),
            business_owner_jid: Some(owner.to_string()),
            body: body.map(str::to_string),
            context_info: ctx.map(MessageField::some).unwrap_or_default(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The answer to a business buttons message: the chosen button's id and label, quoting the message.
pub fn buttons_reply(
    button_id: &str,
    display_text: &str,
    ctx: Option<wa::ContextInfo>,
) -> wa::Message {
    use wa::message::buttons_response_message::{Response, Type};
    wa::Message {
        buttons_response_message: MessageField::some(wa::message::ButtonsResponseMessage {
            selected_button_id: Some(button_id.to_string()),
            response: Some(Response::SelectedDisplayText(display_text.to_string())),
            r#type: Some(Type::DISPLAY_TEXT),
            context_info: ctx.map(MessageField::some).unwrap_or_default(),
        }),
        ..Default::default()
    }
}

/// A forward-ready copy: the library's `prepare_for_forward` on the unwrapped content (forward marker,
/// forwarding score, quote chain and secret dropped), exactly what `Client::forward_message` sends.
pub fn forwarded(original: &wa::Message) -> wa::Message {
    *original.get_base_message().prepare_for_forward()
}

/// The new content of a text edit (the library wraps it in the edit protocol message).
pub fn edit_body(body: &str) -> wa::Message {
    wa::Message::text(body)
}

/// A status background colour `#RRGGBB` (or `#AARRGGBB`) as the protocol's ARGB word.
pub fn status_argb(color: &str) -> Option<u32> {
    let hex = color.trim().trim_start_matches('#');
    let value = u32::from_str_radix(hex, 16).ok()?;
    match hex.len() {
        6 => Some(0xFF00_0000 | value),
        8 => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_carries_coordinates_and_name() {
        let msg = location(52.52, 13.405, Some("Berlin"), None);
        let loc = msg.location_message.as_option().expect("location");
        assert_eq!(loc.degrees_latitude, Some(52.52));
        assert_eq!(loc.degrees_longitude, Some(13.405));
        assert_eq!(loc.name.as_deref(), Some("Berlin"));
        assert!(loc.context_info.as_option().is_none());
    }

    #[test]
    fn contact_carries_name_and_vcard() {
        let vcard = "BEGIN:VCARD\nVERSION:3.0\nFN:Ann\nTEL;type=CELL;waid=49151:+49151\nEND:VCARD";
        let msg = contact("Ann", vcard, None);
        let c = msg.contact_message.as_option().expect("contact");
        assert_eq!(c.display_name.as_deref(), Some("Ann"));
        assert_eq!(c.vcard.as_deref(), Some(vcard));
    }

    fn options() -> Vec<String> {
        vec!["Red".into(), "Blue".into(), "Green".into()]
    }

    #[test]
    fn single_choice_poll_is_v3_with_the_secret() {
        let msg = poll("Colour?", &options(), false, [7u8; 32], None);
        assert!(msg.poll_creation_message.as_option().is_none());
        let p = msg.poll_creation_message_v3.as_option().expect("v3");
        assert_eq!(p.name.as_deref(), Some("Colour?"));
        assert_eq!(p.selectable_options_count, Some(1));
        assert_eq!(
            p.poll_content_type,
            Some(wa::message::PollContentType::TEXT)
        );
        assert_eq!(p.enc_key, None);
        let names: Vec<_> = p
            .options
            .iter()
            .filter_map(|o| o.option_name.as_deref())
            .collect();
        assert_eq!(names, ["Red", "Blue", "Green"]);
        assert!(p.options.iter().all(|o| o.option_hash.is_none()));
        let secret = msg
            .message_context_info
            .as_option()
            .and_then(|c| c.message_secret.as_deref());
        assert_eq!(secret, Some(&[7u8; 32][..]));
    }

    #[test]
    fn multiple_choice_poll_is_v1_allowing_every_option() {
        let msg = poll("Colours?", &options(), true, [1u8; 32], None);
        assert!(msg.poll_creation_message_v3.as_option().is_none());
        let p = msg.poll_creation_message.as_option().expect("v1");
        assert_eq!(p.selectable_options_count, Some(3));
    }

    #[test]
    fn a_catalog_item_becomes_the_whole_product_snapshot() {
        let item = super::super::CatalogItem {
            id: "p1".into(),
            name: "Mug".into(),
            description: "A mug".into(),
            price_1000: 12_990,
            currency: "EUR".into(),
            retailer_id: Some("SKU-9".into()),
            url: Some("https://shop.example/mug".into()),
            image_url: Some("https://cdn.example/mug.jpg".into()),
            image_count: 2,
            is_hidden: false,
        };
        let mut p = ProductSnapshot::from(&item);
        p.image = Some(wa::message::ImageMessage {
            mimetype: Some("image/jpeg".into()),
            direct_path: Some("/v/t62/mug".into()),
            ..Default::default()
        });
        let msg = product(&p, "4915112345678@s.whatsapp.net", Some("look"), None);
        let expected = wa::Message {
            product_message: MessageField::some(wa::message::ProductMessage {
                product: MessageField::some(wa::message::product_message::ProductSnapshot {
                    product_id: Some("p1".into()),
                    title: Some("Mug".into()),
                    description: Some("A mug".into()),
                    currency_code: Some("EUR".into()),
                    price_amount1000: Some(12_990),
                    retailer_id: Some("SKU-9".into()),
                    url: Some("https://shop.example/mug".into()),
                    product_image_count: Some(2),
                    product_image: MessageField::some(wa::message::ImageMessage {
                        mimetype: Some("image/jpeg".into()),
                        direct_path: Some("/v/t62/mug".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                business_owner_jid: Some("4915112345678@s.whatsapp.net".into()),
                body: Some("look".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(msg, expected);
    }

    #[test]
    fn buttons_reply_names_the_button_and_its_label() {
        use wa::message::buttons_response_message::{Response, Type};
        let ctx = wa::ContextInfo {
            stanza_id: Some("BTN1".into()),
            ..Default::default()
        };
        let msg = buttons_reply("yes-id", "Yes", Some(ctx));
        let r = msg.buttons_response_message.as_option().expect("reply");
        assert_eq!(r.selected_button_id.as_deref(), Some("yes-id"));
        assert_eq!(
            r.response,
            Some(Response::SelectedDisplayText("Yes".into()))
        );
        assert_eq!(r.r#type, Some(Type::DISPLAY_TEXT));
        assert_eq!(
            r.context_info
                .as_option()
                .and_then(|c| c.stanza_id.as_deref()),
            Some("BTN1")
        );
    }

    #[test]
    fn forward_is_the_library_forward_copy() {
        let original = wa::Message {
            ephemeral_message: MessageField::some(wa::message::FutureProofMessage {
                message: MessageField::some(wa::Message::text("hi")),
            }),
            ..Default::default()
        };
        let msg = forwarded(&original);
        assert_eq!(msg, *wa::Message::text("hi").prepare_for_forward());
        assert!(msg.is_forwarded());
        assert_eq!(msg.text_content(), Some("hi"));
    }

    #[test]
    fn edit_body_is_plain_text_and_colours_parse() {
        assert_eq!(edit_body("new"), wa::Message::text("new"));
        assert_eq!(status_argb("#1E6E4F"), Some(0xFF1E_6E4F));
        assert_eq!(status_argb("801E6E4F"), Some(0x801E_6E4F));
        assert_eq!(status_argb("green"), None);
    }
}
