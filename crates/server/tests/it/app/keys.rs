//! The keys pages, driven over HTTP with a real session (APP.md §3, §7): a value shown
//! once that works against the public API, role-bounded permissions, the plan explained,
//! identity confirmation, revoke and rotate, another organisation's key, escaping.

use super::{Browser, PASSWORD, cookie_value, signed_in, text};
use crate::common::TestApp;
use uuid::Uuid;

/// The key value on a "shown once" page.
pub fn shown_value(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {html}"));
    let rest = &html[at..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest.find("</code>").unwrap();
    rest[start..end].trim().to_string()
}

/// Follows a 303 with a GET, with the flash cookie it set (the message shows on the next
/// page).
pub async fn follow(
    b: &Browser,
    answer: (u16, reqwest::header::HeaderMap, String),
) -> (u16, String) {
    let (s, h, body) = answer;
    if s != 303 {
        return (s, body);
    }
    let to = h["location"].to_str().unwrap().to_string();
    let mut cookie = format!("tern_session={}", b.session);
    if let Some(flash) = cookie_value(&h, "tern_flash") {
        cookie.push_str(&format!("; tern_flash={flash}"));
    }
    let (s, _, body) = text(
        b.http
            .get(format!("{}{to}", b.base))
            .header("cookie", cookie),
    )
    .await;
    (s, body)
}

/// The organisation's keys named `name`, newest first: (id, revoked).
async fn keys_named(app: &TestApp, org: &str, name: &str) -> Vec<(Uuid, bool)> {
    app.db
        .list_org_api_keys(Uuid::parse_str(org).unwrap())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.key.name == name)
        .map(|r| (r.key.id, r.key.revoked_at.is_some()))
        .collect()
}

/// Status of an API request with `key`.
async fn api_status(app: &TestApp, key: &str) -> u16 {
    app.get("/api/public/v1/phone-numbers", Some(key)).await.0
}

/// Creates a key through the page (with the password): the page and its value.
pub async fn create_key(b: &Browser, name: &str, preset: &str) -> (String, String) {
    let (s, h, page) = b
        .post(
            "/app/keys",
            &[("name", name), ("preset", preset), ("confirm", PASSWORD)],
        )
        .await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(h["cache-control"], "no-store");
    let value = shown_value(&page, "key-value");
    // Never in a cookie or an address.
    for (name, v) in &h {
        assert!(!v.to_str().unwrap_or_default().contains(&value), "{name}");
    }
    (page, value)
}

async fn created_once(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "keys-owner@acme.test", "owner").await;
    let (s, list) = b.get("/app/keys").await;
    assert_eq!(s, 200);
    assert!(list.contains("href=\"/app/keys/new\""), "{list}");
    let (s, form) = b.get("/app/keys/new").await;
    assert_eq!(s, 200);
    for (v, label) in [
        ("send_messages", "Send messages"),
        ("read_only", "Read only"),
        ("full_access", "Full access"),
        ("custom", "Custom"),
    ] {
        assert!(form.contains(&format!("value=\"{v}\"")), "{v}");
        assert!(form.contains(label), "{label}");
    }
    assert!(
        form.contains("name=\"confirm\""),
        "a fresh sign-in is not a confirmation"
    );
    let (page, value) = create_key(&b, "Orders", "send_messages").await;
    assert!(value.starts_with("tern_"), "{value}");
    assert!(page.contains("data-copy=\"#key-value\""));
    assert!(page.contains("never show it again"));
    assert_eq!(api_status(app, &value).await, 200);
    // The list shows the key, never its value; nothing shows it again.
    let (_, list) = b.get("/app/keys").await;
    assert!(list.contains("Orders"));
    assert!(list.contains(&value[..12]), "the prefix");
    assert!(!list.contains(&value));
    assert!(list.contains("messages.send") && list.contains("keys-owner@acme.test"));
    let (_, again) = b.get("/app/keys/new").await;
    assert!(!again.contains(&value));
    // A custom set.
    let (s, _, page) = b
        .post(
            "/app/keys",
            &[
                ("name", "Reader"),
                ("preset", "custom"),
                ("permissions", "messages.read"),
                ("permissions", "contacts.read"),
            ],
        )
        .await;
    assert_eq!(s, 200, "confirmed 5 minutes: {page}");
    let v = shown_value(&page, "key-value");
    assert_eq!(api_status(app, &v).await, 403, "no numbers.read");
}

