//! The message explorer (APP.md §4): one search box — a message id, a wamid, a phone number
//! in any common format, a username (`@name`) or a BSUID — with filters (status, direction,
//! number, campaign, time), newest first, 50 a page. Each row opens the message's page
//! ([`super::message`]). Every role of the organisation may look.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::{Stamp, parse_local_utc};
use crate::pages::respond;
use crate::session::OrgMember;
use askama::Template;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde::Deserialize;
use tern_core::explorer::{self, Filters, TERM_HELP};
use tern_domain::message::{Direction, Status};
use tern_store::Contact;
use uuid::Uuid;

/// Messages a page.
pub const PAGE_SIZE: u32 = 50;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/messages", get(list))
        .merge(super::message::routes())
}

/// How a customer is named: their phone, else their username, else their BSUID; with their
/// name when known.
pub fn customer_label(c: &Contact) -> String {
    let id = match (&c.wa_id, &c.username, &c.user_id) {
        (Some(w), _, _) => format!("+{w}"),
        (None, Some(u), _) => format!("@{u}"),
        (None, None, Some(u)) => u.clone(),
        (None, None, None) => "(unknown)".to_string(),
    };
    match c.name.as_deref().filter(|n| !n.is_empty()) {
        Some(n) => format!("{id} ({n})"),
        None => id,
    }
}

pub fn direction_words(d: Direction) -> &'static str {
    match d {
        Direction::Outbound => "Outbound",
        Direction::Inbound => "Inbound",
    }
}

pub fn status_words(s: Status) -> &'static str {
    match s {
        Status::Accepted => "Accepted (queued)",
        Status::Sending => "Sending",
        Status::Sent => "Sent",
        Status::Delivered => "Delivered",
        Status::Read => "Read",
        Status::Failed => "Failed",
        Status::Received => "Received",
    }
}

/// The statuses a person filters by, in the order a message moves.
const STATUSES: [Status; 7] = [
    Status::Accepted,
    Status::Sending,
    Status::Sent,
    Status::Delivered,
    Status::Read,
    Status::Failed,
    Status::Received,
];

/// One row of the list.
#[derive(Debug, Clone)]
pub struct Row {
    pub id: String,
    pub at: Stamp,
    pub direction: &'static str,
    pub outbound: bool,
    pub counterpart: String,
    pub kind: String,
    pub status: String,
    pub status_words: &'static str,
    pub failure_code: Option<String>,
}

/// A choice of a filter's select.
#[derive(Debug, Clone)]
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

fn choices(
    any: &str,
    current: &str,
    items: impl IntoIterator<Item = (String, String)>,
) -> Vec<Choice> {
    std::iter::once((String::new(), any.to_string()))
        .chain(items)
        .map(|(value, label)| Choice {
            selected: value == current,
            value,
            label,
        })
        .collect()
}

#[derive(Template)]
#[template(path = "messages/list.html")]
pub struct ListPage {
    pub frame: Frame,
    pub q: String,
    pub statuses: Vec<Choice>,
    pub directions: Vec<Choice>,
    pub numbers: Vec<Choice>,
    pub campaigns: Vec<Choice>,
    pub from: String,
    pub until: String,
    /// Why the search could not run (a term or a time it cannot read).
    pub problems: Vec<String>,
    pub rows: Vec<Row>,
    /// Whether any search or filter is set.
    pub searching: bool,
    pub paged: bool,
    /// The first page of this search.
    pub newest: Option<String>,
    pub older: Option<String>,
    pub help: &'static str,
}

/// The query string of the explorer (every field a string: a bad value is explained on the
/// page, never refused by the framework).
#[derive(Debug, Deserialize, Default, Clone)]
pub struct ExplorerQuery {
    #[serde(default)]
    pub q: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub direction: String,
    #[serde(default)]
    pub number: String,
    #[serde(default)]
    pub campaign: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub until: String,
    /// The previous page's last message id.
    #[serde(default)]
    pub before: String,
}

impl ExplorerQuery {
    /// The search as a query string, without the page position.
    fn encoded(&self) -> String {
        let mut s = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in [
            ("q", &self.q),
            ("status", &self.status),
            ("direction", &self.direction),
            ("number", &self.number),
            ("campaign", &self.campaign),
            ("from", &self.from),
            ("until", &self.until),
        ] {
            if !v.trim().is_empty() {
                s.append_pair(k, v.trim());
            }
        }
        s.finish()
    }

