//! The campaign actions (schedule, launch, pause, resume), their refusals and events, and
//! the worker's step (`fanout::step`, called with the time it runs at).

use super::*;

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
            let c =
                w.db.get_contact_by_wa_id(w.org.id, "14155550301")
                    .await
                    .unwrap()
                    .unwrap();
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
        (
            Status::Completed,
            &[Resolve, Schedule, Launch, Pause, Resume],
        ),
    ];
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    for (status, refused) in table {
        let id = in_status(&w, status).await;
        for &action in refused {
            let body = json!({"scheduled_at": format_ms(now_ms() + HOUR)});
            let p = assert_conflict(
                w.act(id, action, body).await,
                ConflictReason::InvalidCampaignState,
            );
            assert_eq!(p.details["status"], status.as_str(), "{status} {action}");
            assert_eq!(w.get(id).await.status, status, "{status} {action}");
        }
    }
}

async fn schedule_sets_a_time_and_null_unschedules(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = in_status(&w, Status::Ready).await;
    let at = (now_ms() + HOUR) / 1000 * 1000;
    let c = w
        .act(id, Action::Schedule, json!({"scheduled_at": format_ms(at)}))
        .await
        .unwrap();
    assert_eq!((c.status, c.scheduled_at), (Status::Scheduled, Some(at)));
    let c = w
        .act(id, Action::Schedule, json!({"scheduled_at": null}))
        .await
        .unwrap();
    assert_eq!((c.status, c.scheduled_at), (Status::Ready, None));
}

async fn a_schedule_in_the_past_is_refused(db: Db) {
    let w = world(&db).await;
    let id = w.draft().await;
    let p = w
        .act(
            id,
            Action::Schedule,
            json!({"scheduled_at": "2020-01-01T00:00:00Z"}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        (p.code, fields(&p)),
        (
            ErrorCode::ValidationFailed,
            vec!["scheduled_at".to_string()]
        )
    );
}

async fn launch_from_draft_resolves_first_and_runs(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = w.draft().await;
    let c = w.act(id, Action::Launch, json!({})).await.unwrap();
    assert_eq!((c.status, c.recipient_count), (Status::Running, Some(1)));
    assert!(c.launched_at.is_some() && c.resolved_at.is_some());
}

async fn pause_is_manual_and_resume_clears_it(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = in_status(&w, Status::Running).await;
    let c = w.act(id, Action::Pause, json!({})).await.unwrap();
    assert_eq!(
        (c.status, c.pause_reason),
        (Status::Paused, Some(PauseReason::Manual))
    );
    let c = w.act(id, Action::Resume, json!({})).await.unwrap();
    assert_eq!(
        (c.status, c.pause_reason, c.paused_at),
        (Status::Running, None, None)
    );
}

async fn launch_refuses_a_template_that_is_not_approved(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
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
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let c = w
        .create(&body(json!({"tags": ["vip"]}), json!(["only one"])))
        .await
        .unwrap();
    let p = w.act(c.id, Action::Launch, json!({})).await.unwrap_err();
    assert_eq!(
        (p.code, fields(&p)),
        (
            ErrorCode::TemplateNotApproved,
            vec!["template.variables".to_string()]
        )
    );
    assert_eq!(w.get(c.id).await.status, Status::Draft);
}

async fn each_status_change_writes_one_campaign_status_event(db: Db) {
    let w = world(&db).await;
    fixtures::subscribe(&db, &w.org, &["campaign.status"]).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = w.draft().await;
    w.act(id, Action::Resolve, json!({})).await.unwrap();
    // A second resolve of a ready campaign changes no status; a refused action nothing.
    w.act(id, Action::Resolve, json!({})).await.unwrap();
    w.act(id, Action::Pause, json!({})).await.unwrap_err();
    w.act(
        id,
        Action::Schedule,
        json!({"scheduled_at": format_ms(now_ms() + HOUR)}),
    )
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
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let bob = w
        .contact("14155550302", None, Some("Leeds"), &["vip"])
        .await;
    let id = in_status(&w, Status::Running).await;
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.status), (2, Some(Status::Running)));
    let counts = db.campaign_counts(id).await.unwrap();
    assert_eq!((counts.pending, counts.queued), (0, 2));
    for (contact, values) in [(ada, ["Ada", "London"]), (bob, ["there", "Leeds"])] {
        let r = w
            .recipients(id)
            .await
            .into_iter()
            .find(|r| r.contact_id == contact)
            .unwrap();
        assert_eq!(r.status, Bucket::Queued);
        let m = db
            .get_message(w.org.id, r.message_id.unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                m.status,
                m.campaign_id,
                m.contact_id,
                m.template_name.as_deref()
            ),
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
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    w.contact("14155550302", Some("Bob"), Some("Leeds"), &["vip"])
        .await;
    let id = in_status(&w, Status::Running).await;
    assert_eq!(w.step(id, now_ms()).await.accepted, 2);
    let first: Vec<_> = w
        .recipients(id)
        .await
        .into_iter()
        .map(|r| r.message_id)
        .collect();
    assert_eq!(w.step(id, now_ms()).await.accepted, 0);
    let again: Vec<_> = w
        .recipients(id)
        .await
        .into_iter()
        .map(|r| r.message_id)
        .collect();
    assert_eq!(first, again);
}

