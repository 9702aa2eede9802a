//! The campaigns pages over HTTP with a real session (APP.md §4): the list with progress, a
//! campaign's page and its live fragment, Pause / Resume offered and accepted only for a
//! role holding `campaigns.send` (a crafted POST from another role refused in words), the
//! core's refusals in words, another organisation's campaign 404, escaping.

use super::keys::follow;
use super::signed_in;
use crate::campaigns::{act, approved_template, call, contact, create};
use crate::common::TestApp;
use crate::messages::PNID;
use serde_json::json;

async fn status_of(app: &TestApp, key: &str, id: &str) -> String {
    let (s, _, c) = call(app, key, "GET", &format!("/campaigns/{id}"), None).await;
    assert_eq!(s, 200, "{c}");
    c["status"].as_str().unwrap().to_string()
}

async fn pages_and_actions(app: &TestApp) {
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    let (_, key) = app.owner_key("full_access").await;
    approved_template(app, "promo", 0).await;
    contact(app, &key, json!({"phone": "+14155550201", "tags": ["vip"]})).await;
    contact(app, &key, json!({"phone": "+14155550202", "tags": ["vip"]})).await;
    let owner = signed_in(app, &app.org_id, "camp-owner@acme.test", "owner").await;
    let dev = signed_in(app, &app.org_id, "camp-dev@acme.test", "developer").await;

    let (s, empty) = owner.get("/app/campaigns").await;
    assert_eq!(s, 200);
    assert!(
        empty.contains("No campaign yet") && empty.contains("POST /campaigns"),
        "{empty}"
    );

    let body = json!({"name": "<b>Spring</b> sale", "template": {"name": "promo", "language": "en_US"},
                      "audience": {"tags": ["vip"]}});
    let c = create(app, &key, body.clone()).await;
    let id = c["id"].as_str().unwrap().to_string();
    let draft = create(
        app,
        &key,
        json!({"name": "Later", "template": {"name": "promo", "language": "en_US"},
                      "audience": {"tags": ["vip"]}}),
    )
    .await;
    let draft_id = draft["id"].as_str().unwrap().to_string();
    let (s, r) = act(app, &key, &id, "launch", None).await;
    assert_eq!((s, r["status"].as_str()), (200, Some("running")), "{r}");

    // The list: both, names escaped, progress.
    let (s, h, list) = owner.get_full("/app/campaigns").await;
    assert_eq!(s, 200);
    assert_eq!(h["cache-control"], "no-store");
    assert!(
        list.contains(&format!("href=\"/app/campaigns/{id}\"")),
        "{list}"
    );
    assert!(list.contains(&format!("href=\"/app/campaigns/{draft_id}\"")));
    assert!(
        list.contains("&#60;b&#62;Spring&#60;/b&#62; sale") && !list.contains("<b>Spring"),
        "{list}"
    );
    assert!(list.contains("<progress") && list.contains("Running") && list.contains("Draft"));

    // A running campaign's page: live, counts, its messages' link, Pause for the owner.
    let page_of = format!("/app/campaigns/{id}");
    let (s, page) = owner.get(&page_of).await;
    assert_eq!(s, 200, "{page}");
    assert!(page.contains("data-final=\"false\"") && page.contains("data-status=\"running\""));
    assert!(page.contains(&format!("/app/messages?campaign={id}")));
    assert!(page.contains("of 2 recipients handled"), "{page}");
    assert!(page.contains("id=\"campaign-pause\"") && !page.contains("id=\"campaign-resume\""));
    let (s, h, frag) = owner.get_full(&format!("{page_of}/live")).await;
    assert_eq!(s, 200);
    assert_eq!(h["cache-control"], "no-store");
    assert!(frag.trim_start().starts_with("<div id=\"campaign-live\"") && !frag.contains("<html"));

    // A developer sees no buttons, and a crafted POST is refused in words.
    let (_, page) = dev.get(&page_of).await;
    assert!(!page.contains("id=\"campaign-pause\""), "{page}");
    assert!(page.contains("Owners and admins can pause and resume"));
    let (s, _, refused) = dev.post(&format!("{page_of}/pause"), &[]).await;
    assert_eq!(s, 403);
    assert!(
        refused.contains("cannot pause or resume campaigns"),
        "{refused}"
    );
    assert_eq!(status_of(app, &key, &id).await, "running");

    // The owner pauses, then resumes, through the API's use case.
    let (s, page) = follow(&owner, owner.post(&format!("{page_of}/pause"), &[]).await).await;
    assert_eq!(s, 200);
    assert!(page.contains("The campaign is paused"), "{page}");
    assert!(page.contains("id=\"campaign-resume\"") && page.contains("paused by a person"));
    assert!(
        page.contains("data-final=\"true\""),
        "a paused campaign does not move"
    );
    assert_eq!(status_of(app, &key, &id).await, "paused");
    let (_, page) = follow(&owner, owner.post(&format!("{page_of}/resume"), &[]).await).await;
    assert!(page.contains("running again"), "{page}");
    assert_eq!(status_of(app, &key, &id).await, "running");
    // A draft cannot pause: the core's words, nothing changed.
    let (_, page) = follow(
        &owner,
        owner
            .post(&format!("/app/campaigns/{draft_id}/pause"), &[])
            .await,
    )
    .await;
    assert!(
        page.contains("Nothing changed") && page.contains("draft"),
        "{page}"
    );
    assert_eq!(status_of(app, &key, &draft_id).await, "draft");

    // Another organisation's campaign: 404 for pages and actions.
    let (other, other_key) = app
        .other_org("Globex", tern_domain::auth::Preset::FullAccess)
        .await;
    app.add_number(&other, "900555", "+14155550155").await;
    let theirs = create(app, &other_key, body).await;
    let theirs = theirs["id"].as_str().unwrap();
    assert_eq!(owner.get(&format!("/app/campaigns/{theirs}")).await.0, 404);
    assert_eq!(
        owner.get(&format!("/app/campaigns/{theirs}/live")).await.0,
        404
    );
    assert_eq!(
        owner
            .post(&format!("/app/campaigns/{theirs}/pause"), &[])
            .await
            .0,
        404
    );
    assert_eq!(owner.get("/app/campaigns/nope").await.0, 404);
    let (_, list) = owner.get("/app/campaigns").await;
    assert!(!list.contains(theirs));
}

tern_store::both_backends! { TestApp;
    campaign_pages_pause_and_resume_by_role => pages_and_actions,
}
