//! The members, audit log and settings pages over HTTP: inviting (the link once), role
//! changes and removals within the rules, the audit log for owners and admins, the
//! two-factor requirement, escaping, and another organisation's member ids.

use super::{Browser, PASSWORD, audit_of, browser_from, sign_in, signed_in, use_link};
use crate::common::{TestApp, send};
use serde_json::json;
use tern_core::audit;

/// The member id of `email` in `org`.
async fn member_id(app: &TestApp, org: &str, email: &str) -> String {
    app.db
        .memberships_of(email)
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.member.org_id.to_string() == org)
        .map(|m| m.member.id.to_string())
        .unwrap_or_else(|| panic!("{email} is not a member of {org}"))
}

/// The role of `email` in `org`, `None` when not a member.
async fn role_of(app: &TestApp, org: &str, email: &str) -> Option<String> {
    app.db
        .memberships_of(email)
        .await
        .unwrap()
        .into_iter()
        .find(|m| m.member.org_id.to_string() == org)
        .map(|m| m.member.role.as_str().to_string())
}

/// The invite link shown on the page after an invite.
fn invite_link(page: &str) -> Option<String> {
    let at = page.find("id=\"invite-link\" type=\"text\" readonly value=\"")?;
    let rest = &page[at + "id=\"invite-link\" type=\"text\" readonly value=\"".len()..];
    Some(rest[..rest.find('"')?].to_string())
}

/// `b` invites `email` as `role`: (status, headers, body).
async fn invite(b: &Browser, email: &str, role: &str) -> (u16, reqwest::header::HeaderMap, String) {
    b.post("/app/members/invite", &[("email", email), ("role", role)])
        .await
}

/// `b` makes member `id` a `role`, confirming with [`PASSWORD`]: (status, headers, body).
async fn change_role(
    b: &Browser,
    id: &str,
    role: &str,
) -> (u16, reqwest::header::HeaderMap, String) {
    b.post(
        &format!("/app/members/{id}/role"),
        &[("role", role), ("confirm", PASSWORD)],
    )
    .await
}

fn location(h: &reqwest::header::HeaderMap) -> &str {
    h["location"].to_str().unwrap()
}

/// An admin invites a developer: the link is shown once, sets the password, signs in.
async fn invite_as_admin(app: &TestApp) {
    let admin = signed_in(app, &app.org_id, "adm@example.com", "admin").await;
    let (s, page) = admin.get("/app/members").await;
    assert_eq!(s, 200, "{page}");
    assert!(page.contains("adm@example.com"));
    assert!(
        page.contains("<option value=\"owner\" disabled>Owner — above your role (admin)</option>"),
        "{page}"
    );
    let (s, _, page) = invite(&admin, "New@Example.com", "developer").await;
    assert_eq!(s, 200, "{page}");
    let url = invite_link(&page).expect("the invite link");
    assert!(
        url.starts_with(&format!("{}/app/invite/", app.base)),
        "{url}"
    );
    assert!(page.contains("No email is sent"));
    assert!(page.contains("it works once, for 7 days"));
    // Shown once: the list does not show it again, and says the person has no password.
    let (_, page) = admin.get("/app/members").await;
    assert!(!page.contains("/app/invite/"));
    assert!(page.contains("new@example.com"));
    let pending = page.matches("invited, no password yet").count();
    assert!(pending >= 1);
    // The link sets the password and signs in.
    let (s, h, body) = use_link(app, &url, &[("name", "Newt"), ("password", PASSWORD)]).await;
    assert_eq!(s, 303, "{body}");
    let newt = browser_from(app, &h).await;
    let (s, home) = newt.get("/app").await;
    assert_eq!(s, 200);
    assert!(
        home.contains("Newt") && home.contains("developer"),
        "{home}"
    );
    let (_, page) = admin.get("/app/members").await;
    assert_eq!(
        page.matches("invited, no password yet").count(),
        pending - 1
    );
    // Audited with the admin as the actor.
    let log = audit_of(app, &app.org_id).await;
    assert!(log.contains(&("member.invited".into(), "adm@example.com".into())));
    // Someone with an account already is added at once, with no link.
    let other = app.new_org("Other", "growth").await;
    let (s, h, body) = {
        let owner = signed_in(app, &other, "own@example.com", "owner").await;
        invite(&owner, "new@example.com", "admin").await
    };
    assert_eq!(s, 303, "{body}");
    assert_eq!(location(&h), "/app/members");
    assert_eq!(
        role_of(app, &other, "new@example.com").await.as_deref(),
        Some("admin")
    );
}

