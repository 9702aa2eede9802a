//! The organisation's audit log (APP.md §2, §7), for owners and admins: newest first, 50 a
//! page, filtered by a kind of action (an action-name prefix). Who (a person, a key or the
//! operator), what, its target, when and from which address.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::Stamp;
use crate::session::OrgMember;
use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;
use serde::Deserialize;
use serde_json::Value;
use tern_core::audit::{self, AuditEntry, PageRequest};
use tern_domain::auth::Role;
use uuid::Uuid;

pub fn routes() -> Router<AppState> {
    Router::new().route("/app/audit", get(show))
}

/// Entries a page.
pub const PAGE_SIZE: u32 = 50;

/// The filter's choices: (action prefix, label).
pub const FILTERS: [(&str, &str); 8] = [
    ("", "Everything"),
    ("sign_in.", "Sign-ins"),
    ("member.", "Members"),
    ("two_factor.", "Two-factor"),
    ("password.", "Passwords"),
    ("org.", "Organisation settings"),
    ("key.", "API keys"),
    ("subscription.", "Webhooks"),
];

/// What an action means, in words.
pub fn action_words(action: &str) -> &'static str {
    match action {
        audit::SIGN_IN_SUCCEEDED => "Signed in",
        audit::SIGN_IN_FAILED => "Failed to sign in",
        audit::SIGN_IN_LOCKED => "Sign-in refused: account locked",
        audit::MEMBER_INVITED => "Invited a member",
        audit::MEMBER_ROLE_CHANGED => "Changed a member's role",
        audit::MEMBER_REMOVED => "Removed a member",
        audit::MEMBER_RESET => "Reset a person's access (new link, two-factor off)",
        audit::TWO_FACTOR_ENABLED => "Turned two-factor on",
        audit::TWO_FACTOR_DISABLED => "Turned two-factor off",
        audit::ORG_TWO_FACTOR_REQUIRED => "Changed \"Require two-factor\"",
        audit::PASSWORD_CHANGED => "Changed a password",
        audit::KEY_CREATED => "Created an API key",
        audit::KEY_ROTATED => "Rotated an API key",
        audit::KEY_REVOKED => "Revoked an API key",
        audit::SUBSCRIPTION_CREATED => "Created a webhook endpoint",
        audit::SUBSCRIPTION_UPDATED => "Changed a webhook endpoint",
        audit::SUBSCRIPTION_DELETED => "Deleted a webhook endpoint",
        audit::SUBSCRIPTION_SECRET_ROTATED => "Rotated a webhook endpoint's secret",
        audit::SUBSCRIPTION_REPLAYED => "Replayed webhook deliveries",
        audit::SUBSCRIPTION_DELIVERY_REPLAYED => "Replayed one webhook delivery of a message",
        _ => "Other",
    }
}

fn target_kind_words(kind: &str) -> &str {
    match kind {
        audit::TARGET_KEY => "Key",
        audit::TARGET_SUBSCRIPTION => "Webhook endpoint",
        audit::TARGET_MEMBER => "Member",
        audit::TARGET_ORG => "Organisation",
        tern_core::people::TARGET_PERSON => "Person",
        other => other,
    }
}

/// A row of the log as shown.
pub struct Line {
    pub when: Stamp,
    /// `Person`, `Key` or `Operator`.
    pub actor_kind: &'static str,
    pub actor: String,
    pub action: String,
    pub what: &'static str,
    /// The target's kind and what names it (an email, a key's name), else its id.
    pub target: Option<(String, String)>,
    /// The details, one `name: value` a line.
    pub details: Vec<String>,
    pub address: String,
}

fn scalar(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(", "),
        Value::Null => "none".to_string(),
        Value::Bool(true) => "yes".to_string(),
        Value::Bool(false) => "no".to_string(),
        other => other.to_string(),
    };
    // Details are short; a long one (a URL) is cut rather than stretching the table.
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

impl Line {
    pub fn new(e: &AuditEntry) -> Line {
        let detail = e.detail.as_ref().and_then(Value::as_object);
        // What names the target, taken out of the details shown below it.
        let name_field = detail.and_then(|d| {
            ["email", "name"]
                .into_iter()
                .find(|k| d.get(*k).is_some_and(Value::is_string))
        });
        // A person acting on themselves (a sign-in, their password): the actor says it all.
        let own = e.target_id.is_some() && e.target_id == e.actor_id;
        let target = e.target_kind.as_deref().filter(|_| !own).map(|kind| {
            let name = name_field
                .and_then(|k| detail.and_then(|d| d.get(k)))
                .map(scalar)
                .or_else(|| e.target_id.clone())
                .unwrap_or_default();
            (target_kind_words(kind).to_string(), name)
        });
        let details = detail
            .map(|d| {
                d.iter()
                    .filter(|(k, _)| Some(k.as_str()) != name_field || e.target_kind.is_none())
                    .map(|(k, v)| format!("{}: {}", k.replace('_', " "), scalar(v)))
                    .collect()
            })
            .unwrap_or_default();
        Line {
            when: Stamp::at_seconds(e.at),
            actor_kind: match e.actor_kind.as_str() {
                "person" => "Person",
                "key" => "Key",
                _ => "Operator",
            },
            actor: e.actor_label.clone(),
            action: e.action.clone(),
            what: action_words(&e.action),
            target,
            details,
            address: e.address.clone().unwrap_or_default(),
        }
    }
}

