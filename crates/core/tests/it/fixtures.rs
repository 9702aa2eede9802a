//! A database with one organisation, a member and (optionally) a number, built through the
//! core's own operator writes.

use std::future::Future;

use serde_json::json;
use tern_core::admin::{self, NewNumber};
use tern_core::{Core, Principal};
use tern_domain::auth::{Permission, Role};
use tern_domain::crypto::MasterKey;
use tern_domain::plan::Overrides;
use tern_store::{Db, Org};

pub const PNID: &str = "106540352242922";
pub const WABA: &str = "102290129340398";

/// Runs `f` on a fresh SQLite database and on a fresh PostgreSQL schema.
pub async fn on_both<F, Fut>(f: F)
where
    F: Fn(Db) -> Fut,
    Fut: Future<Output = ()>,
{
    let (db, _dir) = tern_store::testkit::fresh_sqlite().await;
    f(db).await;
    let db = tern_store::testkit::fresh_postgres().await;
    f(db.clone()).await;
    db.drop_test_schema().await.unwrap();
}

pub fn key() -> MasterKey {
    MasterKey::from_bytes([7; 32])
}

pub fn core(db: &Db) -> Core {
    let cloud = tern_cloudapi::CloudApiClient::new(Default::default()).unwrap();
    Core::new(db.clone(), key(), cloud)
}

/// An organisation whose count limits and prices are the given overrides.
pub async fn org(db: &Db, overrides: serde_json::Value) -> Org {
    let org = admin::create_org(db, "Acme", "growth").await.unwrap();
    let mut o = Overrides::from_json(&org.overrides);
    let extra = Overrides::from_json(&overrides);
    o.limits.extend(extra.limits);
    o.prices_minor.extend(extra.prices_minor);
    let mut org = org;
    org.overrides = o.to_json();
    admin::update_org(db, org, None).await.unwrap()
}

pub async fn number(db: &Db, org: &Org, pnid: &str) {
    admin::add_number(
        db,
        &key(),
        NewNumber {
            org_id: org.id,
            phone_number_id: pnid,
            display_phone_number: format!("+1555{}", &pnid[pnid.len() - 7..]),
            waba_id: WABA,
            access_token: "token",
            throughput_mps: 80,
        },
    )
    .await
    .unwrap();
}

/// A caller with every permission.
pub fn principal(org: &Org) -> Principal {
    Principal {
        org_id: org.id,
        key_id: tern_domain::new_id(),
        role: Role::Owner,
        permissions: Permission::ALL.to_vec(),
        overrides: Overrides::from_json(&org.overrides),
        org: org.clone(),
    }
}

pub fn limit(entitlement: &str, n: u64) -> serde_json::Value {
    json!({"limits": {entitlement: n}})
}

/// An approved utility template `hello` (en_US) of the organisation's WABA.
pub async fn approved_template(db: &Db, org: &Org, components: serde_json::Value) {
    let now = tern_domain::time::now_ms();
    db.insert_template(&tern_store::Template {
        id: tern_domain::new_id(),
        org_id: org.id,
        waba_id: WABA.into(),
        name: "hello".into(),
        language: "en_US".into(),
        category: "utility".parse().unwrap(),
        status: "approved".parse().unwrap(),
        components,
        rejection_reason: None,
        network_id: Some("1".into()),
        created_at: now,
        updated_at: now,
    })
    .await
    .unwrap();
}
