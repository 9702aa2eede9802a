//! `campaigns`, one rule per test: create, resolve, the actions and their refusals, and the
//! worker's step (`campaigns::fanout::step`, called directly with the time it runs at; no
//! test waits). Each starts from an organisation with one number, an approved template
//! `hello` ("Hello {{1}} from {{2}}.") and contacts made through the core's contact writes.
//! The rules come from docs/decisions/campaigns.md and the contract (CP2–CP9, S10).

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

/// One test per rule, each on SQLite and on PostgreSQL.
macro_rules! rules {
    ($($name:ident),+ $(,)?) => {
        mod rules {
            $(#[tokio::test] async fn $name() { crate::fixtures::on_both(super::$name).await; })+
        }
    };
}

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
    async fn contact(&self, phone: &str, name: Option<&str>, city: Option<&str>, tags: &[&str]) -> Uuid {
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
        contacts::record_consent(&self.core, &self.p, id, Consent::OptedOut, Some("test"), now_ms())
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
        self.create(&body(json!({"tags": ["vip"]}), vars())).await.unwrap().id
    }

    async fn step(&self, id: Uuid, at: i64) -> fanout::Step {
        fanout::step(&self.core, self.org.id, id, at).await.unwrap()
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
        .map(|a| a.iter().map(|f| f["field"].as_str().unwrap().to_string()).collect())
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
    let c = w.create(&body(json!({"all_contacts": true}), vars())).await.unwrap();
    assert_eq!(
        (c.status, c.phone_number_id.as_str(), c.recipient_count, c.resolved_at),
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
        ["audience", "expires_at", "name", "template.language", "template.name"]
    );
}

async fn create_refuses_a_number_that_is_not_the_organisations(db: Db) {
    let w = world(&db).await;
    let mut b = body(json!({"all_contacts": true}), vars());
    b["phone_number_id"] = json!("nope");
    let p = w.create(&b).await.unwrap_err();
    assert_eq!((p.code, fields(&p)), (ErrorCode::ValidationFailed, vec!["phone_number_id".to_string()]));
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
    let e = campaigns::create(&w.core, &p, &b, now_ms()).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::PlanFeatureUnavailable);
}

// --- Resolve ---

async fn resolve_makes_a_draft_ready_with_its_recipient_count(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    w.contact("14155550302", Some("Bob"), Some("Leeds"), &["vip"]).await;
    let id = w.draft().await;
    let c = w.act(id, Action::Resolve, json!({})).await.unwrap();
    assert_eq!((c.status, c.recipient_count), (Status::Ready, Some(2)));
    assert!(c.resolved_at.is_some());
}

async fn an_audience_by_tags_takes_any_tag_less_the_excluded_tags(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip", "uk"]).await;
    let bob = w.contact("14155550302", Some("Bob"), Some("Leeds"), &["uk"]).await;
    w.contact("14155550303", Some("Cy"), Some("York"), &["vip", "blocked"]).await;
    w.contact("14155550304", Some("Dee"), Some("Bath"), &[]).await;
    let c = w
        .create(&body(json!({"tags": ["vip", "uk"], "exclude_tags": ["blocked"]}), vars()))
        .await
        .unwrap();
    w.act(c.id, Action::Resolve, json!({})).await.unwrap();
    let got: Vec<Uuid> = w.recipients(c.id).await.iter().map(|r| r.contact_id).collect();
    assert_eq!(got, sorted(vec![ada, bob]));
}

async fn an_audience_by_tags_with_tag_match_all_takes_contacts_with_every_tag(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip", "uk"]).await;
    w.contact("14155550302", Some("Bob"), Some("Leeds"), &["uk"]).await;
    let c = w
        .create(&body(json!({"tags": ["vip", "uk"], "tag_match": "all"}), vars()))
        .await
        .unwrap();
    w.act(c.id, Action::Resolve, json!({})).await.unwrap();
    let got: Vec<Uuid> = w.recipients(c.id).await.iter().map(|r| r.contact_id).collect();
    assert_eq!(got, [ada]);
}

