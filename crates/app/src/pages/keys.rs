//! The keys pages (APP.md §3, §7): every key of the organisation, never a value; create
//! (preset or custom permissions, bounded by the person's role), rotate and revoke, each
//! through `tern_core::keys` with the session's audit context and after an identity
//! confirmation. A new value is shown once, in the answer to the POST that made it (never
//! after a redirect, never in a cookie or an address), so reloading cannot show it again.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{FlashKind, Frame, Nav};
use crate::pages::form::{FieldProblems, FormFields, Stamp};
use crate::pages::respond;
use crate::session::{OrgMember, confirm_label, redirect_with_flash, require_confirmation};
use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tern_core::keys::{self, CreatedKey, NewKey};
use tern_domain::auth::{Mode, Permission, Preset, Role};
use tern_domain::plan::{self, Effective, Entitlement, Feature, Overrides};
use tern_domain::{ErrorCode, Problem};
use tern_store::{KeyRow, Org};
use uuid::Uuid;

/// The keys pages' routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/keys", get(list).post(create))
        .route("/app/keys/new", get(new_form))
        .route("/app/keys/{id}/revoke", get(revoke_form).post(revoke))
        .route("/app/keys/{id}/rotate", get(rotate_form).post(rotate))
}

/// What the organisation's plan says about keys.
#[derive(Debug, Clone)]
pub struct PlanInfo {
    pub plan: String,
    pub public_api: bool,
    /// The cheapest plan with the public API, when the current one lacks it.
    pub upgrade: Option<&'static str>,
    /// The `api_keys` limit (active keys); `None` when unlimited.
    pub limit: Option<u64>,
    /// Active (not revoked) keys.
    pub used: u64,
}

impl PlanInfo {
    pub fn of(org: &Org, used: u64) -> PlanInfo {
        let o = Overrides::from_json(&org.overrides);
        let e = Effective::new(&org.plan, &o);
        PlanInfo {
            plan: org.plan.clone(),
            public_api: e.has_feature(Feature::PublicApi),
            upgrade: plan::upgrade_plan_for(&org.plan, Feature::PublicApi),
            limit: e.limit(Entitlement::ApiKeys),
            used,
        }
    }

    pub fn at_limit(&self) -> bool {
        self.limit.is_some_and(|l| self.used >= l)
    }

    /// Why no key can be created, when none can.
    pub fn no_api_words(&self) -> String {
        let upgrade = match self.upgrade {
            Some(p) => format!(" Upgrade to the {p} plan to use API keys."),
            None => String::new(),
        };
        format!(
            "The organisation's plan, {}, does not include the public API, so no key can be created.{upgrade}",
            self.plan
        )
    }

    /// The limit explained, when the plan's limit is reached.
    pub fn limit_reached_words(&self) -> Option<String> {
        let limit = self.limit?;
        self.at_limit()
            .then(|| PlanInfo::limit_words(limit, self.used))
    }

    pub fn limit_words(limit: u64, used: u64) -> String {
        format!(
            "The plan allows {limit} active keys and {used} are in use. Revoke a key you no longer use, or move to a larger plan."
        )
    }
}

/// One key as the list shows it.
#[derive(Debug, Clone)]
pub struct KeyView {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub mode: &'static str,
    pub permissions: Vec<String>,
    pub created_by: String,
    pub created_at: Stamp,
    pub last_used: Option<Stamp>,
    pub revoked_at: Option<Stamp>,
    /// Whether the person may rotate or revoke it.
    pub manage: bool,
}

impl KeyView {
    fn of(row: &KeyRow, me: &OrgMember) -> KeyView {
        let k = &row.key;
        KeyView {
            id: k.id.to_string(),
            name: k.name.clone(),
            prefix: k.prefix.clone(),
            mode: k.mode.as_str(),
            permissions: k.permissions.clone(),
            created_by: row.created_by_email.clone(),
            created_at: Stamp::at(k.created_at),
            last_used: Stamp::opt(k.last_used_at),
            revoked_at: Stamp::opt(k.revoked_at),
            manage: k.revoked_at.is_none() && keys::can_manage(me.role(), me.member.id, k),
        }
    }
}

#[derive(Template)]
#[template(path = "keys/list.html")]
pub struct ListPage {
    pub frame: Frame,
    pub keys: Vec<KeyView>,
    pub plan: PlanInfo,
}

/// `GET /app/keys`.
pub async fn list(State(state): State<AppState>, me: OrgMember) -> Result<Response, AppError> {
    let rows = keys::list(&state.core.db, me.org.id).await?;
    let page = ListPage {
        frame: me.frame(Nav::Keys),
        plan: PlanInfo::of(&me.org, active(&rows)),
        keys: rows.iter().map(|r| KeyView::of(r, &me)).collect(),
    };
    respond(StatusCode::OK, &page)
}

