//! CSRF protection (APP.md §2, §7): every request under `/app` other than GET/HEAD must
//! come from the app's own origin and carry a token only a page of the app can know.
//!
//! - The token is the session's once the session layer exists: that layer, placed outside
//!   [`guard`], inserts [`ExpectedCsrf`] into the request. Without it (signed out, e.g. the
//!   sign-in form), the token is derived from the short-lived pre-session cookie
//!   [`PRE_COOKIE`], set by the page that shows the form.
//! - The token comes in the form field `csrf_token` or the header `X-CSRF-Token`.
//! - A refusal is the `403` page before any handler runs: nothing is done.

use crate::AppState;
use crate::errors::AppError;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq as _;

/// The pre-session cookie: a random 256-bit value, before anyone has signed in.
pub const PRE_COOKIE: &str = "tern_pre";
/// How long a sign-in form stays usable (seconds).
pub const PRE_COOKIE_MAX_AGE: u64 = 2 * 60 * 60;
/// The form field with the token.
pub const FORM_FIELD: &str = "csrf_token";
/// The header with the token (for scripts).
pub const HEADER: &str = "x-csrf-token";

/// Keeps tokens derived from the pre-session cookie apart from any other hash of it.
const PRE_LABEL: &[u8] = b"tern app pre-session csrf v1\0";

/// The token a request must carry, set by a layer that knows better than the pre-session
/// cookie (the session layer: the session's token).
#[derive(Clone)]
pub struct ExpectedCsrf(pub String);

impl std::fmt::Debug for ExpectedCsrf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExpectedCsrf(<redacted>)")
    }
}

/// Whether the request comes from `origin` as far as the browser tells: `Origin`, when
/// present, must be exactly it; `Sec-Fetch-Site`, when present, must be `same-origin` or
/// `none` (typed by the person). A request with neither (an old browser, a script) passes
/// this check and still needs the token.
pub fn same_origin(headers: &HeaderMap, origin: &str) -> bool {
    let origin_ok = headers
        .get_all(header::ORIGIN)
        .iter()
        .all(|v| v.as_bytes().eq_ignore_ascii_case(origin.as_bytes()));
    let site_ok = headers
        .get_all("sec-fetch-site")
        .iter()
        .all(|v| v == "same-origin" || v == "none");
    origin_ok && site_ok
}

/// Compares two tokens in time independent of where they differ.
pub fn tokens_match(given: &str, expected: &str) -> bool {
    // Lengths are not secret (every token has the same length).
    given.len() == expected.len() && bool::from(given.as_bytes().ct_eq(expected.as_bytes()))
}

/// A new pre-session cookie value: 256 random bits, base64url.
pub fn new_pre_session_value() -> String {
    let mut b = [0u8; 32];
    rand::rng().fill_bytes(&mut b);
    URL_SAFE_NO_PAD.encode(b)
}

/// Whether `value` looks like a value Tern made (43 base64url characters, 32 bytes).
fn well_formed(value: &str) -> bool {
    value.len() == 43
        && URL_SAFE_NO_PAD
            .decode(value)
            .is_ok_and(|bytes| bytes.len() == 32)
}

/// The form token that goes with a pre-session cookie value.
pub fn pre_session_token(cookie_value: &str) -> String {
    let mut h = Sha256::new();
    h.update(PRE_LABEL);
    h.update(cookie_value.as_bytes());
    URL_SAFE_NO_PAD.encode(h.finalize())
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The pre-session of a signed-out page: the browser's cookie when it is one of ours, else
/// a new one. Keeping the value lets two open tabs both send their forms.
pub struct PreSession {
    value: String,
}

impl std::fmt::Debug for PreSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreSession(<redacted>)")
    }
}

impl PreSession {
    pub fn from_headers(headers: &HeaderMap) -> PreSession {
        let value = match cookie(headers, PRE_COOKIE) {
            Some(v) if well_formed(v) => v.to_owned(),
            _ => new_pre_session_value(),
        };
        PreSession { value }
    }

    /// The token for the page's hidden `csrf_token` field.
    pub fn token(&self) -> String {
        pre_session_token(&self.value)
    }

