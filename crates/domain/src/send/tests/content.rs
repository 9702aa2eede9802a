//! Location, contacts, reactions, interactive, templates, the window and consent.

use super::*;
use crate::template;

// ---- location, contacts, reaction ----

#[test]
fn location_rules() {
    let r = ok(with(
        "location",
        json!({"latitude": 51.5, "longitude": -0.12, "name": "HQ", "address": "1 Road"}),
    ));
    assert_eq!(r.content["name"], "HQ");
    ok(with("location", json!({"latitude": -90, "longitude": 180})));
    assert_eq!(
        invalid(with("location", json!({"latitude": 91, "longitude": "10"}))),
        vec!["location.latitude", "location.longitude"]
    );
    assert_eq!(
        invalid(with("location", json!({"name": 1, "zoom": 3}))),
        vec![
            "location.zoom",
            "location.latitude",
            "location.longitude",
            "location.name"
        ]
    );
}

#[test]
fn contacts_rules() {
    let card = json!({"name": {"formatted_name": "Ada Lovelace", "first_name": "Ada"},
        "phones": [{"phone": "+14155550123", "type": "WORK", "wa_id": "14155550123"}],
        "emails": [{"email": "ada@example.com"}], "org": {"company": "X"}, "birthday": "1815-12-10"});
    let r = ok(with("contacts", json!([card])));
    assert_eq!(r.content, json!([card]));
    assert_eq!(invalid(with("contacts", json!([]))), vec!["contacts"]);
    assert_eq!(
        invalid(with("contacts", json!({"name": {}}))),
        vec!["contacts"]
    );
    let many: Vec<Value> = (0..=MAX_CONTACTS).map(|_| card.clone()).collect();
    assert_eq!(
        invalid(with("contacts", Value::Array(many))),
        vec!["contacts"]
    );
    assert_eq!(
        invalid(with(
            "contacts",
            json!([
                {"name": {"formatted_name": ""}},
                {"name": {}},
                {},
                "x",
                {"name": {"formatted_name": "A"}, "phones": {"phone": "1"}, "org": "X"}
            ])
        )),
        vec![
            "contacts[0].name.formatted_name",
            "contacts[1].name.formatted_name",
            "contacts[2].name",
            "contacts[3]",
            "contacts[4].phones",
            "contacts[4].org"
        ]
    );
}

#[test]
fn reaction_rules() {
    let r = ok(with(
        "reaction",
        json!({"message_id": "wamid.abc", "emoji": "👍"}),
    ));
    assert_eq!(r.content, json!({"message_id": "wamid.abc", "emoji": "👍"}));
    assert_eq!(r.text, None);
    ok(with(
        "reaction",
        json!({"message_id": "wamid.abc", "emoji": ""}),
    ));
    assert_eq!(
        invalid(with("reaction", json!({"emoji": 1}))),
        vec!["reaction.message_id", "reaction.emoji"]
    );
    assert_eq!(
        invalid(with(
            "reaction",
            json!({"message_id": "", "emoji": "x", "x": 1})
        )),
        vec!["reaction.x", "reaction.message_id"]
    );
}

// ---- interactive ----

fn reply(id: &str, title: &str) -> Value {
    json!({"type": "reply", "reply": {"id": id, "title": title}})
}

#[test]
fn interactive_buttons() {
    let good = json!({"type": "button", "header": {"type": "text", "text": "Order"},
        "body": {"text": "Confirm?"}, "footer": {"text": "Thanks"},
        "action": {"buttons": [reply("yes", "Yes"), reply("no", "No")]}});
    let r = ok(with("interactive", good.clone()));
    assert_eq!(r.content, good);
    ok(with(
        "interactive",
        json!({"type": "button", "header": {"type": "image", "image": {"link": "https://e.com/a.jpg"}},
        "body": {"text": "x"}, "action": {"buttons": [reply("a", "A")]}}),
    ));
    let f = invalid(with(
        "interactive",
        json!({"type": "button",
        "header": {"type": "location"},
        "body": {"text": "x".repeat(1025)},
        "footer": {"text": "x".repeat(61)},
        "action": {"buttons": [reply("a", "A"), reply("a", &"t".repeat(21)), {"type": "url"}, reply("c", "A")]}}),
    ));
    assert_eq!(
        f,
        vec![
            "interactive.body.text",
            "interactive.footer.text",
            "interactive.header.type",
            "interactive.action.buttons",
            "interactive.action.buttons[1].reply.id",
            "interactive.action.buttons[1].reply.title",
            "interactive.action.buttons[2].type",
            "interactive.action.buttons[2].reply",
            "interactive.action.buttons[3].reply.title"
        ]
    );
    assert_eq!(
        invalid(with(
            "interactive",
            json!({"type": "button", "action": {"buttons": []}})
        )),
        vec!["interactive.body", "interactive.action.buttons"]
    );
    assert_eq!(
        invalid(with(
            "interactive",
            json!({"type": "buttons", "body": {"text": "x"}, "action": {}})
        )),
        vec!["interactive.type"]
    );
    assert_eq!(
        invalid(with(
            "interactive",
            json!({"type": "button", "body": {"text": "x"}})
        )),
        vec!["interactive.action"]
    );
}

