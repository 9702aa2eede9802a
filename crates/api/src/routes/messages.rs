//! Sending messages (`POST /messages`) and reading them back (`GET /messages/{id}`).
//!
//! The handler runs the checks in the order DESIGN.md fixes (first failure wins): key →
//! permission → plan feature (the `Authed` extractor) → Idempotency-Key format → replay /
//! mismatch → body → sending number → recipient → consent → window and template →
//! billing → media. Acceptance is one store transaction (key, charges, contact and
//! conversation when new, queued message), so the message exists exactly when its key is
//! bound; concurrent acceptances share a transaction (`tern_store::AcceptQueue`). The
//! reads of a send are one statement (`Db::send_options`, shared by concurrent sends
//! through `tern_store::Lookups`, as is the key lookup); the key is read only when a
//! check refuses the request, since acceptance itself reports a bound key. The dispatcher
//! is woken at once.

use crate::auth::{self, AuthContext, Authed, perm};
use crate::error::ApiError;
use crate::extract::{ApiJson, path_id};
use crate::state::AppState;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use tern_domain::auth::Permission;
use tern_domain::plan::{Category, Meter, SubscriptionStatus, billing_period};
use tern_domain::send::{self, MediaRef, Recipient, SendRequest, Sender, WindowState};
use tern_domain::time::{format_ms, now_ms};
use tern_domain::{ErrorCode, FieldError, Problem, new_id, phone, template};
use tern_store::{
    Accept, Acceptance, CUSTOMER_WINDOW_MS, Charges, ContactRef, IdempotencyRecord, PhoneNumber,
    SendContext, SendOption,
};
use utoipa::ToSchema;

/// How long an Idempotency-Key is remembered (DESIGN.md).
pub const IDEMPOTENCY_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// Why a message failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Failure {
    /// Tern's failure code (same as the message's `failure_code`).
    #[schema(example = "recipient_not_on_whatsapp")]
    pub code: String,
    /// A plain explanation.
    pub message: String,
    /// The network's error code, when the network gave one.
    #[schema(example = "131026")]
    pub provider_code: Option<String>,
    /// The network's own wording.
    pub provider_message: Option<String>,
    /// A link to fix the cause; present only when the network offers one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_href: Option<String>,
}

/// A message, outbound (sent through Tern) or inbound (from a customer).
#[derive(Debug, Serialize, ToSchema)]
pub struct Message {
    #[schema(format = Uuid)]
    pub id: String,
    #[schema(format = Uuid)]
    pub conversation_id: String,
    #[schema(format = Uuid)]
    pub contact_id: String,
    /// The business number that sent or received it.
    pub phone_number_id: String,
    /// `outbound` or `inbound`.
    #[schema(example = "outbound")]
    pub direction: String,
    #[serde(rename = "type")]
    #[schema(example = "text")]
    pub r#type: String,
    /// `accepted`, `sending`, `sent`, `delivered`, `read` or `failed` (outbound);
    /// `received` (inbound).
    #[schema(example = "accepted")]
    pub status: String,
    pub template_name: Option<String>,
    /// The body of a text message, the caption of a media message, else null.
    pub text: Option<String>,
    pub media_id: Option<String>,
    /// The network's message id; null until the message has reached the network.
    pub wamid: Option<String>,
    /// Set when a campaign sent the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Uuid)]
    pub campaign_id: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub sent_at: Option<String>,
    #[schema(format = DateTime)]
    pub delivered_at: Option<String>,
    #[schema(format = DateTime)]
    pub read_at: Option<String>,
    #[schema(format = DateTime)]
    pub failed_at: Option<String>,
    pub failure_code: Option<String>,
    pub failure: Option<Failure>,
}

fn failure_from(v: Value) -> Option<Failure> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    Some(Failure {
        code: s("code")?,
        message: s("message").unwrap_or_default(),
        provider_code: v.get("provider_code").and_then(|c| match c {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }),
        provider_message: s("provider_message"),
        provider_href: s("provider_href"),
    })
}