/// An admin can neither invite nor promote an owner, nor touch one, even with a crafted form.
async fn admin_cannot_make_owners(app: &TestApp) {
    let admin = signed_in(app, &app.org_id, "adm2@example.com", "admin").await;
    let (s, _, page) = invite(&admin, "boss@example.com", "owner").await;
    assert_eq!(s, 403, "{page}");
    assert!(
        page.contains("nobody grants a role above their own"),
        "{page}"
    );
    assert_eq!(role_of(app, &app.org_id, "boss@example.com").await, None);

    let dev = app
        .member(&app.org_id, "dev3@example.com", "developer")
        .await;
    let (s, _, page) = change_role(&admin, &dev, "owner").await;
    assert_eq!(s, 403, "{page}");
    assert_eq!(
        role_of(app, &app.org_id, "dev3@example.com")
            .await
            .as_deref(),
        Some("developer")
    );
    // The seeded owner: not the admin's to change or remove.
    let owner = &app.owner_id;
    let (s, _, _) = change_role(&admin, owner, "developer").await;
    assert_eq!(s, 403);
    assert_eq!(
        admin.get(&format!("/app/members/{owner}/remove")).await.0,
        403
    );
    let (s, _, _) = admin
        .post(&format!("/app/members/{owner}/remove"), &[])
        .await;
    assert_eq!(s, 403);
    let (s, page) = admin.get(&format!("/app/members/{owner}")).await;
    assert_eq!(s, 200);
    assert!(page.contains("Only an owner can change or remove an owner."));
    // Within their role: developer → admin, with the confirmation.
    let (s, h, page) = change_role(&admin, &dev, "admin").await;
    assert_eq!(s, 303, "{page}");
    assert_eq!(location(&h), "/app/members");
    let log = audit_of(app, &app.org_id).await;
    assert!(log.contains(&("member.role_changed".into(), "adm2@example.com".into())));
}

/// The last owner can be neither demoted nor removed; a role change asks for the password.
async fn last_owner_and_confirmation(app: &TestApp) {
    let solo = app.new_org("Solo", "growth").await;
    let owner = signed_in(app, &solo, "olga@example.com", "owner").await;
    let me = member_id(app, &solo, "olga@example.com").await;
    let (s, page) = owner.get(&format!("/app/members/{me}")).await;
    assert_eq!(s, 200);
    assert!(page.contains("last owner"), "{page}");
    assert!(!page.contains(&format!("action=\"/app/members/{me}/role\"")));
    let (s, _, page) = change_role(&owner, &me, "admin").await;
    assert_eq!(s, 409, "refused before any password is asked: {page}");
    assert!(page.contains("last owner"), "{page}");
    let (s, page) = owner.get(&format!("/app/members/{me}/remove")).await;
    assert_eq!(s, 200);
    assert!(page.contains("cannot be removed"), "{page}");
    let (s, _, page) = owner.post(&format!("/app/members/{me}/remove"), &[]).await;
    assert_eq!(s, 409, "{page}");
    assert!(page.contains("last owner"), "{page}");
    assert_eq!(
        role_of(app, &solo, "olga@example.com").await.as_deref(),
        Some("owner")
    );

    // A role change needs the password (no recent confirmation); a wrong one changes nothing.
    let dev = app.member(&solo, "pat@example.com", "developer").await;
    let path = format!("/app/members/{dev}/role");
    let (s, page) = owner.get(&format!("/app/members/{dev}")).await;
    assert_eq!(s, 200);
    assert!(
        page.contains("<label for=\"confirm\">Your password</label>"),
        "{page}"
    );
    let (s, _, page) = owner.post(&path, &[("role", "owner")]).await;
    assert_eq!(s, 422);
    assert!(page.contains("Confirm it is you"), "{page}");
    let (s, _, _) = owner
        .post(
            &path,
            &[("role", "owner"), ("confirm", "not my password at all")],
        )
        .await;
    assert_eq!(s, 422);
    assert_eq!(
        role_of(app, &solo, "pat@example.com").await.as_deref(),
        Some("developer")
    );
    let (s, _, _) = owner
        .post(&path, &[("role", "owner"), ("confirm", PASSWORD)])
        .await;
    assert_eq!(s, 303);
    // Confirmed within the window: the next change does not ask, and two owners allow a step down.
    let (s, page) = owner.get(&format!("/app/members/{me}")).await;
    assert_eq!(s, 200);
    assert!(!page.contains("name=\"confirm\""), "{page}");
    let (s, _, _) = owner
        .post(&format!("/app/members/{me}/role"), &[("role", "admin")])
        .await;
    assert_eq!(s, 303);
    assert_eq!(
        role_of(app, &solo, "olga@example.com").await.as_deref(),
        Some("admin")
    );
}