fn active(rows: &[KeyRow]) -> u64 {
    rows.iter().filter(|r| r.key.revoked_at.is_none()).count() as u64
}

/// A page showing a secret once: never stored by the browser or a proxy.
pub fn respond_secret(t: &impl Template) -> Result<Response, AppError> {
    let mut res = (StatusCode::OK, Html(t.render()?)).into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

/// Why `role` cannot hold `p`, for a disabled option.
fn refusal(role: Role, p: Permission) -> Option<String> {
    if role.allows(p) {
        return None;
    }
    Some(match p {
        Permission::MessagesSend => "Developers cannot send messages".to_string(),
        Permission::CampaignsSend => "Developers cannot send campaigns".to_string(),
        _ => format!("Your role ({}) cannot grant {}", role.as_str(), p.as_str()),
    })
}

/// A preset choice of the form.
#[derive(Debug, Clone)]
pub struct PresetOption {
    pub value: &'static str,
    pub label: &'static str,
    pub hint: &'static str,
    pub checked: bool,
    pub disabled: Option<String>,
}

/// A permission checkbox of the form.
#[derive(Debug, Clone)]
pub struct PermOption {
    pub name: &'static str,
    pub checked: bool,
    pub disabled: Option<String>,
}

const PRESETS: [(&str, &str, &str, Preset); 3] = [
    (
        "send_messages",
        "Send messages",
        "Send messages and read them, create contacts, read numbers and templates.",
        Preset::SendMessages,
    ),
    (
        "read_only",
        "Read only",
        "Read everything the API shows; change nothing.",
        Preset::ReadOnly,
    ),
    (
        "full_access",
        "Full access",
        "Everything your role allows.",
        Preset::FullAccess,
    ),
];

#[derive(Template)]
#[template(path = "keys/new.html")]
pub struct NewPage {
    pub frame: Frame,
    pub plan: PlanInfo,
    pub name: String,
    pub presets: Vec<PresetOption>,
    pub custom: bool,
    pub perms: Vec<PermOption>,
    /// The refusal shown above the form.
    pub summary: Option<String>,
    pub problems: FieldProblems,
    pub confirm_error: Option<String>,
    /// Whether the form asks for the password or a code.
    pub need_confirm: bool,
    pub confirm_label: &'static str,
    /// The mode chosen: a test key reaches the test space.
    pub test: bool,
}

/// The presets, `chosen` checked; one `role` cannot hold is disabled with the reason.
fn preset_options(role: Role, chosen: &str) -> Vec<PresetOption> {
    PRESETS
        .iter()
        .map(|(value, label, hint, preset)| PresetOption {
            value,
            label,
            hint,
            checked: chosen == *value,
            disabled: preset
                .permissions(role)
                .into_iter()
                .find_map(|p| refusal(role, p)),
        })
        .collect()
}

/// Every permission, those named in `checked` checked; one above `role` disabled with the
/// reason.
fn perm_options(role: Role, checked: &[String]) -> Vec<PermOption> {
    Permission::ALL
        .iter()
        .map(|p| PermOption {
            name: p.as_str(),
            checked: checked.iter().any(|c| c == p.as_str()),
            disabled: refusal(role, *p),
        })
        .collect()
}

impl NewPage {
    fn build(state: &AppState, me: &OrgMember, plan: PlanInfo, form: &FormFields) -> NewPage {
        let role = me.role();
        let chosen = form.get("preset").unwrap_or("send_messages");
        // The first preset the role may hold is the default choice.
        let chosen = if form.get("preset").is_none() && !role.allows(Permission::MessagesSend) {
            "read_only"
        } else {
            chosen
        };
        let checked = form.all("permissions");
        NewPage {
            frame: me.frame(Nav::Keys),
            plan,
            name: form.text("name"),
            presets: preset_options(role, chosen),
            custom: chosen == "custom",
            perms: perm_options(role, &checked),
            summary: None,
            problems: FieldProblems::default(),
            confirm_error: None,
            need_confirm: !me.confirmed(state),
            confirm_label: confirm_label(&me.signed),
            test: form.get("mode") == Some("test"),
        }
    }

    /// Problems of no field of the form, for the summary.
    pub fn other_problems(&self) -> Vec<String> {
        self.problems.others(&["name", "preset", "permissions"])
    }

    /// Whether the form is shown (the plan allows a new key).
    pub fn open(&self) -> bool {
        self.plan.public_api && !self.plan.at_limit()
    }

    /// A core refusal on the page: (status, page).
    fn refused(mut self, p: Problem) -> Result<(StatusCode, NewPage), AppError> {
        let status = StatusCode::from_u16(p.status()).unwrap_or(StatusCode::BAD_REQUEST);
        match p.code {
            ErrorCode::ValidationFailed => {
                self.problems = FieldProblems::from_problem(&p);
                self.summary = Some("The key was not created: check the fields below.".into());
            }
            ErrorCode::PermissionDenied => {
                let perm = p
                    .details
                    .get("permission")
                    .and_then(|v| v.as_str())
                    .unwrap_or("that permission");
                self.summary = Some(format!(
                    "The key was not created: your role ({}) cannot give a key the permission {perm}.",
                    me_role(&p)
                ));
            }
            ErrorCode::PlanFeatureUnavailable => {
                self.plan.public_api = false;
                self.summary = Some(self.plan.no_api_words());
            }
            ErrorCode::PlanLimitReached => {
                let n = |k: &str| p.details.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
                self.summary = Some(PlanInfo::limit_words(n("limit"), n("used")));
                self.plan.limit = Some(n("limit"));
                self.plan.used = n("used");
            }
            _ => return Err(AppError::from(p)),
        }
        Ok((status, self))
    }
}

fn me_role(p: &Problem) -> String {
    p.details
        .get("role")
        .and_then(|v| v.as_str())
        .unwrap_or("your role")
        .to_string()
}

/// `GET /app/keys/new`.
pub async fn new_form(State(state): State<AppState>, me: OrgMember) -> Result<Response, AppError> {
    let rows = keys::list(&state.core.db, me.org.id).await?;
    let plan = PlanInfo::of(&me.org, active(&rows));
    let page = NewPage::build(&state, &me, plan, &FormFields::default());
    respond(StatusCode::OK, &page)
}

#[derive(Template)]
#[template(path = "keys/created.html")]
pub struct CreatedPage {
    pub frame: Frame,
    pub name: String,
    pub prefix: String,
    pub permissions: Vec<String>,
    pub value: String,
    /// The prefix of the key it replaces (rotation).
    pub replaced: Option<String>,
}

// By hand: the value is the key.
impl std::fmt::Debug for CreatedPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedPage")
            .field("name", &self.name)
            .field("prefix", &self.prefix)
            .field("value", &"[redacted]")
            .finish()
    }
}