async fn an_audience_by_contact_ids_counts_each_once_and_leaves_out_strangers(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &[]).await;
    let bob = w.contact("14155550302", Some("Bob"), Some("Leeds"), &[]).await;
    let c = w
        .create(&body(json!({"contact_ids": [ada, ada, bob, Uuid::now_v7()]}), vars()))
        .await
        .unwrap();
    let c = w.act(c.id, Action::Resolve, json!({})).await.unwrap();
    assert_eq!(c.recipient_count, Some(2));
    let got: Vec<Uuid> = w.recipients(c.id).await.iter().map(|r| r.contact_id).collect();
    assert_eq!(got, sorted(vec![ada, bob]));
}

async fn an_empty_audience_cannot_resolve(db: Db) {
    let w = world(&db).await;
    let id = w.draft().await;
    assert_conflict(w.act(id, Action::Resolve, json!({})).await, ConflictReason::AudienceEmpty);
    assert_eq!(w.get(id).await.status, Status::Draft);
}

async fn an_opted_out_contact_is_skipped_with_opted_out(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let eve = w.contact("14155550305", Some("Eve"), Some("Bath"), &["vip"]).await;
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
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let nameless = w.contact("14155550302", None, Some("Leeds"), &["vip"]).await;
    let id = w.draft().await;
    w.act(id, Action::Resolve, json!({})).await.unwrap();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        w.filled(id).await,
        sorted(vec![(ada, s(&["Ada", "London"])), (nameless, s(&["there", "Leeds"]))])
    );
}

