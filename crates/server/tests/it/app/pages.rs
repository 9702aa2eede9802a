//! The read-only working pages (APP.md §4 "Other pages"): overview, conversations and a
//! thread, contacts and a contact, templates and a template's example, usage and plan —
//! each with the organisation's data and never another's, escaped, with filters and empty
//! states, over HTTP with a real session.

use super::{Browser, signed_in};
use crate::common::{TestApp, send};
use crate::customers::{PNID, deliver, setup, text_from};
use crate::messages::insert_template;
use serde_json::{Value, json};
use tern_core::testkit::Seed;
use uuid::Uuid;

const NAME: &str = "<script>alert(1)</script>";

/// A page that must answer 200 with `no-store`: its body.
async fn page(b: &Browser, path: &str) -> String {
    let (s, h, body) = b.get_full(path).await;
    assert_eq!(s, 200, "{path}: {body}");
    assert_eq!(h["cache-control"], "no-store", "{path}");
    body
}

async fn post_json(app: &TestApp, key: &str, path: &str, body: Value) -> Value {
    let (s, _, v) = send(
        app.http
            .post(app.url(&format!("/api/public/v1{path}")))
            .bearer_auth(key)
            .json(&body),
    )
    .await;
    assert!(s == 200 || s == 201, "{path}: {s} {v}");
    v
}

/// Acme with a number, a contact named like a script (tagged, with a custom field), a
/// customer who wrote in, and a template; Beta with its own contact and template.
/// (contact id, Beta's contact id, Beta's template id)
async fn world(app: &TestApp) -> (String, String, String) {
    let key = setup(app).await;
    app.add_contact_field("tier", "Tier", "text").await;
    let c = post_json(
        app,
        &key,
        "/contacts",
        json!({"phone": "+447700900901", "name": NAME, "tags": ["vip"], "custom_fields": {"tier": "gold"}}),
    )
    .await;
    deliver(
        app,
        &text_from(Some("447700900111"), None, None, "Hello <b>there</b>"),
    )
    .await;
    insert_template(
        app,
        "order_shipped",
        json!([{"type": "BODY", "text": "Your order {{1}} is on its way", "example": {"body_text": [["A-42"]]}}]),
        "utility",
    )
    .await;
    let beta = app
        .seed(
            Seed::org("Beta")
                .number("777000")
                .contact("4915100000001")
                .approved_template(
                    "beta_secret_tpl",
                    json!([{"type": "BODY", "text": "Beta only"}]),
                ),
        )
        .await;
    (
        c["id"].as_str().unwrap().to_string(),
        beta.contacts[0].id.to_string(),
        beta.templates[0].id.to_string(),
    )
}

