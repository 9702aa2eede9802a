use crate::fixtures::{self, T0};
use tern_domain::send::{WINDOW_MS as CUSTOMER_WINDOW_MS, WindowState};
use tern_store::{Conversation, Db, StoreError};
use uuid::Uuid;

const HOUR: i64 = 60 * 60 * 1000;

/// An organisation with one number ("pn-<org>") and a contact; returns (org, contact, number).
async fn setup(db: &Db, number: &str) -> (Uuid, Uuid, String) {
    let org = fixtures::insert_org(db).await;
    db.insert_phone_number(&fixtures::phone_number(org.id, number))
        .await
        .unwrap();
    let contact = fixtures::insert_contact(db, org.id, &format!("49{number}"), T0).await;
    (org.id, contact.id, number.to_owned())
}

fn ids(conversations: &[Conversation]) -> Vec<Uuid> {
    conversations.iter().map(|c| c.id).collect()
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    get_or_create_is_idempotent_and_scoped => async |db| {
        let (org, contact, number) = setup(&db, "100").await;
        let id = Uuid::now_v7();
        let conv = db.get_or_create_conversation(org, contact, &number, id, T0).await.unwrap();
        assert_eq!(conv, Conversation {
            id,
            org_id: org,
            contact_id: contact,
            phone_number_id: number.clone(),
            last_inbound_at: None,
            last_message_at: None,
            created_at: T0,
        });
        let again = db.get_or_create_conversation(org, contact, &number, Uuid::now_v7(), T0 + 1).await.unwrap();
        assert_eq!(again, conv);
        assert_eq!(db.get_conversation(org, id).await.unwrap(), Some(conv.clone()));

        // Another organisation's contact or number is refused; nothing is created.
        let (other, other_contact, other_number) = setup(&db, "200").await;
        for (c, n) in [(other_contact, number.as_str()), (contact, other_number.as_str()), (Uuid::now_v7(), number.as_str())] {
            let new_id = Uuid::now_v7();
            let err = db.get_or_create_conversation(org, c, n, new_id, T0).await.unwrap_err();
            assert!(matches!(err, StoreError::NotFound), "{err:?}");
            assert_eq!(db.get_conversation(org, new_id).await.unwrap(), None);
            assert_eq!(db.get_conversation(other, new_id).await.unwrap(), None);
        }
        let err = db.get_or_create_conversation(org, contact, "nope", Uuid::now_v7(), T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
        // The existing conversation is invisible to the other organisation.
        assert_eq!(db.get_conversation(other, id).await.unwrap(), None);
        let err = db.get_or_create_conversation(other, contact, &number, Uuid::now_v7(), T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
        assert!(db.list_conversations(other, None, None, None, 10).await.unwrap().is_empty());
    },

    racing_get_or_create_yields_one_conversation => async |db| {
        let (org, contact, number) = setup(&db, "100").await;
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let db = db.clone();
                let number = number.clone();
                tokio::spawn(async move {
                    db.get_or_create_conversation(org, contact, &number, Uuid::now_v7(), T0 + i).await.unwrap()
                })
            })
            .collect();
        let mut seen = Vec::new();
        for t in tasks {
            seen.push(t.await.unwrap());
        }
        assert!(seen.iter().all(|c| *c == seen[0]), "{seen:?}");
        assert_eq!(db.list_conversations(org, None, None, None, 10).await.unwrap(), vec![seen[0].clone()]);
    },

    touches_never_move_back => async |db| {
        let (org, contact, number) = setup(&db, "100").await;
        let conv = db.get_or_create_conversation(org, contact, &number, Uuid::now_v7(), T0).await.unwrap();

        let c = db.touch_conversation_inbound(conv.id, T0 + 10, T0 + 20).await.unwrap();
        assert_eq!((c.last_inbound_at, c.last_message_at), (Some(T0 + 10), Some(T0 + 20)));
        // A late, older webhook.
        let c = db.touch_conversation_inbound(conv.id, T0 + 5, T0 + 15).await.unwrap();
        assert_eq!((c.last_inbound_at, c.last_message_at), (Some(T0 + 10), Some(T0 + 20)));
        let c = db.touch_conversation_message(conv.id, T0 + 30).await.unwrap();
        assert_eq!((c.last_inbound_at, c.last_message_at), (Some(T0 + 10), Some(T0 + 30)));
        let c = db.touch_conversation_message(conv.id, T0 + 25).await.unwrap();
        assert_eq!(c.last_message_at, Some(T0 + 30));
        let c = db.touch_conversation_inbound(conv.id, T0 + 40, T0 + 41).await.unwrap();
        assert_eq!((c.last_inbound_at, c.last_message_at), (Some(T0 + 40), Some(T0 + 41)));
        assert_eq!(db.get_conversation(org, conv.id).await.unwrap(), Some(c.clone()));

        // The window follows the network's timestamp.
        assert_eq!(c.window_expires_at(), Some(T0 + 40 + CUSTOMER_WINDOW_MS));
        assert_eq!(c.window_state(T0 + 40 + CUSTOMER_WINDOW_MS - 1), WindowState::Open);
        assert_eq!(c.window_state(T0 + 40 + CUSTOMER_WINDOW_MS), WindowState::Closed);
        assert_eq!(conv.window_state(T0), WindowState::NeverWritten);

        let err = db.touch_conversation_inbound(Uuid::now_v7(), T0, T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
        let err = db.touch_conversation_message(Uuid::now_v7(), T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
    },

    list_filters_and_pages_by_activity => async |db| {
        let (org, contact, number) = setup(&db, "100").await;
        db.insert_phone_number(&fixtures::phone_number(org, "101")).await.unwrap();
        db.insert_phone_number(&fixtures::phone_number(org, "102")).await.unwrap();
        let contact2 = fixtures::insert_contact(&db, org, "4477", T0).await.id;
        let (other, other_contact, other_number) = setup(&db, "200").await;
        let foreign = db.get_or_create_conversation(other, other_contact, &other_number, Uuid::now_v7(), T0 + 50 * HOUR).await.unwrap();
        db.touch_conversation_inbound(foreign.id, T0 + 50 * HOUR, T0 + 50 * HOUR).await.unwrap();

        let now = T0 + 48 * HOUR;
        let conv = |contact: Uuid, number: &'static str, created: i64| {
            let db = db.clone();
            async move { db.get_or_create_conversation(org, contact, number, Uuid::now_v7(), created).await.unwrap() }
        };
        // a: open (customer wrote 1h ago); b: closed (exactly 24h ago); c: never wrote;
        // d: open, other contact; e: same activity as a (tie broken by id).
        let a = conv(contact, "100", T0).await;
        let a = db.touch_conversation_inbound(a.id, now - HOUR, T0 + 40 * HOUR).await.unwrap();
        let b = conv(contact, "101", T0).await;
        let b = db.touch_conversation_inbound(b.id, now - CUSTOMER_WINDOW_MS, T0 + 30 * HOUR).await.unwrap();
        let c = conv(contact, "102", T0 + 45 * HOUR).await;
        let d = conv(contact2, "100", T0).await;
        let d = db.touch_conversation_inbound(d.id, now - 23 * HOUR, T0 + 20 * HOUR).await.unwrap();
        let e = conv(contact2, "101", T0 + 40 * HOUR).await;
        assert_eq!(number, "100");

        let mut expected = vec![a.clone(), b.clone(), c.clone(), d.clone(), e.clone()];
        expected.sort_by_key(|x| std::cmp::Reverse((x.sort_ts(), x.id)));
        assert_eq!(expected[0].id, c.id);

        let list = |contact_id: Option<Uuid>, window: Option<(bool, i64)>, after: Option<(i64, Uuid)>, limit: i64| {
            let db = db.clone();
            async move {
                let page = db.list_conversations(org, contact_id, window, after, limit).await.unwrap();
                assert!(page.iter().all(|c| c.org_id == org));
                page
            }
        };
        assert_eq!(list(None, None, None, 100).await, expected);
        for size in [1, 2, 3] {
            let mut seen = Vec::new();
            let mut after = None;
            loop {
                let page = list(None, None, after, size).await;
                seen.extend(ids(&page));
                match page.last() {
                    Some(last) if page.len() == size as usize => after = Some((last.sort_ts(), last.id)),
                    _ => break,
                }
            }
            assert_eq!(seen, ids(&expected), "page size {size}");
        }
        let last = expected.last().unwrap();
        assert!(list(None, None, Some((last.sort_ts(), last.id)), 10).await.is_empty());

        let only = |keep: &[&Conversation]| -> Vec<Uuid> {
            ids(&expected).into_iter().filter(|id| keep.iter().any(|k| k.id == *id)).collect()
        };
        assert_eq!(ids(&list(Some(contact), None, None, 100).await), only(&[&a, &b, &c]));
        assert_eq!(ids(&list(Some(contact2), None, None, 100).await), only(&[&d, &e]));
        assert_eq!(ids(&list(None, Some((true, now)), None, 100).await), only(&[&a, &d]));
        assert_eq!(ids(&list(None, Some((false, now)), None, 100).await), only(&[&b, &c, &e]));
        assert_eq!(ids(&list(Some(contact), Some((true, now)), None, 100).await), only(&[&a]));
        assert_eq!(ids(&list(Some(contact2), Some((false, now)), None, 100).await), only(&[&e]));
        // One ms earlier, b's window was still open.
        assert_eq!(ids(&list(None, Some((true, now - 1)), None, 100).await), only(&[&a, &b, &d]));
        assert!(list(Some(other_contact), None, None, 100).await.is_empty());
        for conv in &expected {
            let open = conv.window_state(now) == WindowState::Open;
            let listed = ids(&list(None, Some((open, now)), None, 100).await);
            assert!(listed.contains(&conv.id), "{conv:?}");
        }
    },
}