#[test]
fn interactive_lists() {
    let row = |id: &str| json!({"id": id, "title": "Row", "description": "d"});
    let good = json!({"type": "list", "body": {"text": "x".repeat(4096)},
    "action": {"button": "Choose", "sections": [
        {"title": "A", "rows": [row("1"), row("2")]},
        {"title": "B", "rows": [row("3")]}
    ]}});
    ok(with("interactive", good));
    let rows: Vec<Value> = (0..6).map(|i| row(&format!("r{i}"))).collect();
    let rows2: Vec<Value> = (6..11).map(|i| row(&format!("r{i}"))).collect();
    let f = invalid(with(
        "interactive",
        json!({"type": "list",
        "header": {"type": "image", "image": {"link": "https://e.com/a.jpg"}},
        "body": {"text": "x"},
        "action": {"button": "x".repeat(21), "sections": [
            {"title": "A", "rows": rows},
            {"rows": rows2},
            {"title": "C", "rows": [{"id": "r1", "title": "x".repeat(25), "description": "d".repeat(73)}]}
        ]}}),
    ));
    assert_eq!(
        f,
        vec![
            "interactive.header.type",
            "interactive.action.button",
            "interactive.action.sections[1].title",
            "interactive.action.sections[2].rows[0].id",
            "interactive.action.sections[2].rows[0].title",
            "interactive.action.sections[2].rows[0].description",
            "interactive.action.sections"
        ]
    );
    let eleven: Vec<Value> = (0..11)
        .map(|i| json!({"title": "s", "rows": [row(&format!("r{i}"))]}))
        .collect();
    let f = invalid(with(
        "interactive",
        json!({"type": "list", "body": {"text": "x"},
        "action": {"button": "Go", "sections": eleven}}),
    ));
    assert_eq!(
        f,
        vec!["interactive.action.sections", "interactive.action.sections"]
    );
}

#[test]
fn interactive_cta_flow_and_others() {
    ok(with(
        "interactive",
        json!({"type": "cta_url", "body": {"text": "See"},
        "action": {"name": "cta_url", "parameters": {"display_text": "Open", "url": "https://example.com/x"}}}),
    ));
    assert_eq!(
        invalid(with(
            "interactive",
            json!({"type": "cta_url", "body": {"text": "See"},
            "action": {"name": "url", "parameters": {"display_text": "x".repeat(21), "url": "http://example.com"}}})
        )),
        vec![
            "interactive.action.name",
            "interactive.action.parameters.display_text",
            "interactive.action.parameters.url"
        ]
    );
    ok(with(
        "interactive",
        json!({"type": "flow", "body": {"text": "Book"},
        "action": {"name": "flow", "parameters": {"flow_message_version": "3", "flow_id": "123",
            "flow_cta": "Book now", "flow_action": "navigate",
            "flow_action_payload": {"screen": "A"}}}}),
    ));
    assert_eq!(
        invalid(with(
            "interactive",
            json!({"type": "flow",
            "action": {"name": "flow", "parameters": {"flow_message_version": 3, "flow_id": "1",
                "flow_name": "n", "flow_cta": "", "flow_action": "go"}}})
        )),
        vec![
            "interactive.action.parameters.flow_message_version",
            "interactive.action.parameters",
            "interactive.action.parameters.flow_cta",
            "interactive.action.parameters.flow_action"
        ]
    );
    // Other network types pass through.
    ok(with(
        "interactive",
        json!({"type": "location_request_message", "body": {"text": "Where?"},
        "action": {"name": "send_location"}}),
    ));
    ok(with(
        "interactive",
        json!({"type": "product", "action": {"catalog_id": "1", "product_retailer_id": "x"}}),
    ));
}

