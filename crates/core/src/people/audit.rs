//! Audit entries about a person (sign-ins, two-factor, password): one entry in each
//! organisation the person belongs to, so every organisation's log shows its members'
//! sign-ins (APP.md §7); an attempt for an unknown email is kept with no organisation.

use serde_json::{Value, json};
use uuid::Uuid;

use super::{FailureReason, SignInMethod, SignInOutcome};
use crate::audit::{self, Actor, Context, Entry};
use crate::{Core, Result};

/// The person target kind of these entries.
pub const TARGET_PERSON: &str = "person";

/// Records `action` about the person with `email` (target: `person_id`) in each of their
/// organisations; with none, once without an organisation.
pub async fn record_for_person(
    core: &Core,
    ctx: &Context,
    email: &str,
    person_id: Option<Uuid>,
    action: &str,
    detail: Option<Value>,
) -> Result<()> {
    let orgs: Vec<Option<Uuid>> = match person_id {
        Some(_) => core
            .db
            .memberships_of(email)
            .await?
            .into_iter()
            .map(|m| Some(m.member.org_id))
            .collect(),
        None => Vec::new(),
    };
    let orgs = if orgs.is_empty() { vec![None] } else { orgs };
    for org in orgs {
        let mut e = Entry::new(org, action);
        if let Some(id) = person_id {
            e = e.target(TARGET_PERSON, id);
        }
        if let Some(d) = &detail {
            e = e.detail(d.clone());
        }
        audit::record(&core.db, ctx, e).await?;
    }
    Ok(())
}

fn method_name(m: SignInMethod) -> &'static str {
    match m {
        SignInMethod::Password => "password",
        SignInMethod::Code => "code",
        SignInMethod::RecoveryCode => "recovery_code",
        SignInMethod::Link => "link",
    }
}

fn failure_name(f: FailureReason) -> &'static str {
    match f {
        FailureReason::UnknownEmail => "unknown_email",
        FailureReason::NoPassword => "no_password",
        FailureReason::WrongPassword => "wrong_password",
        FailureReason::Locked => "locked",
        FailureReason::WrongCode => "wrong_code",
        FailureReason::ReplayedCode => "replayed_code",
        FailureReason::PendingExpired => "pending_expired",
        FailureReason::Throttled => "throttled",
    }
}

/// Records a sign-in attempt: `sign_in.succeeded`, `sign_in.locked` (refused because the
/// account is locked) or `sign_in.failed`, with the method and, for a failure, why (the
/// person was told none of this). A password accepted that still needs a code is not an
/// entry: the code step's outcome is.
pub async fn record_sign_in(core: &Core, o: &SignInOutcome) -> Result<()> {
    let action = match o.failure {
        None => audit::SIGN_IN_SUCCEEDED,
        Some(FailureReason::Locked) => audit::SIGN_IN_LOCKED,
        Some(_) => audit::SIGN_IN_FAILED,
    };
    let actor = match o.person_id {
        Some(id) => Actor::Person {
            id,
            email: o.email.clone(),
        },
        // Nobody is known: the label is the email that was typed.
        None => Actor::Person {
            id: Uuid::nil(),
            email: o.email.clone(),
        },
    };
    let ctx = Context {
        actor,
        address: o.address.clone(),
    };
    let mut detail = json!({ "method": method_name(o.method) });
    if let Some(f) = o.failure {
        detail["reason"] = json!(failure_name(f));
    }
    if let Some(ua) = &o.user_agent {
        detail["user_agent"] = json!(ua.chars().take(200).collect::<String>());
    }
    record_for_person(core, &ctx, &o.email, o.person_id, action, Some(detail)).await
}
