//! Two-factor authentication (APP.md §2): status, enrolment (a QR code rendered by the
//! server, the base32 key, one valid code), the ten recovery codes shown once, and turning it
//! off (identity confirmation; refused while an organisation of the person requires it).
//!
//! | route | what |
//! |---|---|
//! | `GET /app/two-factor` | status; where the `OrgMember` extractor sends a person who must enrol |
//! | `POST /app/two-factor/begin` | a new secret → `/app/two-factor/setup` |
//! | `GET /app/two-factor/setup` | the enrolment in progress: QR code, key, code field |
//! | `POST /app/two-factor/finish` | `code` → the recovery codes, shown once |
//! | `POST /app/two-factor/disable` | `confirm` (when not confirmed lately) → off |

use crate::AppState;
use crate::errors::AppError;
use crate::forms::words_for;
use crate::frame::{FlashKind, Frame, Nav};
use crate::pages::profile::refused;
use crate::session::{Signed, confirm_label, redirect_with_flash, require_confirmation};
use askama::Template;
use axum::Router;
use axum::extract::{Form, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tern_core::people;

/// The two-factor routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/two-factor", get(show))
        .route("/app/two-factor/begin", post(begin))
        .route("/app/two-factor/setup", get(setup))
        .route("/app/two-factor/finish", post(finish))
        .route("/app/two-factor/disable", post(disable))
}

#[derive(Template)]
#[template(path = "two_factor.html")]
pub struct StatusPage<'a> {
    pub frame: &'a Frame,
    pub enabled: bool,
    pub recovery_left: i64,
    /// The current organisation, when it requires two-factor and the person has none.
    pub required_by_current: Option<&'a str>,
    /// The person's organisations that require two-factor (it cannot be turned off).
    pub required_by: Vec<&'a str>,
    pub confirmed: bool,
    pub confirm_label: &'a str,
    pub confirm_is_code: bool,
    pub confirm_error: Option<String>,
    /// A refusal that belongs to no field.
    pub error: Option<String>,
}

#[derive(Template)]
#[template(path = "two_factor_setup.html")]
pub struct SetupPage<'a> {
    pub frame: &'a Frame,
    pub required_by_current: Option<&'a str>,
    /// The QR code's SVG, rebuilt by [`safe_qr_svg`].
    pub qr_svg: String,
    /// The base32 key in groups of four.
    pub secret_grouped: String,
    pub code_error: Option<String>,
}

#[derive(Template)]
#[template(path = "two_factor_codes.html")]
pub struct CodesPage<'a> {
    pub frame: &'a Frame,
    pub codes: &'a [String],
    /// Where "continue" leads.
    pub next: &'a str,
}

fn required_by_current(me: &Signed) -> Option<&str> {
    let v = &me.0.view;
    v.needs_two_factor
        .then(|| v.current.as_ref().map(|m| m.org_name.as_str()))
        .flatten()
}

async fn status_page<'a>(
    state: &AppState,
    me: &'a Signed,
    frame: &'a Frame,
) -> Result<StatusPage<'a>, AppError> {
    let v = &me.0.view;
    let enabled = v.person.has_two_factor();
    let recovery_left = if enabled {
        state
            .core
            .db
            .count_recovery_codes(v.person.id)
            .await
            .map_err(|e| AppError::Internal(e.to_string()))?
    } else {
        0
    };
    Ok(StatusPage {
        frame,
        enabled,
        recovery_left,
        required_by_current: required_by_current(me),
        required_by: v
            .memberships
            .iter()
            .filter(|m| m.two_factor_required)
            .map(|m| m.org_name.as_str())
            .collect(),
        confirmed: me.confirmed(state),
        confirm_label: confirm_label(me),
        confirm_is_code: enabled,
        confirm_error: None,
        error: None,
    })
}

/// `GET /app/two-factor`.
pub async fn show(State(state): State<AppState>, me: Signed) -> Result<Html<String>, AppError> {
    let frame = me.frame(Nav::None);
    let page = status_page(&state, &me, &frame).await?;
    crate::errors::render(&page)
}

/// `POST /app/two-factor/begin`: a new secret (replacing an unfinished one), then the
/// setup page (a redirect, so a reload shows the same secret).
pub async fn begin(State(state): State<AppState>, me: Signed) -> Result<Response, AppError> {
    match people::two_factor_begin(&state.core, me.person().id).await {
        Ok(_) => Ok(Redirect::to("/app/two-factor/setup").into_response()),
        // Already on (another tab): the status page says so.
        Err(p) if p.code == tern_domain::ErrorCode::Conflict => Ok(redirect_with_flash(
            &state,
            "/app/two-factor",
            FlashKind::Info,
            "Two-factor authentication is already on.",
        )),
        Err(p) => Err(p.into()),
    }
}

