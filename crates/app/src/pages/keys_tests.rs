//! The keys pages' templates: options a role cannot hold are disabled with the reason, the
//! value page says it is shown once, every variable is escaped.

use super::*;

const EVIL: &str = "<script>alert(1)</script>";

pub(crate) fn frame() -> Frame {
    Frame::sample("ada@example.com", "developer", Nav::Keys)
}

fn plan(public_api: bool, limit: Option<u64>, used: u64) -> PlanInfo {
    PlanInfo {
        plan: "starter".into(),
        public_api,
        upgrade: Some("starter"),
        limit,
        used,
    }
}

fn new_page(role: Role) -> NewPage {
    NewPage {
        frame: frame(),
        plan: plan(true, Some(10), 1),
        name: EVIL.into(),
        presets: preset_options(role, "read_only"),
        custom: false,
        perms: perm_options(role, &[]),
        summary: Some(EVIL.into()),
        problems: FieldProblems::default(),
        confirm_error: None,
        need_confirm: true,
        confirm_label: "Your password",
        test: false,
    }
}

fn tag<'a>(html: &'a str, id: &str) -> &'a str {
    let at = html.find(&format!("id=\"{id}\"")).expect(id);
    let start = html[..at].rfind('<').unwrap();
    &html[start..at + html[at..].find('>').unwrap()]
}

#[test]
fn a_developer_sees_what_they_cannot_grant_disabled_with_the_reason() {
    let html = new_page(Role::Developer).render().unwrap();
    assert!(tag(&html, "preset-send_messages").contains(" disabled"));
    assert!(tag(&html, "perm-messages.send").contains(" disabled"));
    assert!(tag(&html, "perm-campaigns.send").contains(" disabled"));
    assert!(!tag(&html, "perm-messages.read").contains(" disabled"));
    assert!(!tag(&html, "preset-full_access").contains(" disabled"));
    assert!(html.contains("Developers cannot send messages"));
    assert!(html.contains("Developers cannot send campaigns"));
    assert!(html.contains("<label for=\"confirm\">Your password</label>"));
    assert!(!html.contains(EVIL), "escaped");
    let owner = new_page(Role::Owner).render().unwrap();
    assert!(!owner.contains(" disabled"));
}

#[test]
fn the_plan_is_explained_instead_of_the_form() {
    let mut page = new_page(Role::Owner);
    page.summary = None;
    page.plan = plan(false, Some(2), 0);
    page.plan.plan = "free".into();
    let html = page.render().unwrap();
    assert!(html.contains("plan, free, does not include the public API"));
    assert!(html.contains("Upgrade to the starter plan"));
    assert!(!html.contains("action=\"/app/keys\""));
    page.plan = plan(true, Some(3), 3);
    let html = page.render().unwrap();
    assert!(html.contains("The plan allows 3 active keys and 3 are in use"));
    assert!(!html.contains("action=\"/app/keys\""));
}

#[test]
fn the_value_page_is_escaped_and_says_once() {
    let page = CreatedPage {
        frame: frame(),
        name: EVIL.into(),
        prefix: "tern_abc".into(),
        permissions: vec!["messages.read".into()],
        value: "tern_secretvalue".into(),
        replaced: Some("tern_old".into()),
    };
    let html = page.render().unwrap();
    assert!(html.contains("never show it again"));
    assert!(html.contains("data-copy=\"#key-value\""));
    assert!(html.contains("tern_secretvalue"));
    assert!(!html.contains(EVIL));
    assert!(!format!("{page:?}").contains("tern_secretvalue"));
}
