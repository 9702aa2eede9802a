//! Text rules every reader of client input shares (DESIGN.md, "Hardening"):
//! - no U+0000 anywhere: PostgreSQL cannot store it in text or JSON, so it is refused on both
//!   backends (one behaviour) with `400`, each field by its path, before any handler runs;
//! - names people compare by eye (tags, campaign names; template names and contact-field
//!   keys are ASCII by their own rules) are NFC-normalised and refuse control and invisible
//!   formatting characters (general category Cc/Cf), so `vip\u{200b}` cannot pass for `vip`.

use serde_json::Value;
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use crate::FieldError;

/// The message for a string (or a key) holding U+0000.
pub const NUL_MESSAGE: &str = "must not contain the NUL character";
/// The message for an object with a key holding U+0000 (the key itself cannot be a path).
pub const NUL_KEY_MESSAGE: &str = "must not have a key containing the NUL character";
/// The message for a name holding a control or invisible formatting character.
pub const HIDDEN_MESSAGE: &str = "must not contain control or invisible formatting characters (such as a zero-width space, a byte order mark or a direction override)";

/// Whether a JSON text may hold U+0000: JSON writes it only as the escape `\u0000` (a raw
/// control byte is invalid), so bodies without that escape need no walk.
pub fn json_may_hold_nul(raw: &[u8]) -> bool {
    raw.windows(6).any(|w| w == br"\u0000")
}

/// Every string value holding U+0000 in `body`, by field path (`a.b[2].c`; `body` for a bare
/// string), and every object with such a key, by the object's path.
pub fn nul_fields(body: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    walk(body, "", &mut out);
    out
}

fn walk(v: &Value, path: &str, out: &mut Vec<FieldError>) {
    let here = || {
        if path.is_empty() {
            "body".to_string()
        } else {
            path.to_string()
        }
    };
    match v {
        Value::String(s) if s.contains('\0') => out.push(FieldError::new(here(), NUL_MESSAGE)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{i}]"), out);
            }
        }
        Value::Object(map) => {
            let mut bad_key = false;
            for (k, item) in map {
                if k.contains('\0') {
                    bad_key = true;
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(item, &p, out);
            }
            if bad_key {
                out.push(FieldError::new(here(), NUL_KEY_MESSAGE));
            }
        }
        _ => {}
    }
}

/// A control (Cc) or invisible formatting (Cf) character: U+0000–U+001F, U+007F–U+009F,
/// zero-width space and joiners, BOM, bidirectional marks and overrides, word joiner, …
pub fn is_hidden(c: char) -> bool {
    matches!(
        c.general_category(),
        GeneralCategory::Control | GeneralCategory::Format
    )
}

/// A name people compare by eye: NFC-normalised (`e` + U+0301 and `é` are one name), or
/// refused with [`HIDDEN_MESSAGE`] when it holds a control or invisible formatting character
/// ([`NUL_MESSAGE`] for U+0000, as everywhere).
pub fn visible_name(raw: &str) -> Result<String, &'static str> {
    if raw.contains('\0') {
        return Err(NUL_MESSAGE);
    }
    if raw.chars().any(is_hidden) {
        return Err(HIDDEN_MESSAGE);
    }
    Ok(raw.nfc().collect())
}

/// The ranges of [`is_hidden`] characters, ascending: for schemas that must say the same
/// as the rule (a pattern's character class). Computed once per process.
pub fn hidden_ranges() -> &'static [(char, char)] {
    static RANGES: std::sync::LazyLock<Vec<(char, char)>> = std::sync::LazyLock::new(|| {
        let mut out: Vec<(char, char)> = Vec::new();
        for c in (0..=u32::from(char::MAX)).filter_map(char::from_u32) {
            if !is_hidden(c) {
                continue;
            }
            match out.last_mut() {
                Some((_, end)) if u32::from(*end) + 1 == u32::from(c) => *end = c,
                _ => out.push((c, c)),
            }
        }
        out
    });
    &RANGES
}