impl CreatedPage {
    fn of(frame: Frame, created: CreatedKey, replaced: Option<String>) -> CreatedPage {
        CreatedPage {
            frame,
            name: created.key.name,
            prefix: created.key.prefix,
            permissions: created.key.permissions,
            value: created.plaintext,
            replaced,
        }
    }
}

/// `POST /app/keys`.
pub async fn create(
    State(state): State<AppState>,
    me: OrgMember,
    form: FormFields,
) -> Result<Response, AppError> {
    let rows = keys::list(&state.core.db, me.org.id).await?;
    let plan = PlanInfo::of(&me.org, active(&rows));
    let mut page = NewPage::build(&state, &me, plan, &form);
    if !page.plan.public_api {
        page.summary = Some(page.plan.no_api_words());
        return respond(StatusCode::PAYMENT_REQUIRED, &page);
    }
    let (preset, permissions) = match form.get("preset").unwrap_or_default() {
        "custom" => (None, form.all("permissions")),
        v => match Preset::parse(v) {
            Some(p) => (Some(p), Vec::new()),
            None => {
                page.problems
                    .push("preset", "Choose a preset, or Custom and the permissions.");
                page.summary = Some("The key was not created: check the fields below.".into());
                return respond(StatusCode::UNPROCESSABLE_ENTITY, &page);
            }
        },
    };
    if let Err(words) = require_confirmation(&state, &me.signed, form.get("confirm")).await {
        page.confirm_error = Some(words);
        page.need_confirm = true;
        return respond(StatusCode::UNPROCESSABLE_ENTITY, &page);
    }
    page.need_confirm = false;
    let name = form.text("name");
    let new = NewKey {
        member_id: me.member.id,
        name: &name,
        preset,
        permissions: &permissions,
        mode: if page.test { Mode::Test } else { Mode::Live },
    };
    match keys::create(&state.core.db, &state.core.key, &me.ctx(), me.org.id, new).await {
        Ok(created) => respond_secret(&CreatedPage::of(me.frame(Nav::Keys), created, None)),
        Err(p) => {
            let (status, page) = page.refused(p)?;
            respond(status, &page)
        }
    }
}

/// Revoke or rotate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Revoke,
    Rotate,
}

