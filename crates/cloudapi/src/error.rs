//! Graph API errors: parsing, retry classification and Tern failure codes.
//!
//! # Parsing
//! [`GraphError::from_response`] accepts *any* status + body. A proper Graph body
//! (`{"error":{"message","type","code","error_subcode","error_data":{"details"},"fbtrace_id",
//! "error_user_title","error_user_msg"}}`) fills every field; anything else (an HTML 502 from a
//! proxy, an empty body, JSON of another shape) gives a `GraphError` with `code: None` and the
//! first bytes of the body kept in `raw_body`. It never panics.
//!
//! # Retry classes ([`RetryClass`])
//! Decided on `code` (Meta: "build logic on code + details, not on the title or HTTP
//! status"), falling back to the HTTP status for unknown codes:
//!
//! | class | codes | what the caller does |
//! |---|---|---|
//! | `RetrySoon` | 4, 80007, 80008, 130429, 131056 (throttling) | back off seconds/minutes, then resend |
//! | `RetryLater` | 1, 2, 131000, 131016, 131057, 133004, 133015, 132069, unknown 5xx, non-JSON 5xx | longer backoff, bounded attempts |
//! | `Never` | every other documented code (100, 104, 190, 131026, 131047, 131051, 131062, 132000, …), unknown 4xx | permanent: fail the message |
//! | `OutcomeUnknown` | never produced from a Graph answer; used by the client when the request may have reached the network but no answer was read | do not resend blindly; wait for a status webhook matched by `biz_opaque_callback_data` |
//!
//! # Tern failure codes ([`FailureInfo::code`])
//! Stable snake_case strings for the Message `failure` object:
//!
//! | Tern code | network codes |
//! |---|---|
//! | `recipient_not_on_whatsapp` | 131026 |
//! | `window_expired` | 131047 |
//! | `network_rate_limited` | 4, 80007, 80008, 130429 |
//! | `pair_rate_limited` | 131056 |
//! | `quality_restricted` | 131048 |
//! | `ecosystem_limited` | 131049 |
//! | `marketing_opted_out` | 131050 |
//! | `marketing_restricted` | 131063, 131064 |
//! | `recipient_blocked` | 130403 |
//! | `recipient_in_experiment` | 130472 |
//! | `recipient_not_allowed` | 131030 |
//! | `recipient_is_sender` | 131021 |
//! | `phone_number_required` | 131062 (BSUID recipient for a one-tap / zero-tap / copy-code authentication template) |
//! | `country_restricted` | 130497 |
//! | `network_auth_failed` | 0, 104, 190 |
//! | `network_permission_denied` | 3, 10, 200–299, 131005 |
//! | `account_restricted` | 368, 131031 |
//! | `network_billing_issue` | 131042 |
//! | `sender_number_unavailable` | 33, 131037, 131045, 133000, 133005–133010 |
//! | `invalid_request` | 100, 131008, 131009, 135000 |
//! | `unsupported_message_type` | 131051 |
//! | `media_error` | 131052, 131053 |
//! | `template_mismatch` | 132000, 132005, 132012, 132018 |
//! | `template_not_found` | 132001 |
//! | `template_policy_violation` | 132007 |
//! | `template_paused` | 132015 |
//! | `template_disabled` | 132016 |
//! | `flow_error` | 132068, 132069 |
//! | `network_error` | 1, 2, 131000, 131016, 131057, 133004, 133015, any unknown code |
//! | `network_outcome_unknown` | (caller side) the send's outcome could not be determined |

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How the caller should treat a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryClass {
    /// Throttling: retry after a short backoff.
    RetrySoon,
    /// The network is having trouble: retry with a longer backoff, bounded.
    RetryLater,
    /// Permanent for this request: do not retry.
    Never,
    /// The request may or may not have been processed: never resend blindly.
    OutcomeUnknown,
}

/// Static knowledge about one network error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeInfo {
    pub code: i64,
    /// The network's short title (used in `message` as `(#code) title`).
    pub title: &'static str,
    /// HTTP status the network answers with for a synchronous error.
    pub http_status: u16,
    pub retry: RetryClass,
    /// Tern failure code (see module docs).
    pub failure_code: &'static str,
    /// Short plain-English explanation for Tern's users.
    pub explanation: &'static str,
}

