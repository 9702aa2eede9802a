//! Sessions: looking one up on every request (idle and absolute expiry, the person's current
//! memberships), switching organisation, signing out, confirming identity and changing the
//! password.

use tern_domain::Problem;
use tern_domain::crypto::Purpose;
use tern_domain::people::{EndReason, check_password, token_hash, totp};
use tern_domain::time::now_ms;
use tern_store::{AppSession, Membership, Person, SEEN_GRANULARITY_MS};
use uuid::Uuid;

use super::sign_in::{is_locked, record_failure};
use super::{PeopleSettings, end_all, password, person};
use crate::audit::{self, Context};
use crate::{Core, Result};

/// Everything a page needs about who is looking.
#[derive(Debug, Clone)]
pub struct SessionView {
    pub session: AppSession,
    pub person: Person,
    /// The person's organisations, by name.
    pub memberships: Vec<Membership>,
    /// The organisation shown: the session's if still a membership, else the first.
    pub current: Option<Membership>,
    /// The current organisation requires two-factor and the person has none: the app
    /// sends them to enrolment.
    pub needs_two_factor: bool,
}

impl SessionView {
    /// The person's role in the current organisation.
    pub fn role(&self) -> Option<tern_domain::auth::Role> {
        self.current.as_ref().map(|m| m.member.role)
    }
}

/// The session of a cookie's token at `now` (epoch ms), or `None` when it is unknown,
/// ended, idle for longer than `session_idle_ms`, older than `session_max_ms`, or its person
/// is gone. Records activity at most once a minute.
pub async fn session(core: &Core, token: &str, now: i64) -> Result<Option<SessionView>> {
    let db = &core.db;
    let Some(mut s) = db.find_app_session(&token_hash(token)).await? else {
        return Ok(None);
    };
    if s.ended_at.is_some() {
        return Ok(None);
    }
    let settings = &core.people;
    if now >= s.last_seen_at + settings.session_idle_ms
        || now >= s.created_at + settings.session_max_ms
    {
        db.end_app_session(s.id, EndReason::Expired, now).await?;
        return Ok(None);
    }
    let Some(person) = db.get_person(s.person_id).await? else {
        return Ok(None);
    };
    if now - s.last_seen_at >= SEEN_GRANULARITY_MS && db.touch_app_session(s.id, now).await? {
        s.last_seen_at = now;
    }
    let memberships = db.memberships_of(&person.email).await?;
    let current = s
        .org_id
        .and_then(|id| memberships.iter().find(|m| m.member.org_id == id))
        .or_else(|| memberships.first())
        .cloned();
    let needs_two_factor =
        current.as_ref().is_some_and(|m| m.two_factor_required) && !person.has_two_factor();
    Ok(Some(SessionView {
        session: s,
        person,
        memberships,
        current,
        needs_two_factor,
    }))
}

/// Shows another of the person's organisations in this session.
pub async fn switch_org(
    core: &Core,
    session_id: Uuid,
    person_id: Uuid,
    org_id: Uuid,
) -> Result<()> {
    let person = person(core, person_id).await?;
    let member = core
        .db
        .memberships_of(&person.email)
        .await?
        .into_iter()
        .any(|m| m.member.org_id == org_id);
    if !member {
        return Err(Problem::not_found().with_message("You are not a member of that organisation."));
    }
    let s = own_session(core, person_id, session_id).await?;
    core.db.set_app_session_org(s.id, org_id).await?;
    Ok(())
}

async fn own_session(core: &Core, person_id: Uuid, session_id: Uuid) -> Result<AppSession> {
    core.db
        .get_app_session(session_id)
        .await?
        .filter(|s| s.person_id == person_id)
        .ok_or_else(|| Problem::not_found().with_message("There is no such session."))
}

/// Ends this session.
pub async fn sign_out(core: &Core, session_id: Uuid) -> Result<()> {
    core.db
        .end_app_session(session_id, EndReason::SignedOut, now_ms())
        .await?;
    Ok(())
}

/// Ends every session of the person, the current one included.
pub async fn sign_out_everywhere(core: &Core, person_id: Uuid) -> Result<u64> {
    end_all(
        &core.db,
        person_id,
        EndReason::SignedOutEverywhere,
        now_ms(),
    )
    .await
}

/// The person's sessions, newest first: the open ones and those ended in the last 30 days.
pub async fn sessions(core: &Core, person_id: Uuid) -> Result<Vec<AppSession>> {
    const SHOW_ENDED_MS: i64 = 30 * 86_400_000;
    Ok(core
        .db
        .list_app_sessions(person_id, now_ms() - SHOW_ENDED_MS)
        .await?)
}

