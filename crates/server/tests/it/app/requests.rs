//! The request log (APP.md §4) over HTTP: what an accepted POST /messages, a refused one (400) and a 401 leave in
//! it, with no key value and no request body; the app's list, filters, search by request id
//! and detail page; another organisation's request; the retention; `TERN_REQUEST_LOG_DAYS=0`;
//! the dropped-entries counter in `/metrics`.

use super::{Browser, signed_in, text};
use crate::common::{Backend, TestApp, send};
use crate::messages::{CUSTOMER, PNID, customer_writes, idem, post, setup};
use serde_json::{Value, json};
use tern_core::testkit::assert_no_secret;
use tern_domain::auth::Preset;
use tern_domain::time::now_ms;
use tern_store::RequestLogRow;
use uuid::Uuid;

const API: &str = "/api/public/v1";
const AGENT: &str = "acme-integration/2.1 (+https://acme.test)";

fn request_id(h: &reqwest::header::HeaderMap) -> Uuid {
    h["x-request-id"].to_str().unwrap().parse().unwrap()
}

async fn entry(app: &TestApp, id: Uuid) -> Option<RequestLogRow> {
    app.db.get_request_log(id).await.unwrap()
}

/// The three requests of the log's tests: an accepted text, a refused one (no `text`
/// object), and a key that is not one. Their ids, the key, the accepted message's id and the
/// first request's Idempotency-Key.
struct Made {
    key: String,
    accepted: Uuid,
    refused: Uuid,
    refused_body: Value,
    unauthenticated: Uuid,
    message_id: String,
    idempotency_key: String,
}

/// A key that looks like one but is nobody's.
const NOBODYS_KEY: &str = "tern_0000000000000000000000000000000000000000";

async fn make_requests(app: &TestApp) -> Made {
    let c = setup(app).await;
    customer_writes(app, PNID, CUSTOMER, now_ms() - 60_000).await;
    let k = idem();
    let body = json!({"to": "+1 415-555-0123", "type": "text", "text": {"body": "Secret words of the body"}});
    let (s, h, m) = post(app, &c.key, Some(&k), &body).await;
    assert_eq!(s, 202, "{m}");
    let accepted = request_id(&h);
    let broken =
        json!({"to": "+1 415-555-0123", "type": "text", "note": "Private note of the body"});
    let (s, h, e) = post(app, &c.key, Some(&idem()), &broken).await;
    assert_eq!(s, 400, "{e}");
    let refused = request_id(&h);
    let (s, h, _) = send(
        app.http
            .get(app.url(&format!("{API}/phone-numbers")))
            .bearer_auth(NOBODYS_KEY)
            .header("user-agent", AGENT),
    )
    .await;
    assert_eq!(s, 401);
    let unauthenticated = request_id(&h);
    app.core.request_log.flush().await;
    Made {
        key: c.key,
        accepted,
        refused,
        refused_body: e,
        unauthenticated,
        message_id: m["id"].as_str().unwrap().to_string(),
        idempotency_key: k,
    }
}

