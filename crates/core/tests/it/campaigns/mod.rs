//! `campaigns`, one rule per test: create, resolve, the actions and their refusals, and the
//! worker's step (`campaigns::fanout::step`, called directly with the time it runs at; no
//! test waits). Each starts from an organisation with one number, an approved template
//! `hello` ("Hello {{1}} from {{2}}.") and contacts made through the core's contact writes.
//! The rules come from docs/decisions/campaigns.md and the contract (CP2–CP18, S10).

use serde_json::{Value, json};
use tern_core::campaigns::{self, fanout};
use tern_core::{Core, Principal, contacts};
use tern_domain::campaign::{Action, Bucket, PauseReason, Status};
use tern_domain::contact::Consent;
use tern_domain::error::ConflictReason;
use tern_domain::message::Status as MessageStatus;
use tern_domain::plan::Overrides;
use tern_domain::time::{format_ms, now_ms};
use tern_domain::{ErrorCode, Problem};
use tern_store::{Campaign, ContactKey, Db, Org, RecipientRow};
use uuid::Uuid;

use crate::fixtures::{self, PNID};

mod prices;
mod run;

const HOUR: i64 = 3_600_000;

struct World {
    db: Db,
    core: Core,
    org: Org,
    p: Principal,
}

async fn world_with(db: &Db, overrides: Value) -> World {
    let org = fixtures::org(db, overrides).await;
    fixtures::number(db, &org, PNID).await;
    fixtures::approved_template(
        db,
        &org,
        json!([{"type": "BODY", "text": "Hello {{1}} from {{2}}.",
                "example": {"body_text": [["Ann", "Leeds"]]}}]),
    )
    .await;
    tern_core::admin::add_contact_field(db, org.id, "city", "City", "text")
        .await
        .unwrap();
    World {
        db: db.clone(),
        core: fixtures::core(db),
        p: fixtures::principal(&org),
        org,
    }
}

async fn world(db: &Db) -> World {
    world_with(db, json!({})).await
}

/// The variables most tests send: the contact's name (or "there") and city (no fallback).
fn vars() -> Value {
    json!([{"field": "name", "fallback": "there"}, {"field": "custom_fields.city"}])
}

fn body(audience: Value, variables: Value) -> Value {
    json!({"name": "Spring", "template": {"name": "hello", "language": "en_US", "variables": variables},
           "audience": audience})
}

impl World {
    /// A contact by phone with a name, a city and tags; its id.
    async fn contact(
        &self,
        phone: &str,
        name: Option<&str>,
        city: Option<&str>,
        tags: &[&str],
    ) -> Uuid {
        let mut fields = serde_json::Map::new();
        if let Some(c) = city {
            fields.insert("city".into(), json!(c));
        }
        let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
        let (c, _) = contacts::upsert(
            &self.core,
            &self.p,
            contacts::Upsert {
                key: ContactKey::WaId(phone),
                name,
                custom_fields: Some(&fields),
                tags: &tags,
            },
        )
        .await
        .unwrap();
        c.id
    }

    async fn opt_out(&self, id: Uuid) {
        contacts::record_consent(
            &self.core,
            &self.p,
            id,
            Consent::OptedOut,
            Some("test"),
            now_ms(),
        )
        .await
        .unwrap();
    }

    async fn create(&self, body: &Value) -> Result<Campaign, Problem> {
        campaigns::create(&self.core, &self.p, body, now_ms()).await
    }

    async fn act(&self, id: Uuid, action: Action, body: Value) -> Result<Campaign, Problem> {
        campaigns::act(&self.core, &self.p, id, action, &body, now_ms()).await
    }

    async fn get(&self, id: Uuid) -> Campaign {
        campaigns::get(&self.core, self.org.id, id).await.unwrap()
    }

    /// A draft to the tag `vip`, with [`vars`].
    async fn draft(&self) -> Uuid {
        self.create(&body(json!({"tags": ["vip"]}), vars()))
            .await
            .unwrap()
            .id
    }

    async fn step(&self, id: Uuid, at: i64) -> fanout::Step {
        fanout::step(&self.core, self.org.id, id, at).await.unwrap()
    }

    /// The contacts a campaign with `audience` (and the usual variables) resolves to, in
    /// contact order.
    async fn resolved_audience(&self, audience: Value) -> Vec<Uuid> {
        let c = self.create(&body(audience, vars())).await.unwrap();
        self.act(c.id, Action::Resolve, json!({})).await.unwrap();
        self.recipients(c.id)
            .await
            .iter()
            .map(|r| r.contact_id)
            .collect()
    }