// ---- template ----

#[test]
fn template_sends() {
    let r = ok(with(
        "template",
        json!({"name": "order_update", "language": "en_US", "variables": ["Ada", "A-1"]}),
    ));
    assert!(r.kind.is_template());
    let t = r.template.expect("template");
    assert_eq!(t.name, "order_update");
    assert_eq!(t.language, "en_US");
    assert_eq!(
        t.variables,
        Some(vec!["Ada".to_string(), "A-1".to_string()])
    );
    assert_eq!(t.components, None);
    assert_eq!(r.text, None);
    assert_eq!(
        r.content,
        json!({"name": "order_update", "language": {"code": "en_US"}})
    );
    // The network's language object and typed components.
    let comps = json!([{"type": "body", "parameters": [{"type": "text", "text": "Ada"}]}]);
    let r = ok(with(
        "template",
        json!({"name": "t", "language": {"code": "pt_BR", "policy": "deterministic"}, "components": comps}),
    ));
    let t = r.template.expect("template");
    assert_eq!(t.language, "pt_BR");
    assert_eq!(t.components, Some(comps.clone()));
    assert_eq!(
        r.content,
        json!({"name": "t", "language": {"code": "pt_BR"}, "components": comps})
    );
    // Neither variables nor components: checked later against the template.
    let r = ok(with("template", json!({"name": "hello", "language": "en"})));
    assert_eq!(r.template.expect("t").variables, None);
    // Coupon code with variables.
    let r = ok(with(
        "template",
        json!({"name": "t", "language": "en", "variables": ["a"], "coupon_code": "SAVE10"}),
    ));
    assert_eq!(
        r.template.expect("t").coupon_code.as_deref(),
        Some("SAVE10")
    );
}