async fn recorded_with_their_fields(app: &TestApp) {
    let r = make_requests(app).await;
    let org = Some(app.org_uuid());

    let ok = entry(app, r.accepted).await.expect("the accepted request");
    assert_eq!(ok.org_id, org);
    assert_eq!(
        (ok.method.as_str(), ok.path.as_str()),
        ("POST", "/messages")
    );
    assert_eq!(ok.route.as_deref(), Some("/messages"));
    assert_eq!(ok.status, 202);
    assert_eq!(
        (ok.error_code.as_deref(), ok.error_body.as_deref()),
        (None, None)
    );
    assert_eq!(ok.key_name.as_deref(), Some("test"));
    assert!(r.key.starts_with(ok.key_prefix.as_deref().unwrap()));
    assert!(ok.key_id.is_some());
    assert_eq!(
        ok.idempotency_key.as_deref(),
        Some(r.idempotency_key.as_str())
    );
    assert_eq!(
        ok.message_id.map(|m| m.to_string()),
        Some(r.message_id.clone())
    );
    assert_eq!(ok.address.as_deref(), Some("127.0.0.1"));
    assert!(ok.latency_ms >= 0);

    let bad = entry(app, r.refused).await.expect("the refused request");
    assert_eq!(bad.org_id, org);
    assert_eq!(bad.status, 400);
    assert_eq!(bad.error_code.as_deref(), Some("validation_failed"));
    let body: Value = serde_json::from_str(bad.error_body.as_deref().unwrap()).unwrap();
    assert_eq!(body, r.refused_body);
    assert_eq!(bad.key_id, ok.key_id);
    assert_eq!(bad.message_id, None);

    let anon = entry(app, r.unauthenticated).await.expect("the 401");
    assert_eq!(
        (anon.org_id, anon.key_id, anon.key_name.as_deref()),
        (None, None, None)
    );
    assert_eq!(anon.status, 401);
    assert_eq!(anon.error_code.as_deref(), Some("unauthenticated"));
    assert_eq!(anon.route.as_deref(), Some("/phone-numbers"));
    assert_eq!(anon.user_agent.as_deref(), Some(AGENT));

    // No key value, no request body.
    let secrets = [r.key.as_str(), NOBODYS_KEY, "Secret words", "Private note"];
    assert_no_secret(&[ok, bad, anon], &secrets);

    // The app: every member sees the organisation's requests; never the 401 without a key.
    let b = signed_in(app, &app.org_id, "log-dev@acme.test", "developer").await;
    let (s, h, page) = b.get_full("/app/requests").await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(h["cache-control"], "no-store");
    assert!(
        page.contains(&format!("/app/requests/{}", r.accepted)),
        "{page}"
    );
    assert!(page.contains(&format!("/app/requests/{}", r.refused)));
    assert!(!page.contains(&r.unauthenticated.to_string()));
    assert!(page.contains("validation_failed"));

    let (s, page) = b.get(&format!("/app/requests/{}", r.refused)).await;
    assert_eq!(s, 200, "{page}");
    assert!(page.contains("Error body"), "{page}");
    assert!(
        page.contains("&#34;code&#34;: &#34;validation_failed&#34;"),
        "{page}"
    );
    assert!(page.contains(&r.refused.to_string()));
    let (s, done) = b.get(&format!("/app/requests/{}", r.accepted)).await;
    assert_eq!(s, 200);
    assert!(
        done.contains(&format!("href=\"/app/messages/{}\"", r.message_id)),
        "{done}"
    );
    assert!(done.contains(&r.idempotency_key));
    for html in [&page, &done] {
        for secret in secrets {
            assert!(!html.contains(secret), "{secret} in a page");
        }
    }
    let (s, _) = b.get(&format!("/app/requests/{}", r.unauthenticated)).await;
    assert_eq!(s, 404);
    let (s, _) = b.get("/app/requests/not-an-id").await;
    assert_eq!(s, 404);
}

async fn found_by_request_id(app: &TestApp) {
    let r = make_requests(app).await;
    let b = signed_in(app, &app.org_id, "log-owner@acme.test", "owner").await;
    let id = r.refused.to_string();
    let (s, h, _) = b
        .get_full(&format!("/app/requests?request_id=+{}+", id.to_uppercase()))
        .await;
    assert_eq!(s, 303);
    assert_eq!(h["location"], format!("/app/requests/{id}"));
    // A typo says so; an id of nothing here says that.
    let (s, page) = b
        .get(&format!("/app/requests?request_id={}", &id[..id.len() - 1]))
        .await;
    assert_eq!(s, 200);
    assert!(page.contains("is not a request id"), "{page}");
    assert!(page.contains("aria-invalid=\"true\""));
    for unknown in [Uuid::now_v7(), r.unauthenticated] {
        let (s, page) = b.get(&format!("/app/requests?request_id={unknown}")).await;
        assert_eq!(s, 200);
        assert!(page.contains(&format!("No request {unknown}")), "{page}");
    }
}

/// The ids of the requests a page of the log links to.
fn listed(page: &str) -> Vec<String> {
    page.match_indices("href=\"/app/requests/")
        .map(|(i, m)| page[i + m.len()..i + m.len() + 36].to_string())
        .collect()
}

async fn filtered(app: &TestApp) {
    let r = make_requests(app).await;
    let b = signed_in(app, &app.org_id, "log-admin@acme.test", "admin").await;
    let (accepted, refused) = (r.accepted.to_string(), r.refused.to_string());
    let key_id = entry(app, r.accepted).await.unwrap().key_id.unwrap();
    let cases: Vec<(String, Vec<&str>)> = vec![
        ("status=4xx".into(), vec![&refused]),
        ("status=2xx".into(), vec![&accepted]),
        ("status=5xx".into(), vec![]),
        ("code=validation_failed".into(), vec![&refused]),
        ("route=POST+%2Fmessages".into(), vec![&refused, &accepted]),
        ("route=GET+%2Fphone-numbers".into(), vec![]),
        (format!("key={key_id}"), vec![&refused, &accepted]),
        (format!("key={}", Uuid::now_v7()), vec![]),
        ("from=2099-01-01T00:00".into(), vec![]),
        ("to=2099-01-01T00:00&status=2xx".into(), vec![&accepted]),
    ];
    for (query, want) in cases {
        let (s, page) = b.get(&format!("/app/requests?{query}")).await;
        assert_eq!(s, 200, "{query}: {page}");
        let got = listed(&page);
        let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, want, "{query}");
        if want.is_empty() {
            assert!(page.contains("No request matches these filters"), "{page}");
        }
    }
    // The selects offer the organisation's keys and the API's operations.
    let (_, page) = b.get("/app/requests").await;
    assert!(page.contains(&format!("value=\"{key_id}\"")));
    assert!(page.contains("value=\"POST /messages\""), "{page}");
}

