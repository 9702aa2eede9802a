//! Contact rules: names, tags, custom field values and consent.

use crate::FieldError;
use crate::names::name_enum;
use serde_json::{Map, Value};

name_enum!(
    /// A contact's consent to business-initiated messages.
    Consent { Unknown = "unknown", OptedIn = "opted_in", OptedOut = "opted_out" }
);

/// The types of an organisation's custom contact fields.
pub const FIELD_TYPES: [&str; 4] = ["text", "number", "date", "boolean"];

pub const MAX_NAME_CHARS: usize = 256;

/// How a business-scoped user id (BSUID) is written, for error messages.
pub const USER_ID_HELP: &str = "must be a business-scoped user id: a two-letter country code, a period and up to 128 letters or digits, such as \"US.13491208655302741918\" (a parent id has ENT. after the country code)";

/// Whether `s` is a business-scoped user id as the network writes it: a two-letter country
/// code, a period, an optional `ENT.` (a parent BSUID), then 1 to 128 ASCII letters or
/// digits (`US.13491208655302741918`, `US.ENT.11815799212886844830`). Kept exactly as given.
pub fn is_user_id(s: &str) -> bool {
    let Some((country, rest)) = s.split_once('.') else {
        return false;
    };
    let id = rest.strip_prefix("ENT.").unwrap_or(rest);
    country.len() == 2
        && country.bytes().all(|b| b.is_ascii_uppercase())
        && (1..=128).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_alphanumeric())
}
pub const MAX_TAG_CHARS: usize = 64;
pub const MAX_TAGS_PER_REQUEST: usize = 50;
pub const MAX_TEXT_FIELD_CHARS: usize = 1024;
/// The longest custom field key.
pub const MAX_FIELD_KEY_CHARS: usize = 64;

/// A custom field key: a lower-case ASCII letter, then lower-case letters, digits and `_`
/// (at most 64). A name compared by eye, kept to ASCII so nothing invisible or unnormalised
/// can be in it (`custom_fields.<key>` paths and campaign variables name it).
pub fn check_field_key(key: &str) -> Result<(), String> {
    let valid = key.len() <= MAX_FIELD_KEY_CHARS
        && key.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "must start with a lower-case letter and hold only a-z, 0-9 and _ (at most {MAX_FIELD_KEY_CHARS})"
        ))
    }
}

/// The longest `source` of a consent record (`web_form`, `reply_stop`, …).
pub const MAX_CONSENT_SOURCE_CHARS: usize = 64;

/// A custom field definition: its key and type (`text`, `number`, `date`, `boolean`).
pub struct FieldDef<'a> {
    pub key: &'a str,
    pub field_type: &'a str,
}

pub fn check_name(field: &str, name: &str, errors: &mut Vec<FieldError>) {
    if name.trim().is_empty() {
        errors.push(FieldError::new(field, "must not be blank"));
    } else if name.chars().count() > MAX_NAME_CHARS {
        errors.push(FieldError::new(
            field,
            format!("must be at most {MAX_NAME_CHARS} characters"),
        ));
    } else if name.chars().any(char::is_control) {
        errors.push(FieldError::new(
            field,
            "must not contain control characters",
        ));
    }
}

/// The `source` of a consent record: 1 to 64 characters, not blank, no control characters.
pub fn check_consent_source(field: &str, source: &str, errors: &mut Vec<FieldError>) {
    if source.trim().is_empty()
        || source.chars().count() > MAX_CONSENT_SOURCE_CHARS
        || source.chars().any(char::is_control)
    {
        errors.push(FieldError::new(
            field,
            format!("must be 1 to {MAX_CONSENT_SOURCE_CHARS} characters"),
        ));
    }
}

/// Normalises a tag (trimmed, NFC: a name compared by eye, `crate::text::visible_name`) or
/// explains why it is refused. Every reader of a tag (contacts, removals, audiences) calls
/// this, so a tag is found as it was stored.
pub fn normalise_tag(tag: &str) -> Result<String, &'static str> {
    let t = crate::text::visible_name(tag.trim())?;
    if t.is_empty() {
        return Err("must not be blank");
    }
    if t.chars().count() > MAX_TAG_CHARS {
        return Err("must be at most 64 characters");
    }
    if t.contains('/') {
        return Err("must not contain '/'");
    }
    Ok(t)
}

