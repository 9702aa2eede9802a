//! Operator writes (`tern admin …`): organisations, members, business numbers, API keys and
//! custom contact fields. The CLI parses and checks its arguments and prints the result;
//! the writes, and the plan limits they must keep (checked atomically), are here.

use tern_domain::auth::{self, Preset, Role};
use tern_domain::crypto::MasterKey;
use tern_domain::error::ConflictReason;
use tern_domain::number::NumberStatus;
use tern_domain::plan::{self, Effective, Entitlement, Feature, Overrides, SubscriptionStatus};
use tern_domain::{Problem, new_id, time::now_ms};
use tern_store::{ApiKey, ContactField, Db, Member, Org, PhoneNumber, StoreError};
use uuid::Uuid;

use crate::{Result, limits, numbers};

/// An organisation, or a 404 naming it.
pub async fn get_org(db: &Db, id: Uuid) -> Result<Org> {
    db.get_org(id).await?.ok_or_else(|| {
        Problem::not_found().with_message(format!("organisation {id} does not exist"))
    })
}

/// Creates an organisation on `plan` (active, empty wallet, billing period from now).
pub async fn create_org(db: &Db, name: &str, plan: &str) -> Result<Org> {
    let now = now_ms();
    let org = Org {
        id: new_id(),
        name: name.to_string(),
        plan: plan.to_string(),
        subscription_status: SubscriptionStatus::Active,
        wallet_balance_minor: 0,
        wallet_currency: "USD".to_string(),
        overrides: Overrides::default().to_json(),
        billing_period_start: now,
        two_factor_required: false,
        created_at: now,
        updated_at: now,
    };
    db.insert_org(&org).await?;
    Ok(org)
}

/// Stores an edited organisation, and moves its wallet to `wallet_target` through the
/// ledger (an `adjustment` of the difference, so a concurrent debit stays accounted for).
pub async fn update_org(db: &Db, mut org: Org, wallet_target: Option<i64>) -> Result<Org> {
    org.updated_at = now_ms();
    db.update_org(&org).await?;
    if let Some(target) = wallet_target {
        let delta = target - org.wallet_balance_minor;
        if delta != 0 {
            org.wallet_balance_minor = db
                .adjust_wallet(org.id, delta, "adjustment", None, org.updated_at)
                .await?;
        }
    }
    Ok(org)
}

/// Adds a member as the operator: [`crate::people::invite_in`] with the default durations
/// (the person is created when missing; an invite link is made when they have no password,
/// which this caller does not show: `tern admin member add` calls `invite_in` itself).
pub async fn add_member(db: &Db, org_id: Uuid, email: &str, role: Role) -> Result<Member> {
    let settings = crate::people::PeopleSettings::default();
    let invited = crate::people::invite_in(
        db,
        &settings,
        org_id,
        email,
        role,
        crate::people::Inviter::Operator,
    )
    .await?;
    Ok(invited.member)
}

/// A business number to add (arguments checked by the caller).
pub struct NewNumber<'a> {
    pub org_id: Uuid,
    pub phone_number_id: &'a str,
    /// E.164.
    pub display_phone_number: String,
    pub waba_id: &'a str,
    pub access_token: &'a str,
    pub throughput_mps: i64,
}

