//! The person's own pages over HTTP: profile and password, two-factor (enrolment, replay,
//! recovery codes, turning it off), sessions.

use super::{
    Browser, FormBody, PASSWORD, audit_of, browser_from, cookie_value, hidden_token, no_redirects,
    pre_session, sign_in, signed_in, text,
};
use crate::common::TestApp;
use reqwest::header::HeaderMap;
use tern_domain::people::totp;
use tern_domain::time::now_ms;

const WRONG: &str = "Email, password or code is wrong";
const EVIL: &str = "<script>alert(1)</script>";

fn now_s() -> u64 {
    u64::try_from(now_ms() / 1000).unwrap()
}

/// The text between `start` and the next `end` in `html`.
fn between<'a>(html: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = html.find(start)? + start.len();
    let len = html[from..].find(end)?;
    Some(&html[from..from + len])
}

/// The actions `email` did in the test organisation, newest first.
async fn audit_actions(app: &TestApp, email: &str) -> Vec<String> {
    audit_of(app, &app.org_id)
        .await
        .into_iter()
        .filter(|(_, actor)| actor == email)
        .map(|(action, _)| action)
        .collect()
}

/// Signs in with the password and then `code` on the second step: (status, headers, body)
/// of the code step.
async fn sign_in_with_code(app: &TestApp, email: &str, code: &str) -> (u16, HeaderMap, String) {
    let (pre, token) = pre_session(app).await;
    let http = no_redirects();
    let (s, _, page) = text(
        http.post(app.url("/app/sign-in"))
            .header("cookie", format!("tern_pre={pre}"))
            .header("origin", app.base.as_str())
            .form_of(&[
                ("email", email),
                ("password", PASSWORD),
                ("csrf_token", &token),
            ]),
    )
    .await;
    assert_eq!(s, 200, "the code step: {page}");
    let pending = between(&page, "name=\"pending\" value=\"", "\"")
        .expect("pending")
        .to_string();
    let token = hidden_token(&page).unwrap_or(token);
    text(
        http.post(app.url("/app/sign-in/code"))
            .header("cookie", format!("tern_pre={pre}"))
            .header("origin", app.base.as_str())
            .form_of(&[
                ("pending", &pending),
                ("code", code),
                ("csrf_token", &token),
            ]),
    )
    .await
}

/// Follows a redirect as a browser would, with the one-time flash cookie the answer set:
/// (status, the page).
async fn follow(b: &Browser, h: &HeaderMap) -> (u16, String) {
    let to = h["location"].to_str().unwrap();
    let flash = cookie_value(h, "tern_flash").expect("a flash message");
    let (s, _, page) = text(b.http.get(format!("{}{to}", b.base)).header(
        "cookie",
        format!("tern_session={}; tern_flash={flash}", b.session),
    ))
    .await;
    (s, page)
}

/// A second browser of the same person, through the sign-in form (no two-factor).
async fn another_browser(app: &TestApp, email: &str) -> Browser {
    let (s, h, body) = sign_in(app, email, PASSWORD).await;
    assert_eq!(s, 303, "{body}");
    browser_from(app, &h).await
}

