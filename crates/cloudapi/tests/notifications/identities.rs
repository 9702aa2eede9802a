//! 2026: identities (BSUIDs, usernames), edit/revoke, content objects, new fields.

use crate::{envelope, meta};
use serde_json::json;
use tern_cloudapi::{Change, IdentityChange, Ids, InboundContent, Sender, parse_notification};
use tern_domain::plan::Category;

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

/// The network's identity-change notices (reference §11; pywa's `system.json` sample).
#[test]
fn identity_change_system_messages() {
    let v = messages_value(&envelope(json!({
        "metadata": meta(),
        "messages": [
            {"id": "wamid.U", "timestamp": "1753851315", "type": "system",
             "system": {"body": "User changed from CO.1234567890 to MX.0987654321",
                        "user_id": "MX.0987654321", "previous_user_id": "CO.1234567890",
                        "parent_user_id": "MX.ENT.2", "previous_parent_user_id": "CO.ENT.1",
                        "type": "user_changed_user_id"}},
            {"from": "972987654321", "id": "wamid.N", "timestamp": "1753851315", "type": "system",
             "system": {"body": "User A changed from 972987654321 to 972912345678",
                        "wa_id": "972912345678", "type": "user_changed_number"}},
            {"from": "1", "id": "wamid.OLD", "timestamp": "1", "type": "system",
             "system": {"body": "x", "new_wa_id": "2", "type": "customer_changed_number"}},
            {"from_user_id": "US.A", "id": "wamid.FB", "timestamp": "1", "type": "system",
             "system": {"body": "x", "user_id": "US.B", "type": "user_changed_user_id"}},
            {"id": "wamid.NONEW", "timestamp": "1", "type": "system",
             "system": {"previous_user_id": "US.A", "type": "user_changed_user_id"}},
            {"from": "1", "id": "wamid.I", "timestamp": "1", "type": "system",
             "system": {"body": "User identity changed", "type": "customer_identity_changed"}},
            {"from": "1", "id": "wamid.T", "timestamp": "1", "type": "text", "text": {"body": "hi"}},
            {"from": "15550001111", "id": "wamid.NB", "timestamp": "1", "type": "system",
             "system": {"body": "x", "wa_id": "15550002222", "user_id": "US.NEW", "type": "user_changed_number"}}
        ]
    })));
    let changes: Vec<_> = v.messages.iter().map(|m| m.identity_change()).collect();
    let ids = |wa_id: Option<&str>, user_id: Option<&str>, parent: Option<&str>| Ids {
        wa_id: wa_id.map(str::to_owned),
        user_id: user_id.map(str::to_owned),
        parent_user_id: parent.map(str::to_owned),
    };
    assert_eq!(
        changes[0],
        Some(IdentityChange {
            previous: ids(None, Some("CO.1234567890"), Some("CO.ENT.1")),
            current: ids(None, Some("MX.0987654321"), Some("MX.ENT.2")),
        })
    );
    assert_eq!(
        changes[1],
        Some(IdentityChange {
            previous: ids(Some("972987654321"), None, None),
            current: ids(Some("972912345678"), None, None),
        })
    );
    assert_eq!(
        changes[2]
            .as_ref()
            .map(|c| (&c.previous.wa_id, &c.current.wa_id)),
        Some((&Some("1".into()), &Some("2".into()))),
        "the older spelling"
    );
    assert_eq!(
        changes[3]
            .as_ref()
            .map(|c| (&c.previous.user_id, &c.current.user_id)),
        Some((&Some("US.A".into()), &Some("US.B".into()))),
        "without previous_user_id, the sender's own BSUID is the old one"
    );
    assert_eq!(changes[4], None, "no new identifier: nothing to change to");
    assert_eq!(
        changes[7],
        Some(IdentityChange {
            previous: ids(Some("15550001111"), None, None),
            current: ids(Some("15550002222"), Some("US.NEW"), None),
        }),
        "a number change with its new BSUID"
    );
    assert_eq!((&changes[5], &changes[6]), (&None, &None));
    // The sender after the change carries the new identifiers.
    let m = &v.messages[1];
    let after = v.sender(m).after(changes[1].as_ref().unwrap());
    assert_eq!(
        (after.wa_id.as_deref(), after.user_id),
        (Some("972912345678"), None)
    );
}

/// A system message never borrows another message's lone `contacts[]` entry.
#[test]
fn system_messages_do_not_borrow_a_lone_contact() {
    let v = messages_value(&envelope(json!({
        "metadata": meta(),
        "contacts": [{"profile": {"name": "Other"}, "wa_id": "15550001111", "user_id": "US.OTHER"}],
        "messages": [
            {"id": "wamid.U", "timestamp": "1", "type": "system",
             "system": {"user_id": "US.NEW", "previous_user_id": "US.OLD", "type": "user_changed_user_id"}},
            {"id": "wamid.T", "timestamp": "1", "type": "text", "text": {"body": "hi"}}
        ]
    })));
    assert_eq!(v.sender(&v.messages[0]), Sender::default());
    assert_eq!(
        v.sender(&v.messages[1]).user_id.as_deref(),
        Some("US.OTHER")
    );
}

/// The network has no `user_id_update` field: one is kept raw like any unknown field.
#[test]
fn user_id_update_is_an_unknown_field() {
    let body = serde_json::to_vec(&json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "WABA", "changes": [
            {"field": "user_id_update", "value": {
                "metadata": meta(), "user_id_update": [{"previous_user_id": "US.1", "user_id": "US.2"}]}}
        ]}]
    }))
    .unwrap();
    let n = parse_notification(&body).unwrap();
    assert!(
        matches!(&n.entries[0].changes[0], Change::Other { name, .. } if name == "user_id_update")
    );
}
