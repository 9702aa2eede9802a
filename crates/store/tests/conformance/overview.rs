//! The reads of the app's overview and usage pages.

use crate::fixtures::{self, T0};
use serde_json::json;
use tern_domain::message::{Direction, Status};
use tern_store::{
    AttemptRecord, Db, DeliveryOutcome, Message, MessageCount, NewEvent, NewSubscription,
};
use uuid::Uuid;

const HOUR: i64 = 60 * 60 * 1000;

/// A message of `org` on `number` (conversation `conv` with `contact`) created at `at`.
fn message(org: Uuid, conv: Uuid, contact: Uuid, number: &str, status: Status, at: i64) -> Message {
    Message {
        id: Uuid::now_v7(),
        org_id: org,
        conversation_id: conv,
        contact_id: contact,
        phone_number_id: number.into(),
        direction: Direction::Outbound,
        r#type: "text".into(),
        status,
        template_name: None,
        template_language: None,
        text: Some("hi".into()),
        media_id: None,
        wamid: None,
        request: json!({"to": "49100", "type": "text", "text": {"body": "hi"}}),
        campaign_id: None,
        created_at: at,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: (status == Status::Failed).then_some(at),
        failure_code: (status == Status::Failed).then(|| "recipient_not_on_whatsapp".into()),
        failure: None,
        updated_at: at,
        content: None,
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    }
}

/// An organisation with one number, a contact and their conversation: (org, conv, contact).
async fn setup(db: &Db, number: &str) -> (Uuid, Uuid, Uuid) {
    let org = fixtures::insert_org(db).await;
    db.insert_phone_number(&fixtures::phone_number(org.id, number))
        .await
        .unwrap();
    let contact = fixtures::insert_contact(db, org.id, &format!("49{number}"), T0).await;
    let conv = db
        .get_or_create_conversation(org.id, contact.id, number, Uuid::now_v7(), T0)
        .await
        .unwrap();
    (org.id, conv.id, contact.id)
}

