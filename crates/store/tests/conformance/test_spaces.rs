//! Test mode's store (APP.md §5): an organisation's test space is an organisation row that
//! names its live one; a test key's authentication and send lookups reach the space's
//! number and contacts, never the live ones; plans are written to both rows at once.

use crate::fixtures::{self, T0};
use tern_domain::auth::Mode;
use tern_store::{ContactRef, Org, SendLookup, StoreError};
use uuid::Uuid;

/// The test space of `live` with its number `pnid`.
async fn space(db: &tern_store::Db, live: &Org, pnid: &str) -> Org {
    let space = Org {
        id: Uuid::now_v7(),
        live_org_id: Some(live.id),
        ..fixtures::org()
    };
    let mut tx = db.begin().await.unwrap();
    tx.insert_org(&space).await.unwrap();
    let number = tern_store::PhoneNumber {
        mode: Mode::Test,
        ..fixtures::phone_number(space.id, pnid)
    };
    tx.insert_phone_number(&number).await.unwrap();
    tx.commit().await.unwrap();
    space
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    a_test_space_names_its_live_organisation => async |db| {
        let (live, member, _) = fixtures::org_with_key(&db).await;
        assert!(db.get_test_space(live.id).await.unwrap().is_none());
        let space = space(&db, &live, "991").await;
        assert_eq!(db.get_test_space(live.id).await.unwrap(), Some(space.clone()));
        assert!(space.is_test_space() && !live.is_test_space());
        // One space per organisation.
        let second = Org { id: Uuid::now_v7(), live_org_id: Some(live.id), ..fixtures::org() };
        let mut tx = db.begin().await.unwrap();
        assert!(matches!(tx.insert_org(&second).await.unwrap_err(), StoreError::Conflict { .. }));
        drop(tx);
        let mut tx = db.begin().await.unwrap();
        assert!(tx.org_is_test_space(space.id).await.unwrap());
        assert!(!tx.org_is_test_space(live.id).await.unwrap());
        assert!(!tx.org_is_test_space(Uuid::now_v7()).await.unwrap());
        drop(tx);
        // A plan change reaches the space with the live organisation (not its name).
        let changed = Org { plan: "scale".into(), overrides: serde_json::json!({"features": {}}), updated_at: T0 + 9, ..live.clone() };
        db.update_org(&changed).await.unwrap();
        let space = db.get_org(space.id).await.unwrap().unwrap();
        assert_eq!((space.plan.as_str(), space.updated_at), ("scale", T0 + 9));
        assert_eq!(space.overrides, changed.overrides);
        assert_eq!(space.live_org_id, Some(live.id));
        let _ = member;
    },

    a_test_key_reaches_the_test_space_only => async |db| {
        let (live, member, live_key) = fixtures::org_with_key(&db).await;
        db.insert_phone_number(&fixtures::phone_number(live.id, "100")).await.unwrap();
        let test_key = tern_store::ApiKey { mode: Mode::Test, ..fixtures::api_key(live.id, member.id) };
        db.insert_api_key(&test_key).await.unwrap();
        // Before the space exists a test key reaches nothing.
        let rec = db.find_auth_by_hash(&test_key.key_hash).await.unwrap().unwrap();
        assert_eq!((rec.key.mode, rec.data_org_id()), (Mode::Test, None));
        let space = space(&db, &live, "991").await;
        let rec = db.find_auth_by_hash(&test_key.key_hash).await.unwrap().unwrap();
        assert_eq!(rec.data_org_id(), Some(space.id));
        assert_eq!(rec.org.id, live.id, "the plan is the live organisation's");
        let rec = db.find_auth_by_hash(&live_key.key_hash).await.unwrap().unwrap();
        assert_eq!((rec.key.mode, rec.data_org_id(), rec.test_org_id), (Mode::Live, Some(live.id), None));
        // The same recipient in both modes: each key's send lookup finds its own.
        let live_contact = fixtures::insert_contact(&db, live.id, "447700900001", T0).await;
        let test_contact = fixtures::insert_contact(&db, space.id, "447700900001", T0).await;
        let lookups = [
            SendLookup::new(&live_key.key_hash, Some(ContactRef::WaId("447700900001"))),
            SendLookup::new(&test_key.key_hash, Some(ContactRef::WaId("447700900001"))),
        ];
        let got = db.send_lookups(&lookups).await.unwrap();
        let seen = |i: usize| {
            let ctx = got[i].as_ref().unwrap();
            ctx.options.iter().map(|o| (o.number.id.clone(), o.number.org_id, o.number.mode, o.contact_id)).collect::<Vec<_>>()
        };
        assert_eq!(seen(0), [("100".to_string(), live.id, Mode::Live, Some(live_contact.id))]);
        assert_eq!(seen(1), [("991".to_string(), space.id, Mode::Test, Some(test_contact.id))]);
        // Live templates' business accounts are told apart from test ones.
        assert!(db.waba_has_live_number("waba-1").await.unwrap());
        db.update_phone_number("100", Some(tern_domain::number::NumberStatus::Disconnected), None, T0 + 1).await.unwrap();
        assert!(db.waba_has_live_number("waba-1").await.unwrap(), "a live number, connected or not");
        assert!(!db.waba_has_live_number("waba-other").await.unwrap());
    },
}
