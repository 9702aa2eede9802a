//! Keys: create, rotate and revoke by the operator and by a person, each with its audit
//! entry (right actor, action and target, no secret); refusals typed for the app.

use serde_json::json;
use tern_core::audit::{self, Actor, AuditEntry, Context, PageRequest};
use tern_core::keys::{self, CreatedKey, NewKey};
use tern_core::testkit::{Seed, Seeded, assert_no_secret};
use tern_core::webhooks::subscriptions;
use tern_domain::ErrorCode;
use tern_domain::auth::{Preset, Role};
use tern_domain::new_id;
use tern_domain::plan::Entitlement;
use tern_store::Db;
use uuid::Uuid;

use crate::fixtures;

fn person(email: &str) -> Context {
    Context {
        actor: Actor::Person {
            id: new_id(),
            email: email.to_string(),
        },
        address: Some("203.0.113.9".to_string()),
    }
}

fn new_key(member_id: Uuid, preset: Option<Preset>, permissions: &[String]) -> NewKey<'_> {
    NewKey {
        member_id,
        name: "ci",
        preset,
        permissions,
        mode: tern_domain::auth::Mode::Live,
    }
}

/// Acme with one member.
async fn acme(db: &Db, email: &str, role: Role) -> Seeded {
    Seed::org("Acme")
        .member(email, role)
        .create(db, &fixtures::key())
        .await
}

/// A read-only key of member `member_id`, created by `ctx`.
async fn read_only_key(
    db: &Db,
    ctx: &Context,
    org_id: Uuid,
    member_id: Uuid,
) -> tern_core::Result<CreatedKey> {
    keys::create(
        db,
        &test_master_key(),
        ctx,
        org_id,
        new_key(member_id, Some(Preset::ReadOnly), &[]),
    )
    .await
}

/// A read-only key of `member_id` created, rotated, and the new one revoked, all by `ctx`:
/// (created, rotated).
async fn create_rotate_revoke(
    db: &Db,
    ctx: &Context,
    org_id: Uuid,
    member_id: Uuid,
) -> (CreatedKey, CreatedKey) {
    let created = read_only_key(db, ctx, org_id, member_id).await.unwrap();
    let rotated = keys::rotate(db, ctx, org_id, created.key.id).await.unwrap();
    let revoked = keys::revoke(db, ctx, org_id, rotated.key.id).await.unwrap();
    assert!(revoked.revoked_at.is_some());
    (created, rotated)
}

/// The log without the seed's own invitations (`member.invited` by the operator).
async fn log(db: &Db, org_id: Uuid) -> Vec<AuditEntry> {
    let mut items = audit::list(db, org_id, &PageRequest::default())
        .await
        .unwrap()
        .items;
    items.retain(|e| !e.action.starts_with("member."));
    items
}

async fn operator_create_rotate_revoke_are_audited(db: Db) {
    let seeded = acme(&db, "owner@acme.test", Role::Owner).await;
    let (org, m) = (&seeded.org, seeded.member("owner@acme.test"));
    let op = Context::operator();
    let (created, rotated) = create_rotate_revoke(&db, &op, org.id, m.id).await;

    let entries = log(&db, org.id).await;
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["key.revoked", "key.rotated", "key.created"]);
    for e in &entries {
        assert_eq!(e.actor_kind, "operator");
        assert_eq!(e.actor_label, "operator");
        assert_eq!(e.actor_id, None);
        assert_eq!(e.target_kind.as_deref(), Some("api_key"));
        assert_eq!(e.org_id, Some(org.id));
    }
    assert_eq!(entries[2].target_id, Some(created.key.id.to_string()));
    assert_eq!(entries[1].target_id, Some(created.key.id.to_string()));
    assert_eq!(
        entries[1].detail.as_ref().unwrap()["new_key_id"],
        json!(rotated.key.id)
    );
    assert_eq!(entries[0].target_id, Some(rotated.key.id.to_string()));
    assert_eq!(
        entries[2].detail.as_ref().unwrap()["prefix"],
        json!(created.key.prefix)
    );
    assert_no_secret(&entries, &[&created.plaintext, &rotated.plaintext]);
}

