#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Webhook notification parsing on payloads shaped like the reference examples, plus
//! property tests that arbitrary input never panics.

use proptest::prelude::*;
use serde_json::{Value, json};
use tern_cloudapi::{
    Change, DeliveryStatus, GraphError, InboundContent, InteractiveReply, ParseError,
    TemplateEvent, parse_notification,
};

pub(crate) fn envelope(value: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": value}]}]
    }))
    .unwrap()
}

pub(crate) fn meta() -> Value {
    json!({"display_phone_number": "15550783881", "phone_number_id": "106540352242922"})
}

#[test]
fn statuses_full_lifecycle_and_unknown_status() {
    let body = envelope(json!({
        "messaging_product": "whatsapp",
        "metadata": meta(),
        "statuses": [
            {"id": "wamid.A", "status": "sent", "timestamp": "1750263773", "recipient_id": "16505551234",
             "biz_opaque_callback_data": "msg_1",
             "conversation": {"id": "c1", "expiration_timestamp": "1750350173", "origin": {"type": "service"}},
             "pricing": {"billable": true, "pricing_model": "PMP", "type": "regular", "category": "service"}},
            {"id": "wamid.A", "status": "delivered", "timestamp": 1750263774, "recipient_id": "16505551234"},
            {"id": "wamid.A", "status": "read", "timestamp": "1750263775", "recipient_id": "16505551234"},
            {"id": "wamid.B", "status": "failed", "timestamp": "1750263776", "recipient_id": "16505550000",
             "errors": [{"code": 131026, "title": "Message undeliverable", "message": "Message undeliverable",
                         "error_data": {"details": "Message Undeliverable."},
                         "href": "/documentation/business-messaging/whatsapp/support/error-codes"}]},
            {"id": "wamid.C", "status": "warning", "timestamp": "1"},
            {"status": "sent"},
            {"id": "wamid.D", "status": "played", "timestamp": "2"}
        ]
    }));
    let n = parse_notification(&body).unwrap();
    assert_eq!(n.object.as_deref(), Some("whatsapp_business_account"));
    let (waba, v) = n.messages_values().next().unwrap();
    assert_eq!(waba, "102290129340398");
    assert_eq!(
        v.metadata.phone_number_id.as_deref(),
        Some("106540352242922")
    );
    assert_eq!(v.statuses.len(), 6);
    assert_eq!(v.malformed.len(), 1, "status without id is kept aside");
    let sent = &v.statuses[0];
    assert_eq!(sent.status, DeliveryStatus::Sent);
    assert_eq!(sent.timestamp, Some(1_750_263_773));
    assert_eq!(sent.biz_opaque_callback_data.as_deref(), Some("msg_1"));
    assert_eq!(
        sent.conversation.as_ref().unwrap().origin_type.as_deref(),
        Some("service")
    );
    assert_eq!(
        sent.pricing.as_ref().unwrap().category.as_deref(),
        Some("service")
    );
    assert_eq!(
        v.statuses[1].timestamp,
        Some(1_750_263_774),
        "numeric timestamps accepted"
    );
    let failed = &v.statuses[3];
    assert_eq!(failed.status, DeliveryStatus::Failed);
    assert_eq!(failed.errors[0].code, Some(131026));
    assert_eq!(
        failed.errors[0].details.as_deref(),
        Some("Message Undeliverable.")
    );
    assert_eq!(failed.errors[0].failure().code, "recipient_not_on_whatsapp");
    assert_eq!(
        v.statuses[4].status,
        DeliveryStatus::Unknown("warning".into())
    );
    assert_eq!(v.statuses[5].status, DeliveryStatus::Played);
}