/// The failure description Tern stores on a Message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureInfo {
    /// Tern failure code, e.g. `recipient_not_on_whatsapp`.
    pub code: &'static str,
    /// Plain-English explanation.
    pub explanation: String,
    pub retry: RetryClass,
}

/// Tern failure code for a send whose outcome is unknown (caller side).
pub const FAILURE_OUTCOME_UNKNOWN: &str = "network_outcome_unknown";
/// Tern failure code for network trouble / unknown codes.
pub const FAILURE_NETWORK_ERROR: &str = "network_error";

use RetryClass::{Never, RetryLater, RetrySoon};

macro_rules! codes {
    ($( $code:literal, $http:literal, $retry:ident, $failure:literal, $title:literal, $expl:literal; )*) => {
        const CODES: &[CodeInfo] = &[
            $( CodeInfo { code: $code, title: $title, http_status: $http, retry: $retry,
                          failure_code: $failure, explanation: $expl }, )*
        ];
    };
}

codes! {
    0, 401, Never, "network_auth_failed", "AuthException", "The network could not authenticate the business account; its access token is expired or invalid.";
    1, 400, RetryLater, "network_error", "API Unknown", "The network reported an unknown error.";
    2, 503, RetryLater, "network_error", "API Service", "The network is temporarily unavailable.";
    3, 500, Never, "network_permission_denied", "API Method", "The business account lacks the capability or permission for this call.";
    4, 400, RetrySoon, "network_rate_limited", "Application request limit reached", "Too many API calls to the network; it will be retried.";
    10, 403, Never, "network_permission_denied", "Permission denied", "The business account is not permitted to do this.";
    33, 400, Never, "sender_number_unavailable", "Business phone number deleted", "The sending phone number no longer exists on the network.";
    100, 400, Never, "invalid_request", "Invalid parameter", "The network rejected a parameter of the message as invalid.";
    104, 400, Never, "network_auth_failed", "An access token is required to request this resource.", "No access token was sent to the network.";
    190, 401, Never, "network_auth_failed", "Invalid OAuth access token", "The business account's access token is expired or invalid.";
    368, 403, Never, "account_restricted", "Temporarily blocked for policies violations", "The business account is temporarily blocked for policy violations.";
    80007, 400, RetrySoon, "network_rate_limited", "Rate limit issues", "The business account hit its API rate limit; it will be retried.";
    80008, 400, RetrySoon, "network_rate_limited", "Too many calls", "The business account made too many calls; it will be retried.";
    130403, 400, Never, "recipient_blocked", "Recipient blocked", "The business has blocked this recipient.";
    130429, 400, RetrySoon, "network_rate_limited", "Rate limit hit", "The sending number's throughput limit was exceeded; it will be retried.";
    130472, 400, Never, "recipient_in_experiment", "User's number is part of an experiment", "The network did not deliver because the recipient is part of an experiment.";
    130497, 400, Never, "country_restricted", "Business account is restricted from messaging users in this country", "The business account may not message users in the recipient's country.";
    131000, 500, RetryLater, "network_error", "Something went wrong", "The network failed for an unknown reason.";
    131005, 403, Never, "network_permission_denied", "Access denied", "The network denied access for this business account.";
    131008, 400, Never, "invalid_request", "Required parameter is missing", "A required parameter was missing from the message.";
    131009, 400, Never, "invalid_request", "Parameter value is not valid", "A parameter value of the message was not valid.";
    131016, 500, RetryLater, "network_error", "Service unavailable", "The network service is temporarily unavailable.";
    131021, 400, Never, "recipient_is_sender", "Recipient cannot be sender", "The recipient is the sending number itself.";
    131026, 400, Never, "recipient_not_on_whatsapp", "Message undeliverable", "The recipient is not on WhatsApp, uses an old app version, or has not accepted the terms.";
    131030, 400, Never, "recipient_not_allowed", "Recipient phone number not in allowed list", "The recipient is not in the test number's allowed list.";
    131031, 403, Never, "account_restricted", "Account has been locked", "The business account is locked.";
    131037, 400, Never, "sender_number_unavailable", "WhatsApp provided number needs display name approval before message can be sent", "The sending number has no approved display name.";
    131042, 400, Never, "network_billing_issue", "Business eligibility payment issue", "The business account has a payment problem on the network.";
    131045, 500, Never, "sender_number_unavailable", "Incorrect certificate", "The sending number is not correctly registered.";
    131047, 400, Never, "window_expired", "Re-engagement message", "More than 24 hours have passed since the customer last wrote; only a template can be sent.";
    131048, 400, Never, "quality_restricted", "Spam rate limit hit", "The sending number is restricted because of low quality.";
    131049, 400, Never, "ecosystem_limited", "This message was not delivered to maintain healthy ecosystem engagement.", "The network chose not to deliver this message (per-user marketing limit).";
    131050, 400, Never, "marketing_opted_out", "Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business.", "The recipient stopped marketing messages from this business.";
    131051, 400, Never, "unsupported_message_type", "Unsupported message type", "The message type is not supported.";
    131052, 400, Never, "media_error", "Media download error", "The media sent by the user could not be downloaded.";
    131053, 400, Never, "media_error", "Media upload error", "The media of the message could not be uploaded or fetched.";
    131056, 400, RetrySoon, "pair_rate_limited", "(Business Account, Consumer Account) pair rate limit hit", "Too many messages were sent to this recipient in a short time; it will be retried.";
    131057, 500, RetryLater, "network_error", "Account in maintenance mode", "The business account is in maintenance mode.";
    131062, 400, Never, "phone_number_required", "BSUID recipients are not supported for this message", "This message needs the customer's phone number; the customer is known only by their business-scoped user id.";
    131063, 400, Never, "marketing_restricted", "Marketing messages are disabled for this business account", "Marketing templates are disabled for this business account.";
    131064, 400, Never, "marketing_restricted", "Messaging limit reached due to template misclassification", "The messaging limit was reached because of template misclassification.";
    132000, 400, Never, "template_mismatch", "Number of parameters does not match the expected number of params", "The number of template parameters does not match the template.";
    132001, 404, Never, "template_not_found", "Template name does not exist in the translation", "The template does not exist in that language or is not approved.";
    132005, 400, Never, "template_mismatch", "Translated text too long", "The template text with its parameters is too long.";
    132007, 400, Never, "template_policy_violation", "Template format character policy violated", "The template content violates the network's policy.";
    132012, 400, Never, "template_mismatch", "Parameter format does not match format in the created template", "A template parameter has the wrong format.";
    132015, 400, Never, "template_paused", "Template is paused due to low quality", "The template is paused because of low quality.";
    132016, 400, Never, "template_disabled", "Template is disabled due to low quality", "The template is permanently disabled.";
    132018, 400, Never, "template_mismatch", "There was an issue with the parameters in your template.", "A template parameter is not valid (for example it contains new lines or tabs).";
    132068, 400, Never, "flow_error", "Flow is blocked", "The flow is blocked.";
    132069, 400, RetryLater, "flow_error", "Flow is throttled", "The flow is throttled.";
    133000, 500, Never, "sender_number_unavailable", "Incomplete deregistration", "The sending number has an incomplete deregistration.";
    133004, 503, RetryLater, "network_error", "Server temporarily unavailable", "The network server is temporarily unavailable.";
    133005, 400, Never, "sender_number_unavailable", "Two step verification PIN mismatch", "The sending number's two-step verification PIN is wrong.";
    133006, 400, Never, "sender_number_unavailable", "Phone number re-verification needed", "The sending number needs to be verified again.";
    133008, 400, Never, "sender_number_unavailable", "Too many two step verification PIN guesses", "Too many PIN guesses for the sending number.";
    133009, 400, Never, "sender_number_unavailable", "Two step verification PIN guessed too fast", "PIN guessed too fast for the sending number.";
    133010, 400, Never, "sender_number_unavailable", "Phone number not registered", "The sending number is not registered on the network.";
    133015, 400, RetryLater, "network_error", "Please wait a few minutes before attempting to register this phone number", "The sending number was recently deleted; retry later.";
    133016, 400, RetryLater, "network_error", "Account register deregister rate limit exceeded", "Too many register/deregister attempts.";
    134011, 400, Never, "network_permission_denied", "WhatsApp Payments terms of service pending", "The business has not accepted the payments terms.";
    135000, 400, Never, "invalid_request", "Generic user error", "The network rejected the request as invalid.";
}