async fn a_value_that_breaks_the_template_rules_skips_the_recipient_with_variable_invalid(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    // No city and no fallback: an empty value; a new line: not a value a template takes.
    let no_city = w.contact("14155550302", Some("Bob"), None, &["vip"]).await;
    let new_line = w.contact("14155550303", Some("Cy"), Some("Le\neds"), &["vip"]).await;
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

// --- Actions ---

/// A campaign brought to `status` (one `vip` contact; a completed one had nobody to message).
async fn in_status(w: &World, status: Status) -> Uuid {
    let id = w.draft().await;
    let future = json!({"scheduled_at": format_ms(now_ms() + HOUR)});
    match status {
        Status::Draft => {}
        Status::Ready => {
            w.act(id, Action::Resolve, json!({})).await.unwrap();
        }
        Status::Scheduled => {
            w.act(id, Action::Schedule, future).await.unwrap();
        }
        Status::Running => {
            w.act(id, Action::Launch, json!({})).await.unwrap();
        }
        Status::Paused => {
            w.act(id, Action::Launch, json!({})).await.unwrap();
            w.act(id, Action::Pause, json!({})).await.unwrap();
        }
        Status::Completed => {
            // Everyone opted out: the first step completes it.
            let c = w.db.get_contact_by_wa_id(w.org.id, "14155550301").await.unwrap().unwrap();
            w.opt_out(c.id).await;
            w.act(id, Action::Launch, json!({})).await.unwrap();
            w.step(id, now_ms()).await;
        }
    }
    assert_eq!(w.get(id).await.status, status);
    id
}

async fn an_action_its_status_does_not_allow_is_refused_naming_the_status(db: Db) {
    use Action::*;
    let table: [(Status, &[Action]); 6] = [
        (Status::Draft, &[Pause, Resume]),
        (Status::Ready, &[Pause, Resume]),
        (Status::Scheduled, &[Resolve, Pause, Resume]),
        (Status::Running, &[Resolve, Schedule, Launch, Resume]),
        (Status::Paused, &[Resolve, Schedule, Launch, Pause]),
        (Status::Completed, &[Resolve, Schedule, Launch, Pause, Resume]),
    ];
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    for (status, refused) in table {
        let id = in_status(&w, status).await;
        for &action in refused {
            let body = json!({"scheduled_at": format_ms(now_ms() + HOUR)});
            let p = assert_conflict(w.act(id, action, body).await, ConflictReason::InvalidCampaignState);
            assert_eq!(p.details["status"], status.as_str(), "{status} {action}");
            assert_eq!(w.get(id).await.status, status, "{status} {action}");
        }
    }
}

async fn schedule_sets_a_time_and_null_unschedules(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = in_status(&w, Status::Ready).await;
    let at = (now_ms() + HOUR) / 1000 * 1000;
    let c = w.act(id, Action::Schedule, json!({"scheduled_at": format_ms(at)})).await.unwrap();
    assert_eq!((c.status, c.scheduled_at), (Status::Scheduled, Some(at)));
    let c = w.act(id, Action::Schedule, json!({"scheduled_at": null})).await.unwrap();
    assert_eq!((c.status, c.scheduled_at), (Status::Ready, None));
}

async fn a_schedule_in_the_past_is_refused(db: Db) {
    let w = world(&db).await;
    let id = w.draft().await;
    let p = w
        .act(id, Action::Schedule, json!({"scheduled_at": "2020-01-01T00:00:00Z"}))
        .await
        .unwrap_err();
    assert_eq!((p.code, fields(&p)), (ErrorCode::ValidationFailed, vec!["scheduled_at".to_string()]));
}

async fn launch_from_draft_resolves_first_and_runs(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = w.draft().await;
    let c = w.act(id, Action::Launch, json!({})).await.unwrap();
    assert_eq!((c.status, c.recipient_count), (Status::Running, Some(1)));
    assert!(c.launched_at.is_some() && c.resolved_at.is_some());
}

async fn pause_is_manual_and_resume_clears_it(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = in_status(&w, Status::Running).await;
    let c = w.act(id, Action::Pause, json!({})).await.unwrap();
    assert_eq!((c.status, c.pause_reason), (Status::Paused, Some(PauseReason::Manual)));
    let c = w.act(id, Action::Resume, json!({})).await.unwrap();
    assert_eq!((c.status, c.pause_reason, c.paused_at), (Status::Running, None, None));
}

async fn launch_refuses_a_template_that_is_not_approved(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let mut b = body(json!({"tags": ["vip"]}), vars());
    b["template"]["name"] = json!("missing");
    let c = w.create(&b).await.unwrap();
    w.act(c.id, Action::Resolve, json!({})).await.unwrap();
    let p = w.act(c.id, Action::Launch, json!({})).await.unwrap_err();
    assert_eq!(p.code, ErrorCode::TemplateNotApproved);
    assert_eq!(w.get(c.id).await.status, Status::Ready);
}

async fn launch_refuses_variables_the_template_does_not_take(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let c = w.create(&body(json!({"tags": ["vip"]}), json!(["only one"]))).await.unwrap();
    let p = w.act(c.id, Action::Launch, json!({})).await.unwrap_err();
    assert_eq!((p.code, fields(&p)), (ErrorCode::TemplateNotApproved, vec!["template.variables".to_string()]));
    assert_eq!(w.get(c.id).await.status, Status::Draft);
}

async fn each_status_change_writes_one_campaign_status_event(db: Db) {
    let w = world(&db).await;
    fixtures::subscribe(&db, &w.org, &["campaign.status"]).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = w.draft().await;
    w.act(id, Action::Resolve, json!({})).await.unwrap();
    // A second resolve of a ready campaign changes no status; a refused action nothing.
    w.act(id, Action::Resolve, json!({})).await.unwrap();
    w.act(id, Action::Pause, json!({})).await.unwrap_err();
    w.act(id, Action::Schedule, json!({"scheduled_at": format_ms(now_ms() + HOUR)}))
        .await
        .unwrap();
    w.act(id, Action::Launch, json!({})).await.unwrap();
    w.act(id, Action::Pause, json!({})).await.unwrap();
    w.act(id, Action::Resume, json!({})).await.unwrap();
    let got: Vec<String> = fixtures::events(&db)
        .await
        .into_iter()
        .map(|(t, d)| {
            assert_eq!(t, "campaign.status");
            d["status"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(got, ["ready", "scheduled", "running", "paused", "running"]);
}

// --- The worker's step ---

async fn a_step_queues_one_message_per_pending_recipient_with_its_values(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let bob = w.contact("14155550302", None, Some("Leeds"), &["vip"]).await;
    let id = in_status(&w, Status::Running).await;
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.status), (2, Some(Status::Running)));
    let counts = db.campaign_counts(id).await.unwrap();
    assert_eq!((counts.pending, counts.queued), (0, 2));
    for (contact, values) in [(ada, ["Ada", "London"]), (bob, ["there", "Leeds"])] {
        let r = w.recipients(id).await.into_iter().find(|r| r.contact_id == contact).unwrap();
        assert_eq!(r.status, Bucket::Queued);
        let m = db.get_message(w.org.id, r.message_id.unwrap()).await.unwrap().unwrap();
        assert_eq!(
            (m.status, m.campaign_id, m.contact_id, m.template_name.as_deref()),
            (MessageStatus::Accepted, Some(id), contact, Some("hello"))
        );
        let params: Vec<&str> = m.request["template"]["components"][0]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["text"].as_str().unwrap())
            .collect();
        assert_eq!(params, values);
    }
}

async fn a_second_step_queues_no_recipient_twice(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    w.contact("14155550302", Some("Bob"), Some("Leeds"), &["vip"]).await;
    let id = in_status(&w, Status::Running).await;
    assert_eq!(w.step(id, now_ms()).await.accepted, 2);
    let first: Vec<_> = w.recipients(id).await.into_iter().map(|r| r.message_id).collect();
    assert_eq!(w.step(id, now_ms()).await.accepted, 0);
    let again: Vec<_> = w.recipients(id).await.into_iter().map(|r| r.message_id).collect();
    assert_eq!(first, again);
}

async fn a_recipient_whose_message_was_accepted_before_is_marked_with_it(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let bob = w.contact("14155550302", Some("Bob"), Some("Leeds"), &["vip"]).await;
    let id = in_status(&w, Status::Running).await;
    // A crash between accepting Ada's message and marking her: the key is bound already.
    let earlier = accept_with_key(&w, "+14155550301", &fanout::recipient_key(id, ada)).await;
    let step = w.step(id, now_ms()).await;
    assert_eq!(step.accepted, 1, "only Bob's message is new");
    let rows = w.recipients(id).await;
    let of = |c: Uuid| rows.iter().find(|r| r.contact_id == c).unwrap().message_id;
    assert_eq!(of(ada), Some(earlier));
    assert!(of(bob).is_some_and(|m| m != earlier));
}

/// Accepts a template send to `to` through the send path with idempotency key `key`.
async fn accept_with_key(w: &World, to: &str, key: &str) -> Uuid {
    use tern_core::messages::send::{self, Send, Sent};
    let body = json!({"to": to, "type": "template",
        "template": {"name": "hello", "language": "en_US", "variables": ["Ada", "London"]}});
    let request = tern_domain::send::parse_send(&body).unwrap();
    let wa_id = to.trim_start_matches('+');
    let options = w
        .db
        .send_options(w.org.id, tern_store::ContactRef::WaId(wa_id.into()))
        .await
        .unwrap();
    let s = Send {
        request,
        options: &options,
        idempotency_key: key,
        fingerprint: &tern_domain::send::fingerprint(&body),
        now: now_ms(),
    };
    match send::accept(&w.core, &w.p, s).await.unwrap() {
        Sent::Accepted(m) => m.id,
        other => panic!("{other:?}"),
    }
}

async fn a_contact_who_opts_out_after_resolve_is_skipped_at_fan_out(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = in_status(&w, Status::Running).await;
    w.opt_out(ada).await;
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.skipped), (0, 1));
    assert_eq!(w.outcomes(id).await, [(ada, Bucket::Skipped, Some("opted_out".to_string()))]);
}

