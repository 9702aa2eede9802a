//! The session layer (APP.md §2, §7): who is asking, on every request under `/app`.
//!
//! [`layer`] runs outside the CSRF guard. It reads the `tern_session` cookie, looks the
//! session up through `core::people::session` (idle and absolute expiry, the person's
//! memberships), and inserts [`Current`] and the session's [`ExpectedCsrf`] token into the
//! request; an unknown or expired cookie is cleared in the answer. It also inserts the
//! [`Client`] (peer address, user agent) for every request, signed in or not, and carries the
//! one-time flash message of a redirect.
//!
//! Handlers take [`Signed`] (any signed-in person) or [`OrgMember`] (a person looking at one
//! of their organisations); without a session both answer with a redirect to the sign-in page.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, FromRequestParts, OptionalFromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use tern_core::audit::{Actor, Context};
use tern_core::people::{self, Client, SessionView};
use tern_domain::auth::Role;
use tern_domain::time::now_ms;
use tern_store::{Member, Org, Person};

use crate::AppState;
use crate::csrf::{self, ExpectedCsrf};
use crate::errors::AppError;
use crate::frame::{Flash, FlashKind, Frame, Nav, OrgChoice};

/// The session cookie: a random 256-bit token (base64url), stored server-side as a hash.
pub const SESSION_COOKIE: &str = "tern_session";
/// The one-time message of a redirect (`kind:text`, percent-encoded).
pub const FLASH_COOKIE: &str = "tern_flash";
/// Where a request without a session is sent.
pub const SIGN_IN: &str = "/app/sign-in";

/// Who is asking, set by [`layer`] for a request with a valid session.
#[derive(Clone)]
pub struct Current {
    pub view: Arc<SessionView>,
    /// The session's CSRF token, for the page's forms.
    pub csrf: String,
    pub client: Client,
    /// The message of the redirect that led here, shown once.
    pub flash: Vec<Flash>,
}

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Current")
            .field("view", &self.view)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// Whether a cookie value has the shape of a token Tern made (32 bytes, base64url).
fn well_formed(token: &str) -> bool {
    token.len() == 43
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The request's client: the peer address (the server is reached directly; a proxy in
/// front would be the address shown) and the user agent, shortened.
fn client_of(req: &Request) -> Client {
    let address = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string());
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.chars().take(300).collect());
    Client {
        address,
        user_agent,
    }
}

