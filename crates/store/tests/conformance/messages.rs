use crate::fixtures::{self, T0};
use serde_json::json;
use std::sync::Arc;
use tern_domain::message::{Direction, Pricing, Status};
use tern_store::{
    Accept, AcceptQueue, Acceptance, Charges, ContactRef, Db, Lookups, Message, NewContact,
    SendContext, SendLookup, StatusChange, StatusWrite,
};
use uuid::Uuid;

/// An organisation with number `number`, a contact and their conversation.
pub(crate) struct Setup {
    pub(crate) org: Uuid,
    pub(crate) contact: Uuid,
    pub(crate) conversation: Uuid,
    pub(crate) number: String,
}

pub(crate) async fn setup(db: &Db, number: &str) -> Setup {
    let org = fixtures::insert_org(db).await;
    db.insert_phone_number(&fixtures::phone_number(org.id, number))
        .await
        .unwrap();
    let contact = fixtures::insert_contact(db, org.id, &format!("49{number}"), T0).await;
    let conv = db
        .get_or_create_conversation(org.id, contact.id, number, Uuid::now_v7(), T0)
        .await
        .unwrap();
    Setup {
        org: org.id,
        contact: contact.id,
        conversation: conv.id,
        number: number.into(),
    }
}

pub(crate) fn outbound(s: &Setup, at: i64) -> Message {
    Message {
        id: Uuid::now_v7(),
        org_id: s.org,
        conversation_id: s.conversation,
        contact_id: s.contact,
        phone_number_id: s.number.clone(),
        direction: Direction::Outbound,
        r#type: "text".into(),
        status: Status::Accepted,
        template_name: None,
        template_language: None,
        text: Some("hi".into()),
        media_id: None,
        wamid: None,
        request: json!({"to": "49100", "type": "text", "text": {"body": "hi"}}),
        campaign_id: None,
        created_at: at,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: at,
        content: None,
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    }
}

pub(crate) fn inbound(s: &Setup, wamid: &str, at: i64) -> Message {
    Message {
        direction: Direction::Inbound,
        status: Status::Received,
        wamid: Some(wamid.into()),
        request: json!({"id": wamid}),
        ..outbound(s, at)
    }
}

const DAY: i64 = 24 * 60 * 60 * 1000;