async fn setup_page(
    state: &AppState,
    me: &Signed,
    code_error: Option<String>,
) -> Result<Option<String>, AppError> {
    let Some(e) = people::two_factor_pending(&state.core, me.person().id).await? else {
        return Ok(None);
    };
    let frame = me.frame(Nav::None);
    let page = SetupPage {
        frame: &frame,
        required_by_current: required_by_current(me),
        qr_svg: safe_qr_svg(&e.qr_svg)
            .ok_or_else(|| AppError::Internal("QR code SVG not as expected".into()))?,
        secret_grouped: group(&e.secret_base32),
        code_error,
    };
    Ok(Some(page.render()?))
}

/// `GET /app/two-factor/setup`: the enrolment in progress, or the status page when none.
pub async fn setup(State(state): State<AppState>, me: Signed) -> Result<Response, AppError> {
    Ok(match setup_page(&state, &me, None).await? {
        Some(html) => Html(html).into_response(),
        None => Redirect::to("/app/two-factor").into_response(),
    })
}

#[derive(Deserialize)]
pub struct CodeForm {
    #[serde(default)]
    code: String,
}

/// `POST /app/two-factor/finish`: one valid code turns two-factor on; the answer is the
/// recovery codes, shown this once (never stored in the clear, never shown again).
pub async fn finish(
    State(state): State<AppState>,
    me: Signed,
    Form(form): Form<CodeForm>,
) -> Result<Response, AppError> {
    match people::two_factor_finish(&state.core, &me.ctx(), me.person().id, &form.code).await {
        Ok(codes) => {
            let frame = me.frame(Nav::None);
            let page = CodesPage {
                frame: &frame,
                codes: &codes,
                next: "/app",
            };
            Ok(Html(page.render()?).into_response())
        }
        Err(p) => {
            let Some(words) = words_for(&p, "code") else {
                // No enrolment in progress any more (finished in another tab, or never begun).
                return Ok(redirect_with_flash(
                    &state,
                    "/app/two-factor",
                    FlashKind::Error,
                    &p.message,
                ));
            };
            match setup_page(&state, &me, Some(words)).await? {
                Some(html) => {
                    Ok((axum::http::StatusCode::UNPROCESSABLE_ENTITY, Html(html)).into_response())
                }
                None => Ok(Redirect::to("/app/two-factor").into_response()),
            }
        }
    }
}

#[derive(Deserialize)]
pub struct ConfirmForm {
    confirm: Option<String>,
}

impl std::fmt::Debug for ConfirmForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConfirmForm(<redacted>)")
    }
}

/// `POST /app/two-factor/disable`: after an identity confirmation; refused (and explained)
/// while one of the person's organisations requires two-factor.
pub async fn disable(
    State(state): State<AppState>,
    me: Signed,
    Form(form): Form<ConfirmForm>,
) -> Result<Response, AppError> {
    let frame = me.frame(Nav::None);
    let mut page = status_page(&state, &me, &frame).await?;
    if !page.enabled {
        return Ok(Redirect::to("/app/two-factor").into_response());
    }
    if !page.required_by.is_empty() {
        page.error = Some("Two-factor authentication cannot be turned off while an organisation you belong to requires it.".into());
        return refused(&page);
    }
    let secret = form.confirm.as_deref().filter(|s| !s.is_empty());
    if let Err(words) = require_confirmation(&state, &me, secret).await {
        page.confirm_error = Some(words);
        return refused(&page);
    }
    match people::two_factor_disable(&state.core, &me.ctx(), me.person().id).await {
        Ok(()) => Ok(redirect_with_flash(
            &state,
            "/app/two-factor",
            FlashKind::Success,
            "Two-factor authentication is off.",
        )),
        Err(p) if p.code == tern_domain::ErrorCode::PermissionDenied => {
            page.error = Some(p.message);
            refused(&page)
        }
        Err(p) => Err(p.into()),
    }
}