async fn a_persons_changes_name_the_person(db: Db) {
    let seeded = acme(&db, "dev@acme.test", Role::Developer).await;
    let (org, m) = (&seeded.org, seeded.member("dev@acme.test"));
    let ctx = person("dev@acme.test");
    let (created, rotated) = create_rotate_revoke(&db, &ctx, org.id, m.id).await;
    let entries = log(&db, org.id).await;
    assert_eq!(entries.len(), 3);
    let Actor::Person { id, .. } = &ctx.actor else {
        unreachable!()
    };
    for e in &entries {
        assert_eq!(e.actor_kind, "person");
        assert_eq!(e.actor_label, "dev@acme.test");
        assert_eq!(e.actor_id, Some(id.to_string()));
        assert_eq!(e.address.as_deref(), Some("203.0.113.9"));
    }
    assert_no_secret(&entries, &[&created.plaintext, &rotated.plaintext]);

    // The keys page: newest first, revoked ones too, with the creator.
    let rows = keys::list(&db, org.id).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].key.id, rotated.key.id);
    assert!(rows.iter().all(|r| r.key.revoked_at.is_some()));
    assert_eq!(rows[0].created_by_email, "dev@acme.test");
    assert_eq!(rows[0].creator_role, Some(Role::Developer));
    let one = keys::get(&db, org.id, created.key.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(one.key.replaced_by, Some(rotated.key.id));
    assert!(
        keys::get(&db, new_id(), created.key.id)
            .await
            .unwrap()
            .is_none()
    );
}

async fn another_orgs_key_is_not_found(db: Db) {
    let a = Seed::org("Acme")
        .key("owner@acme.test", Preset::ReadOnly)
        .create(&db, &fixtures::key())
        .await;
    let b = Seed::org("Other").create(&db, &fixtures::key()).await;
    let id = a.keys[0].key.id;
    let op = Context::operator();
    let e = keys::revoke(&db, &op, b.org.id, id).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    let e = keys::rotate(&db, &op, b.org.id, id).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);
    // Untouched, and nothing recorded anywhere.
    assert!(
        db.get_api_key(id)
            .await
            .unwrap()
            .unwrap()
            .revoked_at
            .is_none()
    );
    assert!(log(&db, b.org.id).await.is_empty());
    // The seed's own key was created by the operator.
    assert_eq!(log(&db, a.org.id).await.len(), 1);
}

async fn refusals_are_typed(db: Db) {
    let seeded = Seed::org("Acme")
        .member("dev@acme.test", Role::Developer)
        .limit(Entitlement::ApiKeys, 1)
        .create(&db, &fixtures::key())
        .await;
    let (org, m) = (&seeded.org, seeded.member("dev@acme.test"));
    let ctx = person("dev@acme.test");

    // A permission above the role names it.
    let send = ["messages.send".to_string()];
    let e = keys::create(
        &db,
        &test_master_key(),
        &ctx,
        org.id,
        new_key(m.id, None, &send),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::PermissionDenied);
    assert_eq!(e.details["permission"], json!("messages.send"));
    assert_eq!(e.details["role"], json!("developer"));
    assert!(e.message.contains("messages.send"), "{}", e.message);

    // An unknown permission, none, a bad name: validation.
    let bogus = ["messages.sned".to_string()];
    for (name, perms) in [("ci", &bogus[..]), ("ci", &[][..]), ("  ", &bogus[..])] {
        let k = NewKey {
            member_id: m.id,
            name,
            preset: None,
            permissions: perms,
            mode: tern_domain::auth::Mode::Live,
        };
        let e = keys::create(&db, &test_master_key(), &ctx, org.id, k)
            .await
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::ValidationFailed, "{name:?} {perms:?}");
    }

    // The limit carries limit and used.
    read_only_key(&db, &ctx, org.id, m.id).await.unwrap();
    let e = read_only_key(&db, &ctx, org.id, m.id).await.unwrap_err();
    assert_eq!(e.code, ErrorCode::PlanLimitReached);
    assert_eq!(e.details["limit"], json!(1));
    assert_eq!(e.details["used"], json!(1));
    // Only the one created key was recorded.
    assert_eq!(log(&db, org.id).await.len(), 1);
}

async fn a_plan_without_the_api_names_the_upgrade(db: Db) {
    let seeded = Seed::org("Acme")
        .plan("free")
        .member("owner@acme.test", Role::Owner)
        .create(&db, &fixtures::key())
        .await;
    let m = seeded.member("owner@acme.test");
    let e = read_only_key(&db, &Context::operator(), seeded.org.id, m.id)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::PlanFeatureUnavailable);
    assert_eq!(e.details["plan"], json!("free"));
    assert!(e.details["upgrade_plan"].is_string(), "{:?}", e.details);
}

async fn who_may_manage_a_key(db: Db) {
    let seeded = Seed::org("Acme")
        .member("dev@acme.test", Role::Developer)
        .key("dev@acme.test", Preset::ReadOnly)
        .member("dev2@acme.test", Role::Developer)
        .member("admin@acme.test", Role::Admin)
        .create(&db, &fixtures::key())
        .await;
    let key = &seeded.keys[0].key;
    let dev = seeded.member("dev@acme.test");
    let dev2 = seeded.member("dev2@acme.test");
    let admin = seeded.member("admin@acme.test");
    assert!(keys::can_manage(dev.role, dev.id, key));
    assert!(!keys::can_manage(dev2.role, dev2.id, key));
    assert!(keys::can_manage(admin.role, admin.id, key));
    assert!(keys::can_manage(Role::Owner, new_id(), key));
}

