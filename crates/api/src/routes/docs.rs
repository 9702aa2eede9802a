//! Human documentation served by Tern itself: one page per error code (the `docs_url` of
//! every error) and the interactive API reference (Swagger UI, bundled, works offline).

use crate::state::AppState;
use axum::Router;
use axum::extract::Path;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use tern_domain::error::{CATALOG, CatalogEntry, ConflictReason};
use tern_domain::{ErrorCode, Problem};
use utoipa_swagger_ui::{Config, SwaggerUi};

pub fn router() -> Router<AppState> {
    let swagger: Router<AppState> = SwaggerUi::new("/docs/api")
        .config(Config::new([format!(
            "{}/openapi.json",
            crate::PUBLIC_PREFIX
        )]))
        .into();
    Router::new()
        .route("/docs/errors", get(index))
        .route("/docs/errors/{code}", get(page))
        .merge(swagger)
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;line-height:1.5}code{background:#f3f3f3;padding:0 .2em}table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left}";

fn esc(s: &str) -> String {
    html_escape::encode_text(s).into_owned()
}

async fn index() -> Html<String> {
    let rows: String = CATALOG
        .iter()
        .map(|e| {
            let code = e.code.as_str();
            format!(
                "<tr><td><a href=\"/docs/errors/{code}\"><code>{code}</code></a></td><td>{}</td><td>{}</td></tr>",
                e.status,
                esc(e.title)
            )
        })
        .collect();
    Html(format!(
        "<!doctype html><html><head><meta charset=utf-8><title>Tern API errors</title><style>{STYLE}</style></head><body><h1>Errors</h1><p>Every error response has the body <code>{{code, message, request_id, details, fix, docs_url}}</code>. Switch on <code>code</code>; <code>message</code> may change. The <a href=\"/docs/api\">API reference</a> lists which codes each endpoint returns.</p><table><tr><th>code</th><th>status</th><th>meaning</th></tr>{rows}</table></body></html>"
    ))
}

async fn page(Path(code): Path<String>) -> Response {
    match ErrorCode::parse(&code) {
        Some(c) => Html(render_page(c.entry())).into_response(),
        None => crate::error::ApiError(Problem::not_found()).into_response(),
    }
}

fn render_page(e: &CatalogEntry) -> String {
    let code = e.code.as_str();
    let details = if e.details.is_empty() {
        "<p>This code carries no <code>details</code> keys.</p>".to_string()
    } else {
        let items: String = e
            .details
            .iter()
            .map(|d| format!("<li><code>{d}</code></li>"))
            .collect();
        format!("<p><code>details</code> may carry:</p><ul>{items}</ul>")
    };
    let reasons = if e.code == ErrorCode::Conflict {
        let rows: String = ConflictReason::ALL
            .iter()
            .map(|r| {
                format!(
                    "<tr><td><code>{}</code></td><td>{}</td></tr>",
                    r.as_str(),
                    esc(r.description())
                )
            })
            .collect();
        format!(
            "<h2>Reasons</h2><table><tr><th><code>details.reason</code></th><th>meaning</th></tr>{rows}</table>"
        )
    } else {
        String::new()
    };
    format!(
        "<!doctype html><html><head><meta charset=utf-8><title>{code} — Tern API errors</title><style>{STYLE}</style></head><body><p><a href=\"/docs/errors\">All errors</a></p><h1><code>{code}</code></h1><p>HTTP status <b>{}</b> — {}</p><h2>What happened</h2><p>{}</p><h2>How to fix it</h2><p>{}</p><h2>Details</h2>{details}{reasons}</body></html>",
        e.status,
        esc(e.title),
        esc(e.description),
        esc(e.fix)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_page() {
        for e in CATALOG.iter() {
            let html = render_page(e);
            assert!(html.contains(e.code.as_str()));
            assert!(html.contains(&e.status.to_string()));
        }
        let conflict = render_page(ErrorCode::Conflict.entry());
        for r in ConflictReason::ALL {
            assert!(conflict.contains(r.as_str()), "{}", r.as_str());
        }
    }
}