/// The base32 key in groups of four characters, easier to type.
fn group(secret: &str) -> String {
    secret
        .as_bytes()
        .chunks(4)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The QR code as inline SVG for the page. The qrcode crate's document is not input, but it
/// goes into the page unescaped, so it is not passed through: its size and its one path are
/// read, checked to be only numbers and path commands, and written into our own markup
/// (no XML declaration, a title for screen readers). `None` when it is not as expected.
pub fn safe_qr_svg(svg: &str) -> Option<String> {
    fn attr<'a>(svg: &'a str, name: &str) -> Option<&'a str> {
        let start = svg.find(&format!(" {name}=\""))? + name.len() + 3;
        let len = svg[start..].find('"')?;
        Some(&svg[start..start + len])
    }
    let width = attr(svg, "width")?;
    let height = attr(svg, "height")?;
    let path_at = svg.find("<path ")?;
    let d = attr(&svg[path_at..], "d")?;
    let numeric = |s: &str| !s.is_empty() && s.len() < 6 && s.bytes().all(|b| b.is_ascii_digit());
    let path_ok = !d.is_empty()
        && d.bytes()
            .all(|b| b.is_ascii_digit() || b" MmHhVvZz".contains(&b));
    if !numeric(width) || !numeric(height) || !path_ok {
        return None;
    }
    Some(format!(
        concat!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" shape-rendering="crispEdges" role="img" aria-labelledby="qr-title">"#,
            r#"<title id="qr-title">QR code to add Tern to your authenticator app</title>"#,
            r##"<rect x="0" y="0" width="{w}" height="{h}" fill="#fff"/><path fill="#000" d="{d}"/></svg>"##
        ),
        w = width,
        h = height,
        d = d
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::profile::tests::{EVIL, assert_escaped, frame};

    #[test]
    fn the_pages_escape_and_explain() {
        let frame = frame();
        let status = StatusPage {
            frame: &frame,
            enabled: true,
            recovery_left: 9,
            required_by_current: None,
            required_by: vec![EVIL, "Beta"],
            confirmed: false,
            confirm_label: "A code from your authenticator app",
            confirm_is_code: true,
            confirm_error: None,
            error: Some(EVIL.into()),
        };
        let html = status.render().unwrap();
        assert_escaped(&html);
        assert!(html.contains("You cannot turn it off while"));
        assert!(
            !html.contains("/app/two-factor/disable"),
            "no form while required"
        );
        let off = StatusPage {
            required_by: vec![],
            error: None,
            ..status
        };
        let html = off.render().unwrap();
        assert!(html.contains("action=\"/app/two-factor/disable\""));
        assert!(html.contains("<label for=\"confirm\">A code from your authenticator app</label>"));
        assert!(html.contains("autocomplete=\"one-time-code\""));
        let confirmed = StatusPage {
            confirmed: true,
            ..off
        };
        assert!(!confirmed.render().unwrap().contains("id=\"confirm\""));

        let url = "otpauth://totp/Tern:ada%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=Tern";
        let svg = tern_domain::people::totp::qr_svg(url).unwrap();
        let setup = SetupPage {
            frame: &frame,
            required_by_current: Some(EVIL),
            qr_svg: safe_qr_svg(&svg).unwrap(),
            secret_grouped: group("JBSWY3DPEHPK3PXP"),
            code_error: Some(EVIL.into()),
        };
        let html = setup.render().unwrap();
        assert_escaped(&html);
        assert!(html.contains("<svg xmlns"));
        assert!(html.contains("JBSW Y3DP EHPK 3PXP"));
        assert!(html.contains("requires two-factor authentication"));

        let codes = vec!["abcd-efgh".to_string(), EVIL.to_string()];
        let page = CodesPage {
            frame: &frame,
            codes: &codes,
            next: "/app",
        };
        let html = page.render().unwrap();
        assert_escaped(&html);
        assert!(html.contains("Store these somewhere safe"));
        assert!(html.contains("data-copy=\"#recovery-codes\""));
    }

    #[test]
    fn the_qr_code_is_rebuilt_from_numbers_only() {
        let url = "otpauth://totp/Tern:ada%40example.com?secret=JBSWY3DPEHPK3PXP&issuer=Tern";
        let svg = tern_domain::people::totp::qr_svg(url).unwrap();
        let safe = safe_qr_svg(&svg).unwrap();
        assert!(safe.starts_with("<svg "));
        assert!(!safe.contains("<?xml"));
        assert!(safe.contains("<path fill=\"#000\" d=\"M"));
        // Anything unexpected is refused rather than passed on.
        let evil = svg.replace(" d=\"M", " d=\"\"/><script>alert(1)</script><path d=\"M");
        assert_eq!(safe_qr_svg(&evil), None);
        assert_eq!(
            safe_qr_svg("<svg width=\"1\" height=\"1\" onload=\"x\">"),
            None
        );
        assert_eq!(group("ABCDEFGHIJ"), "ABCD EFGH IJ");
    }
}
