//! Signing in and out, sessions, one-time links and the sign-in limits, over HTTP.

use super::{
    Browser, FormBody, PASSWORD, audit_of, browser_from, cookie_value, no_redirects, pre_session,
    set_cookie, sign_in, signed_in, text, use_link,
};
use crate::common::TestApp;
use futures::StreamExt as _;

const WRONG: &str = "Email, password or code is wrong";

/// Invite → password → signed in; the cookie's flags; the home page; sign out; sign in again.
async fn sign_in_and_out(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "ada@example.com", "admin").await;
    let (s, home) = b.get("/app").await;
    assert_eq!(s, 200, "{home}");
    assert!(home.contains("Test Person"), "{home}");

    // Sign out: the cookie is cleared and no longer works.
    let (s, h, _) = b.post("/app/sign-out", &[]).await;
    assert_eq!(s, 303);
    assert_eq!(h["location"], "/app/sign-in?signed_out=1");
    assert!(
        set_cookie(&h, "tern_session")
            .unwrap()
            .contains("Max-Age=0")
    );
    let (s, h, _) = b.get_full("/app").await;
    assert_eq!(s, 303, "a session cookie after sign-out");
    assert_eq!(h["location"], "/app/sign-in");

    // Sign in with the password: a new session, its cookie with the flags of APP.md §2.
    let (s, h, body) = sign_in(app, "ADA@example.com", PASSWORD).await;
    assert_eq!(s, 303, "{body}");
    let cookie = set_cookie(&h, "tern_session").unwrap();
    for flag in ["Path=/app", "HttpOnly", "SameSite=Lax"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "http public URL: {cookie}");
    let token = cookie_value(&h, "tern_session").unwrap();
    assert_ne!(token, b.session, "a new token at every sign-in");
    let b2 = browser_from(app, &h).await;
    assert_eq!(b2.get("/app").await.0, 200);

    let actions = audit_of(app, &app.org_id).await;
    assert!(
        actions
            .iter()
            .filter(|(a, who)| a == "sign_in.succeeded" && who == "ada@example.com")
            .count()
            >= 2,
        "{actions:?}"
    );
}

/// Wrong password and unknown email: the same page and words; both in the audit log.
async fn wrong_password_and_unknown_email(app: &TestApp) {
    signed_in(app, &app.org_id, "ben@example.com", "developer").await;
    let (s1, h1, wrong) = sign_in(app, "ben@example.com", "not the password at all").await;
    let (s2, _, unknown) = sign_in(app, "nobody@example.com", "not the password at all").await;
    assert_eq!((s1, s2), (401, 401));
    assert!(wrong.contains(WRONG) && unknown.contains(WRONG));
    assert!(set_cookie(&h1, "tern_session").is_none());
    assert!(
        !wrong.contains("not the password"),
        "the password is never echoed"
    );
    let actions = audit_of(app, &app.org_id).await;
    assert!(
        actions.iter().any(|(a, _)| a == "sign_in.failed"),
        "{actions:?}"
    );
}

/// Five failures lock the account: the right password then gets the same page.
async fn lock_out(app: &TestApp) {
    signed_in(app, &app.org_id, "cy@example.com", "developer").await;
    for _ in 0..5 {
        assert_eq!(
            sign_in(app, "cy@example.com", "wrong password 123").await.0,
            401
        );
    }
    let (s, _, page) = sign_in(app, "cy@example.com", PASSWORD).await;
    assert_eq!(s, 401, "locked: the same answer as a wrong password");
    assert!(page.contains(WRONG));
    let actions = audit_of(app, &app.org_id).await;
    assert!(
        actions.iter().any(|(a, _)| a == "sign_in.locked"),
        "{actions:?}"
    );
}

/// More than 30 failures a minute from one address: `429`, and the server keeps answering.
async fn address_throttle(app: &TestApp) {
    signed_in(app, &app.org_id, "dee@example.com", "developer").await;
    let mut statuses = Vec::new();
    for i in 0..32 {
        let (s, _, _) = sign_in(app, &format!("ghost{i}@example.com"), "wrong password 123").await;
        statuses.push(s);
    }
    assert!(statuses[..30].iter().all(|s| *s == 401), "{statuses:?}");
    assert_eq!(*statuses.last().unwrap(), 429);
    let (s, h, page) = sign_in(app, "dee@example.com", PASSWORD).await;
    assert_eq!(s, 429, "the address is throttled for everyone: {page}");
    assert!(h.contains_key("retry-after"));
    // Other requests still answer.
    assert_eq!(text(app.http.get(app.url("/app/sign-in"))).await.0, 200);
    assert_eq!(text(app.http.get(app.url("/readyz"))).await.0, 200);
}

