//! The one error catalog. Every error Tern answers with has a code from [`ErrorCode`];
//! the code fixes the HTTP status, the default message, the advice on how to fix it and
//! the documentation page. Responses and the served docs pages are both generated from
//! this table, so they cannot disagree.

use serde::Serialize;
use serde_json::{Map, Value};

mod conflict;
mod docs;

pub use conflict::ConflictReason;
pub use docs::catalog_markdown;

/// Stable error codes. Clients switch on these; their meaning never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    ValidationFailed,
    MediaTooLarge,
    UnsupportedMessageType,
    Unauthenticated,
    PlanFeatureUnavailable,
    PlanLimitReached,
    SubscriptionRestricted,
    UsageLimitReached,
    WalletBalanceLow,
    PermissionDenied,
    NotFound,
    MethodNotAllowed,
    WindowExpired,
    TemplateRequired,
    TemplateNotApproved,
    ContactOptedOut,
    DuplicateRequest,
    MediaUnavailable,
    Conflict,
    RequestTooLarge,
    QuotaExceeded,
    RateLimited,
    Unavailable,
}

/// One row of the catalog.
#[derive(Debug, Clone, Copy)]
pub struct CatalogEntry {
    pub code: ErrorCode,
    pub status: u16,
    pub title: &'static str,
    /// Default human message; call sites may give a more specific one.
    pub message: &'static str,
    /// What the caller should change.
    pub fix: &'static str,
    /// Longer text for the docs page.
    pub description: &'static str,
    /// The `details` keys this code may carry, for the docs page.
    pub details: &'static [&'static str],
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 23] = [
        ErrorCode::ValidationFailed,
        ErrorCode::MediaTooLarge,
        ErrorCode::UnsupportedMessageType,
        ErrorCode::Unauthenticated,
        ErrorCode::PlanFeatureUnavailable,
        ErrorCode::PlanLimitReached,
        ErrorCode::SubscriptionRestricted,
        ErrorCode::UsageLimitReached,
        ErrorCode::WalletBalanceLow,
        ErrorCode::PermissionDenied,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::WindowExpired,
        ErrorCode::TemplateRequired,
        ErrorCode::TemplateNotApproved,
        ErrorCode::ContactOptedOut,
        ErrorCode::DuplicateRequest,
        ErrorCode::MediaUnavailable,
        ErrorCode::Conflict,
        ErrorCode::RequestTooLarge,
        ErrorCode::QuotaExceeded,
        ErrorCode::RateLimited,
        ErrorCode::Unavailable,
    ];

    pub fn as_str(self) -> &'static str {
        self.entry().code_str()
    }

    pub fn parse(s: &str) -> Option<ErrorCode> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }

    pub fn status(self) -> u16 {
        self.entry().status
    }

    pub fn entry(self) -> &'static CatalogEntry {
        // The table is indexed in the same order as `ALL`.
        &CATALOG[self as usize]
    }
}

impl CatalogEntry {
    fn code_str(&self) -> &'static str {
        CODE_NAMES[self.code as usize]
    }
}

const CODE_NAMES: [&str; 23] = [
    "validation_failed",
    "media_too_large",
    "unsupported_message_type",
    "unauthenticated",
    "plan_feature_unavailable",
    "plan_limit_reached",
    "subscription_restricted",
    "usage_limit_reached",
    "wallet_balance_low",
    "permission_denied",
    "not_found",
    "method_not_allowed",
    "window_expired",
    "template_required",
    "template_not_approved",
    "contact_opted_out",
    "duplicate_request",
    "media_unavailable",
    "conflict",
    "request_too_large",
    "quota_exceeded",
    "rate_limited",
    "unavailable",
];

macro_rules! entry {
    ($code:ident, $status:expr, $title:expr, $message:expr, $fix:expr, $desc:expr, [$($d:expr),*]) => {
        CatalogEntry {
            code: ErrorCode::$code,
            status: $status,
            title: $title,
            message: $message,
            fix: $fix,
            description: $desc,
            details: &[$($d),*],
        }
    };
}

