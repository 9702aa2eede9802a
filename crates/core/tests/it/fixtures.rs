//! The core tests' shorthands over the test kit's seed (`tern_core::testkit`): an
//! organisation, a number, an approved template, a caller (for every module of this binary;
//! not each uses every one).
#![allow(dead_code)]

use serde_json::json;
use tern_core::admin;
use tern_core::testkit::{self, NumberSeed, Seed};
use tern_core::{Core, Principal};
use tern_domain::auth::Role;
use tern_domain::crypto::MasterKey;
use tern_store::{Db, Org};

pub const PNID: &str = "106540352242922";
pub const WABA: &str = testkit::WABA;

pub fn key() -> MasterKey {
    MasterKey::from_bytes([7; 32])
}

pub fn core(db: &Db) -> Core {
    let cloud = tern_cloudapi::CloudApiClient::new(Default::default()).unwrap();
    Core::new(db.clone(), key(), cloud)
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

/// An approved utility template `hello` (en_US) of the organisation's WABA, the network's
/// template 1.
pub async fn approved_template(db: &Db, org: &Org, components: serde_json::Value) {
    testkit::approved_template(db, org.id, WABA, "hello", "en_US", "1", components).await;
}

/// A `messages` notification of the number `PNID` (WABA `WABA`) with these contacts,
/// messages and statuses, shaped as the network sends it.
pub fn notification(
    contacts: serde_json::Value,
    messages: serde_json::Value,
    statuses: serde_json::Value,
) -> serde_json::Value {
    json!({"object": "whatsapp_business_account", "entry": [{"id": WABA, "changes": [{
        "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": PNID},
            "contacts": contacts, "messages": messages, "statuses": statuses}}]}]})
}

/// Stores a (signature-checked) network notification as the webhook route does, then
/// applies every stored batch with the inbox use case as the inbox worker does. No item of
/// it may be refused.
pub async fn deliver(db: &Db, body: &serde_json::Value) -> tern_core::inbox::Report {
    let bytes = serde_json::to_vec(body).unwrap();
    tern_core::inbox::receive(
        &tern_store::InboxQueue::start(db.clone()),
        bytes,
        "sha256=checked".to_owned(),
    )
    .await
    .unwrap();
    let mut report = tern_core::inbox::Report::default();
    let now = tern_domain::time::now_ms();
    for batch in db.claim_inbox(100, 60_000, now).await.unwrap() {
        report.add(&tern_core::inbox::apply(db, &batch.body).await.unwrap());
        db.mark_inbox_processed(batch.id, now).await.unwrap();
    }
    assert_eq!(report.failed, [], "{report:?}");
    report
}

/// A webhook subscription of the organisation to `types` (its owner's key).
pub async fn subscribe(db: &Db, org: &Org, types: &[&str]) {
    let m = admin::add_member(db, org.id, "owner@acme.test", Role::Owner)
        .await
        .unwrap();
    let k = tern_core::keys::create(
        db,
        &test_master_key(),
        &tern_core::audit::Context::operator(),
        org.id,
        tern_core::keys::NewKey {
            member_id: m.id,
            name: "hooks",
            preset: Some(tern_domain::auth::Preset::ReadOnly),
            permissions: &[],
            mode: tern_domain::auth::Mode::Live,
        },
    )
    .await
    .unwrap();
    db.insert_webhook_subscription(&tern_store::NewSubscription {
        id: tern_domain::new_id(),
        org_id: org.id,
        api_key_id: k.key.id,
        url: "https://hooks.example.com/tern".into(),
        event_types: types.iter().map(|t| t.to_string()).collect(),
        secret_enc: vec![1, 2, 3],
        enabled: true,
        description: None,
        created_at: tern_domain::time::now_ms(),
    })
    .await
    .unwrap();
}

/// The events written since the last call, oldest first: `(type, data)`. Each is taken
/// once (its delivery is claimed far ahead, so a later call does not see it again).
pub async fn events(db: &Db) -> Vec<(String, serde_json::Value)> {
    const YEAR: i64 = 365 * 24 * 3_600_000;
    db.fan_out_events(10_000).await.unwrap();
    let later = tern_domain::time::now_ms() + YEAR;
    db.claim_webhook_deliveries("tests", later, YEAR, 10_000, 10_000)
        .await
        .unwrap()
        .into_iter()
        .map(|j| {
            let body: serde_json::Value = serde_json::from_str(&j.payload).unwrap();
            (j.event_type, body["data"].clone())
        })
        .collect()
}

/// The types of [`events`].
pub async fn event_types(db: &Db) -> Vec<String> {
    events(db).await.into_iter().map(|(t, _)| t).collect()
}

/// An outbound text to `phone`, `sent` at `t0` with `wamid` (or without one: the send's
/// answer was lost).
pub async fn sent_message(
    db: &Db,
    org: &Org,
    phone: &str,
    wamid: Option<&str>,
    t0: i64,
) -> tern_store::Message {
    let (contact, _) = db
        .upsert_contact_by_wa_id(org.id, phone, None, None, tern_domain::new_id(), t0)
        .await
        .unwrap();
    let conv = db
        .get_or_create_conversation(org.id, contact.id, PNID, tern_domain::new_id(), t0)
        .await
        .unwrap();
    let m = tern_store::Message {
        id: tern_domain::new_id(),
        org_id: org.id,
        conversation_id: conv.id,
        contact_id: contact.id,
        phone_number_id: PNID.into(),
        direction: tern_domain::message::Direction::Outbound,
        r#type: "text".into(),
        status: tern_domain::message::Status::Sent,
        template_name: None,
        template_language: None,
        text: Some("hi".into()),
        media_id: None,
        wamid: wamid.map(str::to_string),
        request: serde_json::json!({}),
        campaign_id: None,
        created_at: t0,
        sent_at: Some(t0),
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: t0,
        content: None,
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    };
    assert!(db.insert_message(&m).await.unwrap());
    m
}

/// A master key for keys made in this test (a test key's test space seals its token).
fn test_master_key() -> tern_domain::crypto::MasterKey {
    tern_domain::crypto::MasterKey::from_bytes([7; 32])
}
