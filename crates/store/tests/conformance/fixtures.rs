//! Builders for rows used across the suite.

use tern_store::{ApiKey, Db, Member, Org, PhoneNumber};
use uuid::Uuid;

/// A fixed "now" (epoch ms) so assertions are exact.
pub const T0: i64 = 1_767_225_600_000;

pub fn org() -> Org {
    Org {
        id: Uuid::now_v7(),
        name: "Acme".into(),
        plan: "growth".into(),
        subscription_status: tern_domain::plan::SubscriptionStatus::Active,
        wallet_balance_minor: 0,
        wallet_currency: "EUR".into(),
        overrides: serde_json::json!({}),
        billing_period_start: T0,
        two_factor_required: false,
        created_at: T0,
        updated_at: T0,
        live_org_id: None,
    }
}

pub async fn insert_org(db: &Db) -> Org {
    let org = org();
    db.insert_org(&org).await.unwrap();
    org
}

pub fn member(org_id: Uuid, email: &str, role: &str) -> Member {
    Member {
        id: Uuid::now_v7(),
        org_id,
        email: email.into(),
        role: role.parse().unwrap(),
        created_at: T0,
    }
}

pub async fn insert_member(db: &Db, org_id: Uuid, role: &str) -> Member {
    let email = format!("{}@example.com", Uuid::new_v4().simple());
    db.insert_member(&member(org_id, &email, role))
        .await
        .unwrap()
}

/// A key with a random 32-byte hash.
pub fn api_key(org_id: Uuid, member_id: Uuid) -> ApiKey {
    let mut hash = Vec::with_capacity(32);
    hash.extend_from_slice(Uuid::new_v4().as_bytes());
    hash.extend_from_slice(Uuid::new_v4().as_bytes());
    ApiKey {
        id: Uuid::now_v7(),
        org_id,
        member_id,
        name: "ci".into(),
        prefix: "tern_AbC1".into(),
        key_hash: hash,
        permissions: vec!["messages.send".into(), "messages.read".into()],
        created_at: T0,
        last_used_at: None,
        revoked_at: None,
        replaced_by: None,
        mode: tern_domain::auth::Mode::Live,
    }
}

/// An organisation, an owner and one active key, all inserted.
pub async fn org_with_key(db: &Db) -> (Org, Member, ApiKey) {
    let org = insert_org(db).await;
    let member = insert_member(db, org.id, "owner").await;
    let key = api_key(org.id, member.id);
    db.insert_api_key(&key).await.unwrap();
    (org, member, key)
}

pub fn phone_number(org_id: Uuid, id: &str) -> PhoneNumber {
    PhoneNumber {
        id: id.into(),
        org_id,
        display_phone_number: format!("+1555{id}"),
        waba_id: "waba-1".into(),
        access_token_enc: vec![1, 2, 3, 0, 255],
        status: tern_domain::number::NumberStatus::Connected,
        throughput_mps: 80,
        created_at: T0,
        updated_at: T0,
        mode: tern_domain::auth::Mode::Live,
    }
}

/// Creates the organisation's contact `wa_id` at `at` (no name, no fields).
pub async fn insert_contact(db: &Db, org_id: Uuid, wa_id: &str, at: i64) -> tern_store::Contact {
    let (contact, created) = db
        .upsert_contact_by_wa_id(org_id, wa_id, None, None, Uuid::now_v7(), at)
        .await
        .unwrap();
    assert!(created, "contact {wa_id} already existed");
    contact
}

/// A JSON object literal as a `serde_json::Map` (custom-field patches).
pub fn obj(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}