tern_store::both_backends! { tern_store::testkit::TestDb;
    accept_binds_key_and_queues => async |db| {
        let s = setup(&db, "100").await;
        let m = outbound(&s, T0 + 5);
        let got = db.accept_message(&m, "key-0001", &[7; 32], T0 + DAY, &Charges::default()).await.unwrap();
        assert_eq!(got, Acceptance::Accepted);
        assert_eq!(db.get_message(s.org, m.id).await.unwrap(), Some(m.clone()));
        let rec = db.get_idempotency_key(s.org, "key-0001", T0 + 6).await.unwrap().unwrap();
        assert_eq!((rec.fingerprint.as_slice(), rec.message_id), (&[7u8; 32][..], Some(m.id)));
        // The conversation records the activity.
        let conv = db.get_conversation(s.org, s.conversation).await.unwrap().unwrap();
        assert_eq!(conv.last_message_at, Some(T0 + 5));
        // Keys are per organisation.
        let other = setup(&db, "200").await;
        assert_eq!(db.get_idempotency_key(other.org, "key-0001", T0 + 6).await.unwrap(), None);
        let m2 = outbound(&other, T0 + 5);
        assert_eq!(db.accept_message(&m2, "key-0001", &[8; 32], T0 + DAY, &Charges::default()).await.unwrap(), Acceptance::Accepted);
    },

    accept_with_a_bound_key_writes_nothing => async |db| {
        let s = setup(&db, "100").await;
        let first = outbound(&s, T0);
        db.accept_message(&first, "key-0001", &[1; 32], T0 + DAY, &Charges::default()).await.unwrap();
        let second = outbound(&s, T0 + 1);
        match db.accept_message(&second, "key-0001", &[2; 32], T0 + DAY, &Charges::default()).await.unwrap() {
            Acceptance::KeyTaken(rec) => {
                assert_eq!(rec.message_id, Some(first.id));
                assert_eq!(rec.fingerprint, vec![1; 32]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(db.get_message(s.org, second.id).await.unwrap(), None);
    },

    expired_key_is_reused_and_pruned => async |db| {
        let s = setup(&db, "100").await;
        let first = outbound(&s, T0);
        db.accept_message(&first, "key-0001", &[1; 32], T0 + 10, &Charges::default()).await.unwrap();
        assert!(db.get_idempotency_key(s.org, "key-0001", T0 + 10).await.unwrap().is_none());
        let second = outbound(&s, T0 + 20);
        assert_eq!(db.accept_message(&second, "key-0001", &[2; 32], T0 + DAY, &Charges::default()).await.unwrap(), Acceptance::Accepted);
        let rec = db.get_idempotency_key(s.org, "key-0001", T0 + 21).await.unwrap().unwrap();
        assert_eq!(rec.message_id, Some(second.id));
        db.accept_message(&outbound(&s, T0 + 20), "key-0002", &[3; 32], T0 + 30, &Charges::default()).await.unwrap();
        assert_eq!(db.prune_idempotency_keys(T0 + 30).await.unwrap(), 1);
        assert!(db.get_idempotency_key(s.org, "key-0001", T0 + 21).await.unwrap().is_some());
    },

    concurrent_accepts_with_one_key_store_one_message => async |db| {
        let s = Arc::new(setup(&db, "100").await);
        let mut tasks = Vec::new();
        for i in 0..12u8 {
            let db = db.clone();
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let m = outbound(&s, T0 + i64::from(i));
                let r = db.accept_message(&m, "same-key-1", &[i % 2; 32], T0 + DAY, &Charges::default()).await.unwrap();
                (m.id, r)
            }));
        }
        let mut winners = Vec::new();
        let mut bound = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                (id, Acceptance::Accepted) => winners.push(id),
                (_, Acceptance::KeyTaken(rec)) => bound.push(rec.message_id),
                (_, other) => panic!("{other:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "exactly one acceptance");
        assert!(bound.iter().all(|b| *b == Some(winners[0])));
        let page = db.list_conversation_messages(s.org, s.conversation, None, None, 100).await.unwrap();
        assert_eq!(page.len(), 1);
    },

    wallet_debit_is_conditional_and_recorded => async |db| {
        let s = setup(&db, "100").await;
        db.adjust_wallet(s.org, 100, "top_up", None, T0).await.unwrap();
        let charge = Charges { debit_minor: Some(60), messages_sent: None };
        let m = outbound(&s, T0);
        assert_eq!(db.accept_message(&m, "key-0001", &[1; 32], T0 + DAY, &charge).await.unwrap(), Acceptance::Accepted);
        assert_eq!(db.get_org(s.org).await.unwrap().unwrap().wallet_balance_minor, 40);
        let m2 = outbound(&s, T0);
        assert_eq!(db.accept_message(&m2, "key-0002", &[1; 32], T0 + DAY, &charge).await.unwrap(),
            Acceptance::WalletLow { balance_minor: 40 });
        // Refused: the key stays free and nothing was stored.
        assert!(db.get_idempotency_key(s.org, "key-0002", T0).await.unwrap().is_none());
        assert_eq!(db.get_message(s.org, m2.id).await.unwrap(), None);
        // The debit is tied to the message: a refund applies once.
        assert_eq!(db.adjust_wallet(s.org, 60, "message_refund", Some(m.id), T0).await.unwrap(), 100);
        assert!(db.adjust_wallet(s.org, 60, "message_refund", Some(m.id), T0).await.is_err());
    },

    messages_sent_allowance_counts_per_period => async |db| {
        let s = setup(&db, "100").await;
        let charge = Charges { debit_minor: None, messages_sent: Some((T0, 2)) };
        for k in ["key-0001", "key-0002"] {
            assert_eq!(db.accept_message(&outbound(&s, T0), k, &[1; 32], T0 + DAY, &charge).await.unwrap(), Acceptance::Accepted);
        }
        assert_eq!(db.accept_message(&outbound(&s, T0), "key-0003", &[1; 32], T0 + DAY, &charge).await.unwrap(),
            Acceptance::AllowanceUsed { used: 2 });
        assert_eq!(db.messages_sent_in_period(s.org, T0).await.unwrap(), 2);
        // A new period starts from zero; an allowance of 0 refuses at once.
        let next = Charges { debit_minor: None, messages_sent: Some((T0 + 30 * DAY, 2)) };
        assert_eq!(db.accept_message(&outbound(&s, T0), "key-0003", &[1; 32], T0 + DAY, &next).await.unwrap(), Acceptance::Accepted);
        let none = Charges { debit_minor: None, messages_sent: Some((T0 + 60 * DAY, 0)) };
        assert_eq!(db.accept_message(&outbound(&s, T0), "key-0004", &[1; 32], T0 + DAY, &none).await.unwrap(),
            Acceptance::AllowanceUsed { used: 0 });
        assert_eq!(db.messages_sent_in_period(s.org, T0 + 60 * DAY).await.unwrap(), 0);
    },

    inbound_dedupes_by_wamid => async |db| {
        let s = setup(&db, "100").await;
        let m = inbound(&s, "wamid.A", T0);
        assert!(db.insert_message(&m).await.unwrap());
        assert!(!db.insert_message(&inbound(&s, "wamid.A", T0 + 1)).await.unwrap());
        assert_eq!(db.find_message_for_status("wamid.A", None).await.unwrap(), Some(m));
    },

    status_change_is_compare_and_set_and_leaves_the_queue => async |db| {
        let s = setup(&db, "100").await;
        let m = outbound(&s, T0);
        db.accept_message(&m, "key-0001", &[1; 32], T0 + DAY, &Charges::default()).await.unwrap();
        // Found by Tern's id while no wamid is stored (callback data).
        let found = db.find_message_for_status("wamid.X", Some(m.id)).await.unwrap().unwrap();
        assert_eq!(found.id, m.id);
        let change = StatusChange {
            status: Status::Sent,
            wamid: Some("wamid.X".into()),
            sent_at: Some(T0 + 3),
            delivered_at: None,
            read_at: None,
            failed_at: None,
            failure_code: None,
            failure: None,
            pricing: None,
        };
        assert!(db.status_writes().update_message_status(m.id, Status::Accepted, T0, &change, T0 + 4).await.unwrap());
        // A second writer that read the old row loses.
        assert!(!db.status_writes().update_message_status(m.id, Status::Accepted, T0, &change, T0 + 5).await.unwrap());
        let got = db.get_message(s.org, m.id).await.unwrap().unwrap();
        assert_eq!((got.status.as_str(), got.wamid.as_deref(), got.sent_at, got.updated_at),
            ("sent", Some("wamid.X"), Some(T0 + 3), T0 + 4));
        // A wamid is never replaced.
        let other = StatusChange { status: Status::Delivered, wamid: Some("wamid.Y".into()), ..change };
        assert!(db.status_writes().update_message_status(m.id, Status::Sent, T0 + 4, &other, T0 + 4).await.unwrap());
        let got = db.get_message(s.org, m.id).await.unwrap().unwrap();
        assert_eq!((got.wamid.as_deref(), got.updated_at), (Some("wamid.X"), T0 + 5));
        assert_eq!(db.find_message_for_status("wamid.X", None).await.unwrap().map(|m| m.id), Some(m.id));
        // Another organisation cannot read it.
        let other_org = setup(&db, "200").await;
        assert_eq!(db.get_message(other_org.org, m.id).await.unwrap(), None);
    },

    status_change_keeps_the_latest_reported_pricing => async |db| {
        let s = setup(&db, "100").await;
        let m = outbound(&s, T0);
        db.accept_message(&m, "key-0001", &[1; 32], T0 + DAY, &Charges::default()).await.unwrap();
        let price = |kind: &str| Pricing {
            billable: Some(kind == "regular"),
            pricing_model: Some("PMP".into()),
            category: Some("utility".into()),
            r#type: Some(kind.into()),
        };
        let sent = StatusChange {
            status: Status::Sent,
            wamid: Some("wamid.P".into()),
            sent_at: Some(T0 + 1),
            delivered_at: None,
            read_at: None,
            failed_at: None,
            failure_code: None,
            failure: None,
            pricing: Some(price("free_customer_service")),
        };
        assert_eq!(db.get_message(s.org, m.id).await.unwrap().unwrap().pricing, None);
        assert!(db.status_writes().update_message_status(m.id, Status::Accepted, T0, &sent, T0 + 2).await.unwrap());
        let got = db.get_message(s.org, m.id).await.unwrap().unwrap();
        assert_eq!(got.pricing, Some(price("free_customer_service")));
        // A change without a price keeps the stored one (also through the batch read).
        let delivered = StatusChange { status: Status::Delivered, delivered_at: Some(T0 + 3), pricing: None, ..sent.clone() };
        assert!(db.status_writes().update_message_status(m.id, Status::Sent, got.updated_at, &delivered, T0 + 3).await.unwrap());
        let got = db.find_messages_by_wamids(&["wamid.P"]).await.unwrap().remove(0);
        assert_eq!((got.status, got.pricing.clone()), (Status::Delivered, Some(price("free_customer_service"))));
        // A later price replaces it.
        let read = StatusChange { status: Status::Read, read_at: Some(T0 + 4), pricing: Some(price("regular")), ..delivered };
        assert!(db.status_writes().update_message_status(m.id, Status::Delivered, got.updated_at, &read, T0 + 4).await.unwrap());
        let got = db.get_message(s.org, m.id).await.unwrap().unwrap();
        assert_eq!(got.pricing, Some(price("regular")));
    },

    status_changes_written_together_end_as_one_by_one => async |db| {
        let s = setup(&db, "100").await;
        let mut one = Vec::new();
        let mut together = Vec::new();
        for n in 0..6u8 {
            let m = outbound(&s, T0);
            db.accept_message(&m, &format!("key-st{n}"), &[n; 32], T0 + DAY, &Charges::default()).await.unwrap();
            if n < 3 { one.push(m.id) } else { together.push(m.id) }
        }
        let changes = |wamid: &str| {
            let sent = StatusChange {
                status: Status::Sent,
                wamid: Some(wamid.into()),
                sent_at: Some(T0 + 1),
                delivered_at: None,
                read_at: None,
                failed_at: None,
                failure_code: None,
                failure: None,
                pricing: Some(Pricing { billable: Some(true), pricing_model: Some("PMP".into()), category: Some("utility".into()), r#type: Some("regular".into()) }),
            };
            let failed = StatusChange {
                status: Status::Failed,
                wamid: None,
                sent_at: None,
                failed_at: Some(T0 + 2),
                failure_code: Some("recipient_unreachable".into()),
                failure: Some(tern_domain::failure::Failure { code: "recipient_unreachable".into(), message: "gone".into(), provider_code: Some("131026".into()), provider_message: None, provider_href: None }),
                pricing: None,
                ..sent.clone()
            };
            [sent, failed.clone(), failed]
        };
        // The third was read before another writer moved it: not written.
        let expected = [T0, T0, T0 - 1];
        let a = changes("wamid.ONE");
        let mut by_one = Vec::new();
        for ((id, change), at) in one.iter().zip(&a).zip(expected) {
            by_one.push(db.status_writes().update_message_status(*id, Status::Accepted, at, change, T0 + 4).await.unwrap());
        }
        let b = changes("wamid.TOGETHER");
        let writes: Vec<StatusWrite> = together.iter().zip(&b).zip(expected)
            .map(|((id, change), at)| StatusWrite { id: *id, expected_status: Status::Accepted, expected_updated_at: at, change })
            .collect();
        let mut tx = db.begin().await.unwrap();
        let by_many = tx.status_writes().update_message_statuses(&writes, T0 + 4).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!((by_one.as_slice(), by_many.as_slice()), ([true, true, false].as_slice(), [true, true, false].as_slice()));
        for (x, y) in one.iter().zip(&together) {
            let x = db.get_message(s.org, *x).await.unwrap().unwrap();
            let y = db.get_message(s.org, *y).await.unwrap().unwrap();
            let wamid = |m: &Message| m.wamid.as_deref().map(|w| w.replace("ONE", "TOGETHER"));
            assert_eq!(
                (x.status, wamid(&x), x.sent_at, x.failed_at, x.failure_code.clone(), x.failure.clone(), x.pricing.clone(), x.updated_at),
                (y.status, wamid(&y), y.sent_at, y.failed_at, y.failure_code.clone(), y.failure.clone(), y.pricing.clone(), y.updated_at),
            );
        }
        // None of them is claimable any more, except the one not written.
        let left = db.get_message(s.org, together[2]).await.unwrap().unwrap();
        assert_eq!(left.status, Status::Accepted);
    },

    conversation_messages_newest_first_by_direction => async |db| {
        let s = setup(&db, "100").await;
        let a = inbound(&s, "wamid.1", T0);
        db.insert_message(&a).await.unwrap();
        let b = outbound(&s, T0 + 1);
        db.accept_message(&b, "key-0001", &[1; 32], T0 + DAY, &Charges::default()).await.unwrap();
        let c = inbound(&s, "wamid.2", T0 + 2);
        db.insert_message(&c).await.unwrap();
        let all = db.list_conversation_messages(s.org, s.conversation, None, None, 10).await.unwrap();
        assert_eq!(all.iter().map(|m| m.id).collect::<Vec<_>>(), vec![c.id, b.id, a.id]);
        let page = db.list_conversation_messages(s.org, s.conversation, None, Some(c.id), 1).await.unwrap();
        assert_eq!(page.iter().map(|m| m.id).collect::<Vec<_>>(), vec![b.id]);
        let inb = db.list_conversation_messages(s.org, s.conversation, Some(Direction::Inbound), None, 10).await.unwrap();
        assert_eq!(inb.iter().map(|m| m.id).collect::<Vec<_>>(), vec![c.id, a.id]);
        let out = db.list_conversation_messages(s.org, s.conversation, Some(Direction::Outbound), None, 10).await.unwrap();
        assert_eq!(out.iter().map(|m| m.id).collect::<Vec<_>>(), vec![b.id]);
        let other = setup(&db, "200").await;
        assert!(db.list_conversation_messages(other.org, s.conversation, None, None, 10).await.unwrap().is_empty());
    },

    batch_gives_each_item_its_own_outcome => async |db| {
        let s = setup(&db, "100").await;
        db.adjust_wallet(s.org, 100, "top_up", None, T0).await.unwrap();
        let item = |key: &str, at: i64, charges: Charges| Accept {
            message: outbound(&s, at),
            key: key.into(),
            fingerprint: vec![1; 32],
            key_expires_at: T0 + DAY,
            charges,
            new_contact: None,
            contact_limit: None,
            new_conversation: false,
            api_key_id: None,
            request_id: None,
        };
        let debit = |n| Charges { debit_minor: Some(n), messages_sent: None };
        let allowance = |n| Charges { debit_minor: None, messages_sent: Some((T0, n)) };
        let mut items = vec![
            item("k-000001", T0 + 1, Charges::default()),
            item("k-000001", T0 + 2, Charges::default()),
            item("k-000002", T0 + 3, debit(60)),
            item("k-000003", T0 + 4, debit(60)),
            item("k-000004", T0 + 5, allowance(1)),
            item("k-000005", T0 + 6, allowance(1)),
            // Counted, then refused by the wallet: the count is taken back.
            item("k-000006", T0 + 7, Charges { debit_minor: Some(1_000), messages_sent: Some((T0, 5)) }),
        ];
        let ids: Vec<Uuid> = items.iter().map(|i| i.message.id).collect();
        let got: Vec<Acceptance> = db.accept_messages(&mut items).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(got[0], Acceptance::Accepted);
        match &got[1] {
            Acceptance::KeyTaken(rec) => assert_eq!(rec.message_id, Some(ids[0])),
            other => panic!("{other:?}"),
        }
        assert_eq!(got[2], Acceptance::Accepted);
        assert_eq!(got[3], Acceptance::WalletLow { balance_minor: 40 });
        assert_eq!(got[4], Acceptance::Accepted);
        assert_eq!(got[5], Acceptance::AllowanceUsed { used: 1 });
        assert_eq!(got[6], Acceptance::WalletLow { balance_minor: 40 });
        for (i, stored) in [(0, true), (1, false), (2, true), (3, false), (4, true), (5, false), (6, false)] {
            assert_eq!(db.get_message(s.org, ids[i]).await.unwrap().is_some(), stored, "item {i}");
        }
        for (key, bound) in [("k-000002", true), ("k-000003", false), ("k-000005", false), ("k-000006", false)] {
            assert_eq!(db.get_idempotency_key(s.org, key, T0).await.unwrap().is_some(), bound, "{key}");
        }
        assert_eq!(db.messages_sent_in_period(s.org, T0).await.unwrap(), 1);
        assert_eq!(db.get_org(s.org).await.unwrap().unwrap().wallet_balance_minor, 40);
        let conv = db.get_conversation(s.org, s.conversation).await.unwrap().unwrap();
        assert_eq!(conv.last_message_at, Some(T0 + 5));
        let queued = db.list_conversation_messages(s.org, s.conversation, None, None, 10).await.unwrap();
        assert_eq!(queued.iter().map(|m| m.id).collect::<Vec<_>>(), vec![ids[4], ids[2], ids[0]]);
    },

    // Counted items without other charges (one call on either backend, counting included):
    // a batch within the allowance counts once; one that would pass it gets exactly the
    // units left, in order, and a taken key gives its unit back.
    counted_plain_batch_is_exact_at_the_allowance => async |db| {
        let s = setup(&db, "100").await;
        let item = |key: &str, allowance: i64| Accept {
            message: outbound(&s, T0 + 1),
            key: key.into(),
            fingerprint: vec![1; 32],
            key_expires_at: T0 + DAY,
            charges: Charges { debit_minor: None, messages_sent: Some((T0, allowance)) },
            new_contact: None,
            contact_limit: None,
            new_conversation: false,
            api_key_id: None,
            request_id: None,
        };
        let mut first: Vec<Accept> = (0..3).map(|i| item(&format!("k-first-{i}"), 5)).collect();
        let got: Vec<Acceptance> = db.accept_messages(&mut first).await.into_iter().map(Result::unwrap).collect();
        assert!(got.iter().all(|a| *a == Acceptance::Accepted), "{got:?}");
        assert_eq!(db.messages_sent_in_period(s.org, T0).await.unwrap(), 3);
        let mut more: Vec<Accept> = (0..4).map(|i| item(&format!("k-more-{i}"), 5)).collect();
        more.insert(0, item("k-first-0", 5));
        let got: Vec<Acceptance> = db.accept_messages(&mut more).await.into_iter().map(Result::unwrap).collect();
        assert!(matches!(got[0], Acceptance::KeyTaken(_)), "{got:?}");
        assert_eq!(&got[1..], &[Acceptance::Accepted, Acceptance::Accepted,
            Acceptance::AllowanceUsed { used: 5 }, Acceptance::AllowanceUsed { used: 5 }]);
        assert_eq!(db.messages_sent_in_period(s.org, T0).await.unwrap(), 5);
        assert!(db.get_message(s.org, more[2].message.id).await.unwrap().is_some());
        assert!(db.get_message(s.org, more[3].message.id).await.unwrap().is_none());
        assert!(db.get_idempotency_key(s.org, "k-more-2", T0).await.unwrap().is_none());
    },

    // Items with nothing but a key and a message (one call on either backend): keys taken
    // before or earlier in the batch, an expired key taken over, several conversations, and
    // an item that cannot be stored, which fails alone.
    plain_batch_binds_stores_queues_and_touches => async |db| {
        let s = setup(&db, "100").await;
        let other_conv = db
            .get_or_create_conversation(s.org, fixtures::insert_contact(&db, s.org, "49777", T0).await.id, "100", Uuid::now_v7(), T0)
            .await
            .unwrap();
        let earlier = outbound(&s, T0);
        db.accept_message(&earlier, "k-bound1", &[1; 32], T0 + DAY, &Charges::default()).await.unwrap();
        let gone = outbound(&s, T0);
        db.accept_message(&gone, "k-expire", &[1; 32], T0 + 5, &Charges::default()).await.unwrap();
        let item = |key: &str, m: Message| Accept {
            message: m,
            key: key.into(),
            fingerprint: vec![2; 32],
            key_expires_at: T0 + DAY,
            charges: Charges::default(),
            new_contact: None,
            contact_limit: None,
            new_conversation: false,
            api_key_id: None,
            request_id: None,
        };
        let mut on_other = outbound(&s, T0 + 20);
        (on_other.conversation_id, on_other.contact_id) = (other_conv.id, other_conv.contact_id);
        let mut broken = outbound(&s, T0 + 30);
        broken.conversation_id = Uuid::now_v7(); // no such conversation
        let mut items = vec![
            item("k-000001", outbound(&s, T0 + 10)),
            item("k-bound1", outbound(&s, T0 + 11)),
            item("k-000001", outbound(&s, T0 + 12)),
            item("k-expire", outbound(&s, T0 + 13)),
            item("k-000002", on_other),
            item("k-000003", broken),
        ];
        let ids: Vec<Uuid> = items.iter().map(|i| i.message.id).collect();
        let got = db.accept_messages(&mut items).await;
        assert_eq!(got[0].as_ref().unwrap(), &Acceptance::Accepted);
        for (i, first) in [(1, earlier.id), (2, ids[0])] {
            match got[i].as_ref().unwrap() {
                Acceptance::KeyTaken(rec) => assert_eq!(rec.message_id, Some(first), "item {i}"),
                other => panic!("item {i}: {other:?}"),
            }
        }
        assert_eq!(got[3].as_ref().unwrap(), &Acceptance::Accepted);
        assert_eq!(got[4].as_ref().unwrap(), &Acceptance::Accepted);
        assert!(got[5].is_err(), "{:?}", got[5]);
        for (i, stored) in [(0, true), (1, false), (2, false), (3, true), (4, true), (5, false)] {
            assert_eq!(db.get_message(s.org, ids[i]).await.unwrap().is_some(), stored, "item {i}");
        }
        let taken_over = db.get_idempotency_key(s.org, "k-expire", T0 + 14).await.unwrap().unwrap();
        assert_eq!((taken_over.message_id, taken_over.fingerprint), (Some(ids[3]), vec![2; 32]));
        assert_eq!(db.get_idempotency_key(s.org, "k-000003", T0).await.unwrap(), None);
        for (conv, at) in [(s.conversation, T0 + 13), (other_conv.id, T0 + 20)] {
            let c = db.get_conversation(s.org, conv).await.unwrap().unwrap();
            assert_eq!(c.last_message_at, Some(at));
        }
        // Queued for dispatch: the two earlier messages and the three accepted now.
        assert_eq!(db.count_dispatch_queue().await.unwrap().queued, 5);
    },

    batch_creates_a_new_recipient_once => async |db| {
        let s = setup(&db, "100").await;
        let new = |key: &str| {
            let mut m = outbound(&s, T0 + 1);
            m.contact_id = Uuid::now_v7();
            m.conversation_id = Uuid::now_v7();
            Accept {
                message: m,
                key: key.into(),
                fingerprint: vec![1; 32],
                key_expires_at: T0 + DAY,
                charges: Charges::default(),
                new_contact: Some(NewContact::WaId("4915550001".into())),
                contact_limit: None,
                new_conversation: true,
                api_key_id: None,
                request_id: None,
            }
        };
        let mut items = vec![new("k-000001"), new("k-000002")];
        let first = (items[0].message.contact_id, items[0].message.conversation_id);
        for r in db.accept_messages(&mut items).await {
            assert_eq!(r.unwrap(), Acceptance::Accepted);
        }
        // The second item uses the rows the first created.
        for it in &items {
            assert_eq!((it.message.contact_id, it.message.conversation_id), first);
            let stored = db.get_message(s.org, it.message.id).await.unwrap().unwrap();
            assert_eq!((stored.contact_id, stored.conversation_id), first);
        }
        let contact = db.get_contact_by_wa_id(s.org, "4915550001").await.unwrap().unwrap();
        assert_eq!((contact.id, contact.consent_status.as_str()), (first.0, "unknown"));
        let conv = db.find_conversation(s.org, first.0, "100").await.unwrap().unwrap();
        assert_eq!((conv.id, conv.last_message_at), (first.1, Some(T0 + 1)));
        // A later request for a recipient that exists by now also gets the existing rows.
        let mut late = [new("k-000003")];
        assert_eq!(db.accept_messages(&mut late).await.pop().unwrap().unwrap(), Acceptance::Accepted);
        assert_eq!((late[0].message.contact_id, late[0].message.conversation_id), first);
    },

    accept_queue_binds_each_key_once => async |db| {
        let s = Arc::new(setup(&db, "100").await);
        let queue = AcceptQueue::start(db.clone());
        let mut tasks = Vec::new();
        for i in 0..60u8 {
            let (queue, s) = (queue.clone(), s.clone());
            tasks.push(tokio::spawn(async move {
                let m = outbound(&s, T0 + i64::from(i));
                let item = Accept {
                    message: m,
                    key: format!("key-{:06}", i % 20),
                    fingerprint: vec![i % 20; 32],
                    key_expires_at: T0 + DAY,
                    charges: Charges::default(),
                    new_contact: None,
                    contact_limit: None,
                    new_conversation: false,
                    api_key_id: None,
                    request_id: None,
                };
                let (item, outcome) = queue.accept(item).await.unwrap();
                (item.message.id, item.key, outcome)
            }));
        }
        let mut accepted = std::collections::HashMap::new();
        let mut taken = Vec::new();
        for t in tasks {
            match t.await.unwrap() {
                (id, key, Acceptance::Accepted) => assert!(accepted.insert(key, id).is_none(), "one acceptance per key"),
                (_, key, Acceptance::KeyTaken(rec)) => taken.push((key, rec.message_id)),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(accepted.len(), 20);
        assert_eq!(taken.len(), 40);
        for (key, id) in taken {
            assert_eq!(Some(accepted[&key]), id, "a repeat points at the accepted message");
        }
        let page = db.list_conversation_messages(s.org, s.conversation, None, None, 100).await.unwrap();
        assert_eq!(page.len(), 20);
    },

    // The queue's writer keeps its connection between batches: after a batch refused at the
    // allowance (rolled back on SQLite) and one that failed, the next batches and other
    // writers still write (a transaction left open would hold SQLite's write lock).
    accept_queue_writes_on_after_refused_and_failed_batches => async |db| {
        let s = setup(&db, "100").await;
        let queue = AcceptQueue::start(db.clone());
        let item = |key: &str, m: Message| Accept {
            message: m,
            key: key.into(),
            fingerprint: vec![3; 32],
            key_expires_at: T0 + DAY,
            charges: Charges { debit_minor: None, messages_sent: Some((T0, 2)) },
            new_contact: None,
            contact_limit: None,
            new_conversation: false,
            api_key_id: None,
            request_id: None,
        };
        let (_, first) = queue.accept(item("q-1", outbound(&s, T0 + 1))).await.unwrap();
        let (_, second) = queue.accept(item("q-2", outbound(&s, T0 + 2))).await.unwrap();
        let (_, refused) = queue.accept(item("q-3", outbound(&s, T0 + 3))).await.unwrap();
        assert_eq!((first, second, refused), (Acceptance::Accepted, Acceptance::Accepted,
            Acceptance::AllowanceUsed { used: 2 }));
        let elsewhere = outbound(&s, T0 + 4);
        db.accept_message(&elsewhere, "direct-1", &[1; 32], T0 + DAY, &Charges::default()).await.unwrap();
        let mut broken = outbound(&s, T0 + 5);
        broken.conversation_id = Uuid::now_v7(); // no such conversation
        let mut unlimited = item("q-4", broken);
        unlimited.charges = Charges::default();
        assert!(queue.accept(unlimited).await.is_err());
        let mut after = item("q-5", outbound(&s, T0 + 6));
        after.charges = Charges::default();
        let after_id = after.message.id;
        assert_eq!(queue.accept(after).await.unwrap().1, Acceptance::Accepted);
        let direct = outbound(&s, T0 + 7);
        db.accept_message(&direct, "direct-2", &[1; 32], T0 + DAY, &Charges::default()).await.unwrap();
        assert_eq!(db.messages_sent_in_period(s.org, T0).await.unwrap(), 2);
        assert!(db.get_message(s.org, after_id).await.unwrap().is_some());
        assert!(db.get_message(s.org, direct.id).await.unwrap().is_some());
    },

    send_options_read_numbers_contact_and_conversation => async |db| {
        let s = setup(&db, "100").await;
        db.insert_phone_number(&fixtures::phone_number(s.org, "200")).await.unwrap();
        db.touch_conversation_inbound(s.conversation, T0 + 5, T0 + 6).await.unwrap();
        let by_wa = db.send_options(s.org, ContactRef::WaId("49100")).await.unwrap();
        let by_id = db.send_options(s.org, ContactRef::Id(s.contact)).await.unwrap();
        assert_eq!(by_wa, by_id);
        assert_eq!(by_wa.iter().map(|o| o.number.id.as_str()).collect::<Vec<_>>(), vec!["100", "200"]);
        assert_eq!(by_wa[0].number, db.get_phone_number("100").await.unwrap().unwrap());
        assert_eq!((by_wa[0].contact_id, by_wa[0].contact_wa_id.as_deref(), Some(by_wa[0].consent_status.as_str())),
            (Some(s.contact), Some("49100"), Some("unknown")));
        assert_eq!((by_wa[0].conversation_id, by_wa[0].last_inbound_at), (Some(s.conversation), Some(T0 + 5)));
        // No conversation on the second number yet.
        assert_eq!((by_wa[1].contact_id, by_wa[1].conversation_id, by_wa[1].last_inbound_at), (Some(s.contact), None, None));
        // Unknown recipients, and another organisation's contact, are not found.
        let unknown = db.send_options(s.org, ContactRef::WaId("49999")).await.unwrap();
        assert!(unknown.iter().all(|o| o.contact_id.is_none() && o.conversation_id.is_none()));
        let other = setup(&db, "300").await;
        let foreign = db.send_options(s.org, ContactRef::Id(other.contact)).await.unwrap();
        assert_eq!(foreign.len(), 2);
        assert!(foreign.iter().all(|o| o.contact_id.is_none()));
        // An organisation without numbers has no options.
        let bare = fixtures::insert_org(&db).await;
        assert!(db.send_options(bare.id, ContactRef::WaId("49100")).await.unwrap().is_empty());
    },

    // The key lookup and the send's reads in one: each answer is what find_auth_by_hash and
    // send_options give for that key's organisation, in the lookups' order.
    send_lookups_answer_each_key_with_its_options => async |db| {
        let s = setup(&db, "100").await;
        db.insert_phone_number(&fixtures::phone_number(s.org, "200")).await.unwrap();
        db.touch_conversation_inbound(s.conversation, T0 + 5, T0 + 6).await.unwrap();
        let key_s = key_for(&db, s.org).await;
        let other = setup(&db, "300").await;
        let key_other = key_for(&db, other.org).await;
        let bare = fixtures::insert_org(&db).await;
        let key_bare = key_for(&db, bare.id).await;
        let revoked = key_for(&db, s.org).await;
        db.revoke_api_key(revoked.id, T0).await.unwrap();
        let unknown = vec![9u8; 32];

        let wa = ContactRef::WaId("49100");
        let by_id = ContactRef::Id(s.contact);
        let lookups = vec![
            SendLookup::new(&key_s.key_hash, Some(wa)),
            SendLookup::new(&unknown, Some(wa)),
            SendLookup::new(&key_s.key_hash, Some(by_id)),
            SendLookup::new(&key_other.key_hash, Some(by_id)), // another organisation's contact
            SendLookup::new(&key_bare.key_hash, Some(wa)),     // no numbers
            SendLookup::new(&key_s.key_hash, None),            // key only
            SendLookup::new(&revoked.key_hash, Some(by_id)),   // revoked keys are answered too
        ];
        let got = db.send_lookups(&lookups).await.unwrap();
        assert_eq!(got.len(), lookups.len());
        let expect = |hash: &[u8], org: Uuid, contact: Option<ContactRef<'static>>| {
            let db = db.clone();
            let hash = hash.to_vec();
            async move {
                let auth = db.find_auth_by_hash(&hash).await.unwrap().unwrap();
                let options = match contact {
                    Some(c) => db.send_options(org, c).await.unwrap(),
                    None => Vec::new(),
                };
                Some(SendContext { auth, options })
            }
        };
        assert_eq!(got[0], expect(&key_s.key_hash, s.org, Some(ContactRef::WaId("49100"))).await);
        assert_eq!(got[0].as_ref().unwrap().options.len(), 2);
        assert_eq!(got[1], None);
        assert_eq!(got[2], expect(&key_s.key_hash, s.org, Some(ContactRef::Id(s.contact))).await);
        assert_eq!(got[2].as_ref().unwrap().options[0].conversation_id, Some(s.conversation));
        assert_eq!(got[3], expect(&key_other.key_hash, other.org, Some(ContactRef::Id(s.contact))).await);
        assert!(got[3].as_ref().unwrap().options.iter().all(|o| o.contact_id.is_none()));
        assert_eq!(got[4], expect(&key_bare.key_hash, bare.id, None).await);
        assert_eq!(got[5], expect(&key_s.key_hash, s.org, None).await);
        assert_eq!(got[6], expect(&revoked.key_hash, s.org, Some(ContactRef::Id(s.contact))).await);
        assert_eq!(got[6].as_ref().unwrap().auth.key.revoked_at, Some(T0));
        assert!(db.send_lookups(&[]).await.unwrap().is_empty());
    },

    // Concurrent lookups through the batching readers each get their own answer.
    lookups_share_statements_and_keep_answers_apart => async |db| {
        let mut cases = Vec::new();
        for n in 0..4 {
            let s = setup(&db, &format!("{}00", n + 1)).await;
            let key = key_for(&db, s.org).await;
            cases.push((s, key));
        }
        let cases = Arc::new(cases);
        let lookups = Lookups::start(db.clone());
        let tasks: Vec<_> = (0..60)
            .map(|i| {
                let (lookups, cases) = (lookups.clone(), cases.clone());
                tokio::spawn(async move {
                    let (s, key) = &cases[i % 4];
                    if i % 3 == 0 {
                        let rec = lookups.auth(&key.key_hash).await.unwrap().unwrap();
                        assert_eq!(rec.org.id, s.org);
                        return;
                    }
                    let got = lookups.send(&key.key_hash, Some(ContactRef::Id(s.contact))).await.unwrap().unwrap();
                    assert_eq!(got.auth.org.id, s.org);
                    assert_eq!(got.options.len(), 1);
                    assert_eq!((got.options[0].contact_id, got.options[0].conversation_id), (Some(s.contact), Some(s.conversation)));
                    assert_eq!(lookups.auth(&[7u8; 32]).await.unwrap(), None);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    },
}

/// A key of the organisation's new owner.
pub(crate) async fn key_for(db: &Db, org: Uuid) -> tern_store::ApiKey {
    let member = fixtures::insert_member(db, org, "owner").await;
    let key = fixtures::api_key(org, member.id);
    db.insert_api_key(&key).await.unwrap();
    key
}