async fn pages_show_the_orgs_data(app: &TestApp) {
    let (contact, beta_contact, beta_template) = world(app).await;
    let b = signed_in(app, &app.org_id, "pages-dev@acme.test", "developer").await;

    // Overview, and the home page that shows it once there is a number.
    let o = page(&b, "/app/overview").await;
    assert!(o.contains("+14155550100"), "{o}");
    assert!(o.contains("href=\"/app/messages?status=received\""), "{o}");
    assert!(o.contains("No message failed in the last 24 hours"), "{o}");
    assert!(o.contains("No campaign is running"), "{o}");
    assert!(!o.contains("777000"), "Beta's number");
    let home = page(&b, "/app").await;
    assert!(
        home.contains("at a glance") && home.contains("+14155550100"),
        "{home}"
    );

    // Contacts: escaped, tags, consent, custom fields by label; search; Beta's hidden.
    let list = page(&b, "/app/contacts").await;
    assert!(!list.contains("<script>alert(1)"), "{list}");
    assert!(
        list.contains("&#60;script&#62;alert(1)&#60;/script&#62;")
            || list.contains("&lt;script&gt;"),
        "{list}"
    );
    assert!(
        list.contains("vip") && list.contains("Tier: gold") && list.contains("Kim"),
        "{list}"
    );
    assert!(!list.contains("4915100000001"), "Beta's contact");
    let found = page(&b, "/app/contacts?q=900901").await;
    assert!(
        found.contains(&format!("/app/contacts/{contact}")) && !found.contains("Kim"),
        "{found}"
    );
    let none = page(&b, "/app/contacts?q=nobody-like-this").await;
    assert!(none.contains("No contact matches"), "{none}");
    let one = page(&b, &format!("/app/contacts/{contact}")).await;
    assert!(
        one.contains("gold") && one.contains("+447700900901") && !one.contains("<script>alert(1)"),
        "{one}"
    );
    assert_eq!(b.get(&format!("/app/contacts/{beta_contact}")).await.0, 404);
    assert_eq!(b.get("/app/contacts/not-an-id").await.0, 404);

    // Conversations: the API's filters, a thread oldest first with links to each message.
    let convs = page(&b, "/app/conversations").await;
    assert!(convs.contains("Kim") && convs.contains("Open"), "{convs}");
    assert!(
        page(&b, "/app/conversations?window_state=open")
            .await
            .contains("Kim")
    );
    let closed = page(&b, "/app/conversations?window_state=closed").await;
    assert!(
        !closed.contains("Kim") && closed.contains("No conversation matches"),
        "{closed}"
    );
    assert_eq!(b.get("/app/conversations?window_state=ajar").await.0, 400);
    assert_eq!(b.get("/app/conversations?contact_id=nope").await.0, 400);
    let by_contact = page(&b, &format!("/app/conversations?contact_id={contact}")).await;
    assert!(
        !by_contact.contains("Kim") && by_contact.contains("Only the conversations of"),
        "{by_contact}"
    );
    let at = convs.find("/app/conversations/").unwrap();
    let id: String = convs[at + "/app/conversations/".len()..]
        .chars()
        .take(36)
        .collect();
    let thread = page(&b, &format!("/app/conversations/{id}")).await;
    assert!(
        thread.contains("Hello &#60;b&#62;there") || thread.contains("Hello &lt;b&gt;there"),
        "{thread}"
    );
    assert!(!thread.contains("<b>there"), "{thread}");
    assert!(thread.contains("href=\"/app/messages/"), "{thread}");
    assert!(thread.contains(PNID), "{thread}");
    assert_eq!(
        b.get(&format!("/app/conversations/{}", Uuid::now_v7()))
            .await
            .0,
        404
    );

    // Templates: filters, the page with its example and a copy button; Beta's hidden.
    let tpls = page(&b, "/app/templates").await;
    assert!(
        tpls.contains("order_shipped") && !tpls.contains("beta_secret_tpl"),
        "{tpls}"
    );
    assert!(
        page(&b, "/app/templates?status=approved&language=en_US")
            .await
            .contains("order_shipped")
    );
    let rejected = page(&b, "/app/templates?status=rejected").await;
    assert!(rejected.contains("No template matches"), "{rejected}");
    assert_eq!(b.get("/app/templates?status=lost").await.0, 400);
    let at = tpls.find("/app/templates/").unwrap();
    let tid: String = tpls[at + "/app/templates/".len()..]
        .chars()
        .take(36)
        .collect();
    let t = page(&b, &format!("/app/templates/{tid}")).await;
    assert!(
        t.contains("id=\"template-example\"") && t.contains("data-copy=\"#template-example\""),
        "{t}"
    );
    assert!(t.contains("A-42") && t.contains("RECIPIENT_PHONE"), "{t}");
    assert!(t.contains("Your order {{1}} is on its way"), "{t}");
    assert_eq!(
        b.get(&format!("/app/templates/{beta_template}")).await.0,
        404
    );

    // Usage and plan.
    let u = page(&b, "/app/usage").await;
    assert!(u.contains("growth"), "{u}");
    assert!(
        u.contains("Phone numbers") && u.contains("API requests"),
        "{u}"
    );
    assert!(
        u.contains("10.00 USD") && u.contains("Adjustment by the operator"),
        "{u}"
    );
    assert!(
        u.contains("Organisation, per minute") && u.contains("Per key, per minute"),
        "{u}"
    );
}

async fn empty_states_say_what_to_do(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "pages-new@acme.test", "owner").await;
    // Without a number the home page keeps its first step.
    assert!(page(&b, "/app").await.contains("Create your first key"));
    let o = page(&b, "/app/overview").await;
    assert!(
        o.contains("has no WhatsApp number yet") && o.contains("tern admin number add"),
        "{o}"
    );
    assert!(page(&b, "/app/contacts").await.contains("No contact yet"));
    assert!(
        page(&b, "/app/conversations")
            .await
            .contains("No conversation yet")
    );
    assert!(page(&b, "/app/templates").await.contains("No template yet"));
    let u = page(&b, "/app/usage").await;
    assert!(
        u.contains("No entry yet") && u.contains("No active key"),
        "{u}"
    );
}

/// The test mode page: what a test key reaches, the magic recipients, and the test number
/// once the organisation has a test key.
async fn test_mode_page_lists_the_magic_recipients(app: &TestApp) {
    let b = signed_in(app, &app.org_id, "pages-test@acme.test", "owner").await;
    let t = page(&b, "/app/test-mode").await;
    for words in [
        "+1 555 013 1026",
        "+1 555 000 0002",
        "US.1000000000000000001",
        "no test key yet",
    ] {
        assert!(t.contains(words), "{words}: {t}");
    }
    let created = app
        .admin(&[
            "key",
            "create",
            "--org",
            &app.org_id,
            "--member",
            &app.owner_id,
            "--name",
            "t",
            "--preset",
            "read_only",
            "--mode",
            "test",
        ])
        .await
        .unwrap();
    assert_eq!(created["mode"], "test");
    let space = app
        .db
        .get_test_space(app.org_uuid())
        .await
        .unwrap()
        .unwrap();
    let number = tern_core::test_space::number(&app.db, space.id)
        .await
        .unwrap()
        .unwrap();
    let t = page(&b, "/app/test-mode").await;
    assert!(t.contains(&number.display_phone_number), "{t}");
    assert!(!t.contains("no test key yet"), "{t}");
    // The keys page lists the key with its mode.
    let k = page(&b, "/app/keys").await;
    assert!(k.contains(r#"<span class="tag">test</span>"#), "{k}");
}

tern_store::both_backends! { TestApp;
    test_mode_page_lists_the_magic_recipients_http => test_mode_page_lists_the_magic_recipients,
    pages_show_the_orgs_data_and_never_anothers => pages_show_the_orgs_data,
    empty_pages_say_what_to_do_next => empty_states_say_what_to_do,
}