async fn a_paused_campaign_queues_nothing(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = in_status(&w, Status::Paused).await;
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.status), (0, Some(Status::Paused)));
    assert_eq!(db.campaign_counts(id).await.unwrap().pending, 1);
}

async fn a_scheduled_campaign_launches_when_its_time_comes(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = w.draft().await;
    let at = now_ms() + HOUR;
    w.act(id, Action::Schedule, json!({"scheduled_at": format_ms(at)})).await.unwrap();
    // Before its time a step does nothing; at its time it resolves, launches and queues.
    let early = w.step(id, at - 1_000).await;
    assert_eq!((early.accepted, early.status), (0, Some(Status::Scheduled)));
    let due = w.step(id, at).await;
    assert_eq!((due.accepted, due.status), (1, Some(Status::Running)));
    assert_eq!(w.get(id).await.recipient_count, Some(1));
}

async fn a_step_pauses_the_campaign_when_its_template_is_paused(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = in_status(&w, Status::Running).await;
    // The network pauses the template (its status webhook, through the inbox).
    let update = json!({"object": "whatsapp_business_account", "entry": [{"id": fixtures::WABA, "changes": [{
        "field": "message_template_status_update", "value": {"event": "PAUSED",
        "message_template_id": 1, "message_template_name": "hello",
        "message_template_language": "en_US", "reason": "NONE"}}]}]});
    assert_eq!(fixtures::deliver(&db, &update).await.templates_updated, 1);
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.status), (0, Some(Status::Paused)));
    assert_eq!(w.get(id).await.pause_reason, Some(PauseReason::TemplateNotApproved));
}

