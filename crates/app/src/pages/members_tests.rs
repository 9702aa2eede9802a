//! The members pages' templates: disabled options with their reason, the link once, the
//! last owner explained, escaping.

use super::*;

fn frame() -> Frame {
    Frame::sample("ada@acme.test", "admin", Nav::Members)
}

fn row(name: &str, role: Role, manageable: bool) -> Row {
    Row {
        id: "m1".into(),
        name: name.into(),
        email: "bob@acme.test".into(),
        role,
        two_factor: false,
        pending: name.is_empty(),
        is_you: false,
        manageable,
    }
}

fn list<'a>(frame: &'a Frame, own: Role) -> MembersPage<'a> {
    MembersPage {
        frame,
        org_name: "Acme",
        rows: vec![
            row("<script>alert(1)</script>", Role::Owner, own == Role::Owner),
            row("", Role::Developer, own != Role::Developer),
        ],
        can_manage: own != Role::Developer,
        roles: role_options(own, Role::Developer),
        email: String::new(),
        email_error: None,
        form_error: None,
        invited: None,
        link_validity: duration_words(604_800_000),
    }
}

#[test]
fn an_admin_sees_owner_disabled_with_the_reason() {
    let f = frame();
    let html = list(&f, Role::Admin).render().unwrap();
    assert!(
        html.contains("<option value=\"owner\" disabled>Owner — above your role (admin)</option>"),
        "{html}"
    );
    assert!(html.contains("<option value=\"admin\">Admin</option>"));
    assert!(html.contains("<option value=\"developer\" selected>Developer</option>"));
    // The owner's row has no "Manage" link for an admin; the developer's has.
    assert_eq!(html.matches("href=\"/app/members/m1\"").count(), 1);
    assert!(html.contains("invited, no password yet"));
    assert!(!html.contains("<script>alert(1)"));
    assert!(html.contains("action=\"/app/members/invite\""));
}

#[test]
fn a_developer_sees_the_list_only() {
    let f = frame();
    let html = list(&f, Role::Developer).render().unwrap();
    assert!(!html.contains("/app/members/invite"));
    assert!(!html.contains("href=\"/app/members/m1\""));
    assert!(html.contains("Only owners and admins invite people"));
}

#[test]
fn the_invite_link_is_shown_with_its_terms() {
    let f = frame();
    let mut page = list(&f, Role::Owner);
    page.invited = Some(InvitedLink {
        email: "bob@acme.test".into(),
        role: "Developer",
        url: "https://tern.example/app/invite/abc\"def".into(),
    });
    let html = page.render().unwrap();
    assert!(html.contains("No email is sent"));
    assert!(html.contains("it works once, for 7 days"));
    assert!(html.contains("data-copy=\"#invite-link\""));
    assert!(html.contains("value=\"https://tern.example/app/invite/abc&#34;def\""));
}

fn member<'a>(frame: &'a Frame, last_owner: bool) -> MemberPage<'a> {
    MemberPage {
        frame,
        row: row("Bob", Role::Owner, true),
        roles: role_options(Role::Owner, Role::Owner),
        last_owner,
        read_only: None,
        confirm: ConfirmStep {
            ask: true,
            label: "Your password",
            is_code: false,
            error: Some("Enter your password to confirm it is you.".into()),
        },
        role_error: None,
    }
}

#[test]
fn the_role_form_asks_for_the_confirmation() {
    let f = frame();
    let html = member(&f, false).render().unwrap();
    assert!(html.contains("action=\"/app/members/m1/role\""));
    assert!(html.contains("<label for=\"confirm\">Your password</label>"));
    assert!(html.contains("autocomplete=\"current-password\""));
    assert!(html.contains("Enter your password to confirm it is you."));
    assert!(html.contains("href=\"/app/members/m1/remove\""));
}

#[test]
fn the_last_owner_is_explained_and_has_no_forms() {
    let f = frame();
    let html = member(&f, true).render().unwrap();
    assert!(html.contains("last owner"));
    assert!(!html.contains("action=\"/app/members/m1/role\""));
    assert!(!html.contains("href=\"/app/members/m1/remove\""));
    let remove = RemovePage {
        frame: &f,
        org_name: "Acme",
        row: row("Bob", Role::Owner, true),
        last_owner: true,
        error: None,
    }
    .render()
    .unwrap();
    assert!(remove.contains("cannot be removed"));
    assert!(!remove.contains("action=\"/app/members/m1/remove\""));
}

#[test]
fn durations_read_well() {
    assert_eq!(duration_words(604_800_000), "7 days");
    assert_eq!(duration_words(86_400_000), "1 day");
    assert_eq!(duration_words(7_200_000), "2 hours");
    assert_eq!(duration_words(90_000), "1 minute");
    assert_eq!(duration_words(5_000), "1 minute");
}
