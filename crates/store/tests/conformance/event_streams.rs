//! Event streams on the webhook outbox: one stream per (key, types), not a subscription to
//! the customer; the fan-out numbers the events streams want in their organisation's order
//! (no rows for the HTTP workers, none per stream), a stream reads after its position under
//! a lease, and streams expire by the prune.

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

fn hook_spec(org_id: Uuid, api_key_id: Uuid) -> NewSubscription {
    NewSubscription {
        id: Uuid::now_v7(),
        org_id,
        api_key_id,
        url: "https://hooks.example.com/tern".into(),
        event_types: vec!["contact.consent".into()],
        secret_enc: vec![1],
        enabled: true,
        description: None,
        created_at: T0,
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    streams_ride_the_outbox => async |db| {
        let (org, _, key) = org_with_key(&db).await;
        let types = vec!["contact.consent".to_string(), "message.status".to_string()];
        let s = db.open_event_stream(org.id, key.id, &types, "conn-1", T0).await.unwrap();
        assert!(s.created);
        assert_eq!(s.start_seq, 0);
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

        // An event a stream wants is stored like a subscription's and numbered at fan-out;
        // the HTTP workers get no row for the stream and never wait for it.
        let hook = db.insert_webhook_subscription(&hook_spec(org.id, key.id)).await.unwrap();
        let e1 = event(org.id, "contact.consent", T0 + 10);
        assert_eq!(db.emit_event(&e1).await.unwrap(), 2);
        assert_eq!(db.fan_out_events(10).await.unwrap(), (1, 1), "one row for the workers");
        let jobs = db.claim_webhook_deliveries("w", T0 + 100, LEASE, 10, 10).await.unwrap();
        assert_eq!(jobs.iter().map(|j| j.subscription_id).collect::<Vec<_>>(), [hook.id]);
        assert_eq!(db.next_webhook_delivery_due().await.unwrap(), Some(T0 + 100 + LEASE));
        assert!(db.claim_webhook_deliveries("w", T0 + 200, LEASE, 10, 10).await.unwrap().is_empty());
        assert_eq!(db.stream_head(org.id).await.unwrap(), 1);
        assert_eq!(db.webhook_deliveries_of_event(e1.id).await.unwrap().len(), 1, "the hook's only");
        let rows = db.stream_events_after(org.id, &types, 0, 10).await.unwrap();
        assert_eq!(rows.iter().map(|r| (r.event_id, r.stream_seq)).collect::<Vec<_>>(), [(e1.id, 1)]);
        assert_eq!(rows[0].payload, e1.payload, "the exact body");
        assert_eq!(rows[0].event_type, "contact.consent");
        // Another stream's types do not see it.
        let status_only = ["message.status".to_string()];
        assert!(db.stream_events_after(org.id, &status_only, 0, 10).await.unwrap().is_empty());
        assert_eq!(db.stream_position_of(org.id, &status_only, 0, e1.id).await.unwrap(), None);
        assert_eq!(db.stream_position_of(org.id, &types, 0, e1.id).await.unwrap(), Some(1));
        // The lease: the connection taken over no longer holds it.
        assert!(!db.holds_stream(s.id, "conn-1").await.unwrap());
        assert!(db.holds_stream(s.id, "conn-2").await.unwrap());

        // An event committed late (older than one numbered) comes after it: the order is
        // the fan-out's, so a position never skips it.
        let e0 = event(org.id, "contact.consent", T0 + 5);
        db.emit_event(&e0).await.unwrap();
        assert_eq!(db.fan_out_events(10).await.unwrap(), (1, 1));
        let rows = db.stream_events_after(org.id, &types, 1, 10).await.unwrap();
        assert_eq!(rows.iter().map(|r| (r.event_id, r.stream_seq)).collect::<Vec<_>>(), [(e0.id, 2)]);
        // Several events in one fan-out are numbered in event order; a limit reads the first.
        let (a, b) = (event(org.id, "message.status", T0 + 20), event(org.id, "message.status", T0 + 21));
        db.emit_event(&b).await.unwrap();
        db.emit_event(&a).await.unwrap();
        assert_eq!(db.fan_out_events(10).await.unwrap(), (2, 0));
        let rows = db.stream_events_after(org.id, &types, 2, 1).await.unwrap();
        assert_eq!(rows.iter().map(|r| (r.event_id, r.stream_seq)).collect::<Vec<_>>(), [(a.id, 3)]);
        assert_eq!(db.stream_events_after(org.id, &types, 3, 10).await.unwrap()[0].event_id, b.id);
        assert_eq!(db.stream_head(org.id).await.unwrap(), 4);

        // A stream registered now starts at the head: earlier events are not its own.
        let later = db
            .open_event_stream(org.id, key.id, &["contact.consent".to_string()], "conn-5", T0 + 300)
            .await
            .unwrap();
        assert_eq!((later.start_seq, later.created), (4, true));
        assert_eq!(
            db.stream_position_of(org.id, &["contact.consent".to_string()], 4, e1.id).await.unwrap(),
            None
        );
        // An event only a subscription wants is never numbered.
        let templates = db
            .insert_webhook_subscription(&NewSubscription {
                id: Uuid::now_v7(),
                url: "https://hooks.example.com/templates".into(),
                event_types: vec!["template.status".into()],
                ..hook_spec(org.id, key.id)
            })
            .await
            .unwrap();
        let quiet = event(org.id, "template.status", T0 + 30);
        assert_eq!(db.emit_event(&quiet).await.unwrap(), 1);
        assert_eq!(db.fan_out_events(10).await.unwrap(), (1, 1));
        assert_eq!(db.webhook_deliveries_of_event(quiet.id).await.unwrap()[0].subscription_id, templates.id);
        assert_eq!(db.stream_head(org.id).await.unwrap(), 4);

        let listed = db.list_event_streams(org.id).await.unwrap();
        assert_eq!(listed.len(), 3);
        let mine = listed.iter().find(|l| l.id == s.id).unwrap();
        assert_eq!(
            (mine.lease_owner.as_deref(), mine.start_seq, mine.event_types.clone()),
            (Some("conn-2"), 0, types.clone())
        );
        // Released: the 24 hours start; a renewal by the old owner fails.
        assert!(db.renew_stream_lease(s.id, "conn-2", T0 + 400).await.unwrap());
        db.release_event_stream(s.id, "conn-2", T0 + 500).await.unwrap();
        assert!(!db.renew_stream_lease(s.id, "conn-2", T0 + 600).await.unwrap());
        assert!(!db.holds_stream(s.id, "conn-2").await.unwrap());
        // Expired streams go; their events are then the prune's.
        assert_eq!(db.prune_event_streams(T0 + 500).await.unwrap(), 2, "the others");
        assert_eq!(db.prune_event_streams(T0 + 501).await.unwrap(), 1);
        assert!(db.list_event_streams(org.id).await.unwrap().is_empty());
        assert_eq!(db.count_org_events(org.id).await.unwrap(), 5);
      assert_eq!(db.webhook_deliveries_of_event(e1.id).await.unwrap().len(), 1);
    },
}
