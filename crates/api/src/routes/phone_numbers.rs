use crate::auth::{Authed, perm};
use crate::error::ApiError;
use crate::pagination::{ListQuery, Page};
use crate::state::AppState;
use axum::Json;
use axum::extract::{RawQuery, State};
use serde::Serialize;
use utoipa::ToSchema;

/// A business phone number connected to the organisation.
#[derive(Debug, Serialize, ToSchema)]
pub struct PhoneNumber {
    /// The network's phone_number_id; use it as `phone_number_id` or `from` when sending.
    pub id: String,
    /// The number in E.164 format.
    #[schema(example = "+14155550100")]
    pub display_phone_number: String,
    /// `connected` numbers can send.
    #[schema(example = "connected")]
    pub status: String,
    /// Messages per second the network accepts from this number.
    pub throughput_mps: i64,
    /// The WhatsApp Business Account the number belongs to.
    pub waba_id: String,
    #[schema(format = DateTime)]
    pub created_at: String,
}

impl From<tern_store::PhoneNumber> for PhoneNumber {
    fn from(p: tern_store::PhoneNumber) -> Self {
        PhoneNumber {
            id: p.id,
            display_phone_number: p.display_phone_number,
            status: p.status.as_str().to_string(),
            throughput_mps: p.throughput_mps,
            waba_id: p.waba_id,
            created_at: tern_domain::time::format_ms(p.created_at),
        }
    }
}

/// List the organisation's phone numbers.
#[utoipa::path(
    get,
    path = "/phone-numbers",
    tag = "Phone numbers",
    operation_id = "listPhoneNumbers",
    params(
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 100, description = "Page size, 1 to 100 (default 25)."),
        ("cursor" = Option<String>, Query, min_length = 1, description = "The `next_cursor` of the previous page."),
    ),
    responses((status = 200, description = "A page of phone numbers.", body = Page<PhoneNumber>)),
    security(("bearer" = []))
)]
pub async fn list_phone_numbers(
    auth: Authed<perm::NumbersRead>,
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Result<Json<Page<PhoneNumber>>, ApiError> {
    let list =
        ListQuery::parse(query.as_deref(), &[])?.finish(&state, &auth, "phone_numbers", &[])?;
    let after = list
        .after
        .as_ref()
        .and_then(|p| p.first())
        .map(String::as_str);
    let rows = state
        .db
        .list_phone_numbers(auth.org_id, after, list.fetch_limit())
        .await?;
    Ok(Json(list.page(
        &state,
        &auth,
        rows,
        |r| vec![r.id.clone()],
        PhoneNumber::from,
    )))
}