async fn a_recipient_whose_message_was_accepted_before_is_marked_with_it(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let bob = w
        .contact("14155550302", Some("Bob"), Some("Leeds"), &["vip"])
        .await;
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
    let options =
        w.db.send_options(w.org.id, tern_store::ContactRef::WaId(wa_id))
            .await
            .unwrap();
    let s = Send {
        request,
        options: &options,
        idempotency_key: key,
        fingerprint: &tern_domain::send::fingerprint(&body),
        now: now_ms(),
        request_id: None,
    };
    match send::accept(&w.core, &w.p, s).await.unwrap() {
        Sent::Accepted(m) => m.id,
        other => panic!("{other:?}"),
    }
}

async fn a_contact_who_opts_out_after_resolve_is_skipped_at_fan_out(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = in_status(&w, Status::Running).await;
    w.opt_out(ada).await;
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.skipped), (0, 1));
    assert_eq!(
        w.outcomes(id).await,
        [(ada, Bucket::Skipped, Some("opted_out".to_string()))]
    );
}

async fn a_contact_blocked_after_resolve_is_skipped_at_fan_out(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = in_status(&w, Status::Running).await;
    // Blocked after resolve (recorded as `core::agents::block` records it).
    db.set_contact_blocked(w.org.id, ada, Some(now_ms()), now_ms())
        .await
        .unwrap();
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.skipped), (0, 1));
    assert_eq!(
        w.outcomes(id).await,
        [(ada, Bucket::Skipped, Some("blocked".to_string()))]
    );
}

async fn a_paused_campaign_queues_nothing(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = in_status(&w, Status::Paused).await;
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.status), (0, Some(Status::Paused)));
    assert_eq!(db.campaign_counts(id).await.unwrap().pending, 1);
}

async fn a_scheduled_campaign_launches_when_its_time_comes(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = w.draft().await;
    let at = now_ms() + HOUR;
    w.act(id, Action::Schedule, json!({"scheduled_at": format_ms(at)}))
        .await
        .unwrap();
    // Before its time a step does nothing; at its time it resolves, launches and queues.
    let early = w.step(id, at - 1_000).await;
    assert_eq!((early.accepted, early.status), (0, Some(Status::Scheduled)));
    let due = w.step(id, at).await;
    assert_eq!((due.accepted, due.status), (1, Some(Status::Running)));
    assert_eq!(w.get(id).await.recipient_count, Some(1));
}

async fn a_step_pauses_the_campaign_when_its_template_is_paused(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = in_status(&w, Status::Running).await;
    // The network pauses the template (its status webhook, through the inbox).
    let update = json!({"object": "whatsapp_business_account", "entry": [{"id": fixtures::WABA, "changes": [{
        "field": "message_template_status_update", "value": {"event": "PAUSED",
        "message_template_id": 1, "message_template_name": "hello",
        "message_template_language": "en_US", "reason": "NONE"}}]}]});
    assert_eq!(fixtures::deliver(&db, &update).await.templates_updated, 1);
    let step = w.step(id, now_ms()).await;
    assert_eq!((step.accepted, step.status), (0, Some(Status::Paused)));
    assert_eq!(
        w.get(id).await.pause_reason,
        Some(PauseReason::TemplateNotApproved)
    );
}

