//! The field rules of message bodies (the spec's limits), each refusal naming its field. Pure functions.

use wagate_proto::Jid;

use super::error::{MessagingResult, bad};
use crate::engine::LinkPreview;

pub(crate) const TEXT_MAX: usize = 4096;
pub(crate) const CAPTION_MAX: usize = 1024;
pub(crate) const POLL_NAME_MAX: usize = 255;
pub(crate) const POLL_OPTION_MAX: usize = 100;
pub(crate) const READ_IDS_MAX: usize = 100;
/// The reference's caps on a reaction, a location's description and a contact card.
pub(crate) const EMOJI_MAX: usize = 32;
pub(crate) const LOCATION_DESCRIPTION_MAX: usize = 1024;
pub(crate) const CONTACT_NAME_MAX: usize = 255;
pub(crate) const CONTACT_NUMBER_MAX: usize = 30;
/// A template's header and footer (the reference's `CreateTemplateDto`).
pub(crate) const TEMPLATE_PART_MAX: usize = 1024;
pub(crate) const PIN_DURATIONS: [u32; 3] = [86_400, 604_800, 2_592_000];

/// A required, well-formed JID.
pub(crate) fn jid(field: &str, raw: Option<&str>) -> MessagingResult<Jid> {
    let raw = required(field, raw)?;
    Jid::parse(raw).map_err(|_| {
        bad(format!(
            "{field} must be a valid WhatsApp id (<number>@c.us, <id>@g.us or <id>@newsletter), got '{raw}'"
        ))
    })
}

/// A read filter's JID as the store keeps it (`@s.whatsapp.net` reads as `@c.us`); `None` when the filter is
/// absent or blank, 400 when it is no JID.
pub(crate) fn jid_filter(field: &str, raw: Option<&str>) -> MessagingResult<Option<String>> {
    raw.filter(|v| !v.trim().is_empty())
        .map(|raw| jid(field, Some(raw)).map(|jid| jid.to_string()))
        .transpose()
}

/// A required, non-blank string.
pub(crate) fn required<'a>(field: &str, raw: Option<&'a str>) -> MessagingResult<&'a str> {
    match raw {
        Some(value) if !value.trim().is_empty() => Ok(value),
        _ => Err(bad(format!("{field} is required"))),
    }
}

/// `max_chars` for a field that may be absent.
pub(crate) fn max_chars_opt(field: &str, value: Option<&str>, max: usize) -> MessagingResult<()> {
    value.map_or(Ok(()), |v| max_chars(field, v, max))
}

pub(crate) fn max_chars(field: &str, value: &str, max: usize) -> MessagingResult<()> {
    if value.chars().count() > max {
        return Err(bad(format!("{field} must be at most {max} characters")));
    }
    Ok(())
}

/// Required text of at most 4096 characters.
pub(crate) fn text(field: &str, raw: Option<&str>) -> MessagingResult<String> {
    let text = required(field, raw)?;
    max_chars(field, text, TEXT_MAX)?;
    Ok(text.to_string())
}

/// `customLinkPreview`: an object whose `url`, `title`, `description` and `thumbnail` are strings when present.
/// A card is a preview, so it cannot go with an explicit `linkPreview: false` (OpenWA's SDK documents
/// the pair as refused rather than letting one silently win).
pub(crate) fn link_preview(
    raw: Option<&serde_json::Value>,
    enabled: Option<bool>,
) -> MessagingResult<Option<LinkPreview>> {
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    if enabled == Some(false) {
        return Err(bad(
            "customLinkPreview cannot be combined with linkPreview: false",
        ));
    }
    let card = raw
        .as_object()
        .ok_or_else(|| bad("customLinkPreview must be an object"))?;
    let part = |name: &str| -> MessagingResult<Option<String>> {
        match card.get(name) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(format!("customLinkPreview.{name} must be a string"))),
        }
    };
    let preview = LinkPreview {
        url: part("url")?,
        title: part("title")?,
        description: part("description")?,
        thumbnail: part("thumbnail")?,
    };
    if let Some(title) = &preview.title {
        max_chars("customLinkPreview.title", title, TEXT_MAX)?;
    }
    Ok(Some(preview))
}

/// A poll vote's option texts: required, none blank; an empty list is a vote with nothing selected,
/// which WhatsApp reads as withdrawing the account's vote (OpenWA's SDK: "[] clears the vote").
pub(crate) fn vote_options(raw: Option<&[String]>) -> MessagingResult<Vec<String>> {
    let options =
        raw.ok_or_else(|| bad("options is required (option texts; [] clears the vote)"))?;
    if options.iter().any(|o| o.trim().is_empty()) {
        return Err(bad("options must not hold blank option texts"));
    }
    Ok(options.to_vec())
}

/// A chat read's `messageIds`: absent reads the whole chat; when given, 1 to 100 ids (an empty list would
/// otherwise silently read the whole chat, which a caller naming messages did not ask for).
pub(crate) fn read_ids(raw: Option<Vec<String>>) -> MessagingResult<Vec<String>> {
    let Some(ids) = raw else {
        return Ok(Vec::new());
    };
    if ids.is_empty() {
        return Err(bad(
            "messageIds must not be empty: leave it out to read the whole chat",
        ));
    }
    if ids.len() > READ_IDS_MAX {
        return Err(bad(format!(
            "messageIds must hold at most {READ_IDS_MAX} ids"
        )));
    }
    Ok(ids)
}

