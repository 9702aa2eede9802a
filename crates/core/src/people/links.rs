//! Invitations and one-time links. A link's token is shown once (the CLI prints it, the app
//! shows it to the inviter); only its SHA-256 is stored. Issuing a link voids the person's
//! earlier unused links. An invite or reset link is used up only when its password is set
//! (a refused password leaves it valid), atomically: a second use finds it used.

use serde_json::json;
use tern_domain::auth::Role;
use tern_domain::error::ConflictReason;
use tern_domain::people::{
    EndReason, LinkPurpose, check_password, new_token, normalise_email, token_hash,
};
use tern_domain::time::now_ms;
use tern_domain::{Problem, new_id};
use tern_store::{Db, Member, Person, PersonLink, StoreError};
use uuid::Uuid;

use super::sign_in::{SignInMethod, SignInOutcome};
use super::{
    Client, PeopleSettings, SIGN_IN_LINK_MS, Started, forbidden, new_session, password, rank,
};
use crate::audit::{self, Context, Entry, TARGET_MEMBER};
use crate::{Core, Result};

/// Who invites: the operator (`tern admin`) or a member of the organisation with a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inviter {
    Operator,
    Member { role: Role },
}

/// A new membership, and the invite link's token when the person has no password yet.
#[derive(Clone)]
pub struct Invited {
    pub member: Member,
    pub link: Option<String>,
}

