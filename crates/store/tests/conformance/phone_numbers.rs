use crate::fixtures::{self, T0};
use tern_domain::number::NumberStatus;
use tern_store::StoreError;
use uuid::Uuid;

tern_store::both_backends! { tern_store::testkit::TestDb;
    phone_number_roundtrip_and_duplicate => async |db| {
        let org = fixtures::insert_org(&db).await;
        let n = fixtures::phone_number(org.id, "1001");
        db.insert_phone_number(&n).await.unwrap();
        assert_eq!(db.get_phone_number("1001").await.unwrap(), Some(n.clone()));
        assert_eq!(db.get_phone_number("nope").await.unwrap(), None);

        // A network number belongs to one organisation only.
        let other = fixtures::insert_org(&db).await;
        let err = db.insert_phone_number(&fixtures::phone_number(other.id, "1001")).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "phone_numbers_pkey"), "{err:?}");
    },

    phone_number_partial_updates => async |db| {
        let org = fixtures::insert_org(&db).await;
        let n = fixtures::phone_number(org.id, "2002");
        db.insert_phone_number(&n).await.unwrap();

        let u = db.update_phone_number("2002", Some(NumberStatus::Disconnected), None, T0 + 1).await.unwrap();
        assert_eq!((u.status.as_str(), u.throughput_mps, u.updated_at), ("disconnected", 80, T0 + 1));
        let u = db.update_phone_number("2002", None, Some(1000), T0 + 2).await.unwrap();
        assert_eq!((u.status.as_str(), u.throughput_mps, u.updated_at), ("disconnected", 1000, T0 + 2));
        let u = db.update_phone_number("2002", Some(NumberStatus::Connected), Some(80), T0 + 3).await.unwrap();
        assert_eq!(u, tern_store::PhoneNumber { updated_at: T0 + 3, ..n });
        assert_eq!(db.get_phone_number("2002").await.unwrap(), Some(u));

        let err = db.update_phone_number("missing", Some(NumberStatus::Connected), None, T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
    },

    phone_numbers_keyset_pages => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        // Inserted out of order, with ids whose byte order differs from locale order.
        for id in ["300", "1_0", "200", "10", "A1", "a1"] {
            db.insert_phone_number(&fixtures::phone_number(org.id, id)).await.unwrap();
        }
        for id in ["0", "250", "999"] {
            db.insert_phone_number(&fixtures::phone_number(other.id, id)).await.unwrap();
        }

        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = db.list_phone_numbers(org.id, after.as_deref(), 4).await.unwrap();
            assert!(page.len() <= 4);
            assert!(page.iter().all(|n| n.org_id == org.id));
            seen.extend(page.iter().map(|n| n.id.clone()));
            if page.len() < 4 {
                break;
            }
            after = page.last().map(|n| n.id.clone());
        }
        assert_eq!(seen, ["10", "1_0", "200", "300", "A1", "a1"]);

        let page = db.list_phone_numbers(org.id, Some("200"), 2).await.unwrap();
        let ids: Vec<_> = page.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["300", "A1"]);
        assert!(db.list_phone_numbers(org.id, Some("a1"), 10).await.unwrap().is_empty());
        assert!(db.list_phone_numbers(Uuid::now_v7(), None, 10).await.unwrap().is_empty());

        assert_eq!(db.count_phone_numbers(org.id).await.unwrap(), 6);
        assert_eq!(db.count_phone_numbers(other.id).await.unwrap(), 3);
        assert_eq!(db.count_phone_numbers(Uuid::now_v7()).await.unwrap(), 0);
    },
}
