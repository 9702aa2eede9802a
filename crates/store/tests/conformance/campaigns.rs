use crate::dispatch::{claim, ids, queued, queued_message, world};
use crate::fixtures::{T0, insert_contact};
use serde_json::json;
use tern_domain::campaign::{
    Audience, AudienceSpec, Bucket, PauseReason, ReasonKind, SkipReason, Status,
};
use tern_store::{
    COUNTER_SHARDS, Campaign, CampaignCounts, CountMove, Db, Json, NewRecipient, counter_shard,
};
use uuid::Uuid;

fn campaign(org_id: Uuid, status: Status) -> Campaign {
    Campaign {
        id: Uuid::now_v7(),
        org_id,
        name: "Spring".into(),
        status,
        template_name: "promo".into(),
        template_language: "en_US".into(),
        phone_number_id: "100".into(),
        audience: Json(json!({"all_contacts": true})),
        params: Json(json!({})),
        scheduled_at: None,
        expires_at: None,
        recipient_count: None,
        pause_reason: None,
        resolved_at: None,
        launched_at: None,
        paused_at: None,
        completed_at: None,
        created_at: T0,
        updated_at: T0,
        estimated_cost_minor: None,
    }
}

async fn set_status(db: &Db, c: &mut Campaign, status: Status) {
    c.status = status;
    let mut tx = db.begin().await.unwrap();
    tx.save_campaign(c).await.unwrap();
    tx.commit().await.unwrap();
}

async fn tag(db: &Db, org: Uuid, wa_id: &str, tags: &[&str]) -> Uuid {
    let c = insert_contact(db, org, wa_id, T0).await;
    let tags: Vec<String> = tags.iter().map(|t| t.to_string()).collect();
    if !tags.is_empty() {
        db.add_contact_tags(org, c.id, &tags, T0).await.unwrap();
    }
    c.id
}

async fn audience(db: &Db, org: Uuid, audience: Audience, exclude: &[&str]) -> Vec<Uuid> {
    let spec = AudienceSpec {
        audience,
        exclude_tags: exclude.iter().map(|t| t.to_string()).collect(),
    };
    db.audience_contacts(org, &spec)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect()
}