impl From<tern_store::Message> for Message {
    fn from(m: tern_store::Message) -> Self {
        Message {
            id: m.id.to_string(),
            conversation_id: m.conversation_id.to_string(),
            contact_id: m.contact_id.to_string(),
            phone_number_id: m.phone_number_id,
            direction: m.direction,
            r#type: m.r#type,
            status: m.status,
            template_name: m.template_name,
            text: m.text,
            media_id: m.media_id.map(|id| id.to_string()),
            wamid: m.wamid,
            campaign_id: m.campaign_id.map(|id| id.to_string()),
            created_at: format_ms(m.created_at),
            sent_at: m.sent_at.map(format_ms),
            delivered_at: m.delivered_at.map(format_ms),
            read_at: m.read_at.map(format_ms),
            failed_at: m.failed_at.map(format_ms),
            failure_code: m.failure_code,
            failure: m.failure.and_then(failure_from),
        }
    }
}

/// The body of `POST /messages`: the network's message shapes, with `to` and the sending
/// number as Tern adds them. The rules are enforced by `tern_domain::send::parse_send`.
pub struct SendMessageRequest;

fn media_schema(caption: bool, filename: bool) -> Value {
    let mut props = json!({
        "link": {"type": "string", "format": "uri", "pattern": "^https://", "description": "An https URL."},
        "media_id": {"type": "string", "minLength": 1, "description": "The id of a file uploaded earlier."}
    });
    if caption {
        props["caption"] = json!({"type": "string", "maxLength": 1024});
    }
    if filename {
        props["filename"] = json!({"type": "string", "minLength": 1, "maxLength": 240});
    }
    json!({"type": "object", "description": "Exactly one of link / media_id.",
           "properties": props, "additionalProperties": false})
}

fn send_schema() -> Value {
    let value = json!({"type": "string", "minLength": 1, "pattern": "^[^\\n\\t\\r]*[^\\s][^\\n\\t\\r]*$", "description": "Non-empty; no new line, no tab, no more than four spaces in a row."});
    json!({
        "type": "object",
        "required": ["type", "to"],
        "description": "A message in the network's own shape: `type` selects the kind and the object named like the type is required.",
        "properties": {
            "type": {"type": "string", "enum": ["text", "image", "video", "audio", "document", "sticker", "location", "contacts", "interactive", "reaction", "template"]},
            "to": {"description": "A phone number in international format (`+` and the country code; spaces and dashes allowed), or an object with exactly one of `contact_id` / `wa_id`. Addressing by phone number also needs `contacts.create`.",
                   "oneOf": [
                       {"type": "string", "pattern": "^\\+[0-9 ().-]{7,40}$", "example": "+14155550123"},
                       {"type": "object", "properties": {"contact_id": {"type": "string", "format": "uuid"}}, "required": ["contact_id"], "additionalProperties": false},
                       {"type": "object", "properties": {"wa_id": {"type": "string", "pattern": "^[1-9][0-9]{6,14}$"}}, "required": ["wa_id"], "additionalProperties": false}
                   ]},
            "phone_number_id": {"type": "string", "minLength": 1, "description": "The sending number (`id` from GET /phone-numbers). Required when the organisation has several numbers (or use `from`)."},
            "from": {"type": "string", "minLength": 1, "description": "Alternative selector of the sending number: a phone_number_id or the number in E.164."},
            "context": {"type": "object", "properties": {"message_id": {"type": "string", "minLength": 1}}, "required": ["message_id"], "description": "Reply to (quote) an earlier message."},
            "text": {"type": "object", "required": ["body"], "additionalProperties": false,
                     "properties": {"body": {"type": "string", "minLength": 1, "maxLength": 4096}, "preview_url": {"type": "boolean"}}},
            "image": media_schema(true, false),
            "video": media_schema(true, false),
            "audio": media_schema(false, false),
            "document": media_schema(true, true),
            "sticker": media_schema(false, false),
            "location": {"type": "object", "required": ["latitude", "longitude"],
                         "properties": {"latitude": {"type": "number", "minimum": -90, "maximum": 90}, "longitude": {"type": "number", "minimum": -180, "maximum": 180}, "name": {"type": "string"}, "address": {"type": "string"}}},
            "contacts": {"type": "array", "minItems": 1, "items": {"type": "object", "description": "A contact card in the network's format (`name.formatted_name` required)."}},
            "interactive": {"type": "object", "description": "The network's interactive object (button, list, cta_url, flow, …).", "required": ["type"]},
            "reaction": {"type": "object", "required": ["message_id", "emoji"], "properties": {"message_id": {"type": "string", "minLength": 1}, "emoji": {"type": "string"}}},
            "template": {"type": "object", "required": ["name", "language"], "additionalProperties": false,
                         "description": "An approved template. `variables` (one value per numbered variable, in order) and `components` (the network's typed parameters) are never sent together; every value is non-empty with no new line, tab or more than four spaces in a row.",
                         "properties": {
                             "name": {"type": "string", "minLength": 1},
                             "language": {"type": "string", "minLength": 2},
                             "variables": {"type": "array", "items": value},
                             "coupon_code": value,
                             "components": {"type": "array", "items": {"type": "object"}}
                         }}
        },
        "example": {"to": "+14155550123", "type": "text", "text": {"body": "Your order has shipped."}}
    })
}