/// Look up a documented network error code.
pub fn code_info(code: i64) -> Option<&'static CodeInfo> {
    if let Some(info) = CODES.iter().find(|c| c.code == code) {
        return Some(info);
    }
    if (200..=299).contains(&code) {
        return Some(&PERMISSION_RANGE);
    }
    None
}

const PERMISSION_RANGE: CodeInfo = CodeInfo {
    code: 200,
    title: "Permission error",
    http_status: 403,
    retry: Never,
    failure_code: "network_permission_denied",
    explanation: "The business account lacks an API permission.",
};

/// Retry class from a network code and/or the HTTP status (see module docs).
pub fn retry_class(code: Option<i64>, http_status: u16) -> RetryClass {
    if let Some(info) = code.and_then(code_info) {
        return info.retry;
    }
    match http_status {
        429 => RetrySoon,
        500..=599 => RetryLater,
        // 2xx/3xx with an "error" should not happen; treat as network trouble.
        0..=399 => RetryLater,
        _ => Never,
    }
}

/// Tern failure code + explanation for a network code (sync or from a webhook).
pub fn failure_info(code: Option<i64>, http_status: Option<u16>) -> FailureInfo {
    if let Some(info) = code.and_then(code_info) {
        return FailureInfo {
            code: info.failure_code,
            explanation: info.explanation.to_owned(),
            retry: info.retry,
        };
    }
    let retry = retry_class(code, http_status.unwrap_or(400));
    let explanation = match (code, http_status) {
        (Some(c), _) => format!("The network reported error code {c}."),
        (None, Some(s)) => format!("The network answered with HTTP status {s}."),
        (None, None) => "The network reported an error.".to_owned(),
    };
    FailureInfo {
        code: FAILURE_NETWORK_ERROR,
        explanation,
        retry,
    }
}

