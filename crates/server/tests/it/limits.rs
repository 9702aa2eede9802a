//! Request quotas, RateLimit headers, the burst limiter and the `api_requests` allowance,
//! over HTTP on both backends, and with the counters in the real Redis (shared by two
//! instances on one database; a Redis out of reach falls back to local counting).

use crate::common::{Backend, TestApp, assert_error, send};
use reqwest::header::HeaderMap;
use serde_json::Value;
use std::time::Duration;
use tern_domain::auth::Preset;

const API: &str = "/api/public/v1";

fn num(h: &HeaderMap, name: &str) -> Option<u64> {
    h.get(name)?.to_str().ok()?.parse().ok()
}

async fn get(app: &TestApp, base: &str, key: &str) -> (u16, HeaderMap, Value) {
    send(
        app.http
            .get(format!("{base}{API}/phone-numbers"))
            .bearer_auth(key),
    )
    .await
}

async fn set_limits(app: &TestApp, org: &str, pairs: &[&str]) {
    let mut args = vec!["org", "update", "--org", org];
    for p in pairs {
        args.extend(["--rate-limit", p]);
    }
    app.admin(&args).await.unwrap();
}

/// The organisation's `api_requests` count in its current billing period.
async fn api_requests_used(app: &TestApp, org: uuid::Uuid) -> i64 {
    let start = app
        .db
        .get_org(org)
        .await
        .unwrap()
        .unwrap()
        .billing_period_start;
    let (period, _) = tern_domain::plan::billing_period(start, tern_domain::time::now_ms());
    app.db
        .usage_in_period(org, "api_requests", period)
        .await
        .unwrap()
}

/// Waits (at most 5 s) until the count is `n`: counts without a wait and chunks given back
/// are written behind the answers.
async fn api_requests_reach(app: &TestApp, org: uuid::Uuid, n: i64) {
    crate::common::eventually_within(Duration::from_secs(5), "api_requests count", || async {
        (api_requests_used(app, org).await == n).then_some(())
    })
    .await;
}

/// Waits for a fresh minute when less than `need` seconds are left in this one, so a test's
/// requests all fall in one window.
async fn fresh_minute(need: u64) {
    let ms = tern_domain::time::now_ms();
    let left = tern_domain::quota::reset_ms(ms, tern_domain::plan::RateWindow::KeyMinute);
    if (left as u64) < need * 1000 {
        tokio::time::sleep(Duration::from_millis(left as u64 + 50)).await;
    }
}

/// Every admitted answer counts down by exactly one; the next request gets the 429 of the
/// key's window with the headers at 0 and Retry-After = the window's reset.
async fn key_quota_counts_exactly(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    set_limits(app, &app.org_id, &["key-minute=5"]).await;
    fresh_minute(20).await;
    for left in (0..5).rev() {
        let (s, h, b) = get(app, &app.base, &key).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(num(&h, "ratelimit-limit"), Some(5));
        assert_eq!(num(&h, "ratelimit-remaining"), Some(left));
        assert_eq!(num(&h, "x-ratelimit-remaining"), Some(left));
        assert_eq!(num(&h, "x-ratelimit-limit"), Some(5));
        let reset = num(&h, "ratelimit-reset").unwrap();
        assert!((1..=60).contains(&reset), "{reset}");
        assert_eq!(num(&h, "x-ratelimit-reset"), Some(reset));
        let policy = h["ratelimit-policy"].to_str().unwrap();
        assert!(
            policy.starts_with("key-minute;q=5;w=60, key-day;q="),
            "{policy}"
        );
        assert!(policy.contains("tenant-minute;q=") && policy.contains("tenant-day;q="));
        assert!(policy.contains(";w=86400"));
    }
    let (s, h, e) = get(app, &app.base, &key).await;
    assert_error(s, &h, &e, 429, "quota_exceeded");
    assert_eq!(e["details"]["scope"], "key");
    assert_eq!(e["details"]["window"], "key-minute");
    let retry = num(&h, "retry-after").unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(num(&h, "ratelimit-remaining"), Some(0));
    assert_eq!(num(&h, "ratelimit-reset"), Some(retry));
    // A refused request was not counted: the organisation's day window saw 5.
    let (_, other) = app.owner_key("full_access").await;
    let (s, h, _) = get(app, &app.base, &other).await;
    assert_eq!(s, 200);
    assert_eq!(
        num(&h, "ratelimit-remaining"),
        Some(4),
        "a fresh key's own minute"
    );
    // No key, no headers.
    let (s, h, _) = send(app.http.get(app.url(&format!("{API}/phone-numbers")))).await;
    assert_eq!(s, 401);
    assert!(h.get("ratelimit-limit").is_none());
}