    /// The `Set-Cookie` value, sent with every page that shows a form (the two hours start
    /// again).
    pub fn set_cookie(&self, secure: bool) -> HeaderValue {
        let secure = if secure { "; Secure" } else { "" };
        let s = format!(
            "{PRE_COOKIE}={}; Max-Age={PRE_COOKIE_MAX_AGE}; Path={}; HttpOnly; SameSite=Lax{secure}",
            self.value,
            crate::PREFIX
        );
        // Only base64url characters and fixed text: always a valid header value.
        HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// The token this request must carry: the session's, else the pre-session cookie's.
fn expected(req: &Request) -> Option<String> {
    if let Some(e) = req.extensions().get::<ExpectedCsrf>() {
        return Some(e.0.clone());
    }
    cookie(req.headers(), PRE_COOKIE)
        .filter(|v| well_formed(v))
        .map(pre_session_token)
}

/// Whether the body is a form, and only that (two `Content-Type` headers are refused: the
/// handler's reading could differ from ours).
fn is_form(headers: &HeaderMap) -> bool {
    let mut types = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(one), None) = (types.next(), types.next()) else {
        return false;
    };
    one.to_str()
        .ok()
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// The layer: GET and HEAD pass; anything else must be same-origin and carry the expected
/// token, or it gets the `403` page. A form body is read here (at most
/// [`crate::FORM_BODY_LIMIT`], else the `413` page) and handed on unchanged.
pub async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD) {
        return next.run(req).await;
    }
    if !same_origin(req.headers(), &state.origin) {
        tracing::info!("app: refused a request from another origin");
        return AppError::CsrfRefused.into_response();
    }
    let expected = expected(&req);
    if let Some(given) = req.headers().get(HEADER) {
        let ok = expected
            .as_deref()
            .is_some_and(|e| tokens_match(given.to_str().unwrap_or(""), e));
        if !ok {
            return AppError::CsrfRefused.into_response();
        }
        return next.run(req).await;
    }
    if !is_form(req.headers()) {
        return AppError::CsrfRefused.into_response();
    }
    let (parts, body) = req.into_parts();
    let bytes = match read_limited(body).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let given = url::form_urlencoded::parse(&bytes)
        .find(|(k, _)| k == FORM_FIELD)
        .map(|(_, v)| v.into_owned());
    let ok = match (given, expected) {
        (Some(g), Some(e)) => tokens_match(&g, &e),
        _ => false,
    };
    if !ok {
        return AppError::CsrfRefused.into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The whole body, refused over the limit.
async fn read_limited(body: Body) -> Result<axum::body::Bytes, AppError> {
    use http_body_util::BodyExt as _;
    match http_body_util::Limited::new(body, crate::FORM_BODY_LIMIT)
        .collect()
        .await
    {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(AppError::PayloadTooLarge),
        // The client went away mid-body, or sent a broken one.
        Err(_) => Err(AppError::BadRequest(
            "The form arrived incomplete. Try again.".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn same_origin_checks_what_the_browser_says() {
        let o = "https://tern.example.com";
        assert!(same_origin(&headers(&[]), o));
        assert!(same_origin(
            &headers(&[("origin", "https://tern.example.com")]),
            o
        ));
        assert!(same_origin(&headers(&[("sec-fetch-site", "none")]), o));
        assert!(!same_origin(
            &headers(&[("origin", "https://evil.example")]),
            o
        ));
        assert!(!same_origin(&headers(&[("origin", "null")]), o));
        assert!(!same_origin(
            &headers(&[("origin", "http://tern.example.com")]),
            o
        ));
        assert!(!same_origin(
            &headers(&[("sec-fetch-site", "cross-site")]),
            o
        ));
        assert!(!same_origin(
            &headers(&[("sec-fetch-site", "same-site")]),
            o
        ));
        assert!(!same_origin(
            &headers(&[
                ("origin", "https://tern.example.com"),
                ("origin", "https://evil.example")
            ]),
            o
        ));
    }

    #[test]
    fn tokens_compare_whole() {
        let v = new_pre_session_value();
        assert!(well_formed(&v));
        let t = pre_session_token(&v);
        assert_eq!(t.len(), 43);
        assert!(tokens_match(&t, &t.clone()));
        assert!(!tokens_match(&t[..42], &t));
        assert!(!tokens_match("", &t));
        assert_ne!(pre_session_token(&new_pre_session_value()), t);
    }

    #[test]
    fn pre_session_reuses_only_our_cookies() {
        let v = new_pre_session_value();
        let h = HeaderMap::from_iter([(
            header::COOKIE,
            HeaderValue::from_str(&format!("a=b; {PRE_COOKIE}={v}")).unwrap(),
        )]);
        assert_eq!(PreSession::from_headers(&h).value, v);
        let forged = headers(&[("cookie", "tern_pre=short")]);
        assert_ne!(PreSession::from_headers(&forged).value, "short");
        let c = PreSession::from_headers(&h).set_cookie(true);
        let c = c.to_str().unwrap();
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Lax") && c.ends_with("; Secure"));
        assert!(c.contains("Path=/app;") && c.contains("Max-Age=7200"));
    }
}
