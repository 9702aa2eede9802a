//! The organisation's members (APP.md §2): the list for everyone; for owners and admins the
//! invite form (the link shown once), a member's page with the role change (identity
//! confirmation needed) and the removal step.
//!
//! Every change goes through `tern_core::people`, which enforces the rules (nobody grants a
//! role above their own, only an owner touches an owner, the last owner stays) and writes
//! the audit entries; these pages explain the rules beforehand (options shown disabled with
//! the reason) and show core's words when a crafted form meets them anyway.

use crate::AppState;
use crate::errors::AppError;
use crate::frame::{FlashKind, Frame, Nav};
use crate::pages::form::ConfirmStep;
use crate::pages::respond;
use crate::session::{OrgMember, redirect_with_flash, require_confirmation};
use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;
use tern_core::people::{self, Inviter, MemberView};
use tern_domain::auth::Role;
use tern_domain::{ErrorCode, Problem};
use uuid::Uuid;

/// The members pages' routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/app/members", get(list))
        .route("/app/members/invite", post(invite))
        .route("/app/members/{id}", get(show))
        .route("/app/members/{id}/role", post(change_role))
        .route("/app/members/{id}/remove", get(remove_step).post(remove))
}

/// Every role, highest first (the order of the role selects).
const ROLES: [Role; 3] = [Role::Owner, Role::Admin, Role::Developer];

/// A role as the pages show it.
pub fn role_label(role: Role) -> &'static str {
    match role {
        Role::Owner => "Owner",
        Role::Admin => "Admin",
        Role::Developer => "Developer",
    }
}

/// What a role may do, in one line (the invite form's hint).
pub fn role_summary(role: Role) -> &'static str {
    match role {
        Role::Owner => "everything, including owners and the organisation's settings",
        Role::Admin => "members other than owners, every key and webhook, the audit log",
        Role::Developer => "sees every key, manages their own; cannot send messages or campaigns",
    }
}

fn rank(role: Role) -> u8 {
    match role {
        Role::Owner => 3,
        Role::Admin => 2,
        Role::Developer => 1,
    }
}

/// Whether `own` may give `role` (invite as, or change to): never above one's own role.
fn grantable(own: Role, role: Role) -> bool {
    own != Role::Developer && rank(role) <= rank(own)
}

/// Whether `own` may change or remove a member whose role is `theirs`.
fn manages(own: Role, theirs: Role) -> bool {
    match own {
        Role::Owner => true,
        Role::Admin => theirs != Role::Owner,
        Role::Developer => false,
    }
}

/// An option of a role select.
pub struct RoleOption {
    pub value: &'static str,
    pub label: &'static str,
    pub summary: &'static str,
    /// `None` when the person may choose it; else why not (shown in the option).
    pub refusal: Option<String>,
    pub selected: bool,
}

fn role_options(own: Role, selected: Role) -> Vec<RoleOption> {
    ROLES
        .iter()
        .map(|&r| RoleOption {
            value: r.as_str(),
            label: role_label(r),
            summary: role_summary(r),
            refusal: (!grantable(own, r))
                .then(|| format!("above your role ({})", role_label(own).to_lowercase())),
            selected: r == selected,
        })
        .collect()
}

/// A row of the members table.
pub struct Row {
    pub id: String,
    /// Empty until the person sets it through their invite link.
    pub name: String,
    pub email: String,
    pub role: Role,
    pub two_factor: bool,
    /// Invited, no password yet.
    pub pending: bool,
    pub is_you: bool,
    /// Whether the person looking may change or remove this member.
    pub manageable: bool,
}

impl Row {
    fn new(v: &MemberView, me: &OrgMember) -> Row {
        Row {
            id: v.member.id.to_string(),
            name: v.person_name.clone(),
            email: v.member.email.clone(),
            role: v.member.role,
            two_factor: v.two_factor,
            pending: !v.has_password,
            is_you: v.member.id == me.member.id,
            manageable: manages(me.role(), v.member.role),
        }
    }