/// The organisation is the ceiling for all its keys: `scope = tenant`.
async fn tenant_quota_is_shared_by_keys(app: &TestApp) {
    let (_, a) = app.owner_key("full_access").await;
    let (_, b) = app.owner_key("full_access").await;
    set_limits(app, &app.org_id, &["tenant-minute=3", "key-minute=100"]).await;
    fresh_minute(20).await;
    let (s, h, _) = get(app, &app.base, &a).await;
    assert_eq!((s, num(&h, "ratelimit-remaining")), (200, Some(2)));
    let (s, h, _) = get(app, &app.base, &b).await;
    assert_eq!((s, num(&h, "ratelimit-remaining")), (200, Some(1)));
    assert_eq!(num(&h, "ratelimit-limit"), Some(3));
    let (s, _, _) = get(app, &app.base, &a).await;
    assert_eq!(s, 200);
    let (s, h, e) = get(app, &app.base, &b).await;
    assert_error(s, &h, &e, 429, "quota_exceeded");
    assert_eq!(e["details"]["scope"], "tenant");
    // Another organisation is not affected.
    let (_, k) = app.other_org("Other", Preset::FullAccess).await;
    let (s, _, _) = get(app, &app.base, &k).await;
    assert_eq!(s, 200);
}

/// An upload weighs 5; refused requests that are authenticated count too (a 403 carries
/// the headers), a 429 does not.
async fn uploads_weigh_five(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    set_limits(app, &app.org_id, &["key-minute=7"]).await;
    fresh_minute(20).await;
    let form = reqwest::multipart::Form::new().text("nothing", "here");
    let (s, h, _) = send(
        app.http
            .post(app.url(&format!("{API}/media")))
            .bearer_auth(&key)
            .multipart(form),
    )
    .await;
    assert_eq!(s, 400, "a bad upload is still an authenticated request");
    assert_eq!(num(&h, "ratelimit-remaining"), Some(2));
    let form = reqwest::multipart::Form::new().text("nothing", "here");
    let (s, h, e) = send(
        app.http
            .post(app.url(&format!("{API}/media")))
            .bearer_auth(&key)
            .multipart(form),
    )
    .await;
    assert_error(s, &h, &e, 429, "quota_exceeded");
    // Weight 1 still fits twice.
    let (s, h, _) = get(app, &app.base, &key).await;
    assert_eq!((s, num(&h, "ratelimit-remaining")), (200, Some(1)));
    let (_, reader) = app
        .key_for(
            &app.org_id,
            &app.developer_id,
            &["--permissions", "contacts.read"],
        )
        .await;
    let (s, h, e) = get(app, &app.base, &reader).await;
    assert_error(s, &h, &e, 403, "permission_denied");
    assert_eq!(num(&h, "ratelimit-limit"), Some(7));
    assert_eq!(num(&h, "ratelimit-remaining"), Some(6));
}

