//! The app under `/app` (issue 29): its frame — security headers on every answer, the
//! refusal of API keys, error pages, the form size limit, CSRF and the sign-in page.

mod frame;
mod keys;
mod webhooks;

use crate::common::TestApp;
use reqwest::header::HeaderMap;

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