    pub fn role_label(&self) -> &'static str {
        role_label(self.role)
    }

    /// The name, else the email (invited, no name yet).
    pub fn display_name(&self) -> &str {
        if self.name.is_empty() {
            &self.email
        } else {
            &self.name
        }
    }
}

/// The invite link just made: shown once, never stored in a cookie or the flash.
pub struct InvitedLink {
    pub email: String,
    pub role: &'static str,
    pub url: String,
}

#[derive(Template)]
#[template(path = "members/list.html")]
pub struct MembersPage<'a> {
    pub frame: &'a Frame,
    pub org_name: &'a str,
    pub rows: Vec<Row>,
    /// Owners and admins: the invite form and the "Manage" links.
    pub can_manage: bool,
    pub roles: Vec<RoleOption>,
    /// The invite form's fields after a refusal.
    pub email: String,
    pub email_error: Option<String>,
    pub form_error: Option<String>,
    pub invited: Option<InvitedLink>,
    /// How long an invite link works ("7 days").
    pub link_validity: String,
}

#[derive(Template)]
#[template(path = "members/member.html")]
pub struct MemberPage<'a> {
    pub frame: &'a Frame,
    pub row: Row,
    pub roles: Vec<RoleOption>,
    /// The only owner: neither demoted nor removed.
    pub last_owner: bool,
    /// Why the person looking cannot change this member (`None` when they can).
    pub read_only: Option<&'static str>,
    pub confirm: ConfirmStep,
    pub role_error: Option<String>,
}

#[derive(Template)]
#[template(path = "members/remove.html")]
pub struct RemovePage<'a> {
    pub frame: &'a Frame,
    pub org_name: &'a str,
    pub row: Row,
    pub last_owner: bool,
    pub error: Option<String>,
}

/// "7 days", "1 day", "2 hours", "10 minutes": how long a link of `ms` works.
pub fn duration_words(ms: i64) -> String {
    let (n, unit) = if ms >= 86_400_000 && ms % 86_400_000 == 0 {
        (ms / 86_400_000, "day")
    } else if ms >= 3_600_000 && ms % 3_600_000 == 0 {
        (ms / 3_600_000, "hour")
    } else {
        ((ms / 60_000).max(1), "minute")
    };
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

/// A member id from the address; anything else is no member (404).
fn member_id(raw: &str) -> Result<Uuid, AppError> {
    Uuid::parse_str(raw).map_err(|_| AppError::NotFound)
}

/// The organisation's members, the one of `id` (404 when it is not one of them: another
/// organisation's member is not found either) and the members pages' frame.
async fn load(
    state: &AppState,
    me: &OrgMember,
    id: Uuid,
) -> Result<(Vec<MemberView>, MemberView, Frame), AppError> {
    let all = people::members(&state.core, me.org.id).await?;
    let one = all
        .iter()
        .find(|m| m.member.id == id)
        .cloned()
        .ok_or(AppError::NotFound)?;
    Ok((all, one, me.frame(Nav::Members)))
}

fn owners(all: &[MemberView]) -> usize {
    all.iter().filter(|m| m.member.role == Role::Owner).count()
}

// ---- The list and the invite form ----

fn list_page<'a>(
    state: &AppState,
    me: &'a OrgMember,
    frame: &'a Frame,
    all: &[MemberView],
) -> MembersPage<'a> {
    let own = me.role();
    MembersPage {
        frame,
        org_name: &me.org.name,
        rows: all.iter().map(|v| Row::new(v, me)).collect(),
        can_manage: own != Role::Developer,
        roles: role_options(own, Role::Developer),
        email: String::new(),
        email_error: None,
        form_error: None,
        invited: None,
        link_validity: duration_words(state.core.people.invite_ms),
    }
}

/// `GET /app/members`.
pub async fn list(State(state): State<AppState>, me: OrgMember) -> Result<Response, AppError> {
    let all = people::members(&state.core, me.org.id).await?;
    let frame = me.frame(Nav::Members);
    respond(StatusCode::OK, &list_page(&state, &me, &frame, &all))
}

