//! A sending number: whether it can send and its access token, decided in one place for
//! the send path, the dispatcher, template submission and template sync.

use tern_domain::crypto::{MasterKey, Purpose};
use tern_store::PhoneNumber;

/// The decrypted access token of a number; `None` when the service's secret key changed
/// since it was stored (the number must be added again).
pub fn access_token(key: &MasterKey, number: &PhoneNumber) -> Option<String> {
    let bytes = key.open(Purpose::TokenEncryption, &number.access_token_enc)?;
    String::from_utf8(bytes).ok()
}

/// An access token as stored.
pub fn seal_token(key: &MasterKey, token: &str) -> Vec<u8> {
    key.seal(Purpose::TokenEncryption, token.as_bytes())
}

/// Whether the number can send now.
pub fn can_send(number: &PhoneNumber) -> bool {
    number.status.can_send()
}

/// A number that can send, with its token: a connected one of `numbers` (in order) whose
/// token is readable.
pub fn usable<'a>(
    key: &MasterKey,
    numbers: impl IntoIterator<Item = &'a PhoneNumber>,
) -> Option<(&'a PhoneNumber, String)> {
    numbers
        .into_iter()
        .filter(|n| can_send(n))
        .find_map(|n| access_token(key, n).map(|t| (n, t)))
}
