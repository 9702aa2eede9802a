//! The OpenAPI 3.1 document. Operations come from the handlers' `#[utoipa::path]`
//! annotations (so the document cannot drift from the routes); this module adds what is
//! common to every operation: the security scheme, the error body, the standard error
//! responses and the `X-Request-Id` header — all derived from the error catalog.

mod refine;

use serde_json::{Value, json};
use utoipa::openapi::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

pub fn base() -> OpenApi {
    let mut doc = OpenApi::default();
    doc.info.title = "Tern public API".into();
    doc.info.version = "1".into();
    doc.info.description = Some(
        "Send WhatsApp messages of every type (media by an uploaded file's `media_id` or an https \
         `link` Tern imports), upload and import media (`POST /media`, 16 MiB, kept 30 days, \
         downloadable through a signed 5-minute link), follow each message from `accepted` \
         to `read` or `failed`, read conversations and what customers write (every message type's \
         `content`, edits and deletions included), and manage contacts — known by phone number, \
         business-scoped user id and username — and templates of one organisation. The organisation is derived from the API \
         key. Errors share one body: see /docs/errors. Event webhooks push what happens \
         (`message.status`, `message.received`, `message.updated`, `template.status`, \
         `contact.consent`), signed as Standard Webhooks say (`webhook-id`, \
         `webhook-timestamp`, `webhook-signature`), retried for about 27 hours, with a \
         delivery log, test sends and replays. Campaigns send one approved template to an \
         audience with per-recipient variables, exactly once per recipient, with progress and \
         a recipients list. Set the server variable `base_url` once in a generated client."
            .into(),
    );
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("tern_<40 characters>")
                .build(),
        ),
    );
    doc
}

/// Standard error responses of an operation: (status, description, codes that may occur).
fn standard_errors(
    method: &str,
    path: &str,
    has_path_params: bool,
) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("400", "The request is not valid (`validation_failed`)."),
        ("401", "No valid API key (`unauthenticated`)."),
        (
            "402",
            "The plan, subscription or balance stops the request.",
        ),
        ("403", "The key lacks the permission (`permission_denied`)."),
        ("429", "A quota or the burst limit is exceeded."),
        (
            "503",
            "The service cannot answer now; retry (`unavailable`).",
        ),
    ];
    // A send names a contact by id in its body; `/test/inbound` exists for test keys only.
    if has_path_params || (method == "post" && matches!(path, "/messages" | "/test/inbound")) {
        v.push(("404", "No such item in the organisation (`not_found`)."));
    }
    if matches!(method, "post" | "put" | "patch") {
        v.push(("409", "The current state refuses the request."));
        v.push(("413", "The body is too large (`request_too_large`)."));
    }
    // An unblock asks the network, which may refuse it.
    if method == "delete" && path == "/contacts/{contact_id}/block" {
        v.push(("409", "The current state refuses the request."));
    }
    v
}

/// The catalog's codes answered with `status`, for an error answer's description.
fn codes_of(status: &str) -> String {
    let codes: Vec<String> = tern_domain::ErrorCode::ALL
        .iter()
        .filter(|c| c.status().to_string() == status)
        .map(|c| format!("`{}`", c.as_str()))
        .collect();
    format!("Codes: {} (see /docs/errors).", codes.join(", "))
}

/// The quota headers of every answer to an authenticated request.
const RATE_HEADERS: [&str; 7] = [
    "RateLimit-Limit",
    "RateLimit-Remaining",
    "RateLimit-Reset",
    "RateLimit-Policy",
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
];

/// The server variable's default when no server address is known (`tern openapi`).
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080";

/// Serialises the generated document and adds the shared parts.
pub fn finish(doc: OpenApi) -> Value {
    finish_at(doc, DEFAULT_BASE_URL)
}

/// [`finish`], with `base_url` (the server's public URL) as the server variable's default.
pub fn finish_at(doc: OpenApi, base_url: &str) -> Value {
    let mut v = serde_json::to_value(&doc).unwrap_or_else(|_| json!({}));
    let components = &mut v["components"];
    components["schemas"]["Error"] = json!({
        "type": "object",
        "description": "The body of every error response.",
        "required": ["code", "message", "request_id", "details"],
        "properties": {
            "code": {"type": "string", "description": "Stable; switch on it."},
            "message": {"type": "string", "description": "For people; may change."},
            "request_id": {"type": "string", "description": "Equals the X-Request-Id header."},
            "details": {"type": "object"},
            "fix": {"type": "string"},
            "docs_url": {"type": "string", "format": "uri"}
        }
    });
    components["headers"]["RequestId"] = json!({
        "description": "Identifies the request; quote it when reporting a problem.",
        "required": true,
        "schema": {"type": "string"}
    });
    let int_header =
        |desc: &str| json!({"description": desc, "schema": {"type": "integer", "minimum": 0}});
    let h = &mut components["headers"];
    h["RateLimit-Limit"] = int_header("Quota of the window closest to running out.");
    h["RateLimit-Remaining"] = int_header("Requests left in that window.");
    h["RateLimit-Reset"] = int_header("Seconds until that window resets (not a timestamp).");
    h["RateLimit-Policy"] = json!({
        "description": "Every window as `name;q=<quota>;w=<seconds>`, e.g. `key-minute;q=600;w=60, key-day;q=200000;w=86400, tenant-minute;q=1200;w=60, tenant-day;q=400000;w=86400`.",
        "schema": {"type": "string"}
    });
    h["X-RateLimit-Limit"] = int_header("Same as RateLimit-Limit.");
    h["X-RateLimit-Remaining"] = int_header("Same as RateLimit-Remaining.");
    h["X-RateLimit-Reset"] = int_header("Same as RateLimit-Reset.");
    h["Retry-After"] = int_header("Seconds to wait before retrying.");
    // Inlined in each answer: a `$ref` cannot carry the answer's own `required`.
    let rate_headers: Vec<(&str, Value)> = RATE_HEADERS
        .iter()
        .map(|n| (*n, components["headers"][*n].clone()))
        .collect();
    if let Some(paths) = v["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            let has_params = path.contains('{');
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (method, op) in item.iter_mut() {
                let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                    continue;
                };
                for (status, desc) in standard_errors(method, path, has_params) {
                    responses.entry(status).or_insert_with(|| {
                        json!({
                            "description": format!("{desc} {}", codes_of(status)),
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
                        })
                    });
                }
                let authenticated = op.get("security").is_some();
                let Some(responses) = op.get_mut("responses").and_then(Value::as_object_mut) else {
                    continue;
                };
                for (status, resp) in responses.iter_mut() {
                    resp["headers"]["X-Request-Id"] =
                        json!({"$ref": "#/components/headers/RequestId"});
                    if status == "429" || status == "503" {
                        resp["headers"]["Retry-After"] =
                            json!({"$ref": "#/components/headers/Retry-After"});
                    }
                    // Every answer to an authenticated request reports the quotas, except a
                    // 401 (no key) and the burst limiter's 429; errors raised before the key
                    // was checked (a malformed path) carry none either, so only 2xx require them.
                    if !authenticated || status == "401" {
                        continue;
                    }
                    for (name, def) in &rate_headers {
                        let mut def = def.clone();
                        def["required"] = json!(status.starts_with('2'));
                        resp["headers"][*name] = def;
                    }
                }
            }
        }
    }
    refine::refine(&mut v, base_url);
    v
}

#[cfg(test)]
mod tests;