#[derive(Deserialize)]
pub struct InviteForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    role: String,
}

/// `POST /app/members/invite`: adds the member; for a person without a password the page
/// shows the invite link once (no redirect: the link must not travel in the flash cookie).
pub async fn invite(
    State(state): State<AppState>,
    me: OrgMember,
    Form(form): Form<InviteForm>,
) -> Result<Response, AppError> {
    let own = me.role();
    if own == Role::Developer {
        return Err(AppError::Forbidden);
    }
    let role = Role::parse(&form.role)
        .ok_or_else(|| AppError::BadRequest("Choose a role: owner, admin or developer.".into()))?;
    let by = Inviter::Member { role: own };
    let result = people::invite(&state.core, &me.ctx(), me.org.id, &form.email, role, by).await;
    let all = people::members(&state.core, me.org.id).await?;
    let frame = me.frame(Nav::Members);
    let mut page = list_page(&state, &me, &frame, &all);
    match result {
        Ok(invited) => match invited.link {
            Some(token) => {
                page.invited = Some(InvitedLink {
                    email: invited.member.email,
                    role: role_label(role),
                    url: format!("{}/app/invite/{token}", state.config.public_url),
                });
                respond(StatusCode::OK, &page)
            }
            None => Ok(redirect_with_flash(
                &state,
                "/app/members",
                FlashKind::Success,
                &format!(
                    "{} is now a member as {}. They already have an account and sign in with it.",
                    invited.member.email,
                    role.as_str()
                ),
            )),
        },
        Err(p) => {
            let status = StatusCode::from_u16(p.status()).unwrap_or(StatusCode::BAD_REQUEST);
            page.email = form.email.trim().to_string();
            page.roles = role_options(own, role);
            match p.code {
                ErrorCode::ValidationFailed => {
                    page.email_error = Some(crate::forms::words(&p));
                }
                ErrorCode::Conflict => page.email_error = Some(p.message),
                ErrorCode::PermissionDenied => page.form_error = Some(p.message),
                _ => return Err(p.into()),
            }
            respond(status, &page)
        }
    }
}

// ---- One member: role change ----

fn member_page<'a>(
    state: &AppState,
    me: &OrgMember,
    frame: &'a Frame,
    all: &[MemberView],
    one: &MemberView,
) -> MemberPage<'a> {
    let row = Row::new(one, me);
    let last_owner = row.role == Role::Owner && owners(all) <= 1;
    let read_only = match me.role() {
        Role::Developer => Some("Only owners and admins manage members."),
        _ if !row.manageable => Some("Only an owner can change or remove an owner."),
        _ => None,
    };
    MemberPage {
        frame,
        roles: role_options(me.role(), row.role),
        row,
        last_owner,
        read_only,
        confirm: ConfirmStep::of(state, me),
        role_error: None,
    }
}

/// `GET /app/members/{id}`.
pub async fn show(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let (all, one, frame) = load(&state, &me, member_id(&id)?).await?;
    respond(
        StatusCode::OK,
        &member_page(&state, &me, &frame, &all, &one),
    )
}

/// No `Debug`: `confirm` is a password or a code.
#[derive(Deserialize)]
pub struct RoleForm {
    #[serde(default)]
    role: String,
    confirm: Option<String>,
}

