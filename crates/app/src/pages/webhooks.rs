//! The webhooks pages (APP.md §3): the organisation's subscriptions grouped by the key that
//! owns each, and creating one for a key the person manages. Every change goes through
//! `tern_core::webhooks` with a [`Principal`] of the owning key acting as the person, so the
//! public API's rules (URL guard, plan limit) and audit apply unchanged. The endpoint's own
//! page (log, edit, test, replay, rotate, delete) is [`super::webhook_detail`].

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{Frame, Nav};
use crate::pages::form::{FieldProblems, FormFields, Stamp};
use crate::pages::keys::respond_secret;
use crate::pages::respond;
use crate::session::{OrgMember, confirm_label, require_confirmation};
use askama::Template;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};
use tern_core::Principal;
use tern_core::keys;
use tern_core::webhooks::subscriptions::{self, WithSecret};
use tern_domain::events::EventType;
use tern_domain::plan::{Effective, Entitlement, Overrides};
use tern_domain::time::now_ms;
use tern_domain::{ErrorCode, Problem};
use tern_store::{KeyRow, Subscription};
use uuid::Uuid;

/// The webhooks pages' routes (the list and creation; the endpoint's page adds its own).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/webhooks", get(list).post(create))
        .route("/app/webhooks/new", get(new_form))
        .merge(super::webhook_detail::routes())
}

/// One subscription as the pages show it.
#[derive(Debug, Clone)]
pub struct SubView {
    pub id: String,
    pub url: String,
    pub events: Vec<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub description: Option<String>,
    pub created_at: Stamp,
}

impl SubView {
    pub fn of(s: &Subscription) -> SubView {
        SubView {
            id: s.id.to_string(),
            url: s.url.clone(),
            events: s.event_types.clone(),
            enabled: s.enabled,
            disabled_reason: s.disabled_reason.clone(),
            description: s.description.clone(),
            created_at: Stamp::at(s.created_at),
        }
    }

    /// Why it is disabled, in words.
    pub fn disabled_words(&self) -> Option<String> {
        if self.enabled {
            return None;
        }
        Some(match self.disabled_reason.as_deref() {
            Some("gone") => "Disabled: the receiver answered 410 Gone".to_string(),
            Some(other) => format!("Disabled ({other})"),
            None => "Disabled".to_string(),
        })
    }
}

/// The subscriptions of one key.
#[derive(Debug, Clone)]
pub struct KeyGroup {
    pub key_id: String,
    pub key_name: String,
    pub key_prefix: String,
    pub revoked: bool,
    pub manage: bool,
    pub subs: Vec<SubView>,
}

/// Whether the person may act for the key (and it is not revoked).
pub fn manages(me: &OrgMember, row: &KeyRow) -> bool {
    row.key.revoked_at.is_none() && keys::can_manage(me.role(), me.member.id, &row.key)
}

#[derive(Template)]
#[template(path = "webhooks/list.html")]
pub struct ListPage {
    pub frame: Frame,
    pub groups: Vec<KeyGroup>,
    /// Whether the person manages an active key (may add an endpoint).
    pub can_add: bool,
}

/// `GET /app/webhooks`.
pub async fn list(State(state): State<AppState>, me: OrgMember) -> Result<Response, AppError> {
    let rows = keys::list(&state.core.db, me.org.id).await?;
    let subs = subscriptions::list_for_org(&state.core, me.org.id).await?;
    let mut groups: Vec<KeyGroup> = Vec::new();
    for (s, k) in &subs {
        if groups.last().is_none_or(|g| g.key_id != k.id.to_string()) {
            let manage = rows
                .iter()
                .find(|r| r.key.id == k.id)
                .is_some_and(|r| manages(&me, r));
            groups.push(KeyGroup {
                key_id: k.id.to_string(),
                key_name: k.name.clone(),
                key_prefix: k.prefix.clone(),
                revoked: k.revoked_at.is_some(),
                manage,
                subs: Vec::new(),
            });
        }
        if let Some(g) = groups.last_mut() {
            g.subs.push(SubView::of(s));
        }
    }
    let page = ListPage {
        frame: me.frame(Nav::Webhooks),
        groups,
        can_add: rows.iter().any(|r| manages(&me, r)),
    };
    respond(StatusCode::OK, &page)
}

/// A key the person may choose.
#[derive(Debug, Clone)]
pub struct KeyChoice {
    pub id: String,
    pub label: String,
    pub selected: bool,
}

/// An event type checkbox.
#[derive(Debug, Clone)]
pub struct EventChoice {
    pub name: &'static str,
    pub checked: bool,
}

/// The event type checkboxes with `checked` ticked.
pub fn event_choices(checked: &[String]) -> Vec<EventChoice> {
    EventType::ALL
        .iter()
        .map(|e| EventChoice {
            name: e.as_str(),
            checked: checked.iter().any(|c| c == e.as_str()),
        })
        .collect()
}

/// A refusal of a subscription change by the core, on a form: the problems next to the
/// fields, or the summary's words. `Err` for what no form can explain.
pub fn refusal_words(p: &Problem, problems: &mut FieldProblems) -> Result<String, AppError> {
    let n = |k: &str| p.details.get(k).and_then(Value::as_u64).unwrap_or(0);
    Ok(match p.code {
        ErrorCode::ValidationFailed => {
            *problems = FieldProblems::from_problem(p);
            "Nothing was saved: check the fields below.".to_string()
        }
        ErrorCode::PlanLimitReached => format!(
            "The plan allows {} webhook endpoints and {} are in use. Delete one you no longer use, or move to a larger plan.",
            n("limit"),
            n("used")
        ),
        ErrorCode::PlanFeatureUnavailable => {
            let plan = p.details.get("plan").and_then(Value::as_str).unwrap_or("");
            format!("The organisation's plan {plan} does not include this.")
        }
        _ => return Err(AppError::from(p.clone())),
    })
}

