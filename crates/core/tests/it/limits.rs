//! Plan count limits hold under concurrency: N creates at `limit - 1` → exactly one passes.

use futures::future::join_all;
use serde_json::json;
use tern_core::admin::{self, NewNumber};
use tern_core::messages::send::{self, Send, Sent};
use tern_core::testkit::Seed;
use tern_core::{campaigns, contacts, templates};
use tern_domain::auth::Preset;
use tern_domain::plan::Entitlement;
use tern_domain::{ErrorCode, Problem};
use tern_store::{ContactRef, Db};

use crate::fixtures::{self, PNID, WABA, limit};

const RACERS: usize = 12;

/// Exactly one of the results is Ok; every other is `plan_limit_reached`.
fn exactly_one<T>(results: Vec<Result<T, Problem>>) {
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let codes: Vec<ErrorCode> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|p| p.code))
        .collect();
    assert_eq!(ok, 1, "refusals: {codes:?}");
    assert!(
        codes.iter().all(|c| *c == ErrorCode::PlanLimitReached),
        "{codes:?}"
    );
}

async fn contacts_at_the_limit_admit_one_creator(db: Db) {
    let org = fixtures::org(&db, limit("contacts", 3)).await;
    let core = fixtures::core(&db);
    let p = fixtures::principal(&org);
    for wa in ["4915550001", "4915550002"] {
        let u = contacts::Upsert {
            key: tern_store::ContactKey::WaId(wa),
            name: None,
            custom_fields: None,
            tags: &[],
        };
        contacts::upsert(&core, &p, u).await.unwrap();
    }
    let was: Vec<String> = (0..RACERS).map(|i| format!("49155510{i:02}")).collect();
    let results = join_all(was.iter().map(|wa| {
        let (core, p) = (core.clone(), p.clone());
        async move {
            let u = contacts::Upsert {
                key: tern_store::ContactKey::WaId(wa),
                name: None,
                custom_fields: None,
                tags: &[],
            };
            contacts::upsert(&core, &p, u).await
        }
    }))
    .await;
    exactly_one(results);
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 3);
    // At the limit an existing contact is still updated.
    let u = contacts::Upsert {
        key: tern_store::ContactKey::WaId("4915550001"),
        name: Some("Ada"),
        custom_fields: None,
        tags: &[],
    };
    let (c, created) = contacts::upsert(&core, &p, u).await.unwrap();
    assert!(!created);
    assert_eq!(c.name.as_deref(), Some("Ada"));
}

async fn templates_at_the_limit_admit_one_creator(db: Db) {
    let org = fixtures::org(&db, limit("templates", 2)).await;
    let core = fixtures::core(&db);
    let p = fixtures::principal(&org);
    let draft = |name: String| templates::NewTemplate {
        waba_id: WABA.into(),
        name,
        language: "en_US".into(),
        category: "utility".parse().unwrap(),
        components: json!([{"type": "BODY", "text": "Hello"}]),
    };
    templates::create(&core, &p, draft("first".into()))
        .await
        .unwrap();
    let results = join_all((0..RACERS).map(|i| {
        let (core, p) = (core.clone(), p.clone());
        let t = draft(format!("racer_{i}"));
        async move { templates::create(&core, &p, t).await }
    }))
    .await;
    exactly_one(results);
    assert_eq!(db.count_templates(org.id).await.unwrap(), 2);
}

async fn numbers_at_the_limit_admit_one_creator(db: Db) {
    let org = fixtures::org(&db, limit("phone_numbers", 2)).await;
    fixtures::number(&db, &org, PNID).await;
    let ids: Vec<String> = (0..RACERS).map(|i| format!("20000000000{i:04}")).collect();
    let results = join_all(ids.iter().map(|id| {
        let db = db.clone();
        async move {
            let n = NewNumber {
                org_id: org.id,
                phone_number_id: id,
                display_phone_number: format!("+1555{}", &id[id.len() - 7..]),
                waba_id: WABA,
                access_token: "t",
                throughput_mps: 80,
            };
            admin::add_number(&db, &fixtures::key(), n).await
        }
    }))
    .await;
    exactly_one(results);
    assert_eq!(db.count_phone_numbers(org.id).await.unwrap(), 2);
}

