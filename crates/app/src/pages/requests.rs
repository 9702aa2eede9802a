//! The request log (APP.md §4): every request the organisation's keys made to the public API,
//! newest first, 50 a page, filtered by key, status class, error code, operation and time;
//! a request found by its request id; one request's page with every recorded field, its
//! error body and a link to the message it accepted. Every member sees it (developers debug
//! integrations). A request made without a valid key belongs to no organisation and is shown
//! in none.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::{Stamp, parse_local_utc};
use askama::Template;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;
use tern_core::request_log::{self, Filter, PageRequest, StatusClass};
use tern_domain::ErrorCode;
use tern_store::RequestLogRow;
use uuid::Uuid;

use crate::session::OrgMember;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/requests", get(list))
        .route("/app/requests/{request_id}", get(show))
}

/// Requests a page.
pub const PAGE_SIZE: u32 = 50;

/// The list's query: the filters, a request id to find, the page position.
#[derive(Deserialize, Default, Debug)]
pub struct ListQuery {
    request_id: Option<String>,
    key: Option<String>,
    status: Option<String>,
    code: Option<String>,
    /// `METHOD /template`.
    route: Option<String>,
    /// `datetime-local` values, read as UTC.
    from: Option<String>,
    to: Option<String>,
    /// `{at}.{id}` of the last entry of the previous page.
    before: Option<String>,
}

/// A choice of a select.
pub struct Choice {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

/// A row of the table.
pub struct Line {
    pub href: String,
    pub when: Stamp,
    pub method: String,
    pub path: String,
    pub status: i64,
    pub failed: bool,
    pub error_code: Option<String>,
    pub key: Option<String>,
    pub latency_ms: i64,
}

impl Line {
    fn new(r: &RequestLogRow) -> Line {
        Line {
            href: format!("/app/requests/{}", r.id),
            when: Stamp::at_seconds(r.at),
            method: r.method.clone(),
            path: r.path.clone(),
            status: r.status,
            failed: r.status >= 400,
            error_code: r.error_code.clone(),
            key: r.key_name.clone(),
            latency_ms: r.latency_ms,
        }
    }
}

#[derive(Template)]
#[template(path = "requests/list.html")]
pub struct ListPage<'a> {
    pub frame: &'a Frame,
    pub org_name: &'a str,
    /// Days kept; 0 when the log is off.
    pub days: u16,
    pub lines: Vec<Line>,
    pub request_id: String,
    /// Why the request id search found nothing.
    pub search_error: Option<String>,
    pub keys: Vec<Choice>,
    pub statuses: Vec<Choice>,
    pub codes: Vec<Choice>,
    pub routes: Vec<Choice>,
    pub from: String,
    pub to: String,
    /// Why a time could not be read.
    pub time_error: Option<String>,
    /// Whether any filter is set (the empty state says so).
    pub filtered: bool,
    pub paged: bool,
    /// The first page of these filters (on a later page).
    pub newest: Option<String>,
    pub older: Option<String>,
}

/// A page position as carried in the address. A forged one only moves within this
/// organisation's own log, so it is not signed.
fn parse_before(raw: &str) -> Option<(i64, Uuid)> {
    let (at, id) = raw.split_once('.')?;
    Some((at.parse().ok()?, Uuid::parse_str(id).ok()?))
}

/// The query's value of `v`, trimmed and at most 200 characters (nothing longer is valid).
fn value(v: &Option<String>) -> String {
    request_log::cut(v.as_deref().unwrap_or_default().trim(), 200)
}

/// The filters read from the query: those that name nothing known are dropped. Answers the
/// filter, the query string that repeats it (for the pager) and a time that did not parse.
fn read_filter(q: &ListQuery, routes: &[String]) -> (Filter, String, Option<String>) {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    let mut filter = Filter::default();
    let key = value(&q.key);
    if let Ok(id) = Uuid::parse_str(&key) {
        filter.key_id = Some(id);
        pairs.push(("key", key));
    }
    let status = value(&q.status);
    if let Some(c) = StatusClass::parse(&status) {
        filter.class = Some(c);
        pairs.push(("status", status));
    }
    let code = value(&q.code);
    if ErrorCode::ALL.iter().any(|c| c.as_str() == code) {
        filter.error_code = Some(code.clone());
        pairs.push(("code", code));
    }
    let route = value(&q.route);
    if routes.contains(&route)
        && let Some((m, r)) = route.split_once(' ')
    {
        filter.operation = Some((m.to_string(), r.to_string()));
        pairs.push(("route", route.clone()));
    }
    let mut time_error = None;
    for (name, raw, slot) in [
        ("from", value(&q.from), &mut filter.since),
        ("to", value(&q.to), &mut filter.until),
    ] {
        if raw.is_empty() {
            continue;
        }
        match parse_local_utc(&raw) {
            Some(ms) => {
                *slot = Some(ms);
                pairs.push((name, raw));
            }
            None => {
                time_error = Some(format!(
                    "“{raw}” is not a date and time: write it as 2026-01-31T14:05 (UTC)."
                ))
            }
        }
    }
    let query = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    (filter, query, time_error)
}

