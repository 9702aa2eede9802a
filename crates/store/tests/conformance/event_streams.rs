//! Event streams on the webhook outbox: one stream per (key, types), not a subscription to
//! the customer, fed by the fan-out with rows the HTTP workers never claim, sent under a
//! lease with increasing send numbers, acknowledged by a reconnect, expired by the prune.

use crate::fixtures::{T0, org_with_key};
use tern_store::{NewEvent, NewSubscription};
use uuid::Uuid;

const LEASE: i64 = 30_000;

fn event(org_id: Uuid, event_type: &str, at: i64) -> NewEvent {
    let id = Uuid::now_v7();
    NewEvent {
        id,
        org_id,
        event_type: event_type.into(),
        payload: format!(r#"{{"id":"{id}", "type":"{event_type}"}}"#),
        created_at: at,
        message_id: None,
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    streams_ride_the_outbox => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let types = vec!["contact.consent".to_string(), "message.status".to_string()];
        let s = db.open_event_stream(org.id, key.id, &types, "conn-1", T0).await.unwrap();
        assert!(s.created);
        assert_eq!(s.base, 0);
        // The same key and types: the same stream, taken over by the newer connection.
        let again = db.open_event_stream(org.id, key.id, &types, "conn-2", T0 + 1).await.unwrap();
        assert_eq!((again.id, again.created), (s.id, false));
        let other = db
            .open_event_stream(org.id, key.id, &["message.status".to_string()], "conn-3", T0)
            .await
            .unwrap();
        assert_ne!(other.id, s.id);
        // Not a subscription to the customer: not listed, counted or found.
        assert!(db.list_webhook_subscriptions(org.id, key.id, None, 10).await.unwrap().is_empty());
        assert_eq!(db.count_webhook_subscriptions(org.id).await.unwrap(), 0);
        assert!(db.get_webhook_subscription(org.id, key.id, s.id).await.unwrap().is_none());
        assert!(db.list_org_webhook_subscriptions(org.id).await.unwrap().is_empty());

        // An event goes to the stream like to a subscription; the HTTP workers never claim
        // the stream's row and never wait for it.
        let hook = db
            .insert_webhook_subscription(&NewSubscription {
                id: Uuid::now_v7(),
                org_id: org.id,
                api_key_id: key.id,
                url: "https://hooks.example.com/tern".into(),
                event_types: vec!["contact.consent".into()],
                secret_enc: vec![1],
                enabled: true,
                description: None,
                created_at: T0,
            })
            .await
            .unwrap();
        let e1 = event(org.id, "contact.consent", T0 + 10);
        assert_eq!(db.emit_event(&e1).await.unwrap(), 2);
        assert_eq!(db.fan_out_events(10).await.unwrap(), (1, 1), "one row for the workers");
        let jobs = db.claim_webhook_deliveries("w", T0 + 100, LEASE, 10, 10).await.unwrap();
        assert_eq!(jobs.iter().map(|j| j.subscription_id).collect::<Vec<_>>(), [hook.id]);
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), Some(T0 + 100 + LEASE));
        assert!(db.claim_webhook_deliveries("w", T0 + 200, LEASE, 10, 10).await.unwrap().is_empty());

        // Sent under the lease: the connection that lost it records nothing.
        let rows = db.stream_pending(s.id, again.base, 10).await.unwrap();
        assert_eq!(rows.iter().map(|r| r.event_id).collect::<Vec<_>>(), [e1.id]);
        assert_eq!(rows[0].payload, e1.payload, "the exact body");
        assert_eq!(rows[0].event_type, "contact.consent");
        let ids = [rows[0].delivery_id];
        assert!(!db.record_stream_sends(s.id, "conn-1", &ids, T0 + 200).await.unwrap());
        assert_eq!(db.stream_sent_seq(s.id, e1.id).await.unwrap(), None);
        assert!(db.record_stream_sends(s.id, "conn-2", &ids, T0 + 200).await.unwrap());
        assert_eq!(db.stream_sent_seq(s.id, e1.id).await.unwrap(), Some(1));
        assert!(db.stream_pending(s.id, again.base, 10).await.unwrap().is_empty());
        // Another stream's row is not this one's.
        assert_eq!(db.stream_sent_seq(other.id, e1.id).await.unwrap(), None);

        // An event committed late (older than one sent) is still sent, after it.
        let e0 = event(org.id, "contact.consent", T0 + 5);
        db.emit_event(&e0).await.unwrap();
        db.fan_out_events(10).await.unwrap();
        let rows = db.stream_pending(s.id, again.base, 10).await.unwrap();
        assert_eq!(rows.iter().map(|r| r.event_id).collect::<Vec<_>>(), [e0.id]);
        assert!(db.record_stream_sends(s.id, "conn-2", &[rows[0].delivery_id], T0 + 210).await.unwrap());
        assert_eq!(db.stream_sent_seq(s.id, e0.id).await.unwrap(), Some(2));

        // A reconnect that received e1 only: e1 acknowledged, e0 (sent after it) again.
        let resumed = db.open_event_stream(org.id, key.id, &types, "conn-4", T0 + 300).await.unwrap();
        assert_eq!(resumed.base, 2);
        assert_eq!(db.ack_stream(s.id, Some(1), T0 + 300).await.unwrap(), 1);
        let rows = db.stream_pending(s.id, resumed.base, 10).await.unwrap();
        assert_eq!(rows.iter().map(|r| r.event_id).collect::<Vec<_>>(), [e0.id]);
        // Starting from now acknowledges everything pending.
        assert_eq!(db.ack_stream(s.id, None, T0 + 300).await.unwrap(), 1);
        assert!(db.stream_pending(s.id, resumed.base, 10).await.unwrap().is_empty());

        let listed = db.list_event_streams(org.id).await.unwrap();
        assert_eq!(listed.len(), 2);
        let mine = listed.iter().find(|l| l.id == s.id).unwrap();
        assert_eq!(
            (mine.lease_owner.as_deref(), mine.last_seq, mine.pending, mine.event_types.clone()),
            (Some("conn-4"), 2, 0, types.clone())
        );
        // Released: the 24 hours start; a renewal by the old owner fails.
        assert!(db.renew_stream_lease(s.id, "conn-4", T0 + 400).await.unwrap());
        db.release_event_stream(s.id, "conn-4", T0 + 500).await.unwrap();
        assert!(!db.renew_stream_lease(s.id, "conn-4", T0 + 600).await.unwrap());
        // Expired streams go with their rows; the events are then the prune's.
        assert_eq!(db.prune_event_streams(T0 + 500).await.unwrap(), 1, "the other one");
        assert_eq!(db.prune_event_streams(T0 + 501).await.unwrap(), 1);
        assert!(db.list_event_streams(org.id).await.unwrap().is_empty());
        assert_eq!(db.count_org_events(org.id).await.unwrap(), 2);
        // The stream's row of e1 went with it; the hook's stays.
        assert_eq!(db.webhook_deliveries_of_event(e1.id).await.unwrap().len(), 1);
    },
}
