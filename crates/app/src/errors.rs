//! Every refusal of the app, as a page in the app's style.
//!
//! A handler returns [`AppError`]; its response is a bare status with the error left in the
//! extensions, and [`finish`] (run by the outer frame middleware, which knows the request
//! id) renders the page. Errors the framework makes itself (unknown method, a body over the
//! limit, a refused form) arrive bare and are rendered the same way, so no answer under
//! `/app` is ever a plain-text framework message.

use askama::Template;
use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use std::sync::Arc;
use tern_domain::{ErrorCode, Problem};

/// Why a request under `/app` was refused. The words shown for each are fixed here; a
/// cause given to [`AppError::Internal`] is logged with the request id, never shown.
#[derive(Debug, Clone)]
pub enum AppError {
    /// `400`: the request cannot be understood; the text is shown (keep it plain and free
    /// of internals).
    BadRequest(String),
    /// `403`: the person may not do this.
    Forbidden,
    /// `403` with the words that say why (e.g. no organisation left).
    Refused(String),
    /// `403`: the CSRF check failed (token missing or wrong, or another origin).
    CsrfRefused,
    /// `404`, also for things of another organisation.
    NotFound,
    /// `405`.
    MethodNotAllowed,
    /// `413`: a form body over [`crate::FORM_BODY_LIMIT`].
    PayloadTooLarge,
    /// `429`, with the seconds to wait.
    TooManyRequests { retry_after: u64 },
    /// `500`: the cause is logged, the page shows only the request id.
    Internal(String),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AppError::Forbidden | AppError::Refused(_) | AppError::CsrfRefused => {
                StatusCode::FORBIDDEN
            }
            AppError::NotFound => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AppError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::TooManyRequests { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The app's error for a bare framework answer of `status`.
    fn from_status(status: StatusCode) -> AppError {
        match status.as_u16() {
            403 => AppError::Forbidden,
            404 => AppError::NotFound,
            405 => AppError::MethodNotAllowed,
            413 => AppError::PayloadTooLarge,
            429 => AppError::TooManyRequests { retry_after: 60 },
            s if s >= 500 => AppError::Internal(format!("bare {s} answer")),
            // A form the extractor refused (wrong content type, a field of the wrong type):
            // the person did not craft it, the page they came from is out of date.
            _ => AppError::BadRequest(
                "The form could not be read. Go back, reload the page and try again.".into(),
            ),
        }
    }
}

/// A core refusal met by a page handler that has no better place for it (a form shows its
/// own errors next to the fields instead).
impl From<Problem> for AppError {
    fn from(p: Problem) -> AppError {
        match p.code {
            ErrorCode::NotFound => AppError::NotFound,
            ErrorCode::PermissionDenied | ErrorCode::Unauthenticated => AppError::Forbidden,
            ErrorCode::RateLimited => AppError::TooManyRequests {
                retry_after: p.retry_after.unwrap_or(60),
            },
            _ if p.status() >= 500 => AppError::Internal(p.to_string()),
            _ => AppError::BadRequest(p.message),
        }
    }
}

impl From<askama::Error> for AppError {
    fn from(e: askama::Error) -> AppError {
        AppError::Internal(format!("template: {e}"))
    }
}

/// The error left in a response's extensions for [`finish`] to render.
#[derive(Clone)]
struct PendingError(Arc<AppError>);

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let mut res = self.status().into_response();
        if let AppError::TooManyRequests { retry_after } = &self {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        res.extensions_mut().insert(PendingError(Arc::new(self)));
        res
    }
}

/// Renders a pending [`AppError`], or turns a bare framework error (status 400 or more, not
/// already HTML or JSON) into its page; other answers pass unchanged.
pub(crate) fn finish(res: Response, request_id: &str) -> Response {
    let err = match res.extensions().get::<PendingError>() {
        Some(p) => (*p.0).clone(),
        None if res.status().as_u16() >= 400 && !is_rendered(&res) => {
            AppError::from_status(res.status())
        }
        None => return res,
    };
    if let AppError::Internal(cause) = &err {
        tracing::error!(request_id, cause = %cause, "app request failed");
    }
    let status = err.status();
    let html = error_page(&err, request_id);
    let (mut parts, _) = res.into_parts();
    parts.status = status;
    parts.extensions.remove::<PendingError>();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    if let AppError::TooManyRequests { retry_after } = &err {
        parts
            .headers
            .insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
    }
    Response::from_parts(parts, Body::from(html))
}