/// `/app/requests?{query}` (with `extra` added).
fn address(query: &str, extra: Option<String>) -> String {
    let parts: Vec<String> = extra
        .into_iter()
        .chain((!query.is_empty()).then(|| query.to_string()))
        .collect();
    if parts.is_empty() {
        "/app/requests".to_string()
    } else {
        format!("/app/requests?{}", parts.join("&"))
    }
}

/// `GET /app/requests`: the log, or the request whose id was searched.
pub async fn list(
    State(state): State<AppState>,
    me: OrgMember,
    Query(q): Query<ListQuery>,
) -> Result<Response, AppError> {
    let db = &state.core.db;
    let org_id = me.org.id;
    let request_id = value(&q.request_id);
    let mut search_error = None;
    if !request_id.is_empty() {
        match request_log::parse_request_id(&request_id) {
            None => {
                search_error = Some(format!(
                    "“{request_id}” is not a request id. A request id looks like \
                     0190f5c2-7b1e-7cc4-9d2a-3f8e1b6a4c10: it is the X-Request-Id header of the \
                     API's answer, and the request_id of an error body. Check for a missing or \
                     extra character."
                ))
            }
            Some(id) => match request_log::by_request_id(db, org_id, id).await? {
                Some(_) => return Ok(Redirect::to(&format!("/app/requests/{id}")).into_response()),
                None => {
                    search_error = Some(format!(
                        "No request {id} in the log of {}. Requests are kept {} days; a request \
                         made with another organisation's key, or without a valid key, is not \
                         shown here.",
                        me.org.name,
                        state.core.request_log.days()
                    ))
                }
            },
        }
    }
    let routes = state.core.request_log.routes();
    let (filter, query, time_error) = read_filter(&q, routes);
    let before = q.before.as_deref().and_then(parse_before);
    let page = request_log::list(
        db,
        org_id,
        &filter,
        PageRequest {
            limit: PAGE_SIZE,
            before,
        },
    )
    .await?;
    let keys = tern_core::keys::list(db, org_id).await?;
    let key_choices = keys
        .iter()
        .map(|k| Choice {
            value: k.key.id.to_string(),
            label: format!(
                "{} ({}…){}",
                k.key.name,
                k.key.prefix,
                if k.key.revoked_at.is_some() {
                    ", revoked"
                } else {
                    ""
                }
            ),
            selected: filter.key_id == Some(k.key.id),
        })
        .collect();
    let statuses = StatusClass::ALL
        .iter()
        .map(|c| Choice {
            value: c.as_str().to_string(),
            label: match c {
                StatusClass::Success => "2xx: succeeded",
                StatusClass::ClientError => "4xx: refused",
                StatusClass::ServerError => "5xx: Tern's fault",
            }
            .to_string(),
            selected: filter.class == Some(*c),
        })
        .collect();
    let codes = ErrorCode::ALL
        .iter()
        .map(|c| Choice {
            value: c.as_str().to_string(),
            label: c.as_str().to_string(),
            selected: filter.error_code.as_deref() == Some(c.as_str()),
        })
        .collect();
    let selected_route = filter
        .operation
        .as_ref()
        .map(|(m, r)| format!("{m} {r}"))
        .unwrap_or_default();
    let route_choices = routes
        .iter()
        .map(|r| Choice {
            value: r.clone(),
            label: r.clone(),
            selected: *r == selected_route,
        })
        .collect();
    let older = page
        .next
        .map(|(at, id)| address(&query, Some(format!("before={at}.{id}"))));
    let newest = before.map(|_| address(&query, None));
    let frame = me.frame(Nav::Requests);
    let view = ListPage {
        frame: &frame,
        org_name: &me.org.name,
        days: state.core.request_log.days(),
        lines: page.items.iter().map(Line::new).collect(),
        request_id,
        search_error,
        keys: key_choices,
        statuses,
        codes,
        routes: route_choices,
        from: filter_time(&q.from),
        to: filter_time(&q.to),
        time_error,
        filtered: !query.is_empty(),
        paged: before.is_some(),
        newest,
        older,
    };
    Ok(Html(view.render()?).into_response())
}

