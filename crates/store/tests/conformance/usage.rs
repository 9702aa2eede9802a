//! Usage counters: adds within an allowance, takes with a share of what is left, give-backs.

use crate::fixtures::insert_org;
use tern_store::{UsageAdd, UsageTake};

const METER: &str = "api_requests";

fn take(org_id: uuid::Uuid, need: i64, allowance: i64) -> UsageTake {
    UsageTake {
        org_id,
        meter: METER,
        period_start: 0,
        need,
        allowance,
        share_of: 64,
        share_max: 1024,
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    usage_take_grants_the_need_and_a_share_of_what_is_left => async |db| {
        let org = insert_org(&db).await;
        // A fresh counter: 1 + (6401 - 1) / 64.
        let g = db.take_usage(&take(org.id, 1, 6401)).await.unwrap();
        assert_eq!((g.granted, g.count), (101, 101));
        // The share is capped.
        let g = db.take_usage(&take(org.id, 2, 1_000_000)).await.unwrap();
        assert_eq!((g.granted, g.count), (2 + 1024, 101 + 1026));
        // The share is reckoned from the counter as it is now, whatever the taker saw.
        let other = insert_org(&db).await;
        let add = UsageAdd { org_id: other.id, meter: METER, period_start: 0, units: 990, allowance: None };
        db.add_usage(&[add]).await.unwrap();
        let g = db.take_usage(&take(other.id, 1, 1000)).await.unwrap();
        assert_eq!((g.granted, g.count), (1, 991), "9 left after the need: no share");
        let g = db.take_usage(&take(other.id, 3, 1000)).await.unwrap();
        assert_eq!((g.granted, g.count), (3, 994));
        // Never past the allowance: a need larger than what is left gets what is left.
        let g = db.take_usage(&take(other.id, 10, 1000)).await.unwrap();
        assert_eq!((g.granted, g.count), (6, 1000));
        let g = db.take_usage(&take(other.id, 1, 1000)).await.unwrap();
        assert_eq!((g.granted, g.count), (0, 1000));
        // An allowance lowered below the count grants nothing and takes nothing back.
        let g = db.take_usage(&take(other.id, 1, 500)).await.unwrap();
        assert_eq!((g.granted, g.count), (0, 1000));
        db.give_back_usage(other.id, METER, 0, 600).await.unwrap();
        assert_eq!(db.usage_in_period(other.id, METER, 0).await.unwrap(), 400);
        let g = db.take_usage(&take(other.id, 1, 500)).await.unwrap();
        assert_eq!((g.granted, g.count), (2, 402), "1 + (500 - 400 - 1) / 64");
    },

    usage_add_grants_within_the_allowance => async |db| {
        let org = insert_org(&db).await;
        let add = |units, allowance| UsageAdd { org_id: org.id, meter: METER, period_start: 0, units, allowance };
        let g = db.add_usage(&[add(3, Some(5)), add(3, Some(5)), add(3, None)]).await.unwrap();
        assert_eq!(g.iter().map(|g| (g.granted, g.count)).collect::<Vec<_>>(), vec![(3, 3), (2, 5), (3, 8)]);
        assert_eq!(db.usage_in_period(org.id, METER, 0).await.unwrap(), 8);
        assert_eq!(db.usage_in_period(org.id, METER, 1).await.unwrap(), 0);
    },
}
