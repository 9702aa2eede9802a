//! Signing in (APP.md §2, §7). Every refusal a person could learn from — wrong password,
//! unknown email, no password yet, locked account, wrong or replayed code, an expired code
//! step — is one answer, [`SignInRefused::Wrong`], shown as "Email, password or code is
//! wrong", and takes about as long (an unknown account checks a dummy hash). Only the
//! per-address limit answers differently ([`SignInRefused::Throttled`], a 429 page).
//!
//! Lock-out: [`MAX_FAILURES`] failures of one account within [`FAILURE_WINDOW_MS`] lock it
//! for `lockout_ms`, doubled on each further lock up to [`MAX_LOCKOUT_MS`]; a success clears
//! the failures and the doubling. While locked, even the right password is refused.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tern_domain::Problem;
use tern_domain::crypto::Purpose;
use tern_domain::people::{normalise_email, recovery, totp};
use tern_domain::time::now_ms;
use tern_store::{Failures, Person};
use uuid::Uuid;

use super::{
    Client, FAILURE_WINDOW_MS, MAX_FAILURES, MAX_LOCKOUT_MS, Started, new_session, password,
};
use crate::Core;

/// How long the step between password and code may take.
const PENDING_MS: i64 = 5 * 60_000;

/// How a sign-in was attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignInMethod {
    Password,
    /// The second step: a TOTP code.
    Code,
    RecoveryCode,
    /// A one-time link (invite, reset, sign-in).
    Link,
}

/// Why a sign-in failed: for the audit log only, never shown to the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    UnknownEmail,
    NoPassword,
    WrongPassword,
    Locked,
    WrongCode,
    ReplayedCode,
    /// The password step's token is invalid or too old.
    PendingExpired,
    /// The per-address limit.
    Throttled,
}

/// One sign-in attempt, success or failure, for the audit log.
// audit: the app records this with `core::audit::record(...)` (another helper's module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInOutcome {
    pub at: i64,
    pub email: String,
    pub person_id: Option<Uuid>,
    pub method: SignInMethod,
    /// `None` on success (or on a password accepted that still needs a code).
    pub failure: Option<FailureReason>,
    pub address: Option<String>,
    pub user_agent: Option<String>,
}

/// A sign-in that went through.
#[derive(Debug, Clone)]
pub enum SignIn {
    Started(Started),
    /// Right password, two-factor on: ask for a code (or a recovery code) with this.
    NeedsCode(PendingSignIn),
}

/// The opaque token carried from the password step to the code step (a form field): the
/// person and an expiry, sealed with the master key, valid 5 minutes.
#[derive(Clone)]
pub struct PendingSignIn {
    pub token: String,
    pub outcome: SignInOutcome,
}

impl std::fmt::Debug for PendingSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingSignIn")
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

/// A refused sign-in.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SignInRefused {
    /// Everything the person must not tell apart (the outcome says what, internally).
    #[error("Email, password or code is wrong")]
    Wrong(SignInOutcome),
    /// Too many failures from this address in the last minute.
    #[error("Too many attempts from this address; wait a minute and try again")]
    Throttled(SignInOutcome),
    /// The database is unavailable (nothing was decided).
    #[error("{0}")]
    Unavailable(Problem),
}

impl SignInRefused {
    /// The attempt, for the audit log (`None` when nothing was decided).
    pub fn outcome(&self) -> Option<&SignInOutcome> {
        match self {
            Self::Wrong(o) | Self::Throttled(o) => Some(o),
            Self::Unavailable(_) => None,
        }
    }
}

impl From<Problem> for SignInRefused {
    fn from(p: Problem) -> Self {
        Self::Unavailable(p)
    }
}

impl From<tern_store::StoreError> for SignInRefused {
    fn from(e: tern_store::StoreError) -> Self {
        Self::Unavailable(e.into())
    }
}

pub type SignInResult<T> = Result<T, SignInRefused>;

struct Attempt<'a> {
    core: &'a Core,
    client: &'a Client,
    email: String,
    method: SignInMethod,
    now: i64,
}

