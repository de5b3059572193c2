//! Link previews: which URL of a text gets one, and the title / description / image a fetched page
//! declares (Open Graph first, then `<title>` and `<meta name=description>`). The fetch itself is the
//! node's (it goes through the session's proxy and the outbound-address guard).

/// The preview fields of an `extendedTextMessage`; `url` is the link as it appears in the text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkPreview {
    pub url: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// JPEG bytes.
    pub thumbnail: Option<Vec<u8>>,
}

/// The first `http(s)://` link of a text, trailing punctuation trimmed.
pub fn first_url(text: &str) -> Option<&str> {
    text.split_whitespace()
        .find(|w| w.starts_with("https://") || w.starts_with("http://"))
        .map(|w| w.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', ']', '"', '\'']))
        .filter(|w| w.len() > "https://".len())
}

/// Title, description and image URL a page declares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageMeta {
    pub title: Option<String>,
    pub description: Option<String>,
    pub image: Option<String>,
}

/// Reads the preview metadata of an HTML page (a forgiving scan, not a parser: pages are messy).
pub fn parse_html(html: &str) -> PageMeta {
    let mut meta = PageMeta::default();
    let mut rest = html;
    while let Some(start) = rest.find("<meta") {
        let tail = &rest[start..];
        let end = tail.find('>').unwrap_or(tail.len());
        let tag = &tail[..end];
        let key = attr(tag, "property").or_else(|| attr(tag, "name"));
        if let (Some(key), Some(content)) = (key, attr(tag, "content")) {
            let content = decode(&content);
            match key.to_ascii_lowercase().as_str() {
                "og:title" => meta.title = Some(content),
                "og:description" => meta.description = Some(content),
                "description" if meta.description.is_none() => meta.description = Some(content),
                "og:image" => meta.image = Some(content),
                _ => {}
            }
        }
        rest = &tail[end..];
    }
    if meta.title.is_none() {
        meta.title = title_tag(html);
    }
    meta
}

fn title_tag(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let body_start = open + lower[open..].find('>')? + 1;
    let body_end = body_start + lower[body_start..].find("</title")?;
    let title = decode(html.get(body_start..body_end)?.trim());
    (!title.is_empty()).then_some(title)
}

/// The value of `name="..."` (or single-quoted) inside one tag.
fn attr(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find(name) {
        let at = from + pos;
        let after = lower[at + name.len()..].trim_start();
        let boundary = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
        if boundary && let Some(value) = after.strip_prefix('=') {
            let value = value.trim_start();
            let quote = value.chars().next()?;
            if quote == '"' || quote == '\'' {
                let offset = tag.len() - value.len() + 1;
                let end = tag[offset..].find(quote)?;
                return Some(tag[offset..offset + end].to_string());
            }
        }
        from = at + name.len();
    }
    None
}

fn decode(s: &str) -> String {
    s.replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_link_of_a_text_without_trailing_punctuation() {
        assert_eq!(
            first_url("look: https://example.org/a?b=1. nice"),
            Some("https://example.org/a?b=1")
        );
        assert_eq!(first_url("no link here"), None);
        assert_eq!(first_url("http:// alone"), None);
    }

    #[test]
    fn open_graph_wins_over_title_and_description() {
        let html = r#"<html><head><title>Plain</title>
            <meta name="description" content="plain desc">
            <meta property="og:title" content="OG &amp; title" />
            <meta content='og desc' property='og:description'>
            <meta property="og:image" content="https://example.org/i.jpg"></head></html>"#;
        let meta = parse_html(html);
        assert_eq!(meta.title.as_deref(), Some("OG & title"));
        assert_eq!(meta.description.as_deref(), Some("og desc"));
        assert_eq!(meta.image.as_deref(), Some("https://example.org/i.jpg"));
    }

    #[test]
    fn a_page_without_open_graph_falls_back_to_title_and_description() {
        let html = "<HTML><TITLE> Hello </TITLE><meta name=\"description\" content=\"d\"></HTML>";
        let meta = parse_html(html);
        assert_eq!(meta.title.as_deref(), Some("Hello"));
        assert_eq!(meta.description.as_deref(), Some("d"));
        assert_eq!(meta.image, None);
    }
}