#[test]
fn every_inbound_type() {
    let body = envelope(json!({
        "messaging_product": "whatsapp",
        "metadata": meta(),
        "contacts": [{"profile": {"name": "Sheena Nelson"}, "wa_id": "16505551234"}],
        "messages": [
            {"from": "16505551234", "id": "wamid.1", "timestamp": "1", "type": "text", "text": {"body": "hi"},
             "context": {"from": "15550783881", "id": "wamid.Q", "forwarded": true}},
            {"from": "16505551234", "id": "wamid.2", "timestamp": "2", "type": "image",
             "image": {"caption": "c", "mime_type": "image/jpeg", "sha256": "abc=", "id": "m1", "url": "https://x"}},
            {"from": "16505551234", "id": "wamid.3", "timestamp": "3", "type": "audio",
             "audio": {"mime_type": "audio/ogg; codecs=opus", "sha256": "x", "id": "m2", "voice": true}},
            {"from": "16505551234", "id": "wamid.4", "timestamp": "4", "type": "video", "video": {"id": "m3", "mime_type": "video/mp4"}},
            {"from": "16505551234", "id": "wamid.5", "timestamp": "5", "type": "document",
             "document": {"id": "m4", "filename": "a.pdf", "mime_type": "application/pdf"}},
            {"from": "16505551234", "id": "wamid.6", "timestamp": "6", "type": "sticker",
             "sticker": {"id": "m5", "animated": false, "mime_type": "image/webp"}},
            {"from": "16505551234", "id": "wamid.7", "timestamp": "7", "type": "location",
             "location": {"latitude": "37.48", "longitude": -122.14, "name": "HQ", "address": "1 Hacker Way"}},
            {"from": "16505551234", "id": "wamid.8", "timestamp": "8", "type": "contacts",
             "contacts": [{"name": {"formatted_name": "A B"}, "phones": [{"phone": "+1", "wa_id": "1"}]}]},
            {"from": "16505551234", "id": "wamid.9", "timestamp": "9", "type": "interactive",
             "interactive": {"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes"}}},
            {"from": "16505551234", "id": "wamid.10", "timestamp": "10", "type": "interactive",
             "interactive": {"type": "list_reply", "list_reply": {"id": "r1", "title": "Row", "description": "d"}}},
            {"from": "16505551234", "id": "wamid.11", "timestamp": "11", "type": "interactive",
             "interactive": {"type": "nfm_reply", "nfm_reply": {"name": "flow", "body": "Sent", "response_json": "{\"a\":1}"}}},
            {"from": "16505551234", "id": "wamid.12", "timestamp": "12", "type": "button",
             "button": {"text": "Stop", "payload": "STOP"}, "context": {"from": "15550783881", "id": "wamid.T"}},
            {"from": "16505551234", "id": "wamid.13", "timestamp": "13", "type": "reaction",
             "reaction": {"message_id": "wamid.T", "emoji": "\u{1F44D}"}},
            {"from": "16505551234", "id": "wamid.14", "timestamp": "14", "type": "order",
             "order": {"catalog_id": "cat", "text": "t", "product_items": [{"product_retailer_id": "p", "quantity": 1}]}},
            {"from": "16505551234", "id": "wamid.15", "timestamp": "15", "type": "system",
             "system": {"body": "changed", "type": "customer_changed_number", "new_wa_id": "16505559999"}},
            {"from": "16505551234", "id": "wamid.16", "timestamp": "16", "type": "unsupported",
             "errors": [{"code": 131051, "title": "Message type unknown"}]},
            {"from": "16505551234", "id": "wamid.17", "timestamp": "17", "type": "hologram", "hologram": {}},
            {"from": "16505551234", "id": "wamid.18", "timestamp": "18", "type": "text", "text": 5,
             "referral": {"source_url": "https://ad", "source_type": "ad", "ctwa_clid": "x"}},
            {"from": "16505551234", "id": "wamid.19", "timestamp": "19", "type": "request_welcome"},
            {"from": "16505551234", "id": "wamid.20", "timestamp": "20", "type": "reaction", "reaction": {"message_id": "wamid.T"}}
        ]
    }));
    let n = parse_notification(&body).unwrap();
    let (_, v) = n.messages_values().next().unwrap();
    assert_eq!(v.profile_name("16505551234"), Some("Sheena Nelson"));
    let m = &v.messages;
    assert_eq!(m.len(), 20);
    assert!(matches!(&m[0].content, InboundContent::Text { body } if body == "hi"));
    let ctx = m[0].context.as_ref().unwrap();
    assert_eq!(ctx.id.as_deref(), Some("wamid.Q"));
    assert!(ctx.forwarded);
    assert!(
        matches!(&m[1].content, InboundContent::Image(i) if i.id.as_deref() == Some("m1") && i.caption.as_deref() == Some("c"))
    );
    assert!(matches!(&m[2].content, InboundContent::Audio(a) if a.voice == Some(true)));
    assert!(matches!(&m[3].content, InboundContent::Video(_)));
    assert!(
        matches!(&m[4].content, InboundContent::Document(d) if d.filename.as_deref() == Some("a.pdf"))
    );
    assert!(matches!(&m[5].content, InboundContent::Sticker(s) if s.animated == Some(false)));
    match &m[6].content {
        InboundContent::Location(l) => {
            assert_eq!(l.latitude, Some(37.48));
            assert_eq!(l.longitude, Some(-122.14));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(&m[7].content, InboundContent::Contacts { contacts } if contacts.len() == 1));
    assert!(
        matches!(&m[8].content, InboundContent::Interactive(InteractiveReply::ButtonReply { id, .. }) if id.as_deref() == Some("yes"))
    );
    assert!(
        matches!(&m[9].content, InboundContent::Interactive(InteractiveReply::ListReply { description, .. }) if description.as_deref() == Some("d"))
    );
    assert!(
        matches!(&m[10].content, InboundContent::Interactive(InteractiveReply::NfmReply { response_json, .. }) if response_json.as_deref() == Some("{\"a\":1}"))
    );
    assert!(
        matches!(&m[11].content, InboundContent::Button { payload, .. } if payload.as_deref() == Some("STOP"))
    );
    assert_eq!(
        m[11].context.as_ref().unwrap().id.as_deref(),
        Some("wamid.T")
    );
    assert!(matches!(
        &m[12].content,
        InboundContent::Reaction { emoji: Some(_), .. }
    ));
    assert!(
        matches!(&m[13].content, InboundContent::Order { product_items, .. } if product_items.len() == 1)
    );
    assert!(
        matches!(&m[14].content, InboundContent::System { new_wa_id, .. } if new_wa_id.as_deref() == Some("16505559999"))
    );
    assert!(matches!(&m[15].content, InboundContent::Unsupported));
    assert_eq!(m[15].errors[0].code, Some(131051));
    assert!(
        matches!(&m[16].content, InboundContent::Unknown { type_name } if type_name == "hologram")
    );
    assert!(
        matches!(&m[17].content, InboundContent::Unknown { .. }),
        "bad text object degrades"
    );
    assert!(m[17].referral.is_some());
    assert!(matches!(&m[18].content, InboundContent::RequestWelcome));
    assert!(
        matches!(&m[19].content, InboundContent::Reaction { emoji: None, .. }),
        "removed reaction"
    );
    assert_eq!(m[0].timestamp, Some(1));
}

