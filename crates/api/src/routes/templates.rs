//! Message templates: drafts created here, submitted to the network for review, and those
//! synced from the network. Statuses move by the network's webhooks.

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, path_id};
use crate::pagination::{ListQuery, Page};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use tern_domain::error::ConflictReason;
use tern_domain::template::{self as rules, Category, Draft};
use tern_domain::validate::Fields;
use tern_domain::{FieldError, Problem};
use utoipa::ToSchema;

pub use tern_core::views::{Template, TemplateCategory, TemplateStatus};

/// A new draft template in the network's component format.
// The body's schema (OpenAPI); the handler reads the body with `validate::Fields`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({
    "name": "order_shipped",
    "language": "en_US",
    "category": "utility",
    "components": [
        {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.",
         "example": {"body_text": [["Ada", "A-12"]]}},
        {"type": "FOOTER", "text": "Reply STOP to opt out"}
    ]
}))]
pub struct CreateTemplateRequest {
    #[schema(
        min_length = 1,
        max_length = 512,
        pattern = "^[a-z0-9_]+$",
        example = "order_shipped"
    )]
    pub name: String,
    #[schema(pattern = "^[a-z]{2,3}(_([A-Z]{2}|[0-9]{3}))?$", example = "en_US")]
    pub language: String,
    #[schema(value_type = TemplateCategory)]
    pub category: String,
    /// `HEADER` (optional; `TEXT` ≤ 60 characters with at most one variable, or `IMAGE`,
    /// `VIDEO`, `DOCUMENT`, `LOCATION`), `BODY` (required, ≤ 1024 characters), `FOOTER`
    /// (optional, ≤ 60, no variables), `BUTTONS` (optional). Variables are `{{1}}`, `{{2}}`, …
    /// and each needs an example (`example.header_text`, `example.body_text`,
    /// `example.header_handle`).
    #[schema(value_type = Vec<Object>, min_items = 1, max_items = 4)]
    pub components: Value,
    /// Required when the organisation's numbers belong to more than one WABA.
    #[schema(min_length = 1)]
    pub waba_id: Option<String>,
}

/// List the organisation's templates, newest first.
#[utoipa::path(
    get,
    path = "/templates",
    tag = "Templates",
    operation_id = "listTemplates",
    params(
        ("status" = Option<TemplateStatus>, Query, description = "Only templates in this status."),
        ("language" = Option<String>, Query, pattern = "^[a-z]{2,3}(_([A-Z]{2}|[0-9]{3}))?$", description = "Only templates of this language code, e.g. `en_US`."),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of templates.", body = Page<Template>)),
    security(("bearer" = []))
)]
pub async fn list_templates(
    auth: Authed<perm::TemplatesRead>,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<Template>>, ApiError> {
    let mut q = ListQuery::parse(query.as_deref(), &["status", "language"])?;
    let status = q.filter("status", |s| {
        rules::TemplateStatus::parse(s)
            .ok_or_else(|| format!("must be one of {}", rules::TemplateStatus::names()))
    });
    let language = q.filter("language", |l| {
        let mut errors = Vec::new();
        rules::check_language("language", l, &mut errors);
        match errors.pop() {
            None => Ok(l.to_string()),
            Some(e) => Err(e.message),
        }
    });
    let list = q.finish(&state, &auth, "templates", &[])?;
    let language = language.as_deref();
    let after = list.after_ts_id()?;
    let rows = state
        .db
        .list_templates(auth.org_id, status, language, after, list.fetch_limit())
        .await?;
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |t| vec![t.created_at.to_string(), t.id.to_string()],
        Template::from,
    )))
}