async fn developer_bounds(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "keys-dev@acme.test", "developer").await;
    let (_, form) = b.get("/app/keys/new").await;
    assert!(form.contains("Developers cannot send messages"), "{form}");
    assert!(form.contains("Developers cannot send campaigns"));
    for id in [
        "preset-send_messages",
        "perm-messages.send",
        "perm-campaigns.send",
    ] {
        let at = form.find(&format!("id=\"{id}\"")).unwrap();
        let tag = &form[at..at + form[at..].find('>').unwrap()];
        assert!(tag.contains(" disabled"), "{id}: {tag}");
    }
    let before = app
        .db
        .list_org_api_keys(app.org_uuid())
        .await
        .unwrap()
        .len();
    for crafted in [
        vec![
            ("name", "Sneaky"),
            ("preset", "custom"),
            ("permissions", "messages.send"),
            ("confirm", PASSWORD),
        ],
        vec![
            ("name", "Sneaky"),
            ("preset", "send_messages"),
            ("confirm", PASSWORD),
        ],
    ] {
        let (s, _, page) = b.post("/app/keys", &crafted).await;
        assert_eq!(s, 403, "{page}");
        assert!(
            page.contains("cannot give a key the permission messages.send"),
            "{page}"
        );
    }
    assert_eq!(
        app.db
            .list_org_api_keys(app.org_uuid())
            .await
            .unwrap()
            .len(),
        before
    );
    // Full access is what the role holds.
    let (page, value) = create_key(&b, "Dev key", "full_access").await;
    assert!(!page.contains("messages.send"));
    assert_eq!(api_status(app, &value).await, 200);
}

async fn plan_explained(app: &TestApp) {
    let free = app.new_org("Freeco", "free").await;
    let b = signed_in(app, &free, "owner@free.test", "owner").await;
    let (_, list) = b.get("/app/keys").await;
    assert!(list.contains("does not include the public API"), "{list}");
    assert!(list.contains("starter"), "names the upgrade");
    let (s, _, page) = b
        .post(
            "/app/keys",
            &[
                ("name", "x"),
                ("preset", "read_only"),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(s, 402, "{page}");
    assert!(page.contains("does not include the public API"));
    // The api_keys limit: limit and used.
    let small = app.new_org("Smallco", "starter").await;
    app.admin(&["org", "update", "--org", &small, "--limit", "api_keys=1"])
        .await
        .unwrap();
    let b = signed_in(app, &small, "owner@small.test", "owner").await;
    let (_, list) = b.get("/app/keys").await;
    assert!(list.contains("0 of 1"), "{list}");
    create_key(&b, "Only", "read_only").await;
    let (_, list) = b.get("/app/keys").await;
    assert!(list.contains("1 of 1"), "{list}");
    assert!(
        list.contains("The plan allows 1 active keys and 1 are in use"),
        "{list}"
    );
    let (s, _, page) = b
        .post(
            "/app/keys",
            &[
                ("name", "Two"),
                ("preset", "read_only"),
                ("confirm", PASSWORD),
            ],
        )
        .await;
    assert_eq!(s, 402, "plan_limit_reached: {page}");
    assert!(
        page.contains("The plan allows 1 active keys and 1 are in use"),
        "{page}"
    );
}

async fn confirmation_asked(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "keys-confirm@acme.test", "admin").await;
    let n = || keys_named(app, &app.org_id, "Confirmed");
    for confirm in [None, Some("not the password at all")] {
        let mut form = vec![("name", "Confirmed"), ("preset", "read_only")];
        if let Some(c) = confirm {
            form.push(("confirm", c));
        }
        let (s, _, page) = b.post("/app/keys", &form).await;
        assert_eq!(s, 422, "{page}");
        assert!(
            page.contains("<label for=\"confirm\">Your password</label>"),
            "{page}"
        );
        assert!(page.contains("field-error"), "the words next to the field");
        assert!(n().await.is_empty(), "nothing created");
    }
    create_key(&b, "Confirmed", "read_only").await;
    assert_eq!(n().await.len(), 1);
    // Within the window the form does not ask again.
    let (_, form) = b.get("/app/keys/new").await;
    assert!(!form.contains("name=\"confirm\""));
}

async fn revoke_and_rotate(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "keys-rr@acme.test", "owner").await;
    let (_, value) = create_key(&b, "To revoke", "read_only").await;
    let (id, _) = keys_named(app, &app.org_id, "To revoke").await[0];
    let (s, step) = b.get(&format!("/app/keys/{id}/revoke")).await;
    assert_eq!(s, 200);
    assert!(step.contains("To revoke") && step.contains("Revoke the key"));
    let (s, list) = follow(&b, b.post(&format!("/app/keys/{id}/revoke"), &[]).await).await;
    assert_eq!(s, 200);
    assert!(list.contains("is revoked"), "flash: {list}");
    assert!(list.contains("Revoked"));
    assert_eq!(api_status(app, &value).await, 401);

    let (_, old) = create_key(&b, "To rotate", "send_messages").await;
    let (id, _) = keys_named(app, &app.org_id, "To rotate").await[0];
    let (s, h, page) = b.post(&format!("/app/keys/{id}/rotate"), &[]).await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(h["cache-control"], "no-store");
    let new = shown_value(&page, "key-value");
    assert_ne!(new, old);
    assert!(page.contains(&old[..12]), "names the key it replaces");
    assert_eq!(api_status(app, &old).await, 401);
    assert_eq!(api_status(app, &new).await, 200);
    let both = keys_named(app, &app.org_id, "To rotate").await;
    assert_eq!(both.len(), 2);
    assert_eq!(both.iter().filter(|(_, revoked)| *revoked).count(), 1);
}

