//! Customers known by phone, by business-scoped user id (BSUID), or both: matching,
//! learning, merging, changes of BSUID or phone, upserts and searches by user id, sends to a BSUID,
//! and the content of messages (edits, deletions, replies).

use crate::fixtures::{self, T0, obj};
use serde_json::json;
use tern_domain::contact::Consent;
use tern_domain::message::{Direction, Status};
use tern_store::{
    Accept, Acceptance, Charges, ContactKey, ContactRef, Db, Identity, Message, NewContact,
    ReplyTo, SendLookup,
};
use uuid::Uuid;

const BSUID: &str = "US.13491208655302741918";
const BSUID2: &str = "US.99999999999999999999";

fn bsuid(user_id: &str) -> Identity<'_> {
    Identity {
        user_id: Some(user_id),
        ..Identity::default()
    }
}

async fn org_with_number(db: &Db, number: &str) -> Uuid {
    let org = fixtures::insert_org(db).await;
    db.insert_phone_number(&fixtures::phone_number(org.id, number))
        .await
        .unwrap();
    org.id
}

fn inbound(
    org: Uuid,
    contact: Uuid,
    conversation: Uuid,
    number: &str,
    wamid: &str,
    at: i64,
) -> Message {
    Message {
        id: Uuid::now_v7(),
        org_id: org,
        conversation_id: conversation,
        contact_id: contact,
        phone_number_id: number.into(),
        direction: Direction::Inbound,
        r#type: "text".into(),
        status: Status::Received,
        template_name: None,
        template_language: None,
        text: Some("hello".into()),
        media_id: None,
        wamid: Some(wamid.into()),
        request: json!({"id": wamid}),
        campaign_id: None,
        created_at: at,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: at,
        content: Some(json!({"body": "hello"})),
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    username_only_customer_becomes_a_contact_without_phone => async |db| {
        let org = fixtures::insert_org(&db).await;
        let who = Identity { username: Some("kim.codes"), parent_user_id: Some("US.ENT.1"), ..bsuid(BSUID) };
        let id = Uuid::now_v7();
        let o = db.record_inbound(org.id, &who, Some("Kim"), T0 - 5, id, T0).await.unwrap();
        assert!(o.created);
        let c = o.contact;
        assert_eq!((c.id, c.wa_id.as_deref(), c.user_id.as_deref(), c.parent_user_id.as_deref()),
            (id, None, Some(BSUID), Some("US.ENT.1")));
        assert_eq!((c.username.as_deref(), c.name.as_deref(), c.last_inbound_at), (Some("kim.codes"), Some("Kim"), Some(T0 - 5)));
        // Found again by BSUID alone; a new username replaces the old one.
        let again = db.record_inbound(org.id, &Identity { username: Some("kim2"), ..bsuid(BSUID) }, None, T0, Uuid::now_v7(), T0 + 1).await.unwrap();
        assert!(!again.created);
        assert_eq!((again.contact.id, again.contact.username.as_deref(), again.contact.last_inbound_at), (id, Some("kim2"), Some(T0)));
        // Another username-only customer is another contact; so is the same BSUID elsewhere.
        let other = db.record_inbound(org.id, &bsuid(BSUID2), None, T0, Uuid::now_v7(), T0).await.unwrap();
        assert!(other.created);
        let elsewhere = fixtures::insert_org(&db).await;
        assert!(db.record_inbound(elsewhere.id, &bsuid(BSUID), None, T0, Uuid::now_v7(), T0).await.unwrap().created);
        assert_eq!(db.get_contact_by_key(org.id, ContactKey::UserId(BSUID)).await.unwrap().unwrap().id, id);
    },

    a_phone_contact_learns_its_bsuid_and_a_bsuid_contact_its_phone => async |db| {
        let org = fixtures::insert_org(&db).await;
        let phone = fixtures::insert_contact(&db, org.id, "15550100001", T0).await;
        let both = Identity { wa_id: Some("15550100001"), ..bsuid(BSUID) };
        let o = db.record_inbound(org.id, &both, Some("Ann"), T0, Uuid::now_v7(), T0 + 1).await.unwrap();
        assert_eq!((o.contact.id, o.created, o.merged), (phone.id, false, None));
        assert_eq!(o.contact.user_id.as_deref(), Some(BSUID));
        // Matched by BSUID first: a message without the phone still finds it.
        let by_id = db.record_inbound(org.id, &bsuid(BSUID), None, T0 + 5, Uuid::now_v7(), T0 + 6).await.unwrap();
        assert_eq!((by_id.contact.id, by_id.contact.wa_id.as_deref()), (phone.id, Some("15550100001")));

        let only_id = db.record_inbound(org.id, &bsuid(BSUID2), None, T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let revealed = Identity { wa_id: Some("15550100002"), ..bsuid(BSUID2) };
        let seen = db.observe_identity(org.id, &revealed, T0 + 10).await.unwrap().unwrap();
        assert_eq!((seen.contact.id, seen.contact.wa_id.as_deref()), (only_id.id, Some("15550100002")));
        // Nothing new: no write, no answer.
        assert_eq!(db.observe_identity(org.id, &revealed, T0 + 11).await.unwrap(), None);
        // A status never creates a contact.
        assert_eq!(db.observe_identity(org.id, &bsuid("US.1"), T0).await.unwrap(), None);
        assert_eq!(db.count_contacts(org.id).await.unwrap(), 2);
    },

    customers_of_many_statuses_are_learned_together_as_one_by_one => async |db| {
        let org = fixtures::insert_org(&db).await;
        let learns = fixtures::insert_contact(&db, org.id, "15550100011", T0).await;
        let known = db.record_inbound(org.id, &Identity { wa_id: Some("15550100012"), ..bsuid("US.12") }, None, T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let by_phone = fixtures::insert_contact(&db, org.id, "15550100014", T0).await;
        let by_id = db.record_inbound(org.id, &bsuid("US.14"), None, T0 + 1, Uuid::now_v7(), T0 + 1).await.unwrap().contact;
        // Another organisation's contact with the same phone is not theirs to learn.
        let other = fixtures::insert_org(&db).await;
        let elsewhere = fixtures::insert_contact(&db, other.id, "15550100011", T0).await;
        let who = [
            Identity { wa_id: Some("15550100011"), username: Some("ann"), ..bsuid("US.11") },
            Identity { wa_id: Some("15550100012"), ..bsuid("US.12") },
            Identity { wa_id: Some("15550100013"), ..bsuid("US.13") },
            Identity { wa_id: Some("15550100014"), ..bsuid("US.14") },
            // The same contact again, with a new username: decided over the first write.
            Identity { username: Some("ann_2"), ..bsuid("US.11") },
        ];
        let written = db.observe_identities(org.id, &who, T0 + 10).await.unwrap();
        assert_eq!(written, [true, false, false, true, true]);
        let c = db.get_contact(org.id, learns.id).await.unwrap().unwrap();
        assert_eq!((c.wa_id.as_deref(), c.user_id.as_deref(), c.username.as_deref(), c.updated_at), (Some("15550100011"), Some("US.11"), Some("ann_2"), T0 + 11));
        assert_eq!(db.get_contact(org.id, known.id).await.unwrap().unwrap(), known, "nothing new: not written");
        // A status never creates a contact; two contacts it shows to be one are merged.
        assert!(db.get_contact(org.id, by_id.id).await.unwrap().is_none() || db.get_contact(org.id, by_phone.id).await.unwrap().is_none());
        assert_eq!(db.count_contacts(org.id).await.unwrap(), 3);
        assert_eq!(db.get_contact(other.id, elsewhere.id).await.unwrap().unwrap(), elsewhere);
        // Nothing new the second time, but the username that the first and last name in turn.
        assert_eq!(db.observe_identities(org.id, &who, T0 + 20).await.unwrap(), [true, false, false, false, true]);
        assert_eq!(db.observe_identities(org.id, &who[1..4], T0 + 30).await.unwrap(), [false; 3]);
        assert_eq!(db.observe_identities(org.id, &[], T0 + 20).await.unwrap(), Vec::<bool>::new());
    },

    two_contacts_of_one_customer_merge_into_the_older => async |db| {
        let org = org_with_number(&db, "100").await;
        db.insert_phone_number(&fixtures::phone_number(org, "200")).await.unwrap();
        // The older contact: known by phone, with fields, a tag, a conversation on 100.
        let older = fixtures::insert_contact(&db, org, "15550100009", T0).await;
        db.update_contact(org, older.id, Some(Some("Ann")), Some(&obj(json!({}))), T0 + 1).await.unwrap();
        db.add_contact_tags(org, older.id, &["vip".into(), "both".into()], T0 + 2).await.unwrap();
        let old_conv = db.get_or_create_conversation(org, older.id, "100", Uuid::now_v7(), T0).await.unwrap();
        db.insert_message(&inbound(org, older.id, old_conv.id, "100", "wamid.OLD", T0 + 3)).await.unwrap();
        db.touch_conversation_inbound(old_conv.id, T0 + 3, T0 + 3).await.unwrap();
        // The newer: a username-only customer with an opt-out decided later, conversations
        // on both numbers.
        let newer = db.record_inbound(org, &Identity { username: Some("ann_x"), ..bsuid(BSUID) }, None, T0 + 10, Uuid::now_v7(), T0 + 10).await.unwrap().contact;
        db.set_contact_consent(org, newer.id, Consent::OptedOut, Some("STOP"), T0 + 11).await.unwrap();
        db.add_contact_tags(org, newer.id, &["both".into(), "new".into()], T0 + 12).await.unwrap();
        let new_conv = db.get_or_create_conversation(org, newer.id, "100", Uuid::now_v7(), T0 + 10).await.unwrap();
        let new_conv2 = db.get_or_create_conversation(org, newer.id, "200", Uuid::now_v7(), T0 + 10).await.unwrap();
        let moved = inbound(org, newer.id, new_conv.id, "100", "wamid.NEW", T0 + 10);
        db.insert_message(&moved).await.unwrap();
        db.touch_conversation_inbound(new_conv.id, T0 + 10, T0 + 10).await.unwrap();
        db.insert_message(&inbound(org, newer.id, new_conv2.id, "200", "wamid.NEW2", T0 + 10)).await.unwrap();

        // One notification shows both identifiers.
        let both = Identity { wa_id: Some("15550100009"), ..bsuid(BSUID) };
        let o = db.record_inbound(org, &both, Some("Other"), T0 + 20, Uuid::now_v7(), T0 + 20).await.unwrap();
        assert_eq!((o.contact.id, o.merged, o.created), (older.id, Some(newer.id), false));
        let c = db.get_contact(org, older.id).await.unwrap().unwrap();
        assert_eq!((c.wa_id.as_deref(), c.user_id.as_deref(), c.username.as_deref(), c.name.as_deref()),
            (Some("15550100009"), Some(BSUID), Some("ann_x"), Some("Ann")));
        assert_eq!((c.consent_status, c.last_inbound_at), (Consent::OptedOut, Some(T0 + 20)));
        assert_eq!(c.tags, vec!["both".to_string(), "new".into(), "vip".into()]);
        assert_eq!(db.get_contact(org, newer.id).await.unwrap(), None);
        assert_eq!(db.count_contacts(org).await.unwrap(), 1);
        // Conversations: the one on 100 kept the older id and took the newer's messages and
        // times; the one on 200 moved.
        assert_eq!(db.get_conversation(org, new_conv.id).await.unwrap(), None);
        let kept = db.find_conversation(org, older.id, "100").await.unwrap().unwrap();
        assert_eq!((kept.id, kept.last_inbound_at), (old_conv.id, Some(T0 + 10)));
        let page = db.list_conversation_messages(org, kept.id, None, None, 10).await.unwrap();
        assert_eq!(page.len(), 2);
        assert!(page.iter().all(|m| m.contact_id == older.id));
        let second = db.find_conversation(org, older.id, "200").await.unwrap().unwrap();
        assert_eq!(second.id, new_conv2.id);
        let m = db.get_message(org, moved.id).await.unwrap().unwrap();
        assert_eq!((m.contact_id, m.conversation_id), (older.id, old_conv.id));
    },

    a_customer_changes_bsuid_or_phone => async |db| {
        let org = fixtures::insert_org(&db).await;
        let c = db.record_inbound(org.id, &bsuid(BSUID), None, T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let o = db.change_identity(org.id, &bsuid(BSUID), &bsuid(BSUID2), T0 + 1).await.unwrap().unwrap();
        assert_eq!((o.contact.id, o.contact.user_id.as_deref(), o.merged), (c.id, Some(BSUID2), None));
        assert_eq!(db.get_contact_by_key(org.id, ContactKey::UserId(BSUID)).await.unwrap(), None);
        // Unknown previous identifiers: nothing to do.
        assert_eq!(db.change_identity(org.id, &bsuid("US.404"), &bsuid("US.405"), T0).await.unwrap(), None);
        // Found by phone when the previous id is unknown; a contact already holding the new
        // id is merged (the older one survives).
        let p = fixtures::insert_contact(&db, org.id, "15550100003", T0 + 2).await;
        let previous = Identity { user_id: Some("US.OLD"), wa_id: Some("15550100003"), ..Identity::default() };
        let current = Identity { user_id: Some(BSUID2), parent_user_id: Some("US.ENT.2"), ..Identity::default() };
        let o = db.change_identity(org.id, &previous, &current, T0 + 3).await.unwrap().unwrap();
        assert_eq!((o.contact.id, o.merged), (c.id, Some(p.id)));
        assert_eq!((o.contact.wa_id.as_deref(), o.contact.user_id.as_deref(), o.contact.parent_user_id.as_deref()),
            (Some("15550100003"), Some(BSUID2), Some("US.ENT.2")));
        assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
        // A new phone replaces the old one; the BSUID stays.
        let o = db.change_identity(org.id, &Identity::phone("15550100003"), &Identity::phone("15550100004"), T0 + 4).await.unwrap().unwrap();
        assert_eq!((o.contact.id, o.contact.wa_id.as_deref(), o.contact.user_id.as_deref()), (c.id, Some("15550100004"), Some(BSUID2)));
        assert_eq!(db.get_contact_by_key(org.id, ContactKey::WaId("15550100003")).await.unwrap(), None);
        // A new phone that another contact holds: the two are one customer.
        let q = fixtures::insert_contact(&db, org.id, "15550100005", T0 + 5).await;
        let o = db.change_identity(org.id, &Identity::phone("15550100004"), &Identity::phone("15550100005"), T0 + 6).await.unwrap().unwrap();
        assert_eq!((o.contact.id, o.merged, o.contact.wa_id.as_deref()), (c.id, Some(q.id), Some("15550100005")));
        assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
    },

    concurrent_first_messages_of_a_bsuid_make_one_contact => async |db| {
        let org = fixtures::insert_org(&db).await;
        let mut tasks = Vec::new();
        for i in 0..8i64 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                db.record_inbound(org.id, &bsuid(BSUID), None, T0 + i, Uuid::now_v7(), T0 + 100).await.unwrap().contact.id
            }));
        }
        let mut ids = Vec::new();
        for t in tasks {
            ids.push(t.await.unwrap());
        }
        ids.dedup();
        assert_eq!(ids.len(), 1);
        let c = db.get_contact(org.id, ids[0]).await.unwrap().unwrap();
        assert_eq!(c.last_inbound_at, Some(T0 + 7));
    },

    contacts_upsert_and_search_by_user_id_and_username => async |db| {
        let org = fixtures::insert_org(&db).await;
        let (c, created) = db.upsert_contact(org.id, ContactKey::UserId(BSUID), Some("Bo"), None, Uuid::now_v7(), T0).await.unwrap();
        assert!(created);
        assert_eq!((c.wa_id, c.user_id.as_deref()), (None, Some(BSUID)));
        let (again, created) = db.upsert_contact(org.id, ContactKey::UserId(BSUID), Some("Bo B."), None, Uuid::now_v7(), T0 + 1).await.unwrap();
        assert!(!created);
        assert_eq!((again.id, again.name.as_deref()), (c.id, Some("Bo B.")));
        db.record_inbound(org.id, &Identity { username: Some("Bobby_99"), ..bsuid(BSUID) }, None, T0, Uuid::now_v7(), T0 + 2).await.unwrap();
        fixtures::insert_contact(&db, org.id, "15550100004", T0).await;
        for q in ["bobby", "@bobby_9", BSUID] {
            let found = db.search_contacts(org.id, q, None, 10).await.unwrap();
            assert_eq!(found.iter().map(|c| c.id).collect::<Vec<_>>(), vec![c.id], "{q}");
        }
        assert!(db.search_contacts(org.id, "US.1349", None, 10).await.unwrap().is_empty());
    },

    sends_find_and_create_contacts_by_user_id => async |db| {
        let org = org_with_number(&db, "100").await;
        let c = db.record_inbound(org, &bsuid(BSUID), None, T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let opts = db.send_options(org, ContactRef::UserId(BSUID)).await.unwrap();
        assert_eq!((opts[0].contact_id, opts[0].contact_wa_id.as_deref(), opts[0].contact_user_id.as_deref()),
            (Some(c.id), None, Some(BSUID)));
        // Batched lookups by user id on both backends.
        let member = fixtures::insert_member(&db, org, "owner").await;
        let key = fixtures::api_key(org, member.id);
        db.insert_api_key(&key).await.unwrap();
        let got = db.send_lookups(&[
            SendLookup::new(&key.key_hash, Some(ContactRef::UserId(BSUID))),
            SendLookup::new(&key.key_hash, Some(ContactRef::UserId(BSUID2))),
        ]).await.unwrap();
        let first = got[0].as_ref().unwrap();
        assert_eq!((first.options[0].contact_id, first.options[0].contact_user_id.as_deref()), (Some(c.id), Some(BSUID)));
        assert_eq!(got[1].as_ref().unwrap().options[0].contact_id, None);

        // A send to an unknown BSUID creates its contact.
        let mut m = inbound(org, Uuid::now_v7(), Uuid::now_v7(), "100", "unused", T0 + 1);
        m.direction = Direction::Outbound;
        m.status = Status::Accepted;
        m.wamid = None;
        m.request = json!({"recipient": BSUID2, "type": "text", "text": {"body": "hi"}});
        m.reply_to = Some(ReplyTo { message_id: Some(Uuid::now_v7()), wamid: "wamid.Q".into() });
        let mut items = [Accept {
            message: m,
            key: "k-bsuid-1".into(),
            fingerprint: vec![1; 32],
            key_expires_at: T0 + 1_000_000,
            charges: Charges::default(),
            new_contact: Some(NewContact::UserId(BSUID2.into())),
            contact_limit: Some(10),
            new_conversation: true,
            api_key_id: None,
            request_id: None,
        }];
        assert_eq!(db.accept_messages(&mut items).await[0].as_ref().unwrap(), &Acceptance::Accepted);
        let created = db.get_contact_by_key(org, ContactKey::UserId(BSUID2)).await.unwrap().unwrap();
        assert_eq!((created.id, created.wa_id), (items[0].message.contact_id, None));
        let stored = db.get_message(org, items[0].message.id).await.unwrap().unwrap();
        // An accepted message stores its reply target; its content is its request's.
        assert_eq!((stored.reply_to, stored.content), (items[0].message.reply_to.clone(), None));
    },

    inbound_messages_are_edited_and_revoked_once => async |db| {
        let org = org_with_number(&db, "100").await;
        let c = fixtures::insert_contact(&db, org, "15550100005", T0).await;
        let conv = db.get_or_create_conversation(org, c.id, "100", Uuid::now_v7(), T0).await.unwrap();
        let mut m = inbound(org, c.id, conv.id, "100", "wamid.E", T0);
        m.reply_to = Some(ReplyTo { message_id: None, wamid: "wamid.ELSEWHERE".into() });
        m.referral = Some(json!({"source_id": "ad-1"}));
        db.insert_message(&m).await.unwrap();
        assert_eq!(db.get_message(org, m.id).await.unwrap().unwrap(), m);
        assert_eq!(db.message_id_by_wamid(org, "wamid.E").await.unwrap(), Some(m.id));
        assert_eq!(db.message_id_by_wamid(Uuid::now_v7(), "wamid.E").await.unwrap(), None);

        let e = db.edit_inbound_message(org, "wamid.E", Some("fixed"), &json!({"body": "fixed"}), T0 + 10, T0 + 11).await.unwrap().unwrap();
        assert_eq!((e.text.as_deref(), e.content.clone(), e.edited_at), (Some("fixed"), Some(json!({"body": "fixed"})), Some(T0 + 10)));
        // An older edit arriving late changes nothing.
        let late = db.edit_inbound_message(org, "wamid.E", Some("old"), &json!({"body": "old"}), T0 + 5, T0 + 12).await.unwrap().unwrap();
        assert_eq!(late, e);
        let r = db.revoke_inbound_message(org, "wamid.E", T0 + 20, T0 + 21).await.unwrap().unwrap();
        assert_eq!((r.text, r.content, r.revoked_at, r.edited_at), (None, None, Some(T0 + 20), Some(T0 + 10)));
        // Deleted: a later edit or deletion changes nothing.
        assert_eq!(db.edit_inbound_message(org, "wamid.E", Some("x"), &json!({"body": "x"}), T0 + 30, T0 + 31).await.unwrap().unwrap().revoked_at, Some(T0 + 20));
        assert_eq!(db.revoke_inbound_message(org, "wamid.E", T0 + 40, T0 + 41).await.unwrap().unwrap().revoked_at, Some(T0 + 20));
        // An edit that came before its original created the row under the original's wamid;
        // the original fills in its own time, type and reply target only, once.
        let mut early = inbound(org, c.id, conv.id, "100", "wamid.P", T0 + 100);
        early.text = Some("edited".into());
        early.edited_at = Some(T0 + 100);
        assert!(db.insert_message(&early).await.unwrap());
        let mut original = inbound(org, c.id, conv.id, "100", "wamid.P", T0 + 50);
        original.r#type = "image".into();
        original.reply_to = Some(ReplyTo { message_id: None, wamid: "wamid.Z".into() });
        assert!(db.insert_message(&original).await.unwrap());
        let got = db.get_message(org, early.id).await.unwrap().unwrap();
        assert_eq!((got.created_at, got.r#type.as_str(), got.text.as_deref(), got.edited_at), (T0 + 50, "image", Some("edited"), Some(T0 + 100)));
        assert_eq!(got.reply_to, original.reply_to);
        assert!(!db.insert_message(&original).await.unwrap(), "a retry of the original is a duplicate");
        // The network's retry of an original (its own timestamp) never changes a row, deleted
        // or not.
        let mut again = inbound(org, c.id, conv.id, "100", "wamid.E", T0);
        again.text = Some("other".into());
        assert!(!db.insert_message(&again).await.unwrap());
        assert_eq!(db.get_message(org, m.id).await.unwrap().unwrap().created_at, T0);
        // Unknown or another organisation's message.
        assert_eq!(db.revoke_inbound_message(org, "wamid.NONE", T0, T0).await.unwrap(), None);
        let elsewhere = fixtures::insert_org(&db).await;
        assert_eq!(db.edit_inbound_message(elsewhere.id, "wamid.E", None, &json!({}), T0 + 50, T0 + 50).await.unwrap(), None);
    },
}