#[test]
fn template_status_update_and_other_fields() {
    let body = serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA", "time": 1674864290, "changes": [
            {"field": "message_template_status_update", "value": {
                "event": "REJECTED", "message_template_id": 594425479261596u64,
                "message_template_name": "order_update", "message_template_language": "en_US",
                "reason": "INVALID_FORMAT", "message_template_category": "UTILITY"}},
            {"field": "message_template_status_update", "value": {
                "event": "SOMETHING_NEW", "message_template_id": "1", "reason": null}},
            {"field": "phone_number_quality_update", "value": {"event": "THROUGHPUT_UPGRADE"}},
            {"field": "messages", "value": {"metadata": meta(), "errors": [{"code": 130429, "title": "Rate limit hit"}]}}
        ]}]
    }))
    .unwrap();
    let n = parse_notification(&body).unwrap();
    assert_eq!(n.entries[0].time, Some(1_674_864_290));
    let ups: Vec<_> = n.template_updates().collect();
    assert_eq!(ups.len(), 2);
    assert_eq!(ups[0].1.event, TemplateEvent::Rejected);
    assert_eq!(
        ups[0].1.message_template_id.as_deref(),
        Some("594425479261596")
    );
    assert_eq!(ups[0].1.reason.as_deref(), Some("INVALID_FORMAT"));
    assert_eq!(
        ups[1].1.event,
        TemplateEvent::Unknown("SOMETHING_NEW".into())
    );
    assert_eq!(ups[1].1.reason, None);
    assert!(
        matches!(&n.entries[0].changes[2], Change::Other { name, .. } if name == "phone_number_quality_update")
    );
    let (_, v) = n.messages_values().next().unwrap();
    assert_eq!(v.errors[0].code, Some(130429));
}