/// Enrols `b` in two-factor through the pages: (the secret, the recovery codes shown). The
/// step of the current code is used up.
async fn enrol(b: &Browser) -> (Vec<u8>, Vec<String>) {
    let (s, page) = b.get("/app/two-factor").await;
    assert_eq!(s, 200, "{page}");
    assert!(page.contains("Set up two-factor authentication"), "{page}");
    let (s, h, _) = b.post("/app/two-factor/begin", &[]).await;
    assert_eq!(s, 303);
    assert_eq!(h["location"], "/app/two-factor/setup");
    let (s, setup) = b.get("/app/two-factor/setup").await;
    assert_eq!(s, 200, "{setup}");
    assert!(
        setup.contains("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "the QR code inline"
    );
    assert!(
        !setup.contains("<img"),
        "no data: image (the CSP refuses it)"
    );
    let grouped = between(&setup, "data-totp-secret>", "</code>").unwrap();
    let secret = totp::secret_from_base32(&grouped.replace(' ', "")).unwrap();
    // A wrong code: the same page, the same secret, the words next to the field.
    let (s, _, again) = b
        .post("/app/two-factor/finish", &[("code", "000000")])
        .await;
    assert_eq!(s, 422, "{again}");
    assert!(again.contains("The code is wrong"), "{again}");
    assert!(again.contains(grouped), "the secret already scanned stays");
    // The right one: the ten recovery codes, once.
    let code = totp::code_at(&secret, now_s());
    let (s, _, shown) = b.post("/app/two-factor/finish", &[("code", &code)]).await;
    assert_eq!(s, 200, "{shown}");
    assert!(shown.contains("Store these somewhere safe"), "{shown}");
    assert!(
        shown.contains("data-copy=\"#recovery-codes\""),
        "a copy button"
    );
    let list = between(&shown, "data-recovery-codes>", "</ul>").unwrap();
    let codes: Vec<String> = list
        .split("<code>")
        .skip(1)
        .map(|c| c[..c.find("</code>").unwrap()].to_string())
        .collect();
    assert_eq!(codes.len(), 10, "{list}");
    let (_, status) = b.get("/app/two-factor").await;
    assert!(
        status.contains("Recovery codes left: <strong>10</strong>"),
        "{status}"
    );
    assert!(!status.contains(&codes[0]), "shown once only");
    (secret, codes)
}

/// Enrolment; sign-in with a code, the same code refused again (replay), a recovery code
/// accepted once; the audit log.
async fn two_factor_enrolment_and_sign_in(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "tia@example.com", "developer").await;
    let (secret, codes) = enrol(&b).await;
    // The step of the enrolment's code is used: the next one signs in, once.
    let code = totp::code_at(&secret, now_s() + 30);
    let (s, _, body) = sign_in_with_code(app, "tia@example.com", &code).await;
    assert_eq!(s, 303, "{body}");
    let (s, _, body) = sign_in_with_code(app, "tia@example.com", &code).await;
    assert_ne!(s, 303, "a replayed code");
    assert!(body.contains(WRONG), "{body}");
    let (s, _, body) = sign_in_with_code(app, "tia@example.com", &codes[3]).await;
    assert_eq!(s, 303, "a recovery code: {body}");
    let (s, _, body) = sign_in_with_code(app, "tia@example.com", &codes[3]).await;
    assert_ne!(s, 303, "a recovery code works once");
    assert!(body.contains(WRONG));
    let (_, status) = b.get("/app/two-factor").await;
    assert!(
        status.contains("Recovery codes left: <strong>9</strong>"),
        "{status}"
    );
    assert!(
        audit_actions(app, "tia@example.com")
            .await
            .contains(&"two_factor.enabled".to_string())
    );
}

/// Turning two-factor off needs a confirmation (a fresh code), and is refused while the
/// organisation requires two-factor.
async fn two_factor_off(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "uma@example.com", "owner").await;
    let (secret, _) = enrol(&b).await;
    let (_, page) = b.get("/app/two-factor").await;
    assert!(
        page.contains("<label for=\"confirm\">A code from your authenticator app</label>"),
        "{page}"
    );
    // Required by the organisation: no form, and the explanation.
    let org = app.org_id.parse().unwrap();
    app.db
        .set_two_factor_required(org, true, now_ms())
        .await
        .unwrap();
    let (_, page) = b.get("/app/two-factor").await;
    assert!(
        page.contains("You cannot turn it off while <strong>"),
        "{page}"
    );
    assert!(page.contains("requires it of its members"), "{page}");
    let code = totp::code_at(&secret, now_s() + 30);
    let (s, _, page) = b
        .post("/app/two-factor/disable", &[("confirm", &code)])
        .await;
    assert_eq!(s, 422, "{page}");
    assert!(page.contains("cannot be turned off"), "{page}");
    app.db
        .set_two_factor_required(org, false, now_ms())
        .await
        .unwrap();
    // Without a confirmation, or a wrong one: nothing done.
    let (s, _, page) = b.post("/app/two-factor/disable", &[]).await;
    assert_eq!(s, 422);
    assert!(
        page.contains("Confirm it is you: enter a code from your authenticator app."),
        "{page}"
    );
    let (s, _, page) = b
        .post("/app/two-factor/disable", &[("confirm", "123456")])
        .await;
    assert_eq!(s, 422, "{page}");
    assert!(page.contains("id=\"confirm-error\""), "{page}");
    let (_, page) = b.get("/app/two-factor").await;
    assert!(page.contains("badge-on"), "still on");
    // A valid code: off.
    let (s, h, page) = b
        .post("/app/two-factor/disable", &[("confirm", &code)])
        .await;
    assert_eq!(s, 303, "{page}");
    assert_eq!(h["location"], "/app/two-factor");
    let (_, page) = follow(&b, &h).await;
    assert!(
        page.contains("Two-factor authentication is off."),
        "the flash: {page}"
    );
    assert!(page.contains("badge-off"), "{page}");
    let actions = audit_actions(app, "uma@example.com").await;
    assert!(
        actions.contains(&"two_factor.disabled".to_string()),
        "{actions:?}"
    );
    // Signing in needs no code any more.
    let (s, _, _) = sign_in(app, "uma@example.com", PASSWORD).await;
    assert_eq!(s, 303);
}