impl Action {
    pub fn path(self) -> &'static str {
        match self {
            Action::Revoke => "revoke",
            Action::Rotate => "rotate",
        }
    }
}

#[derive(Template)]
#[template(path = "keys/action.html")]
pub struct ActionPage {
    pub frame: Frame,
    pub key: KeyView,
    pub rotate: bool,
    pub action: &'static str,
    pub need_confirm: bool,
    pub confirm_label: &'static str,
    pub confirm_error: Option<String>,
}

/// The key `id` when the person may manage it; `404` otherwise (unknown, another
/// organisation's, or a developer's look at someone else's key).
async fn managed_key(state: &AppState, me: &OrgMember, id: &str) -> Result<KeyRow, AppError> {
    let id = Uuid::parse_str(id).map_err(|_| AppError::NotFound)?;
    let row = keys::get(&state.core.db, me.org.id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !keys::can_manage(me.role(), me.member.id, &row.key) {
        return Err(AppError::NotFound);
    }
    Ok(row)
}

fn action_page(state: &AppState, me: &OrgMember, row: &KeyRow, action: Action) -> ActionPage {
    ActionPage {
        frame: me.frame(Nav::Keys),
        key: KeyView::of(row, me),
        rotate: action == Action::Rotate,
        action: action.path(),
        need_confirm: !me.confirmed(state),
        confirm_label: confirm_label(&me.signed),
        confirm_error: None,
    }
}

async fn action_form(
    state: AppState,
    me: OrgMember,
    id: String,
    action: Action,
) -> Result<Response, AppError> {
    let row = managed_key(&state, &me, &id).await?;
    if row.key.revoked_at.is_some() {
        return Ok(revoked_already(&state, &row));
    }
    respond(StatusCode::OK, &action_page(&state, &me, &row, action))
}

fn revoked_already(state: &AppState, row: &KeyRow) -> Response {
    redirect_with_flash(
        state,
        "/app/keys",
        FlashKind::Info,
        &format!("The key “{}” is already revoked.", row.key.name),
    )
}

/// `GET /app/keys/{id}/revoke`: the confirm step.
pub async fn revoke_form(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    action_form(state, me, id, Action::Revoke).await
}

/// `GET /app/keys/{id}/rotate`: the confirm step.
pub async fn rotate_form(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    action_form(state, me, id, Action::Rotate).await
}

/// The key to act on, confirmed; or the answer to give instead.
async fn confirmed_key(
    state: &AppState,
    me: &OrgMember,
    id: &str,
    action: Action,
    form: &FormFields,
) -> Result<Result<KeyRow, Response>, AppError> {
    let row = managed_key(state, me, id).await?;
    if row.key.revoked_at.is_some() {
        return Ok(Err(revoked_already(state, &row)));
    }
    if let Err(words) = require_confirmation(state, &me.signed, form.get("confirm")).await {
        let mut page = action_page(state, me, &row, action);
        page.need_confirm = true;
        page.confirm_error = Some(words);
        return Ok(Err(respond(StatusCode::UNPROCESSABLE_ENTITY, &page)?));
    }
    Ok(Ok(row))
}

/// `POST /app/keys/{id}/revoke`.
pub async fn revoke(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    form: FormFields,
) -> Result<Response, AppError> {
    let row = match confirmed_key(&state, &me, &id, Action::Revoke, &form).await? {
        Ok(row) => row,
        Err(res) => return Ok(res),
    };
    match keys::revoke(&state.core.db, &me.ctx(), me.org.id, row.key.id).await {
        Ok(key) => Ok(redirect_with_flash(
            &state,
            "/app/keys",
            FlashKind::Success,
            &format!(
                "The key “{}” ({}) is revoked: its next request is refused.",
                key.name, key.prefix
            ),
        )),
        Err(p) if p.code == ErrorCode::Conflict => Ok(revoked_already(&state, &row)),
        Err(p) => Err(p.into()),
    }
}

/// `POST /app/keys/{id}/rotate`: the new value shown once; the old key revoked.
pub async fn rotate(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    form: FormFields,
) -> Result<Response, AppError> {
    let row = match confirmed_key(&state, &me, &id, Action::Rotate, &form).await? {
        Ok(row) => row,
        Err(res) => return Ok(res),
    };
    match keys::rotate(&state.core.db, &me.ctx(), me.org.id, row.key.id).await {
        Ok(created) => respond_secret(&CreatedPage::of(
            me.frame(Nav::Keys),
            created,
            Some(row.key.prefix.clone()),
        )),
        Err(p) if p.code == ErrorCode::Conflict => Ok(revoked_already(&state, &row)),
        Err(p) => Err(p.into()),
    }
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;