async fn the_log_pages_newest_first_and_filters(db: Db) {
    let seeded = acme(&db, "owner@acme.test", Role::Owner).await;
    let (org, m) = (&seeded.org, seeded.member("owner@acme.test"));
    let op = Context::operator();
    for _ in 0..3 {
        read_only_key(&db, &op, org.id, m.id).await.unwrap();
    }
    let other = audit::Entry::new(Some(org.id), audit::SIGN_IN_SUCCEEDED);
    audit::record(&db, &person("owner@acme.test"), other)
        .await
        .unwrap();

    let mut seen = Vec::new();
    let mut page = PageRequest {
        limit: 2,
        ..Default::default()
    };
    loop {
        let p = audit::list(&db, org.id, &page).await.unwrap();
        seen.extend(p.items);
        match p.next {
            Some(n) => page.before = Some(n),
            None => break,
        }
    }
    assert!(
        seen.windows(2)
            .all(|w| (w[0].at, w[0].id) > (w[1].at, w[1].id))
    );
    seen.retain(|e| !e.action.starts_with("member."));
    assert_eq!(seen.len(), 4);

    let keys_only = PageRequest {
        action_prefix: Some("key.".into()),
        ..Default::default()
    };
    let p = audit::list(&db, org.id, &keys_only).await.unwrap();
    assert_eq!(p.items.len(), 3);
    assert!(p.next.is_none());
}

/// The app creates a subscription for a key the person manages: it belongs to the key, the
/// audit names the person; the organisation's reads group it by key, another org gets 404.
async fn a_person_acting_for_a_key(db: Db) {
    let seeded = Seed::org("Acme")
        .member("dev@acme.test", Role::Developer)
        .key("dev@acme.test", Preset::ReadOnly)
        .create(&db, &fixtures::key())
        .await;
    let other = Seed::org("Other").create(&db, &fixtures::key()).await;
    let core = fixtures::core(&db);
    let org = &seeded.org;
    let row = keys::get(&db, org.id, seeded.keys[0].key.id)
        .await
        .unwrap()
        .unwrap();
    let ctx = person("dev@acme.test");
    let p = tern_core::Principal::for_key_acting_as(org.clone(), &row, ctx.clone()).unwrap();
    assert_eq!(p.key_id, row.key.id);
    assert!(tern_core::Principal::for_key_acting_as(other.org.clone(), &row, ctx.clone()).is_err());

    let body = json!({"url": "https://hooks.example.com/tern", "events": ["message.status"]});
    let now = tern_domain::time::now_ms();
    let created = subscriptions::create(&core, &p, &body, now).await.unwrap();
    assert_eq!(created.subscription.api_key_id, row.key.id);
    let e = &log(&db, org.id).await[0];
    assert_eq!(
        (
            e.action.as_str(),
            e.actor_kind.as_str(),
            e.actor_label.as_str()
        ),
        ("subscription.created", "person", "dev@acme.test")
    );
    assert!(!format!("{e:?}").contains(&created.secret));

    let listed = subscriptions::list_for_org(&core, org.id).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].0.id, listed[0].1.id),
        (created.subscription.id, row.key.id)
    );
    let (s, k) = subscriptions::get_in_org(&core, org.id, created.subscription.id)
        .await
        .unwrap();
    assert_eq!((s.id, k.name.as_str()), (created.subscription.id, "test"));
    let e = subscriptions::get_in_org(&core, other.org.id, s.id)
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::NotFound);

    // A revoked key cannot be acted for.
    keys::revoke(&db, &ctx, org.id, row.key.id).await.unwrap();
    let row = keys::get(&db, org.id, row.key.id).await.unwrap().unwrap();
    let e = tern_core::Principal::for_key_acting_as(org.clone(), &row, ctx).unwrap_err();
    assert_eq!(e.code, ErrorCode::Conflict);
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    operator_create_rotate_revoke_are_audited,
    a_persons_changes_name_the_person,
    another_orgs_key_is_not_found,
    refusals_are_typed,
    a_plan_without_the_api_names_the_upgrade,
    who_may_manage_a_key,
    the_log_pages_newest_first_and_filters,
    a_person_acting_for_a_key,
}

/// A master key for keys made in this test (a test key's test space seals its token).
fn test_master_key() -> tern_domain::crypto::MasterKey {
    tern_domain::crypto::MasterKey::from_bytes([7; 32])
}
