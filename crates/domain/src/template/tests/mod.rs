//! Draft rules (the send-path questions and examples are in `send`).

use super::*;
use crate::{ErrorCode, FieldError};
use serde_json::{Value, json};

fn draft(components: Value) -> Result<(), Vec<FieldError>> {
    validate_draft(&Draft {
        name: "order_update",
        language: "en_US",
        category: "utility",
        components: &components,
    })
}

fn fields(r: Result<(), Vec<FieldError>>) -> Vec<(String, String)> {
    r.expect_err("expected errors")
        .into_iter()
        .map(|f| (f.field, f.message))
        .collect()
}

fn has(errs: &[(String, String)], field: &str, needle: &str) -> bool {
    errs.iter().any(|(f, m)| f == field && m.contains(needle))
}

fn body(text: &str, examples: &[&str]) -> Value {
    if examples.is_empty() {
        json!({"type": "BODY", "text": text})
    } else {
        json!({"type": "BODY", "text": text, "example": {"body_text": [examples]}})
    }
}

fn full() -> Value {
    json!([
        {"type": "HEADER", "format": "TEXT", "text": "Hello {{1}}", "example": {"header_text": ["Ada"]}},
        {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.", "example": {"body_text": [["Ada", "A-12"]]}},
        {"type": "FOOTER", "text": "Reply STOP to opt out"},
        {"type": "BUTTONS", "buttons": [
            {"type": "QUICK_REPLY", "text": "Thanks"},
            {"type": "QUICK_REPLY", "text": "Help"},
            {"type": "URL", "text": "Track", "url": "https://example.com/track/{{1}}", "example": ["https://example.com/track/A-12"]},
            {"type": "PHONE_NUMBER", "text": "Call us", "phone_number": "+14155550100"}
        ]}
    ])
}

#[test]
fn a_complete_draft_is_valid() {
    assert_eq!(draft(full()), Ok(()));
    assert_eq!(draft(json!([body("Your code is ready.", &[])])), Ok(()));
}

#[test]
fn name_rules() {
    let mut e = Vec::new();
    check_name("name", "", &mut e);
    check_name("name", "Order", &mut e);
    check_name("name", "order-update", &mut e);
    check_name("name", &"a".repeat(513), &mut e);
    assert_eq!(e.len(), 4);
    assert!(e[3].message.contains("512"));
    let mut ok = Vec::new();
    check_name("name", "order_update_2", &mut ok);
    check_name("name", &"a".repeat(512), &mut ok);
    assert!(ok.is_empty());
}

#[test]
fn language_codes() {
    for ok in ["en", "en_US", "pt_BR", "fil", "es_419", "zh_HK"] {
        assert!(is_language_code(ok), "{ok}");
    }
    for bad in [
        "", "EN", "en-US", "e", "en_us", "english", "en_USA", "en_", "_US",
    ] {
        assert!(!is_language_code(bad), "{bad}");
    }
}

#[test]
fn category_rules() {
    let mut e = Vec::new();
    check_category("category", "MARKETING", &mut e);
    check_category("category", "promo", &mut e);
    assert_eq!(e.len(), 2);
    for c in Category::ALL.iter().map(|c| c.as_str()) {
        let mut ok = Vec::new();
        check_category("category", c, &mut ok);
        assert!(ok.is_empty());
    }
}

#[test]
fn component_list_rules() {
    assert!(has(&fields(draft(json!({}))), "components", "array"));
    assert!(has(&fields(draft(json!([]))), "components", "BODY"));
    let e = fields(draft(json!([{"type": "FOOTER", "text": "x"}])));
    assert!(has(&e, "components", "BODY"));
    let e = fields(draft(json!([body("a", &[]), body("b", &[])])));
    assert!(has(&e, "components[1].type", "at most one BODY"));
    let e = fields(draft(
        json!([body("a", &[]), {"type": "CAROUSEL"}, {"text": "x"}, 7]),
    ));
    assert!(has(&e, "components[1].type", "one of"));
    assert!(has(&e, "components[2].type", "required"));
    assert!(has(&e, "components[3]", "object"));
}

#[test]
fn header_rules() {
    let h = |header: Value| fields(draft(json!([header, body("Hello there", &[])])));
    assert!(has(
        &h(json!({"type": "HEADER"})),
        "components[0].format",
        "required"
    ));
    assert!(has(
        &h(json!({"type": "HEADER", "format": "GIFS"})),
        "components[0].format",
        "one of"
    ));
    assert!(has(
        &h(json!({"type": "HEADER", "format": "TEXT", "text": "x".repeat(61)})),
        "components[0].text",
        "60"
    ));
    assert!(has(
        &h(
            json!({"type": "HEADER", "format": "TEXT", "text": "{{1}} and {{2}}", "example": {"header_text": ["a", "b"]}})
        ),
        "components[0].text",
        "at most 1 variable"
    ));
    assert!(has(
        &h(json!({"type": "HEADER", "format": "TEXT", "text": "Hi {{1}}"})),
        "components[0].example.header_text",
        "required"
    ));
    assert!(has(
        &h(
            json!({"type": "HEADER", "format": "TEXT", "text": "Hi {{2}}", "example": {"header_text": ["a"]}})
        ),
        "components[0].text",
        "sequence"
    ));
    assert!(has(
        &h(
            json!({"type": "HEADER", "format": "TEXT", "text": "Hi {{1}}", "example": {"header_text": ["a", "b"]}})
        ),
        "components[0].example.header_text",
        "exactly 1"
    ));
    assert!(has(
        &h(json!({"type": "HEADER", "format": "IMAGE"})),
        "components[0].example.header_handle",
        "required"
    ));
    assert!(has(
        &h(
            json!({"type": "HEADER", "format": "VIDEO", "text": "x", "example": {"header_handle": ["4::aW"]}})
        ),
        "components[0].text",
        "not allowed"
    ));
    assert_eq!(
        draft(
            json!([{"type": "HEADER", "format": "DOCUMENT", "example": {"header_handle": ["4::aW"]}}, body("Hello", &[])])
        ),
        Ok(())
    );
    assert_eq!(
        draft(json!([{"type": "HEADER", "format": "LOCATION"}, body("Hello", &[])])),
        Ok(())
    );
    let auth = validate_draft(&Draft {
        name: "otp",
        language: "en",
        category: "authentication",
        components: &json!([{"type": "HEADER", "format": "LOCATION"}, body("Your code", &[])]),
    });
    assert!(has(
        &fields(auth),
        "components[0].format",
        "marketing and utility"
    ));
}

#[test]
fn body_rules() {
    let b = |c: Value| fields(draft(json!([c])));
    assert!(has(
        &b(json!({"type": "BODY"})),
        "components[0].text",
        "required"
    ));
    assert!(has(
        &b(json!({"type": "BODY", "text": ""})),
        "components[0].text",
        "empty"
    ));
    assert!(has(
        &b(body(&"x".repeat(1025), &[])),
        "components[0].text",
        "1024"
    ));
    assert_eq!(draft(json!([body(&"x".repeat(1024), &[])])), Ok(()));
    assert!(has(
        &b(body("{{1}} is here", &["a"])),
        "components[0].text",
        "start"
    ));
    assert!(has(
        &b(body("Here is {{1}}", &["a"])),
        "components[0].text",
        "end"
    ));
    assert!(has(
        &b(body("Here is {{1}}  ", &["a"])),
        "components[0].text",
        "end"
    ));
    assert!(has(
        &b(body("Hi {{1}} {{2}} ok", &["a", "b"])),
        "components[0].text",
        "next to each other"
    ));
    assert!(has(
        &b(body("Hi {{1}} and {{3}} ok", &["a", "b"])),
        "components[0].text",
        "without gaps"
    ));
    assert!(has(
        &b(body("Hi {{2}} ok", &["a"])),
        "components[0].text",
        "without gaps"
    ));
    assert!(has(
        &b(body("Hi {{name}} ok", &["a"])),
        "components[0].text",
        "named"
    ));
    assert!(has(
        &b(body("Hi {{1 ok", &[])),
        "components[0].text",
        "closing"
    ));
    assert!(has(
        &b(body("Hi {{1}} ok", &[])),
        "components[0].example.body_text",
        "required"
    ));
    assert!(has(
        &b(body("Hi {{1}} ok {{2}} x", &["a"])),
        "components[0].example.body_text[0]",
        "exactly 2"
    ));
    assert!(has(
        &b(body("Hi {{1}} ok", &["a\nb"])),
        "components[0].example.body_text[0][0]",
        "new line"
    ));
    assert!(has(
        &b(json!({"type": "BODY", "text": "Hi {{1}} ok", "example": {"body_text": ["a"]}})),
        "components[0].example.body_text",
        "one array"
    ));
    assert!(has(
        &b(json!({"type": "BODY", "text": "Hi {{1}} ok", "example": "a"})),
        "components[0].example",
        "object"
    ));
    // A number may repeat; values are per distinct number.
    assert_eq!(
        draft(json!([body(
            "Hi {{1}}, really {{1}}, order {{2}}.",
            &["a", "b"]
        )])),
        Ok(())
    );
}

#[test]
fn footer_rules() {
    let f = |t: &str| {
        fields(draft(
            json!([body("Hello", &[]), {"type": "FOOTER", "text": t}]),
        ))
    };
    assert!(has(&f(&"x".repeat(61)), "components[1].text", "60"));
    assert!(has(
        &f("Hi {{1}} x"),
        "components[1].text",
        "must not contain variables"
    ));
    assert!(has(
        &fields(draft(json!([body("Hello", &[]), {"type": "FOOTER"}]))),
        "components[1].text",
        "required"
    ));
}

#[test]
fn button_rules() {
    let bt = |buttons: Value| {
        fields(draft(
            json!([body("Hello", &[]), {"type": "BUTTONS", "buttons": buttons}]),
        ))
    };
    let qr = |t: &str| json!({"type": "QUICK_REPLY", "text": t});
    assert!(has(
        &fields(draft(json!([body("Hello", &[]), {"type": "BUTTONS"}]))),
        "components[1].buttons",
        "required"
    ));
    assert!(has(&bt(json!([])), "components[1].buttons", "at least one"));
    let eleven: Vec<Value> = (0..11).map(|i| qr(&format!("b{i}"))).collect();
    let e = bt(Value::Array(eleven));
    assert!(has(&e, "components[1].buttons", "at most 10 buttons"));
    assert!(has(&e, "components[1].buttons", "at most 10 QUICK_REPLY"));
    let url = json!({"type": "URL", "text": "Go", "url": "https://example.com/a"});
    assert!(has(
        &bt(json!([url, url, url])),
        "components[1].buttons",
        "at most 2 URL"
    ));
    let phone = json!({"type": "PHONE_NUMBER", "text": "Call", "phone_number": "+14155550100"});
    assert!(has(
        &bt(json!([phone, phone])),
        "components[1].buttons",
        "at most 1 PHONE_NUMBER"
    ));
    let code = json!({"type": "COPY_CODE", "example": "SAVE10"});
    assert!(has(
        &bt(json!([code, code])),
        "components[1].buttons",
        "at most 1 COPY_CODE"
    ));
    assert!(has(
        &bt(json!([qr("a"), url, qr("b")])),
        "components[1].buttons",
        "next to each other"
    ));
    assert_eq!(
        draft(
            json!([body("Hello", &[]), {"type": "BUTTONS", "buttons": [url, qr("a"), qr("b"), code]}])
        ),
        Ok(())
    );
    assert!(has(
        &bt(json!([qr(&"x".repeat(26))])),
        "components[1].buttons[0].text",
        "25"
    ));
    assert!(has(
        &bt(json!([{"type": "QUICK_REPLY"}])),
        "components[1].buttons[0].text",
        "required"
    ));
    assert!(has(
        &bt(json!([{"type": "SHOUT", "text": "x"}])),
        "components[1].buttons[0].type",
        "one of"
    ));
    assert!(has(
        &bt(json!([{"type": "URL", "text": "Go"}])),
        "components[1].buttons[0].url",
        "required"
    ));
    assert!(has(
        &bt(json!([{"type": "URL", "text": "Go", "url": "ftp://x.example.com"}])),
        "components[1].buttons[0].url",
        "http"
    ));
    assert!(has(
        &bt(
            json!([{"type": "URL", "text": "Go", "url": "https://example.com/{{1}}/x", "example": ["https://example.com/a/x"]}])
        ),
        "components[1].buttons[0].url",
        "only at the end"
    ));
    assert!(has(
        &bt(json!([{"type": "URL", "text": "Go", "url": "https://example.com/{{1}}"}])),
        "components[1].buttons[0].example",
        "required"
    ));
    assert!(has(
        &bt(json!([{"type": "PHONE_NUMBER", "text": "Call", "phone_number": "call me"}])),
        "components[1].buttons[0].phone_number",
        "digits"
    ));
    assert!(has(
        &bt(
            json!([{"type": "PHONE_NUMBER", "text": "Call", "phone_number": "+1234567890123456789012"}])
        ),
        "components[1].buttons[0].phone_number",
        "20"
    ));
    assert!(has(
        &bt(json!([{"type": "COPY_CODE"}])),
        "components[1].buttons[0].example",
        "required"
    ));
    assert!(has(
        &bt(json!([{"type": "COPY_CODE", "example": "x".repeat(21)}])),
        "components[1].buttons[0].example",
        "20"
    ));
}

#[test]
fn every_problem_is_reported_at_once() {
    let e = validate_draft(&Draft {
        name: "Bad Name",
        language: "english",
        category: "promo",
        components: &json!([
            {"type": "HEADER", "format": "TEXT", "text": "x".repeat(61)},
            {"type": "BODY", "text": "{{1}} starts"},
            {"type": "FOOTER", "text": "has {{1}}"}
        ]),
    })
    .expect_err("invalid");
    let names: Vec<&str> = e.iter().map(|f| f.field.as_str()).collect();
    for want in [
        "name",
        "language",
        "category",
        "components[0].text",
        "components[1].text",
        "components[1].example.body_text",
        "components[2].text",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

mod send;

#[test]
fn otp_authentication_templates_need_a_phone_number() {
    use super::{Category, needs_phone_number};
    let otp = |t: &str| {
        json!([{"type": "BODY", "text": "{{1}} is your code."},
        {"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": t}]}])
    };
    for t in ["COPY_CODE", "ONE_TAP", "zero_tap"] {
        assert!(needs_phone_number(Category::Authentication, &otp(t)), "{t}");
    }
    assert!(!needs_phone_number(Category::Authentication, &otp("OTHER")));
    assert!(!needs_phone_number(Category::Marketing, &otp("COPY_CODE")));
    let plain = json!([{"type": "BODY", "text": "{{1}} is your code."}]);
    assert!(!needs_phone_number(Category::Authentication, &plain));
    let coupon = json!([{"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "X"}]}]);
    assert!(needs_phone_number(Category::Authentication, &coupon));
}