fn read_flash(headers: &HeaderMap) -> Vec<Flash> {
    let Some(raw) = csrf::cookie(headers, FLASH_COOKIE) else {
        return Vec::new();
    };
    let decoded: String = url::form_urlencoded::parse(format!("f={raw}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let (kind, text) = decoded.split_once(':').unwrap_or(("info", &decoded));
    let kind = match kind {
        "success" => FlashKind::Success,
        "error" => FlashKind::Error,
        _ => FlashKind::Info,
    };
    let text: String = text.chars().take(300).collect();
    if text.is_empty() {
        return Vec::new();
    }
    vec![Flash { kind, text }]
}

fn sets_cookie(res: &Response, name: &str) -> bool {
    res.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| v.as_bytes().starts_with(format!("{name}=").as_bytes()))
}

/// `Set-Cookie` values of the app (every cookie is `HttpOnly`, `SameSite=Lax`, under `/app`,
/// and `Secure` behind https).
pub fn cookie(state: &AppState, name: &str, value: &str, max_age: Option<i64>) -> HeaderValue {
    let secure = if state.secure_cookies { "; Secure" } else { "" };
    let age = max_age
        .map(|a| format!("; Max-Age={a}"))
        .unwrap_or_default();
    let s = format!(
        "{name}={value}; Path={}; HttpOnly; SameSite=Lax{age}{secure}",
        crate::PREFIX
    );
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The session cookie of a session just started (no `Max-Age`: it ends with the browser, and
/// the server ends it after 12 hours idle or 14 days anyway).
pub fn session_cookie(state: &AppState, token: &str) -> HeaderValue {
    cookie(state, SESSION_COOKIE, token, None)
}

/// Clears the session cookie.
pub fn clear_session_cookie(state: &AppState) -> HeaderValue {
    cookie(state, SESSION_COOKIE, "", Some(0))
}

/// The layer (see the module's documentation).
pub async fn layer(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let client = client_of(&req);
    req.extensions_mut().insert(client.clone());
    let flash = read_flash(req.headers());
    let had_flash = csrf::cookie(req.headers(), FLASH_COOKIE).is_some();
    let token = csrf::cookie(req.headers(), SESSION_COOKIE).map(str::to_owned);
    let mut stale = false;
    if let Some(token) = token {
        let found = if well_formed(&token) {
            match people::session(&state.core, &token, now_ms()).await {
                Ok(v) => v,
                Err(p) => return AppError::from(p).into_response(),
            }
        } else {
            None
        };
        match found {
            Some(view) => {
                let csrf = people::csrf_token(&token);
                req.extensions_mut().insert(ExpectedCsrf(csrf.clone()));
                req.extensions_mut().insert(Current {
                    view: Arc::new(view),
                    csrf,
                    client,
                    flash,
                });
            }
            None => stale = true,
        }
    }
    let mut res = next.run(req).await;
    if stale && !sets_cookie(&res, SESSION_COOKIE) {
        res.headers_mut()
            .append(header::SET_COOKIE, clear_session_cookie(&state));
    }
    // The message was shown by this page: clear it (unless the answer sets a new one).
    if had_flash && res.status().is_success() && !sets_cookie(&res, FLASH_COOKIE) {
        res.headers_mut().append(
            header::SET_COOKIE,
            cookie(&state, FLASH_COOKIE, "", Some(0)),
        );
    }
    res
}

/// A 303 redirect to `to` with a one-time message for the next page's frame.
pub fn redirect_with_flash(state: &AppState, to: &str, kind: FlashKind, text: &str) -> Response {
    let value: String =
        url::form_urlencoded::byte_serialize(format!("{}:{text}", kind.as_str()).as_bytes())
            .collect();
    (
        [(
            header::SET_COOKIE,
            cookie(state, FLASH_COOKIE, &value, Some(60)),
        )],
        Redirect::to(to),
    )
        .into_response()
}

/// A signed-in person (profile, two-factor and sessions pages).
#[derive(Clone, Debug)]
pub struct Signed(pub Current);

impl Signed {
    pub fn person(&self) -> &Person {
        &self.0.view.person
    }

    pub fn view(&self) -> &SessionView {
        &self.0.view
    }

    /// The name shown for the person (the email until they set one).
    pub fn display_name(&self) -> &str {
        let p = self.person();
        if p.name.trim().is_empty() {
            &p.email
        } else {
            &p.name
        }
    }

    /// The layout's frame, with `nav` the active item.
    pub fn frame(&self, nav: Nav) -> Frame {
        let v = &self.0.view;
        Frame {
            person: crate::frame::Person {
                name: self.display_name().to_string(),
                email: v.person.email.clone(),
            },
            orgs: v
                .memberships
                .iter()
                .map(|m| OrgChoice {
                    id: m.member.org_id.to_string(),
                    name: m.org_name.clone(),
                    role: m.member.role.as_str().to_string(),
                })
                .collect(),
            current_org: v
                .current
                .as_ref()
                .map(|m| m.member.org_id.to_string())
                .unwrap_or_default(),
            csrf_token: self.0.csrf.clone(),
            nav,
            flash: self.0.flash.clone(),
        }
    }

    /// The audit context of the person's changes.
    pub fn ctx(&self) -> Context {
        Context {
            actor: Actor::Person {
                id: self.person().id,
                email: self.person().email.clone(),
            },
            address: self.0.client.address.clone(),
        }
    }

    /// Whether the person confirmed their identity within `TERN_APP_CONFIRM_SECS`.
    pub fn confirmed(&self, state: &AppState) -> bool {
        people::is_confirmed(&self.0.view.session, &state.core.people, now_ms())
    }
}

impl FromRequestParts<AppState> for Signed {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, Response> {
        parts
            .extensions
            .get::<Current>()
            .cloned()
            .map(Signed)
            .ok_or_else(|| Redirect::to(SIGN_IN).into_response())
    }
}

/// `Option<Signed>`: whether anyone is signed in, for pages that serve both.
impl OptionalFromRequestParts<AppState> for Signed {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _: &AppState,
    ) -> Result<Option<Self>, std::convert::Infallible> {
        Ok(parts.extensions.get::<Current>().cloned().map(Signed))
    }
}

/// The request's client (every request under `/app` has one).
pub struct ClientInfo(pub Client);

impl FromRequestParts<AppState> for ClientInfo {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _: &AppState,
    ) -> Result<Self, std::convert::Infallible> {
        Ok(ClientInfo(
            parts
                .extensions
                .get::<Client>()
                .cloned()
                .unwrap_or_default(),
        ))
    }
}

/// A signed-in person looking at one of their organisations (every organisation page).
#[derive(Clone, Debug)]
pub struct OrgMember {
    pub signed: Signed,
    pub org: Org,
    pub member: Member,
}

impl OrgMember {
    pub fn role(&self) -> Role {
        self.member.role
    }

    pub fn frame(&self, nav: Nav) -> Frame {
        self.signed.frame(nav)
    }

    pub fn ctx(&self) -> Context {
        self.signed.ctx()
    }

    pub fn confirmed(&self, state: &AppState) -> bool {
        self.signed.confirmed(state)
    }

    /// The organisation page of `signed`: the 403 page without an organisation, enrolment
    /// first when the organisation requires two-factor.
    pub async fn of(signed: Signed, state: &AppState) -> Result<OrgMember, Response> {
        let view = &signed.0.view;
        if view.needs_two_factor {
            return Err(Redirect::to("/app/two-factor").into_response());
        }
        let Some(current) = view.current.clone() else {
            return Err(AppError::Refused(
                "You are not a member of any organisation on this Tern any more. Ask an owner or an admin to invite you again.".into(),
            )
            .into_response());
        };
        let org = match state.core.db.get_org(current.member.org_id).await {
            Ok(Some(org)) => org,
            Ok(None) => return Err(AppError::NotFound.into_response()),
            Err(e) => return Err(AppError::from(tern_domain::Problem::from(e)).into_response()),
        };
        Ok(OrgMember {
            signed,
            org,
            member: current.member,
        })
    }
}

impl FromRequestParts<AppState> for OrgMember {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let signed =
            <Signed as FromRequestParts<AppState>>::from_request_parts(parts, state).await?;
        OrgMember::of(signed, state).await
    }
}

/// What the `confirm` field asks for.
pub fn confirm_label(me: &Signed) -> &'static str {
    if me.person().has_two_factor() {
        "A code from your authenticator app"
    } else {
        "Your password"
    }
}

/// Identity confirmation for a sensitive action (APP.md §2, §7): `Ok` when the person
/// confirmed within the window, or when `secret` (the form field `confirm`: the current
/// TOTP code with two-factor, else the password) is right now; else the words for the page.
pub async fn require_confirmation(
    state: &AppState,
    me: &Signed,
    secret: Option<&str>,
) -> Result<(), String> {
    if me.confirmed(state) {
        return Ok(());
    }
    let secret = secret.map(str::trim).filter(|s| !s.is_empty());
    let Some(secret) = secret else {
        return Err(if me.person().has_two_factor() {
            "Confirm it is you: enter a code from your authenticator app.".into()
        } else {
            "Confirm it is you: enter your password.".into()
        });
    };
    people::confirm(&state.core, me.0.view.session.id, me.person().id, secret)
        .await
        .map_err(|p| crate::forms::words(&p))
}
