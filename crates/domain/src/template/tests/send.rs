//! The send-path questions, send checks, network components and examples.

use super::*;

#[test]
fn send_path_questions() {
    let t = full();
    assert_eq!(header_kind(&t), HeaderKind::Text);
    assert_eq!(header_variable_count(&t), 1);
    assert_eq!(body_variable_count(&t), 2);
    assert_eq!(variable_count(&t), 2);
    assert!(!has_copy_code_button(&t));
    assert_eq!(dynamic_url_buttons(&t), vec![2]);
    assert!(needs_components(&t));
    let plain = json!([body("Hello", &[])]);
    assert_eq!(header_kind(&plain), HeaderKind::None);
    assert_eq!(variable_count(&plain), 0);
    assert!(!needs_components(&plain));
    for (format, kind) in [
        ("IMAGE", HeaderKind::Image),
        ("video", HeaderKind::Video),
        ("DOCUMENT", HeaderKind::Document),
        ("LOCATION", HeaderKind::Location),
    ] {
        let c = json!([{"type": "HEADER", "format": format}, body("x", &[])]);
        assert_eq!(header_kind(&c), kind);
        assert!(needs_components(&c));
    }
    let code = json!([body("Hi", &[]), {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "A"}]}]);
    assert!(has_copy_code_button(&code));
    assert_eq!(HeaderKind::Image.as_str(), "image");
}

fn vars(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn refusal(r: Result<(), SendRefusal>) -> (ErrorCode, Vec<String>) {
    let r = r.expect_err("refused");
    (r.code, r.fields.into_iter().map(|f| f.field).collect())
}

#[test]
fn check_send_variables() {
    let t = json!([body("Hi {{1}}, order {{2}} is ready.", &["a", "b"])]);
    assert_eq!(
        check_send(&t, Some(&vars(&["Ada", "A-1"])), None, None),
        Ok(())
    );
    assert_eq!(
        check_send(&t, Some(&vars(&["Ada", "a    b"])), None, None),
        Ok(())
    );
    for bad in ["", "  ", "a\nb", "a\tb", "a     b", "a\r\nb"] {
        let (code, f) = refusal(check_send(&t, Some(&vars(&["Ada", bad])), None, None));
        assert_eq!(code, ErrorCode::ValidationFailed, "{bad:?}");
        assert_eq!(f, vec!["template.variables[1]"]);
    }
    let (code, f) = refusal(check_send(&t, Some(&vars(&["Ada"])), None, None));
    assert_eq!(code, ErrorCode::TemplateNotApproved);
    assert_eq!(f, vec!["template.variables"]);
    let (code, _) = refusal(check_send(&t, None, None, None));
    assert_eq!(code, ErrorCode::TemplateNotApproved);
    let (code, _) = refusal(check_send(&t, Some(&vars(&["a", "b", "c"])), None, None));
    assert_eq!(code, ErrorCode::TemplateNotApproved);
    // Both forms at once: 400 even if the count is also wrong.
    let (code, f) = refusal(check_send(&t, Some(&vars(&["a"])), Some(&json!([])), None));
    assert_eq!(code, ErrorCode::ValidationFailed);
    assert_eq!(f, vec!["template"]);
    // No variables: nothing needed.
    let plain = json!([body("Hello", &[])]);
    assert_eq!(check_send(&plain, None, None, None), Ok(()));
    assert_eq!(check_send(&plain, Some(&[]), None, None), Ok(()));
    // Header and body share numbers.
    let shared = json!([
        {"type": "HEADER", "format": "TEXT", "text": "Hi {{1}}", "example": {"header_text": ["Ada"]}},
        body("Dear {{1}}, order {{2}} ok.", &["Ada", "A"])
    ]);
    assert_eq!(
        check_send(&shared, Some(&vars(&["Ada", "A"])), None, None),
        Ok(())
    );
    let p = refusal(check_send(&t, Some(&vars(&["Ada"])), None, None));
    assert_eq!(p.0.status(), 409);
}

#[test]
fn check_send_coupon_code() {
    let code = json!([body("Use {{1}} today.", &["x"]), {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "SAVE"}]}]);
    assert_eq!(
        check_send(&code, Some(&vars(&["Ada"])), None, Some("SAVE10")),
        Ok(())
    );
    let (c, f) = refusal(check_send(&code, Some(&vars(&["Ada"])), None, None));
    assert_eq!(
        (c, f),
        (
            ErrorCode::TemplateNotApproved,
            vec!["template.coupon_code".to_string()]
        )
    );
    let (c, _) = refusal(check_send(
        &code,
        Some(&vars(&["Ada"])),
        None,
        Some(&"x".repeat(21)),
    ));
    assert_eq!(c, ErrorCode::ValidationFailed);
    let plain = json!([body("Hello", &[])]);
    let (c, f) = refusal(check_send(&plain, None, None, Some("SAVE")));
    assert_eq!(
        (c, f),
        (
            ErrorCode::TemplateNotApproved,
            vec!["template.coupon_code".to_string()]
        )
    );
    let (c, _) = refusal(check_send(&code, None, Some(&json!([])), Some("SAVE")));
    assert_eq!(c, ErrorCode::ValidationFailed);
}

