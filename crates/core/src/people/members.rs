//! An organisation's members: the list, role changes and removal. The last owner can be
//! neither demoted nor removed; an admin cannot touch an owner nor make one; nobody grants a
//! role above their own. Removal keeps the member row (see `tern_store` memberships: its
//! keys are revoked) and ends the person's sessions when no membership is left; otherwise
//! their session view simply stops showing the organisation.

use serde_json::json;
use tern_domain::Problem;
use tern_domain::auth::Role;
use tern_domain::error::ConflictReason;
use tern_domain::people::EndReason;
use tern_domain::time::now_ms;
use tern_store::{Member, Tx};
use uuid::Uuid;

use super::{end_all, forbidden, rank};
use crate::audit::{self, Context, Entry, TARGET_MEMBER};
use crate::{Core, Result};

/// A row of the members page.
#[derive(Debug, Clone)]
pub struct MemberView {
    pub member: Member,
    pub person_name: String,
    pub two_factor: bool,
    pub has_password: bool,
}

pub async fn members(core: &Core, org_id: Uuid) -> Result<Vec<MemberView>> {
    Ok(core
        .db
        .members_with_people(org_id)
        .await?
        .into_iter()
        .map(|r| MemberView {
            member: r.member,
            person_name: r.person_name.unwrap_or_default(),
            two_factor: r.two_factor,
            has_password: r.has_password,
        })
        .collect())
}

fn last_owner() -> Problem {
    Problem::conflict(ConflictReason::LastOwner)
        .with_message("This is the organisation's last owner: make someone else owner first.")
}

/// The target member (locked) after the checks every change shares.
async fn target(tx: &mut Tx, org_id: Uuid, by_role: Role, member_id: Uuid) -> Result<Member> {
    if by_role == Role::Developer {
        return Err(forbidden("Only owners and admins manage members."));
    }
    let m = tx
        .lock_member(org_id, member_id)
        .await?
        .ok_or_else(|| Problem::not_found().with_message("There is no such member."))?;
    if m.role == Role::Owner && by_role != Role::Owner {
        return Err(forbidden("Only an owner can change or remove an owner."));
    }
    Ok(m)
}

/// Changes a member's role (audited as `member.role_changed` in the same transaction).
pub async fn change_role(
    core: &Core,
    ctx: &Context,
    org_id: Uuid,
    by_role: Role,
    member_id: Uuid,
    role: Role,
) -> Result<Member> {
    if rank(role) > rank(by_role) {
        return Err(forbidden(&format!(
            "An {by_role} cannot make someone {role}: nobody grants a role above their own."
        )));
    }
    let mut tx = core.db.begin().await?;
    // Owners first, then the member: every writer locks in that order.
    let owners = tx.lock_owners(org_id).await?;
    let m = target(&mut tx, org_id, by_role, member_id).await?;
    if m.role == Role::Owner && role != Role::Owner && owners.len() <= 1 {
        return Err(last_owner());
    }
    tx.set_member_role(m.id, role).await?;
    let entry = Entry::new(Some(org_id), audit::MEMBER_ROLE_CHANGED)
        .target(TARGET_MEMBER, m.id)
        .detail(json!({ "email": m.email, "from": m.role.as_str(), "to": role.as_str() }));
    audit::record_in(&mut tx, ctx, entry).await?;
    tx.commit().await?;
    Ok(Member { role, ..m })
}

/// Removes a member (see the module's comment), audited as `member.removed` in the same
/// transaction.
pub async fn remove_member(
    core: &Core,
    ctx: &Context,
    org_id: Uuid,
    by_role: Role,
    member_id: Uuid,
) -> Result<()> {
    let now = now_ms();
    let mut tx = core.db.begin().await?;
    let owners = tx.lock_owners(org_id).await?;
    let m = target(&mut tx, org_id, by_role, member_id).await?;
    if m.role == Role::Owner && owners.len() <= 1 {
        return Err(last_owner());
    }
    tx.remove_member(m.id, now).await?;
    // The removal also revoked the member's keys (see tern_store memberships).
    let entry = Entry::new(Some(org_id), audit::MEMBER_REMOVED)
        .target(TARGET_MEMBER, m.id)
        .detail(json!({ "email": m.email, "role": m.role.as_str() }));
    audit::record_in(&mut tx, ctx, entry).await?;
    let left = tx.count_memberships(&m.email).await?;
    tx.commit().await?;
    if left == 0
        && let Some(p) = core.db.find_person_by_email(&m.email).await?
    {
        end_all(&core.db, p.id, EndReason::Removed, now).await?;
    }
    Ok(())
}
