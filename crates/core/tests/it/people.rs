//! People: invitations and links, sign-in refusals, lock-out, the per-address limit,
//! two-factor, sessions, confirmation and members — every refusal, on both backends.

use std::time::Duration;

use serde_json::json;
use tern_core::Core;
use tern_core::people::{self, Client, Inviter, PeopleSettings, SignIn, SignInRefused, Started};
use tern_domain::auth::Role;
use tern_domain::people::totp;
use tern_domain::time::now_ms;
use tern_store::{Db, Org};

use crate::fixtures;

const PASSWORD: &str = "correct horse battery staple";

/// The operator: these tests are about the rules, not who acts.
fn op() -> tern_core::audit::Context {
    tern_core::audit::Context::operator()
}

fn client(address: &str) -> Client {
    Client {
        address: Some(address.into()),
        user_agent: Some("test".into()),
    }
}

async fn setup(db: &Db, settings: PeopleSettings) -> (Core, Org) {
    let core = fixtures::core(db).with_people(settings);
    let org = fixtures::org(db, json!({})).await;
    (core, org)
}

/// Invites `email` as `role` and sets the password through the link.
async fn join(core: &Core, org: &Org, email: &str, role: Role) -> Started {
    let invited = people::invite(core, &op(), org.id, email, role, Inviter::Operator)
        .await
        .unwrap();
    let link = invited.link.expect("an invite link");
    people::use_link(
        core,
        &link,
        Some("Ada"),
        Some(PASSWORD),
        &client("192.0.2.1"),
    )
    .await
    .unwrap()
}

async fn sign_in(
    core: &Core,
    email: &str,
    password: &str,
    address: &str,
) -> Result<SignIn, SignInRefused> {
    people::sign_in(core, email, password, &client(address)).await
}

fn is_wrong(r: &Result<SignIn, SignInRefused>) -> bool {
    matches!(r, Err(SignInRefused::Wrong(_)))
}

async fn started(core: &Core, email: &str) -> Started {
    match sign_in(core, email, PASSWORD, "192.0.2.9").await {
        Ok(SignIn::Started(s)) => s,
        other => panic!("expected a session, got {other:?}"),
    }
}

/// Enrols two-factor for the person of `s`; returns the secret and the recovery codes.
async fn enrol(core: &Core, s: &Started) -> (Vec<u8>, Vec<String>) {
    let e = people::two_factor_begin(core, s.session.person_id)
        .await
        .unwrap();
    // Shown again (a reload, a wrong code): the same secret.
    let again = people::two_factor_pending(core, s.session.person_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again.secret_base32, e.secret_base32);
    let secret = totp::secret_from_base32(&e.secret_base32).unwrap();
    let code = totp::code_at(&secret, now_s());
    let codes = people::two_factor_finish(core, &ctx(s), s.session.person_id, &code)
        .await
        .unwrap();
    assert!(
        people::two_factor_pending(core, s.session.person_id)
            .await
            .unwrap()
            .is_none()
    );
    (secret, codes)
}

/// The person of `s` acting in the app.
fn ctx(s: &Started) -> tern_core::audit::Context {
    tern_core::audit::Context {
        actor: tern_core::audit::Actor::Person {
            id: s.session.person_id,
            email: s.outcome.email.clone(),
        },
        address: Some("192.0.2.9".into()),
    }
}

fn now_s() -> u64 {
    u64::try_from(now_ms() / 1000).unwrap()
}

