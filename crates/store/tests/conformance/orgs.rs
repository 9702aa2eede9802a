use crate::fixtures::{self, T0};
use tern_store::StoreError;
use uuid::Uuid;

tern_store::both_backends! { tern_store::testkit::TestDb;
    org_roundtrip => async |db| {
        let mut org = fixtures::org();
        org.wallet_balance_minor = 1234;
        org.overrides = serde_json::json!({
            "features": {"campaigns": true},
            "limits": {"phone_numbers": 3},
            "prices_minor": {"marketing": 7},
        });
        db.insert_org(&org).await.unwrap();
        assert_eq!(db.get_org(org.id).await.unwrap(), Some(org));
        assert_eq!(db.get_org(Uuid::now_v7()).await.unwrap(), None);
    },

    org_duplicate_id_conflicts => async |db| {
        let org = fixtures::insert_org(&db).await;
        let err = db.insert_org(&org).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "organisations_pkey"), "{err:?}");
    },

    org_update_overwrites_settings_but_not_balance => async |db| {
        let org = fixtures::insert_org(&db).await;
        db.adjust_wallet(org.id, 500, "top_up", None, T0).await.unwrap();
        let mut changed = org.clone();
        changed.name = "Acme Ltd".into();
        changed.plan = "scale".into();
        changed.subscription_status = tern_domain::plan::SubscriptionStatus::PastDue;
        changed.wallet_currency = "USD".into();
        changed.wallet_balance_minor = 999_999; // ignored: only adjust_wallet moves it
        changed.overrides = serde_json::json!({"rate_limits": {"key-minute": 10}});
        changed.billing_period_start = T0 + 1;
        changed.updated_at = T0 + 2;
        db.update_org(&changed).await.unwrap();
        let stored = db.get_org(org.id).await.unwrap().unwrap();
        assert_eq!(stored, tern_store::Org { wallet_balance_minor: 500, ..changed });
    },

    org_update_missing_is_not_found => async |db| {
        let err = db.update_org(&fixtures::org()).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
    },

    wallet_adjustments_apply_once_per_message_and_reason => async |db| {
        let org = fixtures::insert_org(&db).await;
        assert_eq!(db.adjust_wallet(org.id, 1000, "top_up", None, T0).await.unwrap(), 1000);
        assert_eq!(db.adjust_wallet(org.id, 1000, "top_up", None, T0).await.unwrap(), 2000);
        let msg = Uuid::now_v7();
        assert_eq!(db.adjust_wallet(org.id, -30, "message_debit", Some(msg), T0).await.unwrap(), 1970);
        let err = db.adjust_wallet(org.id, -30, "message_debit", Some(msg), T0).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "wallet_ledger_message_id_reason_key"), "{err:?}");
        assert_eq!(db.adjust_wallet(org.id, 30, "message_refund", Some(msg), T0).await.unwrap(), 2000);
        assert_eq!(db.get_org(org.id).await.unwrap().unwrap().wallet_balance_minor, 2000);
        let err = db.adjust_wallet(Uuid::now_v7(), 1, "top_up", None, T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
    },

    wallet_concurrent_adjustments_are_not_lost => async |db| {
        let org = fixtures::insert_org(&db).await;
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let db = db.clone();
                tokio::spawn(async move { db.adjust_wallet(org.id, -7, "message_debit", Some(Uuid::now_v7()), T0).await })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert_eq!(db.get_org(org.id).await.unwrap().unwrap().wallet_balance_minor, -140);
    },

    member_email_is_case_insensitive => async |db| {
        let org = fixtures::insert_org(&db).await;
        let m = fixtures::member(org.id, "Ada@Example.COM", "owner");
        let stored = db.insert_member(&m).await.unwrap();
        assert_eq!(stored.email, "ada@example.com");
        assert_eq!(stored, tern_store::Member { email: "ada@example.com".into(), ..m.clone() });
        assert_eq!(db.get_member(m.id).await.unwrap(), Some(stored));

        let dup = fixtures::member(org.id, "ADA@example.com", "admin");
        let err = db.insert_member(&dup).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "members_org_id_email_key"), "{err:?}");

        // The same person may belong to another organisation.
        let other = fixtures::insert_org(&db).await;
        db.insert_member(&fixtures::member(other.id, "ada@example.com", "developer")).await.unwrap();
        assert_eq!(db.get_member(Uuid::now_v7()).await.unwrap(), None);
    },
}