pub(crate) fn caption(raw: Option<&str>) -> MessagingResult<Option<String>> {
    let Some(caption) = raw else { return Ok(None) };
    max_chars("caption", caption, CAPTION_MAX)?;
    Ok(Some(caption.to_string()))
}

/// Each mention is an individual JID whose `@<number>` token appears in `text` (`field` names it); a
/// JID named twice is mentioned once.
pub(crate) fn mentions(raw: &[String], text: &str, field: &str) -> MessagingResult<Vec<Jid>> {
    let mut out: Vec<Jid> = Vec::with_capacity(raw.len());
    for m in raw {
        let jid = Jid::parse(m)
            .ok()
            .filter(|j| j.server() == "c.us")
            .ok_or_else(|| bad(format!("mentions must be <number>@c.us ids, got '{m}'")))?;
        if !has_token(text, jid.user()) {
            return Err(bad(format!(
                "mentions: {m} needs the literal @{} token in {field}",
                jid.user()
            )));
        }
        if !out.contains(&jid) {
            out.push(jid);
        }
    }
    Ok(out)
}

/// Whether `text` holds `@<user>` as a whole token: `@155500000021` does not name `15550000002`.
fn has_token(text: &str, user: &str) -> bool {
    let token = format!("@{user}");
    text.match_indices(&token).any(|(at, _)| {
        !text[at + token.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit())
    })
}

/// Poll question and 2-12 distinct-enough options.
pub(crate) fn poll(
    name: Option<&str>,
    options: Option<&[String]>,
) -> MessagingResult<(String, Vec<String>)> {
    let name = required("name", name)?;
    max_chars("name", name, POLL_NAME_MAX)?;
    let options = options.unwrap_or_default();
    if !(2..=12).contains(&options.len()) {
        return Err(bad("options must hold 2-12 entries"));
    }
    let mut seen = std::collections::HashSet::new();
    for option in options {
        if option.trim().is_empty() {
            return Err(bad("options must not contain empty entries"));
        }
        max_chars("options", option, POLL_OPTION_MAX)?;
        // A vote names an option by its text, so two equal options could never be told apart.
        if !seen.insert(option.trim()) {
            return Err(bad("poll options must be unique"));
        }
    }
    Ok((name.to_string(), options.to_vec()))
}

pub(crate) fn coordinate(field: &str, raw: Option<f64>, bound: f64) -> MessagingResult<f64> {
    match raw {
        Some(v) if v.is_finite() && v.abs() <= bound => Ok(v),
        Some(_) => Err(bad(format!("{field} must be between -{bound} and {bound}"))),
        None => Err(bad(format!("{field} is required"))),
    }
}

/// Renders `{{var}}` placeholders from `vars` (strings as-is, other JSON values as written).
pub(crate) fn render(template: &str, vars: &serde_json::Map<String, serde_json::Value>) -> String {
    // One pass over the template: a value that itself holds `{{...}}` is sent as given.
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        let name = rest[start + 2..start + 2 + len].trim();
        out.push_str(&rest[..start]);
        match vars.get(name) {
            Some(serde_json::Value::String(text)) => out.push_str(text),
            Some(other) => out.push_str(&other.to_string()),
            None => out.push_str(&rest[start..start + 4 + len]),
        }
        rest = &rest[start + 4 + len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_fills_each_token_once() {
        let vars = serde_json::json!({ "a": "{{b}}", "b": "B", "n": 3 });
        let vars = vars.as_object().cloned().unwrap_or_default();
        assert_eq!(
            render("[{{a}}] {{ b }} {{n}} {{missing}} {{", &vars),
            "[{{b}}] B 3 {{missing}} {{"
        );
    }

    #[test]
    fn mentions_need_their_token() {
        let ids = vec!["4915100000001@c.us".to_string()];
        assert!(mentions(&ids, "hi @4915100000001", "text").is_ok());
        let err = mentions(&ids, "hi there", "text").unwrap_err().to_string();
        assert!(err.contains("mentions") && err.contains("@4915100000001"));
        assert!(mentions(&["x@g.us".into()], "@x", "text").is_err());
    }

    #[test]
    fn a_mention_token_is_whole_and_each_jid_is_mentioned_once() {
        let ids = vec!["15550000002@c.us".to_string()];
        assert!(mentions(&ids, "hi @155500000021", "text").is_err());
        assert!(mentions(&ids, "hi @155500000021 and @15550000002!", "text").is_ok());
        let twice = vec![ids[0].clone(), ids[0].clone()];
        let got = mentions(&twice, "@15550000002", "text").map(|m| m.len());
        assert_eq!(got.ok(), Some(1));
    }

    #[test]
    fn poll_limits() {
        let two = vec!["a".to_string(), "b".to_string()];
        assert!(poll(Some("q"), Some(&two)).is_ok());
        assert!(poll(Some("q"), Some(&two[..1])).is_err());
        assert!(poll(Some(&"x".repeat(256)), Some(&two)).is_err());
        assert!(
            poll(None, Some(&two))
                .unwrap_err()
                .to_string()
                .contains("name")
        );
    }

    #[test]
    fn templates_render_vars() {
        let vars = serde_json::json!({"name": "Ann", "n": 3});
        let vars = vars.as_object().cloned().unwrap_or_default();
        assert_eq!(render("Hi {{name}}, {{ n }} left", &vars), "Hi Ann, 3 left");
    }
}
