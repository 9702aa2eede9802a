//! People in the app (APP.md §2, §7): invitations and one-time links, sign-in with the
//! lock-out and the per-address limit, sessions, identity confirmation, two-factor, password
//! changes and the members of an organisation. Used by the app and by `tern admin`.
//!
//! | file | use cases |
//! |---|---|
//! | `links.rs` | [`invite`], [`reset`], [`sign_in_link`], [`link_info`], [`use_link`] |
//! | `sign_in.rs` | [`sign_in`], [`sign_in_code`]: refusals that do not tell the person apart |
//! | `sessions.rs` | [`session`], [`switch_org`], [`sign_out`], [`sign_out_everywhere`], [`sessions`], [`end_session`], [`confirm`], [`change_password`], [`set_name`] |
//! | `two_factor.rs` | [`two_factor_begin`], [`two_factor_pending`], [`two_factor_finish`], [`two_factor_disable`], [`set_two_factor_required`] |
//! | `members.rs` | [`members`], [`change_role`], [`remove_member`] |
//! | `audit.rs` | [`record_for_person`], [`record_sign_in`]: entries about a person, in each of their organisations |
//! | `password.rs` | argon2id hashing on blocking threads, two at a time |
//! | `throttle.rs` | the per-address failure limit (in-process) |

mod audit;
mod links;
mod members;
mod password;
mod sessions;
mod sign_in;
mod throttle;
mod two_factor;

pub use audit::{TARGET_PERSON, record_for_person, record_sign_in};
pub use links::{
    Invited, Inviter, LinkInfo, invite, invite_in, link_info, reset, reset_in, sign_in_link,
    sign_in_link_in, use_link,
};
pub use members::{MemberView, change_role, members, remove_member};
pub use sessions::{
    SessionView, change_password, confirm, end_session, is_confirmed, session, sessions, set_name,
    sign_out, sign_out_everywhere, switch_org,
};
pub use sign_in::{
    FailureReason, PendingSignIn, SignIn, SignInMethod, SignInOutcome, SignInRefused, SignInResult,
    sign_in, sign_in_code,
};
pub use throttle::AddressThrottle;
pub use two_factor::{
    Enrolment, set_two_factor_required, two_factor_begin, two_factor_disable, two_factor_finish,
    two_factor_pending,
};

use tern_domain::auth::Role;
use tern_domain::people::{EndReason, new_token, token_hash};
use tern_domain::{ErrorCode, Problem, new_id};
use tern_store::{AppSession, Db};
use uuid::Uuid;

/// The app's durations (APP.md §7), in milliseconds; shortened by tests and small
/// installations through `TERN_APP_*_SECS`.
#[derive(Clone, Debug)]
pub struct PeopleSettings {
    /// A session ends after this long without a request (12 hours).
    pub session_idle_ms: i64,
    /// A session ends this long after it started, whatever happens (14 days).
    pub session_max_ms: i64,
    /// An invite or reset link is valid this long (7 days).
    pub invite_ms: i64,
    /// An identity confirmation is valid this long (5 minutes).
    pub confirm_ms: i64,
    /// The first lock-out of an account (15 minutes), doubling on each repeat up to a day.
    pub lockout_ms: i64,
}

impl Default for PeopleSettings {
    fn default() -> Self {
        Self {
            session_idle_ms: 43_200_000,
            session_max_ms: 1_209_600_000,
            invite_ms: 604_800_000,
            confirm_ms: 300_000,
            lockout_ms: 900_000,
        }
    }
}

/// A sign-in link (`tern demo`) is valid this long.
pub const SIGN_IN_LINK_MS: i64 = 15 * 60_000;
/// The longest lock-out, unless `lockout_ms` is longer itself.
pub const MAX_LOCKOUT_MS: i64 = 86_400_000;
/// Failures of one account within [`FAILURE_WINDOW_MS`] that lock it.
pub const MAX_FAILURES: i64 = 5;
pub const FAILURE_WINDOW_MS: i64 = 15 * 60_000;
/// Failures one client address may make in [`ADDRESS_WINDOW_MS`] before it is throttled.
pub const MAX_ADDRESS_FAILURES: usize = 30;
pub const ADDRESS_WINDOW_MS: i64 = 60_000;

/// Where a request came from (the sessions page shows it; the limit is per address).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Client {
    pub address: Option<String>,
    pub user_agent: Option<String>,
}

/// A session just started: the raw token goes into the cookie and is never stored.
#[derive(Clone)]
pub struct Started {
    pub token: String,
    pub session: AppSession,
    /// What happened, for the audit log.
    pub outcome: SignInOutcome,
}

impl std::fmt::Debug for Started {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Started")
            .field("session", &self.session)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

/// The CSRF token of a session (see [`tern_domain::people::csrf_token`]); compare with
/// [`tern_domain::people::csrf_matches`].
pub fn csrf_token(session_token: &str) -> String {
    tern_domain::people::csrf_token(session_token)
}

/// Most characters of a person's display name.
pub const MAX_NAME_CHARS: usize = 100;

/// A display name as typed: trimmed, `None` when blank, refused when too long.
pub(crate) fn check_name(name: &str) -> crate::Result<Option<&str>> {
    let name = name.trim();
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(Problem::field(
            "name",
            "The name is too long: use at most 100 characters.",
        ));
    }
    Ok((!name.is_empty()).then_some(name))
}

/// A role's rank: nobody grants a role above their own.
pub(crate) fn rank(role: Role) -> u8 {
    match role {
        Role::Owner => 3,
        Role::Admin => 2,
        Role::Developer => 1,
    }
}

pub(crate) fn forbidden(message: &str) -> Problem {
    Problem::new(ErrorCode::PermissionDenied).with_message(message.to_string())
}

/// A new session of `person_id` (not yet stored) and its raw token.
pub(crate) fn new_session(
    person_id: Uuid,
    org_id: Option<Uuid>,
    client: &Client,
    now: i64,
) -> (String, AppSession) {
    let token = new_token();
    let session = AppSession {
        id: new_id(),
        token_hash: token_hash(&token),
        person_id,
        org_id,
        created_at: now,
        last_seen_at: now,
        confirmed_at: None,
        address: client.address.as_deref().map(|a| truncate(a, 100)),
        user_agent: client.user_agent.as_deref().map(|a| truncate(a, 400)),
        ended_at: None,
        end_reason: None,
    };
    (token, session)
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// Ends every session of the person (store errors logged: callers already changed what
/// matters).
pub(crate) async fn end_all(
    db: &Db,
    person_id: Uuid,
    reason: EndReason,
    now: i64,
) -> crate::Result<u64> {
    Ok(db.end_person_sessions(person_id, None, reason, now).await?)
}

/// The person `person_id`, or not found.
async fn person(core: &crate::Core, person_id: Uuid) -> crate::Result<tern_store::Person> {
    core.db
        .get_person(person_id)
        .await?
        .ok_or_else(Problem::not_found)
}
