//! The frame every `/app` answer passes through.

use super::{hidden_token, no_redirects, pre_session, set_cookie, text};
use crate::common::{TestApp, assert_error, send};
use reqwest::header::HeaderMap;

const CSP: &str = "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'";
const CSRF_WORDS: &str =
    "This form expired or came from another site. Reload the page and try again.";

fn assert_security_headers(what: &str, h: &HeaderMap) {
    assert_eq!(h["content-security-policy"], CSP, "{what}");
    assert_eq!(h["x-content-type-options"], "nosniff", "{what}");
    assert_eq!(h["referrer-policy"], "same-origin", "{what}");
}

fn cache_control(h: &HeaderMap) -> &str {
    h.get("cache-control").unwrap().to_str().unwrap()
}

async fn headers_on_every_answer(app: &TestApp) {
    // A page.
    let (s, h, page) = text(app.http.get(app.url("/app/sign-in"))).await;
    assert_eq!(s, 200);
    assert_security_headers("page", &h);
    assert_eq!(cache_control(&h), "no-store");
    assert!(h["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(!page.contains("<script>"), "no inline script");
    assert!(!page.contains("style=\""), "no inline style");
    // Its assets, under hashed names, cached for a year.
    for ext in ["css", "js", "svg"] {
        let href = page
            .split('"')
            .find(|p| p.starts_with("/app/assets/") && p.ends_with(ext))
            .unwrap_or_else(|| panic!("no .{ext} asset"))
            .to_string();
        let (s, h, _) = text(app.http.get(app.url(&href))).await;
        assert_eq!(s, 200, "{href}");
        assert_security_headers("asset", &h);
        assert_eq!(cache_control(&h), "public, max-age=31536000, immutable");
        // An old or made-up name is not that file.
        let stale = format!("{}0.{ext}", href.trim_end_matches(&format!(".{ext}")));
        let (s, _, _) = text(app.http.get(app.url(&stale))).await;
        assert_eq!(s, 404, "{stale}");
    }
    // The app's 404, in its style, and never the API's JSON.
    for path in ["/app/nope", "/app/keys/x/y", "/app/assets/app.css"] {
        let (s, h, body) = text(app.http.get(app.url(path))).await;
        assert_eq!(s, 404, "{path}");
        assert_security_headers(path, &h);
        assert_eq!(cache_control(&h), "no-store");
        assert!(body.contains("Page not found"), "{path}: {body}");
        assert!(body.contains("href=\"/app\""), "a link back");
    }
    // A refused API key.
    let (s, h, _) = text(app.http.get(app.url("/app/sign-in")).bearer_auth("x")).await;
    assert_eq!(s, 401);
    assert_security_headers("401", &h);
    assert_eq!(cache_control(&h), "no-store");
    // `/app` and `/app/` reach the app (to the sign-in page, for now).
    for path in ["/app", "/app/"] {
        let (s, h, _) = text(no_redirects().get(app.url(path))).await;
        assert_eq!(s, 303, "{path}");
        assert_eq!(h["location"], "/app/sign-in");
        assert_security_headers(path, &h);
    }
    // The API keeps its own answers.
    let (s, h, b) = send(app.http.get(app.url("/nope"))).await;
    assert_error(s, &h, &b, 404, "not_found");
    assert!(h.get("content-security-policy").is_none());
}

async fn api_keys_are_refused(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    for (method, path) in [
        ("GET", "/app/sign-in"),
        ("POST", "/app/sign-in"),
        ("GET", "/app/nope"),
    ] {
        let req = app
            .http
            .request(method.parse().unwrap(), app.url(path))
            .bearer_auth(&key);
        let (s, h, b) = send(req).await;
        assert_error(s, &h, &b, 401, "unauthenticated");
        assert_eq!(b["details"]["reason"], "api_key_not_accepted", "{path}");
        assert_eq!(b.as_object().unwrap().len(), 6, "the flat body: {b}");
    }
    // The key itself still works where it belongs.
    let (s, _, _) = app.get("/api/public/v1/phone-numbers", Some(&key)).await;
    assert_eq!(s, 200);
}

async fn oversized_forms_are_413(app: &TestApp) {
    let (cookie, token) = pre_session(app).await;
    let body = format!("csrf_token={token}&email={}", "a".repeat(100 * 1024));
    let (s, h, page) = text(
        app.http
            .post(app.url("/app/sign-in"))
            .header("Cookie", format!("tern_pre={cookie}"))
            .header("Origin", &app.base)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body),
    )
    .await;
    assert_eq!(s, 413, "{page}");
    assert_security_headers("413", &h);
    assert!(page.contains("64 KiB"), "{page}");
}

async fn csrf_refusals(app: &TestApp) {
    let (cookie, token) = pre_session(app).await;
    let post = |form: String| {
        app.http
            .post(app.url("/app/sign-in"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form)
    };
    let with_cookie = |form: String| post(form).header("Cookie", format!("tern_pre={cookie}"));
    let form = format!("csrf_token={token}&email=a%40b.test&password=x");
    let refusals = [
        (
            "no token",
            with_cookie("email=a%40b.test&password=x".into()),
        ),
        ("wrong token", with_cookie("csrf_token=AAAA&email=a".into())),
        ("no cookie", post(form.clone())),
        (
            "foreign origin",
            with_cookie(form.clone()).header("Origin", "https://evil.example"),
        ),
        (
            "null origin",
            with_cookie(form.clone()).header("Origin", "null"),
        ),
        (
            "cross-site fetch",
            with_cookie(form.clone()).header("Sec-Fetch-Site", "cross-site"),
        ),
        (
            "another cookie's token",
            post(form.clone()).header("Cookie", format!("tern_pre={}", "A".repeat(43))),
        ),
        (
            "not a form",
            with_cookie(form.clone()).header("Content-Type", "application/json"),
        ),
    ];
    for (what, req) in refusals {
        let (s, h, page) = text(req).await;
        assert_eq!(s, 403, "{what}: {page}");
        assert_security_headers(what, &h);
        assert!(page.contains(CSRF_WORDS), "{what}: {page}");
        assert!(page.contains("href=\"/app\""));
    }
    // The right token from the right origin passes the guard: the sign-in handler answers
    // (an empty form is a wrong sign-in; a body that is not a form cannot be read).
    for (what, req) in [
        (
            "form",
            with_cookie(form.clone()).header("Origin", &app.base),
        ),
        ("no origin header", with_cookie(form.clone())),
        (
            "header token",
            with_cookie(String::new())
                .header("X-CSRF-Token", &token)
                .header("Sec-Fetch-Site", "same-origin"),
        ),
    ] {
        let (s, _, page) = text(req).await;
        assert_ne!(s, 403, "{what}: {page}");
        assert!(matches!(s, 400 | 401 | 415), "{what}: {s}");
        assert!(page.contains("<!doctype html>"), "{what}: the app's page");
    }
}

async fn sign_in_page(app: &TestApp) {
    let (s, h, page) = text(app.http.get(app.url("/app/sign-in"))).await;
    assert_eq!(s, 200);
    for want in [
        "<label for=\"email\">Email</label>",
        "<label for=\"password\">Password</label>",
        "name=\"email\" type=\"email\" autocomplete=\"username\"",
        "name=\"password\" type=\"password\" autocomplete=\"current-password\"",
        "<form class=\"stack\" method=\"post\" action=\"/app/sign-in\">",
        "<button type=\"submit\">Sign in</button>",
        "<a class=\"skip-link\" href=\"#main\">",
        "<main id=\"main\"",
    ] {
        assert!(page.contains(want), "{want}: {page}");
    }
    assert!(
        !page.contains("Email, password or code is wrong"),
        "no error yet"
    );
    assert!(
        !page.contains("aria-label=\"Main\""),
        "no navigation when signed out"
    );
    // The pre-session cookie and its token.
    let cookie = set_cookie(&h, "tern_pre").unwrap();
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/app", "Max-Age=7200"] {
        assert!(cookie.contains(flag), "{flag}: {cookie}");
    }
    assert!(!cookie.contains("Secure"), "the public URL is http");
    let value = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("tern_pre=");
    assert_eq!(value.len(), 43);
    let token = hidden_token(&page).unwrap();
    assert_eq!(token, tern_app::csrf::pre_session_token(value));
    assert_ne!(token, value, "the page never shows the cookie");
    // A second tab keeps the same cookie (both forms work); a forged cookie is replaced.
    let (_, h2, page2) = text(
        app.http
            .get(app.url("/app/sign-in"))
            .header("Cookie", format!("tern_pre={value}")),
    )
    .await;
    assert_eq!(hidden_token(&page2).unwrap(), token);
    assert!(
        set_cookie(&h2, "tern_pre")
            .unwrap()
            .starts_with(&format!("tern_pre={value};"))
    );
    let (_, h3, _) = text(
        app.http
            .get(app.url("/app/sign-in"))
            .header("Cookie", "tern_pre=chosen-by-someone"),
    )
    .await;
    assert!(
        !set_cookie(&h3, "tern_pre")
            .unwrap()
            .contains("chosen-by-someone")
    );
}

/// With an https public URL: `Secure` cookies, and only that origin's forms.
async fn https_public_url(app: &TestApp) {
    let other = TestApp::builder(app.backend)
        .configure(|c| c.public_url = "https://tern.example.com".into())
        .start()
        .await;
    let (s, h, page) = text(other.http.get(other.url("/app/sign-in"))).await;
    assert_eq!(s, 200);
    let cookie = set_cookie(&h, "tern_pre").unwrap();
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    let value = cookie.split(';').next().unwrap().to_string();
    let token = hidden_token(&page).unwrap();
    let post = |origin: &str| {
        other
            .http
            .post(other.url("/app/sign-in"))
            .header("Cookie", &value)
            .header("Origin", origin)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("csrf_token={token}"))
    };
    let (s, _, _) = text(post(&other.base)).await;
    assert_eq!(s, 403, "the listen address is not the public origin");
    let (s, _, _) = text(post("https://tern.example.com")).await;
    assert_eq!(s, 401, "passes the guard: an empty sign-in is a wrong one");
    other.stop().await;
}

tern_store::both_backends! { TestApp;
    security_headers_on_every_answer => headers_on_every_answer,
    bearer_keys_get_401_api_key_not_accepted => api_keys_are_refused,
    form_over_64_kib_is_413 => oversized_forms_are_413,
    csrf_missing_wrong_or_cross_origin_is_403 => csrf_refusals,
    sign_in_page_has_labels_and_token => sign_in_page,
    https_public_url_means_secure_cookies_and_that_origin => https_public_url,
}