/// `--rate-limit burst=N`: GCRA per key; the 429 says `rate_limited`, `Retry-After: 1`,
/// and carries no RateLimit headers.
async fn burst_limiter(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    set_limits(app, &app.org_id, &["burst=2"]).await;
    let mut refused = None;
    // Requests in a tight loop: at most 2 in a burst pass, then one per 500 ms.
    for _ in 0..10 {
        let (s, h, e) = get(app, &app.base, &key).await;
        if s == 429 {
            refused = Some((s, h, e));
            break;
        }
    }
    let (s, h, e) = refused.expect("a burst beyond 2 per second is refused");
    assert_error(s, &h, &e, 429, "rate_limited");
    assert_eq!(num(&h, "retry-after"), Some(1));
    assert!(h.get("ratelimit-limit").is_none() && h.get("ratelimit-policy").is_none());
    assert!(h.get("x-ratelimit-remaining").is_none());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let (s, _, _) = get(app, &app.base, &key).await;
    assert_eq!(s, 200, "room again after a pause");
}

/// The `api_requests` allowance: exactly N requests in the period, then 402, and
/// `tern admin org show` prints the usage.
async fn api_requests_allowance(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--allowance",
        "api_requests=4",
    ])
    .await
    .unwrap();
    let results = futures::future::join_all((0..10).map(|_| get(app, &app.base, &key))).await;
    let ok = results.iter().filter(|r| r.0 == 200).count();
    assert_eq!(ok, 4, "exactly the allowance");
    let (s, h, e) = results.into_iter().find(|r| r.0 != 200).unwrap();
    assert_error(s, &h, &e, 402, "usage_limit_reached");
    assert_eq!(e["details"]["meter"], "api_requests");
    assert_eq!(e["details"]["allowance"], 4);
    assert_eq!(e["details"]["used"], 4);
    assert!(e["details"]["period_end"].is_string());
    // The quota headers are there too (the quota counted the request).
    assert!(num(&h, "ratelimit-remaining").is_some());
    let show = app
        .admin(&["org", "show", "--org", &app.org_id])
        .await
        .unwrap();
    assert_eq!(show["usage"]["api_requests"]["used"], 4, "{show}");
    assert_eq!(show["usage"]["api_requests"]["allowance"], 4);
}

/// An allowance lowered by the operator below what was used holds from the next request,
/// though the instance holds units it took ahead under the old one.
async fn lowered_allowance_holds_at_once(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    let allowance = |n: &str| {
        let v = format!("api_requests={n}");
        async move {
            app.admin(&["org", "update", "--org", &app.org_id, "--allowance", &v])
                .await
                .unwrap();
        }
    };
    allowance("10000").await;
    for _ in 0..5 {
        let (s, _, b) = get(app, &app.base, &key).await;
        assert_eq!(s, 200, "{b}");
    }
    let org = app.org_uuid();
    assert!(
        api_requests_used(app, org).await > 5,
        "units are held ahead"
    );
    allowance("3").await;
    let (s, h, e) = get(app, &app.base, &key).await;
    assert_error(s, &h, &e, 402, "usage_limit_reached");
    assert_eq!(e["details"]["allowance"], 3);
    // The units held ahead went back: the count is what was admitted.
    api_requests_reach(app, org, 5).await;
}

tern_store::both_backends! { TestApp;
    lowered_allowance_holds_at_once_http => lowered_allowance_holds_at_once,
    key_quota_counts_exactly_http => key_quota_counts_exactly,
    tenant_quota_is_shared_by_keys_http => tenant_quota_is_shared_by_keys,
    uploads_weigh_five_http => uploads_weigh_five,
    burst_limiter_http => burst_limiter,
    api_requests_allowance_http => api_requests_allowance,
    media_feature_off_refuses_uploads_http => media_feature_off_refuses_uploads,
    requests_without_an_allowance_are_counted_http => requests_without_an_allowance_are_counted,
}