/// Create a draft template. It is checked against the network's rules; submit it for
/// review with `POST /templates/{template_id}/submit`.
#[utoipa::path(
    post,
    path = "/templates",
    tag = "Templates",
    operation_id = "createTemplate",
    request_body = CreateTemplateRequest,
    responses((status = 201, description = "The draft was created.", body = Template)),
    security(("bearer" = []))
)]
pub async fn create_template(
    auth: Authed<perm::TemplatesCreate>,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Template>), ApiError> {
    let mut f = Fields::new(&body)?;
    let name: Option<String> = f.required("name");
    let language: Option<String> = f.required("language");
    let category: Option<String> = f.required("category");
    let components: Option<Value> = f.required("components");
    let waba_requested: Option<String> = f.optional("waba_id");
    let no_components = Value::Array(Vec::new());
    let draft = Draft {
        name: name.as_deref().unwrap_or_default(),
        language: language.as_deref().unwrap_or_default(),
        category: category.as_deref().unwrap_or_default(),
        components: components.as_ref().unwrap_or(&no_components),
    };
    // The draft's rules on every field that was read; a field already reported (missing,
    // wrong type) is not reported again.
    let unread: Vec<&str> = ["name", "language", "category", "components"]
        .into_iter()
        .filter(|k| f.failed(k))
        .collect();
    for e in rules::validate_draft(&draft).err().unwrap_or_default() {
        let top = e.field.split(['.', '[']).next().unwrap_or_default();
        if !unread.contains(&top) {
            f.errors().push(e);
        }
    }
    let numbers = tern_core::templates::all_numbers(&state.db, auth.org_id).await?;
    let mut wabas: Vec<&str> = numbers.iter().map(|n| n.waba_id.as_str()).collect();
    wabas.sort_unstable();
    wabas.dedup();
    let waba_id = match (waba_requested.as_deref(), wabas.as_slice()) {
        (_, []) => None,
        (Some(w), known) if known.contains(&w) => Some(w.to_string()),
        (Some(_), known) => {
            f.errors().push(FieldError::new(
                "waba_id",
                format!(
                    "is not the WABA of any of the organisation's numbers (known: {})",
                    known.join(", ")
                ),
            ));
            None
        }
        (None, [only]) => Some((*only).to_string()),
        (None, known) => {
            f.errors().push(FieldError::new(
                "waba_id",
                format!(
                    "is required: the organisation's numbers belong to several WABAs ({})",
                    known.join(", ")
                ),
            ));
            None
        }
    };
    f.finish()?;
    let category = category.as_deref().and_then(Category::parse);
    let (Some(name), Some(language), Some(category), Some(components)) =
        (name, language, category, components)
    else {
        return Err(ApiError(Problem::field("body", "is not a valid template")));
    };
    let Some(waba_id) = waba_id else {
        return Err(ApiError(
            Problem::conflict(ConflictReason::NoPhoneNumber).with_message(
                "Connect a phone number first: a template belongs to the WhatsApp Business Account of a number.",
            ),
        ));
    };
    let template = tern_core::templates::create(
        &state.core,
        &auth,
        tern_core::templates::NewTemplate {
            waba_id,
            name,
            language,
            category,
            components,
        },
    )
    .await?;
    Ok((StatusCode::CREATED, Json(Template::from(template))))
}

/// One template with its status and a ready-to-send `example`.
#[utoipa::path(
    get,
    path = "/templates/{template_id}",
    tag = "Templates",
    operation_id = "getTemplate",
    params(("template_id" = String, Path, description = "The template's id.")),
    responses((status = 200, description = "The template.", body = Template)),
    security(("bearer" = []))
)]
pub async fn get_template(
    auth: Authed<perm::TemplatesRead>,
    State(state): State<AppState>,
    Path(template_id): Path<String>,
) -> Result<Json<Template>, ApiError> {
    let id = path_id(&template_id)?;
    let t = state
        .db
        .get_template(auth.org_id, id)
        .await?
        .ok_or_else(|| ApiError(Problem::not_found()))?;
    Ok(Json(Template::from(t)))
}

/// Submit a draft (or a rejected template) to the network for review. The answer carries
/// the status the network gave (normally `pending`); the review result arrives later.
#[utoipa::path(
    post,
    path = "/templates/{template_id}/submit",
    tag = "Templates",
    operation_id = "submitTemplate",
    params(("template_id" = String, Path, description = "The template's id.")),
    responses((status = 200, description = "The template was submitted.", body = Template)),
    security(("bearer" = []))
)]
pub async fn submit_template(
    auth: Authed<perm::TemplatesSubmit>,
    State(state): State<AppState>,
    Path(template_id): Path<String>,
) -> Result<Json<Template>, ApiError> {
    let id = path_id(&template_id)?;
    let updated = tern_core::templates::submit(&state.core, &auth, id).await?;
    Ok(Json(Template::from(updated)))
}
