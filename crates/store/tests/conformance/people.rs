//! People, one-time links, recovery codes, app sessions and memberships.

use crate::fixtures::{self, T0};
use tern_domain::people::{EndReason, LinkPurpose};
use tern_store::{AppSession, Db, PersonLink, StoreError};
use uuid::Uuid;

fn link(person_id: Uuid, hash: u8, expires_at: i64) -> PersonLink {
    PersonLink {
        token_hash: vec![hash; 32],
        person_id,
        purpose: LinkPurpose::Invite,
        org_id: None,
        created_at: T0,
        expires_at,
        used_at: None,
    }
}

fn session(person_id: Uuid, hash: u8) -> AppSession {
    AppSession {
        id: Uuid::now_v7(),
        token_hash: vec![hash; 32],
        person_id,
        org_id: None,
        created_at: T0,
        last_seen_at: T0,
        confirmed_at: None,
        address: Some("192.0.2.1".into()),
        user_agent: Some("test".into()),
        ended_at: None,
        end_reason: None,
    }
}

async fn open_sessions(db: &Db, person_id: Uuid) -> usize {
    db.list_app_sessions(person_id, i64::MAX)
        .await
        .unwrap()
        .iter()
        .filter(|s| s.ended_at.is_none())
        .count()
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    people_are_unique_by_email_in_any_case => async |db| {
        let a = db.ensure_person("Ada@Example.com", T0).await.unwrap();
        assert_eq!(a.email, "ada@example.com");
        assert!(!a.has_password() && !a.has_two_factor());
        let again = db.ensure_person(" ADA@example.COM ", T0 + 1).await.unwrap();
        assert_eq!(again, a);
        assert_eq!(db.find_person_by_email("ADA@EXAMPLE.COM").await.unwrap(), Some(a.clone()));
        assert_eq!(db.get_person(a.id).await.unwrap(), Some(a));
        assert_eq!(db.find_person_by_email("bob@example.com").await.unwrap(), None);
        // Debug never shows a secret.
        let mut tx = db.begin().await.unwrap();
        let p = tx.ensure_person("ada@example.com", T0).await.unwrap();
        tx.set_password(p.id, Some("Ada"), "$argon2id$secret-hash", T0).await.unwrap();
        tx.commit().await.unwrap();
        let p = db.get_person(p.id).await.unwrap().unwrap();
        assert_eq!(p.name, "Ada");
        assert!(!format!("{p:?}").contains("secret-hash"));
    },

    a_link_is_used_once => async |db| {
        let p = db.ensure_person("ada@example.com", T0).await.unwrap();
        db.insert_link(&link(p.id, 1, T0 + 1000)).await.unwrap();
        assert!(db.find_valid_link(&[1; 32], T0).await.unwrap().is_some());
        assert!(db.find_valid_link(&[1; 32], T0 + 1000).await.unwrap().is_none(), "expired");
        // Concurrent uses: exactly one gets the link.
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let db = db.clone();
                tokio::spawn(async move {
                    let mut tx = db.begin().await.unwrap();
                    let got = tx.use_link(&[1; 32], T0 + 1).await.unwrap();
                    tx.commit().await.unwrap();
                    got.is_some()
                })
            })
            .collect();
        let mut used = 0;
        for t in tasks {
            used += usize::from(t.await.unwrap());
        }
        assert_eq!(used, 1);
        assert!(db.find_valid_link(&[1; 32], T0 + 2).await.unwrap().is_none());
        // An expired link cannot be used.
        db.insert_link(&link(p.id, 2, T0 + 10)).await.unwrap();
        let mut tx = db.begin().await.unwrap();
        assert!(tx.use_link(&[2; 32], T0 + 10).await.unwrap().is_none());
    },

    a_new_link_voids_the_earlier_unused_ones => async |db| {
        let p = db.ensure_person("ada@example.com", T0).await.unwrap();
        db.insert_link(&link(p.id, 1, T0 + 1000)).await.unwrap();
        db.insert_link(&PersonLink { purpose: LinkPurpose::Reset, ..link(p.id, 2, T0 + 1000) }).await.unwrap();
        assert!(db.find_valid_link(&[1; 32], T0).await.unwrap().is_none());
        let l = db.find_valid_link(&[2; 32], T0).await.unwrap().unwrap();
        assert_eq!(l.purpose, LinkPurpose::Reset);
        let err = db.insert_link(&link(p.id, 2, T0 + 1000)).await;
        // The same hash again: the earlier one was unused, so it was voided first.
        assert!(err.is_ok(), "{err:?}");
    },

    recovery_codes_are_used_once => async |db| {
        let p = db.ensure_person("ada@example.com", T0).await.unwrap();
        db.set_totp_pending(p.id, b"sealed", T0).await.unwrap();
        assert!(!db.enable_two_factor(p.id, b"other", 5, &[], T0).await.unwrap());
        let codes = vec![vec![1u8; 32], vec![2u8; 32]];
        assert!(db.enable_two_factor(p.id, b"sealed", 5, &codes, T0).await.unwrap());
        let p2 = db.get_person(p.id).await.unwrap().unwrap();
        assert_eq!(p2.totp_secret_enc.as_deref(), Some(&b"sealed"[..]));
        assert_eq!(p2.totp_pending_enc, None);
        assert_eq!(p2.totp_last_step, Some(5));
        assert_eq!(db.count_recovery_codes(p.id).await.unwrap(), 2);
        assert!(db.use_recovery_code(p.id, &[1; 32], T0).await.unwrap());
        assert!(!db.use_recovery_code(p.id, &[1; 32], T0).await.unwrap());
        assert!(!db.use_recovery_code(p.id, &[3; 32], T0).await.unwrap());
        assert_eq!(db.count_recovery_codes(p.id).await.unwrap(), 1);
        // The TOTP step only moves forward.
        assert!(!db.accept_totp_step(p.id, 5).await.unwrap());
        assert!(db.accept_totp_step(p.id, 6).await.unwrap());
        assert!(!db.accept_totp_step(p.id, 6).await.unwrap());
        db.disable_two_factor(p.id, T0).await.unwrap();
        let p3 = db.get_person(p.id).await.unwrap().unwrap();
        assert!(!p3.has_two_factor());
        assert_eq!(db.count_recovery_codes(p.id).await.unwrap(), 0);
        assert!(!db.accept_totp_step(p.id, 7).await.unwrap());
    },

    sessions_end_one_all_or_all_but_one => async |db| {
        let p = db.ensure_person("ada@example.com", T0).await.unwrap();
        let (a, b, c) = (session(p.id, 1), session(p.id, 2), session(p.id, 3));
        for s in [&a, &b, &c] {
            db.insert_app_session(s).await.unwrap();
        }
        let err = db.insert_app_session(&AppSession { id: Uuid::now_v7(), ..a.clone() }).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "app_sessions_token_hash_key"), "{err:?}");
        assert_eq!(db.find_app_session(&[1; 32]).await.unwrap(), Some(a.clone()));
        assert!(!db.touch_app_session(a.id, T0 + 59_999).await.unwrap());
        assert!(db.touch_app_session(a.id, T0 + 60_000).await.unwrap());
        assert!(db.end_app_session(a.id, EndReason::SignedOut, T0).await.unwrap());
        assert!(!db.end_app_session(a.id, EndReason::SignedOut, T0).await.unwrap());
        assert_eq!(db.end_person_sessions(p.id, Some(b.id), EndReason::PasswordChanged, T0).await.unwrap(), 1);
        assert_eq!(open_sessions(&db, p.id).await, 1);
        assert_eq!(db.end_person_sessions(p.id, None, EndReason::SignedOutEverywhere, T0).await.unwrap(), 1);
        assert_eq!(open_sessions(&db, p.id).await, 0);
        let ended = db.get_app_session(c.id).await.unwrap().unwrap();
        assert_eq!(ended.end_reason.as_deref(), Some("password_changed"));
        assert!(!db.touch_app_session(b.id, T0 + 600_000).await.unwrap());
    },

    a_removed_member_keeps_its_row_but_loses_its_keys => async |db| {
        let (org, member, key) = fixtures::org_with_key(&db).await;
        let mut tx = db.begin().await.unwrap();
        assert_eq!(tx.lock_owners(org.id).await.unwrap(), vec![member.id]);
        tx.remove_member(member.id, T0 + 5).await.unwrap();
        assert_eq!(tx.count_memberships(&member.email).await.unwrap(), 0);
        tx.commit().await.unwrap();
        assert_eq!(db.get_member(member.id).await.unwrap(), None);
        let auth = db.find_auth_by_hash(&key.key_hash).await.unwrap().unwrap();
        assert_eq!(auth.member_role, None);
        assert_eq!(auth.key.revoked_at, Some(T0 + 5));
        assert!(db.members_with_people(org.id).await.unwrap().is_empty());
        // Added again: the same row, the new role, the old key still revoked.
        let back = db.revive_member(org.id, &member.email.to_uppercase(), tern_domain::auth::Role::Developer, T0 + 6).await.unwrap().unwrap();
        assert_eq!(back.id, member.id);
        assert_eq!(back.role, tern_domain::auth::Role::Developer);
        assert!(db.revive_member(org.id, &member.email, tern_domain::auth::Role::Admin, T0).await.unwrap().is_none());
        let auth = db.find_auth_by_hash(&key.key_hash).await.unwrap().unwrap();
        assert!(auth.key.revoked_at.is_some());
    },

    memberships_and_the_two_factor_setting => async |db| {
        let a = fixtures::insert_org(&db).await;
        let b = fixtures::insert_org(&db).await;
        db.insert_member(&fixtures::member(a.id, "ada@example.com", "owner")).await.unwrap();
        db.insert_member(&fixtures::member(b.id, "Ada@example.com", "developer")).await.unwrap();
        let p = db.ensure_person("ada@example.com", T0).await.unwrap();
        assert!(db.set_two_factor_required(b.id, true, T0 + 1).await.unwrap());
        let ms = db.memberships_of("ADA@example.com").await.unwrap();
        assert_eq!(ms.len(), 2);
        assert!(ms.iter().any(|m| m.member.org_id == b.id && m.two_factor_required));
        assert!(db.get_org(b.id).await.unwrap().unwrap().two_factor_required);
        let rows = db.members_with_people(a.id).await.unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].person_id, Some(p.id));
        assert!(!rows[0].has_password && !rows[0].two_factor);
    },

    the_throttle_state_is_written_whole => async |db| {
        let p = db.ensure_person("ada@example.com", T0).await.unwrap();
        let mut tx = db.begin().await.unwrap();
        let locked = tx.lock_person(p.id).await.unwrap().unwrap();
        assert_eq!(locked.failures, 0);
        let f = tern_store::Failures { failures: 3, first_failure_at: Some(T0), locked_until: Some(T0 + 9), lockouts: 2 };
        tx.set_failures(p.id, f, T0 + 1).await.unwrap();
        tx.commit().await.unwrap();
        let p = db.get_person(p.id).await.unwrap().unwrap();
        assert_eq!((p.failures, p.first_failure_at, p.locked_until, p.lockouts), (3, Some(T0), Some(T0 + 9), 2));
    },
}