async fn keys_at_the_limit_admit_one_creator(db: Db) {
    let seeded = Seed::org("Acme")
        .limit(Entitlement::ApiKeys, 2)
        .key("a@acme.test", Preset::ReadOnly)
        .create(&db, &fixtures::key())
        .await;
    let (org, m) = (&seeded.org, seeded.member("a@acme.test"));
    let preset = Some(Preset::ReadOnly);
    let results = join_all((0..RACERS).map(|i| {
        let db = db.clone();
        async move {
            let name = format!("k{i}");
            let new = tern_core::keys::NewKey {
                member_id: m.id,
                name: &name,
                preset,
                permissions: &[],
                mode: tern_domain::auth::Mode::Live,
            };
            let ctx = tern_core::audit::Context::operator();
            tern_core::keys::create(&db, &test_master_key(), &ctx, org.id, new).await
        }
    }))
    .await;
    exactly_one(results);
    assert_eq!(db.count_active_api_keys(org.id).await.unwrap(), 2);
}

/// Sends to new phone numbers create contacts: the acceptance keeps the contact limit too.
async fn sends_to_new_recipients_at_the_limit_admit_one(db: Db) {
    let org = Seed::org("Acme")
        .overrides(&json!({"limits": {"contacts": 1}, "prices_minor": {"utility": 0}}))
        .number(PNID)
        .approved_template("hello", json!([{"type": "BODY", "text": "Hello"}]))
        .create(&db, &fixtures::key())
        .await
        .org;
    let core = fixtures::core(&db);
    let p = fixtures::principal(&org);
    let results = join_all((0..RACERS).map(|i| {
        let (core, p, db) = (core.clone(), p.clone(), db.clone());
        async move {
            let to = format!("+1415556{i:04}");
            let body = json!({"to": to, "type": "template",
                              "template": {"name": "hello", "language": "en_US"}});
            let request = tern_domain::send::parse_send(&body).unwrap();
            let wa_id = to.trim_start_matches('+').to_string();
            let options = db
                .send_options(org.id, ContactRef::WaId(&wa_id))
                .await
                .unwrap();
            let key = format!("race-key-{i:04}");
            let s = Send {
                request,
                options: &options,
                idempotency_key: &key,
                fingerprint: &tern_domain::send::fingerprint(&body),
                now: tern_domain::time::now_ms(),
                request_id: None,
            };
            send::accept(&core, &p, s)
                .await
                .map(|sent| matches!(sent, Sent::Accepted(_)))
        }
    }))
    .await;
    exactly_one(results);
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
}

async fn campaigns_at_the_limit_admit_one_creator(db: Db) {
    let org = fixtures::org(&db, limit("campaigns", 2)).await;
    fixtures::number(&db, &org, PNID).await;
    let core = fixtures::core(&db);
    let p = fixtures::principal(&org);
    let body = |name: String| {
        json!({"name": name, "template": {"name": "promo", "language": "en_US"},
               "audience": {"all_contacts": true}})
    };
    let now = tern_domain::time::now_ms();
    campaigns::create(&core, &p, &body("first".into()), now)
        .await
        .unwrap();
    let results = join_all((0..RACERS).map(|i| {
        let (core, p) = (core.clone(), p.clone());
        let b = body(format!("racer {i}"));
        async move { campaigns::create(&core, &p, &b, now).await }
    }))
    .await;
    exactly_one(results);
    assert_eq!(db.count_campaigns(org.id).await.unwrap(), 2);
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    contacts_at_the_limit_admit_one_creator,
    templates_at_the_limit_admit_one_creator,
    numbers_at_the_limit_admit_one_creator,
    keys_at_the_limit_admit_one_creator,
    sends_to_new_recipients_at_the_limit_admit_one,
    campaigns_at_the_limit_admit_one_creator,
}

/// A master key for keys made in this test (a test key's test space seals its token).
fn test_master_key() -> tern_domain::crypto::MasterKey {
    tern_domain::crypto::MasterKey::from_bytes([7; 32])
}