fn sorted(mut v: Vec<Uuid>) -> Vec<Uuid> {
    v.sort();
    v
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    // API sends on a number are claimed before a campaign's, whatever their due times; a
    // paused campaign's messages stay queued until it runs again.
    priority_lane_and_paused_campaigns => async |db| {
        let w = world(&db).await;
        let mut c = campaign(w.org_id, Status::Running);
        db.insert_campaign(&c).await.unwrap();
        let early = queued_message(&db, &w, "100", T0, None, Some(c.id)).await;
        let api = queued(&db, &w, "100", T0 + 5).await;
        let got = db.status_writes().claim_dispatch(&claim("w", Some("100"), 1, T0 + 10)).await.unwrap();
        assert_eq!(ids(&got), vec![api], "the API send first");
        set_status(&db, &mut c, Status::Paused).await;
        assert!(db.due_dispatch_numbers(T0 + 10, None, 10).await.unwrap().is_empty());
        assert!(db.status_writes().claim_dispatch(&claim("w", Some("100"), 5, T0 + 10)).await.unwrap().is_empty());
        assert!(db.status_writes().claim_dispatch(&claim("w", None, 5, T0 + 10)).await.unwrap().is_empty());
        set_status(&db, &mut c, Status::Running).await;
        assert_eq!(db.due_dispatch_numbers(T0 + 10, None, 10).await.unwrap(), vec!["100".to_string()]);
        // API sends only (an unusable number's claim): the campaign's message stays queued.
        let api_only = tern_store::DispatchClaim { api_only: true, ..claim("w", Some("100"), 5, T0 + 10) };
        assert!(db.status_writes().claim_dispatch(&api_only).await.unwrap().is_empty());
        let api_only = tern_store::DispatchClaim { api_only: true, ..claim("w", None, 5, T0 + 10) };
        assert!(db.status_writes().claim_dispatch(&api_only).await.unwrap().is_empty());
        let got = db.status_writes().claim_dispatch(&claim("w", Some("100"), 5, T0 + 10)).await.unwrap();
        assert_eq!(ids(&got), vec![early]);
    },

    campaigns_list_get_and_lease => async |db| {
        let w = world(&db).await;
        let mut a = campaign(w.org_id, Status::Draft);
        a.pause_reason = Some(PauseReason::ErrorThreshold);
        let mut b = campaign(w.org_id, Status::Scheduled);
        b.created_at = T0 + 1;
        b.scheduled_at = Some(T0 + 100);
        b.estimated_cost_minor = Some(1_250);
        db.insert_campaign(&a).await.unwrap();
        db.insert_campaign(&b).await.unwrap();
        assert_eq!(db.get_campaign(w.org_id, a.id).await.unwrap(), Some(a.clone()));
        assert_eq!(db.get_campaign(w.org_id, b.id).await.unwrap(), Some(b.clone()));
        // The estimate is one of the fields a save writes.
        a.estimated_cost_minor = Some(0);
        set_status(&db, &mut a, Status::Ready).await;
        assert_eq!(db.get_campaign(w.org_id, a.id).await.unwrap(), Some(a.clone()));
        set_status(&db, &mut a, Status::Draft).await;
        assert_eq!(db.get_campaign(Uuid::now_v7(), a.id).await.unwrap(), None);
        let all = db.list_campaigns(w.org_id, None, None, 10).await.unwrap();
        assert_eq!(all.iter().map(|c| c.id).collect::<Vec<_>>(), vec![b.id, a.id]);
        let drafts = db.list_campaigns(w.org_id, Some(Status::Draft), None, 10).await.unwrap();
        assert_eq!(drafts.len(), 1);
        let after = db.list_campaigns(w.org_id, None, Some((b.created_at, b.id)), 10).await.unwrap();
        assert_eq!(after.iter().map(|c| c.id).collect::<Vec<_>>(), vec![a.id]);
        assert_eq!(db.count_campaigns(w.org_id).await.unwrap(), 2);
        // Due scheduled campaigns (and running ones) are the worker's.
        assert!(db.active_campaigns(T0 + 99, 10).await.unwrap().is_empty());
        assert_eq!(db.active_campaigns(T0 + 100, 10).await.unwrap(), vec![(w.org_id, b.id)]);
        // One worker at a time, until its lease lapses.
        assert!(db.lease_campaign(b.id, "p1", T0, T0 + 50).await.unwrap());
        assert!(!db.lease_campaign(b.id, "p2", T0 + 10, T0 + 60).await.unwrap());
        assert!(db.lease_campaign(b.id, "p1", T0 + 10, T0 + 60).await.unwrap());
        assert!(db.lease_campaign(b.id, "p2", T0 + 60, T0 + 110).await.unwrap());
    },

    audiences_resolve_set_based => async |db| {
        let w = world(&db).await;
        let org = w.org_id;
        let a = tag(&db, org, "447700900001", &["vip", "uk"]).await;
        let b = tag(&db, org, "447700900002", &["vip"]).await;
        let c = tag(&db, org, "447700900003", &["uk", "blocked"]).await;
        let d = tag(&db, org, "447700900004", &["vip", "uk", "blocked"]).await;
        let everyone = sorted(vec![w.contact_id, a, b, c, d]);
        let vip = || Audience::Tags { tags: vec!["vip".into()], all: false };
        assert_eq!(audience(&db, org, vip(), &[]).await, sorted(vec![a, b, d]));
        assert_eq!(
            audience(&db, org, Audience::Tags { tags: vec!["vip".into(), "uk".into()], all: false }, &[]).await,
            sorted(vec![a, b, c, d])
        );
        assert_eq!(
            audience(&db, org, Audience::Tags { tags: vec!["vip".into(), "uk".into()], all: true }, &[]).await,
            sorted(vec![a, d])
        );
        assert_eq!(audience(&db, org, vip(), &["blocked"]).await, sorted(vec![a, b]));
        assert_eq!(audience(&db, org, Audience::AllContacts, &[]).await, everyone);
        assert_eq!(audience(&db, org, Audience::AllContacts, &["blocked"]).await, sorted(vec![w.contact_id, a, b]));
        // Ids: deduplicated, foreign and unknown ones left out.
        let other = crate::fixtures::insert_org(&db).await;
        let foreign = insert_contact(&db, other.id, "447700900009", T0).await.id;
        assert_eq!(
            audience(&db, org, Audience::ContactIds(vec![b, a, b, foreign, Uuid::now_v7()]), &[]).await,
            sorted(vec![a, b])
        );
    },

    recipients_and_counters => async |db| {
        let w = world(&db).await;
        let org = w.org_id;
        let c = campaign(org, Status::Running);
        db.insert_campaign(&c).await.unwrap();
        let people: Vec<Uuid> = {
            let mut v = Vec::new();
            for i in 0..6 {
                v.push(tag(&db, org, &format!("44770090010{i}"), &[]).await);
            }
            sorted(v)
        };
        let recipients: Vec<NewRecipient> = people
            .iter()
            .enumerate()
            .map(|(i, id)| NewRecipient {
                contact_id: *id,
                skipped: (i == 5).then_some(SkipReason::OptedOut),
                variables: Some(vec![format!("v{i}")]),
            })
            .collect();
        let mut tx = db.begin().await.unwrap();
        tx.replace_recipients(c.id, &recipients, T0).await.unwrap();
        tx.commit().await.unwrap();
        let counts = db.campaign_counts(c.id).await.unwrap();
        assert_eq!(counts, CampaignCounts { pending: 5, skipped: 1, ..Default::default() });
        assert_eq!(db.campaign_reasons(c.id).await.unwrap(), vec![(ReasonKind::Skipped, "opted_out".into(), 1)]);
        // Pending recipients in contact order, with their stored values.
        let pending = db.pending_recipients(c.id, "100", 3).await.unwrap();
        assert_eq!(pending.iter().map(|p| p.contact_id).collect::<Vec<_>>(), people[..3].to_vec());
        assert_eq!(pending[0].variables.as_ref().map(|v| v.0.clone()), Some(vec!["v0".to_string()]));
        // Messaged (twice for one: the second changes nothing), skipped, expired.
        let m0 = queued_message(&db, &w, "100", T0, None, Some(c.id)).await;
        let mut tx = db.begin().await.unwrap();
        assert_eq!(tx.mark_recipients_messaged(c.id, &[(people[0], m0), (people[1], Uuid::now_v7())], T0).await.unwrap(), 2);
        assert_eq!(tx.mark_recipients_messaged(c.id, &[(people[0], Uuid::now_v7())], T0).await.unwrap(), 0);
        assert_eq!(tx.skip_recipients(c.id, &[people[2], people[5]], SkipReason::VariableInvalid, T0).await.unwrap(), 1);
        tx.commit().await.unwrap();
        // A status change moves its recipient between buckets in its message's shard.
        let mut tx = db.begin().await.unwrap();
        let mv = |shard: i64, from: Bucket, to: Bucket, n: i64| CountMove { campaign_id: c.id, shard, from, to, n };
        let (s0, s1) = (counter_shard(m0), (counter_shard(m0) + 1) % COUNTER_SHARDS);
        // Netted per row: two moves through `sent` in one shard, one that moves nothing, and
        // an empty one in another shard.
        tx.move_campaign_counts(&[
            mv(s0, Bucket::Queued, Bucket::Sent, 2),
            mv(s0, Bucket::Sent, Bucket::Failed, 1),
            mv(s0, Bucket::Failed, Bucket::Failed, 5),
            mv(s1, Bucket::Queued, Bucket::Read, 0),
        ]).await.unwrap();
        tx.move_campaign_counts(&[mv(s0, Bucket::Sent, Bucket::Queued, 1)]).await.unwrap();
        tx.add_campaign_reason(c.id, ReasonKind::Failed, "recipient_not_on_whatsapp", 1).await.unwrap();
        assert_eq!(tx.expire_recipients(c.id, T0).await.unwrap(), 2);
        tx.commit().await.unwrap();
        let counts = db.campaign_counts(c.id).await.unwrap();
        assert_eq!(
            counts,
            CampaignCounts { queued: 1, failed: 1, skipped: 2, expired: 2, ..Default::default() }
        );
        assert_eq!(counts.total(), 6);
        assert_eq!(counts.open(), 1);
        let reasons = db.campaign_reasons(c.id).await.unwrap();
        assert!(reasons.contains(&(ReasonKind::Skipped, "variable_invalid".into(), 1)), "{reasons:?}");
        assert!(reasons.contains(&(ReasonKind::Failed, "recipient_not_on_whatsapp".into(), 1)), "{reasons:?}");
        // Recipients as the API lists them: a messaged one at its message's status.
        let all = db.list_campaign_recipients(c.id, None, None, 10).await.unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!((all[0].status, all[0].message_id), (Bucket::Queued, Some(m0)));
        let expired = db.list_campaign_recipients(c.id, Some(Bucket::Expired), None, 10).await.unwrap();
        assert_eq!(expired.iter().map(|r| r.contact_id).collect::<Vec<_>>(), people[3..5].to_vec());
        let page = db.list_campaign_recipients(c.id, None, Some(people[3]), 10).await.unwrap();
        assert_eq!(page.iter().map(|r| r.contact_id).collect::<Vec<_>>(), people[4..].to_vec());
        // The newest outcomes: none yet (the one message is still queued).
        assert!(db.campaign_last_outcomes(c.id, 100).await.unwrap().is_empty());
        // Resolving again starts over.
        let mut tx = db.begin().await.unwrap();
        tx.replace_recipients(c.id, &recipients[..2], T0).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(db.campaign_counts(c.id).await.unwrap(), CampaignCounts { pending: 2, ..Default::default() });
        assert!(db.campaign_reasons(c.id).await.unwrap().is_empty());
    },

    // At a campaign's expiry its messages still waiting in the queue fail and leave it
    // (a claimed one is left to its claim, another campaign's untouched); their recipients
    // end expired, keeping the message. Paused campaigns past expiry are the worker's too.
    campaign_queue_expiry => async |db| {
        let w = world(&db).await;
        let c = campaign(w.org_id, Status::Running);
        db.insert_campaign(&c).await.unwrap();
        let other = campaign(w.org_id, Status::Running);
        db.insert_campaign(&other).await.unwrap();
        let mut held = campaign(w.org_id, Status::Paused);
        held.expires_at = Some(T0 + 50);
        db.insert_campaign(&held).await.unwrap();
        let mut active = db.active_campaigns(T0 + 49, 10).await.unwrap();
        active.sort();
        let mut want = vec![(w.org_id, c.id), (w.org_id, other.id)];
        want.sort();
        assert_eq!(active, want);
        assert_eq!(db.active_campaigns(T0 + 50, 10).await.unwrap().len(), 3);

        let claimed = queued_message(&db, &w, "100", T0, None, Some(c.id)).await;
        let waiting = queued_message(&db, &w, "100", T0 + 1, None, Some(c.id)).await;
        let theirs = queued_message(&db, &w, "100", T0 + 2, None, Some(other.id)).await;
        let got = db.status_writes().claim_dispatch(&claim("w", Some("100"), 1, T0 + 10)).await.unwrap();
        assert_eq!(ids(&got), vec![claimed]);
        let mut tx = db.begin().await.unwrap();
        tx.replace_recipients(c.id, &[NewRecipient { contact_id: w.contact_id, skipped: None, variables: None }], T0)
            .await
            .unwrap();
        tx.mark_recipients_messaged(c.id, &[(w.contact_id, waiting)], T0).await.unwrap();
        tx.commit().await.unwrap();

        let failure = tern_domain::failure::Failure::tern("campaign_expired", "expired");
        let mut tx = db.begin().await.unwrap();
        let before = tx.status_writes().fail_queued_campaign_messages(c.id, "100", &failure, T0 + 20, 10).await.unwrap();
        assert_eq!(before.iter().map(|m| (m.id, m.status)).collect::<Vec<_>>(),
                   vec![(waiting, tern_domain::message::Status::Accepted)]);
        assert_eq!(tx.expire_messaged_recipients(c.id, &[w.contact_id], T0 + 20).await.unwrap(), 1);
        assert!(tx.status_writes().fail_queued_campaign_messages(c.id, "100", &failure, T0 + 20, 10).await.unwrap().is_empty());
        tx.commit().await.unwrap();
        let m = db.get_message(w.org_id, waiting).await.unwrap().unwrap();
        assert_eq!((m.status, m.failed_at, m.failure_code.as_deref()),
                   (tern_domain::message::Status::Failed, Some(T0 + 20), Some("campaign_expired")));
        assert_eq!(m.failure, Some(failure));
        assert_eq!(db.dispatch_info(waiting).await.unwrap().dispatch_state, None);
        assert_eq!(db.dispatch_info(claimed).await.unwrap().dispatch_state.as_deref(), Some("in_flight"));
        assert_eq!(db.dispatch_info(theirs).await.unwrap().dispatch_state.as_deref(), Some("queued"));
        let expired = db.list_campaign_recipients(c.id, Some(Bucket::Expired), None, 10).await.unwrap();
        assert_eq!(expired.len(), 1);
        assert_eq!((expired[0].message_id, expired[0].reason.as_deref()), (Some(waiting), None));
    },
}