pub static CATALOG: [CatalogEntry; 23] = [
    entry!(
        ValidationFailed,
        400,
        "Validation failed",
        "The request is not valid.",
        "Correct each field listed in details.fields and send the request again.",
        "A field, header or query parameter breaks a rule of the API: a wrong type, a missing required value, a value out of range, malformed JSON or a wrong Content-Type. details.fields lists every problem as {field, message}; some cases add details.reason (for example to_needs_country_code, to_placeholder, from_required).",
        ["fields", "reason", "numbers"]
    ),
    entry!(
        MediaTooLarge,
        400,
        "Media too large",
        "The media file is larger than allowed.",
        "Send a smaller file: uploads are limited to 16 MiB and the network limits each media type (an image is at most 5 MB).",
        "The uploaded or linked file exceeds the upload limit or the network's limit for its type.",
        ["fields", "limit_bytes", "size_bytes"]
    ),
    entry!(
        UnsupportedMessageType,
        400,
        "Unsupported message type",
        "This message type is not supported.",
        "Use one of: text, image, video, audio, document, sticker, location, contacts, interactive, reaction, template.",
        "The type field names a kind of message the API cannot send.",
        ["fields"]
    ),
    entry!(
        Unauthenticated,
        401,
        "Unauthenticated",
        "No valid API key was given.",
        "Send the header `Authorization: Bearer <API_KEY>` with an active key. Keys work only under /api/public/v1.",
        "The Authorization header is missing or malformed, or the key is unknown or revoked, or an API key was used outside /api/public/v1.",
        ["reason"]
    ),
    entry!(
        PlanFeatureUnavailable,
        402,
        "Plan feature unavailable",
        "The organisation's plan does not include this feature.",
        "Upgrade the plan to the one named in details.upgrade_plan.",
        "The plan lacks the feature the request needs. No key or permission can lift this.",
        ["feature", "plan", "upgrade_plan"]
    ),
    entry!(
        PlanLimitReached,
        402,
        "Plan limit reached",
        "A count limit of the plan is reached.",
        "Remove items you no longer need or upgrade the plan.",
        "Creating this item would exceed a count limit (entitlement) of the plan.",
        ["entitlement", "limit", "used"]
    ),
    entry!(
        SubscriptionRestricted,
        402,
        "Subscription restricted",
        "The subscription is restricted or cancelled.",
        "Settle the subscription in the billing settings. Replies inside the 24-hour window still work.",
        "Business-initiated sends (templates, campaigns) are paused while the subscription is restricted or cancelled.",
        ["status", "action"]
    ),
    entry!(
        UsageLimitReached,
        402,
        "Usage limit reached",
        "A plan allowance is used up for this billing period.",
        "Wait for the next billing period (details.period_end) or upgrade the plan; retrying does not help.",
        "The plan caps API requests or messages sent per billing period and the cap is reached.",
        ["meter", "used", "allowance", "period_end"]
    ),
    entry!(
        WalletBalanceLow,
        402,
        "Wallet balance low",
        "The credit balance cannot cover this template message (or, at a campaign's launch or resume, its recipients left).",
        "Top up the wallet (details.top_up_path). Replies inside the 24-hour window are never refused for this.",
        "A template message debits the wallet by its category's price when accepted; a campaign launches or resumes only when the wallet covers its recipients left (details.required_minor).",
        [
            "balance_minor",
            "required_minor",
            "wallet_category",
            "top_up_path"
        ]
    ),
    entry!(
        PermissionDenied,
        403,
        "Permission denied",
        "The API key lacks the permission this endpoint needs.",
        "Create a key that includes the permission named in details.permission.",
        "Every endpoint needs one permission. A key's permissions are also limited by its creator's role.",
        ["permission"]
    ),
    entry!(
        NotFound,
        404,
        "Not found",
        "No such item exists in this organisation.",
        "Check the id or path. Items of other organisations are never visible.",
        "The path or the item does not exist for the organisation of the key.",
        []
    ),
    entry!(
        MethodNotAllowed,
        405,
        "Method not allowed",
        "This path does not support the HTTP method used.",
        "Use one of the methods listed in the Allow response header.",
        "The path exists but not with this method. The Allow header lists the methods it supports.",
        []
    ),
    entry!(
        WindowExpired,
        409,
        "Window expired",
        "The customer's 24-hour window is closed.",
        "Send an approved template message instead.",
        "Free-form messages can be sent only within 24 hours of the customer's last message to the number.",
        []
    ),
    entry!(
        TemplateRequired,
        409,
        "Template required",
        "The customer has never written to this number.",
        "Start the conversation with an approved template message.",
        "Only a template message can start a conversation with a customer who has not written to the number.",
        []
    ),
    entry!(
        TemplateNotApproved,
        409,
        "Template not approved",
        "The template is not approved for this number, or it does not match the approved template.",
        "Check the template's name, language and number of variables against an approved template of the number's business account.",
        "Template messages are checked against the approved template before they are accepted.",
        ["fields"]
    ),
    entry!(
        ContactOptedOut,
        409,
        "Contact opted out",
        "The customer has opted out.",
        "Do not send business-initiated messages to this contact unless they opt in again.",
        "The contact's consent status is opted_out.",
        []
    ),
    entry!(
        DuplicateRequest,
        409,
        "Duplicate request",
        "This Idempotency-Key was already used with a different body.",
        "Use a new Idempotency-Key for a different message, or resend the original body unchanged.",
        "Each Idempotency-Key identifies one intended message. Repeating it with the same body returns the original message; a different body is refused.",
        []
    ),
    entry!(
        MediaUnavailable,
        409,
        "Media unavailable",
        "The media cannot be used.",
        "Upload the file again or check the link.",
        "The media id is unknown, expired or not ready, or the link could not be fetched.",
        ["reason"]
    ),
    entry!(
        Conflict,
        409,
        "Conflict",
        "The request conflicts with the current state.",
        "Read details.reason, change the state it names, and retry.",
        "A valid request that the current state of the organisation does not allow. details.reason names which state, from the list below.",
        ["reason"]
    ),
    entry!(
        RequestTooLarge,
        413,
        "Request too large",
        "The request body is too large.",
        "Send a smaller body: JSON bodies are limited to 1 MiB and uploads to 16 MiB.",
        "The body exceeds the size limit of the endpoint.",
        ["limit_bytes"]
    ),
    entry!(
        QuotaExceeded,
        429,
        "Quota exceeded",
        "The request quota of a window is used up.",
        "Wait Retry-After seconds, when the window resets.",
        "Requests are counted in fixed windows per minute and per day, per key and per organisation. details.scope says which one ran out.",
        ["scope", "window"]
    ),
    entry!(
        RateLimited,
        429,
        "Rate limited",
        "Requests are arriving faster than accepted.",
        "Pause briefly (Retry-After, about 1 second) and retry.",
        "A burst limiter smooths traffic; it is separate from the quotas. Also used for concurrency limits such as media imports.",
        ["reason"]
    ),
    entry!(
        Unavailable,
        503,
        "Unavailable",
        "The service cannot answer now.",
        "Retry with backoff. For POST /messages reuse the same Idempotency-Key.",
        "A dependency is down or the service is shutting down. Nothing was changed unless the answer says so.",
        []
    ),
];