async fn other_keys_are_404(app: &TestApp) {
    let (other, _) = app
        .other_org("Beta", tern_domain::auth::Preset::FullAccess)
        .await;
    let theirs = app
        .db
        .list_org_api_keys(Uuid::parse_str(&other).unwrap())
        .await
        .unwrap()[0]
        .key
        .id;
    let owner = signed_in(app, &app.org_id, "keys-a@acme.test", "owner").await;
    // A key of the owner's own organisation, created by someone else.
    let (mine, _) = app.owner_key("read_only").await;
    let dev = signed_in(app, &app.org_id, "keys-d@acme.test", "developer").await;
    for path in [
        format!("/app/keys/{theirs}/revoke"),
        format!("/app/keys/{theirs}/rotate"),
        "/app/keys/not-a-uuid/revoke".to_string(),
    ] {
        assert_eq!(owner.get(&path).await.0, 404, "{path}");
        assert_eq!(owner.post(&path, &[]).await.0, 404, "{path}");
    }
    for path in [
        format!("/app/keys/{mine}/revoke"),
        format!("/app/keys/{mine}/rotate"),
    ] {
        assert_eq!(dev.get(&path).await.0, 404, "{path}");
        assert_eq!(
            dev.post(&path, &[("confirm", PASSWORD)]).await.0,
            404,
            "{path}"
        );
        assert_eq!(owner.get(&path).await.0, 200, "{path}");
    }
    // The developer sees the key, without its actions.
    let (_, list) = dev.get("/app/keys").await;
    assert!(!list.contains(&format!("/app/keys/{mine}/revoke")));
    let theirs_row = app.db.get_api_key(theirs).await.unwrap().unwrap();
    assert!(theirs_row.revoked_at.is_none(), "nothing happened to it");
}

async fn names_are_escaped(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "keys-x@acme.test", "owner").await;
    let evil = "<script>alert(1)</script>\"><img src=x>";
    let (page, _) = create_key(&b, evil, "read_only").await;
    let (id, _) = keys_named(app, &app.org_id, evil).await[0];
    let (_, list) = b.get("/app/keys").await;
    let (_, step) = b.get(&format!("/app/keys/{id}/rotate")).await;
    let (_, _, rotated) = b.post(&format!("/app/keys/{id}/rotate"), &[]).await;
    let (_, _, refused) = b
        .post("/app/keys", &[("name", evil), ("preset", "nope")])
        .await;
    for (what, html) in [
        ("created", &page),
        ("list", &list),
        ("step", &step),
        ("rotated", &rotated),
        ("form", &refused),
    ] {
        assert!(!html.contains("<script>alert(1)"), "{what}: {html}");
        assert!(!html.contains("<img src=x>"), "{what}");
    }
}

tern_store::both_backends! { TestApp;
    a_created_key_is_shown_once_and_works => created_once,
    developers_get_disabled_options_and_crafted_grants_refused => developer_bounds,
    the_plan_and_the_key_limit_are_explained => plan_explained,
    confirmation_is_asked_when_stale_and_accepted_with_the_password => confirmation_asked,
    revoke_refuses_the_next_call_and_rotate_swaps_values => revoke_and_rotate,
    another_organisations_key_or_anothers_for_a_developer_is_404 => other_keys_are_404,
    key_names_are_escaped_on_every_page => names_are_escaped,
}