/// 1,000 sign-in attempts in a burst from one address: after 30 failures the address gets
/// `429` (no password is hashed for it), never a `500`; meanwhile the API and the app keep
/// answering others.
async fn burst_of_sign_ins(app: &TestApp) {
    let (pre, token) = pre_session(app).await;
    let http = no_redirects();
    let attempt = |i: usize| {
        let http = http.clone();
        let url = app.url("/app/sign-in");
        let cookie = format!("tern_pre={pre}");
        let origin = app.base.clone();
        let token = token.clone();
        async move {
            let email = format!("burst{}@example.com", i % 7);
            let (s, _, _) = text(
                http.post(url)
                    .header("cookie", cookie)
                    .header("origin", origin)
                    .form_of(&[
                        ("email", email.as_str()),
                        ("password", "guessing 123456"),
                        ("csrf_token", &token),
                    ]),
            )
            .await;
            s
        }
    };
    let burst = futures::stream::iter(0..1000)
        .map(attempt)
        .buffer_unordered(32)
        .collect::<Vec<u16>>();
    let others = async {
        let (_, key) = app.owner_key("read_only").await;
        let mut answered = 0;
        for _ in 0..20 {
            let (s, _, _) = crate::common::send(
                app.http
                    .get(app.url("/api/public/v1/phone-numbers"))
                    .bearer_auth(&key),
            )
            .await;
            assert_eq!(s, 200);
            assert_eq!(text(app.http.get(app.url("/app/sign-in"))).await.0, 200);
            answered += 1;
        }
        answered
    };
    let (statuses, answered) = tokio::join!(burst, others);
    assert_eq!(answered, 20);
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    let wrong = statuses.iter().filter(|s| **s == 401).count();
    assert_eq!(throttled + wrong, 1000, "only 401 and 429: {statuses:?}");
    assert!(
        wrong <= 30 + 32,
        "at most the limit (and what was in flight) hashed: {wrong}"
    );
    assert!(throttled >= 900, "{throttled}");
}

/// An invitation: a refused password leaves it valid; used once; then gone.
async fn invite_links(app: &TestApp) {
    let v = app
        .admin(&[
            "member",
            "add",
            "--org",
            &app.org_id,
            "--email",
            "evelyn@example.com",
            "--role",
            "developer",
        ])
        .await
        .unwrap();
    let url = v["invite_url"].as_str().unwrap().to_string();
    for (pw, words) in [
        ("short", "12"),
        (&"x".repeat(129) as &str, "128"),
        ("password1234", "common"),
        ("my EVELYN passphrase", "email"),
    ] {
        let (s, _, page) = use_link(app, &url, &[("name", "Eve"), ("password", pw)]).await;
        assert_eq!(s, 422, "{pw}: {page}");
        assert!(page.to_lowercase().contains(words), "{pw}: {page}");
    }
    let (s, _, _) = use_link(app, &url, &[("name", "Eve"), ("password", PASSWORD)]).await;
    assert_eq!(s, 303, "still valid after refusals");
    // Reused.
    let path = &url[url.find("/app/").unwrap()..];
    let (s, _, page) = text(no_redirects().get(app.url(path))).await;
    assert_eq!(s, 404);
    assert!(page.contains("not valid any more"), "{page}");
    // A made-up token.
    let (s, _, _) = text(no_redirects().get(app.url("/app/invite/nope"))).await;
    assert_eq!(s, 404);
}

