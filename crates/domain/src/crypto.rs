//! The service secret and what is derived from it.
//!
//! One master secret (`TERN_SECRET_KEY`, or generated once and kept in the database) is
//! never used directly: each purpose gets its own subkey, so a leak or misuse in one
//! place (say, cursor forging) tells nothing about another (stored access tokens).

use chacha20poly1305::aead::{Aead, KeyInit as AeadKeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Nonce};
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

#[derive(Clone)]
pub struct MasterKey([u8; 32]);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

/// Purposes of derived keys. Adding one never changes the others.
#[derive(Debug, Clone, Copy)]
pub enum Purpose {
    Cursor,
    TokenEncryption,
    SignedLinks,
    WebhookSecretEncryption,
    /// A person's TOTP secret (two-factor), sealed at rest.
    TotpSecret,
    /// The short-lived token between a sign-in's password and code steps.
    PendingSignIn,
    /// The app secret of the built-in test network (its webhooks to
    /// `/webhooks/whatsapp/test`): known to every process sharing the database, never shown.
    TestNetworkSecret,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Purpose::Cursor => b"tern/cursor/v1",
            Purpose::TokenEncryption => b"tern/token-encryption/v1",
            Purpose::SignedLinks => b"tern/signed-links/v1",
            Purpose::WebhookSecretEncryption => b"tern/webhook-secret/v1",
            Purpose::TotpSecret => b"tern/totp-secret/v1",
            Purpose::PendingSignIn => b"tern/pending-sign-in/v1",
            Purpose::TestNetworkSecret => b"tern/test-network-secret/v1",
        }
    }
}

/// Minimum length of an operator-supplied secret, in characters.
pub const MIN_SECRET_LEN: usize = 32;

impl MasterKey {
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        MasterKey(bytes)
    }

    /// From operator configuration: any string of at least 32 characters, hashed to 32
    /// bytes so that its format does not matter.
    pub fn from_config(s: &str) -> Option<Self> {
        (s.chars().count() >= MIN_SECRET_LEN)
            .then(|| MasterKey(Sha256::digest(s.as_bytes()).into()))
    }

    pub fn generate() -> [u8; 32] {
        let mut b = [0u8; 32];
        rand::rng().fill_bytes(&mut b);
        b
    }

    pub fn derive(&self, purpose: Purpose) -> [u8; 32] {
        let mut mac =
            <HmacSha256 as KeyInit>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable_hmac());
        mac.update(purpose.label());
        mac.finalize().into_bytes().into()
    }

    /// Encrypts a small secret (an access token) for storage: nonce ‖ ciphertext+tag.
    pub fn seal(&self, purpose: Purpose, plaintext: &[u8]) -> Vec<u8> {
        let cipher = ChaCha20Poly1305::new((&self.derive(purpose)).into());
        let mut nonce = [0u8; 12];
        rand::rng().fill_bytes(&mut nonce);
        // Encryption with a valid key and nonce cannot fail for in-memory buffers.
        let ct = cipher
            .encrypt(Nonce::from_slice(&nonce), plaintext)
            .unwrap_or_default();
        let mut out = nonce.to_vec();
        out.extend_from_slice(&ct);
        out
    }

    pub fn open(&self, purpose: Purpose, sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < 12 + 16 {
            return None;
        }
        let cipher = ChaCha20Poly1305::new((&self.derive(purpose)).into());
        let (nonce, ct) = sealed.split_at(12);
        cipher.decrypt(Nonce::from_slice(nonce), ct).ok()
    }

    /// HMAC-SHA256 tag for `data` under the purpose's subkey.
    pub fn tag(&self, purpose: Purpose, data: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.derive(purpose), data)
    }

    /// Constant-time check of a tag (or a prefix of one, for truncated tags).
    pub fn verify_tag(&self, purpose: Purpose, data: &[u8], tag: &[u8]) -> bool {
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.derive(purpose))
            .unwrap_or_else(|_| unreachable_hmac());
        mac.update(data);
        if tag.len() == 32 {
            mac.verify_slice(tag).is_ok()
        } else {
            mac.verify_truncated_left(tag).is_ok() && tag.len() >= 16
        }
    }
}

pub fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac =
        <HmacSha256 as KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable_hmac());
    mac.update(data);
    mac.finalize().into_bytes().into()
}

// HMAC accepts keys of any length, so construction never fails.
fn unreachable_hmac() -> HmacSha256 {
    unreachable!("HMAC accepts keys of any length")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MasterKey {
        MasterKey::from_bytes([7u8; 32])
    }

    #[test]
    fn seal_and_open() {
        let k = key();
        let sealed = k.seal(Purpose::TokenEncryption, b"EAAG-token");
        assert_ne!(&sealed[12..], b"EAAG-token");
        assert_eq!(
            k.open(Purpose::TokenEncryption, &sealed).unwrap(),
            b"EAAG-token"
        );
        // Another purpose or a flipped bit does not open it.
        assert!(k.open(Purpose::Cursor, &sealed).is_none());
        let mut bad = sealed.clone();
        bad[20] ^= 1;
        assert!(k.open(Purpose::TokenEncryption, &bad).is_none());
        assert!(k.open(Purpose::TokenEncryption, b"short").is_none());
    }

    #[test]
    fn purposes_give_different_keys() {
        let k = key();
        assert_ne!(k.derive(Purpose::Cursor), k.derive(Purpose::SignedLinks));
    }

    #[test]
    fn tags_verify_in_full_and_truncated() {
        let k = key();
        let t = k.tag(Purpose::Cursor, b"data");
        assert!(k.verify_tag(Purpose::Cursor, b"data", &t));
        assert!(k.verify_tag(Purpose::Cursor, b"data", &t[..16]));
        assert!(!k.verify_tag(Purpose::Cursor, b"data", &t[..8]));
        assert!(!k.verify_tag(Purpose::Cursor, b"other", &t));
    }

    #[test]
    fn config_secret_needs_length() {
        assert!(MasterKey::from_config("short").is_none());
        assert!(MasterKey::from_config(&"x".repeat(32)).is_some());
    }
}
