//! Two-factor enrolment: a pending secret shown as a QR code and base32, confirmed by one
//! valid code, which turns it on and makes ten recovery codes (shown once, stored hashed).

use tern_domain::Problem;
use tern_domain::crypto::Purpose;
use tern_domain::error::ConflictReason;
use tern_domain::people::{recovery, totp};
use tern_domain::time::now_ms;
use uuid::Uuid;

use super::person;
use crate::audit::{self, Context};
use crate::{Core, Result};

/// What the enrolment page shows. Secret: never logged.
#[derive(Clone)]
pub struct Enrolment {
    pub secret_base32: String,
    pub otpauth_url: String,
    pub qr_svg: String,
}

impl std::fmt::Debug for Enrolment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Enrolment(<redacted>)")
    }
}

/// Starts (or restarts) an enrolment with a new secret.
pub async fn two_factor_begin(core: &Core, person_id: Uuid) -> Result<Enrolment> {
    let p = person(core, person_id).await?;
    if p.has_two_factor() {
        return Err(
            Problem::conflict(ConflictReason::AlreadyExists).with_message(
                "Two-factor authentication is already on; turn it off first to enrol again.",
            ),
        );
    }
    let secret = totp::new_secret();
    let shown = enrolment(&secret, &p.email)?;
    let sealed = core.key.seal(Purpose::TotpSecret, &secret);
    core.db
        .set_totp_pending(person_id, &sealed, now_ms())
        .await?;
    Ok(shown)
}

/// The enrolment in progress (begun and not finished), shown again: after a wrong code or a
/// reload, the person keeps the secret they already scanned.
pub async fn two_factor_pending(core: &Core, person_id: Uuid) -> Result<Option<Enrolment>> {
    let p = person(core, person_id).await?;
    let Some(sealed) = p.totp_pending_enc.as_deref() else {
        return Ok(None);
    };
    if p.has_two_factor() {
        return Ok(None);
    }
    let secret = core
        .key
        .open(Purpose::TotpSecret, sealed)
        .ok_or_else(Problem::unavailable)?;
    enrolment(&secret, &p.email).map(Some)
}

fn enrolment(secret: &[u8], email: &str) -> Result<Enrolment> {
    let otpauth_url = totp::otpauth_url(secret, email).ok_or_else(Problem::unavailable)?;
    let qr_svg = totp::qr_svg(&otpauth_url).ok_or_else(Problem::unavailable)?;
    Ok(Enrolment {
        secret_base32: totp::secret_base32(secret),
        otpauth_url,
        qr_svg,
    })
}

/// Completes the enrolment with a valid code; returns the ten recovery codes (shown once).
/// Recorded as `two_factor.enabled` in each of the person's organisations.
pub async fn two_factor_finish(
    core: &Core,
    ctx: &Context,
    person_id: Uuid,
    code: &str,
) -> Result<Vec<String>> {
    let p = person(core, person_id).await?;
    let pending = p.totp_pending_enc.as_deref().ok_or_else(|| {
        Problem::conflict(ConflictReason::AlreadyExists)
            .with_message("There is no enrolment in progress; start again.")
    })?;
    let secret = core
        .key
        .open(Purpose::TotpSecret, pending)
        .ok_or_else(Problem::unavailable)?;
    let now = now_ms();
    let now_s = u64::try_from(now / 1000).unwrap_or_default();
    let step = totp::verify(&secret, code, now_s, None).ok_or_else(|| {
        Problem::field(
            "code",
            "The code is wrong. Check that the app shows Tern, and that this device's clock is right.",
        )
    })?;
    let codes = recovery::new_codes();
    let hashes: Vec<Vec<u8>> = codes.iter().filter_map(|c| recovery::hash(c)).collect();
    let step = i64::try_from(step).unwrap_or(i64::MAX);
    if !core
        .db
        .enable_two_factor(person_id, pending, step, &hashes, now)
        .await?
    {
        return Err(Problem::conflict(ConflictReason::AlreadyExists)
            .with_message("The enrolment changed meanwhile (another page?); start again."));
    }
    super::record_for_person(
        core,
        ctx,
        &p.email,
        Some(person_id),
        audit::TWO_FACTOR_ENABLED,
        None,
    )
    .await?;
    Ok(codes)
}

/// Turns two-factor off (the caller checked a recent confirmation). Refused while one of
/// the person's organisations requires two-factor: they would be sent straight back to
/// enrolment (the operator's `tern admin member reset` still turns it off). Recorded as
/// `two_factor.disabled` in each of the person's organisations.
pub async fn two_factor_disable(core: &Core, ctx: &Context, person_id: Uuid) -> Result<()> {
    let p = person(core, person_id).await?;
    if !p.has_two_factor() {
        return Ok(());
    }
    let requiring: Vec<String> = core
        .db
        .memberships_of(&p.email)
        .await?
        .into_iter()
        .filter(|m| m.two_factor_required)
        .map(|m| m.org_name)
        .collect();
    if !requiring.is_empty() {
        return Err(super::forbidden(&format!(
            "Two-factor authentication cannot be turned off: {} requires it of its members.",
            requiring.join(", ")
        )));
    }
    core.db.disable_two_factor(person_id, now_ms()).await?;
    super::record_for_person(
        core,
        ctx,
        &p.email,
        Some(person_id),
        audit::TWO_FACTOR_DISABLED,
        None,
    )
    .await
}

/// An owner's setting: members must use two-factor (those without it are taken to enrolment).
/// Audited as `org.two_factor_required` (detail `required`) right after the change, which is
/// one statement. Who may change it is the caller's check (the app: owners only).
pub async fn set_two_factor_required(
    core: &Core,
    ctx: &crate::audit::Context,
    org_id: Uuid,
    required: bool,
) -> Result<()> {
    use crate::audit::{self, Entry, TARGET_ORG};
    if !core
        .db
        .set_two_factor_required(org_id, required, now_ms())
        .await?
    {
        return Err(
            Problem::not_found().with_message(format!("organisation {org_id} does not exist"))
        );
    }
    let entry = Entry::new(Some(org_id), audit::ORG_TWO_FACTOR_REQUIRED)
        .target(TARGET_ORG, org_id)
        .detail(serde_json::json!({ "required": required }));
    audit::record(&core.db, ctx, entry).await
}
