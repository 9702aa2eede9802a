//! Contacts, custom contact fields and tags.

use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, path_id};
use crate::pagination::{ListQuery, Page};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tern_domain::contact::{self as rules, FieldDef};
use tern_domain::time::{format_ms, now_ms, parse_rfc3339_ms};
use tern_domain::validate::Fields;
use tern_domain::{FieldError, Problem, phone};
use tern_store::ContactKey;
use utoipa::ToSchema;

pub use tern_core::views::{Consent, Contact};
use uuid::Uuid;

/// Create a contact, or update the one with this phone number or user id. Exactly one of
/// `phone` and `user_id`.
// The body's schema (OpenAPI); the handler reads the body with `validate::Fields`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpsertContactRequest {
    /// International format with `+` and the country code; spaces and dashes allowed.
    #[schema(example = "+1 415-555-0123")]
    pub phone: Option<String>,
    /// A business-scoped user id, for a customer known by username.
    #[schema(
        example = "US.13491208655302741918",
        pattern = "^[A-Z]{2}\\.(ENT\\.)?[A-Za-z0-9]{1,128}$"
    )]
    pub user_id: Option<String>,
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub name: Option<String>,
    /// Values by custom field key; `null` removes a value.
    #[schema(value_type = Option<Object>)]
    pub custom_fields: Option<Map<String, Value>>,
    /// Tags to add.
    #[schema(value_type = Option<Vec<TagName>>, max_items = 50)]
    pub tags: Option<Vec<String>>,
}

/// A partial update: fields left out are unchanged.
// The body's schema (OpenAPI); the handler reads the body with `validate::Fields`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateContactRequest {
    /// A new name, or `null` to clear it.
    #[serde(default, deserialize_with = "double_option")]
    #[schema(value_type = Option<String>, nullable, min_length = 1, max_length = 256, pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$")]
    pub name: Option<Option<String>>,
    /// Values to set by key; `null` removes a value.
    #[schema(value_type = Option<Object>)]
    pub custom_fields: Option<Map<String, Value>>,
}

fn double_option<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// Record an opt-in or an opt-out.
// The body's schema (OpenAPI); the handler reads the body with `validate::Fields`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsentRequest {
    /// `opted_in` or `opted_out`.
    #[schema(example = "opted_out", pattern = "^(opted_in|opted_out)$")]
    pub status: String,
    /// Where it was collected, e.g. `web_form`, `reply_stop`.
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"
    )]
    pub source: Option<String>,
    /// When the customer decided (RFC 3339); defaults to now, and a time in the future counts
    /// as now. An older decision than the one recorded does not replace it.
    #[schema(format = DateTime)]
    pub at: Option<String>,
}

// The body's schema (OpenAPI); the handler reads the body with `validate::Fields`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddTagsRequest {
    /// 1 to 50 tags of at most 64 characters; tags already present are kept once.
    #[schema(value_type = Vec<TagName>, min_items = 1, max_items = 50)]
    pub tags: Vec<String>,
}

/// A tag: 1 to 64 characters, not blank, without `/`, control or invisible formatting
/// characters (the rule of `normalise_tag`, which also NFC-normalises it); documents the
/// items of tag lists and the tag of a removal.
pub struct TagName;

impl utoipa::PartialSchema for TagName {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let no = format!("/{}", tern_domain::text::hidden_class());
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(rules::MAX_TAG_CHARS))
            .pattern(Some(format!("^[^{no}]*[^\\s{no}][^{no}]*$")))
            .into()
    }
}

impl utoipa::ToSchema for TagName {}

/// A custom contact field definition.
#[derive(Debug, Serialize, ToSchema)]
pub struct ContactField {
    #[schema(format = Uuid)]
    pub id: String,
    pub key: String,
    pub label: String,
    /// `text`, `number`, `date` or `boolean`.
    #[serde(rename = "type")]
    pub field_type: String,
    #[schema(format = DateTime)]
    pub created_at: String,
}

/// A tag in use, with the number of contacts carrying it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Tag {
    pub tag: String,
    pub contact_count: i64,
}

async fn field_defs(
    state: &AppState,
    org: Uuid,
) -> Result<Vec<tern_store::ContactField>, ApiError> {
    Ok(state.db.list_contact_fields(org, None, 1000).await?)
}