/// An expired invitation (`TERN_APP_INVITE_SECS` = 1 s).
async fn expired_invite(app: &TestApp) {
    let settings = tern_core::people::PeopleSettings {
        invite_ms: 1_000,
        ..Default::default()
    };
    let invited = tern_core::people::invite_in(
        &app.db,
        &settings,
        &tern_core::audit::Context::operator(),
        app.org_uuid(),
        "fay@example.com",
        tern_domain::auth::Role::Developer,
        tern_core::people::Inviter::Operator,
    )
    .await
    .unwrap();
    let path = format!("/app/invite/{}", invited.link.unwrap());
    assert_eq!(text(no_redirects().get(app.url(&path))).await.0, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let (s, _, page) = text(no_redirects().get(app.url(&path))).await;
    assert_eq!(s, 404, "{page}");
}

/// Idle expiry (TERN_APP_SESSION_IDLE_SECS) ends a session; the cookie is cleared.
async fn idle_expiry(app: &TestApp) {
    let short = TestApp::builder(app.backend)
        .configure(|c| c.people.session_idle_ms = 1_000)
        .start()
        .await;
    let b = signed_in(&short, &short.org_id, "gus@example.com", "developer").await;
    assert_eq!(b.get("/app").await.0, 200);
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let (s, h, _) = b.get_full("/app").await;
    assert_eq!(s, 303, "expired");
    assert!(
        set_cookie(&h, "tern_session")
            .unwrap()
            .contains("Max-Age=0")
    );
    short.stop().await;
}

/// A removed member's session no longer reaches the organisation (their only one: the
/// session ends).
async fn removed_member(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "hal@example.com", "developer").await;
    let member = app
        .db
        .memberships_of("hal@example.com")
        .await
        .unwrap()
        .remove(0)
        .member;
    tern_core::people::remove_member(
        &tern_core::Core::new(app.db.clone(), app.key.clone(), app.cloud.clone()),
        &tern_core::audit::Context::operator(),
        app.org_uuid(),
        tern_domain::auth::Role::Owner,
        member.id,
    )
    .await
    .unwrap();
    let (s, _) = b.get("/app").await;
    assert_eq!(s, 303, "signed out");
}

/// Switching to an organisation the person does not belong to: 404; to one they do: shown.
async fn org_switch(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "ivy@example.com", "admin").await;
    let other = app.new_org("Other", "growth").await;
    let (s, _, _) = b.post("/app/org", &[("org_id", &other)]).await;
    assert_eq!(s, 404);
    app.member(&other, "ivy@example.com", "developer").await;
    let (s, _, _) = b.post("/app/org", &[("org_id", &other)]).await;
    assert_eq!(s, 303);
    let (_, home) = b.get("/app").await;
    assert!(
        home.contains("<option value=\"") && home.contains("Other (developer)"),
        "{home}"
    );
    assert!(
        home.contains(&format!("<option value=\"{other}\" selected>")),
        "{home}"
    );
    // The sign-in form of someone signed in: home.
    let (s, h) = {
        let (s, h, _) = b.get_full("/app/sign-in").await;
        (s, h)
    };
    assert_eq!((s, h["location"].to_str().unwrap()), (303, "/app"));
}

/// A POST with the session cookie but without its token, or from another origin: 403.
async fn session_csrf(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "jo@example.com", "admin").await;
    let forged = Browser {
        csrf: "A".repeat(43),
        ..b
    };
    let (s, _, _) = forged.post("/app/sign-out", &[]).await;
    assert_eq!(s, 403);
    let (pre, token) = pre_session(app).await;
    let (s, _, _) = text(
        no_redirects()
            .post(app.url("/app/sign-out"))
            .header(
                "cookie",
                format!("tern_session={}; tern_pre={pre}", forged.session),
            )
            .header("origin", app.base.as_str())
            .form_of(&[("csrf_token", token.as_str())]),
    )
    .await;
    assert_eq!(s, 403, "the pre-session token is not the session's");
    let (s, _, _) = text(
        no_redirects()
            .post(app.url("/app/sign-out"))
            .header("cookie", format!("tern_session={}", forged.session))
            .header("origin", "https://evil.example")
            .form_of(&[("csrf_token", "x")]),
    )
    .await;
    assert_eq!(s, 403);
    // Still signed in: nothing changed.
    assert_eq!(forged.get("/app").await.0, 200);
}

tern_store::both_backends! { TestApp;
    sign_in_cookie_flags_and_sign_out => sign_in_and_out,
    wrong_password_and_unknown_email_answer_alike => wrong_password_and_unknown_email,
    five_failures_lock_the_account => lock_out,
    thirty_failures_a_minute_throttle_the_address => address_throttle,
    a_thousand_sign_ins_are_throttled_and_others_answered => burst_of_sign_ins,
    invite_link_refused_password_keeps_it_then_used_once => invite_links,
    expired_invite_link_is_refused => expired_invite,
    idle_session_ends => idle_expiry,
    removed_member_loses_the_session => removed_member,
    org_switch_only_to_own_organisations => org_switch,
    session_forms_need_the_session_token_and_origin => session_csrf,
}
