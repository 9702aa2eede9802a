use crate::fixtures::{self, T0};
use tern_store::{LAST_USED_GRANULARITY_MS, StoreError};
use uuid::Uuid;

fn is_conflict(err: &StoreError, name: &str) -> bool {
    matches!(err, StoreError::Conflict { constraint } if constraint == name)
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    key_roundtrip_and_duplicates => async |db| {
        let (org, member, key) = fixtures::org_with_key(&db).await;
        assert_eq!(db.get_api_key(key.id).await.unwrap(), Some(key.clone()));
        assert_eq!(db.get_api_key(Uuid::now_v7()).await.unwrap(), None);

        let mut same_hash = fixtures::api_key(org.id, member.id);
        same_hash.key_hash = key.key_hash.clone();
        let err = db.insert_api_key(&same_hash).await.unwrap_err();
        assert!(is_conflict(&err, "api_keys_key_hash_key"), "{err:?}");

        let mut same_id = fixtures::api_key(org.id, member.id);
        same_id.id = key.id;
        let err = db.insert_api_key(&same_id).await.unwrap_err();
        assert!(is_conflict(&err, "api_keys_pkey"), "{err:?}");
    },

    // Several hashes in one call: each answer as find_auth_by_hash gives it, in order.
    auth_lookups_by_several_hashes => async |db| {
        let (_, _, a) = fixtures::org_with_key(&db).await;
        let (_, _, b) = fixtures::org_with_key(&db).await;
        db.revoke_api_key(b.id, T0).await.unwrap();
        let hashes = vec![a.key_hash.clone(), vec![0u8; 32], b.key_hash.clone(), a.key_hash.clone()];
        let got = db.find_auth_by_hashes(&hashes).await.unwrap();
        let mut expect = Vec::new();
        for h in &hashes {
            expect.push(db.find_auth_by_hash(h).await.unwrap());
        }
        assert_eq!(got, expect);
        assert_eq!(got.iter().map(Option::is_some).collect::<Vec<_>>(), vec![true, false, true, true]);
        assert_eq!(got[2].as_ref().unwrap().key.revoked_at, Some(T0));
        assert!(db.find_auth_by_hashes(&[]).await.unwrap().is_empty());
    },

    revoke_once => async |db| {
        let (_, _, key) = fixtures::org_with_key(&db).await;
        let revoked = db.revoke_api_key(key.id, T0 + 5).await.unwrap();
        assert_eq!(revoked, tern_store::ApiKey { revoked_at: Some(T0 + 5), ..key.clone() });

        let err = db.revoke_api_key(key.id, T0 + 9).await.unwrap_err();
        assert!(is_conflict(&err, "already_revoked"), "{err:?}");
        assert_eq!(db.get_api_key(key.id).await.unwrap().unwrap().revoked_at, Some(T0 + 5));

        let err = db.revoke_api_key(Uuid::now_v7(), T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
    },

    rotate_replaces_the_old_key => async |db| {
        let (org, member, old) = fixtures::org_with_key(&db).await;
        let new = fixtures::api_key(org.id, member.id);
        db.rotate_api_key(old.id, &new, T0 + 1).await.unwrap();

        let stored_old = db.get_api_key(old.id).await.unwrap().unwrap();
        assert_eq!(stored_old.revoked_at, Some(T0 + 1));
        assert_eq!(stored_old.replaced_by, Some(new.id));
        assert_eq!(db.get_api_key(new.id).await.unwrap(), Some(new.clone()));
        assert_eq!(db.count_active_api_keys(org.id).await.unwrap(), 1);

        // The old key is revoked now: rotating it again is refused and writes nothing.
        let newer = fixtures::api_key(org.id, member.id);
        let err = db.rotate_api_key(old.id, &newer, T0 + 2).await.unwrap_err();
        assert!(is_conflict(&err, "already_revoked"), "{err:?}");
        assert_eq!(db.get_api_key(newer.id).await.unwrap(), None);
        assert_eq!(db.get_api_key(old.id).await.unwrap(), Some(stored_old));
    },

    rotate_refuses_missing_or_foreign_keys => async |db| {
        let (org, member, _) = fixtures::org_with_key(&db).await;
        let new = fixtures::api_key(org.id, member.id);
        let err = db.rotate_api_key(Uuid::now_v7(), &new, T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
        assert_eq!(db.get_api_key(new.id).await.unwrap(), None);

        // A key of another organisation is invisible.
        let (_, _, foreign) = fixtures::org_with_key(&db).await;
        let err = db.rotate_api_key(foreign.id, &new, T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
        assert_eq!(db.get_api_key(new.id).await.unwrap(), None);
        assert_eq!(db.get_api_key(foreign.id).await.unwrap().unwrap().revoked_at, None);
    },

    concurrent_rotations_have_one_winner => async |db| {
        let (org, member, old) = fixtures::org_with_key(&db).await;
        let tasks: Vec<_> = (0..6)
            .map(|_| {
                let db = db.clone();
                let new = fixtures::api_key(org.id, member.id);
                tokio::spawn(async move { db.rotate_api_key(old.id, &new, T0).await.map(|()| new.id) })
            })
            .collect();
        let mut winners = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                Ok(id) => winners.push(id),
                Err(err) => assert!(is_conflict(&err, "already_revoked"), "{err:?}"),
            }
        }
        assert_eq!(winners.len(), 1);
        assert_eq!(db.get_api_key(old.id).await.unwrap().unwrap().replaced_by, Some(winners[0]));
        assert_eq!(db.count_active_api_keys(org.id).await.unwrap(), 1);
    },

    auth_lookup_by_hash => async |db| {
        let mut org = fixtures::org();
        org.overrides = serde_json::json!({"features": {"public_api": true}});
        db.insert_org(&org).await.unwrap();
        let member = fixtures::insert_member(&db, org.id, "developer").await;
        let key = fixtures::api_key(org.id, member.id);
        db.insert_api_key(&key).await.unwrap();

        let auth = db.find_auth_by_hash(&key.key_hash).await.unwrap().unwrap();
        assert_eq!(auth.key, key);
        assert_eq!(auth.member_role, Some(tern_domain::auth::Role::Developer));
        assert_eq!(auth.org, org);
        assert_eq!(db.find_auth_by_hash(&[7u8; 32]).await.unwrap(), None);

        // Revoked keys are still found; the caller answers 401.
        db.revoke_api_key(key.id, T0 + 1).await.unwrap();
        let auth = db.find_auth_by_hash(&key.key_hash).await.unwrap().unwrap();
        assert_eq!(auth.key.revoked_at, Some(T0 + 1));
    },

    count_active_keys_per_org => async |db| {
        let (org, member, k1) = fixtures::org_with_key(&db).await;
        let k2 = fixtures::api_key(org.id, member.id);
        db.insert_api_key(&k2).await.unwrap();
        fixtures::org_with_key(&db).await; // another org's key does not count
        assert_eq!(db.count_active_api_keys(org.id).await.unwrap(), 2);
        db.revoke_api_key(k1.id, T0).await.unwrap();
        assert_eq!(db.count_active_api_keys(org.id).await.unwrap(), 1);
        assert_eq!(db.count_active_api_keys(Uuid::now_v7()).await.unwrap(), 0);
    },

    touch_last_used_is_coarse_and_monotonic => async |db| {
        let (_, _, key) = fixtures::org_with_key(&db).await;
        let last_used = |db: tern_store::Db| async move {
            db.get_api_key(key.id).await.unwrap().unwrap().last_used_at
        };
        db.touch_api_key_last_used(key.id, T0).await.unwrap();
        assert_eq!(last_used(db.clone()).await, Some(T0));
        // Within the granularity: no write.
        db.touch_api_key_last_used(key.id, T0 + LAST_USED_GRANULARITY_MS - 1).await.unwrap();
        assert_eq!(last_used(db.clone()).await, Some(T0));
        db.touch_api_key_last_used(key.id, T0 + LAST_USED_GRANULARITY_MS).await.unwrap();
        assert_eq!(last_used(db.clone()).await, Some(T0 + LAST_USED_GRANULARITY_MS));
        // Never backwards.
        db.touch_api_key_last_used(key.id, T0).await.unwrap();
        assert_eq!(last_used(db.clone()).await, Some(T0 + LAST_USED_GRANULARITY_MS));
        // Unknown ids are ignored.
        db.touch_api_key_last_used(Uuid::now_v7(), T0).await.unwrap();
    },
}