fn redis_url() -> String {
    std::env::var("TERN_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

async fn with_redis(backend: Backend, url: &str) -> TestApp {
    let url = url.to_string();
    TestApp::builder(backend)
        .configure(move |c| c.redis_url = Some(url))
        .start()
        .await
}

/// A second instance on the same database and Redis.
async fn second_instance(app: &TestApp, redis: &str) -> (String, tokio::sync::oneshot::Sender<()>) {
    let mut config = crate::common::test_config();
    config.redis_url = Some(redis.to_string());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = tern::app::state(app.db.clone(), app.key.clone(), &config);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(tern::app::serve_on(listener, state, async move {
        let _ = rx.await;
    }));
    (base, tx)
}

/// Two instances with one Redis and one database never exceed a quota together, and the
/// `api_requests` meter counts every admitted request exactly once.
async fn two_instances_share_counts(backend: Backend) {
    let redis = redis_url();
    let app = with_redis(backend, &redis).await;
    let (b, stop) = second_instance(&app, &redis).await;
    let (_, key) = app.owner_key("full_access").await;
    set_limits(&app, &app.org_id, &["key-minute=12"]).await;
    fresh_minute(20).await;
    let bases = [app.base.clone(), b.clone()];
    let results = futures::future::join_all((0..30).map(|i| get(&app, &bases[i % 2], &key))).await;
    let ok: Vec<_> = results.iter().filter(|r| r.0 == 200).collect();
    assert_eq!(ok.len(), 12, "the quota holds across both instances");
    let mut left: Vec<u64> = ok
        .iter()
        .map(|r| num(&r.1, "ratelimit-remaining").unwrap())
        .collect();
    left.sort_unstable();
    assert_eq!(
        left,
        (0..12).collect::<Vec<_>>(),
        "each remaining value once"
    );
    assert!(
        results
            .iter()
            .filter(|r| r.0 != 200)
            .all(|r| r.0 == 429 && r.2["code"] == "quota_exceeded")
    );
    // The meter (a database row) counts the admitted ones; it is written behind the answer.
    let org = app.org_uuid();
    api_requests_reach(&app, org, 12).await;
    let _ = stop.send(());
    app.stop().await;
}

/// Redis out of reach: answers as usual, counted by the instance itself.
async fn redis_down_falls_back(backend: Backend) {
    // Nothing listens on port 1 of the loopback.
    let app = with_redis(backend, "redis://127.0.0.1:1").await;
    let (_, key) = app.owner_key("full_access").await;
    set_limits(&app, &app.org_id, &["key-minute=3"]).await;
    fresh_minute(20).await;
    for left in [2, 1, 0] {
        let (s, h, b) = get(&app, &app.base, &key).await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(num(&h, "ratelimit-remaining"), Some(left));
    }
    let (s, h, e) = get(&app, &app.base, &key).await;
    assert_error(s, &h, &e, 429, "quota_exceeded");
    app.stop().await;
}

/// `TERN_RATE_LIMITS=off`: no quotas, no headers; the plan allowance still holds.
async fn limits_off_counts_no_quota_but_keeps_the_allowance(backend: Backend) {
    let app = TestApp::builder(backend)
        .configure(|c| c.rate_limits = false)
        .start()
        .await;
    let (_, key) = app.owner_key("full_access").await;
    set_limits(&app, &app.org_id, &["key-minute=1", "burst=1"]).await;
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--allowance",
        "api_requests=3",
    ])
    .await
    .unwrap();
    for _ in 0..3 {
        let (s, h, b) = get(&app, &app.base, &key).await;
        assert_eq!(s, 200, "{b}");
        assert!(h.get("ratelimit-limit").is_none());
    }
    let (s, h, e) = get(&app, &app.base, &key).await;
    assert_error(s, &h, &e, 402, "usage_limit_reached");
    app.stop().await;
}

/// An operator can take a feature away: `--feature media=off` → uploads answer 402
/// `plan_feature_unavailable` naming the feature and the plan that has it.
async fn media_feature_off_refuses_uploads(app: &TestApp) {
    let (_, key) = app.owner_key("full_access").await;
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--feature",
        "media=off",
    ])
    .await
    .unwrap();
    let form = reqwest::multipart::Form::new().text("file", "x");
    let (s, h, e) = send(
        app.http
            .post(app.url(&format!("{API}/media")))
            .bearer_auth(&key)
            .multipart(form),
    )
    .await;
    assert_error(s, &h, &e, 402, "plan_feature_unavailable");
    assert_eq!(e["details"]["feature"], "media");
    assert_eq!(e["details"]["plan"], "growth");
    assert_eq!(e["details"]["upgrade_plan"], "enterprise");
    assert!(num(&h, "ratelimit-remaining").is_some());
}

