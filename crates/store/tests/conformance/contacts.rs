use crate::fixtures::{self, T0, obj};
use serde_json::json;
use tern_domain::contact::Consent;
use tern_store::{Contact, Db, Identity, StoreError};
use uuid::Uuid;

fn ids(contacts: &[Contact]) -> Vec<Uuid> {
    contacts.iter().map(|c| c.id).collect()
}

/// Follows `list_contacts` pages of `size` to the end.
async fn all_pages(db: &Db, org_id: Uuid, size: i64) -> Vec<Uuid> {
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = db.list_contacts(org_id, after, size).await.unwrap();
        assert!(page.len() <= size as usize);
        assert!(page.iter().all(|c| c.org_id == org_id));
        seen.extend(ids(&page));
        match page.last() {
            Some(last) if page.len() == size as usize => after = Some((last.created_at, last.id)),
            _ => return seen,
        }
    }
}

/// Follows `list_contacts_updated_since` pages of `size` from `since` to the end.
async fn sync_pages(db: &Db, org_id: Uuid, since: i64, size: i64) -> Vec<(i64, Uuid)> {
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = db
            .list_contacts_updated_since(org_id, since, after, size)
            .await
            .unwrap();
        assert!(page.len() <= size as usize);
        assert!(
            page.iter()
                .all(|c| c.org_id == org_id && c.updated_at > since)
        );
        seen.extend(page.iter().map(|c| (c.updated_at, c.id)));
        match page.last() {
            Some(last) if page.len() == size as usize => after = Some((last.updated_at, last.id)),
            _ => return seen,
        }
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    upsert_creates_then_merges_fields => async |db| {
        let org = fixtures::insert_org(&db).await;
        let id = Uuid::now_v7();
        let patch = obj(json!({"city": "Lyon", "vip": true, "gone": null}));
        let (created, is_new) = db
            .upsert_contact_by_wa_id(org.id, "33612345678", Some("Ann"), Some(&patch), id, T0)
            .await
            .unwrap();
        assert!(is_new);
        assert_eq!(created, Contact {
            id,
            org_id: org.id,
            wa_id: Some("33612345678".into()),
            user_id: None,
            parent_user_id: None,
            username: None,
            blocked_at: None,
            name: Some("Ann".into()),
            custom_fields: json!({"city": "Lyon", "vip": true}),
            consent_status: Consent::Unknown,
            consent_source: None,
            consent_updated_at: None,
            last_inbound_at: None,
            created_at: T0,
            updated_at: T0,
            tags: vec![],
        });
        assert_eq!(db.get_contact(org.id, id).await.unwrap(), Some(created.clone()));

        // Merge: a key replaced, a key removed by null, a key added; the name is kept.
        let patch = obj(json!({"city": "Paris", "vip": null, "n": 3}));
        let (updated, is_new) = db
            .upsert_contact_by_wa_id(org.id, "33612345678", None, Some(&patch), Uuid::now_v7(), T0 + 10)
            .await
            .unwrap();
        assert!(!is_new);
        assert_eq!(updated, Contact {
            custom_fields: json!({"city": "Paris", "n": 3}),
            updated_at: T0 + 10,
            ..created.clone()
        });

        // Nothing changes: updated_at stays.
        let (same, is_new) = db
            .upsert_contact_by_wa_id(org.id, "33612345678", Some("Ann"), Some(&patch), Uuid::now_v7(), T0 + 20)
            .await
            .unwrap();
        assert!(!is_new);
        assert_eq!(same, updated);

        // A new name.
        let (renamed, _) = db
            .upsert_contact_by_wa_id(org.id, "33612345678", Some("Ann B."), None, Uuid::now_v7(), T0 + 30)
            .await
            .unwrap();
        assert_eq!((renamed.name.as_deref(), renamed.updated_at), (Some("Ann B."), T0 + 30));

        // The same wa_id in another organisation is another contact.
        let other = fixtures::insert_org(&db).await;
        let (foreign, is_new) = db
            .upsert_contact_by_wa_id(other.id, "33612345678", None, None, Uuid::now_v7(), T0)
            .await
            .unwrap();
        assert!(is_new);
        assert_ne!(foreign.id, id);
        assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
        assert_eq!(db.count_contacts(other.id).await.unwrap(), 1);
        assert_eq!(db.count_contacts(Uuid::now_v7()).await.unwrap(), 0);
    },

    racing_upserts_make_one_contact_and_keep_every_patch => async |db| {
        let org = fixtures::insert_org(&db).await;
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let db = db.clone();
                tokio::spawn(async move {
                    let patch = obj(json!({ format!("k{i}"): i }));
                    db.upsert_contact_by_wa_id(org.id, "4915100000", None, Some(&patch), Uuid::now_v7(), T0 + i)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut created = 0;
        let mut contact_ids = Vec::new();
        for t in tasks {
            let (contact, is_new) = t.await.unwrap();
            created += usize::from(is_new);
            contact_ids.push(contact.id);
        }
        assert_eq!(created, 1);
        contact_ids.dedup();
        assert_eq!(contact_ids.len(), 1);
        assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
        let stored = db.get_contact_by_wa_id(org.id, "4915100000").await.unwrap().unwrap();
        let expected: serde_json::Map<_, _> =
            (0..8).map(|i| (format!("k{i}"), json!(i))).collect();
        assert_eq!(stored.custom_fields, serde_json::Value::Object(expected));
    },

    contacts_are_invisible_to_other_orgs => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let c = fixtures::insert_contact(&db, org.id, "1555000", T0).await;

        assert_eq!(db.get_contact(other.id, c.id).await.unwrap(), None);
        assert_eq!(db.get_contact_by_wa_id(other.id, "1555000").await.unwrap(), None);
        assert_eq!(db.get_contact(org.id, Uuid::now_v7()).await.unwrap(), None);
        assert_eq!(db.get_contact_by_wa_id(org.id, "1555001").await.unwrap(), None);

        for org_id in [other.id, org.id] {
            let id = if org_id == org.id { Uuid::now_v7() } else { c.id };
            let err = db.update_contact(org_id, id, Some(Some("X")), None, T0 + 1).await.unwrap_err();
            assert!(matches!(err, StoreError::NotFound), "{err:?}");
            let err = db.set_contact_consent(org_id, id, Consent::OptedOut, Some("api"), T0 + 1).await.unwrap_err();
            assert!(matches!(err, StoreError::NotFound), "{err:?}");
        }
        assert_eq!(db.get_contact(org.id, c.id).await.unwrap(), Some(c));
        assert!(db.list_contacts(other.id, None, 10).await.unwrap().is_empty());
        assert!(db.search_contacts(other.id, "1555", None, 10).await.unwrap().is_empty());
        assert!(db.list_contacts_updated_since(other.id, 0, None, 10).await.unwrap().is_empty());
    },

    update_contact_sets_clears_and_merges => async |db| {
        let org = fixtures::insert_org(&db).await;
        let c = fixtures::insert_contact(&db, org.id, "1555000", T0).await;

        let u = db.update_contact(org.id, c.id, Some(Some("Bea")), Some(&obj(json!({"a": 1}))), T0 + 1)
            .await.unwrap();
        assert_eq!((u.name.as_deref(), &u.custom_fields, u.updated_at), (Some("Bea"), &json!({"a": 1}), T0 + 1));

        // No change: updated_at stays.
        let same = db.update_contact(org.id, c.id, None, Some(&obj(json!({"a": 1, "zz": null}))), T0 + 2)
            .await.unwrap();
        assert_eq!(same, u);
        let same = db.update_contact(org.id, c.id, None, None, T0 + 2).await.unwrap();
        assert_eq!(same, u);

        // Clear the name, leave the fields.
        let cleared = db.update_contact(org.id, c.id, Some(None), None, T0 + 3).await.unwrap();
        assert_eq!((cleared.name, &cleared.custom_fields, cleared.updated_at), (None, &json!({"a": 1}), T0 + 3));

        // A clock behind the stored updated_at still moves it forward.
        let skewed = db.update_contact(org.id, c.id, None, Some(&obj(json!({"a": null}))), T0).await.unwrap();
        assert_eq!((&skewed.custom_fields, skewed.updated_at), (&json!({}), T0 + 4));
        assert_eq!(db.get_contact(org.id, c.id).await.unwrap(), Some(skewed));
    },

    consent_is_recorded_and_never_rolled_back_by_older_decisions => async |db| {
        let org = fixtures::insert_org(&db).await;
        let c = fixtures::insert_contact(&db, org.id, "1555000", T0).await;
        let u = db.set_contact_consent(org.id, c.id, Consent::OptedIn, Some("checkout"), T0 + 5).await.unwrap();
        assert_eq!(u, Contact {
            consent_status: Consent::OptedIn,
            consent_source: Some("checkout".into()),
            consent_updated_at: Some(T0 + 5),
            updated_at: T0 + 5,
            ..c.clone()
        });
        // An older decision arriving late is ignored.
        let late = db.set_contact_consent(org.id, c.id, Consent::OptedOut, Some("keyword"), T0 + 4).await.unwrap();
        assert_eq!(late, u);
        // A newer one applies, also with the same timestamp.
        let out = db.set_contact_consent(org.id, c.id, Consent::OptedOut, None, T0 + 5).await.unwrap();
        assert_eq!(
            (out.consent_status.as_str(), out.consent_source.as_deref(), out.consent_updated_at, out.updated_at),
            ("opted_out", None, Some(T0 + 5), T0 + 6)
        );
    },

    record_inbound_creates_and_is_monotonic => async |db| {
        let org = fixtures::insert_org(&db).await;
        let new_id = Uuid::now_v7();
        let c = db.record_inbound(org.id, &Identity::phone("1555000"), Some("Kim"), T0 - 500, new_id, T0).await.unwrap().contact;
        assert_eq!(c, Contact {
            id: new_id,
            org_id: org.id,
            wa_id: Some("1555000".into()),
            user_id: None,
            parent_user_id: None,
            username: None,
            blocked_at: None,
            name: Some("Kim".into()),
            custom_fields: json!({}),
            consent_status: Consent::Unknown,
            consent_source: None,
            consent_updated_at: None,
            last_inbound_at: Some(T0 - 500),
            created_at: T0,
            updated_at: T0,
            tags: vec![],
        });

        // A late, older webhook changes nothing (not even updated_at); the name is kept.
        let late = db.record_inbound(org.id, &Identity::phone("1555000"), Some("Other"), T0 - 900, Uuid::now_v7(), T0 + 1).await.unwrap().contact;
        assert_eq!(late, c);

        // A newer message moves last_inbound_at forward.
        let newer = db.record_inbound(org.id, &Identity::phone("1555000"), None, T0 + 100, Uuid::now_v7(), T0 + 200).await.unwrap().contact;
        assert_eq!((newer.last_inbound_at, newer.updated_at, newer.name.as_deref()), (Some(T0 + 100), T0 + 200, Some("Kim")));

        // A contact without a name gets the profile name, once.
        let plain = fixtures::insert_contact(&db, org.id, "1555999", T0).await;
        let named = db.record_inbound(org.id, &Identity::phone("1555999"), Some("Lee"), T0 - 10, Uuid::now_v7(), T0 + 5).await.unwrap().contact;
        assert_eq!(named, Contact {
            name: Some("Lee".into()),
            last_inbound_at: Some(T0 - 10),
            updated_at: T0 + 5,
            ..plain
        });
        let blank = db.record_inbound(org.id, &Identity::phone("1555777"), Some("  "), T0, Uuid::now_v7(), T0).await.unwrap().contact;
        assert_eq!(blank.name, None);

        // Out-of-order racing webhooks: one contact, the newest timestamp wins.
        let tasks: Vec<_> = [T0 + 7_000, T0 + 9_000, T0 + 8_000, T0 + 1_000]
            .into_iter()
            .map(|ts| {
                let db = db.clone();
                tokio::spawn(async move {
                    db.record_inbound(org.id, &Identity::phone("4400"), Some("Racer"), ts, Uuid::now_v7(), T0 + 10_000).await.unwrap().contact
                })
            })
            .collect();
        let mut raced = Vec::new();
        for t in tasks {
            raced.push(t.await.unwrap().id);
        }
        raced.dedup();
        assert_eq!(raced.len(), 1);
        let stored = db.get_contact_by_wa_id(org.id, "4400").await.unwrap().unwrap();
        assert_eq!(stored.last_inbound_at, Some(T0 + 9_000));
        assert_eq!(db.count_contacts(org.id).await.unwrap(), 4);
    },

    list_contacts_pages_newest_first => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        // Several share a created_at: the id breaks the tie.
        let mut expected = Vec::new();
        for (i, at) in [T0, T0 + 1, T0 + 1, T0 + 1, T0 + 2, T0, T0 + 3].into_iter().enumerate() {
            let c = fixtures::insert_contact(&db, org.id, &format!("1000{i}"), at).await;
            expected.push((c.created_at, c.id));
        }
        fixtures::insert_contact(&db, other.id, "2000", T0 + 1).await;
        expected.sort_by(|a, b| b.cmp(a));
        let expected: Vec<Uuid> = expected.into_iter().map(|(_, id)| id).collect();

        for size in [1, 2, 3, 7, 10] {
            assert_eq!(all_pages(&db, org.id, size).await, expected, "page size {size}");
        }
        // Boundaries: after the last row nothing; after a tied row the rest of its tie.
        let all = db.list_contacts(org.id, None, 100).await.unwrap();
        let last = all.last().unwrap();
        assert!(db.list_contacts(org.id, Some((last.created_at, last.id)), 10).await.unwrap().is_empty());
        let tied = &all[3]; // second of the three at T0 + 1
        assert_eq!((all[2].created_at, tied.created_at, all[4].created_at), (T0 + 1, T0 + 1, T0 + 1));
        let rest = db.list_contacts(org.id, Some((tied.created_at, tied.id)), 100).await.unwrap();
        assert_eq!(ids(&rest), expected[4..]);
        assert!(db.list_contacts(Uuid::now_v7(), None, 10).await.unwrap().is_empty());
    },

    search_matches_names_and_numbers => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let named = [
            ("15550100", "Ann Smith"),
            ("15550101", "JOANNA"),
            ("15550102", "Bob"),
            ("4420794600", "50%_off"),
            ("4420794601", "50x off"),
            ("4420794602", "Zoë Ünal"),
        ];
        let mut by_name = std::collections::HashMap::new();
        for (i, (wa_id, name)) in named.into_iter().enumerate() {
            let (c, _) = db
                .upsert_contact_by_wa_id(org.id, wa_id, Some(name), None, Uuid::now_v7(), T0 + i as i64)
                .await
                .unwrap();
            by_name.insert(name, c.id);
        }
        let nameless = fixtures::insert_contact(&db, org.id, "15559999", T0 + 10).await;
        db.upsert_contact_by_wa_id(other.id, "15550100", Some("Ann Smith"), None, Uuid::now_v7(), T0)
            .await
            .unwrap();

        let search = |q: &'static str| {
            let db = db.clone();
            async move {
                let found = db.search_contacts(org.id, q, None, 100).await.unwrap();
                assert!(found.iter().all(|c| c.org_id == org.id));
                ids(&found)
            }
        };
        // Case-insensitive partial name match, newest first.
        assert_eq!(search("ann").await, [by_name["JOANNA"], by_name["Ann Smith"]]);
        assert_eq!(search("  SMITH ").await, [by_name["Ann Smith"]]);
        // Wildcards are literal.
        assert_eq!(search("%").await, [by_name["50%_off"]]);
        assert_eq!(search("0%_o").await, [by_name["50%_off"]]);
        assert_eq!(search("_").await, [by_name["50%_off"]]);
        assert_eq!(search("50x").await, [by_name["50x off"]]);
        assert_eq!(search("!").await, Vec::<Uuid>::new());
        // Non-ASCII, same case.
        assert_eq!(search("Zoë").await, [by_name["Zoë Ünal"]]);
        // Phone numbers: digits anywhere in wa_id, with formatting ignored.
        assert_eq!(search("+1 555-0101").await, [by_name["JOANNA"]]);
        assert_eq!(search("5559999").await, [nameless.id]);
        assert_eq!(search("(44) 2079").await.len(), 3);
        // A phone-like query matches names too: two names, three numbers (1555-01xx).
        assert_eq!(search("50").await.len(), 5);
        assert_eq!(search("nobody").await, Vec::<Uuid>::new());
        // Blank: everything.
        assert_eq!(search(" ").await.len(), 7);

        // Paging through search results.
        let first = db.search_contacts(org.id, "555", None, 2).await.unwrap();
        assert_eq!(ids(&first), [nameless.id, by_name["Bob"]]);
        let last = first.last().unwrap();
        let second = db.search_contacts(org.id, "555", Some((last.created_at, last.id)), 2).await.unwrap();
        assert_eq!(ids(&second), [by_name["JOANNA"], by_name["Ann Smith"]]);
        let last = second.last().unwrap();
        assert!(db.search_contacts(org.id, "555", Some((last.created_at, last.id)), 2).await.unwrap().is_empty());
    },

    updated_since_feed_is_complete_and_ordered => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let mut contacts = Vec::new();
        for (i, at) in [T0, T0 + 5, T0 + 5, T0 + 5, T0 + 9].into_iter().enumerate() {
            contacts.push(fixtures::insert_contact(&db, org.id, &format!("77{i}"), at).await);
        }
        fixtures::insert_contact(&db, other.id, "77", T0 + 6).await;
        let mut expected: Vec<(i64, Uuid)> = contacts.iter().map(|c| (c.updated_at, c.id)).collect();
        expected.sort();

        // Strictly after `since`.
        assert_eq!(sync_pages(&db, org.id, T0 - 1, 100).await, expected);
        assert_eq!(sync_pages(&db, org.id, T0, 100).await, expected[1..]);
        assert_eq!(sync_pages(&db, org.id, T0 + 5, 100).await, expected[4..]);
        assert!(sync_pages(&db, org.id, T0 + 9, 100).await.is_empty());
        // Page boundaries inside a run of equal timestamps neither skip nor repeat.
        for size in [1, 2, 3] {
            assert_eq!(sync_pages(&db, org.id, T0 - 1, size).await, expected, "page size {size}");
        }

        // Every kind of change moves a contact to the end of the feed.
        let a = db.set_contact_consent(org.id, contacts[0].id, Consent::OptedIn, None, T0 + 20).await.unwrap();
        let b = db.add_contact_tags(org.id, contacts[1].id, &["x".to_owned()], T0 + 21).await.unwrap();
        let c = db.record_inbound(org.id, &Identity::phone(contacts[2].wa_id.as_deref().unwrap()), None, T0, Uuid::now_v7(), T0 + 22).await.unwrap().contact;
        let d = db.update_contact(org.id, contacts[3].id, Some(Some("D")), None, T0 + 23).await.unwrap();
        let e = db.remove_contact_tag(org.id, contacts[1].id, "x", T0 + 24).await.unwrap();
        assert_eq!(
            sync_pages(&db, org.id, T0 + 9, 2).await,
            [(a.updated_at, a.id), (c.updated_at, c.id), (d.updated_at, d.id), (e.updated_at, e.id)]
        );
        assert_eq!(b.updated_at, T0 + 21);
        assert_eq!(e.updated_at, T0 + 24);
    },
}
