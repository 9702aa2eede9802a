//! Operator writes (`tern admin …`): organisations, members, business numbers and custom
//! contact fields (API keys: [`crate::keys`]). The CLI parses and checks its arguments and prints the result;
//! the writes, and the plan limits they must keep (checked atomically), are here.

use tern_domain::auth::Role;
use tern_domain::crypto::MasterKey;
use tern_domain::error::ConflictReason;
use tern_domain::number::NumberStatus;
use tern_domain::plan::{Effective, Entitlement, Overrides, SubscriptionStatus};
use tern_domain::{Problem, new_id, time::now_ms};
use tern_store::{ContactField, Db, Member, Org, PhoneNumber, StoreError};
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
        live_org_id: None,
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
        &crate::audit::Context::operator(),
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
        mode: tern_domain::auth::Mode::Live,
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