/// The `api_requests` allowance is exact across two instances that take units in chunks:
/// 150 units left admit exactly 150 of 400 concurrent requests, and once the instances are
/// idle the counter holds exactly what was admitted (unused chunks were given back).
async fn allowance_exact_across_instances(backend: Backend) {
    let app = TestApp::builder(backend).start().await;
    let (b, stop) = second_instance(&app, "redis://127.0.0.1:1").await;
    let (_, key) = app.owner_key("full_access").await;
    set_limits(
        &app,
        &app.org_id,
        &["key-minute=100000", "tenant-minute=100000"],
    )
    .await;
    let org = app.org_uuid();
    // Chunks: a first round with a large allowance leaves units held in both instances.
    let bases = [app.base.clone(), b.clone()];
    for r in futures::future::join_all((0..40).map(|i| get(&app, &bases[i % 2], &key))).await {
        assert_eq!(r.0, 200, "{}", r.2);
    }
    let used = api_requests_used(&app, org).await;
    assert!(used >= 40, "{used}");
    // Whatever is held now, exactly 150 more are admitted.
    api_requests_reach(&app, org, 40).await;
    let allowance = (40 + 150).to_string();
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--allowance",
        &format!("api_requests={allowance}"),
    ])
    .await
    .unwrap();
    let results = futures::future::join_all((0..400).map(|i| get(&app, &bases[i % 2], &key))).await;
    let ok = results.iter().filter(|r| r.0 == 200).count();
    assert_eq!(ok, 150, "exactly the units left");
    assert!(
        results
            .iter()
            .filter(|r| r.0 != 200)
            .all(|r| r.0 == 402 && r.2["code"] == "usage_limit_reached")
    );
    assert_eq!(api_requests_used(&app, org).await, 190);
    let _ = stop.send(());
    app.stop().await;
}

/// Without an allowance (enterprise) requests never wait for the meter, and are still
/// counted, every one.
async fn requests_without_an_allowance_are_counted(app: &TestApp) {
    let org = app.new_org("Big", "enterprise").await;
    let member = app.member(&org, "o@big.test", "owner").await;
    let (_, key) = app
        .key_for(&org, &member, &["--preset", "full_access"])
        .await;
    for r in futures::future::join_all((0..25).map(|_| get(app, &app.base, &key))).await {
        assert_eq!(r.0, 200);
    }
    let id: uuid::Uuid = org.parse().unwrap();
    api_requests_reach(app, id, 25).await;
    let show = app.admin(&["org", "show", "--org", &org]).await.unwrap();
    assert_eq!(show["usage"]["api_requests"]["used"], 25);
    assert_eq!(show["usage"]["api_requests"]["allowance"], Value::Null);
}

/// With Redis, a key's later requests start their Redis call during the key lookup; every
/// rule holds the same (exact counts, scopes, weights, a 403 with headers, burst).
async fn the_rules_hold_with_redis(backend: Backend) {
    // A fresh organisation each: the rules share its tenant windows.
    let app = with_redis(backend, &redis_url()).await;
    key_quota_counts_exactly(&app).await;
    app.stop().await;
    let app = with_redis(backend, &redis_url()).await;
    tenant_quota_is_shared_by_keys(&app).await;
    app.stop().await;
    let app = with_redis(backend, &redis_url()).await;
    uploads_weigh_five(&app).await;
    burst_limiter(&app).await;
    app.stop().await;
}

/// Tests that start their own app.
mod own_app {
    use super::*;

    tern_store::both_backends! { Backend;
        redis_two_instances_share_counts => two_instances_share_counts,
        limits_off => limits_off_counts_no_quota_but_keeps_the_allowance,
        redis_down_falls_back,
        allowance_exact_across_instances,
        redis_rules_hold => the_rules_hold_with_redis,
    }
}
