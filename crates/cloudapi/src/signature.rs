//! How the network proves a webhook is its own: `X-Hub-Signature-256` on every delivery, and
//! the subscription handshake (`hub.*`) when the callback URL is set.
//!
//! The header value is `sha256=` + lowercase hex of HMAC-SHA256(app secret, raw body). It
//! must be checked against the raw request bytes: re-serialising the JSON (which the network
//! writes with non-ASCII escaped as `\uXXXX`) changes the bytes and breaks the check.

use hmac::{KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

type HmacSha256 = hmac::Hmac<Sha256>;

/// Name of the header carrying the signature.
pub const SIGNATURE_HEADER: &str = "X-Hub-Signature-256";
const PREFIX: &str = "sha256=";

/// Compute the header value for `body`.
pub fn sign(app_secret: &[u8], body: &[u8]) -> String {
    format!("{PREFIX}{}", hex::encode(mac(app_secret, body)))
}

fn mac(app_secret: &[u8], body: &[u8]) -> Vec<u8> {
    // HMAC accepts keys of any length, so `new_from_slice` cannot fail for it.
    match HmacSha256::new_from_slice(app_secret) {
        Ok(mut m) => {
            m.update(body);
            m.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// Check a header value against the raw body in constant time.
///
/// Accepts upper- or lower-case hex and surrounding whitespace; rejects a missing `sha256=`
/// prefix, non-hex characters, odd length or a wrong digest length.
pub fn verify_signature(app_secret: &[u8], raw_body: &[u8], header_value: &str) -> bool {
    let Some(hex_part) = header_value.trim().strip_prefix(PREFIX) else {
        return false;
    };
    if hex_part.len() != 64 {
        return false;
    }
    let Ok(given) = hex::decode(hex_part) else {
        return false;
    };
    let Ok(mut m) = HmacSha256::new_from_slice(app_secret) else {
        return false;
    };
    m.update(raw_body);
    // `verify_slice` compares in constant time.
    m.verify_slice(&given).is_ok()
}

/// The subscription handshake: the network calls the callback URL with
/// `GET ?hub.mode=subscribe&hub.verify_token=<token>&hub.challenge=<challenge>` and expects
/// the challenge back. Given the request's query parameters and the configured verify token,
/// the challenge to answer with; `None` (refuse) when no token is configured, the mode is not
/// `subscribe`, the challenge is missing or the token differs (compared in constant time).
pub fn subscription_challenge<'a>(
    params: &'a [(String, String)],
    verify_token: Option<&str>,
) -> Option<&'a str> {
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let token_ok = match (verify_token, get("hub.verify_token")) {
        (Some(expected), Some(given)) => bool::from(expected.as_bytes().ct_eq(given.as_bytes())),
        _ => false,
    };
    match (get("hub.mode"), get("hub.challenge")) {
        (Some("subscribe"), Some(challenge)) if token_ok => Some(challenge),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_handshake() {
        let q = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let ok = q(&[
            ("hub.mode", "subscribe"),
            ("hub.verify_token", "vt"),
            ("hub.challenge", "1158201444"),
        ]);
        assert_eq!(subscription_challenge(&ok, Some("vt")), Some("1158201444"));
        assert_eq!(subscription_challenge(&ok, Some("other")), None);
        assert_eq!(
            subscription_challenge(&ok, None),
            None,
            "no token configured"
        );
        for bad in [
            q(&[
                ("hub.mode", "unsubscribe"),
                ("hub.verify_token", "vt"),
                ("hub.challenge", "1"),
            ]),
            q(&[("hub.mode", "subscribe"), ("hub.verify_token", "vt")]),
            q(&[("hub.mode", "subscribe"), ("hub.challenge", "1")]),
            q(&[
                ("hub.mode", "subscribe"),
                ("hub.verify_token", "vtx"),
                ("hub.challenge", "1"),
            ]),
            Vec::new(),
        ] {
            assert_eq!(subscription_challenge(&bad, Some("vt")), None, "{bad:?}");
        }
    }

    const SECRET: &[u8] = b"app-secret";
    const BODY: &[u8] = br#"{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[]}],"x":"caf\u00e9"}"#;

    #[test]
    fn correct_signature_verifies() {
        let sig = sign(SECRET, BODY);
        assert!(sig.starts_with("sha256="));
        assert_eq!(sig.len(), 7 + 64);
        assert!(verify_signature(SECRET, BODY, &sig));
        // upper-case hex is accepted too
        let upper = format!("sha256={}", sig[7..].to_uppercase());
        assert!(verify_signature(SECRET, BODY, &upper));
    }

    #[test]
    fn known_vector() {
        // HMAC-SHA256(key="key", "The quick brown fox jumps over the lazy dog")
        assert_eq!(
            sign(b"key", b"The quick brown fox jumps over the lazy dog"),
            "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
    }

    #[test]
    fn wrong_or_malformed_rejected() {
        let sig = sign(SECRET, BODY);
        assert!(!verify_signature(b"other", BODY, &sig));
        assert!(!verify_signature(SECRET, b"{}", &sig));
        assert!(!verify_signature(SECRET, BODY, &sig[7..])); // missing prefix
        assert!(!verify_signature(SECRET, BODY, &sig[..sig.len() - 1])); // odd length
        assert!(!verify_signature(SECRET, BODY, "sha256="));
        assert!(!verify_signature(SECRET, BODY, ""));
        assert!(!verify_signature(
            SECRET,
            BODY,
            &format!("sha1={}", &sig[7..])
        ));
        let mut bad = sig.clone();
        bad.replace_range(10..11, "z");
        assert!(!verify_signature(SECRET, BODY, &bad));
    }

    #[test]
    fn reencoded_body_fails() {
        // The network escapes non-ASCII; a receiver that re-serialises gets other bytes.
        let sig = sign(SECRET, BODY);
        let reencoded =
            serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(BODY).unwrap())
                .unwrap();
        assert_ne!(reencoded, BODY);
        assert!(!verify_signature(SECRET, &reencoded, &sig));
    }
}
