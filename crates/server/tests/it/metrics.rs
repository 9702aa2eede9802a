//! `/metrics` as a client cannot shape it: labels come from fixed sets (DESIGN
//! "Hardening"), and a Redis outage shows as counts and a gauge, not as one log line per
//! request.

use crate::common::{Backend, TestApp, send};
use reqwest::Method;

async fn scrape(app: &TestApp) -> String {
    let res = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    res.text().await.unwrap()
}

/// The series (sample lines) of the HTTP metrics whose method label is `other`.
fn other_method_series(text: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with("tern_http_") && l.contains("method=\"other\""))
        .count()
}

/// The value of the sample line `name` (with its labels, exactly), if present.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Requests with made-up methods to a known route, an unknown path, an unknown path of the
/// public API and a route of the public API, with and without a key.
async fn made_up_requests(app: &TestApp, tag: &str, key: &str, n: usize) {
    for i in 0..n {
        let method = Method::from_bytes(format!("INVENTED{tag}{i}").as_bytes()).unwrap();
        let paths = [
            "/healthz".to_string(),
            format!("/nowhere-{tag}-{i}"),
            format!("/api/public/v1/nowhere-{tag}-{i}"),
            format!("/api/elsewhere-{tag}-{i}"),
            "/api/public/v1/phone-numbers".to_string(),
        ];
        for path in paths {
            let (s, _, _) = send(app.http.request(method.clone(), app.url(&path))).await;
            assert!((400..500).contains(&s), "{method} {path}: {s}");
            let (s, _, _) = send(app.http.get(app.url(&path)).bearer_auth(key)).await;
            assert!(s < 500, "GET {path}: {s}");
        }
    }
}

async fn labels_are_fixed(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    let tag = uuid::Uuid::new_v4().simple().to_string().to_uppercase();
    made_up_requests(app, &tag, &key, 3).await;
    let before = scrape(app).await;
    made_up_requests(app, &tag, &key, 10).await;
    let after = scrape(app).await;
    for text in [&before, &after] {
        let low = tag.to_lowercase();
        let leaked = text.lines().find(|l| l.contains(&tag) || l.contains(&low));
        assert!(
            leaked.is_none(),
            "a client's method or path became a label: {leaked:?}"
        );
    }
    assert!(after.contains("route=\"unmatched\""), "{after}");
    assert!(
        after.contains("route=\"/api/public/v1/phone-numbers\""),
        "{after}"
    );
    assert!(after.contains("route=\"/healthz\""), "{after}");
    // Ten more made-up methods and paths made no new series.
    let series = other_method_series(&after);
    assert!(series > 0, "{after}");
    assert_eq!(series, other_method_series(&before));
}

tern_store::both_backends! { TestApp;
    metrics_labels_come_from_fixed_sets => labels_are_fixed,
}

/// Redis out of reach (a closed local port): every request is answered, counted locally
/// and in `/metrics`, and the outage is counted once as an outage.
async fn redis_outage_is_counted(backend: Backend) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("redis://127.0.0.1:{port}");
    let app = TestApp::builder(backend)
        .configure(move |c| c.redis_url = Some(url))
        .start()
        .await;
    let (_, key) = app.owner_key("full_access").await;
    let fallback = |t: &str| sample(t, "tern_rate_limit_redis_fallback_total").unwrap_or(0.0);
    let before = scrape(&app).await;
    for _ in 0..50 {
        let (s, _, b) = send(
            app.http
                .get(app.url("/api/public/v1/phone-numbers"))
                .bearer_auth(&key),
        )
        .await;
        assert_eq!(s, 200, "{b}");
    }
    let after = scrape(&app).await;
    // Other tests of this process may fall back too: at least ours were counted.
    assert!(fallback(&after) - fallback(&before) >= 50.0, "{after}");
    let outages = sample(&after, "tern_rate_limit_redis_outages_total");
    assert!(outages.is_some_and(|n| n >= 1.0), "{after}");
    assert!(
        sample(&after, "tern_rate_limit_redis_reachable").is_some(),
        "{after}"
    );
    app.stop().await;
}

/// Tests that start their own app.
mod own_app {
    use super::*;

    tern_store::both_backends! { Backend;
        redis_outage_is_counted,
    }
}