fn check_fields(
    defs: &[tern_store::ContactField],
    patch: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    let defs: Vec<FieldDef<'_>> = defs
        .iter()
        .map(|d| FieldDef {
            key: &d.key,
            field_type: &d.field_type,
        })
        .collect();
    rules::check_custom_fields(&defs, patch, errors);
}

fn normalise_tags(tags: &[String], errors: &mut Vec<FieldError>) -> Vec<String> {
    if tags.len() > rules::MAX_TAGS_PER_REQUEST {
        errors.push(FieldError::new("tags", "must hold at most 50 tags"));
    }
    let mut out = Vec::new();
    for (i, t) in tags.iter().enumerate() {
        match rules::normalise_tag(t) {
            Ok(t) if !out.contains(&t) => out.push(t),
            Ok(_) => {}
            Err(m) => errors.push(FieldError::new(format!("tags[{i}]"), m)),
        }
    }
    out
}

/// List contacts: newest first, or matching `q`, or changed after `updated_since` (oldest
/// change first, for incremental sync).
#[utoipa::path(
    get,
    path = "/contacts",
    tag = "Contacts",
    operation_id = "listContacts",
    params(
        ("q" = Option<String>, Query, min_length = 1, description = "Case-insensitive partial match on name or phone number."),
        ("updated_since" = Option<String>, Query, format = DateTime, description = "Contacts changed strictly after this time, oldest change first. Not with `q`."),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of contacts.", body = Page<Contact>)),
    security(("bearer" = []))
)]
pub async fn list_contacts(
    auth: Authed<perm::ContactsRead>,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<Contact>>, ApiError> {
    let mut query = ListQuery::parse(query.as_deref(), &["q", "updated_since"])?;
    let q = query.raw("q").map(str::to_string);
    if q.is_some() && query.raw("updated_since").is_some() {
        query.problem("updated_since", "cannot be combined with q");
    }
    let since = query.filter("updated_since", |s| {
        parse_rfc3339_ms(s)
            .ok_or_else(|| "must be an RFC 3339 timestamp, e.g. 2026-01-31T12:00:00Z".into())
    });
    let list = query.finish(&state, &auth, "contacts", &[])?;
    let q = q.as_deref();
    let after = list.after_ts_id()?;
    let org = auth.org_id;
    let (rows, by_updated) = match (q, since) {
        (Some(q), _) => (
            state
                .db
                .search_contacts(org, q, after, list.fetch_limit())
                .await?,
            false,
        ),
        (None, Some(since)) => (
            state
                .db
                .list_contacts_updated_since(org, since, after, list.fetch_limit())
                .await?,
            true,
        ),
        (None, None) => (
            state
                .db
                .list_contacts(org, after, list.fetch_limit())
                .await?,
            false,
        ),
    };
    let position = move |c: &tern_store::Contact| {
        let ts = if by_updated {
            c.updated_at
        } else {
            c.created_at
        };
        vec![ts.to_string(), c.id.to_string()]
    };
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        position,
        Contact::from,
    )))
}

/// Create a contact by phone number or by business-scoped user id (a customer known by
/// username), or update the existing one (201 created, 200 updated).
#[utoipa::path(
    post,
    path = "/contacts",
    tag = "Contacts",
    operation_id = "upsertContact",
    request_body = UpsertContactRequest,
    responses(
        (status = 201, description = "Created.", body = Contact),
        (status = 200, description = "An existing contact with this phone number or user id was updated.", body = Contact),
    ),
    security(("bearer" = []))
)]
pub async fn upsert_contact(
    auth: Authed<perm::ContactsCreate>,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<Value>,
) -> Result<(StatusCode, Json<Contact>), ApiError> {
    let mut f = Fields::new(&body)?;
    let phone: Option<String> = f.optional("phone");
    let user_id: Option<String> = f.optional("user_id");
    let name: Option<String> = f.optional("name");
    let custom_fields: Option<Map<String, Value>> = f.optional("custom_fields");
    let tags: Option<Vec<String>> = f.optional("tags");
    let mut reason = None;
    let phone = phone.and_then(|raw| match phone::parse_international(&raw) {
        Ok(p) => Some(p),
        Err(e) => {
            f.errors().push(FieldError::new("phone", e.to_string()));
            reason = e.reason();
            None
        }
    });
    if let Some(n) = &name {
        rules::check_name("name", n, f.errors());
    }
    if let Some(cf) = &custom_fields {
        check_fields(&field_defs(&state, auth.org_id).await?, cf, f.errors());
    }
    match (&phone, &user_id) {
        (None, None) if !f.failed("phone") && !f.failed("user_id") => {
            f.errors().push(FieldError::new(
                "phone",
                "is required (or give user_id for a customer known by username)",
            ))
        }
        (Some(_), Some(_)) => f.errors().push(FieldError::new(
            "user_id",
            "give phone or user_id, not both",
        )),
        _ => {}
    }
    if let Some(u) = &user_id
        && !rules::is_user_id(u)
    {
        f.errors()
            .push(FieldError::new("user_id", rules::USER_ID_HELP));
    }
    let tags = tags
        .as_deref()
        .map(|t| normalise_tags(t, f.errors()))
        .unwrap_or_default();
    if let Err(mut p) = f.finish() {
        if let Some(reason) = reason {
            p = p.with_detail("reason", reason);
        }
        return Err(ApiError(p));
    }
    let wa_id = phone.as_ref().map(|p| p.wa_id().to_string());
    let key = match (&wa_id, &user_id) {
        (Some(w), _) => ContactKey::WaId(w),
        (None, Some(u)) => ContactKey::UserId(u),
        (None, None) => return Err(ApiError(Problem::field("phone", "is required"))),
    };
    let (contact, created) = tern_core::contacts::upsert(
        &state.core,
        &auth,
        tern_core::contacts::Upsert {
            key,
            name: name.as_deref().map(str::trim),
            custom_fields: custom_fields.as_ref(),
            tags: &tags,
        },
    )
    .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(contact.into())))
}