/// Failure info for a send whose outcome is unknown.
pub fn outcome_unknown_failure() -> FailureInfo {
    FailureInfo {
        code: FAILURE_OUTCOME_UNKNOWN,
        explanation: "The connection to the network was lost before its answer arrived; \
                      the message may or may not have been sent."
            .to_owned(),
        retry: RetryClass::OutcomeUnknown,
    }
}

/// How many bytes of a non-Graph body are kept for diagnostics.
const RAW_BODY_KEEP: usize = 1024;

/// A synchronous error answered by the network (Graph error body + HTTP status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphError {
    pub http_status: u16,
    /// `error.code`; `None` when the body was not a Graph error.
    pub code: Option<i64>,
    pub subcode: Option<i64>,
    /// `error.type`, e.g. `OAuthException`.
    pub error_type: Option<String>,
    /// `error.message`, e.g. `(#131047) Re-engagement message`.
    pub message: String,
    /// `error.error_data.details`.
    pub details: Option<String>,
    pub fbtrace_id: Option<String>,
    pub user_title: Option<String>,
    pub user_msg: Option<String>,
    /// `error.href` (webhook-style errors only, kept if present).
    pub href: Option<String>,
    /// First bytes of the body when it was not a Graph error JSON (e.g. an HTML 502 page).
    pub raw_body: Option<String>,
}