    /// The filters, or the words for each that cannot be read.
    fn filters(&self) -> Result<Filters, Vec<String>> {
        let mut problems = Vec::new();
        let mut f = Filters::default();
        let status = self.status.trim();
        if !status.is_empty() {
            match Status::parse(status) {
                Some(s) => f.status = Some(s),
                None => problems.push("Choose a status from the list.".to_string()),
            }
        }
        match self.direction.trim() {
            "" => {}
            "outbound" => f.direction = Some(Direction::Outbound),
            "inbound" => f.direction = Some(Direction::Inbound),
            _ => problems.push("Choose a direction from the list.".to_string()),
        }
        let number = self.number.trim();
        if !number.is_empty() {
            f.phone_number_id = Some(number.chars().take(64).collect());
        }
        let campaign = self.campaign.trim();
        if !campaign.is_empty() {
            match Uuid::parse_str(campaign) {
                Ok(id) => f.campaign_id = Some(id),
                Err(_) => problems.push("Choose a campaign from the list.".to_string()),
            }
        }
        for (value, slot, label) in [
            (&self.from, &mut f.from, "From"),
            (&self.until, &mut f.until, "Until"),
        ] {
            let v = value.trim();
            if v.is_empty() {
                continue;
            }
            match parse_local_utc(v) {
                Some(ms) => *slot = Some(ms),
                None => problems.push(format!(
                    "{label}: enter a date and time, e.g. 2026-01-31 12:00 (UTC)."
                )),
            }
        }
        if let (Some(a), Some(b)) = (f.from, f.until)
            && a >= b
        {
            problems.push("\"From\" must be before \"Until\".".to_string());
        }
        if problems.is_empty() {
            Ok(f)
        } else {
            Err(problems)
        }
    }
}

fn row(found: &explorer::Found) -> Row {
    let m = &found.message;
    Row {
        id: m.id.to_string(),
        at: Stamp::at_seconds(m.created_at),
        direction: direction_words(m.direction),
        outbound: m.direction == Direction::Outbound,
        counterpart: found
            .contact
            .as_ref()
            .map(customer_label)
            .unwrap_or_else(|| "(contact removed)".into()),
        kind: m.r#type.clone(),
        status: m.status.as_str().to_string(),
        status_words: status_words(m.status),
        failure_code: m.failure_code.clone(),
    }
}

/// `GET /app/messages`.
pub async fn list(
    State(state): State<AppState>,
    me: OrgMember,
    Query(query): Query<ExplorerQuery>,
) -> Result<Response, AppError> {
    let core = &state.core;
    let org = me.org.id;
    let numbers = explorer::numbers(core, org).await?;
    let mut campaigns = explorer::campaigns(core, org).await?;
    let mut problems = Vec::new();
    let term = match explorer::parse_term(&query.q) {
        Ok(t) => t,
        Err(words) => {
            problems.push(words);
            None
        }
    };
    let filters = query.filters().unwrap_or_else(|p| {
        problems.extend(p);
        Filters::default()
    });
    // A campaign older than the list's newest hundred is still shown as chosen.
    if let Some(c) = filters.campaign_id
        && !campaigns.iter().any(|x| x.id == c)
        && let Ok(found) = tern_core::campaigns::get(core, org, c).await
    {
        campaigns.push(found);
    }
    let before = Uuid::parse_str(query.before.trim()).ok();
    let page = if problems.is_empty() {
        explorer::search(core, org, term.as_ref(), &filters, before, PAGE_SIZE).await?
    } else {
        explorer::Page::default()
    };
    let search = query.encoded();
    let older = page.next.map(|id| match search.as_str() {
        "" => format!("/app/messages?before={id}"),
        s => format!("/app/messages?{s}&before={id}"),
    });
    let newest = before.map(|_| match search.as_str() {
        "" => "/app/messages".to_string(),
        s => format!("/app/messages?{s}"),
    });
    let view = ListPage {
        frame: me.frame(Nav::Messages),
        q: query.q.trim().to_string(),
        statuses: choices(
            "Any status",
            query.status.trim(),
            STATUSES
                .iter()
                .map(|s| (s.as_str().to_string(), status_words(*s).to_string())),
        ),
        directions: choices(
            "Both directions",
            query.direction.trim(),
            [
                ("outbound".to_string(), "Outbound (sent by you)".to_string()),
                (
                    "inbound".to_string(),
                    "Inbound (from customers)".to_string(),
                ),
            ],
        ),
        numbers: choices(
            "Every number",
            query.number.trim(),
            numbers
                .iter()
                .map(|n| (n.id.clone(), n.display_phone_number.clone())),
        ),
        campaigns: choices(
            "Any or no campaign",
            query.campaign.trim(),
            campaigns.iter().map(|c| (c.id.to_string(), c.name.clone())),
        ),
        from: query.from.trim().to_string(),
        until: query.until.trim().to_string(),
        searching: !search.is_empty(),
        rows: page.rows.iter().map(row).collect(),
        paged: before.is_some(),
        newest,
        older,
        help: TERM_HELP,
        problems,
    };
    let status = if view.problems.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    respond(status, &view)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_keeps_its_filters_in_the_page_links() {
        let q = ExplorerQuery {
            q: " +1 415 555 0100 ".into(),
            status: "failed".into(),
            before: "x".into(),
            ..Default::default()
        };
        assert_eq!(q.encoded(), "q=%2B1+415+555+0100&status=failed");
        assert_eq!(q.filters().unwrap().status, Some(Status::Failed));
    }

    #[test]
    fn bad_filters_are_explained() {
        let q = ExplorerQuery {
            status: "lost".into(),
            direction: "sideways".into(),
            from: "2026-02-01T00:00".into(),
            until: "2026-01-01T00:00".into(),
            ..Default::default()
        };
        let p = q.filters().unwrap_err();
        assert_eq!(p.len(), 3, "{p:?}");
    }
}
