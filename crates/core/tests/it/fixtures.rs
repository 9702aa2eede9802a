//! The core tests' shorthands over the test kit's seed (`tern_core::testkit`): an
//! organisation, a number, an approved template, a caller (for every module of this binary;
//! not each uses every one).
#![allow(dead_code)]

use std::sync::Arc;

use serde_json::json;
use tern_core::testkit::{self, NumberSeed, Seed};
use tern_core::{Core, Principal};
use tern_domain::crypto::MasterKey;
use tern_store::{Db, Org};

pub const PNID: &str = "106540352242922";
pub const WABA: &str = testkit::WABA;

pub fn key() -> MasterKey {
    MasterKey::from_bytes([7; 32])
}

pub fn core(db: &Db) -> Core {
    let cloud = tern_cloudapi::CloudApiClient::new(Default::default()).unwrap();
    Core::new(
        db.clone(),
        key(),
        cloud,
        Arc::new(tokio::sync::Notify::new()),
    )
}

/// An organisation ("Acme", growth) with these overrides.
pub async fn org(db: &Db, overrides: serde_json::Value) -> Org {
    Seed::org("Acme")
        .overrides(&overrides)
        .create(db, &key())
        .await
        .org
}

/// A connected number `pnid` of [`WABA`] for `org`.
pub async fn number(db: &Db, org: &Org, pnid: &str) {
    testkit::add_number(db, &key(), org.id, &NumberSeed::new(pnid)).await;
}

/// A caller with every permission.
pub fn principal(org: &Org) -> Principal {
    testkit::principal(org)
}

pub fn limit(entitlement: &str, n: u64) -> serde_json::Value {
    json!({"limits": {entitlement: n}})
}

/// An approved utility template `hello` (en_US) of the organisation's WABA.
pub async fn approved_template(db: &Db, org: &Org, components: serde_json::Value) {
    testkit::approved_template(db, org.id, WABA, "hello", "en_US", components).await;
}