async fn at_expiry_queued_messages_end_campaign_expired_and_the_campaign_completes(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let expires = now_ms() + HOUR;
    let mut b = body(json!({"tags": ["vip"]}), vars());
    b["expires_at"] = json!(format_ms(expires));
    let id = w.create(&b).await.unwrap().id;
    w.act(id, Action::Launch, json!({})).await.unwrap();
    assert_eq!(w.step(id, now_ms()).await.accepted, 1);
    let step = w.step(id, expires).await;
    assert_eq!(step.status, Some(Status::Completed));
    let r = &w.recipients(id).await[0];
    assert_eq!((r.contact_id, r.status, r.reason.as_deref()), (ada, Bucket::Expired, None));
    let m = db.get_message(w.org.id, r.message_id.unwrap()).await.unwrap().unwrap();
    assert_eq!(
        (m.status, m.failure_code.as_deref()),
        (MessageStatus::Failed, Some("campaign_expired"))
    );
}

async fn at_expiry_pending_recipients_end_expired(db: Db) {
    let w = world(&db).await;
    let ada = w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let expires = now_ms() + HOUR;
    let mut b = body(json!({"tags": ["vip"]}), vars());
    b["expires_at"] = json!(format_ms(expires));
    let id = w.create(&b).await.unwrap().id;
    w.act(id, Action::Launch, json!({})).await.unwrap();
    let step = w.step(id, expires).await;
    assert_eq!((step.accepted, step.status), (0, Some(Status::Completed)));
    assert_eq!(w.outcomes(id).await, [(ada, Bucket::Expired, None)]);
    assert!(w.recipients(id).await[0].message_id.is_none());
}

async fn a_campaign_with_nobody_left_to_message_completes(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"]).await;
    let id = in_status(&w, Status::Completed).await;
    let c = w.get(id).await;
    assert!(c.completed_at.is_some());
    // A completed campaign stays so.
    assert_eq!(w.step(id, now_ms()).await.status, Some(Status::Completed));
}

rules! {
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
    an_action_its_status_does_not_allow_is_refused_naming_the_status,
    schedule_sets_a_time_and_null_unschedules,
    a_schedule_in_the_past_is_refused,
    launch_from_draft_resolves_first_and_runs,
    pause_is_manual_and_resume_clears_it,
    launch_refuses_a_template_that_is_not_approved,
    launch_refuses_variables_the_template_does_not_take,
    each_status_change_writes_one_campaign_status_event,
    a_step_queues_one_message_per_pending_recipient_with_its_values,
    a_second_step_queues_no_recipient_twice,
    a_recipient_whose_message_was_accepted_before_is_marked_with_it,
    a_contact_who_opts_out_after_resolve_is_skipped_at_fan_out,
    a_paused_campaign_queues_nothing,
    a_scheduled_campaign_launches_when_its_time_comes,
    a_step_pauses_the_campaign_when_its_template_is_paused,
    at_expiry_queued_messages_end_campaign_expired_and_the_campaign_completes,
    at_expiry_pending_recipients_end_expired,
    a_campaign_with_nobody_left_to_message_completes,
}
