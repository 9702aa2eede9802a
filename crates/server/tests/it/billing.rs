//! Billing checks of POST /messages: the wallet, a restricted subscription, the
//! `messages_sent` allowance, and concurrent sends spending exactly what is there.

use crate::common::{TestApp, assert_error};
use crate::messages::{CUSTOMER, PNID, customer_writes, idem, insert_template, post, setup, text};
use serde_json::{Value, json};
use tern_domain::time::now_ms;

/// Sends `body` `n` times at once (each its own key): exactly `accepted` get 202, the rest
/// `refusal`.
async fn at_once(app: &TestApp, key: &str, body: &Value, n: usize, accepted: usize, refusal: &str) {
    let results = futures::future::join_all(
        (0..n).map(|_| async { post(app, key, Some(&idem()), body).await }),
    )
    .await;
    let statuses: Vec<u16> = results.iter().map(|r| r.0).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 202).count(),
        accepted,
        "{statuses:?}"
    );
    assert!(
        results
            .iter()
            .filter(|r| r.0 != 202)
            .all(|r| r.2["code"] == refusal)
    );
}

async fn billing_checks(app: &TestApp) {
    let c = setup(app).await;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    insert_template(
        app,
        "promo",
        json!([{"type": "BODY", "text": "Sale!"}]),
        "marketing",
    )
    .await;
    let tpl = json!({"to": "+14155550123", "type": "template", "template": {"name": "promo", "language": "en_US"}});
    // Billing is opt-in: with the default price of 0 an empty wallet is no obstacle.
    let (s, _, m) = post(app, &c.key, Some(&idem()), &tpl).await;
    assert_eq!(s, 202, "{m}");
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--price",
        "marketing=80",
        "--price",
        "utility=20",
    ])
    .await
    .unwrap();
    // Wallet empty: the template is refused, a reply in the window is not.
    let (s, h, e) = post(app, &c.key, Some(&idem()), &tpl).await;
    assert_error(s, &h, &e, 402, "wallet_balance_low");
    assert_eq!(
        (
            e["details"]["balance_minor"].as_i64(),
            e["details"]["required_minor"].as_i64()
        ),
        (Some(0), Some(80))
    );
    assert_eq!(e["details"]["wallet_category"], "marketing");
    assert_eq!(
        e["details"]["top_up_path"], "/settings/billing/wallet",
        "{e}"
    );
    let (s, _, _) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!("+14155550123"), "reply"),
    )
    .await;
    assert_eq!(s, 202);
    // Restricted subscription: templates paused, replies still work.
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--wallet-balance-minor",
        "500",
        "--subscription-status",
        "restricted",
    ])
    .await
    .unwrap();
    let (s, h, e) = post(app, &c.key, Some(&idem()), &tpl).await;
    assert_error(s, &h, &e, 402, "subscription_restricted");
    assert_eq!(e["details"]["status"], "restricted");
    let (s, _, _) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!("+14155550123"), "reply"),
    )
    .await;
    assert_eq!(s, 202);
    // The messages_sent allowance (the free template and two replies counted so far).
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--subscription-status",
        "active",
        "--allowance",
        "messages_sent=4",
    ])
    .await
    .unwrap();
    let (s, _, m) = post(app, &c.key, Some(&idem()), &tpl).await;
    assert_eq!(s, 202, "{m}");
    let (s, h, e) = post(
        app,
        &c.key,
        Some(&idem()),
        &text(json!("+14155550123"), "one more"),
    )
    .await;
    assert_error(s, &h, &e, 402, "usage_limit_reached");
    assert_eq!(e["details"]["meter"], "messages_sent");
    assert_eq!(
        (
            e["details"]["used"].as_i64(),
            e["details"]["allowance"].as_i64()
        ),
        (Some(4), Some(4))
    );
    assert!(e["details"]["period_end"].as_str().unwrap().ends_with('Z'));
}

/// Concurrent sends never spend the same wallet balance or allowance unit: a wallet with
/// room for exactly 5 template messages accepts exactly 5 of 16 sent at once, and an
/// allowance with 3 units left accepts exactly 3 of 12 replies sent at once.
async fn concurrent_sends_spend_exactly_what_is_there(app: &TestApp) {
    let c = setup(app).await;
    customer_writes(app, PNID, CUSTOMER, now_ms()).await;
    insert_template(
        app,
        "promo",
        json!([{"type": "BODY", "text": "Sale!"}]),
        "marketing",
    )
    .await;
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--price",
        "marketing=80",
        "--wallet-balance-minor",
        "400",
    ])
    .await
    .unwrap();
    let tpl = json!({"to": "+14155550123", "type": "template", "template": {"name": "promo", "language": "en_US"}});
    at_once(app, &c.key, &tpl, 16, 5, "wallet_balance_low").await;
    let org = app.db.get_org(app.org_uuid()).await.unwrap().unwrap();
    assert_eq!(org.wallet_balance_minor, 0);

    // 5 counted so far; 3 more units.
    app.admin(&[
        "org",
        "update",
        "--org",
        &app.org_id,
        "--allowance",
        "messages_sent=8",
    ])
    .await
    .unwrap();
    let reply = text(json!("+14155550123"), "thanks");
    at_once(app, &c.key, &reply, 12, 3, "usage_limit_reached").await;
    let start = org.billing_period_start;
    let (period, _) = tern_domain::plan::billing_period(start, now_ms());
    assert_eq!(
        app.db
            .messages_sent_in_period(app.org_uuid(), period)
            .await
            .unwrap(),
        8
    );
}

tern_store::both_backends! { TestApp;
    billing_checks_http => billing_checks,
    concurrent_sends_spend_exactly_what_is_there_http => concurrent_sends_spend_exactly_what_is_there,
}