impl utoipa::PartialSchema for SendMessageRequest {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        serde_json::from_value(send_schema())
            .unwrap_or_else(|_| utoipa::openapi::schema::ObjectBuilder::new().into())
    }
}

impl utoipa::ToSchema for SendMessageRequest {}

/// Send a message.
#[utoipa::path(
    post,
    path = "/messages",
    tag = "Messages",
    operation_id = "sendMessage",
    params(
        ("Idempotency-Key" = String, Header, min_length = 8, max_length = 128, pattern = "^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$",
         description = "Unique per intended message; repeat it when retrying."),
    ),
    request_body = SendMessageRequest,
    responses(
        (status = 202, description = "Accepted for delivery (not yet delivered).", body = Message),
        (status = 200, description = "A repeat of an accepted request (same key, same body): the message in its current state. Nothing is sent again.", body = Message,
         headers(("Idempotent-Replayed" = String, description = "`true`"))),
    ),
    security(("bearer" = []))
)]
pub async fn send_message(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<ApiJson<Value>, ApiError>,
) -> Result<Response, ApiError> {
    // The key and the reads of the send are one lookup, so the recipient is taken from the
    // body before the key is checked; the answers keep the contract's order all the same.
    let hash = auth::key_hash(&headers)?;
    let parsed = body.as_ref().ok().map(|ApiJson(b)| send::parse_send(b));
    let contact = match parsed {
        Some(Ok(ref req)) => Some(match &req.recipient {
            Recipient::ContactId(id) => ContactRef::Id(*id),
            Recipient::WaId(p) | Recipient::Phone(p) => ContactRef::WaId(p.wa_id()),
        }),
        _ => None,
    };
    let found = state.lookups.send(&hash, contact).await?;
    let (rec, options) = match found {
        Some(SendContext { auth, options }) => (Some(auth), options),
        None => (None, Vec::new()),
    };
    let auth = Authed::<perm::MessagesSend>::check(auth::context(&state, rec)?)?;

    let key_header = headers
        .get(send::IDEMPOTENCY_KEY_HEADER)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let key = send::check_idempotency_key(key_header)?.to_string();
    let ApiJson(body) = body?;
    let fingerprint = send::fingerprint(&body);
    let now = now_ms();
    let result = match parsed {
        Some(Ok(req)) => accept(&state, &auth, req, &options, &key, &fingerprint, now).await,
        Some(Err(p)) => Err(ApiError(p)),
        // Not reached: a broken body was answered above.
        None => Err(ApiError(Problem::unavailable())),
    };
    match result {
        Ok(res) => Ok(res),
        // A bound key answers before any other check (replay or duplicate_request). The
        // happy path does not read the key: binding it is part of the acceptance, which
        // reports a bound key itself. Only a refusal needs to know.
        Err(e) => match state.db.get_idempotency_key(auth.org_id, &key, now).await {
            Ok(Some(rec)) => replay(&state, &auth, rec, &fingerprint).await,
            _ => Err(e),
        },
    }
}