impl Attempt<'_> {
    fn outcome(&self, person_id: Option<Uuid>, failure: Option<FailureReason>) -> SignInOutcome {
        SignInOutcome {
            at: self.now,
            email: self.email.clone(),
            person_id,
            method: self.method,
            failure,
            address: self.client.address.clone(),
            user_agent: self.client.user_agent.clone(),
        }
    }

    fn throttled(&self) -> SignInResult<()> {
        if self
            .core
            .people_throttle
            .is_throttled(self.client.address.as_deref(), self.now)
        {
            return Err(SignInRefused::Throttled(
                self.outcome(None, Some(FailureReason::Throttled)),
            ));
        }
        Ok(())
    }

    /// Counts a failure against the address and, when known, the account.
    async fn fail(&self, person: Option<&Person>, reason: FailureReason) -> SignInRefused {
        self.core
            .people_throttle
            .record_failure(self.client.address.as_deref(), self.now);
        if let Some(p) = person
            && reason != FailureReason::Locked
            && let Err(e) = record_failure(self.core, p.id, self.now).await
        {
            return SignInRefused::Unavailable(e);
        }
        SignInRefused::Wrong(self.outcome(person.map(|p| p.id), Some(reason)))
    }

    /// Clears the failures and starts a session.
    async fn start(&self, person: &Person) -> SignInResult<Started> {
        let (token, session) = new_session(person.id, None, self.client, self.now);
        let mut tx = self.core.db.begin().await?;
        tx.set_failures(person.id, Failures::default(), self.now)
            .await?;
        tx.insert_app_session(&session).await?;
        tx.commit().await?;
        Ok(Started {
            token,
            session,
            outcome: self.outcome(Some(person.id), None),
        })
    }
}

pub(crate) fn is_locked(person: &Person, now: i64) -> bool {
    person.locked_until.is_some_and(|t| t > now)
}

/// Counts one failure of the account at `now`, locking it on the fifth within the window.
pub(crate) async fn record_failure(core: &Core, person_id: Uuid, now: i64) -> crate::Result<()> {
    let mut tx = core.db.begin().await?;
    let Some(p) = tx.lock_person(person_id).await? else {
        return Ok(());
    };
    let f = next_failures(&p, now, core.people.lockout_ms);
    tx.set_failures(person_id, f, now).await?;
    tx.commit().await?;
    Ok(())
}

/// The throttle after one more failure at `now`.
fn next_failures(p: &Person, now: i64, lockout_ms: i64) -> Failures {
    let in_window = p
        .first_failure_at
        .is_some_and(|t| now - t < FAILURE_WINDOW_MS);
    let (failures, first) = if in_window {
        (p.failures + 1, p.first_failure_at)
    } else {
        (1, Some(now))
    };
    if failures < MAX_FAILURES {
        return Failures {
            failures,
            first_failure_at: first,
            locked_until: p.locked_until,
            lockouts: p.lockouts,
        };
    }
    let cap = MAX_LOCKOUT_MS.max(lockout_ms);
    let factor = 1i64
        .checked_shl(p.lockouts.clamp(0, 30) as u32)
        .unwrap_or(i64::MAX);
    let duration = lockout_ms.saturating_mul(factor).min(cap);
    Failures {
        failures: 0,
        first_failure_at: None,
        locked_until: Some(now + duration),
        lockouts: p.lockouts + 1,
    }
}

/// The first step: email and password.
pub async fn sign_in(
    core: &Core,
    email: &str,
    password: &str,
    client: &Client,
) -> SignInResult<SignIn> {
    let a = Attempt {
        core,
        client,
        email: normalise_email(email),
        method: SignInMethod::Password,
        now: now_ms(),
    };
    a.throttled()?;
    let person = core.db.find_person_by_email(&a.email).await?;
    let Some(person) = person else {
        password::verify(&core.api_load, password, None).await?;
        return Err(a.fail(None, FailureReason::UnknownEmail).await);
    };
    let reason = if is_locked(&person, a.now) {
        Some(FailureReason::Locked)
    } else if person.password_hash.is_none() {
        Some(FailureReason::NoPassword)
    } else {
        None
    };
    if let Some(reason) = reason {
        password::verify(&core.api_load, password, None).await?;
        return Err(a.fail(Some(&person), reason).await);
    }
    if !password::verify(&core.api_load, password, person.password_hash.as_deref()).await? {
        return Err(a.fail(Some(&person), FailureReason::WrongPassword).await);
    }
    if person.has_two_factor() {
        return Ok(SignIn::NeedsCode(PendingSignIn {
            token: seal_pending(core, person.id, a.now + PENDING_MS),
            outcome: a.outcome(Some(person.id), None),
        }));
    }
    Ok(SignIn::Started(a.start(&person).await?))
}