/// Whether the answer already has its final body (a page, or the flat JSON of a refused
/// API key).
fn is_rendered(res: &Response) -> bool {
    res.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html") || v.starts_with("application/json"))
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
    /// Shown for a `500` only: what the person can give the operator.
    request_id: Option<&'a str>,
}

/// The page for `err`. Never fails: a template error falls back to a fixed text.
fn error_page(err: &AppError, request_id: &str) -> String {
    let (title, message): (&str, &str) = match err {
        AppError::BadRequest(m) => ("The request could not be read", m),
        AppError::Forbidden => (
            "You cannot open this page",
            "Your role in this organisation does not allow it. Ask an owner or an admin if you need it.",
        ),
        AppError::Refused(m) => ("You cannot open this page", m),
        AppError::CsrfRefused => (
            "This form can no longer be sent",
            "This form expired or came from another site. Reload the page and try again.",
        ),
        AppError::NotFound => (
            "Page not found",
            "There is no page at this address. Check the link, or start again from the app's home.",
        ),
        AppError::MethodNotAllowed => (
            "This address does not take that request",
            "Use the links and buttons of the app's pages rather than a typed or saved request.",
        ),
        AppError::PayloadTooLarge => (
            "The form is too large",
            "Tern accepts forms of up to 64 KiB. Shorten what you typed and try again.",
        ),
        AppError::TooManyRequests { .. } => (
            "Too many attempts",
            "Too many requests came from your address. Wait a minute, then try again.",
        ),
        AppError::Internal(_) => (
            "Something went wrong",
            "Tern could not complete this request. Try again in a moment. If it keeps happening, give your operator the request id below.",
        ),
    };
    let page = ErrorPage {
        title,
        message,
        request_id: matches!(err, AppError::Internal(_)).then_some(request_id),
    };
    page.render().unwrap_or_else(|e| {
        tracing::error!(request_id, error = %e, "error page template failed");
        "<!doctype html><title>Error</title><p>Something went wrong.</p>".to_string()
    })
}

/// The app's fallback: no page at this address.
pub async fn not_found() -> AppError {
    AppError::NotFound
}

/// The panic catcher's answer: the `500` page (rendered by [`finish`] with the request id);
/// the process keeps serving.
pub fn panic_page(err: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = err
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_else(|| "unknown".into());
    AppError::Internal(format!("handler panicked: {detail}")).into_response()
}

/// A page handler's answer: the rendered template, or the error page.
pub fn render(t: &impl Template) -> Result<Html<String>, AppError> {
    Ok(Html(t.render()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_pages_show_the_request_id_and_nothing_else() {
        let html = error_page(&AppError::Internal("db password=hunter2".into()), "req-123");
        assert!(html.contains("req-123"));
        assert!(!html.contains("hunter2"));
        let html = error_page(&AppError::NotFound, "req-456");
        assert!(!html.contains("req-456"));
        assert!(html.contains("href=\"/app\""));
    }

    #[test]
    fn a_panic_is_the_500_page_without_its_message() {
        let res = finish(panic_page(Box::new("secret=boom")), "req-789");
        assert_eq!(res.status(), 500);
        assert!(res.extensions().get::<PendingError>().is_none());
    }

    #[test]
    fn bare_framework_errors_become_pages() {
        let res = finish(StatusCode::PAYLOAD_TOO_LARGE.into_response(), "r");
        assert_eq!(res.status(), 413);
        assert_eq!(
            res.headers()[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        let ok = finish(StatusCode::OK.into_response(), "r");
        assert_eq!(ok.status(), 200);
    }
}