/// A time field's value to show again (as typed, within reason).
fn filter_time(v: &Option<String>) -> String {
    request_log::cut(v.as_deref().unwrap_or_default().trim(), 19)
}

/// One request as its page shows it.
pub struct Detail {
    pub id: String,
    pub when: Stamp,
    pub method: String,
    pub path: String,
    pub route: Option<String>,
    pub status: i64,
    pub failed: bool,
    pub error_code: Option<String>,
    pub docs_url: Option<String>,
    /// (name, prefix)
    pub key: Option<(String, String)>,
    pub latency_ms: i64,
    pub address: Option<String>,
    pub user_agent: Option<String>,
    pub idempotency_key: Option<String>,
    /// The error body, pretty-printed when it is JSON.
    pub error_body: Option<String>,
    pub message_id: Option<String>,
}

/// `body` indented for reading; as it is when it is not JSON (cut at 4 KiB).
fn pretty(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| body.to_string())
}

impl Detail {
    fn new(state: &AppState, r: RequestLogRow) -> Detail {
        Detail {
            id: r.id.to_string(),
            when: Stamp::at_seconds(r.at),
            method: r.method,
            path: r.path,
            route: r.route,
            status: r.status,
            failed: r.status >= 400,
            docs_url: r.error_code.as_deref().map(|c| state.docs_url(c)),
            error_code: r.error_code,
            key: r.key_name.map(|n| (n, r.key_prefix.unwrap_or_default())),
            latency_ms: r.latency_ms,
            address: r.address,
            user_agent: r.user_agent,
            idempotency_key: r.idempotency_key,
            error_body: r.error_body.as_deref().map(pretty),
            message_id: r.message_id.map(|m| m.to_string()),
        }
    }
}

#[derive(Template)]
#[template(path = "requests/show.html")]
pub struct ShowPage<'a> {
    pub frame: &'a Frame,
    pub r: Detail,
}

/// `GET /app/requests/{request_id}`: another organisation's request, or an unknown id, is
/// the 404 page.
pub async fn show(
    State(state): State<AppState>,
    me: OrgMember,
    Path(raw): Path<String>,
) -> Result<Html<String>, AppError> {
    let id = request_log::parse_request_id(&raw).ok_or(AppError::NotFound)?;
    let row = request_log::by_request_id(&state.core.db, me.org.id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let frame = me.frame(Nav::Requests);
    let view = ShowPage {
        frame: &frame,
        r: Detail::new(&state, row),
    };
    Ok(Html(view.render()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> ListQuery {
        let text = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        let uri: axum::http::Uri = format!("/app/requests?{text}").parse().unwrap();
        Query::<ListQuery>::try_from_uri(&uri).unwrap().0
    }

    #[test]
    fn filters_naming_nothing_known_are_dropped() {
        let routes = vec!["POST /messages".to_string()];
        let key = Uuid::now_v7().to_string();
        let (f, q, err) = read_filter(
            &query(&[
                ("key", &key),
                ("status", "4xx"),
                ("code", "validation_failed"),
                ("route", "POST /messages"),
                ("from", "2026-01-31T14:05"),
            ]),
            &routes,
        );
        assert_eq!(f.class, Some(StatusClass::ClientError));
        assert_eq!(f.error_code.as_deref(), Some("validation_failed"));
        assert_eq!(
            f.operation,
            Some(("POST".to_string(), "/messages".to_string()))
        );
        assert!(f.since.is_some() && err.is_none());
        assert!(q.contains("route=POST+%2Fmessages"), "{q}");
        let (f, q, err) = read_filter(
            &query(&[
                ("key", "nope"),
                ("status", "3xx"),
                ("code", "<b>"),
                ("route", "GET /secret"),
                ("to", "yesterday"),
            ]),
            &routes,
        );
        assert_eq!(f, Filter::default());
        assert_eq!(q, "");
        assert!(err.unwrap().contains("yesterday"));
    }

    #[test]
    fn error_bodies_are_indented_when_json() {
        assert_eq!(pretty(r#"{"a":1}"#), "{\n  \"a\": 1\n}");
        assert_eq!(pretty("{cut"), "{cut");
    }

    #[test]
    fn positions_parse_or_are_ignored() {
        let id = Uuid::now_v7();
        assert_eq!(parse_before(&format!("12.{id}")), Some((12, id)));
        assert_eq!(parse_before("x"), None);
        assert_eq!(address("", None), "/app/requests");
        assert_eq!(
            address("status=4xx", Some("before=1.x".into())),
            "/app/requests?before=1.x&status=4xx"
        );
    }
}
