//! Opaque, signed pagination cursors.
//!
//! A cursor carries the keyset position of the last item of a page, a fingerprint of the
//! list's filters and the organisation, and an HMAC tag. A cursor that was altered, was
//! issued to another organisation, or belongs to a list with other filters is refused, so
//! a client can neither forge positions nor mix cursors between queries.

use crate::crypto::{MasterKey, Purpose};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

const TAG_LEN: usize = 16;
const MAX_CURSOR_LEN: usize = 2048;

#[derive(Serialize, Deserialize)]
struct Payload {
    v: u8,
    o: Uuid,
    f: String,
    p: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the cursor is not valid for this list")]
pub struct CursorError;

/// Identifies a list query: the endpoint plus every filter that shapes it. Two requests
/// with the same fingerprint may share cursors.
pub fn fingerprint(list: &str, filters: &[(&str, Option<&str>)]) -> String {
    let mut h = Sha256::new();
    h.update(list.as_bytes());
    for (k, v) in filters {
        h.update([0]);
        h.update(k.as_bytes());
        match v {
            None => h.update([1]),
            Some(v) => {
                h.update([2]);
                h.update(v.as_bytes());
            }
        }
    }
    let d = h.finalize();
    URL_SAFE_NO_PAD.encode(&d[..12])
}

pub fn encode(key: &MasterKey, org: Uuid, fingerprint: &str, position: Vec<String>) -> String {
    let payload = Payload {
        v: 1,
        o: org,
        f: fingerprint.to_string(),
        p: position,
    };
    let mut bytes = serde_json::to_vec(&payload).unwrap_or_default();
    let tag = key.tag(Purpose::Cursor, &bytes);
    bytes.extend_from_slice(&tag[..TAG_LEN]);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Returns the keyset position if the cursor is authentic and was issued for this
/// organisation and this list.
pub fn decode(
    key: &MasterKey,
    token: &str,
    org: Uuid,
    fingerprint: &str,
) -> Result<Vec<String>, CursorError> {
    if token.is_empty() || token.len() > MAX_CURSOR_LEN {
        return Err(CursorError);
    }
    let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| CursorError)?;
    if bytes.len() <= TAG_LEN {
        return Err(CursorError);
    }
    let (data, tag) = bytes.split_at(bytes.len() - TAG_LEN);
    if !key.verify_tag(Purpose::Cursor, data, tag) {
        return Err(CursorError);
    }
    let payload: Payload = serde_json::from_slice(data).map_err(|_| CursorError)?;
    if payload.v != 1 || payload.o != org || payload.f != fingerprint {
        return Err(CursorError);
    }
    Ok(payload.p)
}

/// Page size: absent → 25; otherwise an integer from 1 to 100. Anything else is refused,
/// never silently clamped.
pub fn parse_limit(raw: Option<&str>) -> Result<i64, &'static str> {
    match raw {
        None => Ok(25),
        Some(s) => match s.parse::<i64>() {
            Ok(n) if (1..=100).contains(&n) && !s.starts_with('+') => Ok(n),
            _ => Err("must be an integer from 1 to 100"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> MasterKey {
        MasterKey::from_bytes([3u8; 32])
    }

    #[test]
    fn round_trip() {
        let org = Uuid::now_v7();
        let fp = fingerprint("phone_numbers", &[("status", Some("connected"))]);
        let c = encode(&key(), org, &fp, vec!["123".into()]);
        assert_eq!(
            decode(&key(), &c, org, &fp).unwrap(),
            vec!["123".to_string()]
        );
    }

    #[test]
    fn foreign_org_mismatched_filter_and_tampering_are_refused() {
        let org = Uuid::now_v7();
        let fp = fingerprint("x", &[]);
        let c = encode(&key(), org, &fp, vec!["a".into()]);
        assert_eq!(decode(&key(), &c, Uuid::now_v7(), &fp), Err(CursorError));
        assert_eq!(
            decode(&key(), &c, org, &fingerprint("x", &[("q", Some("a"))])),
            Err(CursorError)
        );
        assert_eq!(
            decode(&MasterKey::from_bytes([4u8; 32]), &c, org, &fp),
            Err(CursorError)
        );
        let mut chars: Vec<char> = c.chars().collect();
        chars[5] = if chars[5] == 'A' { 'B' } else { 'A' };
        let tampered: String = chars.into_iter().collect();
        assert_eq!(decode(&key(), &tampered, org, &fp), Err(CursorError));
        assert_eq!(decode(&key(), "", org, &fp), Err(CursorError));
        assert_eq!(decode(&key(), "!!!", org, &fp), Err(CursorError));
    }

    #[test]
    fn fingerprint_distinguishes_absent_and_empty() {
        assert_ne!(
            fingerprint("l", &[("q", None)]),
            fingerprint("l", &[("q", Some(""))])
        );
    }

    #[test]
    fn limits() {
        assert_eq!(parse_limit(None), Ok(25));
        assert_eq!(parse_limit(Some("1")), Ok(1));
        assert_eq!(parse_limit(Some("100")), Ok(100));
        for bad in ["0", "101", "", "abc", "-1", "1.5", "+5", " 5"] {
            assert!(parse_limit(Some(bad)).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn arbitrary_tokens_never_panic(s in ".{0,300}") {
            let _ = decode(&key(), &s, Uuid::nil(), "f");
        }
    }
}