/// A regular-expression character class body (for `[^…]`) of the [`is_hidden`]
/// characters: `\uXXXX` escapes in the BMP, the characters themselves beyond it (JSON
/// Schema engines that read patterns by code point take them as written).
pub fn hidden_class() -> String {
    let esc = |c: char| {
        if u32::from(c) <= 0xFFFF {
            format!("\\u{:04x}", u32::from(c))
        } else {
            c.to_string()
        }
    };
    let mut out = String::new();
    for (a, b) in hidden_ranges() {
        out.push_str(&esc(*a));
        if a != b {
            out.push('-');
            out.push_str(&esc(*b));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(errors: &[FieldError]) -> Vec<(&str, &str)> {
        errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect()
    }

    #[test]
    fn every_nul_is_named_by_its_path() {
        let body = json!({
            "text": {"body": "a\u{0}b"},
            "ok": "fine",
            "template": {"variables": ["x", "\u{0}"]},
            "custom_fields": {"k\u{0}": "v", "tier": "gold"},
            "n": 1
        });
        let e = nul_fields(&body);
        let mut got = paths(&e);
        got.sort();
        assert_eq!(
            got,
            [
                ("custom_fields", NUL_KEY_MESSAGE),
                ("template.variables[1]", NUL_MESSAGE),
                ("text.body", NUL_MESSAGE),
            ]
        );
        assert_eq!(paths(&nul_fields(&json!("\u{0}"))), [("body", NUL_MESSAGE)]);
        assert!(nul_fields(&json!({"a": ["b", {"c": "d"}], "e": null})).is_empty());
    }

    #[test]
    fn only_the_nul_escape_needs_a_walk() {
        assert!(json_may_hold_nul(br#"{"a":"x\u0000"}"#));
        assert!(!json_may_hold_nul(br#"{"a":"x\u0001"}"#));
        // An escaped backslash before "u0000" is no NUL: a walk finds nothing.
        let raw = br#"{"a":"\\u0000"}"#;
        assert!(json_may_hold_nul(raw));
        let v: Value = serde_json::from_slice(raw).unwrap();
        assert!(nul_fields(&v).is_empty());
    }

    #[test]
    fn names_refuse_invisible_characters_and_are_nfc() {
        for bad in [
            "vip\u{200b}",
            "\u{feff}vip",
            "vi\u{202e}p",
            "v\u{2060}ip",
            "v\nip",
            "v\u{85}ip",
            "v\u{e0041}ip",
        ] {
            assert_eq!(visible_name(bad), Err(HIDDEN_MESSAGE), "{bad:?}");
        }
        assert_eq!(visible_name("vip\u{0}"), Err(NUL_MESSAGE));
        assert_eq!(visible_name("cafe\u{301}").unwrap(), "caf\u{e9}");
        assert_eq!(visible_name("caf\u{e9}").unwrap(), "caf\u{e9}");
        // Emoji with a variation selector (Mn) and other scripts are visible.
        assert!(visible_name("\u{2764}\u{fe0f} Ünïcödé 東京").is_ok());
    }

    #[test]
    fn hidden_ranges_cover_exactly_the_rule() {
        let ranges = hidden_ranges();
        assert_eq!(ranges[0], ('\u{0}', '\u{1f}'));
        assert!(ranges.contains(&('\u{7f}', '\u{9f}')));
        assert!(ranges.contains(&('\u{feff}', '\u{feff}')));
        let inside = |c: char| ranges.iter().any(|(a, b)| (*a..=*b).contains(&c));
        for c in ['\u{200b}', '\u{202e}', '\u{2060}', '\u{ad}', '\u{e0001}'] {
            assert!(inside(c), "{c:?}");
        }
        for c in ['a', ' ', '\u{fe0f}', '\u{e9}', '東'] {
            assert!(!inside(c), "{c:?}");
        }
        let class = hidden_class();
        assert!(
            class.starts_with("\\u0000-\\u001f\\u007f-\\u009f\\u00ad"),
            "{class}"
        );
        assert!(
            class.contains("\\u200b-\\u200f") && class.contains("\\ufeff"),
            "{class}"
        );
    }
}
