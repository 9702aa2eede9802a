//! The writes of many inbound messages at once (the inbox's runs): customers recorded
//! without a lock when nothing is to be created, merged or learned; conversations created or
//! touched in one statement; messages inserted together with the one-row conflict rule.

use crate::fixtures::{self, T0};
use serde_json::json;
use std::collections::BTreeMap;
use tern_domain::message::{Direction, Status};
use tern_store::{Db, Identity, InboundChange, InboundSeen, Inserted, Message};
use uuid::Uuid;

const BSUID: &str = "US.13491208655302741918";
const BSUID2: &str = "US.99999999999999999999";

async fn org_with_number(db: &Db, number: &str) -> Uuid {
    let org = fixtures::insert_org(db).await;
    db.insert_phone_number(&fixtures::phone_number(org.id, number))
        .await
        .unwrap();
    org.id
}

fn seen<'a>(who: Identity<'a>, name: Option<&'a str>, at: i64) -> InboundSeen<'a> {
    InboundSeen {
        who,
        profile_name: name,
        network_ts: at,
    }
}

fn row(org: Uuid, contact: Uuid, conversation: Uuid, wamid: &str, at: i64) -> Message {
    Message {
        id: Uuid::now_v7(),
        org_id: org,
        conversation_id: conversation,
        contact_id: contact,
        phone_number_id: "900".into(),
        direction: Direction::Inbound,
        r#type: "text".into(),
        status: Status::Received,
        template_name: None,
        template_language: None,
        text: Some(wamid.into()),
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
        content: Some(json!({"body": wamid})),
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    known_customers_are_recorded_together_and_the_rest_left_to_the_locked_path => async |db| {
        let org = fixtures::insert_org(&db).await.id;
        let phone = Identity::phone("15550100001");
        let bo = Identity { user_id: Some(BSUID), username: Some("bo"), ..Identity::default() };
        let ann = db.record_inbound(org, &phone, None, T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let b = db.record_inbound(org, &bo, Some("Bo"), T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let bsuid_only = Identity { user_id: Some(BSUID), ..Identity::default() };
        let learns = Identity { wa_id: Some("15550100001"), user_id: Some(BSUID2), ..Identity::default() };
        let new_username = Identity { username: Some("bo2"), ..bsuid_only };
        let list = [
            seen(phone, Some("Ann"), T0 + 10),
            seen(bo, Some("Other"), T0 + 5),
            // The same contact under another spelling: the latest time of both.
            seen(bsuid_only, None, T0 + 20),
            seen(Identity::phone("15550100009"), None, T0),
            seen(learns, None, T0),
            seen(new_username, None, T0),
        ];
        let got = db.record_inbound_known(org, &list, T0 + 30).await.unwrap();
        assert_eq!(got, [Some(ann.id), Some(b.id), Some(b.id), None, None, None]);
        let ann2 = db.get_contact(org, ann.id).await.unwrap().unwrap();
        assert_eq!((ann2.name.as_deref(), ann2.last_inbound_at, ann2.updated_at), (Some("Ann"), Some(T0 + 10), T0 + 30));
        let b2 = db.get_contact(org, b.id).await.unwrap().unwrap();
        assert_eq!((b2.name.as_deref(), b2.username.as_deref(), b2.last_inbound_at), (Some("Bo"), Some("bo"), Some(T0 + 20)));
        assert_eq!((ann2.user_id.as_deref(), b2.wa_id.as_deref()), (None, None));
        // Nothing new (an older time): found, nothing written.
        let again = db.record_inbound_known(org, &[seen(phone, Some("X"), T0 + 1)], T0 + 40).await.unwrap();
        assert_eq!(again, [Some(ann.id)]);
        assert_eq!(db.get_contact(org, ann.id).await.unwrap().unwrap(), ann2);
        // Another organisation's customer is not this one's.
        let other = fixtures::insert_org(&db).await.id;
        assert_eq!(db.record_inbound_known(other, &[seen(phone, None, T0)], T0).await.unwrap(), [None]);
    },

    conversations_are_created_or_touched_and_messages_inserted_together => async |db| {
        let org = org_with_number(&db, "900").await;
        let a = db.record_inbound(org, &Identity::phone("15550100001"), None, T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let b = db.record_inbound(org, &Identity::phone("15550100002"), None, T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let existing = db.get_or_create_conversation(org, a.id, "900", Uuid::now_v7(), T0).await.unwrap();
        db.touch_conversation_inbound(existing.id, T0 + 100, T0 + 100).await.unwrap();
        let elsewhere = fixtures::insert_org(&db).await.id;
        let stranger = db.record_inbound(elsewhere, &Identity::phone("15550100003"), None, T0, Uuid::now_v7(), T0).await.unwrap().contact;
        let new_b = Uuid::now_v7();
        let latest = BTreeMap::from([
            (a.id, (Uuid::now_v7(), T0 + 50)),
            (b.id, (new_b, T0 + 60)),
            (stranger.id, (Uuid::now_v7(), T0 + 60)),
        ]);
        let got = db.touch_inbound_conversations(org, "900", &latest, T0 + 200).await.unwrap();
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!((got[&a.id], got[&b.id]), (existing.id, new_b));
        let ca = db.get_conversation(org, existing.id).await.unwrap().unwrap();
        assert_eq!((ca.last_inbound_at, ca.last_message_at), (Some(T0 + 100), Some(T0 + 200)));
        let cb = db.get_conversation(org, new_b).await.unwrap().unwrap();
        assert_eq!((cb.last_inbound_at, cb.last_message_at, cb.created_at), (Some(T0 + 60), Some(T0 + 200), T0 + 200));

        // An edit that came first made w3's row; its original fills it in.
        let mut early = row(org, b.id, new_b, "w3", T0 + 10);
        early.edited_at = Some(T0 + 10);
        let mut tx = db.begin().await.unwrap();
        assert_eq!(tx.insert_message(&early).await.unwrap(), Inserted::New);
        let first = [row(org, a.id, existing.id, "w1", T0), row(org, b.id, new_b, "w2", T0 + 1)];
        assert_eq!(tx.insert_inbound_messages(&first).await.unwrap(), [Inserted::New, Inserted::New]);
        let second = [
            row(org, a.id, existing.id, "w1", T0 + 5),
            row(org, b.id, new_b, "w3", T0),
            row(org, b.id, new_b, "w4", T0 + 2),
        ];
        assert_eq!(tx.insert_inbound_messages(&second).await.unwrap(),
            [Inserted::Duplicate, Inserted::FilledIn, Inserted::New]);
        tx.commit().await.unwrap();
        let held = db.find_messages_by_wamids(&["w1", "w3"]).await.unwrap();
        let w1 = held.iter().find(|m| m.wamid.as_deref() == Some("w1")).unwrap();
        assert_eq!((w1.id, w1.created_at), (first[0].id, T0));
        let w3 = held.iter().find(|m| m.wamid.as_deref() == Some("w3")).unwrap();
        assert_eq!((w3.id, w3.created_at, w3.edited_at), (early.id, T0, Some(T0 + 10)));
        let ids = db.message_ids_by_wamids(org, &["w1", "w4", "nope"]).await.unwrap();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids["w1"], first[0].id);
        assert!(db.message_ids_by_wamids(elsewhere, &["w1"]).await.unwrap().is_empty());

        // Edits and deletions together: w1 edited, w3 (edited at T0 + 10) not by an older
        // edit, w4 deleted, w9 not held.
        let body = json!({"body": "new"});
        let changes = [
            InboundChange::Edit { wamid: "w1", text: Some("new"), content: &body, at: T0 + 20 },
            InboundChange::Edit { wamid: "w3", text: Some("old"), content: &body, at: T0 + 5 },
            InboundChange::Revoke { wamid: "w4", at: T0 + 30 },
            InboundChange::Edit { wamid: "w9", text: None, content: &body, at: T0 },
        ];
        let mut tx = db.begin().await.unwrap();
        let got = tx.change_inbound_messages(org, &changes, T0 + 300).await.unwrap();
        tx.commit().await.unwrap();
        let seen: Vec<Option<(String, bool)>> = got.iter()
            .map(|t| t.as_ref().map(|t| (t.message.wamid.clone().unwrap(), t.changed)))
            .collect();
        assert_eq!(seen, [Some(("w1".into(), true)), Some(("w3".into(), false)), Some(("w4".into(), true)), None]);
        let w1 = got[0].as_ref().unwrap();
        assert_eq!((w1.message.text.as_deref(), w1.message.edited_at, w1.message.updated_at), (Some("new"), Some(T0 + 20), T0 + 300));
        let w4 = &got[2].as_ref().unwrap().message;
        assert_eq!((w4.text.as_deref(), w4.revoked_at), (None, Some(T0 + 30)));
        // Again: nothing changes (a deleted message stays deleted, the edit is not newer).
        let mut tx = db.begin().await.unwrap();
        let again = tx.change_inbound_messages(org, &changes, T0 + 400).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(again.iter().map(|t| t.as_ref().map(|t| t.changed)).collect::<Vec<_>>(),
            [Some(false), Some(false), Some(false), None]);
    },
}