async fn at_expiry_queued_messages_end_campaign_expired_and_the_campaign_completes(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let expires = now_ms() + HOUR;
    let mut b = body(json!({"tags": ["vip"]}), vars());
    b["expires_at"] = json!(format_ms(expires));
    let id = w.create(&b).await.unwrap().id;
    w.act(id, Action::Launch, json!({})).await.unwrap();
    assert_eq!(w.step(id, now_ms()).await.accepted, 1);
    let step = w.step(id, expires).await;
    assert_eq!(step.status, Some(Status::Completed));
    let r = &w.recipients(id).await[0];
    assert_eq!(
        (r.contact_id, r.status, r.reason.as_deref()),
        (ada, Bucket::Expired, None)
    );
    let m = db
        .get_message(w.org.id, r.message_id.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (m.status, m.failure_code.as_deref()),
        (MessageStatus::Failed, Some("campaign_expired"))
    );
}

async fn at_expiry_pending_recipients_end_expired(db: Db) {
    let w = world(&db).await;
    let ada = w
        .contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
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

/// Fails `n` of campaign `id`'s queued messages through the status writer, as the
/// dispatcher records a network refusal.
async fn fail_queued(w: &World, n: i64) {
    use tern_core::messages::status;
    use tern_domain::message::Precision;
    let items = status::claim(
        &w.db,
        &tern_store::DispatchClaim {
            phone_number_id: Some(PNID),
            api_only: false,
            limit: n,
            owner: "test",
            now: now_ms(),
            lease_ms: 60_000,
            grace_ms: 60_000,
        },
    )
    .await
    .unwrap();
    assert_eq!(items.len() as i64, n);
    let failure = tern_domain::failure::Failure::tern("network_error", "refused in a test");
    let report = status::Report {
        status: MessageStatus::Failed,
        at: now_ms(),
        precision: Precision::Millis,
        wamid: None,
        failure: Some(&failure),
        seen: None,
        attempt: None,
    };
    let outcomes: Vec<_> = items.iter().map(|i| (i, report.clone())).collect();
    status::record_sends(&w.db, &outcomes).await.unwrap();
}

async fn a_step_pauses_the_campaign_at_the_error_threshold(db: Db) {
    let w = world(&db).await;
    for i in 0..25 {
        w.contact(
            &format!("141555504{i:02}"),
            Some("Ada"),
            Some("London"),
            &["vip"],
        )
        .await;
    }
    let id = in_status(&w, Status::Running).await;
    assert_eq!(w.step(id, now_ms()).await.accepted, 25);
    // 19 failures of 19 outcomes: under the threshold's floor of 20, the campaign runs on.
    fail_queued(&w, 19).await;
    assert_eq!(w.step(id, now_ms()).await.status, Some(Status::Running));
    // The 20th: at least 20 failures, at least 20 % of the last outcomes.
    fail_queued(&w, 1).await;
    assert_eq!(w.step(id, now_ms()).await.status, Some(Status::Paused));
    assert_eq!(
        w.get(id).await.pause_reason,
        Some(PauseReason::ErrorThreshold)
    );
}

async fn a_campaign_with_nobody_left_to_message_completes(db: Db) {
    let w = world(&db).await;
    w.contact("14155550301", Some("Ada"), Some("London"), &["vip"])
        .await;
    let id = in_status(&w, Status::Completed).await;
    let c = w.get(id).await;
    assert!(c.completed_at.is_some());
    // A completed campaign stays so.
    assert_eq!(w.step(id, now_ms()).await.status, Some(Status::Completed));
}

// One test per rule, each on SQLite and on PostgreSQL.
tern_store::both_backends! { tern_store::testkit::TestDb;
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
    a_contact_blocked_after_resolve_is_skipped_at_fan_out,
    a_paused_campaign_queues_nothing,
    a_scheduled_campaign_launches_when_its_time_comes,
    a_step_pauses_the_campaign_when_its_template_is_paused,
    at_expiry_queued_messages_end_campaign_expired_and_the_campaign_completes,
    at_expiry_pending_recipients_end_expired,
    a_step_pauses_the_campaign_at_the_error_threshold,
    a_campaign_with_nobody_left_to_message_completes,
}