#[test]
fn check_send_components() {
    let t = json!([
        {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::x"]}},
        body("Hi {{1}}, see {{2}} now.", &["a", "b"]),
        {"type": "BUTTONS", "buttons": [
            {"type": "QUICK_REPLY", "text": "Stop"},
            {"type": "URL", "text": "Go", "url": "https://example.com/{{1}}", "example": ["https://example.com/x"]}
        ]}
    ]);
    let ok = json!([
        {"type": "header", "parameters": [{"type": "image", "image": {"link": "https://example.com/a.jpg"}}]},
        {"type": "body", "parameters": [{"type": "text", "text": "Ada"},
            {"type": "currency", "currency": {"fallback_value": "$1", "code": "USD", "amount_1000": 1000}}]},
        {"type": "button", "sub_type": "url", "index": "1", "parameters": [{"type": "text", "text": "x"}]},
        {"type": "button", "sub_type": "quick_reply", "index": "0", "parameters": [{"type": "payload", "payload": "STOP"}]}
    ]);
    assert_eq!(check_send(&t, None, Some(&ok), None), Ok(()));
    // Variables cannot carry a media header.
    let (c, f) = refusal(check_send(&t, Some(&vars(&["a", "b"])), None, None));
    assert_eq!(c, ErrorCode::TemplateNotApproved);
    assert!(f.contains(&"template.components".to_string()));
    // Wrong count, wrong header type, missing url button.
    let bad = json!([
        {"type": "header", "parameters": [{"type": "video", "video": {"id": "123"}}]},
        {"type": "body", "parameters": [{"type": "text", "text": "Ada"}]}
    ]);
    let (c, f) = refusal(check_send(&t, None, Some(&bad), None));
    assert_eq!(c, ErrorCode::TemplateNotApproved);
    assert!(
        f.contains(&"template.components[0].parameters[0].type".to_string()),
        "{f:?}"
    );
    assert!(
        f.contains(&"template.components[1].parameters".to_string()),
        "{f:?}"
    );
    assert!(f.contains(&"template.components".to_string()), "{f:?}");
    // Shape and value errors are 400.
    let shape = json!([
        {"type": "footer", "parameters": []},
        {"type": "body", "parameters": [{"type": "text", "text": "a\tb"}, {"type": "image", "image": {}}]},
        {"type": "button", "sub_type": "nope", "index": "x", "parameters": []},
        "x"
    ]);
    let (c, f) = refusal(check_send(&t, None, Some(&shape), None));
    assert_eq!(c, ErrorCode::ValidationFailed);
    for want in [
        "template.components[0].type",
        "template.components[1].parameters[0].text",
        "template.components[1].parameters[1].image",
        "template.components[2].sub_type",
        "template.components[2].index",
        "template.components[3]",
    ] {
        assert!(f.contains(&want.to_string()), "{want} not in {f:?}");
    }
    // A button index the template does not have.
    let extra = json!([
        {"type": "header", "parameters": [{"type": "image", "image": {"id": "1"}}]},
        {"type": "body", "parameters": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"type": "button", "sub_type": "url", "index": "1", "parameters": [{"type": "text", "text": "x"}]},
        {"type": "button", "sub_type": "url", "index": "5", "parameters": [{"type": "text", "text": "x"}]}
    ]);
    let (_, f) = refusal(check_send(&t, None, Some(&extra), None));
    assert_eq!(f, vec!["template.components[3].index"]);
}

#[test]
fn refusal_problems() {
    let p = SendRefusal {
        code: ErrorCode::TemplateNotApproved,
        fields: vec![FieldError::new("template.variables", "the template has 2")],
    }
    .into_problem();
    assert_eq!(p.status(), 409);
    assert_eq!(p.details["fields"][0]["field"], "template.variables");
    let p = SendRefusal {
        code: ErrorCode::ValidationFailed,
        fields: vec![FieldError::new("template", "x")],
    }
    .into_problem();
    assert_eq!(p.status(), 400);
}

fn example_passes(components: Value) -> Value {
    let ex = example_message("t", "en_US", &components);
    assert_eq!(ex["type"], "template");
    assert_eq!(ex["to"], RECIPIENT_PLACEHOLDER);
    assert_eq!(ex["template"]["name"], "t");
    assert_eq!(ex["template"]["language"], "en_US");
    let tpl = &ex["template"];
    let vars: Option<Vec<String>> = tpl.get("variables").map(|v| {
        v.as_array()
            .expect("array")
            .iter()
            .map(|s| s.as_str().expect("string").to_string())
            .collect()
    });
    let r = check_send(
        &components,
        vars.as_deref(),
        tpl.get("components"),
        tpl.get("coupon_code").and_then(Value::as_str),
    );
    assert_eq!(r, Ok(()), "example {ex}");
    ex
}

#[test]
fn examples_are_sendable() {
    let ex = example_passes(json!([body("Hi {{1}}, order {{2}} ok.", &["Ada", "A-12"])]));
    assert_eq!(ex["template"]["variables"], json!(["Ada", "A-12"]));
    let ex = example_passes(json!([body("Hello", &[])]));
    assert!(ex["template"].get("variables").is_none());
    let ex = example_passes(full());
    assert_eq!(
        ex["template"]["components"][2]["parameters"][0]["text"],
        "A-12"
    );
    assert_eq!(
        ex["template"]["components"][0]["parameters"][0]["text"],
        "Ada"
    );
    for format in ["IMAGE", "VIDEO", "DOCUMENT", "LOCATION"] {
        example_passes(json!([
            {"type": "HEADER", "format": format, "example": {"header_handle": ["4::abc"]}},
            body("Hi {{1}} ok", &["Ada"])
        ]));
    }
    let ex = example_passes(json!([
        body("Use {{1}} now.", &["x"]),
        {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "SAVE10"}]}
    ]));
    assert_eq!(
        ex["template"]["components"][1]["parameters"][0]["coupon_code"],
        "SAVE10"
    );
    // Examples that break the value rule (e.g. synced from the network) are cleaned up.
    let ex = example_passes(json!([body("Hi {{1}} and {{2}} ok", &["a\nb"])]));
    assert_eq!(ex["template"]["variables"], json!(["a b", "value 2"]));
    // Body-only template with a header variable shared.
    example_passes(json!([
        {"type": "HEADER", "format": "TEXT", "text": "For {{1}}", "example": {"header_text": ["Ada"]}},
        body("Hello there.", &[])
    ]));
}