/// When the organisation requires two-factor, its pages lead to enrolment, which says why.
async fn required_two_factor_leads_here(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "vic@example.com", "developer").await;
    let org = app.org_id.parse().unwrap();
    app.db
        .set_two_factor_required(org, true, now_ms())
        .await
        .unwrap();
    let (s, h, _) = b.get_full("/app").await;
    assert_eq!(s, 303);
    assert_eq!(h["location"], "/app/two-factor");
    let (s, page) = b.get("/app/two-factor").await;
    assert_eq!(s, 200);
    assert!(
        page.contains("requires two-factor authentication"),
        "{page}"
    );
    let (secret, _) = enrol(&b).await;
    assert!(!secret.is_empty());
    assert_eq!(
        b.get("/app").await.0,
        200,
        "enrolled: the organisation's pages open"
    );
    app.db
        .set_two_factor_required(org, false, now_ms())
        .await
        .unwrap();
}

/// Password change: the rule's words; a wrong current password; success ends the other
/// session and keeps this one.
async fn password_change(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "walter@example.com", "developer").await;
    let other = another_browser(app, "walter@example.com").await;
    let long = "x7".repeat(65);
    for (new, words) in [
        ("short", "too short"),
        (long.as_str(), "too long"),
        ("password1234", "most commonly used"),
        ("hello WALTER the great", "first part of your email"),
    ] {
        let (s, _, page) = b
            .post(
                "/app/profile/password",
                &[("current_password", PASSWORD), ("password", new)],
            )
            .await;
        assert_eq!(s, 422, "{new}: {page}");
        assert!(page.contains(words), "{new}: {page}");
        assert!(page.contains("id=\"password-error\""), "next to the field");
    }
    let (s, _, page) = b
        .post(
            "/app/profile/password",
            &[
                ("current_password", "not it at all!"),
                ("password", "a new and long passphrase"),
            ],
        )
        .await;
    assert_eq!(s, 422);
    assert!(page.contains("The current password is wrong."), "{page}");
    assert_eq!(
        other.get("/app/profile").await.0,
        200,
        "nothing changed yet"
    );
    let (s, h, page) = b
        .post(
            "/app/profile/password",
            &[
                ("current_password", PASSWORD),
                ("password", "a new and long passphrase"),
            ],
        )
        .await;
    assert_eq!(s, 303, "{page}");
    assert_eq!(h["location"], "/app/profile");
    let (s, page) = follow(&b, &h).await;
    assert_eq!(s, 200, "this session stays");
    assert!(
        page.contains("Your password is changed. Your other session was signed out."),
        "{page}"
    );
    let (s, h, _) = other.get_full("/app/profile").await;
    assert_eq!(s, 303, "the other session ended");
    assert_eq!(h["location"], "/app/sign-in");
    let (s, _, _) = sign_in(app, "walter@example.com", "a new and long passphrase").await;
    assert_eq!(s, 303);
    assert!(
        audit_actions(app, "walter@example.com")
            .await
            .contains(&"password.changed".to_string())
    );
}