/// `POST /app/members/{id}/role`: needs a recent identity confirmation (APP.md §2).
pub async fn change_role(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
    Form(form): Form<RoleForm>,
) -> Result<Response, AppError> {
    let own = me.role();
    if own == Role::Developer {
        return Err(AppError::Forbidden);
    }
    let id = member_id(&id)?;
    let role = Role::parse(&form.role)
        .ok_or_else(|| AppError::BadRequest("Choose a role: owner, admin or developer.".into()))?;
    // The member first: another organisation's member is a 404 before anything is asked.
    let (all, one, frame) = load(&state, &me, id).await?;
    let mut page = member_page(&state, &me, &frame, &all, &one);
    if one.member.role == role {
        let text = format!("{} already is {}.", one.member.email, role.as_str());
        return Ok(redirect_with_flash(
            &state,
            "/app/members",
            FlashKind::Info,
            &text,
        ));
    }
    // What the page already explains is refused before a password is asked for.
    if let Some(why) = page.read_only {
        page.role_error = Some(why.to_string());
        return respond(StatusCode::FORBIDDEN, &page);
    }
    if page.last_owner && role != Role::Owner {
        page.role_error = Some(format!(
            "{} is the organisation's last owner: make someone else owner first.",
            one.member.email
        ));
        return respond(StatusCode::CONFLICT, &page);
    }
    if !grantable(own, role) {
        page.role_error = Some(format!(
            "You cannot make someone {role}: nobody grants a role above their own."
        ));
        return respond(StatusCode::FORBIDDEN, &page);
    }
    if let Err(words) = require_confirmation(&state, &me.signed, form.confirm.as_deref()).await {
        page.confirm.error = Some(words);
        return respond(StatusCode::UNPROCESSABLE_ENTITY, &page);
    }
    match people::change_role(&state.core, &me.ctx(), me.org.id, own, id, role).await {
        Ok(m) => Ok(redirect_with_flash(
            &state,
            "/app/members",
            FlashKind::Success,
            &format!("{} is now {}.", m.email, m.role.as_str()),
        )),
        Err(p) => refused(p, |words| {
            page.role_error = Some(words);
            // Confirmed now: the next attempt does not ask again.
            page.confirm.ask = !me.confirmed(&state);
            page.render().map_err(AppError::from)
        }),
    }
}

/// A refusal of core shown on the form (`render` puts the words in place), or the error
/// page for what a form cannot explain.
fn refused(
    p: Problem,
    render: impl FnOnce(String) -> Result<String, AppError>,
) -> Result<Response, AppError> {
    match p.code {
        ErrorCode::Conflict | ErrorCode::PermissionDenied | ErrorCode::ValidationFailed => {
            let status = StatusCode::from_u16(p.status()).unwrap_or(StatusCode::BAD_REQUEST);
            Ok((status, Html(render(p.message)?)).into_response())
        }
        _ => Err(p.into()),
    }
}

// ---- Removal ----

fn remove_page<'a>(
    me: &'a OrgMember,
    frame: &'a Frame,
    all: &[MemberView],
    one: &MemberView,
) -> Result<RemovePage<'a>, AppError> {
    let row = Row::new(one, me);
    if !row.manageable {
        return Err(AppError::Forbidden);
    }
    Ok(RemovePage {
        frame,
        org_name: &me.org.name,
        last_owner: row.role == Role::Owner && owners(all) <= 1,
        row,
        error: None,
    })
}

/// `GET /app/members/{id}/remove`: the step before a removal.
pub async fn remove_step(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let (all, one, frame) = load(&state, &me, member_id(&id)?).await?;
    respond(StatusCode::OK, &remove_page(&me, &frame, &all, &one)?)
}

/// `POST /app/members/{id}/remove`.
pub async fn remove(
    State(state): State<AppState>,
    me: OrgMember,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let own = me.role();
    if own == Role::Developer {
        return Err(AppError::Forbidden);
    }
    let id = member_id(&id)?;
    let (all, one, frame) = load(&state, &me, id).await?;
    let mut page = remove_page(&me, &frame, &all, &one)?;
    match people::remove_member(&state.core, &me.ctx(), me.org.id, own, id).await {
        Ok(()) => {
            let text = format!("{} was removed from {}.", one.member.email, me.org.name);
            // Having removed oneself, the members page may be out of reach: start again.
            let to = if page.row.is_you {
                "/app"
            } else {
                "/app/members"
            };
            Ok(redirect_with_flash(&state, to, FlashKind::Success, &text))
        }
        Err(p) => refused(p, |words| {
            page.error = Some(words);
            page.render().map_err(AppError::from)
        }),
    }
}

#[cfg(test)]
#[path = "members_tests.rs"]
mod tests;