#[test]
fn network_components_from_variables() {
    // Header and body share {{1}}; the body's {{2}} takes the second value.
    let t = json!([
        {"type": "HEADER", "format": "TEXT", "text": "Hello {{1}}", "example": {"header_text": ["Ada"]}},
        body("Hi {{1}}, your order {{2}} has shipped, {{1}}.", &["Ada", "A-12"]),
        {"type": "FOOTER", "text": "Reply STOP to opt out"},
        {"type": "BUTTONS", "buttons": [
            {"type": "QUICK_REPLY", "text": "Thanks"},
            {"type": "COPY_CODE", "example": "SAVE10"}
        ]}
    ]);
    let v = vars(&["Grace", "B-7"]);
    assert_eq!(check_send(&t, Some(&v), None, Some("WELCOME5")), Ok(()));
    let c = network_components(&t, &v, Some("WELCOME5"));
    assert_eq!(
        Value::Array(c.clone()),
        json!([
            {"type": "header", "parameters": [{"type": "text", "text": "Grace"}]},
            {"type": "body", "parameters": [
                {"type": "text", "text": "Grace"}, {"type": "text", "text": "B-7"}
            ]},
            {"type": "button", "sub_type": "copy_code", "index": "1",
             "parameters": [{"type": "coupon_code", "coupon_code": "WELCOME5"}]}
        ])
    );
    // The result is itself a valid typed send for the same template.
    assert_eq!(check_send(&t, None, Some(&Value::Array(c)), None), Ok(()));
}

