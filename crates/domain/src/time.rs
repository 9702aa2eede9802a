//! Instants are carried as epoch milliseconds (what the store keeps) and shown as RFC 3339
//! UTC with millisecond precision and a `Z` suffix (what the API shows).

use time::{OffsetDateTime, format_description::well_known::Rfc3339};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    let now = OffsetDateTime::now_utc();
    (now.unix_timestamp_nanos() / 1_000_000) as i64
}

/// `2026-11-21T09:11:00.123Z`.
pub fn format_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    match OffsetDateTime::from_unix_timestamp(secs) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second(),
            millis
        ),
        // Out of range only for absurd values; keep the output well-formed anyway.
        Err(_) => "1970-01-01T00:00:00.000Z".to_string(),
    }
}

/// Parses an RFC 3339 timestamp (any offset) into epoch milliseconds.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let t = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Serde helpers for `i64` milliseconds shown as RFC 3339.
pub mod rfc3339_ms {
    use serde::Serializer;

    pub fn serialize<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_ms(*ms))
    }

    pub mod option {
        use serde::Serializer;

        pub fn serialize<S: Serializer>(ms: &Option<i64>, s: S) -> Result<S::Ok, S::Error> {
            match ms {
                Some(ms) => s.serialize_str(&super::super::format_ms(*ms)),
                None => s.serialize_none(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_millis_and_z() {
        assert_eq!(format_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ms(1_763_716_260_123), "2025-11-21T09:11:00.123Z");
    }

    #[test]
    fn parse_round_trips() {
        let ms = 1_763_716_260_123;
        assert_eq!(parse_rfc3339_ms(&format_ms(ms)), Some(ms));
        assert_eq!(parse_rfc3339_ms("2025-11-21T10:11:00.123+01:00"), Some(ms));
        assert_eq!(parse_rfc3339_ms("yesterday"), None);
    }

    #[test]
    fn now_is_recent() {
        assert!(now_ms() > 1_700_000_000_000);
    }
}
