//! Read marks on a customer's messages, and a contact's block (migration 0026).

use crate::fixtures::{self, T0};
use crate::messages::{inbound, key_for, outbound, setup};
use tern_domain::campaign::{Audience, AudienceSpec};
use tern_domain::timeline::Detail;
use tern_store::{ContactNumber, ContactRef, Db, SendLookup, StoreError};
use uuid::Uuid;

async fn read_at(db: &Db, org: Uuid, id: Uuid) -> Option<i64> {
    db.get_message(org, id).await.unwrap().unwrap().read_at
}

/// The wamids named by the message's `read_marked` entries, in order.
async fn marks(db: &Db, id: Uuid) -> Vec<Option<String>> {
    db.timeline_rows(id)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|r| match r.detail {
            Detail::ReadMarked { wamid } => Some(wamid),
            _ => None,
        })
        .collect()
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    a_read_mark_reads_the_earlier_unread_messages_of_its_conversation => async |db| {
        let s = setup(&db, "100").await;
        let a = inbound(&s, "wamid.A", T0);
        // Same network second as `b`, stored before it: earlier.
        let a2 = inbound(&s, "wamid.A2", T0 + 10);
        let b = inbound(&s, "wamid.B", T0 + 10);
        let c = inbound(&s, "wamid.C", T0 + 20);
        let o = outbound(&s, T0 + 15);
        for m in [&a, &a2, &b, &c, &o] {
            assert!(db.insert_message(m).await.unwrap());
        }
        // Another customer's conversation on the same number.
        let other = fixtures::insert_contact(&db, s.org, "49555", T0).await;
        let conv = db.get_or_create_conversation(s.org, other.id, "100", Uuid::now_v7(), T0).await.unwrap();
        let x = tern_store::Message { contact_id: other.id, conversation_id: conv.id, ..inbound(&s, "wamid.X", T0 + 5) };
        assert!(db.insert_message(&x).await.unwrap());

        let got = db.record_read_mark(&b, T0 + 100).await.unwrap();
        assert_eq!(got.read_at, Some(T0 + 100));
        assert_eq!(got.id, b.id);
        assert_eq!(read_at(&db, s.org, a.id).await, Some(T0 + 100));
        assert_eq!(read_at(&db, s.org, a2.id).await, Some(T0 + 100));
        assert_eq!(read_at(&db, s.org, c.id).await, None, "a later message stays unread");
        assert_eq!(read_at(&db, s.org, o.id).await, None, "the business's own message is not touched");
        assert_eq!(read_at(&db, s.org, x.id).await, None, "another conversation is not touched");
        let b_wamid = Some("wamid.B".to_string());
        assert_eq!(marks(&db, a.id).await, vec![b_wamid.clone()]);
        assert_eq!(marks(&db, b.id).await, vec![b_wamid.clone()]);
        assert!(marks(&db, c.id).await.is_empty());

        // A repeat keeps read_at and adds the marked message's entry only.
        let again = db.record_read_mark(&b, T0 + 200).await.unwrap();
        assert_eq!(again.read_at, Some(T0 + 100));
        assert_eq!(marks(&db, b.id).await.len(), 2);
        assert_eq!(marks(&db, a.id).await.len(), 1);

        // The latest message: only it was still unread.
        db.record_read_mark(&c, T0 + 300).await.unwrap();
        assert_eq!(read_at(&db, s.org, c.id).await, Some(T0 + 300));
        assert_eq!(read_at(&db, s.org, a.id).await, Some(T0 + 100));
        assert_eq!(marks(&db, a.id).await.len(), 1);
    },

    a_contact_is_blocked_and_unblocked_once => async |db| {
        let s = setup(&db, "100").await;
        let c = db.set_contact_blocked(s.org, s.contact, Some(T0 + 5), T0 + 5).await.unwrap();
        assert_eq!((c.blocked_at, c.updated_at), (Some(T0 + 5), T0 + 5));
        assert_eq!(db.get_contact(s.org, s.contact).await.unwrap().unwrap().blocked_at, Some(T0 + 5));
        // Blocking a blocked contact changes nothing, not even updated_at.
        let again = db.set_contact_blocked(s.org, s.contact, Some(T0 + 9), T0 + 9).await.unwrap();
        assert_eq!(again, c);
        let open = db.set_contact_blocked(s.org, s.contact, None, T0 + 20).await.unwrap();
        assert_eq!((open.blocked_at, open.updated_at), (None, T0 + 20));
        assert_eq!(db.set_contact_blocked(s.org, s.contact, None, T0 + 30).await.unwrap(), open);
        // Another organisation's contact is not found, and not changed.
        let other = fixtures::insert_org(&db).await;
        assert!(matches!(
            db.set_contact_blocked(other.id, s.contact, Some(T0 + 40), T0 + 40).await,
            Err(StoreError::NotFound)
        ));
        assert_eq!(db.get_contact(s.org, s.contact).await.unwrap().unwrap().blocked_at, None);
    },

    the_send_and_campaign_reads_carry_the_block => async |db| {
        let s = setup(&db, "100").await;
        db.set_contact_blocked(s.org, s.contact, Some(T0 + 5), T0 + 5).await.unwrap();
        let options = db.send_options(s.org, ContactRef::Id(s.contact)).await.unwrap();
        assert_eq!(options[0].contact_blocked_at, Some(T0 + 5));
        // The batched lookup (one statement on PostgreSQL) carries it too.
        let key = key_for(&db, s.org).await;
        let got = db.send_lookups(&[SendLookup::new(&key.key_hash, Some(ContactRef::WaId("49100")))]).await.unwrap();
        assert_eq!(got[0].as_ref().unwrap().options[0].contact_blocked_at, Some(T0 + 5));
        let free = fixtures::insert_contact(&db, s.org, "49200", T0).await;
        let options = db.send_options(s.org, ContactRef::Id(free.id)).await.unwrap();
        assert_eq!(options[0].contact_blocked_at, None);
        let spec = AudienceSpec { audience: Audience::ContactIds(vec![s.contact, free.id]), exclude_tags: vec![] };
        let mut audience: Vec<(Uuid, Option<i64>)> = db
            .audience_contacts(s.org, &spec)
            .await
            .unwrap()
            .into_iter()
            .map(|c| (c.id, c.blocked_at))
            .collect();
        audience.sort();
        let mut want = vec![(s.contact, Some(T0 + 5)), (free.id, None)];
        want.sort();
        assert_eq!(audience, want);
    },

    a_contacts_numbers_with_their_last_message => async |db| {
        let s = setup(&db, "100").await;
        db.insert_phone_number(&fixtures::phone_number(s.org, "200")).await.unwrap();
        let on_200 = db.get_or_create_conversation(s.org, s.contact, "200", Uuid::now_v7(), T0).await.unwrap();
        db.touch_conversation_inbound(on_200.id, T0 + 5, T0 + 6).await.unwrap();
        assert_eq!(
            db.contact_numbers(s.org, s.contact).await.unwrap(),
            vec![
                ContactNumber { phone_number_id: "100".into(), last_inbound_at: None },
                ContactNumber { phone_number_id: "200".into(), last_inbound_at: Some(T0 + 5) },
            ]
        );
        let other = fixtures::insert_org(&db).await;
        assert!(db.contact_numbers(other.id, s.contact).await.unwrap().is_empty());
    },
}