#[test]
fn network_components_edge_cases() {
    // No variables, no button: nothing to send.
    let plain = json!([body("Hello", &[])]);
    assert!(network_components(&plain, &[], None).is_empty());
    // A header variable with a body without any.
    let t = json!([
        {"type": "HEADER", "format": "TEXT", "text": "For {{1}}", "example": {"header_text": ["Ada"]}},
        body("Hello there.", &[])
    ]);
    let v = vars(&["Ada"]);
    assert_eq!(check_send(&t, Some(&v), None, None), Ok(()));
    let c = network_components(&t, &v, None);
    assert_eq!(
        Value::Array(c.clone()),
        json!([{"type": "header", "parameters": [{"type": "text", "text": "Ada"}]}])
    );
    assert_eq!(check_send(&t, None, Some(&Value::Array(c)), None), Ok(()));
    // A text header without a variable gets no header component.
    let t = json!([
        {"type": "HEADER", "format": "TEXT", "text": "News"},
        body("Hi {{1}}, see {{2}} and {{3}} now.", &["a", "b", "c"])
    ]);
    let v = vars(&["a", "b", "c"]);
    let c = network_components(&t, &v, None);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["type"], "body");
    assert_eq!(c[0]["parameters"][2]["text"], "c");
    assert_eq!(check_send(&t, None, Some(&Value::Array(c)), None), Ok(()));
    // A synced template with a gap: distinct numbers in order take the values in order.
    let gap = json!([{"type": "BODY", "text": "Hi {{2}} there"}]);
    assert_eq!(variable_count(&gap), 1);
    let c = network_components(&gap, &vars(&["x"]), None);
    assert_eq!(c[0]["parameters"], json!([{"type": "text", "text": "x"}]));
    // Coupon without a copy-code button is left out (check_send refuses it anyway).
    assert!(network_components(&plain, &[], Some("X")).is_empty());
}

#[test]
fn send_shape_problems_match_check_send() {
    let t = json!([body("Hi {{1}} ok", &["a"])]);
    let bad = vars(&["a\tb"]);
    let p = send_shape_problems(Some(&bad), None, None);
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].field, "template.variables[0]");
    let r = check_send(&t, Some(&bad), None, None).expect_err("refused");
    assert_eq!(r.fields, p);
    assert!(send_shape_problems(Some(&vars(&["ok"])), None, None).is_empty());
    assert_eq!(
        send_shape_problems(Some(&[]), Some(&json!([])), Some("C"))
            .into_iter()
            .map(|f| f.field)
            .collect::<Vec<_>>(),
        vec!["template", "template.coupon_code"]
    );
}

#[test]
fn statuses_and_submission() {
    for s in TemplateStatus::ALL {
        assert_eq!(TemplateStatus::parse(s.as_str()), Some(*s));
    }
    assert_eq!(TemplateStatus::parse("APPROVED"), None);
    assert!(TemplateStatus::Draft.can_submit() && TemplateStatus::Rejected.can_submit());
    assert!(!TemplateStatus::Pending.can_submit() && !TemplateStatus::Approved.can_submit());
}
