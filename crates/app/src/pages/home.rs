//! The home page of a signed-in person (`GET /app`): the organisation shown, the person's
//! role there, the way to Keys, Webhooks and Members, and for an organisation without a
//! key the next step, "Create your first key".

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::session::OrgMember;
use askama::Template;
use axum::response::Html;
use tern_domain::auth::Role;

#[derive(Template)]
#[template(path = "home.html")]
pub struct HomePage<'a> {
    pub frame: &'a Frame,
    pub org_name: &'a str,
    /// `owner`, `admin` or `developer`.
    pub role: &'a str,
    /// The organisation has no active key: the next step is to create one.
    pub first_key: bool,
    /// Owners and admins manage members (others only see them).
    pub manages_members: bool,
}

/// `GET /app` with a session (see [`super::root`]): the overview once the organisation has
/// a number, else the way to the first steps.
pub async fn show(state: &AppState, me: &OrgMember) -> Result<Html<String>, AppError> {
    let numbers = state
        .core
        .db
        .count_phone_numbers(me.org.id)
        .await
        .map_err(|e| AppError::Internal(format!("counting numbers: {e}")))?;
    if numbers > 0 {
        return super::overview::page(state, me, true).await;
    }
    let keys = state
        .core
        .db
        .count_active_api_keys(me.org.id)
        .await
        .map_err(|e| AppError::Internal(format!("counting keys: {e}")))?;
    let frame = me.frame(Nav::None);
    let page = HomePage {
        frame: &frame,
        org_name: &me.org.name,
        role: me.role().as_str(),
        first_key: keys == 0,
        manages_members: me.role() != Role::Developer,
    };
    Ok(Html(page.render()?))
}

/// The home page inside `frame`, for `org_name` where the person is `role`.
pub fn render(
    frame: &Frame,
    org_name: &str,
    role: Role,
    first_key: bool,
) -> Result<String, AppError> {
    Ok(HomePage {
        frame,
        org_name,
        role: role.as_str(),
        first_key,
        manages_members: role != Role::Developer,
    }
    .render()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Flash, FlashKind, Nav, OrgChoice, Person};

    fn frame(name: &str) -> Frame {
        Frame {
            person: Person {
                name: name.into(),
                email: "ada@example.com".into(),
            },
            orgs: vec![
                OrgChoice {
                    id: "o1".into(),
                    name: "Acme <b>".into(),
                    role: "owner".into(),
                },
                OrgChoice {
                    id: "o2".into(),
                    name: "Beta".into(),
                    role: "developer".into(),
                },
            ],
            current_org: "o2".into(),
            csrf_token: "tok-123".into(),
            nav: Nav::Keys,
            flash: vec![Flash {
                kind: FlashKind::Success,
                text: "Saved \"x\" & <y>".into(),
            }],
        }
    }

    #[test]
    fn every_variable_is_escaped() {
        let html = render(
            &frame("<script>alert(1)</script>"),
            "Acme",
            Role::Owner,
            true,
        )
        .unwrap();
        assert!(!html.contains("<script>alert(1)"), "{html}");
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;")
                || html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(!html.contains("Acme <b>"));
        assert!(!html.contains("<y>"));
    }

    #[test]
    fn the_layout_has_the_frame() {
        let html = render(&frame("Ada"), "Acme", Role::Developer, false).unwrap();
        for href in [
            "/app/keys",
            "/app/webhooks",
            "/app/members",
            "/app/audit",
            "/app/settings",
        ] {
            assert!(html.contains(&format!("href=\"{href}\"")), "{href}");
        }
        assert!(html.contains("aria-current=\"page\""));
        assert_eq!(
            html.matches("value=\"tok-123\"").count(),
            2,
            "switcher + sign out"
        );
        assert!(html.contains("<option value=\"o2\" selected>"));
        assert!(html.contains("Skip to content"));
        assert!(!html.contains("<script>"), "no inline script");
        assert!(!format!("{:?}", frame("Ada")).contains("tok-123"));
        assert!(!html.contains("Create your first key"));
    }

    #[test]
    fn a_new_organisation_is_shown_its_first_step() {
        let html = render(&frame("Ada"), "Acme & Co", Role::Owner, true).unwrap();
        assert!(html.contains("Create your first key"));
        assert!(html.contains("href=\"/app/keys/new\""), "{html}");
        assert!(html.contains("Acme &#38; Co") || html.contains("Acme &amp; Co"));
        assert!(html.contains("owner"));
    }
}
