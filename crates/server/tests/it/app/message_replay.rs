//! "Replay" of one failed webhook delivery from a message's page (APP.md §4), over HTTP on
//! both backends: the delivery is queued again with its attempt count kept, the receiver
//! then gets it; refused in words for a person who does not manage the endpoint's key, 404
//! for another organisation's person; audited.

use super::keys::follow;
use super::{audit_of, signed_in};
use crate::common::{Backend, TestApp, eventually_within};
use crate::customers::{deliver, text_from};
use crate::media::fixture::FileServer;
use serde_json::json;
use std::time::Duration;
use uuid::Uuid;

const PNID: &str = "900100";
const PHONE: &str = "447700900001";

/// An app whose deliveries reach the loopback receiver, retried once at once.
async fn app_with_receiver(backend: Backend, files: &FileServer) -> TestApp {
    let ca = files.ca_file.path().to_path_buf();
    TestApp::builder(backend)
        .configure(move |c| {
            c.extra_ca_file = Some(ca);
            c.allow_networks = vec!["127.0.0.1/32".parse().unwrap()];
            c.webhook_retry_schedule = tern_domain::events::RetrySchedule::parse("0").unwrap();
        })
        .start()
        .await
}

async fn replay_one_delivery(backend: Backend) {
    let files = FileServer::start().await;
    let app = app_with_receiver(backend, &files).await;
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    let (key_id, key) = app.owner_key("full_access").await;
    // Fails twice (the first attempt and its one retry), then takes what comes.
    let path = format!("/flaky/replay-{}/2", Uuid::now_v7().simple());
    let (s, _, sub) = crate::common::send(
        app.http
            .post(app.url("/api/public/v1/webhook-subscriptions"))
            .bearer_auth(&key)
            .json(&json!({"url": files.url(&path), "events": ["message.received"]})),
    )
    .await;
    assert_eq!(s, 201, "{sub}");
    let sub_id: Uuid = sub["id"].as_str().unwrap().parse().unwrap();
    deliver(
        &app,
        &text_from(Some(PHONE), None, None, "where is my order?"),
    )
    .await;
    app.settle().await;
    let attempts = |app: &TestApp| {
        let db = app.db.clone();
        let org = app.org_uuid();
        let key: Uuid = key_id.parse().unwrap();
        async move {
            db.list_webhook_attempts(org, key, sub_id, None, None, 20)
                .await
                .unwrap()
        }
    };
    let log = attempts(&app).await;
    assert_eq!(log.len(), 2, "{log:?}");
    let event_id = log[0].event_id;
    let delivery = app.db.webhook_deliveries_of_event(event_id).await.unwrap();
    assert_eq!(delivery[0].status, tern_store::DeliveryStatus::Failed);
    let msg = app
        .db
        .explore_messages(&tern_store::ExplorerQuery {
            org_id: app.org_uuid(),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .remove(0);
    let here = format!("/app/messages/{}/replay", msg.id);
    let form = [
        ("subscription_id", sub_id.to_string()),
        ("event_id", event_id.to_string()),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();

    // A developer does not manage the owner's key: refused in words, nothing queued.
    let dev = signed_in(&app, &app.org_id, "replay-dev@acme.test", "developer").await;
    let (s, page) = follow(&dev, dev.post(&here, &form).await).await;
    assert_eq!(s, 200);
    assert!(
        page.contains("Only owners, admins and the creator of the key"),
        "{page}"
    );
    let delivery = app.db.webhook_deliveries_of_event(event_id).await.unwrap();
    assert_eq!(delivery[0].status, tern_store::DeliveryStatus::Failed);

    // Another organisation's person cannot reach the message at all.
    let other = app.new_org("Initech", "growth").await;
    let stranger = signed_in(&app, &other, "stranger@initech.test", "owner").await;
    assert_eq!(stranger.post(&here, &form).await.0, 404);

    // The owner replays: queued now, attempt 3 reaches the receiver, which takes it.
    let owner = signed_in(&app, &app.org_id, "replay-owner@acme.test", "owner").await;
    let (s, page) = follow(&owner, owner.post(&here, &form).await).await;
    assert_eq!(s, 200);
    assert!(page.contains("The delivery is queued again"), "{page}");
    app.settle().await;
    let log = eventually_within(Duration::from_secs(20), "the replayed attempt", || {
        let f = attempts(&app);
        async move {
            let log = f.await;
            (log.len() == 3).then_some(log)
        }
    })
    .await;
    assert_eq!(log[0].attempt, 3, "numbered on from the last");
    assert_eq!(log[0].status, tern_store::AttemptStatus::Succeeded);
    let got = files
        .hooks
        .lock()
        .unwrap()
        .iter()
        .filter(|(h, _)| h.get("x-test-path").is_some_and(|p| p == path.as_str()))
        .count();
    assert_eq!(got, 3, "the receiver got the delivery a third time");
    assert!(
        audit_of(&app, &app.org_id)
            .await
            .iter()
            .any(|(a, who)| a == "subscription.delivery_replayed" && who.contains("replay-owner")),
        "audited"
    );
    // Again: it already succeeded, nothing queued.
    let (_, page) = follow(&owner, owner.post(&here, &form).await).await;
    assert!(page.contains("already took this delivery"), "{page}");
    // A disabled endpoint: explained.
    app.db
        .disable_webhook_subscription(
            sub_id,
            tern_domain::events::subscription::DisabledReason::Gone,
            tern_domain::time::now_ms(),
        )
        .await
        .unwrap();
    let (_, page) = follow(&owner, owner.post(&here, &form).await).await;
    assert!(page.contains("The endpoint is disabled"), "{page}");
    app.stop().await;
    files.stop();
}

tern_store::both_backends! { Backend;
    replay_requeues_one_failed_delivery_for_who_may => replay_one_delivery,
}