impl GraphError {
    /// Parse any response. Never fails, never panics.
    pub fn from_response(http_status: u16, body: &[u8]) -> Self {
        let parsed = serde_json::from_slice::<Value>(body).ok();
        let err = parsed
            .as_ref()
            .and_then(|v| v.get("error"))
            .filter(|e| e.is_object());
        match err {
            Some(e) => {
                let s = |k: &str| e.get(k).and_then(value_as_string);
                let code = e.get("code").and_then(value_as_i64);
                let subcode = e.get("error_subcode").and_then(value_as_i64);
                let details = e.get("error_data").and_then(|d| match d {
                    // error_data is sometimes a JSON-encoded string
                    Value::String(s) => serde_json::from_str::<Value>(s)
                        .ok()
                        .and_then(|v| v.get("details").and_then(value_as_string))
                        .or_else(|| Some(s.clone())),
                    other => other.get("details").and_then(value_as_string),
                });
                Self {
                    http_status,
                    code,
                    subcode,
                    error_type: s("type"),
                    message: s("message").unwrap_or_default(),
                    details,
                    fbtrace_id: s("fbtrace_id"),
                    user_title: s("error_user_title"),
                    user_msg: s("error_user_msg"),
                    href: s("href"),
                    raw_body: None,
                }
            }
            None => Self {
                http_status,
                code: None,
                subcode: None,
                error_type: None,
                message: format!("HTTP {http_status} without a Graph error body"),
                details: None,
                fbtrace_id: None,
                user_title: None,
                user_msg: None,
                href: None,
                raw_body: Some(truncate_lossy(body, RAW_BODY_KEEP)),
            },
        }
    }

    pub fn retry_class(&self) -> RetryClass {
        retry_class(self.code, self.http_status)
    }

    pub fn failure(&self) -> FailureInfo {
        let mut info = failure_info(self.code, Some(self.http_status));
        if let Some(d) = self.details.as_deref().filter(|d| !d.is_empty()) {
            info.explanation = format!("{} ({d})", info.explanation);
        }
        info
    }

    /// True when the body was a real Graph error (as opposed to a proxy page etc.).
    pub fn is_graph_body(&self) -> bool {
        self.raw_body.is_none()
    }

    /// True when this error says a media id is unknown or expired, so uploading the file
    /// again (and using the new id) can succeed:
    /// * code 100 with subcode 33 — the answer to `GET|DELETE /{media-id}` for an id the
    ///   network does not know (never existed, deleted, or past its 30-day / 7-day life);
    /// * code 131053 whose details name the media id as not found / invalid / expired.
    ///
    /// Only meaningful for errors of calls that name a media id: a send to an unknown phone
    /// number id also answers 100 / 33 (the unknown object is then the number).
    pub fn is_unknown_media(&self) -> bool {
        match self.code {
            Some(100) => {
                self.subcode == Some(33)
                    || (self.subcode.is_none() && self.message.contains("does not exist"))
            }
            Some(131053) => {
                details_name_unknown_media_id(self.details.as_deref())
                    || details_name_unknown_media_id(Some(&self.message))
            }
            _ => false,
        }
    }
}

/// Whether a 131053 text names the media id as unknown/expired (as opposed to a bad MIME
/// type, a size limit or an unreachable link, where a re-upload of the same file won't help).
fn details_name_unknown_media_id(text: Option<&str>) -> bool {
    let Some(text) = text else { return false };
    let t = text.to_ascii_lowercase().replace(['_', '-'], " ");
    let names_id = t.contains("media id") || t.contains("mediaid");
    let unknown = [
        "not found",
        "unknown",
        "expired",
        "invalid",
        "does not exist",
        "doesn't exist",
        "no longer",
    ]
    .iter()
    .any(|w| t.contains(w));
    names_id && unknown
}

impl std::fmt::Display for GraphError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(c) => write!(
                f,
                "graph error {c} (HTTP {}): {}",
                self.http_status, self.message
            )?,
            None => write!(f, "HTTP {}: {}", self.http_status, self.message)?,
        }
        if let Some(d) = &self.details {
            write!(f, " ({d})")?;
        }
        Ok(())
    }
}

impl std::error::Error for GraphError {}

/// An error object as found in webhooks (`statuses[].errors[]`, `value.errors[]`,
/// `messages[].errors[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct WebhookError {
    pub code: Option<i64>,
    pub title: Option<String>,
    pub message: Option<String>,
    pub details: Option<String>,
    pub href: Option<String>,
}

