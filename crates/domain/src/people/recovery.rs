//! Recovery codes: ten one-time codes shown once at enrolment, for when the authenticator is
//! lost. Shaped `xxxxx-xxxxx` from a 32-letter alphabet without look-alikes (50 bits each);
//! stored as SHA-256 of the normalised form, accepted in any case, with or without the dash.

use rand::Rng as _;
use sha2::{Digest as _, Sha256};

/// How many codes an enrolment makes.
pub const RECOVERY_CODES: usize = 10;
/// Lower-case letters and digits without 0/o, 1/l/i (read aloud or copied by hand).
const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
const HALF: usize = 5;

/// Ten fresh codes, `xxxxx-xxxxx`.
pub fn new_codes() -> Vec<String> {
    let mut rng = rand::rng();
    (0..RECOVERY_CODES)
        .map(|_| {
            let mut s = String::with_capacity(2 * HALF + 1);
            for i in 0..2 * HALF {
                if i == HALF {
                    s.push('-');
                }
                s.push(ALPHABET[rng.random_range(0..ALPHABET.len())] as char);
            }
            s
        })
        .collect()
}

/// The code as compared: lower-case, without the dash and spaces. `None` when it cannot
/// be a recovery code (so a six-digit TOTP code is never taken for one).
pub fn normalise(code: &str) -> Option<String> {
    let s: String = code
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    (s.len() == 2 * HALF && s.bytes().all(|b| ALPHABET.contains(&b))).then_some(s)
}

/// The stored hash of a code (`None` when it is not shaped like one).
pub fn hash(code: &str) -> Option<Vec<u8>> {
    normalise(code).map(|s| Sha256::digest(s.as_bytes()).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_ten_distinct_and_shaped() {
        let codes = new_codes();
        assert_eq!(codes.len(), 10);
        for c in &codes {
            assert_eq!(c.len(), 11);
            assert_eq!(&c[5..6], "-");
            assert!(normalise(c).is_some(), "{c}");
        }
        let mut unique = codes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 10);
    }

    #[test]
    fn accepted_in_any_case_with_or_without_the_dash() {
        let h = hash("abcde-fghjk").unwrap();
        assert_eq!(hash("ABCDE-FGHJK").unwrap(), h);
        assert_eq!(hash("abcdefghjk").unwrap(), h);
        assert_eq!(hash(" abcde fghjk ").unwrap(), h);
        assert_ne!(hash("abcde-fghjm").unwrap(), h);
        assert_eq!(hash("123456"), None);
        assert_eq!(hash("abcde-fghj"), None);
        assert_eq!(hash("abcde-fghjkk"), None);
        assert_eq!(hash("abcde-fgh0k"), None);
    }
}