/// The checks after the key, then the acceptance. `options`: the organisation's numbers
/// with the recipient's contact and conversation on each (`Db::send_options`).
async fn accept(
    state: &AppState,
    auth: &AuthContext,
    req: SendRequest,
    options: &[SendOption],
    key: &str,
    fingerprint: &[u8],
    now: i64,
) -> Result<Response, ApiError> {
    let option = sending_number(options, req.sender.as_ref())?;
    let number = &option.number;
    let new_contact = recipient(state, auth, &req.recipient, option).await?;
    let window = match option.last_inbound_at.map(|t| t + CUSTOMER_WINDOW_MS) {
        None => WindowState::NeverWritten,
        Some(t) if t > now => WindowState::Open,
        Some(_) => WindowState::Closed,
    };
    let opted_out = option.consent_status.as_deref() == Some("opted_out");
    send::check_window_and_consent(req.kind, window, opted_out)?;
    let (content, category) = match &req.template {
        Some(t) => {
            let tpl = state
                .db
                .find_approved_template(auth.org_id, &number.waba_id, &t.name, &t.language)
                .await?
                .ok_or_else(|| template_not_approved(&t.name, &t.language))?;
            template::check_send(
                &tpl.components,
                t.variables.as_deref(),
                t.components.as_ref(),
                t.coupon_code.as_deref(),
            )
            .map_err(|r| ApiError(r.into_problem()))?;
            let components = match (&t.components, &t.variables) {
                (Some(c), _) => c.clone(),
                (None, vars) => Value::Array(template::network_components(
                    &tpl.components,
                    vars.as_deref().unwrap_or_default(),
                    t.coupon_code.as_deref(),
                )),
            };
            let mut obj = json!({"name": t.name, "language": {"code": t.language}});
            if components.as_array().is_some_and(|a| !a.is_empty()) {
                obj["components"] = components;
            }
            (obj, Category::parse(&tpl.category))
        }
        None => (req.content.clone(), None),
    };
    let charges = billing(auth, &req, category, now)?;
    check_media(&req)?;

    let wa_id = match (&option.contact_wa_id, &new_contact) {
        (Some(w), _) | (None, Some(w)) => w.clone(),
        (None, None) => return Err(ApiError(Problem::not_found())),
    };
    let mut request = json!({"to": wa_id, "type": req.kind.as_str()});
    request[req.kind.as_str()] = content;
    if let Some(wamid) = &req.context {
        request["context"] = json!({"message_id": wamid});
    }
    let message = tern_store::Message {
        id: new_id(),
        org_id: auth.org_id,
        // New ids for a contact or conversation that the acceptance creates.
        conversation_id: option.conversation_id.unwrap_or_else(new_id),
        contact_id: option.contact_id.unwrap_or_else(new_id),
        phone_number_id: number.id.clone(),
        direction: "outbound".into(),
        r#type: req.kind.as_str().into(),
        status: "accepted".into(),
        template_name: req.template.as_ref().map(|t| t.name.clone()),
        template_language: req.template.as_ref().map(|t| t.language.clone()),
        text: req.text.clone(),
        media_id: None,
        wamid: None,
        request,
        campaign_id: None,
        created_at: now,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: now,
    };
    let item = Accept {
        message,
        key: key.to_string(),
        fingerprint: fingerprint.to_vec(),
        key_expires_at: now + IDEMPOTENCY_TTL_MS,
        charges,
        new_contact,
        new_conversation: option.conversation_id.is_none(),
    };
    let (item, outcome) = state.acceptor.accept(item).await?;
    match outcome {
        Acceptance::Accepted => {
            state.dispatch_wakeup.notify_one();
            metrics::counter!("tern_messages_accepted_total", "type" => req.kind.as_str())
                .increment(1);
            Ok((StatusCode::ACCEPTED, Json(Message::from(item.message))).into_response())
        }
        // Answered here (a 409 included): the caller's key lookup on refusals is not needed.
        Acceptance::KeyTaken(rec) => Ok(replay(state, auth, rec, fingerprint)
            .await
            .unwrap_or_else(IntoResponse::into_response)),
        Acceptance::WalletLow { balance_minor } => Err(wallet_low(
            balance_minor,
            item.charges.debit_minor.unwrap_or_default(),
            category,
        )),
        Acceptance::AllowanceUsed { used } => {
            let (_, end) = billing_period(auth.org.billing_period_start, now);
            Err(ApiError(
                Problem::new(ErrorCode::UsageLimitReached)
                    .with_detail("meter", Meter::MessagesSent.as_str())
                    .with_detail("used", used)
                    .with_detail("allowance", used)
                    .with_detail("period_end", format_ms(end)),
            ))
        }
    }
}