#[test]
fn template_rules() {
    let t = |obj: Value| invalid(with("template", obj));
    assert_eq!(
        t(json!({"name": "t", "language": "en", "variables": ["a"], "components": []})),
        vec!["template"]
    );
    assert_eq!(
        t(json!({"language": "english", "variables": ["ok", "", "a\nb", "a\tb", "a     b", 5]})),
        vec![
            "template.name",
            "template.language",
            "template.variables[5]",
            "template.variables[1]",
            "template.variables[2]",
            "template.variables[3]",
            "template.variables[4]"
        ]
    );
    assert_eq!(
        t(json!({"name": "", "language": {"code": "en", "policy": "fallback", "x": 1}})),
        vec![
            "template.name",
            "template.language.x",
            "template.language.policy"
        ]
    );
    assert_eq!(
        t(json!({"name": "t", "language": {"policy": "deterministic"}})),
        vec!["template.language.code"]
    );
    assert_eq!(t(json!({"name": "t"})), vec!["template.language"]);
    assert_eq!(
        t(
            json!({"name": "t", "language": 1, "variables": "a", "coupon_code": 5, "namespace": "x"})
        ),
        vec![
            "template.namespace",
            "template.language",
            "template.variables",
            "template.coupon_code"
        ]
    );
    assert_eq!(
        t(
            json!({"name": "t", "language": "en", "variables": ["a"], "coupon_code": "x".repeat(21)})
        ),
        vec!["template.coupon_code"]
    );
    assert_eq!(
        t(json!({"name": "t", "language": "en", "components": [], "coupon_code": "C"})),
        vec!["template.coupon_code"]
    );
    assert_eq!(
        t(json!({"name": "t", "language": "en", "components": {}})),
        vec!["template.components"]
    );
    assert_eq!(
        t(json!({"name": "t", "language": "en", "components": [
            {"type": "body", "parameters": [
                {"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "text", "text": "c\td"}
            ]},
            {"type": "button", "sub_type": "quick_reply", "index": "0", "parameters": [{"type": "payload", "payload": ""}]}
        ]})),
        vec![
            "template.components[0].parameters[2].text",
            "template.components[1].parameters[0].payload"
        ]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let p = bad(json!({
        "type": "template",
        "to": {"contact_id": "not-a-uuid"},
        "phone_number_id": "1",
        "from": "2",
        "text": {"body": "x"},
        "extra": true,
        "context": {"message_id": ""},
        "template": {"name": "", "language": "en_US", "variables": ["a", "b\nc"]}
    }));
    assert_eq!(p.code, ErrorCode::ValidationFailed);
    let f = field_names(&p);
    for want in [
        "to.contact_id",
        "from",
        "context.message_id",
        "extra",
        "text",
        "template.name",
        "template.variables[1]",
    ] {
        assert!(f.contains(&want.to_string()), "{want} missing from {f:?}");
    }
    assert_eq!(f.len(), 7, "{f:?}");
    assert_eq!(p.message, "7 fields are not valid.");
    assert!(p.details.get("reason").is_none());
}

#[test]
fn template_examples_are_sendable() {
    let fixtures = [
        json!([{"type": "BODY", "text": "Hello"}]),
        json!([{"type": "BODY", "text": "Hi {{1}}, order {{2}} ok.", "example": {"body_text": [["Ada", "A-12"]]}}]),
        json!([
            {"type": "HEADER", "format": "TEXT", "text": "Hello {{1}}", "example": {"header_text": ["Ada"]}},
            {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.", "example": {"body_text": [["Ada", "A-12"]]}},
            {"type": "FOOTER", "text": "Reply STOP to opt out"},
            {"type": "BUTTONS", "buttons": [
                {"type": "QUICK_REPLY", "text": "Thanks"},
                {"type": "URL", "text": "Track", "url": "https://example.com/track/{{1}}", "example": ["https://example.com/track/A-12"]},
                {"type": "PHONE_NUMBER", "text": "Call us", "phone_number": "+14155550100"}
            ]}
        ]),
        json!([
            {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::abc"]}},
            {"type": "BODY", "text": "Hi {{1}} ok", "example": {"body_text": [["Ada"]]}}
        ]),
        json!([
            {"type": "HEADER", "format": "LOCATION"},
            {"type": "BODY", "text": "Meet here."}
        ]),
        json!([
            {"type": "BODY", "text": "Use {{1}} now.", "example": {"body_text": [["x"]]}},
            {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "SAVE10"}]}
        ]),
    ];
    for components in fixtures {
        let mut ex = template::example_message("order_update", "en_US", &components);
        // As served, the placeholder is refused with its reason.
        let p = bad(ex.clone());
        assert_eq!(p.details["reason"], "to_placeholder", "{ex}");
        assert_eq!(field_names(&p), vec!["to"]);
        ex["to"] = json!(PHONE);
        let r = ok(ex.clone());
        let t = r.template.expect("template");
        assert_eq!(
            template::check_send(
                &components,
                t.variables.as_deref(),
                t.components.as_ref(),
                t.coupon_code.as_deref()
            ),
            Ok(()),
            "{ex}"
        );
    }
}

// ---- window and consent ----

#[test]
fn window_states() {
    let now = 1_000_000_000_000;
    assert_eq!(WindowState::at(None, now), WindowState::NeverWritten);
    assert_eq!(WindowState::at(Some(now - 1000), now), WindowState::Open);
    assert_eq!(
        WindowState::at(Some(now - WINDOW_MS + 1), now),
        WindowState::Open
    );
    assert_eq!(
        WindowState::at(Some(now - WINDOW_MS), now),
        WindowState::Closed
    );
    assert_eq!(WindowState::at(Some(i64::MAX), now), WindowState::Open);
    assert_eq!(WindowState::Open.as_str(), "open");
}

#[test]
fn window_rule() {
    use WindowState::*;
    let code = |kind, w| check_window(kind, w).err().map(|p| p.code);
    // Templates: every window (consent is the addressing rule's: `addressing.rs`).
    for w in [NeverWritten, Open, Closed] {
        assert_eq!(code(Kind::Template, w), None);
        assert!(business_initiated(Kind::Template, w));
    }
    for kind in Kind::ALL.into_iter().filter(|k| !k.is_template()) {
        // A reply inside the customer's window.
        assert_eq!(code(kind, Open), None);
        assert!(!business_initiated(kind, Open));
        assert_eq!(code(kind, NeverWritten), Some(ErrorCode::TemplateRequired));
        assert_eq!(code(kind, Closed), Some(ErrorCode::WindowExpired));
        assert!(business_initiated(kind, NeverWritten) && business_initiated(kind, Closed));
    }
    let p = check_window(Kind::Text, Closed).expect_err("closed");
    assert_eq!(p.status(), 409);
    assert!(p.message.contains("template"), "{}", p.message);
    let p = check_window(Kind::Image, NeverWritten).expect_err("new");
    assert!(p.message.contains("template"), "{}", p.message);
}
