#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Webhook notification parsing on payloads shaped like the reference examples, plus
//! property tests that arbitrary input never panics.

use proptest::prelude::*;
use serde_json::{Value, json};
use tern_cloudapi::{
    Change, DeliveryStatus, GraphError, InboundContent, InteractiveReply, ParseError, Sender,
    TemplateEvent, parse_notification,
};
use tern_domain::plan::Category;

fn envelope(value: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": value}]}]
    }))
    .unwrap()
}

fn meta() -> Value {
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
            Just("user_id_update"),
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
                    Just("user_id_update".to_owned()),
                    Just("previous".to_owned()),
                    Just("current".to_owned()),
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
            let _ = v.sender(m);
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
    for (_, u) in n.user_id_updates() {
        assert!(u.changes.iter().all(|c| !c.user_id.is_empty()));
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
        for field in ["messages", "template_category_update", "user_id_update"] {
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

// ---- 2026 identities, edit/revoke, content objects, new fields -------------------------------

fn messages_value(body: &[u8]) -> tern_cloudapi::MessagesValue {
    let n = parse_notification(body).unwrap();
    n.messages_values().next().unwrap().1.clone()
}

#[test]
fn bsuid_only_sender() {
    let v = messages_value(&envelope(json!({
        "messaging_product": "whatsapp",
        "metadata": meta(),
        "contacts": [{"profile": {"name": "Sheena", "username": "@sheena"}, "wa_id": "",
                      "user_id": "US.13491208655302741918", "parent_user_id": "US.ENT.99"}],
        "messages": [{"from_user_id": "US.13491208655302741918", "from_parent_user_id": "US.ENT.99",
                      "id": "wamid.B1", "timestamp": "5", "type": "text", "text": {"body": "hey"}}]
    })));
    let c = &v.contacts[0];
    assert_eq!(c.wa_id, None, "empty wa_id is absent");
    assert_eq!(c.user_id.as_deref(), Some("US.13491208655302741918"));
    assert_eq!(c.parent_user_id.as_deref(), Some("US.ENT.99"));
    assert_eq!(c.username.as_deref(), Some("@sheena"));
    let m = &v.messages[0];
    assert_eq!(m.from, None);
    assert_eq!(m.from_user_id.as_deref(), Some("US.13491208655302741918"));
    assert_eq!(m.from_parent_user_id.as_deref(), Some("US.ENT.99"));
    assert_eq!(
        v.sender(m),
        Sender {
            wa_id: None,
            user_id: Some("US.13491208655302741918".into()),
            parent_user_id: Some("US.ENT.99".into()),
            username: Some("@sheena".into()),
            profile_name: Some("Sheena".into()),
        }
    );
}

#[test]
fn sender_matches_contacts_by_user_id_then_wa_id() {
    let v = messages_value(&envelope(json!({
        "metadata": meta(),
        "contacts": [
            {"profile": {"name": "Ann"}, "wa_id": "111", "user_id": "US.A"},
            {"profile": {"name": "Bob", "username": "bob"}, "wa_id": "222", "user_id": "US.B",
             "parent_user_id": "US.ENT.B"}
        ],
        "messages": [
            // phone only: matched by wa_id, identifiers completed from the contact
            {"from": "222", "id": "wamid.1", "type": "text", "text": {"body": "a"}},
            // user id wins over the wa_id when they point at different contacts
            {"from": "111", "from_user_id": "US.B", "id": "wamid.2", "type": "text", "text": {"body": "b"}},
            // names neither, two contacts: nothing guessed
            {"id": "wamid.3", "type": "text", "text": {"body": "c"}},
            // unknown user: only the message's own identifiers
            {"from_user_id": "US.Z", "id": "wamid.4", "type": "text", "text": {"body": "d"}}
        ]
    })));
    let s = v.sender(&v.messages[0]);
    assert_eq!(s.wa_id.as_deref(), Some("222"));
    assert_eq!(s.user_id.as_deref(), Some("US.B"));
    assert_eq!(s.parent_user_id.as_deref(), Some("US.ENT.B"));
    assert_eq!(s.username.as_deref(), Some("bob"));
    assert_eq!(s.profile_name.as_deref(), Some("Bob"));

    let s = v.sender(&v.messages[1]);
    assert_eq!(s.profile_name.as_deref(), Some("Bob"));
    assert_eq!(
        s.wa_id.as_deref(),
        Some("111"),
        "the message's own from is kept"
    );
    assert_eq!(s.user_id.as_deref(), Some("US.B"));

    assert_eq!(v.sender(&v.messages[2]), Sender::default());

    let s = v.sender(&v.messages[3]);
    assert_eq!(s.user_id.as_deref(), Some("US.Z"));
    assert_eq!(s.profile_name, None);
    assert_eq!(s.wa_id, None);

    // One contact and a message that names nobody: that contact.
    let v = messages_value(&envelope(json!({
        "contacts": [{"profile": {"name": "Solo"}, "user_id": "US.S", "wa_id": "333"}],
        "messages": [{"id": "wamid.9", "type": "text", "text": {"body": "x"}}]
    })));
    let s = v.sender(&v.messages[0]);
    assert_eq!(s.wa_id.as_deref(), Some("333"));
    assert_eq!(s.user_id.as_deref(), Some("US.S"));
    assert_eq!(s.profile_name.as_deref(), Some("Solo"));
    // the old helper still works
    assert_eq!(v.profile_name("333"), Some("Solo"));
}

#[test]
fn status_recipient_identities() {
    let v = messages_value(&envelope(json!({
        "metadata": meta(),
        "contacts": [{"profile": {"username": "ann"}, "wa_id": "16505551234", "user_id": "US.A"}],
        "statuses": [
            {"id": "wamid.S1", "status": "read", "timestamp": "1", "recipient_id": "16505551234",
             "recipient_user_id": "US.A", "recipient_parent_user_id": "US.ENT.A"},
            {"id": "wamid.S2", "status": "delivered", "timestamp": "1", "recipient_user_id": "US.A"},
            {"id": "wamid.S3", "status": "failed", "timestamp": "1", "recipient_id": "16505550000"},
            {"id": "wamid.S4", "status": "sent", "timestamp": "1", "recipient_id": "120363000000@g.us",
             "recipient_type": "group", "recipient_user_id": ""}
        ]
    })));
    let s0 = &v.statuses[0];
    assert_eq!(s0.recipient_user_id.as_deref(), Some("US.A"));
    assert_eq!(s0.recipient_parent_user_id.as_deref(), Some("US.ENT.A"));
    let r = v.recipient(s0);
    assert_eq!(r.wa_id.as_deref(), Some("16505551234"));
    assert_eq!(r.user_id.as_deref(), Some("US.A"));
    assert_eq!(r.parent_user_id.as_deref(), Some("US.ENT.A"));
    assert_eq!(r.username.as_deref(), Some("ann"));

    let r = v.recipient(&v.statuses[1]);
    assert_eq!(
        r.wa_id.as_deref(),
        Some("16505551234"),
        "phone from the contact"
    );
    assert_eq!(r.username.as_deref(), Some("ann"));

    let r = v.recipient(&v.statuses[2]);
    assert_eq!(r.wa_id.as_deref(), Some("16505550000"));
    assert_eq!(r.user_id, None, "another phone does not borrow the contact");
    assert_eq!(r.username, None);

    let s3 = &v.statuses[3];
    assert_eq!(s3.recipient_user_id, None, "empty user id is absent");
    let r = v.recipient(s3);
    assert_eq!(r.wa_id, None, "a group id is not a phone");
}

#[test]
fn edit_revoke_and_user_id_system_message() {
    let v = messages_value(&envelope(json!({
        "metadata": meta(),
        "contacts": [{"profile": {"name": "A"}, "user_id": "US.A"}],
        "messages": [
            {"from_user_id": "US.A", "id": "wamid.E1", "timestamp": "7", "type": "edit",
             "edit": {"original_message_id": "wamid.ORIG",
                      "message": {"type": "text", "text": {"body": "fixed typo"}, "context": {"id": "x"}}}},
            {"from_user_id": "US.A", "id": "wamid.E2", "timestamp": "8", "type": "edit",
             "edit": {"original_message_id": "wamid.IMG",
                      "message": {"type": "image", "image": {"id": "m1", "url": "https://lookaside/x",
                                  "caption": "new caption", "mime_type": "image/jpeg", "sha256": "s="}}}},
            {"from_user_id": "US.A", "id": "wamid.R1", "timestamp": "9", "type": "revoke",
             "revoke": {"original_message_id": "wamid.GONE"}},
            {"from": "16505551234", "id": "wamid.SYS", "timestamp": "10", "type": "system",
             "system": {"body": "User A changed", "type": "user_changed_user_id",
                        "user_id": "US.NEW", "parent_user_id": "US.ENT.NEW", "wa_id": "16505551234"}},
            {"from_user_id": "US.A", "id": "wamid.E3", "timestamp": "11", "type": "edit", "edit": "junk"},
            {"from_user_id": "US.A", "id": "wamid.E4", "timestamp": "12", "type": "edit",
             "edit": {"original_message_id": "wamid.O4"}},
            {"from_user_id": "US.A", "id": "wamid.E5", "timestamp": "13", "type": "edit",
             "edit": {"original_message_id": "wamid.O5",
                      "message": {"type": "edit", "edit": {"original_message_id": "wamid.O6",
                          "message": {"type": "edit", "edit": {"message": {"type": "text", "text": {"body": "deep"}}}}}}}}
        ]
    })));
    let m = &v.messages;
    match &m[0].content {
        InboundContent::Edit {
            original_id,
            type_name,
            content,
            object,
        } => {
            assert_eq!(original_id.as_deref(), Some("wamid.ORIG"));
            assert_eq!(type_name, "text");
            assert!(matches!(&**content, InboundContent::Text { body } if body == "fixed typo"));
            assert_eq!(object.as_ref(), Some(&json!({"body": "fixed typo"})));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(m[0].content_object(), Some(json!({"body": "fixed typo"})));
    assert_eq!(m[0].reply_to_wamid(), None, "only the outer context counts");

    match &m[1].content {
        InboundContent::Edit { content, .. } => {
            assert!(
                matches!(&**content, InboundContent::Image(i) if i.caption.as_deref() == Some("new caption"))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        m[1].content_object(),
        Some(json!({"caption": "new caption", "mime_type": "image/jpeg", "sha256": "s="})),
        "edited media loses id/url too"
    );

    assert!(
        matches!(&m[2].content, InboundContent::Revoke { original_id } if original_id.as_deref() == Some("wamid.GONE"))
    );
    assert_eq!(
        m[2].content_object(),
        Some(json!({"original_message_id": "wamid.GONE"}))
    );

    match &m[3].content {
        InboundContent::System {
            system_type,
            user_id,
            parent_user_id,
            new_wa_id,
            ..
        } => {
            assert_eq!(system_type.as_deref(), Some("user_changed_user_id"));
            assert_eq!(user_id.as_deref(), Some("US.NEW"));
            assert_eq!(parent_user_id.as_deref(), Some("US.ENT.NEW"));
            assert_eq!(new_wa_id.as_deref(), Some("16505551234"));
        }
        other => panic!("{other:?}"),
    }

    assert!(
        matches!(&m[4].content, InboundContent::Unknown { type_name } if type_name == "edit"),
        "an unusable edit object degrades"
    );
    assert_eq!(m[4].content_object(), Some(json!("junk")));

    match &m[5].content {
        InboundContent::Edit {
            original_id,
            content,
            object,
            ..
        } => {
            assert_eq!(original_id.as_deref(), Some("wamid.O4"));
            assert!(matches!(&**content, InboundContent::Unknown { .. }));
            assert_eq!(object, &None);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        m[5].content_object(),
        Some(json!({"original_message_id": "wamid.O4"})),
        "an edit without its new message keeps the edit object"
    );

    // Nested edits are bounded: the innermost level degrades to Unknown.
    match &m[6].content {
        InboundContent::Edit { content, .. } => match &**content {
            InboundContent::Edit { content, .. } => {
                assert!(
                    matches!(&**content, InboundContent::Unknown { type_name } if type_name == "edit")
                );
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    assert!(m[6].content_object().is_some());
}

#[test]
fn content_objects_for_storage() {
    let v = messages_value(&envelope(json!({
        "metadata": meta(),
        "messages": [
            {"from": "1", "id": "wamid.1", "timestamp": "1", "type": "text", "text": {"body": "hi"},
             "context": {"from": "15550783881", "id": "wamid.Q"}},
            {"from": "1", "id": "wamid.2", "timestamp": "2", "type": "image",
             "image": {"caption": "c", "mime_type": "image/jpeg", "sha256": "abc=", "id": "m1", "url": "https://x"}},
            {"from": "1", "id": "wamid.3", "timestamp": "3", "type": "audio",
             "audio": {"mime_type": "audio/ogg", "sha256": "x", "id": "m2", "voice": true, "url": "https://y"}},
            {"from": "1", "id": "wamid.4", "timestamp": "4", "type": "document",
             "document": {"id": "m4", "filename": "a.pdf", "mime_type": "application/pdf", "extra": 1}},
            {"from": "1", "id": "wamid.5", "timestamp": "5", "type": "sticker",
             "sticker": {"id": "m5", "animated": false, "mime_type": "image/webp"}},
            {"from": "1", "id": "wamid.6", "timestamp": "6", "type": "location",
             "location": {"latitude": "37.48", "longitude": -122.14, "name": "HQ", "url": "u"}},
            {"from": "1", "id": "wamid.7", "timestamp": "7", "type": "reaction",
             "reaction": {"message_id": "wamid.T", "emoji": "\u{1F44D}"}},
            {"from": "1", "id": "wamid.8", "timestamp": "8", "type": "reaction",
             "reaction": {"message_id": "wamid.T", "emoji": ""}},
            {"from": "1", "id": "wamid.9", "timestamp": "9", "type": "request_welcome"},
            {"from": "1", "id": "wamid.10", "timestamp": "10", "type": "hologram", "hologram": {"x": 1}},
            {"from": "1", "from_user_id": "US.1", "id": "wamid.11", "timestamp": "11", "type": "hologram",
             "beam": {"y": 2}},
            {"from": "1", "id": "wamid.12", "timestamp": "12", "type": "unsupported",
             "errors": [{"code": 131051}]},
            {"from": "1", "id": "wamid.13", "timestamp": "13", "type": "interactive",
             "interactive": {"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes"}}},
            {"from": "1", "id": "wamid.14", "timestamp": "14", "type": "contacts",
             "contacts": [{"name": {"formatted_name": "A"}}]},
            {"from": "1", "id": "wamid.15", "timestamp": "15", "type": "location",
             "location": {"latitude": "NaN", "longitude": "x"}},
            {"from": "1", "id": "wamid.16", "timestamp": "16", "type": "video",
             "video": {"id": "m6", "mime_type": "video/mp4"}},
            {"from": "1", "id": "wamid.17", "timestamp": "17", "type": "request_welcome",
             "request_welcome": {"k": "v"}},
            {"from": "1", "id": "wamid.18", "timestamp": "18", "type": "reaction",
             "reaction": {"message_id": "wamid.T"}}
        ]
    })));
    let m = &v.messages;
    let obj = |i: usize| m[i].content_object();
    assert_eq!(obj(0), Some(json!({"body": "hi"})));
    assert_eq!(m[0].reply_to_wamid(), Some("wamid.Q"));
    assert_eq!(
        obj(1),
        Some(json!({"caption": "c", "mime_type": "image/jpeg", "sha256": "abc="}))
    );
    assert_eq!(
        obj(2),
        Some(json!({"mime_type": "audio/ogg", "sha256": "x", "voice": true}))
    );
    assert_eq!(
        obj(3),
        Some(json!({"filename": "a.pdf", "mime_type": "application/pdf", "extra": 1}))
    );
    assert_eq!(
        obj(4),
        Some(json!({"animated": false, "mime_type": "image/webp"}))
    );
    assert_eq!(
        obj(5),
        Some(json!({"latitude": 37.48, "longitude": -122.14, "name": "HQ", "url": "u"}))
    );
    assert_eq!(
        obj(6),
        Some(json!({"wamid": "wamid.T", "emoji": "\u{1F44D}"}))
    );
    assert_eq!(obj(7), Some(json!({"wamid": "wamid.T", "emoji": null})));
    assert_eq!(obj(8), Some(json!({})));
    assert_eq!(obj(9), Some(json!({"x": 1})));
    assert_eq!(
        obj(10),
        Some(json!({"beam": {"y": 2}})),
        "unknown kind without its object: the message minus its envelope"
    );
    assert_eq!(obj(11), Some(json!({"errors": [{"code": 131051}]})));
    assert_eq!(
        obj(12),
        Some(json!({"type": "button_reply", "button_reply": {"id": "yes", "title": "Yes"}}))
    );
    assert_eq!(obj(13), Some(json!([{"name": {"formatted_name": "A"}}])));
    assert_eq!(
        obj(14),
        Some(json!({"latitude": "NaN", "longitude": "x"})),
        "unparseable coordinates stay as given"
    );
    assert_eq!(obj(15), Some(json!({"mime_type": "video/mp4"})));
    assert_eq!(obj(16), Some(json!({"k": "v"})));
    assert_eq!(obj(17), Some(json!({"wamid": "wamid.T", "emoji": null})));
}

#[test]
fn template_category_update_field() {
    let body = serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA", "time": 1674864290, "changes": [
            {"field": "template_category_update", "value": {
                "message_template_id": 594425479261596u64, "message_template_name": "order_update",
                "message_template_language": "en_US", "previous_category": "UTILITY",
                "new_category": "MARKETING"}},
            {"field": "template_category_update", "value": {
                "message_template_id": "77", "message_template_name": "otp",
                "message_template_language": "en", "new_category": "UTILITY",
                "correct_category": "MARKETING"}},
            {"field": "template_category_update", "value": {"new_category": "SOMETHING_NEW"}},
            {"field": "template_category_update", "value": "junk"}
        ]}]
    }))
    .unwrap();
    let n = parse_notification(&body).unwrap();
    let ups: Vec<_> = n.template_category_updates().collect();
    assert_eq!(ups.len(), 3);
    let (waba, u) = ups[0];
    assert_eq!(waba, "WABA");
    assert_eq!(u.message_template_id.as_deref(), Some("594425479261596"));
    assert_eq!(u.name.as_deref(), Some("order_update"));
    assert_eq!(u.language.as_deref(), Some("en_US"));
    assert_eq!(u.previous_category.as_deref(), Some("UTILITY"));
    assert_eq!(u.category(), Some(Category::Marketing));
    let u = ups[1].1;
    assert_eq!(u.message_template_id.as_deref(), Some("77"));
    assert_eq!(u.correct_category.as_deref(), Some("MARKETING"));
    assert_eq!(
        u.category(),
        Some(Category::Utility),
        "announced change: still in force"
    );
    assert_eq!(ups[2].1.category(), None);
    assert!(matches!(&n.entries[0].changes[3], Change::Other { .. }));
    // serialisable with its field tag
    let j = serde_json::to_value(&n.entries[0].changes[0]).unwrap();
    assert_eq!(j["field"], "template_category_update");
}

#[test]
fn user_id_update_field() {
    let body = serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA", "changes": [
            {"field": "user_id_update", "value": {
                "messaging_product": "whatsapp", "metadata": meta(),
                "user_id_update": [
                    {"wa_id": "16505551234", "previous_user_id": "US.OLD", "user_id": "US.NEW",
                     "parent_user_id": "US.ENT.NEW", "timestamp": "1750000000"},
                    {"user_id": {"previous": "US.P", "current": "US.C"}, "timestamp": 1750000001},
                    {"previous_user_id": "US.X"},
                    7
                ]}},
            {"field": "user_id_update", "value": {
                "metadata": meta(), "user_id_update": {"previous_user_id": "US.1", "user_id": "US.2"}}},
            {"field": "user_id_update", "value": {
                "metadata": meta(), "wa_id": "1", "previous_user_id": "US.3", "user_id": "US.4"}}
        ]}]
    }))
    .unwrap();
    let n = parse_notification(&body).unwrap();
    let ups: Vec<_> = n.user_id_updates().collect();
    assert_eq!(ups.len(), 3);
    let (waba, u) = ups[0];
    assert_eq!(waba, "WABA");
    assert_eq!(u.messaging_product.as_deref(), Some("whatsapp"));
    assert_eq!(
        u.metadata.phone_number_id.as_deref(),
        Some("106540352242922")
    );
    assert_eq!(u.changes.len(), 2);
    assert_eq!(u.malformed.len(), 2, "no new user id / not an object");
    let c = &u.changes[0];
    assert_eq!(c.wa_id.as_deref(), Some("16505551234"));
    assert_eq!(c.previous_user_id.as_deref(), Some("US.OLD"));
    assert_eq!(c.user_id, "US.NEW");
    assert_eq!(c.parent_user_id.as_deref(), Some("US.ENT.NEW"));
    assert_eq!(c.timestamp, Some(1_750_000_000));
    let c = &u.changes[1];
    assert_eq!(c.previous_user_id.as_deref(), Some("US.P"));
    assert_eq!(c.user_id, "US.C");
    assert_eq!(c.wa_id, None);
    assert_eq!(ups[1].1.changes[0].user_id, "US.2");
    assert_eq!(
        ups[2].1.changes[0].previous_user_id.as_deref(),
        Some("US.3")
    );
    assert_eq!(ups[2].1.changes[0].wa_id.as_deref(), Some("1"));
    let j = serde_json::to_value(&n.entries[0].changes[0]).unwrap();
    assert_eq!(j["field"], "user_id_update");
}
