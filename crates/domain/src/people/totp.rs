//! Two-factor codes: TOTP (RFC 6238) with SHA-1, 6 digits, 30-second steps and one step of
//! clock drift either way, as every authenticator app does by default. A code is accepted
//! once: the caller keeps the last accepted step and [`verify`] only accepts a later one.

use rand::RngCore as _;
use subtle::ConstantTimeEq as _;
use totp_rs::{Algorithm, Builder, Secret, Totp};

/// The issuer shown in the authenticator app.
pub const ISSUER: &str = "Tern";
/// Seconds a code lasts.
pub const STEP_SECS: u64 = 30;
const DIGITS: u8 = 6;
/// Steps of drift accepted either way.
const SKEW: u64 = 1;
/// 160 bits, the size RFC 4226 recommends for an HMAC-SHA-1 secret.
const SECRET_BYTES: usize = 20;

/// A new random secret (raw bytes; stored sealed, shown as base32).
pub fn new_secret() -> Vec<u8> {
    let mut bytes = vec![0u8; SECRET_BYTES];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}

/// The secret as the person types it into an app (RFC 4648 base32, no padding).
pub fn secret_base32(secret: &[u8]) -> String {
    Secret::from(secret.to_vec()).to_base32()
}

/// The secret of its base32 form (as [`secret_base32`] shows it).
pub fn secret_from_base32(b32: &str) -> Option<Vec<u8>> {
    Secret::try_from_base32(b32.trim())
        .ok()
        .map(|s| s.as_bytes().to_vec())
}

fn totp(secret: &[u8], account: &str) -> Option<Totp> {
    Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(DIGITS)
        .with_skew(SKEW as u16)
        .with_step_duration(STEP_SECS)
        .with_secret(secret.to_vec())
        .with_issuer(Some(ISSUER))
        .with_account_name(account.replace(':', ""))
        .build()
        .ok()
}

/// The code of `secret` at `time_s` (tests and the demo).
pub fn code_at(secret: &[u8], time_s: u64) -> String {
    totp(secret, "")
        .map(|t| t.generate(time_s).to_string())
        .unwrap_or_default()
}

/// The step (`time / 30`) of `time_s`.
pub fn step_of(time_s: u64) -> u64 {
    time_s / STEP_SECS
}

/// Checks `code` (6 digits; spaces ignored) at `now_s` against the steps now-1, now and
/// now+1, accepting only a step later than `last_step` (the replay guard). Returns the step
/// that matched, to be stored as the new `last_step`.
pub fn verify(secret: &[u8], code: &str, now_s: u64, last_step: Option<u64>) -> Option<u64> {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if code.len() != usize::from(DIGITS) || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let t = totp(secret, "")?;
    let now = step_of(now_s);
    let mut matched = None;
    // Every step is computed and compared, so the time does not tell which one matched.
    for step in now.saturating_sub(SKEW)..=now + SKEW {
        let expected = t.generate(step * STEP_SECS).to_string();
        let same: bool = expected.as_bytes().ct_eq(code.as_bytes()).into();
        if same && last_step.is_none_or(|last| step > last) && matched.is_none() {
            matched = Some(step);
        }
    }
    matched
}

/// The `otpauth://totp/Tern:<email>?secret=…&issuer=Tern` address an app scans.
pub fn otpauth_url(secret: &[u8], email: &str) -> Option<String> {
    totp(secret, email)?.to_url().ok()
}

/// The address as a QR code, an SVG document (rendered by the server: no script, no CDN).
pub fn qr_svg(url: &str) -> Option<String> {
    let code = qrcode::QrCode::new(url.as_bytes()).ok()?;
    Some(
        code.render::<qrcode::render::svg::Color<'_>>()
            .min_dimensions(200, 200)
            .quiet_zone(true)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238 appendix B, SHA-1 (the 8-digit values' last 6 digits).
    const RFC_SECRET: &[u8] = b"12345678901234567890";

    #[test]
    fn rfc6238_sha1_vectors() {
        for (t, code) in [
            (59, "287082"),
            (1_111_111_109, "081804"),
            (1_111_111_111, "050471"),
            (1_234_567_890, "005924"),
            (2_000_000_000, "279037"),
            (20_000_000_000, "353130"),
        ] {
            assert_eq!(code_at(RFC_SECRET, t), code, "t = {t}");
            assert_eq!(verify(RFC_SECRET, code, t, None), Some(step_of(t)));
        }
    }

    #[test]
    fn one_step_of_drift_either_way() {
        let now = 1_234_567_890;
        let prev = code_at(RFC_SECRET, now - 30);
        let next = code_at(RFC_SECRET, now + 30);
        let old = code_at(RFC_SECRET, now - 60);
        assert_eq!(verify(RFC_SECRET, &prev, now, None), Some(step_of(now) - 1));
        assert_eq!(verify(RFC_SECRET, &next, now, None), Some(step_of(now) + 1));
        assert_eq!(verify(RFC_SECRET, &old, now, None), None);
        assert_eq!(verify(RFC_SECRET, "12345", now, None), None);
        assert_eq!(verify(RFC_SECRET, "abcdef", now, None), None);
        let spaced = format!("{} {}", &prev[..3], &prev[3..]);
        assert_eq!(
            verify(RFC_SECRET, &spaced, now, None),
            Some(step_of(now) - 1)
        );
    }

    #[test]
    fn a_code_is_accepted_once() {
        let now = 1_234_567_890;
        let code = code_at(RFC_SECRET, now);
        let step = verify(RFC_SECRET, &code, now, None).unwrap();
        assert_eq!(verify(RFC_SECRET, &code, now, Some(step)), None);
        // An older step's code is refused after a later one was accepted.
        let prev = code_at(RFC_SECRET, now - 30);
        assert_eq!(verify(RFC_SECRET, &prev, now, Some(step)), None);
        let next = code_at(RFC_SECRET, now + 30);
        assert_eq!(verify(RFC_SECRET, &next, now, Some(step)), Some(step + 1));
    }

    #[test]
    fn enrolment_material() {
        let secret = new_secret();
        assert_eq!(secret.len(), 20);
        let b32 = secret_base32(&secret);
        assert_eq!(b32.len(), 32);
        assert_eq!(secret_from_base32(&b32), Some(secret.clone()));
        let url = otpauth_url(&secret, "ada@example.com").unwrap();
        assert!(
            url.starts_with("otpauth://totp/Tern:ada%40example.com?"),
            "{url}"
        );
        assert!(url.contains(&format!("secret={b32}")), "{url}");
        assert!(url.contains("issuer=Tern"), "{url}");
        let svg = qr_svg(&url).unwrap();
        assert!(svg.contains("<svg"), "{svg}");
    }
}
