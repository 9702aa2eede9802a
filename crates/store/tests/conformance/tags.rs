use crate::fixtures::{self, T0};
use tern_store::StoreError;
use uuid::Uuid;

fn strings(tags: &[&str]) -> Vec<String> {
    tags.iter().map(|t| (*t).to_owned()).collect()
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    add_tags_is_idempotent_and_sorted => async |db| {
        let org = fixtures::insert_org(&db).await;
        let c = fixtures::insert_contact(&db, org.id, "1555000", T0).await;

        let tagged = db.add_contact_tags(org.id, c.id, &strings(&["vip", "Beta", "vip", "a_b"]), T0 + 1)
            .await.unwrap();
        assert_eq!(tagged.tags, ["Beta", "a_b", "vip"]);
        assert_eq!(tagged.updated_at, T0 + 1);

        // Nothing new: no change, updated_at stays.
        let same = db.add_contact_tags(org.id, c.id, &strings(&["vip"]), T0 + 2).await.unwrap();
        assert_eq!(same, tagged);
        let same = db.add_contact_tags(org.id, c.id, &[], T0 + 2).await.unwrap();
        assert_eq!(same, tagged);

        let more = db.add_contact_tags(org.id, c.id, &strings(&["vip", "new"]), T0 + 3).await.unwrap();
        assert_eq!((more.tags.clone(), more.updated_at), (strings(&["Beta", "a_b", "new", "vip"]), T0 + 3));

        // Tags come with every read.
        assert_eq!(db.get_contact(org.id, c.id).await.unwrap().unwrap().tags, more.tags);
        assert_eq!(db.get_contact_by_wa_id(org.id, "1555000").await.unwrap().unwrap().tags, more.tags);
        let plain = fixtures::insert_contact(&db, org.id, "1555001", T0).await;
        let listed = db.list_contacts(org.id, None, 10).await.unwrap();
        assert_eq!(listed.len(), 2);
        for contact in listed {
            let expected = if contact.id == c.id { more.tags.clone() } else { vec![] };
            assert_eq!(contact.tags, expected);
        }
        assert!(plain.tags.is_empty());
        assert_eq!(db.search_contacts(org.id, "1555000", None, 10).await.unwrap()[0].tags, more.tags);
    },

    tags_of_missing_or_foreign_contacts_are_not_found => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let c = fixtures::insert_contact(&db, org.id, "1555000", T0).await;
        let tagged = db.add_contact_tags(org.id, c.id, &strings(&["keep"]), T0).await.unwrap();
        assert_eq!(tagged.updated_at, T0 + 1); // same clock as the creation: still moves

        for (org_id, contact_id) in [(other.id, c.id), (org.id, Uuid::now_v7())] {
            let err = db.add_contact_tags(org_id, contact_id, &strings(&["x"]), T0 + 1).await.unwrap_err();
            assert!(matches!(err, StoreError::NotFound), "{err:?}");
            let err = db.remove_contact_tag(org_id, contact_id, "keep", T0 + 1).await.unwrap_err();
            assert!(matches!(err, StoreError::NotFound), "{err:?}");
        }
        let stored = db.get_contact(org.id, c.id).await.unwrap().unwrap();
        assert_eq!(stored, tagged);
        assert!(db.list_tags(other.id, None, 10).await.unwrap().is_empty());
    },

    remove_tag_and_absent_tag_is_a_no_op => async |db| {
        let org = fixtures::insert_org(&db).await;
        let c = fixtures::insert_contact(&db, org.id, "1555000", T0).await;
        db.add_contact_tags(org.id, c.id, &strings(&["a", "b"]), T0 + 1).await.unwrap();

        let removed = db.remove_contact_tag(org.id, c.id, "a", T0 + 2).await.unwrap();
        assert_eq!((removed.tags.clone(), removed.updated_at), (strings(&["b"]), T0 + 2));
        let same = db.remove_contact_tag(org.id, c.id, "a", T0 + 3).await.unwrap();
        assert_eq!(same, removed);
        let same = db.remove_contact_tag(org.id, c.id, "B", T0 + 3).await.unwrap();
        assert_eq!(same, removed);
    },

    racing_tag_writes_keep_every_tag => async |db| {
        let org = fixtures::insert_org(&db).await;
        let c = fixtures::insert_contact(&db, org.id, "1555000", T0).await;
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                let db = db.clone();
                tokio::spawn(async move {
                    db.add_contact_tags(org.id, c.id, &[format!("t{i}"), "shared".to_owned()], T0 + 1)
                        .await
                        .unwrap()
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let stored = db.get_contact(org.id, c.id).await.unwrap().unwrap();
        assert_eq!(stored.tags, ["shared", "t0", "t1", "t2", "t3", "t4", "t5"]);
        // Each write that added something moved updated_at past the previous one.
        assert_eq!(stored.updated_at, T0 + 6);
        assert_eq!(db.list_tags(org.id, None, 10).await.unwrap()[0], ("shared".to_owned(), 1));
    },

    list_tags_counts_and_pages_bytewise => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let a = fixtures::insert_contact(&db, org.id, "1", T0).await;
        let b = fixtures::insert_contact(&db, org.id, "2", T0).await;
        let c = fixtures::insert_contact(&db, org.id, "3", T0).await;
        let x = fixtures::insert_contact(&db, other.id, "1", T0).await;
        db.add_contact_tags(org.id, a.id, &strings(&["vip", "B", "a_b"]), T0).await.unwrap();
        db.add_contact_tags(org.id, b.id, &strings(&["vip", "ab"]), T0).await.unwrap();
        db.add_contact_tags(org.id, c.id, &strings(&["vip", "a_b", "Zed"]), T0).await.unwrap();
        db.add_contact_tags(other.id, x.id, &strings(&["vip", "A", "secret"]), T0).await.unwrap();

        let expected: Vec<(String, i64)> = [("B", 1), ("Zed", 1), ("a_b", 2), ("ab", 1), ("vip", 3)]
            .into_iter()
            .map(|(t, n)| (t.to_owned(), n))
            .collect();
        assert_eq!(db.list_tags(org.id, None, 100).await.unwrap(), expected);

        let mut seen = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = db.list_tags(org.id, after.as_deref(), 2).await.unwrap();
            seen.extend(page.iter().cloned());
            if page.len() < 2 {
                break;
            }
            after = page.last().map(|(t, _)| t.clone());
        }
        assert_eq!(seen, expected);
        assert_eq!(db.list_tags(org.id, Some("Zed"), 2).await.unwrap(), expected[2..4]);
        assert!(db.list_tags(org.id, Some("vip"), 2).await.unwrap().is_empty());
        assert!(db.list_tags(Uuid::now_v7(), None, 10).await.unwrap().is_empty());

        // Removing the last holder removes the tag from the list.
        db.remove_contact_tag(org.id, b.id, "ab", T0 + 1).await.unwrap();
        let tags: Vec<String> = db.list_tags(org.id, None, 100).await.unwrap().into_iter().map(|(t, _)| t).collect();
        assert_eq!(tags, ["B", "Zed", "a_b", "vip"]);
    },
}