/// Checks a `custom_fields` patch against the organisation's definitions. `null` removes a
/// value and is always allowed for a known key.
pub fn check_custom_fields(
    defs: &[FieldDef<'_>],
    patch: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    for (key, value) in patch {
        let path = format!("custom_fields.{key}");
        let Some(def) = defs.iter().find(|d| d.key == key) else {
            errors.push(FieldError::new(
                path,
                "is not a custom field of this organisation (see GET /contact-fields)",
            ));
            continue;
        };
        if value.is_null() {
            continue;
        }
        let ok = match def.field_type {
            "text" => value
                .as_str()
                .is_some_and(|s| s.chars().count() <= MAX_TEXT_FIELD_CHARS),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "date" => value.as_str().is_some_and(is_date),
            _ => false,
        };
        if !ok {
            let expected = match def.field_type {
                "text" => "a string of at most 1024 characters",
                "number" => "a number",
                "boolean" => "true or false",
                "date" => "a date as YYYY-MM-DD",
                _ => "a value of the field's type",
            };
            errors.push(FieldError::new(path, format!("must be {expected} or null")));
        }
    }
}

/// `YYYY-MM-DD`, a real calendar date.
pub fn is_date(s: &str) -> bool {
    let fmt = time::macros::format_description!("[year]-[month]-[day]");
    s.len() == 10 && time::Date::parse(s, &fmt).is_ok()
}

/// Consent statuses a client may record (`unknown` is only where none was).
pub fn parse_consent(s: &str) -> Option<Consent> {
    Consent::parse(s).filter(|c| *c != Consent::Unknown)
}

#[cfg(test)]
mod tests {
    #[test]
    fn user_ids_are_country_period_alphanumerics() {
        for ok in [
            "US.13491208655302741918",
            "BR.a1",
            "US.ENT.11815799212886844830",
        ] {
            assert!(super::is_user_id(ok), "{ok}");
        }
        let long = format!("US.{}", "9".repeat(129));
        for bad in [
            "",
            "US",
            "US.",
            "us.123",
            "USA.123",
            "US.12-3",
            "US.ENT.",
            "+14155550123",
            long.as_str(),
        ] {
            assert!(!super::is_user_id(bad), "{bad}");
        }
    }

    use super::*;
    use serde_json::json;

    fn defs() -> Vec<FieldDef<'static>> {
        vec![
            FieldDef {
                key: "tier",
                field_type: "text",
            },
            FieldDef {
                key: "score",
                field_type: "number",
            },
            FieldDef {
                key: "vip",
                field_type: "boolean",
            },
            FieldDef {
                key: "birthday",
                field_type: "date",
            },
        ]
    }

    #[test]
    fn custom_field_types() {
        let mut e = Vec::new();
        let ok = json!({"tier": "gold", "score": 4.5, "vip": true, "birthday": "1990-02-28", "tier2": null});
        check_custom_fields(&defs(), ok.as_object().unwrap(), &mut e);
        assert_eq!(e.len(), 1, "unknown key even with null: {e:?}");
        assert_eq!(e[0].field, "custom_fields.tier2");
        let mut e = Vec::new();
        let bad = json!({"tier": 1, "score": "4", "vip": "yes", "birthday": "1990-02-30"});
        check_custom_fields(&defs(), bad.as_object().unwrap(), &mut e);
        assert_eq!(e.len(), 4, "every problem at once");
        let mut e = Vec::new();
        check_custom_fields(&defs(), json!({"score": null}).as_object().unwrap(), &mut e);
        assert!(e.is_empty());
    }

    #[test]
    fn tags() {
        assert_eq!(normalise_tag("  vip "), Ok("vip".into()));
        assert!(normalise_tag("").is_err());
        assert!(normalise_tag(&"x".repeat(65)).is_err());
        assert!(normalise_tag("a/b").is_err());
        assert!(normalise_tag("a\nb").is_err());
        for hidden in ["vip\u{200b}", "\u{feff}vip", "vi\u{202e}p", "v\u{2060}ip"] {
            assert_eq!(
                normalise_tag(hidden),
                Err(crate::text::HIDDEN_MESSAGE),
                "{hidden:?}"
            );
        }
        assert_eq!(normalise_tag(" cafe\u{301} "), Ok("caf\u{e9}".into()));
    }

    #[test]
    fn field_keys_are_lower_case_ascii() {
        assert!(check_field_key("loyalty_tier2").is_ok());
        for bad in [
            "",
            "Tier",
            "2tier",
            "tier\u{200b}",
            "ti\u{feff}er",
            "caf\u{e9}",
            "a-b",
            &"a".repeat(65),
        ] {
            assert!(check_field_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn names() {
        let mut e = Vec::new();
        check_name("name", "Ada", &mut e);
        check_name("name", "  ", &mut e);
        check_name("name", &"x".repeat(257), &mut e);
        assert_eq!(e.len(), 2);
    }

    #[test]
    fn dates() {
        assert!(is_date("2024-02-29"));
        assert!(!is_date("2023-02-29"));
        assert!(!is_date("2024-2-9"));
    }
}