/// A removed member's session no longer reaches the organisation; removed from their last
/// one, they are signed out.
async fn removal_ends_access(app: &TestApp) {
    let two = app.new_org("Two", "growth").await;
    let three = app.new_org("Three", "growth").await;
    let owner = signed_in(app, &two, "otto@example.com", "owner").await;
    let bob = signed_in(app, &two, "bob@example.com", "developer").await;
    app.member(&three, "bob@example.com", "developer").await;
    app.member(&three, "otto@example.com", "owner").await;
    let bob_two = member_id(app, &two, "bob@example.com").await;
    let (s, page) = owner.get(&format!("/app/members/{bob_two}/remove")).await;
    assert_eq!(s, 200);
    assert!(
        page.contains("The API keys they created are revoked"),
        "{page}"
    );
    let (s, h, _) = owner
        .post(&format!("/app/members/{bob_two}/remove"), &[])
        .await;
    assert_eq!((s, location(&h)), (303, "/app/members"));
    assert_eq!(owner.get(&format!("/app/members/{bob_two}")).await.0, 404);
    // Bob still has Three: the session shows it, and cannot switch back to Two.
    let (s, page) = bob.get("/app/members").await;
    assert_eq!(s, 200);
    assert!(page.contains("Members of Three"), "{page}");
    let (s, _, _) = bob.post("/app/org", &[("org_id", &two)]).await;
    assert_eq!(s, 404);
    // Removed from Three too: signed out.
    let (s, _, _) = owner.post("/app/org", &[("org_id", &three)]).await;
    assert_eq!(s, 303);
    let bob_three = member_id(app, &three, "bob@example.com").await;
    let (s, _, _) = owner
        .post(&format!("/app/members/{bob_three}/remove"), &[])
        .await;
    assert_eq!(s, 303);
    let (s, h, _) = bob.get_full("/app/members").await;
    assert_eq!((s, location(&h)), (303, "/app/sign-in"));
    let log = audit_of(app, &three).await;
    assert!(log.contains(&("member.removed".into(), "otto@example.com".into())));
}

/// A developer reads the members, but gets 403 on the audit log and on every change.
async fn developer_is_refused(app: &TestApp) {
    let dev = signed_in(app, &app.org_id, "dee@example.com", "developer").await;
    let (s, page) = dev.get("/app/members").await;
    assert_eq!(s, 200);
    assert!(!page.contains("/app/members/invite"));
    assert!(page.contains("Only owners and admins invite people"));
    let (s, page) = dev.get("/app/audit").await;
    assert_eq!(s, 403, "{page}");
    assert!(page.contains("You cannot open this page"));
    let other = app
        .member(&app.org_id, "eve@example.com", "developer")
        .await;
    let (s, _, _) = change_role(&dev, &other, "developer").await;
    assert_eq!(s, 403);
    let (s, _, _) = invite(&dev, "x@example.com", "developer").await;
    assert_eq!(s, 403);
    assert_eq!(
        dev.post(&format!("/app/members/{other}/remove"), &[])
            .await
            .0,
        403
    );
    assert_eq!(role_of(app, &app.org_id, "x@example.com").await, None);
    // Settings: read, not changed.
    let (s, page) = dev.get("/app/settings").await;
    assert_eq!(s, 200);
    assert!(page.contains("Only an owner can change this setting."));
    let (s, _, _) = dev
        .post(
            "/app/settings/two-factor",
            &[("required", "on"), ("confirm", PASSWORD)],
        )
        .await;
    assert_eq!(s, 403);
}