/// One contact.
#[utoipa::path(
    get,
    path = "/contacts/{contact_id}",
    tag = "Contacts",
    operation_id = "getContact",
    params(("contact_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The contact.", body = Contact)),
    security(("bearer" = []))
)]
pub async fn get_contact(
    auth: Authed<perm::ContactsRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Contact>, ApiError> {
    let id = path_id(&id)?;
    let c = state
        .db
        .get_contact(auth.org_id, id)
        .await?
        .ok_or_else(|| ApiError(Problem::not_found()))?;
    Ok(Json(c.into()))
}

/// Update a contact's name and custom fields.
#[utoipa::path(
    patch,
    path = "/contacts/{contact_id}",
    tag = "Contacts",
    operation_id = "updateContact",
    params(("contact_id" = String, Path, format = Uuid)),
    request_body = UpdateContactRequest,
    responses((status = 200, description = "The updated contact.", body = Contact)),
    security(("bearer" = []))
)]
pub async fn update_contact(
    auth: Authed<perm::ContactsUpdate>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Contact>, ApiError> {
    let id = path_id(&id)?;
    let mut f = Fields::new(&body)?;
    let name: Option<Option<String>> = f.nullable("name");
    let custom_fields: Option<Map<String, Value>> = f.optional("custom_fields");
    if let Some(Some(n)) = &name {
        rules::check_name("name", n, f.errors());
    }
    if let Some(cf) = &custom_fields {
        check_fields(&field_defs(&state, auth.org_id).await?, cf, f.errors());
    }
    f.finish()?;
    let name = name.as_ref().map(|n| n.as_deref().map(str::trim));
    let c =
        tern_core::contacts::update(&state.core, &auth, id, name, custom_fields.as_ref()).await?;
    Ok(Json(c.into()))
}

/// Record an opt-in or an opt-out.
#[utoipa::path(
    post,
    path = "/contacts/{contact_id}/consent",
    tag = "Contacts",
    operation_id = "recordConsent",
    params(("contact_id" = String, Path, format = Uuid)),
    request_body = ConsentRequest,
    responses((status = 200, description = "The contact with its consent.", body = Contact)),
    security(("bearer" = []))
)]
pub async fn record_consent(
    auth: Authed<perm::ContactsUpdate>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Contact>, ApiError> {
    let id = path_id(&id)?;
    let mut f = Fields::new(&body)?;
    let status: Option<String> = f.required("status");
    let source: Option<String> = f.optional("source");
    let at: Option<String> = f.optional("at");
    let status = status.and_then(|s| {
        let c = rules::parse_consent(&s);
        if c.is_none() {
            f.errors()
                .push(FieldError::new("status", "must be opted_in or opted_out"));
        }
        c
    });
    if let Some(s) = &source {
        rules::check_consent_source("source", s, f.errors());
    }
    let now = now_ms();
    // A decision cannot come from the future: a later time (clock skew) counts as now.
    let at = match at.as_deref() {
        None => Some(now),
        Some(s) => match parse_rfc3339_ms(s) {
            Some(t) => Some(t.min(now)),
            None => {
                f.errors()
                    .push(FieldError::new("at", "must be an RFC 3339 timestamp"));
                None
            }
        },
    };
    f.finish()?;
    let (Some(status), Some(at)) = (status, at) else {
        return Err(ApiError(Problem::field("status", "is required")));
    };
    let c = tern_core::contacts::record_consent(
        &state.core,
        &auth,
        id,
        status,
        source.as_deref().map(str::trim),
        at,
    )
    .await?;
    Ok(Json(c.into()))
}

/// Add tags (idempotent).
#[utoipa::path(
    post,
    path = "/contacts/{contact_id}/tags",
    tag = "Contacts",
    operation_id = "addContactTags",
    params(("contact_id" = String, Path, format = Uuid)),
    request_body = AddTagsRequest,
    responses((status = 200, description = "The contact with its tags.", body = Contact)),
    security(("bearer" = []))
)]
pub async fn add_tags(
    auth: Authed<perm::ContactsUpdate>,
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<Contact>, ApiError> {
    let id = path_id(&id)?;
    let mut f = Fields::new(&body)?;
    let tags: Option<Vec<String>> = f.required("tags");
    let tags = match tags {
        Some(t) if t.is_empty() => {
            f.errors()
                .push(FieldError::new("tags", "must hold at least one tag"));
            Vec::new()
        }
        Some(t) => normalise_tags(&t, f.errors()),
        None => Vec::new(),
    };
    f.finish()?;
    let c = tern_core::contacts::add_tags(&state.core, &auth, id, &tags).await?;
    Ok(Json(c.into()))
}

/// Remove a tag (removing an absent tag succeeds).
#[utoipa::path(
    delete,
    path = "/contacts/{contact_id}/tags/{tag}",
    tag = "Contacts",
    operation_id = "removeContactTag",
    params(("contact_id" = String, Path, format = Uuid), ("tag" = TagName, Path)),
    responses((status = 200, description = "The contact with its tags.", body = Contact)),
    security(("bearer" = []))
)]
pub async fn remove_tag(
    auth: Authed<perm::ContactsUpdate>,
    State(state): State<AppState>,
    Path((id, tag)): Path<(String, String)>,
) -> Result<Json<Contact>, ApiError> {
    let id = path_id(&id)?;
    let tag = rules::normalise_tag(&tag).map_err(|m| ApiError(Problem::field("tag", m)))?;
    let c = tern_core::contacts::remove_tag(&state.core, &auth, id, &tag).await?;
    Ok(Json(c.into()))
}