/// Ends one of the person's own sessions (from the sessions page).
pub async fn end_session(core: &Core, person_id: Uuid, session_id: Uuid) -> Result<()> {
    let s = own_session(core, person_id, session_id).await?;
    core.db
        .end_app_session(s.id, EndReason::Ended, now_ms())
        .await?;
    Ok(())
}

/// Whether the session confirmed the person's identity within `confirm_ms` of `now`.
pub fn is_confirmed(session: &AppSession, settings: &PeopleSettings, now: i64) -> bool {
    session
        .confirmed_at
        .is_some_and(|t| t <= now && now - t < settings.confirm_ms)
}

/// Confirms the person's identity for the sensitive actions of the next `confirm_ms`: the
/// current TOTP code when they use two-factor (accepted once), else their password. Wrong
/// answers count towards the account's lock-out like sign-in failures.
pub async fn confirm(core: &Core, session_id: Uuid, person_id: Uuid, secret: &str) -> Result<()> {
    let now = now_ms();
    let person = person(core, person_id).await?;
    let s = own_session(core, person_id, session_id).await?;
    if s.ended_at.is_some() {
        return Err(Problem::not_found().with_message("This session has ended; sign in again."));
    }
    let (field, words) = if person.has_two_factor() {
        (
            "code",
            "The code is wrong or was already used; wait for the next code and try again.",
        )
    } else {
        ("password", "The password is wrong.")
    };
    // A locked account is refused without a check, and the refusal does not extend the lock.
    let locked = is_locked(&person, now);
    if locked || !check_secret(core, &person, secret, now).await? {
        if !locked {
            record_failure(core, person.id, now).await?;
        }
        return Err(Problem::field(field, words));
    }
    core.db.confirm_app_session(s.id, now).await?;
    Ok(())
}

async fn check_secret(core: &Core, person: &Person, secret: &str, now: i64) -> Result<bool> {
    if let Some(sealed) = &person.totp_secret_enc {
        let Some(key) = core.key.open(Purpose::TotpSecret, sealed) else {
            return Ok(false);
        };
        let now_s = u64::try_from(now / 1000).unwrap_or_default();
        let last = person.totp_last_step.and_then(|s| u64::try_from(s).ok());
        return Ok(match totp::verify(&key, secret, now_s, last) {
            Some(step) => {
                core.db
                    .accept_totp_step(person.id, i64::try_from(step).unwrap_or(i64::MAX))
                    .await?
            }
            None => false,
        });
    }
    password::verify(&core.api_load, secret, person.password_hash.as_deref()).await
}

/// Changes the password (the current one is required) and ends the person's other sessions;
/// answers how many were ended. Recorded as `password.changed` in each of the person's
/// organisations.
pub async fn change_password(
    core: &Core,
    ctx: &Context,
    person_id: Uuid,
    current_session_id: Uuid,
    current: &str,
    new: &str,
) -> Result<u64> {
    let now = now_ms();
    let person = person(core, person_id).await?;
    let locked = is_locked(&person, now);
    // A person signed in by a one-time sign-in link may have no password yet (`tern demo`'s
    // owner): the session is the proof, and the first password needs no current one.
    let first = person.password_hash.is_none();
    if !first
        && (locked
            || !password::verify(&core.api_load, current, person.password_hash.as_deref()).await?)
    {
        if !locked {
            record_failure(core, person.id, now).await?;
        }
        return Err(Problem::field(
            "current_password",
            "The current password is wrong.",
        ));
    }
    check_password(new, &person.email).map_err(|p| Problem::field("password", p.to_string()))?;
    let hash = password::hash(&core.api_load, new).await?;
    let mut tx = core.db.begin().await?;
    tx.set_password(person.id, None, &hash, now).await?;
    let ended = tx
        .end_person_sessions(
            person.id,
            Some(current_session_id),
            EndReason::PasswordChanged,
            now,
        )
        .await?;
    tx.commit().await?;
    super::record_for_person(
        core,
        ctx,
        &person.email,
        Some(person.id),
        audit::PASSWORD_CHANGED,
        Some(serde_json::json!({ "sessions_ended": ended })),
    )
    .await?;
    Ok(ended)
}

/// Sets the person's display name (trimmed; 1 to [`super::MAX_NAME_CHARS`] characters).
pub async fn set_name(core: &Core, person_id: Uuid, name: &str) -> Result<()> {
    let name =
        super::check_name(name)?.ok_or_else(|| Problem::field("name", "Enter your name."))?;
    person(core, person_id).await?;
    core.db.set_person_name(person_id, name, now_ms()).await?;
    Ok(())
}