fn effective_check(org: &Org, f: impl FnOnce(&Effective<'_>) -> Result<()>) -> Result<()> {
    let o = Overrides::from_json(&org.overrides);
    f(&Effective::new(&org.plan, &o))
}

/// Adds a connected number, within the plan's number limit.
pub async fn add_number(db: &Db, key: &MasterKey, n: NewNumber<'_>) -> Result<PhoneNumber> {
    let org = get_org(db, n.org_id).await?;
    let now = now_ms();
    let number = PhoneNumber {
        id: n.phone_number_id.to_string(),
        org_id: n.org_id,
        display_phone_number: n.display_phone_number,
        waba_id: n.waba_id.to_string(),
        access_token_enc: numbers::seal_token(key, n.access_token),
        status: NumberStatus::Connected,
        throughput_mps: n.throughput_mps,
        created_at: now,
        updated_at: now,
    };
    let mut tx = db.begin().await?;
    let o = Overrides::from_json(&org.overrides);
    limits::check_one_more(
        &mut tx,
        org.id,
        &Effective::new(&org.plan, &o),
        Entitlement::PhoneNumbers,
    )
    .await?;
    match tx.insert_phone_number(&number).await {
        Err(StoreError::Conflict { .. }) => {
            return Err(
                Problem::conflict(ConflictReason::AlreadyExists).with_message(format!(
                    "phone number id {} is already registered",
                    number.id
                )),
            );
        }
        r => r?,
    }
    tx.commit().await?;
    Ok(number)
}

/// Changes a number's status and/or throughput.
pub async fn update_number(
    db: &Db,
    pnid: &str,
    status: Option<NumberStatus>,
    mps: Option<i64>,
) -> Result<PhoneNumber> {
    match db.update_phone_number(pnid, status, mps, now_ms()).await {
        Err(StoreError::NotFound) => {
            Err(Problem::not_found().with_message(format!("phone number id {pnid} does not exist")))
        }
        r => Ok(r?),
    }
}

/// A new key with its plaintext (shown once).
pub struct CreatedKey {
    pub key: ApiKey,
    pub plaintext: String,
}

/// Creates a key for a member: its permissions are the preset's or the named ones, never
/// more than the member's role allows; within the plan's key limit.
pub async fn create_key(
    db: &Db,
    org_id: Uuid,
    member_id: Uuid,
    name: &str,
    preset: Option<Preset>,
    permissions: &[String],
) -> Result<CreatedKey> {
    let org = get_org(db, org_id).await?;
    let member = db
        .get_member(member_id)
        .await?
        .filter(|m| m.org_id == org_id)
        .ok_or_else(|| {
            Problem::not_found().with_message(format!(
                "member {member_id} is not a member of organisation {org_id}"
            ))
        })?;
    effective_check(&org, |eff| {
        if eff.has_feature(Feature::PublicApi) {
            return Ok(());
        }
        Err(
            Problem::new(tern_domain::ErrorCode::PlanFeatureUnavailable).with_message(format!(
                "the plan {:?} does not include the public API{}",
                org.plan,
                plan::upgrade_plan_for(&org.plan, Feature::PublicApi)
                    .map(|p| format!("; upgrade to {p}"))
                    .unwrap_or_default()
            )),
        )
    })?;
    let role = member.role;
    let perms = auth::resolve_grant(role, preset, permissions)
        .map_err(|e| Problem::permission_denied(&e.to_string()).with_message(e.to_string()))?;
    let new = auth::generate_key();
    let key = ApiKey {
        id: new_id(),
        org_id,
        member_id,
        name: name.to_string(),
        prefix: new.display_prefix,
        key_hash: new.hash.to_vec(),
        permissions: perms.iter().map(|p| p.as_str().to_string()).collect(),
        created_at: now_ms(),
        last_used_at: None,
        revoked_at: None,
        replaced_by: None,
    };
    let mut tx = db.begin().await?;
    let o = Overrides::from_json(&org.overrides);
    limits::check_one_more(
        &mut tx,
        org_id,
        &Effective::new(&org.plan, &o),
        Entitlement::ApiKeys,
    )
    .await?;
    tx.insert_api_key(&key).await?;
    tx.commit().await?;
    Ok(CreatedKey {
        key,
        plaintext: new.plaintext,
    })
}

/// Revokes a key.
pub async fn revoke_key(db: &Db, id: Uuid) -> Result<ApiKey> {
    match db.revoke_api_key(id, now_ms()).await {
        Err(StoreError::NotFound) => {
            Err(Problem::not_found().with_message(format!("API key {id} does not exist")))
        }
        Err(StoreError::Conflict { .. }) => Err(Problem::conflict(ConflictReason::AlreadyRevoked)
            .with_message(format!("API key {id} is already revoked"))),
        r => Ok(r?),
    }
}

/// Replaces a key by a new one with the same name and permissions (the old one is revoked
/// in the same transaction).
pub async fn rotate_key(db: &Db, id: Uuid) -> Result<CreatedKey> {
    let old = db
        .get_api_key(id)
        .await?
        .ok_or_else(|| Problem::not_found().with_message(format!("API key {id} does not exist")))?;
    let revoked = || {
        Problem::conflict(ConflictReason::Revoked)
            .with_message(format!("API key {id} is revoked; create a new key instead"))
    };
    if old.revoked_at.is_some() {
        return Err(revoked());
    }
    let new = auth::generate_key();
    let now = now_ms();
    let key = ApiKey {
        id: new_id(),
        org_id: old.org_id,
        member_id: old.member_id,
        name: old.name.clone(),
        prefix: new.display_prefix,
        key_hash: new.hash.to_vec(),
        permissions: old.permissions.clone(),
        created_at: now,
        last_used_at: None,
        revoked_at: None,
        replaced_by: None,
    };
    match db.rotate_api_key(id, &key, now).await {
        Ok(()) => Ok(CreatedKey {
            key,
            plaintext: new.plaintext,
        }),
        Err(StoreError::NotFound | StoreError::Conflict { .. }) => Err(Problem::conflict(
            ConflictReason::Revoked,
        )
        .with_message(format!(
            "API key {id} was revoked meanwhile; create a new key instead"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Adds a custom contact field (arguments checked by the caller).
pub async fn add_contact_field(
    db: &Db,
    org_id: Uuid,
    key: &str,
    label: &str,
    field_type: &str,
) -> Result<ContactField> {
    get_org(db, org_id).await?;
    let f = ContactField {
        id: new_id(),
        org_id,
        key: key.to_string(),
        label: label.to_string(),
        field_type: field_type.to_string(),
        created_at: now_ms(),
    };
    match db.insert_contact_field(&f).await {
        Err(StoreError::Conflict { .. }) => Err(Problem::conflict(ConflictReason::AlreadyExists)
            .with_message(format!(
                "contact field {key:?} already exists in this organisation"
            ))),
        r => {
            r?;
            Ok(f)
        }
    }
}
