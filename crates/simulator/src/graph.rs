//! Graph-shaped error answers (sync) and webhook error objects (async).
//!
//! Titles and HTTP statuses come from `tern_cloudapi::code_info`, so the adapter and the
//! simulator cannot disagree about a code.

use axum::{
    Json,
    http::StatusCode,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};
use tern_cloudapi::code_info;

/// Generic link carried by every webhook error.
pub const ERROR_HREF: &str = "/documentation/business-messaging/whatsapp/support/error-codes";

/// A synchronous Graph error to answer with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphErr {
    pub http_status: u16,
    pub code: i64,
    pub subcode: Option<i64>,
    pub error_type: &'static str,
    pub message: String,
    pub details: Option<String>,
}

impl GraphErr {
    /// Error with the code's documented title and HTTP status.
    pub fn new(code: i64) -> Self {
        let (title, status) = code_info(code)
            .map(|i| (i.title, i.http_status))
            .unwrap_or(("Unknown error", 400));
        Self {
            http_status: status,
            code,
            subcode: None,
            error_type: "OAuthException",
            message: format!("(#{code}) {title}"),
            details: None,
        }
    }

    pub fn details(mut self, d: impl Into<String>) -> Self {
        self.details = Some(d.into());
        self
    }

    pub fn status(mut self, s: u16) -> Self {
        self.http_status = s;
        self
    }

    /// 400 code 104: no token.
    pub fn missing_token() -> Self {
        let mut e = Self::new(104);
        e.message = "An access token is required to request this resource.".into();
        e
    }

    /// 401 code 190: unknown / expired token.
    pub fn bad_token() -> Self {
        let mut e = Self::new(190);
        e.message = "Invalid OAuth access token - Cannot parse access token".into();
        e
    }

    /// 400 code 100 subcode 33: unknown object (or no permission on it).
    pub fn unknown_object(id: &str, method: &str) -> Self {
        Self {
            http_status: 400,
            code: 100,
            subcode: Some(33),
            error_type: "GraphMethodException",
            message: format!(
                "Unsupported {method} request. Object with ID '{id}' does not exist, cannot be \
                 loaded due to missing permissions, or does not support this operation."
            ),
            details: None,
        }
    }

    /// 400 code 100 with a parameter message.
    pub fn invalid_param(msg: impl Into<String>) -> Self {
        let mut e = Self::new(100);
        e.message = format!("(#100) {}", msg.into());
        e
    }

    /// 131008 with details.
    pub fn missing(param: &str) -> Self {
        Self::new(131008).details(format!("The parameter {param} is required."))
    }

    /// 131009 with details.
    pub fn bad_value(details: impl Into<String>) -> Self {
        Self::new(131009).details(details)
    }

    pub fn body(&self, fbtrace_id: &str) -> Value {
        let mut err = json!({
            "message": self.message,
            "type": self.error_type,
            "code": self.code,
            "fbtrace_id": fbtrace_id,
        });
        if let Some(sub) = self.subcode {
            err["error_subcode"] = json!(sub);
        }
        if let Some(d) = &self.details {
            err["error_data"] = json!({"messaging_product": "whatsapp", "details": d});
        }
        json!({ "error": err })
    }

    pub fn into_response_with(self, fbtrace_id: &str) -> Response {
        let status = StatusCode::from_u16(self.http_status).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(self.body(fbtrace_id))).into_response()
    }
}

/// Async error object for `statuses[].errors[]` / `value.errors[]` / `messages[].errors[]`.
pub fn webhook_error(code: i64, details: Option<&str>) -> Value {
    let title = code_info(code).map(|i| i.title).unwrap_or("Unknown error");
    let default_details = code_info(code).map(|i| i.explanation).unwrap_or(title);
    json!({
        "code": code,
        "title": title,
        "message": title,
        "error_data": {"details": details.unwrap_or(default_details)},
        "href": ERROR_HREF,
    })
}