async fn pending(core: &Core, email: &str) -> String {
    match sign_in(core, email, PASSWORD, "192.0.2.9").await {
        Ok(SignIn::NeedsCode(p)) => p.token,
        other => panic!("expected a code step, got {other:?}"),
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;

    // `tern demo`'s owner signs in by a one-time link and has no password: their first one
    // needs no current password; after that the current one is asked.
    first_password_after_a_sign_in_link => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        people::invite(&core, &tern_core::audit::Context::operator(), org.id, "demo@acme.test", Role::Owner, Inviter::Operator).await.unwrap();
        let link = people::sign_in_link(&core, "demo@acme.test").await.unwrap();
        let s = people::use_link(&core, &link, None, None, &client("192.0.2.1")).await.unwrap();
        assert!(!db.get_person(s.session.person_id).await.unwrap().unwrap().has_password());
        people::change_password(&core, &ctx(&s), s.session.person_id, s.session.id, "", PASSWORD).await.unwrap();
        let again = people::change_password(&core, &ctx(&s), s.session.person_id, s.session.id, "", "another passphrase 99").await.unwrap_err();
        assert_eq!(again.code, tern_domain::ErrorCode::ValidationFailed);
        started(&core, "demo@acme.test").await;
    },
    wrong_password_and_unknown_email_get_the_same_refusal => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        join(&core, &org, "ada@acme.test", Role::Owner).await;
        let wrong = sign_in(&core, "ada@acme.test", "not the password!", "192.0.2.2").await;
        let unknown = sign_in(&core, "nobody@acme.test", PASSWORD, "192.0.2.2").await;
        assert!(is_wrong(&wrong) && is_wrong(&unknown), "{wrong:?} {unknown:?}");
        assert_eq!(wrong.unwrap_err().to_string(), unknown.unwrap_err().to_string());
        // Any case of the email signs in.
        assert!(matches!(sign_in(&core, "ADA@acme.test", PASSWORD, "192.0.2.2").await, Ok(SignIn::Started(_))));
    },

    five_failures_lock_the_account_even_for_the_right_password => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        join(&core, &org, "ada@acme.test", Role::Owner).await;
        for _ in 0..5 {
            assert!(is_wrong(&sign_in(&core, "ada@acme.test", "not the password!", "192.0.2.2").await));
        }
        let locked = sign_in(&core, "ada@acme.test", PASSWORD, "192.0.2.3").await;
        assert!(is_wrong(&locked), "{locked:?}");
    },

    a_repeat_lock_lasts_twice_as_long => async |db| {
        let settings = PeopleSettings { lockout_ms: 400, ..PeopleSettings::default() };
        let (core, org) = setup(&db, settings).await;
        let s = join(&core, &org, "ada@acme.test", Role::Owner).await;
        for _ in 0..5 {
            sign_in(&core, "ada@acme.test", "not the password!", "192.0.2.2").await.unwrap_err();
        }
        let p = db.get_person(s.session.person_id).await.unwrap().unwrap();
        let first = p.locked_until.unwrap() - now_ms();
        assert!(first > 0 && first <= 400, "{first}");
        tokio::time::sleep(Duration::from_millis(450)).await;
        for _ in 0..5 {
            sign_in(&core, "ada@acme.test", "not the password!", "192.0.2.2").await.unwrap_err();
        }
        let p = db.get_person(s.session.person_id).await.unwrap().unwrap();
        let second = p.locked_until.unwrap() - now_ms();
        assert!(second > 400 && second <= 800, "{second}");
        assert_eq!(p.lockouts, 2);
        // Once the lock is over the right password works, and clears the count.
        tokio::time::sleep(Duration::from_millis(850)).await;
        started(&core, "ada@acme.test").await;
        let p = db.get_person(s.session.person_id).await.unwrap().unwrap();
        assert_eq!((p.failures, p.lockouts), (0, 0));
    },

    the_31st_failure_of_an_address_in_a_minute_is_throttled => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        join(&core, &org, "ada@acme.test", Role::Owner).await;
        for i in 0..30 {
            let r = sign_in(&core, &format!("nobody{i}@acme.test"), PASSWORD, "198.51.100.7").await;
            assert!(is_wrong(&r), "{i}: {r:?}");
        }
        let r = sign_in(&core, "ada@acme.test", PASSWORD, "198.51.100.7").await;
        assert!(matches!(r, Err(SignInRefused::Throttled(_))), "{r:?}");
        // Another address still works.
        assert!(matches!(sign_in(&core, "ada@acme.test", PASSWORD, "198.51.100.8").await, Ok(SignIn::Started(_))));
    },

    a_totp_code_is_accepted_once => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        let s = join(&core, &org, "ada@acme.test", Role::Owner).await;
        let (secret, _) = enrol(&core, &s).await;
        // The enrolment used the current step; the next step's code (one step of drift) works once.
        let code = totp::code_at(&secret, now_s() + 30);
        let token = pending(&core, "ada@acme.test").await;
        people::sign_in_code(&core, &token, &code, &client("192.0.2.4")).await.unwrap();
        let token = pending(&core, "ada@acme.test").await;
        let replay = people::sign_in_code(&core, &token, &code, &client("192.0.2.4")).await;
        assert!(matches!(replay, Err(SignInRefused::Wrong(_))), "{replay:?}");
        let bad = people::sign_in_code(&core, "not-a-token", &code, &client("192.0.2.4")).await;
        assert!(matches!(bad, Err(SignInRefused::Wrong(_))), "{bad:?}");
    },

    a_recovery_code_is_used_once => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        let s = join(&core, &org, "ada@acme.test", Role::Owner).await;
        let (_, codes) = enrol(&core, &s).await;
        assert_eq!(codes.len(), 10);
        let token = pending(&core, "ada@acme.test").await;
        people::sign_in_code(&core, &token, &codes[0].to_uppercase(), &client("192.0.2.4")).await.unwrap();
        let again = people::sign_in_code(&core, &token, &codes[0], &client("192.0.2.4")).await;
        assert!(matches!(again, Err(SignInRefused::Wrong(_))), "{again:?}");
        people::sign_in_code(&core, &token, &codes[1].replace('-', ""), &client("192.0.2.4")).await.unwrap();
    },

    an_invite_link_expires_and_is_used_once => async |db| {
        let settings = PeopleSettings { invite_ms: 300, ..PeopleSettings::default() };
        let (core, org) = setup(&db, settings).await;
        let late = people::invite(&core, &op(), org.id, "late@acme.test", Role::Developer, Inviter::Operator).await.unwrap();
        let once = people::invite(&core, &op(), org.id, "once@acme.test", Role::Developer, Inviter::Operator).await.unwrap();
        let once = once.link.unwrap();
        people::use_link(&core, &once, None, Some(PASSWORD), &client("192.0.2.1")).await.unwrap();
        let again = people::use_link(&core, &once, None, Some(PASSWORD), &client("192.0.2.1")).await.unwrap_err();
        assert_eq!(again.code, tern_domain::ErrorCode::NotFound);
        tokio::time::sleep(Duration::from_millis(350)).await;
        let late = late.link.unwrap();
        assert!(people::link_info(&core, &late).await.unwrap().is_none());
        let expired = people::use_link(&core, &late, None, Some(PASSWORD), &client("192.0.2.1")).await.unwrap_err();
        assert_eq!(expired.code, tern_domain::ErrorCode::NotFound);
        // A member who already has a password gets no link.
        let other = fixtures::org(&db, json!({})).await;
        let known = people::invite(&core, &op(), other.id, "once@acme.test", Role::Admin, Inviter::Operator).await.unwrap();
        assert!(known.link.is_none());
    },

    a_refused_password_leaves_the_invite_valid => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        let invited = people::invite(&core, &op(), org.id, "ada.lovelace@acme.test", Role::Admin, Inviter::Operator).await.unwrap();
        let link = invited.link.unwrap();
        for bad in ["short", "password1234", &"x".repeat(129), "I am Ada.Lovelace really"] {
            let p = people::use_link(&core, &link, Some("Ada"), Some(bad), &client("192.0.2.1")).await.unwrap_err();
            assert_eq!(p.code, tern_domain::ErrorCode::ValidationFailed, "{bad}: {p:?}");
        }
        let none = people::use_link(&core, &link, Some("Ada"), None, &client("192.0.2.1")).await.unwrap_err();
        assert_eq!(none.code, tern_domain::ErrorCode::ValidationFailed);
        let info = people::link_info(&core, &link).await.unwrap().unwrap();
        assert_eq!(info.person.email, "ada.lovelace@acme.test");
        assert_eq!(info.org_name.as_deref(), Some("Acme"));
        let s = people::use_link(&core, &link, Some("Ada"), Some(PASSWORD), &client("192.0.2.1")).await.unwrap();
        let view = people::session(&core, &s.token, now_ms()).await.unwrap().unwrap();
        assert_eq!(view.person.name, "Ada");
        assert_eq!(view.current.unwrap().member.org_id, org.id);
    },

    sessions_expire_when_idle_or_too_old => async |db| {
        let settings = PeopleSettings { session_idle_ms: 120_000, session_max_ms: 600_000, ..PeopleSettings::default() };
        let (core, org) = setup(&db, settings).await;
        let s = join(&core, &org, "ada@acme.test", Role::Owner).await;
        let t0 = s.session.created_at;
        assert!(people::session(&core, &s.token, t0 + 119_000).await.unwrap().is_some());
        // Seen at t0 + 119 s: idle counts from there.
        assert!(people::session(&core, &s.token, t0 + 238_000).await.unwrap().is_some());
        assert!(people::session(&core, &s.token, t0 + 358_000).await.unwrap().is_none(), "idle");
        assert!(people::session(&core, &s.token, t0 + 1).await.unwrap().is_none(), "ended");
        let s = started(&core, "ada@acme.test").await;
        let t0 = s.session.created_at;
        for step in 1..=5 {
            assert!(people::session(&core, &s.token, t0 + step * 100_000).await.unwrap().is_some());
        }
        assert!(people::session(&core, &s.token, t0 + 600_000).await.unwrap().is_none(), "absolute");
        assert!(people::session(&core, "no such token", t0).await.unwrap().is_none());
    },

    signing_out_ends_one_or_every_session_and_a_new_password_ends_the_others => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        let a = join(&core, &org, "ada@acme.test", Role::Owner).await;
        let b = started(&core, "ada@acme.test").await;
        assert_ne!(a.token, b.token);
        people::sign_out(&core, a.session.id).await.unwrap();
        assert!(people::session(&core, &a.token, now_ms()).await.unwrap().is_none());
        assert!(people::session(&core, &b.token, now_ms()).await.unwrap().is_some());
        let c = started(&core, "ada@acme.test").await;
        people::sign_out_everywhere(&core, b.session.person_id).await.unwrap();
        for s in [&b, &c] {
            assert!(people::session(&core, &s.token, now_ms()).await.unwrap().is_none());
        }
        let d = started(&core, "ada@acme.test").await;
        let e = started(&core, "ada@acme.test").await;
        let wrong = people::change_password(&core, &ctx(&d), d.session.person_id, d.session.id, "nope nope nope", "a brand new passphrase").await.unwrap_err();
        assert_eq!(wrong.code, tern_domain::ErrorCode::ValidationFailed);
        people::change_password(&core, &ctx(&d), d.session.person_id, d.session.id, PASSWORD, "a brand new passphrase").await.unwrap();
        assert!(people::session(&core, &d.token, now_ms()).await.unwrap().is_some());
        assert!(people::session(&core, &e.token, now_ms()).await.unwrap().is_none());
        assert!(is_wrong(&sign_in(&core, "ada@acme.test", PASSWORD, "192.0.2.5").await));
        let listed = people::sessions(&core, d.session.person_id).await.unwrap();
        assert!(listed.iter().any(|s| s.id == d.session.id && s.ended_at.is_none()));
        // One's own session can be ended from the list; another person's cannot.
        let Ok(SignIn::Started(f)) = sign_in(&core, "ada@acme.test", "a brand new passphrase", "192.0.2.9").await else {
            panic!("the new password signs in");
        };
        let other = join(&core, &org, "bob@acme.test", Role::Developer).await;
        assert!(people::end_session(&core, other.session.person_id, f.session.id).await.is_err());
        people::end_session(&core, f.session.person_id, f.session.id).await.unwrap();
        assert!(people::session(&core, &f.token, now_ms()).await.unwrap().is_none());
    },

    a_removed_member_no_longer_sees_the_organisation => async |db| {
        let (core, acme) = setup(&db, PeopleSettings::default()).await;
        let other = fixtures::org(&db, json!({})).await;
        join(&core, &acme, "owner@acme.test", Role::Owner).await;
        let s = join(&core, &acme, "dev@acme.test", Role::Developer).await;
        let in_other = people::invite(&core, &op(), other.id, "dev@acme.test", Role::Admin, Inviter::Operator).await.unwrap();
        people::switch_org(&core, s.session.id, s.session.person_id, other.id).await.unwrap();
        let view = people::session(&core, &s.token, now_ms()).await.unwrap().unwrap();
        assert_eq!(view.memberships.len(), 2);
        assert_eq!(view.current.unwrap().member.org_id, other.id);
        assert_eq!(in_other.member.role, Role::Admin);
        let dev = view.memberships.iter().find(|m| m.member.org_id == acme.id).unwrap().member.clone();
        people::remove_member(&core, &op(), acme.id, Role::Admin, dev.id).await.unwrap();
        let view = people::session(&core, &s.token, now_ms()).await.unwrap().unwrap();
        assert_eq!(view.memberships.len(), 1);
        assert_eq!(view.current.unwrap().member.org_id, other.id);
        assert!(people::switch_org(&core, s.session.id, s.session.person_id, acme.id).await.is_err());
        let members = people::members(&core, acme.id).await.unwrap();
        assert_eq!(members.len(), 1);
        assert!(members[0].has_password && !members[0].two_factor);
        // Removed from the last organisation: the person's sessions end.
        people::remove_member(&core, &op(), other.id, Role::Admin, in_other.member.id).await.unwrap();
        assert!(people::session(&core, &s.token, now_ms()).await.unwrap().is_none());
    },

    the_last_owner_stays_and_nobody_grants_above_their_role => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        let owner = people::invite(&core, &op(), org.id, "owner@acme.test", Role::Owner, Inviter::Operator).await.unwrap().member;
        let admin = people::invite(&core, &op(), org.id, "admin@acme.test", Role::Admin, Inviter::Operator).await.unwrap().member;
        let dev = people::invite(&core, &op(), org.id, "dev@acme.test", Role::Developer, Inviter::Operator).await.unwrap().member;
        let p = people::remove_member(&core, &op(), org.id, Role::Owner, owner.id).await.unwrap_err();
        assert!(p.is_conflict(tern_domain::error::ConflictReason::LastOwner), "{p:?}");
        let p = people::change_role(&core, &op(), org.id, Role::Owner, owner.id, Role::Admin).await.unwrap_err();
        assert!(p.is_conflict(tern_domain::error::ConflictReason::LastOwner), "{p:?}");
        let denied = tern_domain::ErrorCode::PermissionDenied;
        assert_eq!(people::change_role(&core, &op(), org.id, Role::Admin, dev.id, Role::Owner).await.unwrap_err().code, denied);
        assert_eq!(people::change_role(&core, &op(), org.id, Role::Admin, owner.id, Role::Developer).await.unwrap_err().code, denied);
        assert_eq!(people::remove_member(&core, &op(), org.id, Role::Admin, owner.id).await.unwrap_err().code, denied);
        assert_eq!(people::change_role(&core, &op(), org.id, Role::Developer, dev.id, Role::Developer).await.unwrap_err().code, denied);
        let by_admin = Inviter::Member { role: Role::Admin };
        assert_eq!(people::invite(&core, &op(), org.id, "x@acme.test", Role::Owner, by_admin).await.unwrap_err().code, denied);
        let by_dev = Inviter::Member { role: Role::Developer };
        assert_eq!(people::invite(&core, &op(), org.id, "x@acme.test", Role::Developer, by_dev).await.unwrap_err().code, denied);
        people::invite(&core, &op(), org.id, "x@acme.test", Role::Admin, by_admin).await.unwrap();
        let dup = people::invite(&core, &op(), org.id, "X@acme.test", Role::Admin, by_admin).await.unwrap_err();
        assert!(dup.is_conflict(tern_domain::error::ConflictReason::AlreadyExists), "{dup:?}");
        // With a second owner, the first can step down.
        people::change_role(&core, &op(), org.id, Role::Owner, admin.id, Role::Owner).await.unwrap();
        people::change_role(&core, &op(), org.id, Role::Owner, owner.id, Role::Admin).await.unwrap();
        people::remove_member(&core, &op(), org.id, Role::Owner, owner.id).await.unwrap();
    },

    identity_confirmation_lasts_the_window => async |db| {
        let settings = PeopleSettings { confirm_ms: 60_000, ..PeopleSettings::default() };
        let (core, org) = setup(&db, settings.clone()).await;
        let s = join(&core, &org, "ada@acme.test", Role::Owner).await;
        let (id, person) = (s.session.id, s.session.person_id);
        assert!(!people::is_confirmed(&s.session, &settings, now_ms()));
        let wrong = people::confirm(&core, id, person, "not the password").await.unwrap_err();
        assert_eq!(wrong.code, tern_domain::ErrorCode::ValidationFailed);
        people::confirm(&core, id, person, PASSWORD).await.unwrap();
        let session = people::session(&core, &s.token, now_ms()).await.unwrap().unwrap().session;
        let at = session.confirmed_at.unwrap();
        assert!(people::is_confirmed(&session, &settings, at + 59_999));
        assert!(!people::is_confirmed(&session, &settings, at + 60_000));
        // With two-factor, the code confirms (once), not the password.
        let (secret, _) = enrol(&core, &s).await;
        assert!(people::confirm(&core, id, person, PASSWORD).await.is_err());
        let code = totp::code_at(&secret, now_s() + 30);
        people::confirm(&core, id, person, &code).await.unwrap();
        assert!(people::confirm(&core, id, person, &code).await.is_err());
    },

    two_factor_required_and_the_operator_reset => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        let s = join(&core, &org, "ada@acme.test", Role::Owner).await;
        people::set_two_factor_required(&core, &op(), org.id, true).await.unwrap();
        let view = people::session(&core, &s.token, now_ms()).await.unwrap().unwrap();
        assert!(view.needs_two_factor);
        enrol(&core, &s).await;
        let view = people::session(&core, &s.token, now_ms()).await.unwrap().unwrap();
        assert!(!view.needs_two_factor);
        let token = people::reset(&core, &op(), "ADA@acme.test").await.unwrap();
        assert!(people::session(&core, &s.token, now_ms()).await.unwrap().is_none());
        let p = db.get_person(s.session.person_id).await.unwrap().unwrap();
        assert!(!p.has_two_factor());
        let info = people::link_info(&core, &token).await.unwrap().unwrap();
        assert_eq!(info.purpose, tern_domain::people::LinkPurpose::Reset);
        people::use_link(&core, &token, None, Some("another good passphrase"), &client("192.0.2.1")).await.unwrap();
        assert!(people::reset(&core, &op(), "nobody@acme.test").await.is_err());
        // A sign-in link signs in directly, once.
        let link = people::sign_in_link(&core, "ada@acme.test").await.unwrap();
        people::use_link(&core, &link, None, None, &client("192.0.2.1")).await.unwrap();
        assert!(people::use_link(&core, &link, None, None, &client("192.0.2.1")).await.is_err());
        people::two_factor_disable(&core, &ctx(&s), s.session.person_id).await.unwrap();
    },

    two_factor_and_password_changes_are_audited_and_the_requirement_keeps_two_factor_on => async |db| {
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        let s = join(&core, &org, "ada@acme.test", Role::Owner).await;
        let actions = |core: Core| async move {
            core.db.list_audit(org.id, None, None, 50).await.unwrap()
                .into_iter()
                .filter(|r| r.actor_label == "ada@acme.test" && r.address.as_deref() == Some("192.0.2.9"))
                .map(|r| r.action)
                .collect::<Vec<_>>()
        };
        enrol(&core, &s).await;
        people::set_two_factor_required(&core, &tern_core::audit::Context::operator(), org.id, true).await.unwrap();
        let refused = people::two_factor_disable(&core, &ctx(&s), s.session.person_id).await.unwrap_err();
        assert_eq!(refused.code, tern_domain::ErrorCode::PermissionDenied);
        assert!(refused.message.contains("requires it"), "{}", refused.message);
        assert!(db.get_person(s.session.person_id).await.unwrap().unwrap().has_two_factor());
        people::set_two_factor_required(&core, &tern_core::audit::Context::operator(), org.id, false).await.unwrap();
        people::two_factor_disable(&core, &ctx(&s), s.session.person_id).await.unwrap();
        assert!(!db.get_person(s.session.person_id).await.unwrap().unwrap().has_two_factor());
        let other = started(&core, "ada@acme.test").await;
        let ended = people::change_password(&core, &ctx(&s), s.session.person_id, s.session.id, PASSWORD, "a brand new passphrase").await.unwrap();
        assert_eq!(ended, 1);
        assert!(people::session(&core, &other.token, now_ms()).await.unwrap().is_none());
        // Newest first.
        assert_eq!(actions(core.clone()).await, ["password.changed", "two_factor.disabled", "two_factor.enabled"]);
        // The name: trimmed, neither blank nor over 100 characters.
        people::set_name(&core, s.session.person_id, "  Ada L.  ").await.unwrap();
        assert_eq!(db.get_person(s.session.person_id).await.unwrap().unwrap().name, "Ada L.");
        assert!(people::set_name(&core, s.session.person_id, "   ").await.is_err());
        assert!(people::set_name(&core, s.session.person_id, &"x".repeat(101)).await.is_err());
    },

    member_changes_are_audited_with_who_did_them => async |db| {
        use tern_core::audit::{self, Actor, Context, PageRequest};
        let (core, org) = setup(&db, PeopleSettings::default()).await;
        let owner = join(&core, &org, "owner@acme.test", Role::Owner).await;
        let by = Context {
            actor: Actor::Person { id: owner.session.person_id, email: "owner@acme.test".into() },
            address: Some("192.0.2.7".into()),
        };
        let dev = people::invite(&core, &by, org.id, "dev@acme.test", Role::Developer, Inviter::Member { role: Role::Owner }).await.unwrap().member;
        people::change_role(&core, &by, org.id, Role::Owner, dev.id, Role::Admin).await.unwrap();
        // A refused change writes nothing.
        let owner_member = people::members(&core, org.id).await.unwrap()[0].member.clone();
        assert!(people::change_role(&core, &by, org.id, Role::Owner, owner_member.id, Role::Admin).await.is_err());
        people::set_two_factor_required(&core, &by, org.id, true).await.unwrap();
        people::reset(&core, &op(), "dev@acme.test").await.unwrap();
        people::remove_member(&core, &by, org.id, Role::Owner, dev.id).await.unwrap();
        let page = audit::list(&db, org.id, &PageRequest { action_prefix: Some("member.".into()), ..PageRequest::default() }).await.unwrap();
        let actions: Vec<&str> = page.items.iter().map(|e| e.action.as_str()).collect();
        // member.invited twice: the owner (by the operator), then dev.
        assert_eq!(actions, ["member.removed", "member.reset", "member.role_changed", "member.invited", "member.invited"]);
        let changed = &page.items[2];
        assert_eq!(changed.actor_label, "owner@acme.test");
        assert_eq!(changed.address.as_deref(), Some("192.0.2.7"));
        assert_eq!(changed.target_id.as_deref(), Some(dev.id.to_string().as_str()));
        let d = changed.detail.clone().unwrap();
        assert_eq!((d["from"].as_str(), d["to"].as_str()), (Some("developer"), Some("admin")));
        assert_eq!(page.items[1].actor_kind, "operator");
        let org_page = audit::list(&db, org.id, &PageRequest { action_prefix: Some("org.".into()), ..PageRequest::default() }).await.unwrap();
        assert_eq!(org_page.items.len(), 1);
        assert_eq!(org_page.items[0].detail.clone().unwrap()["required"], true);
    },
}