/// A filter choice of the select.
pub struct FilterOption {
    pub value: &'static str,
    pub label: &'static str,
    pub selected: bool,
}

#[derive(Template)]
#[template(path = "audit.html")]
pub struct AuditPage<'a> {
    pub frame: &'a Frame,
    pub org_name: &'a str,
    pub lines: Vec<Line>,
    pub filters: Vec<FilterOption>,
    /// The current filter (for the pagination links), `""` for everything.
    pub action: String,
    /// Whether this is a later page.
    pub paged: bool,
    /// The newest page of this filter (on a later page).
    pub newest: Option<String>,
    /// The next (older) page's address.
    pub older: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct AuditQuery {
    action: Option<String>,
    /// `{at}.{id}` of the last entry of the previous page.
    before: Option<String>,
}

/// A page position as carried in the address. A forged one only moves within this
/// organisation's own log, so it is not signed.
fn parse_before(raw: &str) -> Option<(i64, Uuid)> {
    let (at, id) = raw.split_once('.')?;
    Some((at.parse().ok()?, Uuid::parse_str(id).ok()?))
}

/// The query string's value of `s` (an action prefix: letters, `_` and `.`).
fn encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `GET /app/audit`: owners and admins; developers get the 403 page.
pub async fn show(
    State(state): State<AppState>,
    me: OrgMember,
    Query(q): Query<AuditQuery>,
) -> Result<Html<String>, AppError> {
    if me.role() == Role::Developer {
        return Err(AppError::Forbidden);
    }
    let action: String = q
        .action
        .unwrap_or_default()
        .trim()
        .chars()
        .take(64)
        .collect();
    let before = q.before.as_deref().and_then(parse_before);
    let req = PageRequest {
        limit: PAGE_SIZE,
        before,
        action_prefix: (!action.is_empty()).then(|| action.clone()),
    };
    let page = audit::list(&state.core.db, me.org.id, &req).await?;
    let filter = if action.is_empty() {
        String::new()
    } else {
        format!("action={}", encode(&action))
    };
    let older = page.next.map(|(at, id)| match filter.as_str() {
        "" => format!("/app/audit?before={at}.{id}"),
        f => format!("/app/audit?before={at}.{id}&{f}"),
    });
    let newest = before.map(|_| match filter.as_str() {
        "" => "/app/audit".to_string(),
        f => format!("/app/audit?{f}"),
    });
    let frame = me.frame(Nav::Audit);
    let view = AuditPage {
        frame: &frame,
        org_name: &me.org.name,
        lines: page.items.iter().map(Line::new).collect(),
        filters: FILTERS
            .iter()
            .map(|&(value, label)| FilterOption {
                value,
                label,
                selected: value == action,
            })
            .collect(),
        paged: before.is_some(),
        newest,
        action,
        older,
    };
    Ok(Html(view.render()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn frame() -> Frame {
        Frame::sample("ada@acme.test", "owner", Nav::Audit)
    }

    fn entry(action: &str, detail: Value) -> AuditEntry {
        AuditEntry {
            id: Uuid::nil(),
            org_id: None,
            at: 1_700_000_000_123,
            actor_kind: "person".into(),
            actor_id: None,
            actor_label: "<b>ada</b>@acme.test".into(),
            action: action.into(),
            target_kind: Some(audit::TARGET_MEMBER.into()),
            target_id: Some("m1".into()),
            detail: Some(detail),
            address: Some("192.0.2.1".into()),
        }
    }

    #[test]
    fn a_line_names_its_target_and_lists_the_rest() {
        let l = Line::new(&entry(
            audit::MEMBER_ROLE_CHANGED,
            json!({"email": "bob@acme.test", "from": "developer", "to": "admin"}),
        ));
        assert_eq!(
            l.target,
            Some(("Member".to_string(), "bob@acme.test".to_string()))
        );
        assert_eq!(l.details, ["from: developer", "to: admin"]);
        assert_eq!(l.when.iso, "2023-11-14T22:13:20.123Z");
        assert_eq!(l.when.text, "2023-11-14 22:13:20 UTC");
        assert_eq!(l.what, "Changed a member's role");
    }

    #[test]
    fn the_page_escapes_and_links_the_next_page() {
        let lines = vec![Line::new(&entry(
            audit::MEMBER_INVITED,
            json!({"email": "<script>x</script>", "role": "developer"}),
        ))];
        let f = frame();
        let html = AuditPage {
            frame: &f,
            org_name: "Acme",
            lines,
            filters: vec![],
            action: "member.".into(),
            paged: true,
            newest: Some("/app/audit?action=member.".into()),
            older: Some("/app/audit?before=1.x&action=member.".into()),
        }
        .render()
        .unwrap();
        assert!(!html.contains("<script>x"), "{html}");
        assert!(!html.contains("<b>ada"), "{html}");
        assert!(html.contains("datetime=\"2023-11-14T22:13:20.123Z\""));
        assert!(
            html.contains("/app/audit?before=1.x&#38;action=member."),
            "{html}"
        );
        assert!(html.contains("192.0.2.1"));
    }

    #[test]
    fn positions_parse_or_are_ignored() {
        let id = Uuid::now_v7();
        assert_eq!(parse_before(&format!("12.{id}")), Some((12, id)));
        assert_eq!(parse_before("12"), None);
        assert_eq!(parse_before("x.y"), None);
    }
}