#[test]
fn only_non_objects_are_errors() {
    assert!(matches!(
        parse_notification(b"not json"),
        Err(ParseError::InvalidJson(_))
    ));
    assert!(matches!(
        parse_notification(b"[1,2]"),
        Err(ParseError::NotAnObject)
    ));
    let n = parse_notification(b"{}").unwrap();
    assert!(n.entries.is_empty());
    let n = parse_notification(br#"{"entry":{"id":1}}"#).unwrap();
    assert!(n.entries.is_empty());
    let n = parse_notification(
        br#"{"entry":[5,{"id":7,"changes":[null,{"field":"messages","value":[]}]}]}"#,
    )
    .unwrap();
    assert_eq!(n.entries.len(), 2);
    assert_eq!(n.entries[1].id, "7");
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z_]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("messages"),
            Just("statuses"),
            Just("text"),
            Just("interactive"),
            Just("failed"),
            Just("message_template_status_update"),
            Just("id"),
            Just("type"),
            Just("errors"),
            Just("edit"),
            Just("revoke"),
            Just("reaction"),
            Just("location"),
            Just("image"),
            Just("group"),
            Just("system"),
            Just("user_changed_user_id"),
            Just("user_changed_number"),
            Just("template_category_update"),
            Just("MARKETING"),
            Just("")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(5, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("object".to_owned()),
                    Just("entry".to_owned()),
                    Just("changes".to_owned()),
                    Just("field".to_owned()),
                    Just("value".to_owned()),
                    Just("messages".to_owned()),
                    Just("statuses".to_owned()),
                    Just("id".to_owned()),
                    Just("type".to_owned()),
                    Just("text".to_owned()),
                    Just("errors".to_owned()),
                    Just("timestamp".to_owned()),
                    Just("error".to_owned()),
                    Just("code".to_owned()),
                    Just("error_data".to_owned()),
                    Just("edit".to_owned()),
                    Just("message".to_owned()),
                    Just("revoke".to_owned()),
                    Just("original_message_id".to_owned()),
                    Just("contacts".to_owned()),
                    Just("from".to_owned()),
                    Just("from_user_id".to_owned()),
                    Just("user_id".to_owned()),
                    Just("wa_id".to_owned()),
                    Just("recipient_id".to_owned()),
                    Just("recipient_user_id".to_owned()),
                    Just("system".to_owned()),
                    Just("previous_user_id".to_owned()),
                    Just("new_wa_id".to_owned()),
                    Just("new_category".to_owned()),
                    Just("latitude".to_owned()),
                    "[a-z]{1,6}"
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn canned() -> Vec<u8> {
    envelope(
        json!({"metadata": meta(), "contacts": [{"profile": {"name": "A"}, "wa_id": "1"}],
        "messages": [{"from": "1", "id": "wamid.1", "timestamp": "1", "type": "interactive",
                      "interactive": {"type": "list_reply", "list_reply": {"id": "x", "title": "y"}}}],
        "statuses": [{"id": "wamid.2", "status": "failed", "errors": [{"code": 131047}]}]}),
    )
}

/// Calls every accessor on a parsed notification (they must not panic either).
fn exercise(n: &tern_cloudapi::Notification) {
    let _ = serde_json::to_value(n).unwrap();
    for (_, v) in n.messages_values() {
        for m in &v.messages {
            let who = v.sender(m);
            if let Some(change) = m.identity_change() {
                let _ = who.after(&change);
            }
            let _ = m.reply_to_wamid();
            let obj = m.content_object();
            if matches!(m.content, InboundContent::Unknown { .. }) {
                assert!(obj.is_some(), "unknown content dropped: {m:?}");
            }
        }
        for s in &v.statuses {
            let _ = v.recipient(s);
        }
    }
    for (_, u) in n.template_category_updates() {
        let _ = u.category();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_json_never_panics(v in arb_json()) {
        let bytes = serde_json::to_vec(&v).unwrap();
        let _ = parse_notification(&bytes);
        let _ = GraphError::from_response(400, &bytes).failure();
        // wrapped as a plausible envelope too
        let wrapped = serde_json::to_vec(&json!({"object": "whatsapp_business_account",
            "entry": [{"id": "1", "changes": [{"field": "messages", "value": v.clone()}]}]})).unwrap();
        prop_assert!(parse_notification(&wrapped).is_ok());
        // every field kind, and every accessor over the result
        for field in ["messages", "template_category_update"] {
            let wrapped = serde_json::to_vec(&json!({"entry": [{"id": "1", "changes": [
                {"field": field, "value": v.clone()}]}]})).unwrap();
            let n = parse_notification(&wrapped).unwrap();
            exercise(&n);
        }
        if let Ok(n) = parse_notification(&bytes) {
            exercise(&n);
        }
        let err = serde_json::to_vec(&json!({"error": v})).unwrap();
        let _ = GraphError::from_response(500, &err).retry_class();
    }

    #[test]
    fn truncated_and_mutated_bodies_never_panic(cut in 0usize..400, pos in 0usize..400, byte in any::<u8>()) {
        let body = canned();
        let truncated = &body[..cut.min(body.len())];
        let _ = parse_notification(truncated);
        let _ = GraphError::from_response(502, truncated);
        let mut mutated = body.clone();
        let i = pos % mutated.len();
        mutated[i] = byte;
        let _ = parse_notification(&mutated);
        let _ = GraphError::from_response(400, &mutated);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_notification(&bytes);
        let _ = GraphError::from_response(503, &bytes);
    }
}

mod identities;