/// The organisation's custom contact fields.
#[utoipa::path(
    get,
    path = "/contact-fields",
    tag = "Contacts",
    operation_id = "listContactFields",
    params(
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of field definitions, by key.", body = Page<ContactField>)),
    security(("bearer" = []))
)]
pub async fn list_contact_fields(
    auth: Authed<perm::ContactsRead>,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<ContactField>>, ApiError> {
    let list =
        ListQuery::parse(query.as_deref(), &[])?.finish(&state, &auth, "contact_fields", &[])?;
    let after = list
        .after
        .as_ref()
        .and_then(|p| p.first())
        .map(String::as_str);
    let rows = state
        .db
        .list_contact_fields(auth.org_id, after, list.fetch_limit())
        .await?;
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |f| vec![f.key.clone()],
        |f| ContactField {
            id: f.id.to_string(),
            key: f.key,
            label: f.label,
            field_type: f.field_type,
            created_at: format_ms(f.created_at),
        },
    )))
}

/// Every tag in use, with its contact count.
#[utoipa::path(
    get,
    path = "/tags",
    tag = "Contacts",
    operation_id = "listTags",
    params(
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of tags, alphabetically.", body = Page<Tag>)),
    security(("bearer" = []))
)]
pub async fn list_tags(
    auth: Authed<perm::ContactsRead>,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<Tag>>, ApiError> {
    let list = ListQuery::parse(query.as_deref(), &[])?.finish(&state, &auth, "tags", &[])?;
    let after = list
        .after
        .as_ref()
        .and_then(|p| p.first())
        .map(String::as_str);
    let rows = state
        .db
        .list_tags(auth.org_id, after, list.fetch_limit())
        .await?;
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |(t, _)| vec![t.clone()],
        |(tag, contact_count)| Tag { tag, contact_count },
    )))
}