/// The answer to a request whose key is already bound: the message (200) for the same body,
/// `duplicate_request` (409) for another.
async fn replay(
    state: &AppState,
    auth: &AuthContext,
    rec: IdempotencyRecord,
    fingerprint: &[u8],
) -> Result<Response, ApiError> {
    if rec.fingerprint != fingerprint {
        return Err(ApiError(
            Problem::new(ErrorCode::DuplicateRequest)
                .with_detail("idempotency_key", rec.key)
                .with_detail("first_used_at", format_ms(rec.created_at)),
        ));
    }
    let message = match rec.message_id {
        Some(id) => state.db.get_message(auth.org_id, id).await?,
        None => None,
    };
    let Some(message) = message else {
        // The key's message is gone (cannot happen while both live 24 h); do not guess.
        return Err(ApiError(Problem::unavailable()));
    };
    let mut resp = (StatusCode::OK, Json(Message::from(message))).into_response();
    resp.headers_mut()
        .insert("idempotent-replayed", HeaderValue::from_static("true"));
    Ok(resp)
}

fn numbers_detail(numbers: &[&PhoneNumber]) -> Value {
    Value::Array(
        numbers
            .iter()
            .map(|n| {
                json!({"id": n.id, "display_phone_number": n.display_phone_number, "status": n.status})
            })
            .collect(),
    )
}

/// The number to send from: the selected one, or the organisation's only one.
fn sending_number<'a>(
    options: &'a [SendOption],
    sender: Option<&Sender>,
) -> Result<&'a SendOption, ApiError> {
    let numbers: Vec<&PhoneNumber> = options.iter().map(|o| &o.number).collect();
    let connected = |n: &PhoneNumber| n.status == "connected";
    let chosen = match sender {
        Some(s) => {
            let (field, value) = match s {
                Sender::PhoneNumberId(v) => ("phone_number_id", v),
                Sender::From(v) => ("from", v),
            };
            let e164 = phone::parse_international(value).ok().map(|p| p.e164);
            let found = options.iter().find(|o| {
                o.number.id == *value
                    || (field == "from" && e164.as_deref() == Some(&o.number.display_phone_number))
            });
            match found {
                Some(o) => o,
                None => {
                    return Err(ApiError(
                        Problem::validation(vec![FieldError::new(
                            field,
                            "is not one of the organisation's numbers; see details.numbers",
                        )])
                        .with_detail("numbers", numbers_detail(&numbers)),
                    ));
                }
            }
        }
        None => {
            if !numbers.iter().any(|n| connected(n)) {
                return Err(ApiError(
                    Problem::conflict("no_connected_phone_number")
                        .with_message("No business number can send yet; connect one first."),
                ));
            }
            if numbers.len() > 1 {
                return Err(ApiError(
                    Problem::validation(vec![FieldError::new(
                        "phone_number_id",
                        "is required: the organisation has several numbers (see details.numbers)",
                    )])
                    .with_detail("reason", "from_required")
                    .with_detail("numbers", numbers_detail(&numbers)),
                ));
            }
            match options.first() {
                Some(o) => o,
                None => return Err(ApiError(Problem::conflict("no_connected_phone_number"))),
            }
        }
    };
    if !connected(&chosen.number) {
        return Err(ApiError(
            Problem::conflict("phone_number_not_connected")
                .with_message("The selected number cannot send now.")
                .with_detail("phone_number_id", chosen.number.id.clone()),
        ));
    }
    Ok(chosen)
}

/// Checks the recipient: an existing contact, or (for a phone number not yet known) the
/// wa_id of the contact the acceptance creates.
async fn recipient(
    state: &AppState,
    auth: &AuthContext,
    r: &Recipient,
    option: &SendOption,
) -> Result<Option<String>, ApiError> {
    let wa_id = match r {
        Recipient::ContactId(_) => {
            return match option.contact_id {
                Some(_) => Ok(None),
                None => Err(ApiError(Problem::not_found().with_message(
                    "No contact with this contact_id in the organisation.",
                ))),
            };
        }
        Recipient::WaId(p) | Recipient::Phone(p) => p.wa_id().to_string(),
    };
    if !auth.has(Permission::ContactsCreate) {
        return Err(ApiError(
            Problem::permission_denied(Permission::ContactsCreate.as_str()).with_message(
                "Addressing a message by phone number also needs the contacts.create permission; use to.contact_id instead.",
            ),
        ));
    }
    if option.contact_id.is_some() {
        return Ok(None);
    }
    let used = state.db.count_contacts(auth.org_id).await?;
    auth.effective()
        .check_count(tern_domain::plan::Entitlement::Contacts, used)?;
    Ok(Some(wa_id))
}

fn template_not_approved(name: &str, language: &str) -> ApiError {
    ApiError(
        Problem::new(ErrorCode::TemplateNotApproved)
            .with_message(format!(
                "No approved template {name:?} in language {language:?} for this number's business account."
            ))
            .with_detail("name", name)
            .with_detail("language", language),
    )
}

