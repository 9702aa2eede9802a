//! The home page of a signed-in person (the session layer routes `GET /app` here).

use crate::errors::AppError;
use crate::frame::Frame;
use askama::Template;

#[derive(Template)]
#[template(path = "home.html")]
pub struct HomePage<'a> {
    pub frame: &'a Frame,
}

/// The home page inside `frame`.
pub fn render(frame: &Frame) -> Result<String, AppError> {
    Ok(HomePage { frame }.render()?)
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
        let html = render(&frame("<script>alert(1)</script>")).unwrap();
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
        let html = render(&frame("Ada")).unwrap();
        for href in ["/app/keys", "/app/webhooks", "/app/members", "/app/audit"] {
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
    }
}
