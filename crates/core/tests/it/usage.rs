//! The `api_requests` meter: units taken ahead never outlive a lowered allowance, and a
//! process never takes more than its share of what is left.

use tern_core::admin;
use tern_core::usage::RequestMeter;
use tern_domain::plan::{Overrides, billing_period};
use tern_domain::time::now_ms;
use tern_store::{Db, Org, UsageAdd};

use crate::fixtures::principal;

const METER: &str = "api_requests";

/// Sets the `api_requests` allowance as `tern admin org update --allowance` does.
async fn set_allowance(db: &Db, org: Org, n: u64) -> Org {
    let mut o = Overrides::from_json(&org.overrides);
    o.allowances.insert(METER.into(), n);
    let mut org = org;
    org.overrides = o.to_json();
    admin::update_org(db, org, None).await.unwrap()
}

fn period(org: &Org) -> i64 {
    billing_period(org.billing_period_start, now_ms()).0
}

async fn used(db: &Db, org: &Org) -> i64 {
    db.usage_in_period(org.id, METER, period(org))
        .await
        .unwrap()
}

/// Counts `n` requests of `org` (as its keys' requests would, reading the org afresh).
async fn admitted(meter: &RequestMeter, org: &Org, n: usize) -> usize {
    let p = principal(org);
    let mut ok = 0;
    for _ in 0..n {
        match meter.count(&p).await {
            Ok(()) => ok += 1,
            Err(e) => assert_eq!(e.code.as_str(), "usage_limit_reached", "{e:?}"),
        }
    }
    ok
}

async fn a_lowered_allowance_holds_from_the_next_request(db: Db) {
    let org = admin::create_org(&db, "Acme", "growth").await.unwrap();
    let org = set_allowance(&db, org, 10_000).await;
    let meter = RequestMeter::start(db.clone());
    assert_eq!(admitted(&meter, &org, 10).await, 10);
    // The process holds units taken ahead.
    assert!(used(&db, &org).await > 10, "{}", used(&db, &org).await);

    // The operator lowers the allowance below what was used.
    let org = set_allowance(&db, org, 5).await;
    let p = principal(&org);
    let e = meter.count(&p).await.expect_err("the allowance is used up");
    assert_eq!(e.code.as_str(), "usage_limit_reached");
    assert_eq!(e.details["allowance"], 5);
    // The held units went back: the counter holds exactly the requests admitted.
    assert_eq!(used(&db, &org).await, 10);

    // Raised a little: exactly that many more.
    let org = set_allowance(&db, org, 12).await;
    assert_eq!(admitted(&meter, &org, 5).await, 2);
    assert_eq!(used(&db, &org).await, 12);
}

async fn a_process_never_takes_more_than_a_share_of_what_is_left(db: Db) {
    let org = admin::create_org(&db, "Acme", "growth").await.unwrap();
    let org = set_allowance(&db, org, 1000).await;
    // Other processes used 990 of the 1,000.
    let add = UsageAdd {
        org_id: org.id,
        meter: METER,
        period_start: period(&org),
        units: 990,
        allowance: None,
    };
    db.add_usage(&[add]).await.unwrap();
    let a = RequestMeter::start(db.clone());
    let b = RequestMeter::start(db.clone());
    assert_eq!(admitted(&a, &org, 1).await, 1);
    // 10 were left: this process took its request's unit and no chunk.
    assert_eq!(used(&db, &org).await, 991);
    // So another process finds the other 9 at once, and no one more.
    assert_eq!(admitted(&b, &org, 12).await, 9);
    assert_eq!(admitted(&a, &org, 3).await, 0);
    assert_eq!(used(&db, &org).await, 1000);

    // With N left, a take is the request's unit and at most 1/64 of the rest.
    let org = set_allowance(&db, org, 1000 + 1000).await;
    assert_eq!(admitted(&a, &org, 1).await, 1);
    let took = used(&db, &org).await - 1000;
    assert_eq!(took, 1 + 999 / 64);
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    a_lowered_allowance_holds_from_the_next_request,
    a_process_never_takes_more_than_a_share_of_what_is_left,
}