#[derive(Template)]
#[template(path = "webhooks/new.html")]
pub struct NewPage {
    pub frame: Frame,
    pub keys: Vec<KeyChoice>,
    pub url: String,
    pub events: Vec<EventChoice>,
    pub description: String,
    /// `used of limit` of the plan's endpoints, when limited.
    pub usage: Option<(usize, u64)>,
    pub summary: Option<String>,
    pub problems: FieldProblems,
    pub need_confirm: bool,
    pub confirm_label: &'static str,
    pub confirm_error: Option<String>,
}

impl NewPage {
    pub fn other_problems(&self) -> Vec<String> {
        self.problems
            .others(&["key_id", "url", "events", "description"])
    }
}

async fn new_page(
    state: &AppState,
    me: &OrgMember,
    form: &FormFields,
) -> Result<NewPage, AppError> {
    let rows = keys::list(&state.core.db, me.org.id).await?;
    let chosen = form.get("key_id").unwrap_or_default();
    let used = subscriptions::list_for_org(&state.core, me.org.id)
        .await?
        .len();
    let o = Overrides::from_json(&me.org.overrides);
    let limit = Effective::new(&me.org.plan, &o).limit(Entitlement::WebhookSubscriptions);
    Ok(NewPage {
        frame: me.frame(Nav::Webhooks),
        keys: rows
            .iter()
            .filter(|r| manages(me, r))
            .map(|r| KeyChoice {
                id: r.key.id.to_string(),
                label: format!("{} ({}…)", r.key.name, r.key.prefix),
                selected: chosen == r.key.id.to_string(),
            })
            .collect(),
        url: form.text("url"),
        events: event_choices(&form.all("events")),
        description: form.text("description"),
        usage: limit.map(|l| (used, l)),
        summary: None,
        problems: FieldProblems::default(),
        need_confirm: !me.confirmed(state),
        confirm_label: confirm_label(&me.signed),
        confirm_error: None,
    })
}

/// `GET /app/webhooks/new`.
pub async fn new_form(State(state): State<AppState>, me: OrgMember) -> Result<Response, AppError> {
    let page = new_page(&state, &me, &FormFields::default()).await?;
    respond(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "webhooks/secret.html")]
pub struct SecretPage {
    pub frame: Frame,
    pub id: String,
    pub url: String,
    pub secret: String,
    pub rotated: bool,
}

// By hand: the secret signs every delivery.
impl std::fmt::Debug for SecretPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretPage")
            .field("id", &self.id)
            .field("secret", &"[redacted]")
            .finish()
    }
}

impl SecretPage {
    pub fn of(frame: Frame, w: WithSecret, rotated: bool) -> SecretPage {
        SecretPage {
            frame,
            id: w.subscription.id.to_string(),
            url: w.subscription.url,
            secret: w.secret,
            rotated,
        }
    }
}

/// The Principal of key `row` with the person as the actor.
pub fn acting_for(me: &OrgMember, row: &KeyRow) -> Result<Principal, AppError> {
    // The app shows live data; a test key's endpoints live in the test space.
    if row.key.mode == tern_domain::auth::Mode::Test {
        return Err(AppError::BadRequest(
            "This is a test key: its endpoints belong to the test space, which the app does \
             not show yet. Manage them with the test key through the API \
             (POST /api/public/v1/webhook-subscriptions)."
                .into(),
        ));
    }
    Principal::for_key_acting_as(me.org.clone(), row, me.ctx()).map_err(|p| {
        if p.code == ErrorCode::NotFound {
            AppError::NotFound
        } else {
            AppError::BadRequest(
                "The key of this endpoint is revoked: nothing can be changed for it any more."
                    .into(),
            )
        }
    })
}

/// The body the core reads, from the form (the public API's field names).
pub fn subscription_body(form: &FormFields, clear_description: bool) -> Value {
    let mut body = json!({"url": form.text("url"), "events": form.all("events")});
    let description = form.text("description");
    if !description.is_empty() {
        body["description"] = json!(description);
    } else if clear_description {
        body["description"] = Value::Null;
    }
    body
}

/// `POST /app/webhooks`: the secret shown once.
pub async fn create(
    State(state): State<AppState>,
    me: OrgMember,
    form: FormFields,
) -> Result<Response, AppError> {
    let mut page = new_page(&state, &me, &form).await?;
    let row = match Uuid::parse_str(form.get("key_id").unwrap_or_default()) {
        Ok(id) => keys::get(&state.core.db, me.org.id, id)
            .await?
            .filter(|r| manages(&me, r)),
        Err(_) => None,
    };
    let Some(row) = row else {
        page.problems
            .push("key_id", "Choose one of the keys you manage.");
        page.summary = Some("Nothing was saved: check the fields below.".into());
        return respond(StatusCode::UNPROCESSABLE_ENTITY, &page);
    };
    if let Err(words) = require_confirmation(&state, &me.signed, form.get("confirm")).await {
        page.need_confirm = true;
        page.confirm_error = Some(words);
        return respond(StatusCode::UNPROCESSABLE_ENTITY, &page);
    }
    page.need_confirm = false;
    let p = acting_for(&me, &row)?;
    let body = subscription_body(&form, false);
    match subscriptions::create(&state.core, &p, &body, now_ms()).await {
        Ok(w) => respond_secret(&SecretPage::of(me.frame(Nav::Webhooks), w, false)),
        Err(e) => {
            let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
            page.summary = Some(refusal_words(&e, &mut page.problems)?);
            respond(status, &page)
        }
    }
}
