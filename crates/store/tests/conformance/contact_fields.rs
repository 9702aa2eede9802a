use crate::fixtures::{self, T0};
use tern_store::{ContactField, StoreError};
use uuid::Uuid;

fn field(org_id: Uuid, key: &str) -> ContactField {
    ContactField {
        id: Uuid::now_v7(),
        org_id,
        key: key.into(),
        label: format!("Label {key}"),
        field_type: "text".into(),
        created_at: T0,
    }
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    contact_field_duplicate_key_conflicts => async |db| {
        let org = fixtures::insert_org(&db).await;
        let f = field(org.id, "city");
        db.insert_contact_field(&f).await.unwrap();
        let err = db.insert_contact_field(&field(org.id, "city")).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "contact_fields_org_id_key_key"), "{err:?}");
        // Keys are per organisation.
        let other = fixtures::insert_org(&db).await;
        db.insert_contact_field(&field(other.id, "city")).await.unwrap();
        assert_eq!(db.list_contact_fields(org.id, None, 10).await.unwrap(), vec![f]);
    },

    contact_fields_keyset_pages => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let mut expected = Vec::new();
        for key in ["zip", "Age", "city", "b_2", "b2"] {
            let f = field(org.id, key);
            db.insert_contact_field(&f).await.unwrap();
            expected.push(f);
        }
        db.insert_contact_field(&field(other.id, "aaa")).await.unwrap();
        expected.sort_by(|a, b| a.key.cmp(&b.key)); // byte order on both backends

        let first = db.list_contact_fields(org.id, None, 2).await.unwrap();
        assert_eq!(first, expected[..2]);
        let second = db.list_contact_fields(org.id, Some(&first[1].key), 2).await.unwrap();
        assert_eq!(second, expected[2..4]);
        let third = db.list_contact_fields(org.id, Some(&second[1].key), 2).await.unwrap();
        assert_eq!(third, expected[4..]);
        assert!(db.list_contact_fields(org.id, Some("zip"), 2).await.unwrap().is_empty());
    },
}