/// The audit log page: sign-ins, key and subscription changes with their actor, a filter,
/// pages.
async fn audit_page(app: &TestApp) {
    let admin = signed_in(app, &app.org_id, "aud@example.com", "admin").await;
    let (s, _, _) = sign_in(app, "aud@example.com", "not the password at all").await;
    assert_eq!(s, 401);
    let (s, _, _) = sign_in(app, "aud@example.com", PASSWORD).await;
    assert_eq!(s, 303);
    let (key_id, key) = app.owner_key("full_access").await;
    let stored = app
        .db
        .get_api_key(key_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    let (s, _, b) = send(
        app.http
            .post(app.url("/api/public/v1/webhook-subscriptions"))
            .bearer_auth(&key)
            .json(&json!({"url": "https://hooks.example.com/tern", "events": ["message.status"]})),
    )
    .await;
    assert_eq!(s, 201, "{b}");

    let (s, page) = admin.get("/app/audit").await;
    assert_eq!(s, 200, "{page}");
    for words in [
        "Signed in",
        "Failed to sign in",
        "Created an API key",
        "Created a webhook endpoint",
        "Operator",
        "aud@example.com",
        "https://hooks.example.com/tern",
        "<time datetime=\"",
    ] {
        assert!(page.contains(words), "{words}: {page}");
    }
    let key_label = format!("{} ({})", stored.name, stored.prefix);
    assert!(page.contains(&key_label), "{key_label}: {page}");
    assert!(!page.contains(&key), "never a key's value");
    // The filter.
    let (s, page) = admin.get("/app/audit?action=key.").await;
    assert_eq!(s, 200);
    assert!(page.contains("Created an API key"));
    assert!(!page.contains("Signed in") && !page.contains("Created a webhook endpoint"));
    assert!(page.contains("<option value=\"key.\" selected>"));
    // Pages of 50.
    let ctx = audit::Context::operator();
    for _ in 0..55 {
        let e = audit::Entry::new(Some(app.org_uuid()), audit::PASSWORD_CHANGED);
        audit::record(&app.db, &ctx, e).await.unwrap();
    }
    let (_, page) = admin.get("/app/audit?action=password.").await;
    assert_eq!(page.matches("<time datetime=").count(), 50);
    let at = page.find("href=\"/app/audit?before=").expect("a next page");
    let rest = &page[at + 6..];
    let href = rest[..rest.find('"').unwrap()]
        .replace("&#38;", "&")
        .replace("&amp;", "&");
    assert!(href.ends_with("&action=password."), "{href}");
    let (s, page) = admin.get(&href).await;
    assert_eq!(s, 200);
    assert_eq!(page.matches("<time datetime=").count(), 5, "{page}");
    assert!(page.contains("Newest entries"));
    assert!(!page.contains("Older entries"));
    // A made-up position is ignored, not an error.
    assert_eq!(admin.get("/app/audit?before=zzz").await.0, 200);
}

/// HTML in a person's name or email, or a key's name, is text on the members and audit pages.
async fn html_is_escaped(app: &TestApp) {
    let admin = signed_in(app, &app.org_id, "esc@example.com", "admin").await;
    let (s, _, page) = invite(&admin, "<script>e</script>@example.com", "developer").await;
    assert_eq!(s, 200, "{page}");
    let url = invite_link(&page).expect("the invite link");
    let (s, _, body) = use_link(
        app,
        &url,
        &[
            ("name", "<img src=x onerror=alert(1)>"),
            ("password", PASSWORD),
        ],
    )
    .await;
    assert_eq!(s, 303, "{body}");
    app.admin(&[
        "key",
        "create",
        "--org",
        &app.org_id,
        "--member",
        &app.owner_id,
        "--name",
        "<script>k</script>",
        "--preset",
        "read_only",
    ])
    .await
    .unwrap();
    for path in ["/app/members", "/app/audit"] {
        let (s, page) = admin.get(path).await;
        assert_eq!(s, 200);
        for raw in ["<script>e", "<img src=x", "<script>k"] {
            assert!(!page.contains(raw), "{path}: {raw} unescaped");
        }
        assert!(
            page.contains("&#60;script&#62;e&#60;/script&#62;@example.com"),
            "{path}: {page}"
        );
    }
    let (_, page) = admin.get("/app/members").await;
    assert!(
        page.contains("&#60;img src=x onerror=alert(1)&#62;"),
        "{page}"
    );
    let (_, page) = admin.get("/app/audit").await;
    assert!(
        page.contains("&#60;script&#62;k&#60;/script&#62;"),
        "{page}"
    );
}

/// Another organisation's member id is not found, whatever the request.
async fn other_orgs_member(app: &TestApp) {
    let admin = signed_in(app, &app.org_id, "ann@example.com", "owner").await;
    let other = app.new_org("Elsewhere", "growth").await;
    let theirs = app.member(&other, "zed@example.com", "developer").await;
    assert_eq!(admin.get(&format!("/app/members/{theirs}")).await.0, 404);
    assert_eq!(
        admin.get(&format!("/app/members/{theirs}/remove")).await.0,
        404
    );
    let (s, _, _) = change_role(&admin, &theirs, "admin").await;
    assert_eq!(s, 404);
    let (s, _, _) = admin
        .post(&format!("/app/members/{theirs}/remove"), &[])
        .await;
    assert_eq!(s, 404);
    assert_eq!(admin.get("/app/members/not-an-id").await.0, 404);
    assert_eq!(
        role_of(app, &other, "zed@example.com").await.as_deref(),
        Some("developer")
    );
}

/// The owner requires two-factor (with the confirmation); members without it, the owner
/// included, are taken to enrolment; an admin cannot change it.
async fn two_factor_requirement(app: &TestApp) {
    let org = app.new_org("Strict", "growth").await;
    let owner = signed_in(app, &org, "sue@example.com", "owner").await;
    let admin: Browser = signed_in(app, &org, "sam@example.com", "admin").await;
    let (s, page) = owner.get("/app/settings").await;
    assert_eq!(s, 200);
    assert!(
        page.contains("Require two-factor for every member"),
        "{page}"
    );
    assert!(page.contains("2 members have not set it up"), "{page}");
    let (s, _, _) = admin
        .post(
            "/app/settings/two-factor",
            &[("required", "on"), ("confirm", PASSWORD)],
        )
        .await;
    assert_eq!(s, 403);
    let (s, _, page) = owner
        .post("/app/settings/two-factor", &[("required", "on")])
        .await;
    assert_eq!(s, 422, "{page}");
    assert!(page.contains("Confirm it is you"));
    let (s, h, _) = owner
        .post(
            "/app/settings/two-factor",
            &[("required", "on"), ("confirm", PASSWORD)],
        )
        .await;
    assert_eq!((s, location(&h)), (303, "/app/settings"));
    let stored = app.db.get_org(org.parse().unwrap()).await.unwrap().unwrap();
    assert!(stored.two_factor_required);
    let (s, h, _) = admin.get_full("/app/members").await;
    assert_eq!((s, location(&h)), (303, "/app/two-factor"));
    let log = audit_of(app, &org).await;
    assert!(log.contains(&("org.two_factor_required".into(), "sue@example.com".into())));
}

tern_store::both_backends! { TestApp;
    admin_invites_link_shown_once_sets_password_and_signs_in => invite_as_admin,
    admin_cannot_invite_promote_or_touch_an_owner => admin_cannot_make_owners,
    last_owner_stays_and_role_changes_need_confirmation => last_owner_and_confirmation,
    removed_member_loses_the_org_then_the_session => removal_ends_access,
    developer_gets_403_on_audit_and_changes => developer_is_refused,
    audit_page_lists_sign_ins_keys_subscriptions_with_actor => audit_page,
    html_in_names_is_escaped_on_members_and_audit => html_is_escaped,
    another_orgs_member_id_is_404 => other_orgs_member,
    owner_requires_two_factor_with_confirmation => two_factor_requirement,
}
