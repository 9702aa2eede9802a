//! The body rules of POST /messages: the envelope, text and media (more in `content`).

use super::*;
use serde_json::json;
use sha2::{Digest, Sha256};

const PHONE: &str = "+14155550123";

fn field_names(p: &Problem) -> Vec<String> {
    p.details["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| f["field"].as_str().expect("field").to_string())
        .collect()
}

fn message_of(p: &Problem, field: &str) -> String {
    p.details["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .find(|f| f["field"] == field)
        .and_then(|f| f["message"].as_str())
        .unwrap_or_else(|| panic!("no {field} in {:?}", p.details))
        .to_string()
}

fn ok(body: Value) -> SendRequest {
    match parse_send(&body) {
        Ok(r) => r,
        Err(p) => panic!("{body} refused: {:?}", p.details),
    }
}

fn bad(body: Value) -> Problem {
    parse_send(&body).expect_err("refused")
}

/// The fields of a refused body, which must be a 400 validation_failed.
fn invalid(body: Value) -> Vec<String> {
    let p = bad(body);
    assert_eq!(p.code, ErrorCode::ValidationFailed, "{:?}", p.details);
    assert_eq!(p.status(), 400);
    field_names(&p)
}

fn with(kind: &str, obj: Value) -> Value {
    let mut b = json!({"type": kind, "to": PHONE});
    b[kind] = obj;
    b
}

// ---- Idempotency-Key ----

#[test]
fn idempotency_keys_accepted() {
    for k in [
        "abcd1234",
        "0190f5a2-7c3e-7b1a-9f00-2b6c1d4e5f60",
        "order:42.retry_1",
        "A-b.c_d:e",
        &"k".repeat(128),
    ] {
        assert_eq!(check_idempotency_key(Some(k)), Ok(k));
    }
}

#[test]
fn idempotency_keys_refused() {
    let missing = check_idempotency_key(None).expect_err("missing");
    assert_eq!(missing.code, ErrorCode::ValidationFailed);
    assert_eq!(field_names(&missing), vec!["Idempotency-Key"]);
    let m = message_of(&missing, "Idempotency-Key");
    assert!(m.starts_with("is required"), "{m}");
    let cases = [
        ("", "is empty"),
        ("abc1234", "too short (7"),
        (&"k".repeat(129), "too long (129"),
        ("abcd 1234", "a space"),
        ("abcd/1234", "'/'"),
        ("abcdé1234", "'é'"),
        ("abcd\u{1}1234", "U+0001"),
        ("-abcd1234", "start with a letter or a digit"),
        (".abcd1234", "start with a letter or a digit"),
    ];
    for (k, needle) in cases {
        let p = check_idempotency_key(Some(k)).expect_err(k);
        assert_eq!(p.status(), 400);
        assert_eq!(field_names(&p), vec!["Idempotency-Key"]);
        let m = message_of(&p, "Idempotency-Key");
        assert!(m.contains(needle), "{k:?}: {m}");
        assert!(!m.starts_with("is required"), "{k:?}: {m}");
    }
    // Several problems are explained together.
    let p = check_idempotency_key(Some("_a b")).expect_err("bad");
    let m = message_of(&p, "Idempotency-Key");
    assert!(
        m.contains("a space") && m.contains("start") && m.contains("short"),
        "{m}"
    );
}

// ---- fingerprint ----

#[test]
fn fingerprint_ignores_key_order_and_whitespace() {
    let a: Value = serde_json::from_str(
        r#"{"type":"text","to":"+14155550123","text":{"body":"hi","preview_url":false}}"#,
    )
    .unwrap();
    let b: Value = serde_json::from_str(
        "{ \"text\" : { \"preview_url\" : false , \"body\" : \"hi\" },\n  \"to\": \"+14155550123\",\n \"type\": \"text\" }",
    )
    .unwrap();
    assert_eq!(fingerprint(&a), fingerprint(&b));
    assert_eq!(
        canonical_json(&b),
        r#"{"text":{"body":"hi","preview_url":false},"to":"+14155550123","type":"text"}"#
    );
    let c = json!({"type": "text", "to": PHONE, "text": {"body": "hi!", "preview_url": false}});
    assert_ne!(fingerprint(&a), fingerprint(&c));
    // Array order matters; nested objects are sorted too.
    let x = json!({"a": [{"z": 1, "y": [true, null]}, "é\n\"q\""], "b": 1.5, "c": -2});
    assert_eq!(
        canonical_json(&x),
        r#"{"a":[{"y":[true,null],"z":1},"é\n\"q\""],"b":1.5,"c":-2}"#
    );
    assert_ne!(fingerprint(&json!([1, 2])), fingerprint(&json!([2, 1])));
    // The escape form of the input does not matter once parsed.
    let e1: Value = serde_json::from_str(r#"{"e":"\u00e9"}"#).unwrap();
    let e2: Value = serde_json::from_str(r#"{"e":"é"}"#).unwrap();
    assert_eq!(fingerprint(&e1), fingerprint(&e2));
    // It is SHA-256 of the canonical text.
    let expect: [u8; 32] = Sha256::digest(b"{\"a\":1}").into();
    assert_eq!(fingerprint(&json!({"a": 1})), expect);
}

// ---- kinds ----

#[test]
fn kinds() {
    for k in Kind::ALL {
        assert_eq!(Kind::parse(k.as_str()), Some(k));
    }
    assert_eq!(Kind::parse("TEXT"), None);
    assert!(Kind::Template.is_template());
    assert!(!Kind::Text.is_template());
    let media: Vec<Kind> = Kind::ALL.into_iter().filter(|k| k.is_media()).collect();
    assert_eq!(
        media,
        vec![
            Kind::Image,
            Kind::Video,
            Kind::Audio,
            Kind::Document,
            Kind::Sticker
        ]
    );
    assert!(Kind::Document.takes_caption() && !Kind::Audio.takes_caption());
    assert_eq!(
        supported_types(),
        "text, image, video, audio, document, sticker, location, contacts, interactive, reaction, template"
    );
}

// ---- the envelope ----

#[test]
fn a_text_message() {
    let r = ok(
        json!({"type": "text", "to": "+1 415-555-0123", "text": {"body": "Hello", "preview_url": true}}),
    );
    assert_eq!(r.kind, Kind::Text);
    assert_eq!(
        r.recipient,
        Recipient::Phone(Phone {
            e164: PHONE.to_string()
        })
    );
    assert_eq!(r.sender, None);
    assert_eq!(r.text.as_deref(), Some("Hello"));
    assert_eq!(r.media, None);
    assert_eq!(r.template, None);
    assert_eq!(r.context, None);
    assert_eq!(r.content, json!({"body": "Hello", "preview_url": true}));
}

#[test]
fn recipients() {
    let r = ok(json!({"type": "text", "to": {"wa_id": "14155550123"}, "text": {"body": "x"}}));
    assert_eq!(r.recipient, Recipient::WaId(Phone { e164: PHONE.into() }));
    let id = "0190f5a2-7c3e-7b1a-9f00-2b6c1d4e5f60";
    let r = ok(json!({"type": "text", "to": {"contact_id": id}, "text": {"body": "x"}}));
    assert_eq!(
        r.recipient,
        Recipient::ContactId(uuid::Uuid::parse_str(id).unwrap())
    );
    let r = ok(
        json!({"type": "text", "to": {"user_id": "US.13491208655302741918"}, "text": {"body": "x"}}),
    );
    assert_eq!(
        r.recipient,
        Recipient::UserId("US.13491208655302741918".into())
    );
    let text = json!({"body": "x"});
    let cases = [
        (json!({"user_id": "13491208655302741918"}), "to.user_id"),
        (json!({"user_id": 5}), "to.user_id"),
        (json!({"user_id": "US.1", "wa_id": "14155550123"}), "to"),
        (json!(null), "to"),
        (json!(14155550123u64), "to"),
        (json!("+999123"), "to"),
        (json!({}), "to"),
        (json!({"contact_id": id, "wa_id": "14155550123"}), "to"),
        (json!({"contact_id": "nope"}), "to.contact_id"),
        (json!({"contact_id": 7}), "to.contact_id"),
        (json!({"wa_id": "+14155550123"}), "to.wa_id"),
        (json!({"wa_id": 14155550123u64}), "to.wa_id"),
        (json!({"wa_id": "999123"}), "to.wa_id"),
        (json!({"wa_id": "14155550123", "phone": "x"}), "to.phone"),
    ];
    for (to, field) in cases {
        let p = bad(json!({"type": "text", "to": to, "text": text}));
        assert_eq!(p.code, ErrorCode::ValidationFailed, "{to}");
        assert_eq!(field_names(&p), vec![field], "{to}");
        assert!(p.details.get("reason").is_none(), "{to}");
    }
}

#[test]
fn recipient_reasons() {
    let p = bad(json!({"type": "text", "to": "14155550123", "text": {"body": "x"}}));
    assert_eq!(p.details["reason"], "to_needs_country_code");
    assert_eq!(field_names(&p), vec!["to"]);
    assert!(message_of(&p, "to").contains("country code"));
    let p = bad(json!({"type": "text", "to": "+<RECIPIENT_PHONE>", "text": {"body": "x"}}));
    assert_eq!(p.details["reason"], "to_placeholder");
    let p = bad(json!({"type": "text", "to": {"wa_id": "<WA_ID>"}, "text": {"body": "x"}}));
    assert_eq!(p.details["reason"], "to_placeholder");
    assert_eq!(field_names(&p), vec!["to.wa_id"]);
    // The reason stays when other fields are wrong too.
    let p = bad(json!({"type": "text", "to": "+<RECIPIENT_PHONE>", "text": {"body": ""}}));
    assert_eq!(p.code, ErrorCode::ValidationFailed);
    assert_eq!(p.details["reason"], "to_placeholder");
    assert_eq!(field_names(&p), vec!["to", "text.body"]);
}

#[test]
fn senders() {
    let b = |extra: Value| {
        let mut v = json!({"type": "text", "to": PHONE, "text": {"body": "x"}});
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    assert_eq!(
        ok(b(json!({"phone_number_id": "1234567890"}))).sender,
        Some(Sender::PhoneNumberId("1234567890".into()))
    );
    assert_eq!(
        ok(b(json!({"from": "+14155550100"}))).sender,
        Some(Sender::From("+14155550100".into()))
    );
    assert_eq!(
        ok(b(json!({"from": "123", "phone_number_id": "123"}))).sender,
        Some(Sender::PhoneNumberId("123".into()))
    );
    assert_eq!(ok(b(json!({"from": null}))).sender, None);
    assert_eq!(
        invalid(b(json!({"from": "123", "phone_number_id": "456"}))),
        vec!["from"]
    );
    assert_eq!(
        invalid(b(json!({"from": "", "phone_number_id": 5}))),
        vec!["phone_number_id", "from"]
    );
}

#[test]
fn context_and_envelope_members() {
    let r = ok(json!({"type": "text", "to": PHONE, "text": {"body": "x"},
        "context": {"message_id": "wamid.HBgLMTY0NjcwNDM1OTUVAgARGBI4MjZGRDA0OUE2OTQ3RkEyMzcA"},
        "messaging_product": "whatsapp", "recipient_type": "individual"}));
    assert_eq!(
        r.context.as_deref(),
        Some("wamid.HBgLMTY0NjcwNDM1OTUVAgARGBI4MjZGRDA0OUE2OTQ3RkEyMzcA")
    );
    let f = invalid(json!({"type": "text", "to": PHONE, "text": {"body": "x"},
        "context": {"message_id": "", "id": "x"},
        "messaging_product": "sms", "recipient_type": "group"}));
    assert_eq!(
        f,
        vec![
            "context.id",
            "context.message_id",
            "messaging_product",
            "recipient_type"
        ]
    );
    assert_eq!(
        invalid(json!({"type": "text", "to": PHONE, "text": {"body": "x"}, "context": "wamid.x"})),
        vec!["context"]
    );
}

#[test]
fn types() {
    // Missing or not a string: validation_failed.
    assert_eq!(
        invalid(json!({"to": PHONE, "text": {"body": "x"}})),
        vec!["type"]
    );
    assert_eq!(
        invalid(json!({"type": 1, "to": PHONE, "text": {"body": "x"}})),
        vec!["type"]
    );
    // Unknown type: unsupported_message_type naming type and listing the types.
    let p = bad(json!({"type": "button", "to": PHONE, "button": {"text": "x"}}));
    assert_eq!(p.code, ErrorCode::UnsupportedMessageType);
    assert_eq!(p.status(), 400);
    assert_eq!(field_names(&p), vec!["type"]);
    let m = message_of(&p, "type");
    assert!(
        m.contains("\"button\"") && m.contains(&supported_types()),
        "{m}"
    );
    // ... and still every other problem, and the to reason.
    let p = bad(json!({"type": "Text", "to": "14155550123", "bogus": 1}));
    assert_eq!(p.code, ErrorCode::UnsupportedMessageType);
    assert_eq!(field_names(&p), vec!["type", "to", "bogus"]);
    assert_eq!(p.details["reason"], "to_needs_country_code");
    // The object named like the type is required.
    assert_eq!(invalid(json!({"type": "text", "to": PHONE})), vec!["text"]);
    assert_eq!(
        invalid(json!({"type": "contacts", "to": PHONE, "contacts": null})),
        vec!["contacts"]
    );
    // Other types' objects and unknown members are refused.
    let f = invalid(json!({"type": "text", "to": PHONE, "text": {"body": "x"},
        "image": {"link": "https://example.com/a.jpg"}, "txt": {}, "biz_opaque_callback_data": "x"}));
    assert_eq!(f, vec!["biz_opaque_callback_data", "image", "txt"]);
    // A null foreign object is ignored.
    ok(json!({"type": "text", "to": PHONE, "text": {"body": "x"}, "image": null}));
    // Not an object at all.
    assert_eq!(field_names(&bad(json!([1]))), vec!["body"]);
}

// ---- text ----

#[test]
fn text_rules() {
    let t = |text: Value| with("text", text);
    ok(t(json!({"body": "é".repeat(4096)})));
    assert_eq!(
        invalid(t(json!({"body": "x".repeat(4097)}))),
        vec!["text.body"]
    );
    assert!(message_of(&bad(t(json!({"body": "x".repeat(4097)}))), "text.body").contains("4096"));
    assert_eq!(invalid(t(json!({"body": ""}))), vec!["text.body"]);
    assert_eq!(invalid(t(json!({"body": "  \n "}))), vec!["text.body"]);
    assert_eq!(invalid(t(json!({}))), vec!["text.body"]);
    assert_eq!(invalid(t(json!({"body": 5}))), vec!["text.body"]);
    assert_eq!(invalid(t(json!("hello"))), vec!["text"]);
    assert_eq!(
        invalid(t(json!({"body": "x", "preview_url": "yes", "bdy": "x"}))),
        vec!["text.bdy", "text.preview_url"]
    );
}

// ---- media ----

#[test]
fn media_messages() {
    let r = ok(with(
        "image",
        json!({"link": "https://example.com/a.jpg", "caption": "Look"}),
    ));
    assert_eq!(r.kind, Kind::Image);
    assert_eq!(
        r.media,
        Some(MediaRef::Link("https://example.com/a.jpg".into()))
    );
    assert_eq!(r.text.as_deref(), Some("Look"));
    assert_eq!(
        r.content,
        json!({"link": "https://example.com/a.jpg", "caption": "Look"})
    );
    let r = ok(with(
        "document",
        json!({"media_id": "m-1", "filename": "report.pdf", "caption": "Q3"}),
    ));
    assert_eq!(r.media, Some(MediaRef::Id("m-1".into())));
    assert_eq!(
        r.content,
        json!({"media_id": "m-1", "filename": "report.pdf", "caption": "Q3"})
    );
    let r = ok(with("audio", json!({"media_id": "m-2", "voice": true})));
    assert_eq!(r.text, None);
    ok(with("video", json!({"media_id": "m-3", "caption": "c"})));
    ok(with("sticker", json!({"media_id": "m-4"})));
    ok(with(
        "image",
        json!({"link": "https://example.com:8443/a.jpg?x=1#y"}),
    ));
}

#[test]
fn media_rules() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("image", json!({}), vec!["image"]),
        (
            "image",
            json!({"link": "https://e.com/a", "media_id": "m"}),
            vec!["image"],
        ),
        (
            "image",
            json!({"link": "http://example.com/a.jpg"}),
            vec!["image.link"],
        ),
        (
            "image",
            json!({"link": "example.com/a.jpg"}),
            vec!["image.link"],
        ),
        ("image", json!({"link": 5}), vec!["image.link"]),
        ("image", json!({"media_id": ""}), vec!["image.media_id"]),
        ("image", json!({"id": "123"}), vec!["image", "image.id"]),
        (
            "image",
            json!({"media_id": "m", "caption": "x".repeat(1025)}),
            vec!["image.caption"],
        ),
        (
            "image",
            json!({"media_id": "m", "caption": ""}),
            vec!["image.caption"],
        ),
        (
            "image",
            json!({"media_id": "m", "filename": "a.jpg"}),
            vec!["image.filename"],
        ),
        (
            "audio",
            json!({"media_id": "m", "caption": "x"}),
            vec!["audio.caption"],
        ),
        (
            "sticker",
            json!({"media_id": "m", "caption": "x"}),
            vec!["sticker.caption"],
        ),
        (
            "video",
            json!({"media_id": "m", "voice": true}),
            vec!["video.voice"],
        ),
        (
            "audio",
            json!({"media_id": "m", "voice": "yes"}),
            vec!["audio.voice"],
        ),
        (
            "document",
            json!({"media_id": "m", "filename": "a/b.pdf"}),
            vec!["document.filename"],
        ),
        (
            "document",
            json!({"media_id": "m", "filename": "a\\b.pdf"}),
            vec!["document.filename"],
        ),
        (
            "document",
            json!({"media_id": "m", "filename": ""}),
            vec!["document.filename"],
        ),
        (
            "document",
            json!({"media_id": "m", "filename": "x".repeat(241)}),
            vec!["document.filename"],
        ),
        (
            "document",
            json!("https://example.com/a.pdf"),
            vec!["document"],
        ),
    ];
    for (kind, obj, want) in cases {
        let f = invalid(with(kind, obj.clone()));
        let mut f_sorted = f.clone();
        f_sorted.sort();
        let mut want: Vec<String> = want.into_iter().map(String::from).collect();
        want.sort();
        assert_eq!(f_sorted, want, "{kind} {obj}");
    }
    ok(with(
        "document",
        json!({"media_id": "m", "filename": "x".repeat(240)}),
    ));
    ok(with(
        "image",
        json!({"media_id": "m", "caption": "x".repeat(1024)}),
    ));
    let m = message_of(
        &bad(with("audio", json!({"media_id": "m", "caption": "x"}))),
        "audio.caption",
    );
    assert!(m.contains("image, video and document"), "{m}");
}

#[test]
fn https_urls() {
    for u in [
        "https://example.com",
        "https://example.com/",
        "HTTPS://Example.COM/a b".replace(' ', "%20").as_str(),
        "https://sub.example.co.uk:443/p?q=1&r=2#f",
        "https://[2001:db8::1]:8443/x",
        "https://例え.jp/ファイル.jpg",
        "https://10.0.0.1/a",
    ] {
        assert!(is_https_url(u), "{u}");
    }
    for u in [
        "http://example.com/a",
        "https://",
        "https:///path",
        "https://exa mple.com/",
        "https://user:pw@example.com/",
        "https://example..com/",
        "https://-example.com/",
        "https://example.com:0/",
        "https://example.com:99999/",
        "https://example.com:/",
        "https://[::1/",
        "https://[zz]/",
        "https://example.com\\@evil.com/",
        "ftp://example.com/",
        "https:/example.com",
    ] {
        assert!(!is_https_url(u), "{u}");
    }
}

mod addressing;
mod content;