impl std::fmt::Debug for Invited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invited")
            .field("member", &self.member)
            .field("link", &self.link.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// What a valid link is for (the page shown before it is used).
#[derive(Debug, Clone)]
pub struct LinkInfo {
    pub person: Person,
    pub purpose: LinkPurpose,
    /// The inviting organisation's name (invites).
    pub org_name: Option<String>,
}

fn valid_email(email: &str) -> bool {
    email.len() <= 254
        && !email.contains(char::is_whitespace)
        && email.split_once('@').is_some_and(|(a, b)| {
            !a.is_empty() && b.contains('.') && !b.starts_with('.') && !b.contains('@')
        })
}

/// Adds `email` to the organisation with `role` (see [`invite_in`]).
pub async fn invite(
    core: &Core,
    ctx: &Context,
    org_id: Uuid,
    email: &str,
    role: Role,
    by: Inviter,
) -> Result<Invited> {
    invite_in(&core.db, &core.people, ctx, org_id, email, role, by).await
}

/// [`invite`] on a database and settings (`tern admin` has no running core). An admin
/// cannot invite an owner; nobody grants a role above their own; a developer cannot invite.
/// Creates the person if missing; a removed member is made a member again. Audited as
/// `member.invited` once the membership exists (it is made in several statements).
pub async fn invite_in(
    db: &Db,
    settings: &PeopleSettings,
    ctx: &Context,
    org_id: Uuid,
    email: &str,
    role: Role,
    by: Inviter,
) -> Result<Invited> {
    if let Inviter::Member { role: own } = by {
        if own == Role::Developer {
            return Err(forbidden("Only owners and admins can invite people."));
        }
        if rank(role) > rank(own) {
            return Err(forbidden(&format!(
                "An {own} cannot invite someone as {role}: nobody grants a role above their own."
            )));
        }
    }
    let email = normalise_email(email);
    if !valid_email(&email) {
        return Err(Problem::field(
            "email",
            format!("{email:?} is not an email address."),
        ));
    }
    let org = crate::admin::get_org(db, org_id).await?;
    let now = now_ms();
    let person = db.ensure_person(&email, now).await?;
    let m = Member {
        id: new_id(),
        org_id,
        email: email.clone(),
        role,
        created_at: now,
    };
    let member = match db.insert_member(&m).await {
        Ok(m) => m,
        Err(StoreError::Conflict { .. }) => db
            .revive_member(org_id, &email, role, now)
            .await?
            .ok_or_else(|| {
                Problem::conflict(ConflictReason::AlreadyExists)
                    .with_message(format!("{email} is already a member of this organisation"))
            })?,
        Err(e) => return Err(e.into()),
    };
    let link = if person.has_password() {
        None
    } else {
        Some(
            issue(
                db,
                person.id,
                LinkPurpose::Invite,
                Some(org.id),
                settings.invite_ms,
                now,
            )
            .await?,
        )
    };
    let entry = Entry::new(Some(org_id), audit::MEMBER_INVITED)
        .target(TARGET_MEMBER, member.id)
        .detail(json!({
            "email": member.email,
            "role": member.role.as_str(),
            "invite_link": link.is_some(),
        }));
    audit::record(db, ctx, entry).await?;
    Ok(Invited { member, link })
}

async fn issue(
    db: &Db,
    person_id: Uuid,
    purpose: LinkPurpose,
    org_id: Option<Uuid>,
    valid_ms: i64,
    now: i64,
) -> Result<String> {
    let token = new_token();
    db.insert_link(&PersonLink {
        token_hash: token_hash(&token),
        person_id,
        purpose,
        org_id,
        created_at: now,
        expires_at: now + valid_ms,
        used_at: None,
    })
    .await?;
    Ok(token)
}

async fn person_by_email(db: &Db, email: &str) -> Result<Person> {
    db.find_person_by_email(email).await?.ok_or_else(|| {
        Problem::not_found().with_message(format!(
            "nobody with the email {} has an account",
            normalise_email(email)
        ))
    })
}

/// Operator recovery: a new one-time `reset` link (valid `invite_ms`); two-factor is turned
/// off and every session ends. Audited as `member.reset` in each of the person's
/// organisations (target: their member there), in the same transaction.
pub async fn reset(core: &Core, ctx: &Context, email: &str) -> Result<String> {
    reset_in(&core.db, &core.people, ctx, email).await
}

/// [`reset`] on a database and settings (`tern admin`).
pub async fn reset_in(
    db: &Db,
    settings: &PeopleSettings,
    ctx: &Context,
    email: &str,
) -> Result<String> {
    let person = person_by_email(db, email).await?;
    let memberships = db.memberships_of(&person.email).await?;
    let now = now_ms();
    let token = new_token();
    let mut tx = db.begin().await?;
    tx.clear_two_factor(person.id, now).await?;
    tx.end_person_sessions(person.id, None, EndReason::Reset, now)
        .await?;
    tx.insert_link(&PersonLink {
        token_hash: token_hash(&token),
        person_id: person.id,
        purpose: LinkPurpose::Reset,
        org_id: None,
        created_at: now,
        expires_at: now + settings.invite_ms,
        used_at: None,
    })
    .await?;
    let detail = json!({ "email": person.email });
    if memberships.is_empty() {
        // A person in no organisation: the entry is installation-wide.
        let entry = Entry::new(None, audit::MEMBER_RESET)
            .target(super::TARGET_PERSON, person.id)
            .detail(detail.clone());
        audit::record_in(&mut tx, ctx, entry).await?;
    }
    for m in &memberships {
        let entry = Entry::new(Some(m.member.org_id), audit::MEMBER_RESET)
            .target(TARGET_MEMBER, m.member.id)
            .detail(detail.clone());
        audit::record_in(&mut tx, ctx, entry).await?;
    }
    tx.commit().await?;
    Ok(token)
}

/// A one-time link that signs the person in directly, valid 15 minutes (`tern demo`).
pub async fn sign_in_link(core: &Core, email: &str) -> Result<String> {
    sign_in_link_in(&core.db, email).await
}

/// [`sign_in_link`] on a database.
pub async fn sign_in_link_in(db: &Db, email: &str) -> Result<String> {
    let person = person_by_email(db, email).await?;
    issue(
        db,
        person.id,
        LinkPurpose::SignIn,
        None,
        SIGN_IN_LINK_MS,
        now_ms(),
    )
    .await
}

/// The link of `token` if it is valid (unused, unexpired).
pub async fn link_info(core: &Core, token: &str) -> Result<Option<LinkInfo>> {
    let Some(link) = core
        .db
        .find_valid_link(&token_hash(token), now_ms())
        .await?
    else {
        return Ok(None);
    };
    let Some(person) = core.db.get_person(link.person_id).await? else {
        return Ok(None);
    };
    let org_name = match link.org_id {
        Some(id) => core.db.get_org(id).await?.map(|o| o.name),
        None => None,
    };
    Ok(Some(LinkInfo {
        person,
        purpose: link.purpose,
        org_name,
    }))
}

fn link_gone() -> Problem {
    Problem::not_found()
        .with_message("This link is not valid any more: it was used, replaced by a newer one or expired. Ask for a new one.")
}

/// Uses a link: for an invite or a reset, sets the name (when given) and the password
/// (which must pass the password rule), then starts a session; for a sign-in link, starts
/// a session.
pub async fn use_link(
    core: &Core,
    token: &str,
    name: Option<&str>,
    password: Option<&str>,
    client: &Client,
) -> Result<Started> {
    let now = now_ms();
    let hash = token_hash(token);
    let link = core
        .db
        .find_valid_link(&hash, now)
        .await?
        .ok_or_else(link_gone)?;
    let person = core
        .db
        .get_person(link.person_id)
        .await?
        .ok_or_else(link_gone)?;
    let name = match name {
        Some(n) => super::check_name(n)?,
        None => None,
    };
    let new_hash = match link.purpose {
        LinkPurpose::SignIn => None,
        LinkPurpose::Invite | LinkPurpose::Reset => {
            let pw = password.unwrap_or_default();
            check_password(pw, &person.email)
                .map_err(|p| Problem::field("password", p.to_string()))?;
            Some(password::hash(&core.api_load, pw).await?)
        }
    };
    let (token, session) = new_session(person.id, link.org_id, client, now);
    let mut tx = core.db.begin().await?;
    // The conditional update is what makes the link single-use; the reads above only
    // gave the early answers.
    if tx.use_link(&hash, now).await?.is_none() {
        return Err(link_gone());
    }
    if let Some(h) = &new_hash {
        tx.set_password(person.id, name, h, now).await?;
    }
    tx.insert_app_session(&session).await?;
    tx.commit().await?;
    Ok(Started {
        token,
        session,
        outcome: SignInOutcome {
            at: now,
            email: person.email,
            person_id: Some(person.id),
            method: SignInMethod::Link,
            failure: None,
            address: client.address.clone(),
            user_agent: client.user_agent.clone(),
        },
    })
}
