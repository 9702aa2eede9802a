//! The password rule (APP.md §2, §7): 12 to 128 characters, not one of the 10,000 most
//! common passwords, and not containing the email's local part when that part has 4 or more
//! characters (case-insensitive).

use std::collections::HashSet;
use std::sync::LazyLock;

/// Fewest characters (Unicode scalar values, not bytes) of a password.
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Most characters of a password (argon2 takes any length; this bounds the work per attempt).
pub const MAX_PASSWORD_CHARS: usize = 128;
/// A local part shorter than this is too common a substring to forbid.
const MIN_LOCAL_PART_CHARS: usize = 4;

/// The first 10,000 lines of Django's `django/contrib/auth/common-passwords.txt.gz`
/// (Django 5.2, BSD-3-Clause licence; the list comes from Royce Williams' compilation of
/// leaked passwords), most common first, one lower-case password a line.
static COMMON: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
    include_str!("../../data/common-passwords.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect()
});

/// Why a password is refused; [`std::fmt::Display`] is the sentence the app shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PasswordProblem {
    #[error("The password is too short: use at least 12 characters.")]
    TooShort,
    #[error("The password is too long: use at most 128 characters.")]
    TooLong,
    #[error("This password is one of the most commonly used passwords; choose another.")]
    TooCommon,
    #[error("The password must not contain the first part of your email address.")]
    ContainsEmail,
}

/// Checks `password` for the person with `email`.
pub fn check_password(password: &str, email: &str) -> Result<(), PasswordProblem> {
    let chars = password.chars().count();
    if chars < MIN_PASSWORD_CHARS {
        return Err(PasswordProblem::TooShort);
    }
    if chars > MAX_PASSWORD_CHARS {
        return Err(PasswordProblem::TooLong);
    }
    let lower = password.to_lowercase();
    if COMMON.contains(lower.as_str()) {
        return Err(PasswordProblem::TooCommon);
    }
    let local = email
        .trim()
        .rsplit_once('@')
        .map_or(email.trim(), |(l, _)| l)
        .to_lowercase();
    if local.chars().count() >= MIN_LOCAL_PART_CHARS && lower.contains(&local) {
        return Err(PasswordProblem::ContainsEmail);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_counts_characters_not_bytes() {
        assert_eq!(
            check_password("short pass", "a@b.c"),
            Err(PasswordProblem::TooShort)
        );
        // 11 characters of 2 bytes each: 22 bytes, still too short.
        assert_eq!(
            check_password(&"é".repeat(11), "a@b.c"),
            Err(PasswordProblem::TooShort)
        );
        assert_eq!(check_password(&"é".repeat(12), "a@b.c"), Ok(()));
        assert_eq!(check_password(&"x7".repeat(64), "a@b.c"), Ok(()));
        assert_eq!(
            check_password(&format!("{}y", "x7".repeat(64)), "a@b.c"),
            Err(PasswordProblem::TooLong)
        );
    }

    #[test]
    fn common_passwords_are_refused_in_any_case() {
        assert_eq!(COMMON.len(), 10_000);
        assert!(COMMON.contains("123456"));
        for p in ["123456789012", "qwertyuiopas", "QwertyUIOP123"] {
            if COMMON.contains(p.to_lowercase().as_str()) {
                assert_eq!(
                    check_password(p, "a@b.c"),
                    Err(PasswordProblem::TooCommon),
                    "{p}"
                );
            }
        }
        let long_common = COMMON
            .iter()
            .find(|p| p.chars().count() >= MIN_PASSWORD_CHARS)
            .copied()
            .unwrap_or_default();
        assert!(!long_common.is_empty());
        assert_eq!(
            check_password(&long_common.to_uppercase(), "a@b.c"),
            Err(PasswordProblem::TooCommon)
        );
    }

    #[test]
    fn the_email_local_part_is_refused_from_four_characters() {
        assert_eq!(
            check_password("my name is ADA.Lovelace!", "Ada.Lovelace@example.com"),
            Err(PasswordProblem::ContainsEmail)
        );
        // Three characters: too common a substring to forbid.
        assert_eq!(
            check_password("bobsled horizon 42", "bob@example.com"),
            Ok(())
        );
        assert_eq!(
            check_password("xxbobbyxx horizon", "Bobby@example.com"),
            Err(PasswordProblem::ContainsEmail)
        );
    }

    #[test]
    fn every_problem_has_a_sentence() {
        for p in [
            PasswordProblem::TooShort,
            PasswordProblem::TooLong,
            PasswordProblem::TooCommon,
            PasswordProblem::ContainsEmail,
        ] {
            assert!(p.to_string().ends_with('.'));
        }
    }
}
