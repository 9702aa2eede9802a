//! The app under `/app` (issue 29): its frame — security headers on every answer, the
//! refusal of API keys, error pages, the form size limit, CSRF and the sign-in page.

mod campaigns;
mod frame;
mod keys;
mod members;
mod message_replay;
mod messages;
mod pages;
mod person;
mod requests;
mod session;
mod webhooks;

use crate::common::TestApp;
use reqwest::header::HeaderMap;
use tern_core::audit::{self, PageRequest};

/// A client that shows redirects instead of following them.
pub fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// (status, headers, body text) of a request.
pub async fn text(req: reqwest::RequestBuilder) -> (u16, HeaderMap, String) {
    let res = req.send().await.expect("request failed");
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    (status, headers, res.text().await.unwrap())
}

/// The sign-in page's pre-session cookie value and form token.
pub async fn pre_session(app: &TestApp) -> (String, String) {
    let (s, h, body) = text(app.http.get(app.url("/app/sign-in"))).await;
    assert_eq!(s, 200);
    let cookie = set_cookie(&h, "tern_pre").expect("tern_pre is set");
    let value = cookie
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("tern_pre=")
        .to_string();
    let token = hidden_token(&body).expect("csrf_token field");
    (value, token)
}

/// The `Set-Cookie` header for cookie `name`.
pub fn set_cookie(h: &HeaderMap, name: &str) -> Option<String> {
    h.get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .find(|v| v.starts_with(&format!("{name}=")))
}

/// The value of the page's hidden `csrf_token` field.
pub fn hidden_token(html: &str) -> Option<String> {
    let at = html.find("name=\"csrf_token\" value=\"")?;
    let rest = &html[at + "name=\"csrf_token\" value=\"".len()..];
    Some(rest[..rest.find('"')?].to_string())
}

/// A form body on a request (reqwest's own needs a feature this workspace does not use).
pub trait FormBody {
    fn form_of(self, fields: &[(&str, &str)]) -> Self;
}

impl FormBody for reqwest::RequestBuilder {
    fn form_of(self, fields: &[(&str, &str)]) -> Self {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        self.header("content-type", "application/x-www-form-urlencoded")
            .body(body)
    }
}

/// The password [`signed_in`] sets.
pub const PASSWORD: &str = "a long enough passphrase 42";

/// A browser-like client of the app: the session cookie, the same-origin `Origin` header
/// of a form, and the session's CSRF token. Redirects are shown, not followed.
pub struct Browser {
    pub http: reqwest::Client,
    pub base: String,
    /// The `tern_session` cookie's value.
    pub session: String,
    /// The session's CSRF token (from a page's hidden field).
    pub csrf: String,
}

impl Browser {
    fn cookie(&self) -> String {
        format!("tern_session={}", self.session)
    }

    /// (status, body) of a page.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let (s, _, body) = self.get_full(path).await;
        (s, body)
    }

    /// (status, headers, body) of a page.
    pub async fn get_full(&self, path: &str) -> (u16, HeaderMap, String) {
        text(
            self.http
                .get(format!("{}{path}", self.base))
                .header("cookie", self.cookie()),
        )
        .await
    }

    /// Sends a form with the session's CSRF token, from the app's own origin.
    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> (u16, HeaderMap, String) {
        let mut fields: Vec<(&str, &str)> = form.to_vec();
        fields.push(("csrf_token", &self.csrf));
        text(
            self.http
                .post(format!("{}{path}", self.base))
                .header("cookie", self.cookie())
                .header("origin", &self.base)
                .form_of(&fields),
        )
        .await
    }
}

/// The cookie value of a `Set-Cookie` header for `name`.
pub fn cookie_value(h: &HeaderMap, name: &str) -> Option<String> {
    set_cookie(h, name).map(|c| {
        c.split(';')
            .next()
            .unwrap()
            .trim_start_matches(&format!("{name}="))
            .to_string()
    })
}

/// Uses a one-time link (`…/app/invite/…`, `…/reset/…`, `…/link/…`) as a browser would:
/// opens it, then sends its form with `fields`. (status, headers, body) of the POST.
pub async fn use_link(
    app: &TestApp,
    url: &str,
    fields: &[(&str, &str)],
) -> (u16, HeaderMap, String) {
    let path = &url[url.find("/app/").expect("an app link")..];
    let http = no_redirects();
    let (s, h, page) = text(http.get(app.url(path))).await;
    assert_eq!(s, 200, "{page}");
    let pre = cookie_value(&h, "tern_pre").expect("tern_pre");
    let token = hidden_token(&page).expect("csrf_token");
    let mut form: Vec<(&str, &str)> = fields.to_vec();
    form.push(("csrf_token", &token));
    text(
        http.post(app.url(path))
            .header("cookie", format!("tern_pre={pre}"))
            .header("origin", app.base.as_str())
            .form_of(&form),
    )
    .await
}

/// The browser of a session just started (its cookie in `h`): opens the home page for the
/// session's CSRF token.
pub async fn browser_from(app: &TestApp, h: &HeaderMap) -> Browser {
    let session = cookie_value(h, "tern_session").expect("a session cookie");
    let mut b = Browser {
        http: no_redirects(),
        base: app.base.clone(),
        session,
        csrf: String::new(),
    };
    let (s, body) = b.get("/app/sessions").await;
    let body = if s == 200 {
        body
    } else {
        b.get("/app").await.1
    };
    b.csrf = hidden_token(&body).expect("a page with the session's csrf token");
    b
}

/// Invites `email` with `role` into `org` (`tern admin member add`), sets [`PASSWORD`]
/// through the invite page and answers the signed-in browser.
pub async fn signed_in(app: &TestApp, org: &str, email: &str, role: &str) -> Browser {
    let v = app
        .admin(&[
            "member", "add", "--org", org, "--email", email, "--role", role,
        ])
        .await
        .unwrap();
    let url = v["invite_url"].as_str().expect("invite_url").to_string();
    let (s, h, body) = use_link(
        app,
        &url,
        &[("name", "Test Person"), ("password", PASSWORD)],
    )
    .await;
    assert_eq!(s, 303, "{body}");
    browser_from(app, &h).await
}

/// Signs in through the sign-in form: (status, headers, body) of the POST.
pub async fn sign_in(app: &TestApp, email: &str, password: &str) -> (u16, HeaderMap, String) {
    let (pre, token) = pre_session(app).await;
    text(
        no_redirects()
            .post(app.url("/app/sign-in"))
            .header("cookie", format!("tern_pre={pre}"))
            .header("origin", app.base.as_str())
            .form_of(&[
                ("email", email),
                ("password", password),
                ("csrf_token", &token),
            ]),
    )
    .await
}

/// The audit entries of `org` as (action, actor label), newest first.
pub async fn audit_of(app: &TestApp, org: &str) -> Vec<(String, String)> {
    let page = PageRequest {
        limit: 200,
        ..Default::default()
    };
    audit::list(&app.db, org.parse().unwrap(), &page)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.action, e.actor_label))
        .collect()
}
