//! The one rule for free-text names that reach logs, audit rows and pages (key, template, automation rule,
//! label, group, channel, profile and contact names): no control characters. A NUL or a line break in a
//! name forges log lines and breaks the pages that show it; nothing legitimate needs one.

/// `Err` with the 400 message when `value` holds a control character (C0, DEL or C1).
pub(crate) fn printable(field: &str, value: &str) -> Result<(), String> {
    if value.chars().any(char::is_control) {
        Err(format!(
            "{field} must not contain control characters (such as NUL, tab or a line break)"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn control_characters_are_refused_and_ordinary_text_passes() {
        for bad in [
            "a\0b",
            "a\nb",
            "a\rb",
            "a\tb",
            "\u{1b}[2J",
            "x\u{7f}",
            "x\u{85}y",
        ] {
            assert!(printable("name", bad).is_err(), "{bad:?}");
        }
        for good in [
            "Support desk",
            "Ünïcødé – name",
            "emoji 🎉",
            "with-hyphen_and.dot",
        ] {
            assert_eq!(printable("name", good), Ok(()), "{good:?}");
        }
    }

    #[test]
    fn the_message_names_the_field() {
        assert!(printable("subject", "a\nb").is_err_and(|m| m.starts_with("subject ")));
    }
}