impl WebhookError {
    /// Lenient extraction from a JSON value; non-objects give an all-`None` error.
    pub fn from_value(v: &Value) -> Self {
        Self {
            code: v.get("code").and_then(value_as_i64),
            title: v.get("title").and_then(value_as_string),
            message: v.get("message").and_then(value_as_string),
            details: v
                .get("error_data")
                .and_then(|d| d.get("details"))
                .and_then(value_as_string),
            href: v.get("href").and_then(value_as_string),
        }
    }

    /// True for a 131053 (typically a `failed` status after sending with a media id) whose
    /// details say the media id is unknown or expired; see [`GraphError::is_unknown_media`].
    pub fn is_unknown_media(&self) -> bool {
        self.code == Some(131053)
            && [&self.details, &self.message, &self.title]
                .into_iter()
                .any(|t| details_name_unknown_media_id(t.as_deref()))
    }

    pub fn failure(&self) -> FailureInfo {
        let mut info = failure_info(self.code, None);
        if let Some(d) = self.details.as_deref().filter(|d| !d.is_empty()) {
            info.explanation = format!("{} ({d})", info.explanation);
        }
        info
    }
}

/// Numbers may arrive as JSON numbers or numeric strings.
pub(crate) fn value_as_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Strings, or numbers rendered as strings (ids are sometimes numbers).
pub(crate) fn value_as_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn truncate_lossy(body: &[u8], max: usize) -> String {
    let cut = &body[..body.len().min(max)];
    String::from_utf8_lossy(cut).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_full_graph_error() {
        let body = br#"{"error":{"message":"(#131047) Re-engagement message","type":"OAuthException","code":131047,
          "error_data":{"messaging_product":"whatsapp","details":"Message failed to send because more than 24 hours have passed"},
          "error_subcode":2494055,"fbtrace_id":"Az8or2yhqkZfEZ-_4Qn_Bam","error_user_title":"T","error_user_msg":"M"}}"#;
        let e = GraphError::from_response(400, body);
        assert_eq!(e.code, Some(131047));
        assert_eq!(e.subcode, Some(2494055));
        assert_eq!(e.error_type.as_deref(), Some("OAuthException"));
        assert_eq!(e.message, "(#131047) Re-engagement message");
        assert!(
            e.details
                .as_deref()
                .unwrap_or("")
                .starts_with("Message failed")
        );
        assert_eq!(e.fbtrace_id.as_deref(), Some("Az8or2yhqkZfEZ-_4Qn_Bam"));
        assert_eq!(e.user_title.as_deref(), Some("T"));
        assert_eq!(e.user_msg.as_deref(), Some("M"));
        assert!(e.is_graph_body());
        assert_eq!(e.retry_class(), RetryClass::Never);
        assert_eq!(e.failure().code, "window_expired");
    }

    #[test]
    fn html_502_is_retry_later() {
        let e = GraphError::from_response(502, b"<html><body>Bad Gateway</body></html>");
        assert_eq!(e.code, None);
        assert!(!e.is_graph_body());
        assert!(e.raw_body.as_deref().unwrap_or("").contains("Bad Gateway"));
        assert_eq!(e.retry_class(), RetryClass::RetryLater);
        assert_eq!(e.failure().code, "network_error");
    }

    #[test]
    fn classes_from_table() {
        for (code, class) in [
            (130429, RetrySoon),
            (131056, RetrySoon),
            (4, RetrySoon),
            (80007, RetrySoon),
            (131000, RetryLater),
            (131016, RetryLater),
            (100, Never),
            (131026, Never),
            (131047, Never),
            (132000, Never),
            (132001, Never),
            (132012, Never),
            (132018, Never),
            (190, Never),
            (131051, Never),
            (131062, Never),
            (250, Never),
        ] {
            assert_eq!(retry_class(Some(code), 400), class, "code {code}");
        }
        // unknown codes fall back to the status
        assert_eq!(retry_class(Some(999_999), 400), Never);
        assert_eq!(retry_class(Some(999_999), 503), RetryLater);
        assert_eq!(retry_class(None, 429), RetrySoon);
        assert_eq!(retry_class(None, 404), Never);
    }

    #[test]
    fn failure_codes() {
        assert_eq!(
            failure_info(Some(131026), None).code,
            "recipient_not_on_whatsapp"
        );
        assert_eq!(
            failure_info(Some(130429), None).code,
            "network_rate_limited"
        );
        assert_eq!(failure_info(Some(132000), None).code, "template_mismatch");
        assert_eq!(failure_info(Some(132001), None).code, "template_not_found");
        let bsuid = failure_info(Some(131062), None);
        assert_eq!(bsuid.code, "phone_number_required");
        assert_eq!(bsuid.retry, RetryClass::Never);
        assert!(bsuid.explanation.contains("phone number"));
        assert_eq!(code_info(131062).map(|c| c.http_status), Some(400));
        let unknown = failure_info(Some(424_242), Some(400));
        assert_eq!(unknown.code, "network_error");
        assert!(unknown.explanation.contains("424242"));
        assert_eq!(outcome_unknown_failure().retry, RetryClass::OutcomeUnknown);
    }

    #[test]
    fn unknown_media_is_recognised() {
        let unknown_object = GraphError::from_response(
            400,
            br#"{"error":{"message":"Unsupported get request. Object with ID '123' does not exist, cannot be loaded due to missing permissions, or does not support this operation.","type":"GraphMethodException","code":100,"error_subcode":33,"fbtrace_id":"A"}}"#,
        );
        assert!(unknown_object.is_unknown_media());
        let bad_param = GraphError::from_response(
            400,
            br#"{"error":{"message":"(#100) Invalid parameter","type":"OAuthException","code":100}}"#,
        );
        assert!(!bad_param.is_unknown_media());
        let expired = GraphError::from_response(
            400,
            br#"{"error":{"message":"(#131053) Media upload error","code":131053,
              "error_data":{"details":"Media id 1234 was not found or has expired."}}}"#,
        );
        assert!(expired.is_unknown_media());
        let mime = GraphError::from_response(
            400,
            br#"{"error":{"message":"(#131053) Media upload error","code":131053,
              "error_data":{"details":"MIME type mismatch: the file is not image/png."}}}"#,
        );
        assert!(!mime.is_unknown_media());
        let link = GraphError::from_response(
            400,
            br#"{"error":{"message":"(#131053) Media upload error","code":131053,
              "error_data":{"details":"Downloading media from weblink failed with http code 404, status message Not Found"}}}"#,
        );
        assert!(!link.is_unknown_media());
        let other = GraphError::from_response(
            400,
            br#"{"error":{"code":131009,"error_data":{"details":"media_id is invalid"}}}"#,
        );
        assert!(!other.is_unknown_media());

        let w = WebhookError::from_value(&serde_json::json!({"code": 131053,
            "title": "Media upload error", "error_data": {"details": "Invalid media_id 99."}}));
        assert!(w.is_unknown_media());
        let w = WebhookError::from_value(&serde_json::json!({"code": 131053,
            "title": "Media upload error", "error_data": {"details": "Unsupported MIME type."}}));
        assert!(!w.is_unknown_media());
    }

    #[test]
    fn odd_bodies_do_not_panic() {
        for body in [
            &b""[..],
            b"null",
            b"{\"error\":\"x\"}",
            b"{\"error\":{\"code\":\"131026\",\"error_data\":\"{\\\"details\\\":\\\"d\\\"}\"}}",
            b"{\"error\":{\"code\":1.0e40}}",
            &[0xff, 0xfe, 0x00],
        ] {
            let _ = GraphError::from_response(400, body).failure();
        }
        let e = GraphError::from_response(
            400,
            b"{\"error\":{\"code\":\"131026\",\"error_data\":\"{\\\"details\\\":\\\"d\\\"}\"}}",
        );
        assert_eq!(e.code, Some(131026));
        assert_eq!(e.details.as_deref(), Some("d"));
    }
}
