//! A subscription follows its key (DESIGN.md "Events"): revoking the key disables its
//! subscriptions (`key_revoked`) so its receivers get nothing more; rotating the key moves
//! them to the new key, which sees them and whose receivers keep receiving.

use super::delivery::{app_for, consent, new_contact, received, subscribe};
use crate::common::{Backend, send};
use crate::media::fixture::FileServer;
use uuid::Uuid;

async fn subscriptions_follow_their_key(backend: Backend) {
    let files = FileServer::start().await;
    let app = app_for(backend, &files, "0,0").start().await;
    let org: Uuid = app.org_id.parse().unwrap();
    let (revoked_id, revoked) = app.owner_key("full_access").await;
    let (rotated_id, rotated) = app.owner_key("full_access").await;
    let (_, kept) = app.owner_key("full_access").await;
    let ev = ["contact.consent"];
    let (gone_sub, _) = subscribe(&app, &revoked, &files.url("/flaky/revoked/0"), &ev).await;
    let (moved_sub, _) = subscribe(&app, &rotated, &files.url("/flaky/rotated/0"), &ev).await;
    subscribe(&app, &kept, &files.url("/flaky/kept/0"), &ev).await;
    let contact = new_contact(&app, &kept, "+447700900124").await;
    consent(&app, &kept, &contact, "opted_out").await;
    app.settle().await;
    for path in ["/flaky/revoked/0", "/flaky/rotated/0", "/flaky/kept/0"] {
        assert_eq!(received(&files, path).len(), 1, "{path}");
    }

    app.admin(&["key", "revoke", "--key-id", &revoked_id])
        .await
        .unwrap();
    let rotation = app
        .admin(&["key", "rotate", "--key-id", &rotated_id])
        .await
        .unwrap();
    let new_key = rotation["key"].as_str().unwrap();
    let new_id: Uuid = rotation["id"].as_str().unwrap().parse().unwrap();

    // The revoked key's subscription is disabled, with the reason.
    let sub = app
        .db
        .get_webhook_subscription(org, revoked_id.parse().unwrap(), gone_sub.parse().unwrap())
        .await
        .unwrap()
        .expect("kept, disabled");
    assert!(!sub.enabled);
    assert_eq!(sub.disabled_reason.as_deref(), Some("key_revoked"));
    // The rotated key's subscription now belongs to the new key, still enabled.
    let (s, _, page) = send(
        app.http
            .get(app.url("/api/public/v1/webhook-subscriptions"))
            .bearer_auth(new_key),
    )
    .await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(page["data"].as_array().unwrap().len(), 1, "{page}");
    assert_eq!(page["data"][0]["id"], moved_sub.as_str());
    assert_eq!(page["data"][0]["enabled"], true);
    assert!(
        app.db
            .get_webhook_subscription(org, new_id, moved_sub.parse().unwrap())
            .await
            .unwrap()
            .is_some()
    );

    // The next event reaches the kept and the moved subscription, and is not even queued
    // for the revoked key's.
    consent(&app, &kept, &contact, "opted_in").await;
    app.settle().await;
    assert_eq!(received(&files, "/flaky/kept/0").len(), 2);
    assert_eq!(received(&files, "/flaky/rotated/0").len(), 2);
    let second = &received(&files, "/flaky/kept/0")[1].2;
    let deliveries = app
        .db
        .webhook_deliveries_of_event(second["id"].as_str().unwrap().parse().unwrap())
        .await
        .unwrap();
    let to: Vec<String> = deliveries
        .iter()
        .map(|d| d.subscription_id.to_string())
        .collect();
    assert_eq!(to.len(), 2, "{to:?}");
    assert!(
        !to.contains(&gone_sub),
        "nothing queued for the revoked key's receiver"
    );
    assert_eq!(received(&files, "/flaky/revoked/0").len(), 1);
    files.stop();
    app.stop().await;
}

tern_store::both_backends! { Backend;
    subscriptions_follow_their_key,
}