async fn others_hidden(app: &TestApp) {
    let (_, key) = app.other_org("Globex", Preset::FullAccess).await;
    let (s, h, _) = app.get(&format!("{API}/phone-numbers"), Some(&key)).await;
    assert_eq!(s, 200);
    let theirs = request_id(&h);
    app.core.request_log.flush().await;
    assert!(entry(app, theirs).await.is_some());
    let b = signed_in(app, &app.org_id, "log-nosy@acme.test", "owner").await;
    let (s, _) = b.get(&format!("/app/requests/{theirs}")).await;
    assert_eq!(s, 404);
    let (s, page) = b.get("/app/requests").await;
    assert_eq!(s, 200);
    assert!(!page.contains(&theirs.to_string()));
    assert!(page.contains("No request yet"), "{page}");
    assert!(page.contains("href=\"/app/keys\""));
    let (_, page) = b.get(&format!("/app/requests?request_id={theirs}")).await;
    assert!(page.contains(&format!("No request {theirs}")));
}

async fn old_entries_are_pruned(app: &TestApp) {
    let (_, key) = app.owner_key("read_only").await;
    let (_, h, _) = app.get(&format!("{API}/phone-numbers"), Some(&key)).await;
    let recent = request_id(&h);
    app.core.request_log.flush().await;
    let mut old = entry(app, recent).await.unwrap();
    let at = now_ms() - 8 * 86_400_000;
    let mut id = *old.id.as_bytes();
    id[..6].copy_from_slice(&at.to_be_bytes()[2..]);
    old.id = Uuid::from_bytes(id);
    old.at = at;
    app.db.insert_request_log(&[old.clone()]).await.unwrap();
    let days = app.core.request_log.days();
    assert_eq!(days, 7);
    let n = tern_core::request_log::prune(&app.db, days, now_ms())
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(entry(app, old.id).await.is_none());
    assert!(entry(app, recent).await.is_some());
}

async fn the_dropped_counter_is_in_metrics(app: &TestApp) {
    let (s, _, text) = text(app.http.get(app.url("/metrics"))).await;
    assert_eq!(s, 200);
    assert!(
        text.lines()
            .any(|l| l.starts_with("tern_request_log_dropped_total ")),
        "{text}"
    );
}

tern_store::both_backends! { TestApp;
    requests_are_recorded_with_their_fields_and_shown => recorded_with_their_fields,
    a_request_is_found_by_its_id_and_a_typo_is_explained => found_by_request_id,
    filters_narrow_the_log => filtered,
    another_organisations_requests_are_not_shown => others_hidden,
    entries_past_the_retention_are_pruned => old_entries_are_pruned,
    dropped_entries_are_counted_in_metrics => the_dropped_counter_is_in_metrics,
}

/// `TERN_REQUEST_LOG_DAYS=0`: nothing is recorded and the page says the log is off.
async fn off_records_nothing(backend: Backend) {
    let app = TestApp::builder(backend)
        .configure(|c| c.request_log_days = 0)
        .start()
        .await;
    let (_, key) = app.owner_key("read_only").await;
    let (s, h, _) = app.get(&format!("{API}/phone-numbers"), Some(&key)).await;
    assert_eq!(s, 200);
    app.core.request_log.flush().await;
    assert!(entry(&app, request_id(&h)).await.is_none());
    let b: Browser = signed_in(&app, &app.org_id, "log-off@acme.test", "owner").await;
    let (s, page) = b.get("/app/requests").await;
    assert_eq!(s, 200);
    assert!(page.contains("The request log is off"), "{page}");
    app.stop().await;
}

mod own_app {
    use super::*;

    tern_store::both_backends! { Backend;
        the_log_can_be_turned_off => off_records_nothing,
    }
}