    async fn recipients(&self, id: Uuid) -> Vec<RecipientRow> {
        self.db
            .list_campaign_recipients(id, None, None, 100)
            .await
            .unwrap()
    }

    /// The recipients' (contact, bucket, reason), in contact order.
    async fn outcomes(&self, id: Uuid) -> Vec<(Uuid, Bucket, Option<String>)> {
        self.recipients(id)
            .await
            .into_iter()
            .map(|r| (r.contact_id, r.status, r.reason))
            .collect()
    }

    /// The variables resolve filled in for each pending recipient.
    async fn filled(&self, id: Uuid) -> Vec<(Uuid, Vec<String>)> {
        self.db
            .pending_recipients(id, PNID, 100)
            .await
            .unwrap()
            .into_iter()
            .map(|r| (r.contact_id, r.variables.map(|v| v.0).unwrap_or_default()))
            .collect()
    }
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

fn fields(p: &Problem) -> Vec<String> {
    p.details["fields"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|f| f["field"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn assert_conflict(r: Result<Campaign, Problem>, reason: ConflictReason) -> Problem {
    let p = r.expect_err("refused");
    assert!(p.is_conflict(reason), "{p:?}");
    p
}

// --- Create ---

async fn create_makes_a_draft_on_the_only_number(db: Db) {
    let w = world(&db).await;
    let c = w
        .create(&body(json!({"all_contacts": true}), vars()))
        .await
        .unwrap();
    assert_eq!(
        (
            c.status,
            c.phone_number_id.as_str(),
            c.recipient_count,
            c.resolved_at
        ),
        (Status::Draft, PNID, None, None)
    );
}

async fn create_names_every_problem_of_the_body_at_once(db: Db) {
    let w = world(&db).await;
    let p = w
        .create(&json!({"name": "", "template": {"language": "xx-1"},
                        "audience": {"tags": [], "all_contacts": true}, "expires_at": "yesterday"}))
        .await
        .unwrap_err();
    assert_eq!(p.code, ErrorCode::ValidationFailed);
    assert_eq!(
        sorted(fields(&p)),
        [
            "audience",
            "expires_at",
            "name",
            "template.language",
            "template.name"
        ]
    );
}

async fn create_refuses_a_number_that_is_not_the_organisations(db: Db) {
    let w = world(&db).await;
    let mut b = body(json!({"all_contacts": true}), vars());
    b["phone_number_id"] = json!("nope");
    let p = w.create(&b).await.unwrap_err();
    assert_eq!(
        (p.code, fields(&p)),
        (
            ErrorCode::ValidationFailed,
            vec!["phone_number_id".to_string()]
        )
    );
}

async fn create_counts_against_the_campaigns_limit(db: Db) {
    let w = world_with(&db, fixtures::limit("campaigns", 1)).await;
    let b = body(json!({"all_contacts": true}), vars());
    w.create(&b).await.unwrap();
    let p = w.create(&b).await.unwrap_err();
    assert_eq!(p.code, ErrorCode::PlanLimitReached);
}

async fn create_needs_the_campaigns_feature(db: Db) {
    let w = world(&db).await;
    let mut o = Overrides::from_json(&w.org.overrides);
    o.features.insert("campaigns".into(), false);
    let mut org = w.org.clone();
    org.overrides = o.to_json();
    let org = tern_core::admin::update_org(&db, org, None).await.unwrap();
    let p = fixtures::principal(&org);
    let b = body(json!({"all_contacts": true}), vars());
    let e = campaigns::create(&w.core, &p, &b, now_ms())
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::PlanFeatureUnavailable);
}

// --- Resolve ---

async fn resolve_makes_a_draft_ready_with_its_recipient_count(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    w.contact("14155550302", Some("Bob"), Some("Leeds"), &["vip"])
        .await;
    let id = w.draft().await;
    let c = w.act(id, Action::Resolve, json!({})).await.unwrap();
    assert_eq!((c.status, c.recipient_count), (Status::Ready, Some(2)));
    assert!(c.resolved_at.is_some());
}

async fn an_audience_by_tags_takes_any_tag_less_the_excluded_tags(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip", "uk"])
        .await;
    let bob = w
        .contact("14155550302", Some("Bob"), Some("Leeds"), &["uk"])
        .await;
    w.contact("14155550303", Some("Cy"), Some("York"), &["vip", "blocked"])
        .await;
    w.contact("14155550304", Some("Dee"), Some("Bath"), &[])
        .await;
    let got = w
        .resolved_audience(json!({"tags": ["vip", "uk"], "exclude_tags": ["blocked"]}))
        .await;
    assert_eq!(got, sorted(vec![ada, bob]));
}

async fn an_audience_by_tags_with_tag_match_all_takes_contacts_with_every_tag(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip", "uk"])
        .await;
    w.contact("14155550302", Some("Bob"), Some("Leeds"), &["uk"])
        .await;
    let got = w
        .resolved_audience(json!({"tags": ["vip", "uk"], "tag_match": "all"}))
        .await;
    assert_eq!(got, [ada]);
}

async fn an_audience_by_contact_ids_counts_each_once_and_leaves_out_strangers(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &[])
        .await;
    let bob = w
        .contact("14155550302", Some("Bob"), Some("Leeds"), &[])
        .await;
    let c = w
        .create(&body(
            json!({"contact_ids": [ada, ada, bob, Uuid::now_v7()]}),
            vars(),
        ))
        .await
        .unwrap();
    let c = w.act(c.id, Action::Resolve, json!({})).await.unwrap();
    assert_eq!(c.recipient_count, Some(2));
    let got: Vec<Uuid> = w
        .recipients(c.id)
        .await
        .iter()
        .map(|r| r.contact_id)
        .collect();
    assert_eq!(got, sorted(vec![ada, bob]));
}

async fn an_empty_audience_cannot_resolve(db: Db) {
    let w = world(&db).await;
    let id = w.draft().await;
    assert_conflict(
        w.act(id, Action::Resolve, json!({})).await,
        ConflictReason::AudienceEmpty,
    );
    assert_eq!(w.get(id).await.status, Status::Draft);
}

async fn an_opted_out_contact_is_skipped_with_opted_out(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let eve = w
        .contact("14155550305", Some("Eve"), Some("Bath"), &["vip"])
        .await;
    w.opt_out(eve).await;
    let id = w.draft().await;
    w.act(id, Action::Resolve, json!({})).await.unwrap();
    assert_eq!(
        w.outcomes(id).await,
        sorted(vec![
            (ada, Bucket::Pending, None),
            (eve, Bucket::Skipped, Some("opted_out".to_string())),
        ])
    );
}

async fn variables_are_filled_per_contact_with_fallbacks(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let nameless = w
        .contact("14155550302", None, Some("Leeds"), &["vip"])
        .await;
    let id = w.draft().await;
    w.act(id, Action::Resolve, json!({})).await.unwrap();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        w.filled(id).await,
        sorted(vec![
            (ada, s(&["Ada", "London"])),
            (nameless, s(&["there", "Leeds"]))
        ])
    );
}

async fn a_value_that_breaks_the_template_rules_skips_the_recipient_with_variable_invalid(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    // No city and no fallback: an empty value; a new line: not a value a template takes.
    let no_city = w.contact("14155550302", Some("Bob"), None, &["vip"]).await;
    let new_line = w
        .contact("14155550303", Some("Cy"), Some("Le\neds"), &["vip"])
        .await;
    let id = w.draft().await;
    w.act(id, Action::Resolve, json!({})).await.unwrap();
    let invalid = Some("variable_invalid".to_string());
    assert_eq!(
        w.outcomes(id).await,
        sorted(vec![
            (ada, Bucket::Pending, None),
            (no_city, Bucket::Skipped, invalid.clone()),
            (new_line, Bucket::Skipped, invalid),
        ])
    );
}

// One test per rule, each on SQLite and on PostgreSQL.
tern_store::both_backends! { tern_store::testkit::TestDb;
    create_makes_a_draft_on_the_only_number,
    create_names_every_problem_of_the_body_at_once,
    create_refuses_a_number_that_is_not_the_organisations,
    create_counts_against_the_campaigns_limit,
    create_needs_the_campaigns_feature,
    resolve_makes_a_draft_ready_with_its_recipient_count,
    an_audience_by_tags_takes_any_tag_less_the_excluded_tags,
    an_audience_by_tags_with_tag_match_all_takes_contacts_with_every_tag,
    an_audience_by_contact_ids_counts_each_once_and_leaves_out_strangers,
    an_empty_audience_cannot_resolve,
    an_opted_out_contact_is_skipped_with_opted_out,
    variables_are_filled_per_contact_with_fallbacks,
    a_value_that_breaks_the_template_rules_skips_the_recipient_with_variable_invalid,
}