/// The sessions page marks the current session; ending another works; "Sign out
/// everywhere" signs this browser out too; an old cookie is sent to sign-in.
async fn sessions_page(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "xena@example.com", "developer").await;
    let other = another_browser(app, "xena@example.com").await;
    let third = another_browser(app, "xena@example.com").await;
    let (s, page) = b.get("/app/sessions").await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(
        page.matches("class=\"session session-current\"").count(),
        1,
        "{page}"
    );
    assert_eq!(page.matches("class=\"session\"").count(), 2, "{page}");
    assert_eq!(
        page.matches("<span class=\"badge badge-on\">This session</span>")
            .count(),
        1
    );
    for label in ["Signed in", "Last activity", "Address", "Browser"] {
        assert!(page.contains(&format!("<dt>{label}</dt>")), "{label}");
    }
    assert!(page.contains("127.0.0.1"), "the address");
    let ends: Vec<&str> = page
        .split("action=\"/app/sessions/")
        .skip(1)
        .filter_map(|p| p.split('"').next())
        .filter(|p| p.ends_with("/end"))
        .collect();
    assert_eq!(ends.len(), 2, "a button for each other session: {ends:?}");
    let (s, h, _) = b.post(&format!("/app/sessions/{}", ends[0]), &[]).await;
    assert_eq!(s, 303);
    assert_eq!(h["location"], "/app/sessions");
    let (_, page) = follow(&b, &h).await;
    assert!(page.contains("That session is signed out."), "{page}");
    let alive = [
        other.get("/app/profile").await.0,
        third.get("/app/profile").await.0,
    ];
    assert_eq!(
        alive.iter().filter(|s| **s == 303).count(),
        1,
        "exactly that one ended: {alive:?}"
    );
    let (_, page) = b.get("/app/sessions").await;
    assert_eq!(page.matches("class=\"session\"").count(), 1);
    // Someone else's session, or no session: not found.
    let stranger = signed_in(app, &app.org_id, "yann@example.com", "developer").await;
    let (_, page) = stranger.get("/app/sessions").await;
    assert!(
        !page.contains("/end\""),
        "a single session has no end button"
    );
    let (s, _, _) = b.post("/app/sessions/not-a-uuid/end", &[]).await;
    assert_eq!(s, 404);
    let (s, _, _) = b
        .post(&format!("/app/sessions/{}/end", uuid::Uuid::new_v4()), &[])
        .await;
    assert_eq!(s, 404);
    // Everywhere: this browser too.
    let (s, h, _) = b.post("/app/sessions/end-all", &[]).await;
    assert_eq!(s, 303);
    assert_eq!(h["location"], "/app/sign-in");
    for br in [&b, &other, &third] {
        let (s, h, _) = br.get_full("/app/sessions").await;
        assert_eq!(s, 303, "a session cookie after sign-out everywhere");
        assert_eq!(h["location"], "/app/sign-in");
    }
    assert_eq!(
        stranger.get("/app/sessions").await.0,
        200,
        "another person's session stays"
    );
}

/// The name: saved, refused when blank, and escaped on every page.
async fn name_is_escaped(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "zoe@example.com", "developer").await;
    let (s, _, page) = b.post("/app/profile", &[("name", "   ")]).await;
    assert_eq!(s, 422);
    assert!(page.contains("Enter your name."), "{page}");
    let (s, _, page) = b.post("/app/profile", &[("name", &"n".repeat(101))]).await;
    assert_eq!(s, 422);
    assert!(page.contains("at most 100 characters"), "{page}");
    let (s, h, _) = b.post("/app/profile", &[("name", EVIL)]).await;
    assert_eq!(s, 303);
    assert_eq!(h["location"], "/app/profile");
    let (_, page) = follow(&b, &h).await;
    assert!(page.contains("Your name is saved."), "{page}");
    for path in ["/app", "/app/profile", "/app/two-factor", "/app/sessions"] {
        let (s, page) = b.get(path).await;
        assert_eq!(s, 200, "{path}");
        assert!(!page.contains(EVIL), "{path}: {page}");
        assert!(
            page.contains("&#60;script&#62;alert(1)&#60;/script&#62;")
                || page.contains("&lt;script&gt;"),
            "{path}"
        );
    }
    let (s, _, _) = b.post("/app/two-factor/begin", &[]).await;
    assert_eq!(s, 303);
    let (s, page) = b.get("/app/two-factor/setup").await;
    assert_eq!(s, 200);
    assert!(!page.contains(EVIL), "{page}");
    // The email is read-only: no field posts it.
    let (_, page) = b.get("/app/profile").await;
    assert!(
        page.contains("id=\"email\" type=\"email\" value=\"zoe@example.com\" readonly"),
        "{page}"
    );
}

/// Signed out: every page of the person leads to sign-in; a form is refused.
async fn signed_out(app: &TestApp) {
    let http = no_redirects();
    for path in [
        "/app/profile",
        "/app/two-factor",
        "/app/two-factor/setup",
        "/app/sessions",
    ] {
        let (s, h, _) = text(http.get(app.url(path))).await;
        assert_eq!(s, 303, "{path}");
        assert_eq!(h["location"], "/app/sign-in");
    }
    let (s, _, _) = text(
        http.post(app.url("/app/sessions/end-all"))
            .header("origin", app.base.as_str())
            .form_of(&[("csrf_token", "x")]),
    )
    .await;
    assert_eq!(s, 403, "no session, no token");
}

tern_store::both_backends! { TestApp;
    person_two_factor_enrolment_replay_and_recovery_codes => two_factor_enrolment_and_sign_in,
    person_two_factor_off_needs_confirmation_and_no_requirement => two_factor_off,
    person_required_two_factor_leads_to_enrolment => required_two_factor_leads_here,
    person_password_change_ends_the_other_sessions => password_change,
    person_sessions_page_ends_one_or_all => sessions_page,
    person_name_is_escaped_everywhere => name_is_escaped,
    person_pages_need_a_session => signed_out,
}