/// The second step: a TOTP code (accepted once) or an unused recovery code (used up).
pub async fn sign_in_code(
    core: &Core,
    pending: &str,
    code: &str,
    client: &Client,
) -> SignInResult<Started> {
    let mut a = Attempt {
        core,
        client,
        email: String::new(),
        method: SignInMethod::Code,
        now: now_ms(),
    };
    a.throttled()?;
    let person = match open_pending(core, pending, a.now) {
        Some(id) => core.db.get_person(id).await?,
        None => None,
    };
    let Some(person) = person else {
        return Err(a.fail(None, FailureReason::PendingExpired).await);
    };
    a.email = person.email.clone();
    if is_locked(&person, a.now) {
        return Err(a.fail(Some(&person), FailureReason::Locked).await);
    }
    let secret = person
        .totp_secret_enc
        .as_deref()
        .and_then(|s| core.key.open(Purpose::TotpSecret, s));
    let Some(secret) = secret else {
        return Err(a.fail(Some(&person), FailureReason::WrongCode).await);
    };
    let now_s = u64::try_from(a.now / 1000).unwrap_or_default();
    let last = person.totp_last_step.and_then(|s| u64::try_from(s).ok());
    if let Some(step) = totp::verify(&secret, code, now_s, last) {
        let step = i64::try_from(step).unwrap_or(i64::MAX);
        if core.db.accept_totp_step(person.id, step).await? {
            return a.start(&person).await;
        }
        return Err(a.fail(Some(&person), FailureReason::ReplayedCode).await);
    }
    if totp::verify(&secret, code, now_s, None).is_some() {
        return Err(a.fail(Some(&person), FailureReason::ReplayedCode).await);
    }
    if let Some(hash) = recovery::hash(code) {
        a.method = SignInMethod::RecoveryCode;
        if core.db.use_recovery_code(person.id, &hash, a.now).await? {
            return a.start(&person).await;
        }
    }
    Err(a.fail(Some(&person), FailureReason::WrongCode).await)
}

fn seal_pending(core: &Core, person_id: Uuid, expires_at: i64) -> String {
    let mut plain = person_id.as_bytes().to_vec();
    plain.extend_from_slice(&expires_at.to_be_bytes());
    URL_SAFE_NO_PAD.encode(core.key.seal(Purpose::PendingSignIn, &plain))
}

fn open_pending(core: &Core, token: &str, now: i64) -> Option<Uuid> {
    let sealed = URL_SAFE_NO_PAD.decode(token.trim()).ok()?;
    let plain = core.key.open(Purpose::PendingSignIn, &sealed)?;
    let (id, exp) = plain.split_at_checked(16)?;
    let exp = i64::from_be_bytes(exp.try_into().ok()?);
    (exp > now).then(|| Uuid::from_slice(id).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person() -> Person {
        Person {
            id: Uuid::nil(),
            email: "a@b.c".into(),
            name: String::new(),
            password_hash: None,
            totp_secret_enc: None,
            totp_pending_enc: None,
            totp_enabled_at: None,
            totp_last_step: None,
            failures: 0,
            first_failure_at: None,
            locked_until: None,
            lockouts: 0,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn five_failures_in_the_window_lock_doubling_up_to_a_day() {
        let mut p = person();
        let now = 1_000_000_000;
        for i in 1..5 {
            let f = next_failures(&p, now + i, 900_000);
            assert_eq!((f.failures, f.locked_until), (i, None));
            (p.failures, p.first_failure_at) = (f.failures, f.first_failure_at);
        }
        let f = next_failures(&p, now + 5, 900_000);
        assert_eq!(f.locked_until, Some(now + 5 + 900_000));
        assert_eq!((f.failures, f.lockouts), (0, 1));
        p.lockouts = 1;
        p.failures = 4;
        let f = next_failures(&p, now + 6, 900_000);
        assert_eq!(f.locked_until, Some(now + 6 + 1_800_000));
        p.lockouts = 10;
        let f = next_failures(&p, now + 7, 900_000);
        assert_eq!(f.locked_until, Some(now + 7 + MAX_LOCKOUT_MS));
        // Failures older than the window start over.
        let f = next_failures(&p, now + 1 + FAILURE_WINDOW_MS, 900_000);
        assert_eq!((f.failures, f.locked_until), (1, None));
    }
}