/// The billing checks and effects of a send: template sends pause while the subscription is
/// restricted, debit the wallet by their category's price, and every send counts against
/// the plan's `messages_sent` allowance.
fn billing(
    auth: &AuthContext,
    req: &SendRequest,
    category: Option<Category>,
    now: i64,
) -> Result<Charges, ApiError> {
    let status = SubscriptionStatus::parse(&auth.org.subscription_status);
    if req.kind.is_template()
        && matches!(
            status,
            Some(SubscriptionStatus::Restricted | SubscriptionStatus::Cancelled)
        )
    {
        return Err(ApiError(
            Problem::new(ErrorCode::SubscriptionRestricted)
                .with_detail("status", auth.org.subscription_status.clone())
                .with_detail("action", "template_sends_paused"),
        ));
    }
    let effective = auth.effective();
    let debit_minor = category
        .map(|c| effective.price_minor(c))
        .filter(|p| *p > 0);
    if let Some(price) = debit_minor
        && auth.org.wallet_balance_minor < price
    {
        return Err(wallet_low(auth.org.wallet_balance_minor, price, category));
    }
    let messages_sent = effective.allowance(Meter::MessagesSent).map(|a| {
        let (start, _) = billing_period(auth.org.billing_period_start, now);
        (start, i64::try_from(a).unwrap_or(i64::MAX))
    });
    Ok(Charges {
        debit_minor,
        messages_sent,
    })
}

fn wallet_low(balance: i64, required: i64, category: Option<Category>) -> ApiError {
    ApiError(
        Problem::new(ErrorCode::WalletBalanceLow)
            .with_detail("balance_minor", balance)
            .with_detail("required_minor", required)
            .with_detail("wallet_category", category.map(Category::as_str))
            .with_detail("top_up_path", "/settings/billing/wallet"),
    )
}

/// Media are sent only once Tern can fetch or hold them (the media capability); until then
/// a media message is refused with `media_unavailable`, after every other check passed.
fn check_media(req: &SendRequest) -> Result<(), ApiError> {
    let field = format!("{}.", req.kind.as_str());
    match &req.media {
        None => Ok(()),
        Some(MediaRef::Id(_)) => Err(ApiError(
            Problem::new(ErrorCode::MediaUnavailable)
                .with_message("No uploaded file has this media_id.")
                .with_detail("reason", "unknown_media")
                .with_detail("field", format!("{field}media_id")),
        )),
        Some(MediaRef::Link(_)) => Err(ApiError(
            Problem::new(ErrorCode::MediaUnavailable)
                .with_message("Media links cannot be imported by this server yet; the file could not be fetched.")
                .with_detail("reason", "link_import_unavailable")
                .with_detail("field", format!("{field}link")),
        )),
    }
}

/// One message: its status and, if it failed, why.
#[utoipa::path(
    get,
    path = "/messages/{message_id}",
    tag = "Messages",
    operation_id = "getMessage",
    params(("message_id" = String, Path, format = Uuid)),
    responses((status = 200, description = "The message.", body = Message)),
    security(("bearer" = []))
)]
pub async fn get_message(
    auth: Authed<perm::MessagesRead>,
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Message>, ApiError> {
    let id = path_id(&id)?;
    let m = state
        .db
        .get_message(auth.org_id, id)
        .await?
        .ok_or_else(|| ApiError(Problem::not_found()))?;
    Ok(Json(m.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_object_keeps_provider_fields() {
        let f = failure_from(json!({"code": "x", "message": "m", "provider_code": 131026,
            "provider_message": "Undeliverable", "provider_href": "https://example.com"}))
        .unwrap();
        assert_eq!(f.provider_code.as_deref(), Some("131026"));
        assert_eq!(f.provider_href.as_deref(), Some("https://example.com"));
        assert!(failure_from(json!({"message": "no code"})).is_none());
    }

    #[test]
    fn send_schema_is_a_valid_schema() {
        let schema = <SendMessageRequest as utoipa::PartialSchema>::schema();
        let v = serde_json::to_value(schema).unwrap();
        assert_eq!(v["required"], json!(["type", "to"]));
        assert_eq!(
            v["properties"]["text"]["properties"]["body"]["maxLength"],
            json!(4096)
        );
    }
}