/// A `{field, message}` pair of `details.fields`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A refusal: an error code plus the specifics of this occurrence. The HTTP layer turns
/// it into the flat error body; nothing here knows about HTTP beyond the status number.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub code: ErrorCode,
    pub message: String,
    pub details: Map<String, Value>,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
    /// The advice for this occurrence when the catalog's advice for the code does not fit
    /// the caller (the network's webhook deliveries carry no API key, say).
    pub fix: Option<String>,
}

impl Problem {
    pub fn new(code: ErrorCode) -> Self {
        Self {
            code,
            message: code.entry().message.to_string(),
            details: Map::new(),
            retry_after: None,
            fix: None,
        }
    }

    /// Replaces the catalog's advice for this occurrence.
    pub fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    pub fn with_detail(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.details.insert(key.to_string(), value.into());
        self
    }

    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// `400 validation_failed` naming each bad field.
    pub fn validation(fields: Vec<FieldError>) -> Self {
        let message = match fields.as_slice() {
            [one] => format!("{}: {}", one.field, one.message),
            _ => format!("{} fields are not valid.", fields.len()),
        };
        Self::new(ErrorCode::ValidationFailed)
            .with_message(message)
            .with_detail(
                "fields",
                serde_json::to_value(fields).unwrap_or(Value::Null),
            )
    }

    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::validation(vec![FieldError::new(field, message)])
    }

    pub fn not_found() -> Self {
        Self::new(ErrorCode::NotFound)
    }

    pub fn unauthenticated() -> Self {
        Self::new(ErrorCode::Unauthenticated)
    }

    pub fn permission_denied(permission: &str) -> Self {
        Self::new(ErrorCode::PermissionDenied)
            .with_message(format!("The API key lacks the permission {permission}."))
            .with_detail("permission", permission)
    }

    pub fn conflict(reason: ConflictReason) -> Self {
        Self::new(ErrorCode::Conflict).with_detail("reason", reason.as_str())
    }

    /// Whether this is a `409 conflict` for `reason`.
    pub fn is_conflict(&self, reason: ConflictReason) -> bool {
        self.code == ErrorCode::Conflict
            && self.details.get("reason").and_then(Value::as_str) == Some(reason.as_str())
    }

    pub fn unavailable() -> Self {
        Self::new(ErrorCode::Unavailable).with_retry_after(1)
    }

    pub fn status(&self) -> u16 {
        self.code.status()
    }

    /// The flat error body of the contract. Here, not in an HTTP crate, so every adapter
    /// that answers in JSON (the public API, the app's refusal of API keys) says the same.
    pub fn to_body(&self, request_id: &str, docs_url: &str) -> Value {
        let entry = self.code.entry();
        serde_json::json!({
            "code": self.code.as_str(),
            "message": self.message,
            "request_id": request_id,
            "details": self.details,
            "fix": self.fix.as_deref().unwrap_or(entry.fix),
            "docs_url": docs_url,
        })
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for Problem {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_is_aligned_with_codes() {
        for (i, code) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(code as usize, i);
            assert_eq!(CATALOG[i].code, code, "catalog row {i} out of order");
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
            // serde name equals the catalog name
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                Value::String(code.as_str().to_string())
            );
        }
    }

    #[test]
    fn statuses_match_the_contract() {
        use ErrorCode::*;
        let expect = [
            (ValidationFailed, 400),
            (MediaTooLarge, 400),
            (UnsupportedMessageType, 400),
            (Unauthenticated, 401),
            (PlanFeatureUnavailable, 402),
            (PlanLimitReached, 402),
            (SubscriptionRestricted, 402),
            (UsageLimitReached, 402),
            (WalletBalanceLow, 402),
            (PermissionDenied, 403),
            (NotFound, 404),
            (WindowExpired, 409),
            (TemplateRequired, 409),
            (TemplateNotApproved, 409),
            (ContactOptedOut, 409),
            (DuplicateRequest, 409),
            (MediaUnavailable, 409),
            (Conflict, 409),
            (RequestTooLarge, 413),
            (QuotaExceeded, 429),
            (RateLimited, 429),
            (Unavailable, 503),
        ];
        for (code, status) in expect {
            assert_eq!(code.status(), status, "{}", code.as_str());
        }
    }

    #[test]
    fn validation_problem_lists_fields() {
        let p = Problem::validation(vec![
            FieldError::new("limit", "must be between 1 and 100"),
            FieldError::new("cursor", "is not valid"),
        ]);
        assert_eq!(p.status(), 400);
        let fields = p.details["fields"].as_array().unwrap();
        assert_eq!(fields.len(), 2);
        assert_eq!(fields[0]["field"], "limit");
    }
}
