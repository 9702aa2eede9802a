//! The audit log, and the organisation-wide reads of keys and subscriptions the app uses.

use crate::fixtures::{self, T0};
use tern_store::{AuditRow, NewSubscription, SubscriptionPatch};
use uuid::Uuid;

fn row(org_id: Option<Uuid>, at: i64, action: &str) -> AuditRow {
    AuditRow {
        id: Uuid::now_v7(),
        org_id,
        at,
        actor_kind: "operator".into(),
        actor_id: None,
        actor_label: "operator".into(),
        action: action.into(),
        target_kind: Some("api_key".into()),
        target_id: Some("k1".into()),
        detail: Some(r#"{"name":"ci"}"#.into()),
        address: Some("203.0.113.9".into()),
    }
}

fn new_sub(org_id: Uuid, key_id: Uuid, created_at: i64) -> NewSubscription {
    NewSubscription {
        id: Uuid::now_v7(),
        org_id,
        api_key_id: key_id,
        url: "https://hooks.example.com/tern".into(),
        event_types: vec!["message.status".into()],
        secret_enc: vec![1, 2, 3],
        enabled: true,
        description: None,
        created_at,
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    audit_rows_in_a_transaction_or_alone => async |db| {
        let org = fixtures::insert_org(&db).await;
        let a = row(Some(org.id), T0, "key.created");
        db.insert_audit(&a).await.unwrap();
        // Rolled back with its transaction.
        let mut tx = db.begin().await.unwrap();
        tx.insert_audit(&row(Some(org.id), T0 + 1, "key.revoked")).await.unwrap();
        tx.rollback().await.unwrap();
        let mut tx = db.begin().await.unwrap();
        let b = row(Some(org.id), T0 + 2, "subscription.created");
        tx.insert_audit(&b).await.unwrap();
        tx.commit().await.unwrap();
        // Another organisation's and an installation-wide entry stay out.
        db.insert_audit(&row(None, T0 + 3, "sign_in.failed")).await.unwrap();
        let other = fixtures::insert_org(&db).await;
        db.insert_audit(&row(Some(other.id), T0 + 3, "key.created")).await.unwrap();

        let all = db.list_audit(org.id, None, None, 10).await.unwrap();
        assert_eq!(all, vec![b.clone(), a.clone()]);
        let keys = db.list_audit(org.id, Some("key."), None, 10).await.unwrap();
        assert_eq!(keys, vec![a.clone()]);
        // `_` is no wildcard in a prefix.
        assert!(db.list_audit(org.id, Some("key_"), None, 10).await.unwrap().is_empty());
        let after_b = db.list_audit(org.id, None, Some((b.at, b.id)), 10).await.unwrap();
        assert_eq!(after_b, vec![a]);
        assert_eq!(db.list_audit(org.id, None, None, 1).await.unwrap(), vec![b]);
    },

    the_same_instant_pages_by_id => async |db| {
        let org = fixtures::insert_org(&db).await;
        let mut rows: Vec<AuditRow> = (0..5).map(|_| row(Some(org.id), T0, "key.created")).collect();
        for r in &rows {
            db.insert_audit(r).await.unwrap();
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.id));
        let mut seen = Vec::new();
        let mut before = None;
        loop {
            let page = db.list_audit(org.id, None, before, 2).await.unwrap();
            let Some(last) = page.last() else { break };
            before = Some((last.at, last.id));
            seen.extend(page);
        }
        assert_eq!(seen, rows);
    },

    keys_of_an_org_with_their_creator => async |db| {
        let (org, member, old) = fixtures::org_with_key(&db).await;
        let mut new = fixtures::api_key(org.id, member.id);
        new.created_at = T0 + 10;
        db.insert_api_key(&new).await.unwrap();
        db.revoke_api_key(old.id, T0 + 20).await.unwrap();
        let (other, _, theirs) = fixtures::org_with_key(&db).await;

        let rows = db.list_org_api_keys(org.id).await.unwrap();
        assert_eq!(rows.iter().map(|r| r.key.id).collect::<Vec<_>>(), vec![new.id, old.id]);
        assert_eq!(rows[1].key.revoked_at, Some(T0 + 20));
        assert_eq!(rows[0].created_by_email, member.email);
        assert_eq!(rows[0].creator_role, Some(tern_domain::auth::Role::Owner));
        assert_eq!(db.get_org_api_key(org.id, new.id).await.unwrap().unwrap().key, new);
        assert!(db.get_org_api_key(org.id, theirs.id).await.unwrap().is_none());
        assert_eq!(db.list_org_api_keys(other.id).await.unwrap().len(), 1);
    },

    subscriptions_of_an_org_by_key => async |db| {
        let (org, member, k1) = fixtures::org_with_key(&db).await;
        let mut k2 = fixtures::api_key(org.id, member.id);
        k2.created_at = T0 + 1;
        db.insert_api_key(&k2).await.unwrap();
        let s2 = db.insert_webhook_subscription(&new_sub(org.id, k2.id, T0)).await.unwrap();
        let s1b = db.insert_webhook_subscription(&new_sub(org.id, k1.id, T0 + 5)).await.unwrap();
        let s1a = db.insert_webhook_subscription(&new_sub(org.id, k1.id, T0)).await.unwrap();
        let (other, _, k3) = fixtures::org_with_key(&db).await;
        let s3 = db.insert_webhook_subscription(&new_sub(other.id, k3.id, T0)).await.unwrap();

        let all = db.list_org_webhook_subscriptions(org.id).await.unwrap();
        let ids: Vec<Uuid> = all.iter().map(|(s, _)| s.id).collect();
        assert_eq!(ids, vec![s1a.id, s1b.id, s2.id]);
        assert_eq!((all[0].1.id, all[0].1.name.as_str(), all[0].1.prefix.as_str()), (k1.id, "ci", "tern_AbC1"));
        assert_eq!((all[2].1.id, all[2].1.member_id, all[2].1.revoked_at), (k2.id, member.id, None));
        let (s, k) = db.get_org_webhook_subscription(org.id, s2.id).await.unwrap().unwrap();
        assert_eq!((s, k.id), (s2.clone(), k2.id));
        assert!(db.get_org_webhook_subscription(org.id, s3.id).await.unwrap().is_none());

        // The key-owned changes inside a transaction roll back with it.
        let mut tx = db.begin().await.unwrap();
        let patch = SubscriptionPatch { enabled: Some(false), ..Default::default() };
        let changed = tx.update_webhook_subscription(org.id, k2.id, s2.id, &patch, T0 + 9).await.unwrap();
        assert!(!changed.unwrap().enabled);
        assert!(tx.delete_webhook_subscription(org.id, k2.id, s2.id).await.unwrap());
        assert!(tx.rotate_webhook_secret(org.id, k1.id, s1a.id, &[9], T0 + 99, T0 + 9).await.unwrap().is_some());
        assert!(!tx.delete_webhook_subscription(org.id, k1.id, s2.id).await.unwrap());
        tx.rollback().await.unwrap();
        assert_eq!(db.get_org_webhook_subscription(org.id, s2.id).await.unwrap().unwrap().0, s2);
        assert_eq!(db.get_org_webhook_subscription(org.id, s1a.id).await.unwrap().unwrap().0, s1a);
    },

    key_changes_in_a_transaction => async |db| {
        let (org, member, old) = fixtures::org_with_key(&db).await;
        let mut tx = db.begin().await.unwrap();
        assert!(tx.revoke_api_key(Uuid::now_v7(), T0).await.unwrap().is_none());
        let revoked = tx.revoke_api_key(old.id, T0 + 1).await.unwrap().unwrap();
        assert_eq!(revoked.revoked_at, Some(T0 + 1));
        assert!(tx.revoke_api_key(old.id, T0 + 2).await.unwrap().is_none());
        tx.rollback().await.unwrap();
        assert_eq!(db.get_api_key(old.id).await.unwrap().unwrap().revoked_at, None);

        let new = fixtures::api_key(org.id, member.id);
        let mut tx = db.begin().await.unwrap();
        assert!(tx.rotate_api_key(old.id, &new, T0 + 3).await.unwrap());
        tx.commit().await.unwrap();
        assert_eq!(db.get_api_key(old.id).await.unwrap().unwrap().replaced_by, Some(new.id));
        // A revoked key does not rotate (and the caller rolls the new key back).
        let newer = fixtures::api_key(org.id, member.id);
        let mut tx = db.begin().await.unwrap();
        assert!(!tx.rotate_api_key(old.id, &newer, T0 + 4).await.unwrap());
        tx.rollback().await.unwrap();
        assert!(db.get_api_key(newer.id).await.unwrap().is_none());
    },
}