fn sorted(mut v: Vec<MessageCount>) -> Vec<(String, Status, Option<String>, i64)> {
    v.sort_by_key(|c| {
        (
            c.phone_number_id.clone(),
            c.status.as_str(),
            c.failure_code.clone(),
        )
    });
    v.into_iter()
        .map(|c| (c.phone_number_id, c.status, c.failure_code, c.count))
        .collect()
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    messages_since_a_time_are_counted_by_number_status_and_failure => async |db| {
        let now = tern_domain::time::now_ms();
        let (org, conv, contact) = setup(&db, "1001").await;
        let (other, oconv, ocontact) = setup(&db, "2002").await;
        let m = |s, at| message(org, conv, contact, "1001", s, at);
        for msg in [
            m(Status::Sent, now - HOUR),
            m(Status::Sent, now - 2 * HOUR),
            m(Status::Failed, now - HOUR),
            m(Status::Read, now),
            // Before the window: not counted.
            m(Status::Sent, now - 30 * HOUR),
            // Another organisation's.
            message(other, oconv, ocontact, "2002", Status::Sent, now),
        ] {
            assert!(db.insert_message(&msg).await.unwrap());
        }
        let counts = sorted(db.message_counts_since(org, now - 24 * HOUR).await.unwrap());
        assert_eq!(counts, [
            ("1001".to_string(), Status::Failed, Some("recipient_not_on_whatsapp".to_string()), 1),
            ("1001".to_string(), Status::Read, None, 1),
            ("1001".to_string(), Status::Sent, None, 2),
        ]);
        assert!(db.message_counts_since(Uuid::now_v7(), 0).await.unwrap().is_empty());
    },

    subscriptions_show_their_recent_failures => async |db| {
        let (org, _, key) = fixtures::org_with_key(&db).await;
        let mk = |enabled: bool| NewSubscription {
            id: Uuid::now_v7(),
            org_id: org.id,
            api_key_id: key.id,
            url: "https://hooks.example.com/tern".into(),
            event_types: vec!["message.status".into()],
            secret_enc: vec![1, 2, 3],
            enabled,
            description: None,
            created_at: T0,
        };
        let failing = db.insert_webhook_subscription(&mk(true)).await.unwrap();
        let quiet = db.insert_webhook_subscription(&mk(false)).await.unwrap();
        let attempt = |at: i64| AttemptRecord {
            id: Uuid::now_v7(),
            response_status: Some(500),
            latency_ms: 3,
            error: None,
            created_at: at,
            response_body: None,
        };
        for (at, outcome) in [
            (T0 + 10, DeliveryOutcome::Retry { next_attempt_at: T0 + 20 }),
            (T0 + 30, DeliveryOutcome::Failed),
        ] {
            let e = NewEvent {
                id: Uuid::now_v7(),
                org_id: org.id,
                event_type: "message.status".into(),
                payload: "{}".into(),
                created_at: T0,
                message_id: None,
            };
            let id = db.insert_event_for_subscription(&e, failing.id).await.unwrap();
            db.claim_webhook_deliveries("w", at, 30_000, 1, 1).await.unwrap();
            assert!(db.record_webhook_attempt(id, "w", &attempt(at), outcome).await.unwrap());
        }
        let health = db.webhook_health_since(org.id, T0).await.unwrap();
        assert_eq!(health.len(), 2);
        let f = health.iter().find(|h| h.id == failing.id).unwrap();
        assert_eq!((f.enabled, f.failed_attempts, f.failed_deliveries, f.last_failure_at), (true, 2, 1, Some(T0 + 30)));
        let q = health.iter().find(|h| h.id == quiet.id).unwrap();
        assert_eq!((q.enabled, q.failed_attempts, q.failed_deliveries, q.last_failure_at), (false, 0, 0, None));
        // Only failures since the time count.
        let later = db.webhook_health_since(org.id, T0 + 31).await.unwrap();
        assert!(later.iter().all(|h| h.failed_attempts == 0 && h.failed_deliveries == 0));
        assert!(db.webhook_health_since(Uuid::now_v7(), 0).await.unwrap().is_empty());
    },

    the_ledger_lists_the_latest_entries_first => async |db| {
        let org = fixtures::insert_org(&db).await;
        let msg = Uuid::now_v7();
        db.adjust_wallet(org.id, 1000, "top_up", None, T0).await.unwrap();
        db.adjust_wallet(org.id, -30, "message_debit", Some(msg), T0 + 1).await.unwrap();
        db.adjust_wallet(org.id, 30, "message_refund", Some(msg), T0 + 2).await.unwrap();
        let other = fixtures::insert_org(&db).await;
        db.adjust_wallet(other.id, 5, "top_up", None, T0).await.unwrap();
        let ledger = db.list_wallet_ledger(org.id, 2).await.unwrap();
        let seen: Vec<_> = ledger.iter().map(|e| (e.amount_minor, e.reason.as_str(), e.message_id, e.created_at)).collect();
        assert_eq!(seen, [(30, "message_refund", Some(msg), T0 + 2), (-30, "message_debit", Some(msg), T0 + 1)]);
        assert_eq!(db.list_wallet_ledger(org.id, 10).await.unwrap().len(), 3);
    },
    rows_are_counted_as_the_plan_limits_count_them => async |db| {
        let (org, member, _) = fixtures::org_with_key(&db).await;
        let mut revoked = fixtures::api_key(org.id, member.id);
        revoked.revoked_at = Some(T0);
        db.insert_api_key(&revoked).await.unwrap();
        fixtures::insert_contact(&db, org.id, "4911", T0).await;
        fixtures::insert_contact(&db, org.id, "4912", T0).await;
        assert_eq!(db.count_rows(org.id, tern_store::Counted::Contacts).await.unwrap(), 2);
        assert_eq!(db.count_rows(org.id, tern_store::Counted::ActiveApiKeys).await.unwrap(), 1);
        assert_eq!(db.count_rows(org.id, tern_store::Counted::Templates).await.unwrap(), 0);
    },
}
