//! People (the app's accounts): the password rule, TOTP two-factor, recovery codes and the
//! random tokens of sessions and one-time links. Pure rules; hashing a password (slow, on a
//! blocking thread) and storage are the core's and the store's.

pub mod password;
pub mod recovery;
pub mod totp;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use sha2::{Digest as _, Sha256};

use crate::names::name_enum;

name_enum!(
    /// What a one-time link is for.
    LinkPurpose {
        /// A new member sets a name and a password.
        Invite = "invite",
        /// The operator's recovery: a new password (two-factor was turned off).
        Reset = "reset",
        /// Signs the person in directly (`tern demo`).
        SignIn = "sign_in",
    }
);

name_enum!(
    /// Why an app session ended.
    EndReason {
        SignedOut = "signed_out",
        SignedOutEverywhere = "signed_out_everywhere",
        /// Ended from the sessions page.
        Ended = "ended",
        PasswordChanged = "password_changed",
        /// The operator reset the person's access.
        Reset = "reset",
        /// The person has no membership left.
        Removed = "removed",
        /// Idle too long, or past its absolute limit.
        Expired = "expired",
    }
);

pub use password::{MAX_PASSWORD_CHARS, MIN_PASSWORD_CHARS, PasswordProblem, check_password};

/// A fresh 256-bit random token, base64url without padding (43 characters): session cookies
/// and one-time links. Only its [`token_hash`] is stored.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// SHA-256 of a token as stored. A plain hash is right for 256-bit random values: nobody can
/// guess one, so a slow hash would only cost time on every request.
pub fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// The CSRF token of a session: base64url(SHA-256("tern-csrf" ‖ session token)). Derived,
/// so nothing is stored, and useless without the session cookie it belongs to.
pub fn csrf_token(session_token: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"tern-csrf");
    h.update(session_token.as_bytes());
    URL_SAFE_NO_PAD.encode(h.finalize())
}

/// Whether `given` is the CSRF token of `session_token`, compared in constant time.
pub fn csrf_matches(session_token: &str, given: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    let expected = csrf_token(session_token);
    expected.as_bytes().ct_eq(given.as_bytes()).into()
}

/// An email as Tern keeps it: trimmed and lower-cased (accounts compare case-insensitively).
pub fn normalise_email(email: &str) -> String {
    email.trim().to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_256_bit_base64url() {
        let a = new_token();
        assert_eq!(a.len(), 43);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_ne!(a, new_token());
        assert_eq!(token_hash(&a).len(), 32);
        assert_eq!(token_hash(&a), token_hash(&a));
    }

    #[test]
    fn csrf_is_derived_and_checked() {
        let t = new_token();
        let c = csrf_token(&t);
        assert_eq!(c, csrf_token(&t));
        assert_ne!(c, csrf_token(&new_token()));
        assert!(csrf_matches(&t, &c));
        assert!(!csrf_matches(&t, "x"));
        assert!(!csrf_matches(&new_token(), &c));
    }
}
