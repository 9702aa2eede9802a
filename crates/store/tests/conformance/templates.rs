use crate::fixtures::{self, T0};
use serde_json::json;
use tern_domain::template::{Category, TemplateStatus};
use tern_store::{StoreError, Template};
use uuid::Uuid;

fn template(org_id: Uuid, name: &str, language: &str, status: &str, at: i64) -> Template {
    Template {
        id: Uuid::now_v7(),
        org_id,
        waba_id: "waba-1".into(),
        name: name.into(),
        language: language.into(),
        category: "utility".parse().unwrap(),
        status: status.parse().unwrap(),
        components: json!([{"type": "BODY", "text": "Order {{1}} shipped"}]),
        rejection_reason: None,
        network_id: None,
        created_at: at,
        updated_at: at,
    }
}

fn ids(templates: &[Template]) -> Vec<Uuid> {
    templates.iter().map(|t| t.id).collect()
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    template_roundtrip_conflicts_and_isolation => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let t = template(org.id, "order_shipped", "en_US", "draft", T0);
        db.insert_template(&t).await.unwrap();
        assert_eq!(db.get_template(org.id, t.id).await.unwrap(), Some(t.clone()));
        assert_eq!(db.get_template(other.id, t.id).await.unwrap(), None);
        assert_eq!(db.get_template(org.id, Uuid::now_v7()).await.unwrap(), None);

        let err = db.insert_template(&template(org.id, "order_shipped", "en_US", "draft", T0)).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "templates_org_id_waba_id_name_language_key"), "{err:?}");
        let err = db.insert_template(&Template { name: "x".into(), ..t.clone() }).await.unwrap_err();
        assert!(matches!(&err, StoreError::Conflict { constraint } if constraint == "templates_pkey"), "{err:?}");
        // Another language, another WABA, another organisation: all fine.
        db.insert_template(&template(org.id, "order_shipped", "fr", "draft", T0)).await.unwrap();
        db.insert_template(&Template { waba_id: "waba-2".into(), ..template(org.id, "order_shipped", "en_US", "draft", T0) })
            .await.unwrap();
        db.insert_template(&template(other.id, "order_shipped", "en_US", "draft", T0)).await.unwrap();

        assert_eq!(db.count_templates(org.id).await.unwrap(), 3);
        assert_eq!(db.count_templates(other.id).await.unwrap(), 1);
        assert_eq!(db.count_templates(Uuid::now_v7()).await.unwrap(), 0);
    },

    list_templates_filters_and_pages => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let rows = [
            ("a", "en_US", "approved", T0),
            ("b", "en_US", "draft", T0 + 1),
            ("c", "fr", "approved", T0 + 1),
            ("d", "en_US", "approved", T0 + 1),
            ("e", "fr", "rejected", T0 + 2),
        ];
        let mut all = Vec::new();
        for (name, language, status, at) in rows {
            let t = template(org.id, name, language, status, at);
            db.insert_template(&t).await.unwrap();
            all.push(t);
        }
        db.insert_template(&template(other.id, "a", "en_US", "approved", T0 + 5)).await.unwrap();
        all.sort_by_key(|t| std::cmp::Reverse((t.created_at, t.id)));

        assert_eq!(db.list_templates(org.id, None, None, None, 100).await.unwrap(), all);
        for size in [1, 2, 4] {
            let mut seen = Vec::new();
            let mut after = None;
            loop {
                let page = db.list_templates(org.id, None, None, after, size).await.unwrap();
                seen.extend(ids(&page));
                match page.last() {
                    Some(last) if page.len() == size as usize => after = Some((last.created_at, last.id)),
                    _ => break,
                }
            }
            assert_eq!(seen, ids(&all), "page size {size}");
        }
        let filtered = |status: Option<TemplateStatus>, language: Option<&'static str>| {
            let db = db.clone();
            async move {
                let page = db.list_templates(org.id, status, language, None, 100).await.unwrap();
                assert!(page.iter().all(|t| t.org_id == org.id));
                page.into_iter().map(|t| t.name).collect::<Vec<_>>()
            }
        };
        let approved = filtered(Some(TemplateStatus::Approved), None).await;
        assert_eq!(approved.len(), 3);
        assert_eq!(approved.last().map(String::as_str), Some("a"));
        assert_eq!(filtered(None, Some("fr")).await, ["e", "c"]);
        assert_eq!(filtered(Some(TemplateStatus::Approved), Some("fr")).await, ["c"]);
        assert!(filtered(Some(TemplateStatus::Paused), None).await.is_empty());

        // Paging within a filter.
        let first = db.list_templates(org.id, Some(TemplateStatus::Approved), None, None, 2).await.unwrap();
        let last = first.last().unwrap();
        let rest = db.list_templates(org.id, Some(TemplateStatus::Approved), None, Some((last.created_at, last.id)), 2).await.unwrap();
        assert_eq!(rest.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a"]);
        assert!(db.list_templates(Uuid::now_v7(), None, None, None, 10).await.unwrap().is_empty());
    },

    submit_then_status_webhooks => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let t = Template { rejection_reason: Some("old".into()), ..template(org.id, "promo", "en_US", "draft", T0) };
        db.insert_template(&t).await.unwrap();

        let err = db.set_template_submitted(other.id, t.id, "net-1", TemplateStatus::Pending, T0 + 1).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
        let submitted = db.set_template_submitted(org.id, t.id, "net-1", TemplateStatus::Pending, T0 + 1).await.unwrap();
        assert_eq!(submitted, Template {
            status: "pending".parse().unwrap(),
            network_id: Some("net-1".into()),
            rejection_reason: None,
            updated_at: T0 + 1,
            ..t.clone()
        });

        // By network id.
        let changed = db.apply_template_status("waba-1", Some("net-1"), "promo", Some("en_US"), TemplateStatus::Rejected, Some("INVALID_FORMAT"), T0 + 2)
            .await.unwrap();
        assert_eq!(changed, vec![Template {
            status: "rejected".parse().unwrap(),
            rejection_reason: Some("INVALID_FORMAT".into()),
            updated_at: T0 + 2,
            ..submitted.clone()
        }]);
        // The same event again changes nothing.
        assert!(db.apply_template_status("waba-1", Some("net-1"), "promo", Some("en_US"), TemplateStatus::Rejected, Some("INVALID_FORMAT"), T0 + 3)
            .await.unwrap().is_empty());
        // Another WABA's id does not match.
        assert!(db.apply_template_status("waba-9", Some("net-1"), "promo", None, TemplateStatus::Approved, None, T0 + 3)
            .await.unwrap().is_empty());
        // Known id: the name is not used to match rows that have another id.
        assert!(db.apply_template_status("waba-1", Some("net-other"), "promo", Some("en_US"), TemplateStatus::Approved, None, T0 + 3)
            .await.unwrap().is_empty());

        // Resubmission after a rejection; the webhook approves it.
        db.set_template_submitted(org.id, t.id, "net-1", TemplateStatus::Pending, T0 + 4).await.unwrap();
        let approved = db.apply_template_status("waba-1", Some("net-1"), "ignored-name", None, TemplateStatus::Approved, None, T0 + 5)
            .await.unwrap();
        assert_eq!(approved.len(), 1);
        assert_eq!((approved[0].status.as_str(), approved[0].rejection_reason.as_deref()), ("approved", None));
        assert_eq!(db.find_approved_template(org.id, "waba-1", "promo", "en_US").await.unwrap(), Some(approved[0].clone()));
        assert_eq!(db.find_approved_template(other.id, "waba-1", "promo", "en_US").await.unwrap(), None);
        assert_eq!(db.find_approved_template(org.id, "waba-1", "promo", "fr").await.unwrap(), None);
        assert_eq!(db.find_approved_template(org.id, "waba-2", "promo", "en_US").await.unwrap(), None);

        // Paused: no longer approved.
        db.apply_template_status("waba-1", Some("net-1"), "promo", None, TemplateStatus::Paused, None, T0 + 6).await.unwrap();
        assert_eq!(db.find_approved_template(org.id, "waba-1", "promo", "en_US").await.unwrap(), None);
        let err = db.set_template_submitted(org.id, Uuid::now_v7(), "n", TemplateStatus::Pending, T0).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
    },

    category_updates_follow_the_network => async |db| {
        let org = fixtures::insert_org(&db).await;
        let en = template(org.id, "promo", "en_US", "approved", T0);
        let fr = template(org.id, "promo", "fr", "approved", T0);
        db.insert_template(&en).await.unwrap();
        db.insert_template(&fr).await.unwrap();
        db.set_template_submitted(org.id, en.id, "net-en", TemplateStatus::Approved, T0 + 1).await.unwrap();
        let changed = db.apply_template_category("waba-1", Some("net-en"), Some("promo"), Some("en_US"), Category::Marketing, T0 + 2).await.unwrap();
        assert_eq!(ids(&changed), [en.id]);
        assert_eq!((changed[0].category, changed[0].updated_at), (Category::Marketing, T0 + 2));
        // Again: nothing to change.
        assert!(db.apply_template_category("waba-1", Some("net-en"), None, None, Category::Marketing, T0 + 3).await.unwrap().is_empty());
        // By name and language where no id is recorded; another WABA never matches.
        assert!(db.apply_template_category("waba-9", None, Some("promo"), Some("fr"), Category::Marketing, T0 + 3).await.unwrap().is_empty());
        let changed = db.apply_template_category("waba-1", None, Some("promo"), Some("fr"), Category::Authentication, T0 + 4).await.unwrap();
        assert_eq!(ids(&changed), [fr.id]);
        assert_eq!(db.find_approved_template(org.id, "waba-1", "promo", "fr").await.unwrap().unwrap().category, Category::Authentication);
    },

    status_webhook_can_beat_the_submit_answer => async |db| {
        let org = fixtures::insert_org(&db).await;
        let en = template(org.id, "promo", "en_US", "draft", T0);
        let fr = template(org.id, "promo", "fr", "draft", T0);
        db.insert_template(&en).await.unwrap();
        db.insert_template(&fr).await.unwrap();

        // The webhook (with the network's id) arrives before set_template_submitted.
        let changed = db.apply_template_status("waba-1", Some("net-en"), "promo", Some("en_US"), TemplateStatus::Approved, None, T0 + 1)
            .await.unwrap();
        assert_eq!(ids(&changed), [en.id]);
        assert_eq!(changed[0].network_id.as_deref(), Some("net-en"));
        // The late submit answer records the id but keeps the newer status.
        let submitted = db.set_template_submitted(org.id, en.id, "net-en", TemplateStatus::Pending, T0 + 2).await.unwrap();
        assert_eq!((submitted.status.as_str(), submitted.network_id.as_deref()), ("approved", Some("net-en")));

        // Without a network id: by name, every language unless one is given.
        let changed = db.apply_template_status("waba-1", None, "promo", Some("fr"), TemplateStatus::Pending, None, T0 + 3).await.unwrap();
        assert_eq!(ids(&changed), [fr.id]);
        let mut changed = db.apply_template_status("waba-1", None, "promo", None, TemplateStatus::Disabled, Some("POLICY"), T0 + 4).await.unwrap();
        changed.sort_by_key(|t| t.language.clone());
        assert_eq!(ids(&changed), [en.id, fr.id]);
        assert!(changed.iter().all(|t| t.status == TemplateStatus::Disabled && t.rejection_reason.as_deref() == Some("POLICY") && t.updated_at == T0 + 4));
        assert!(db.apply_template_status("waba-1", None, "unknown", None, TemplateStatus::Approved, None, T0 + 5).await.unwrap().is_empty());
    },

    synced_templates_upsert => async |db| {
        let org = fixtures::insert_org(&db).await;
        let other = fixtures::insert_org(&db).await;
        let components = json!([{"type": "BODY", "text": "Hi {{1}}"}]);
        let id = Uuid::now_v7();
        let (t, created) = db.upsert_synced_template(
            org.id, "waba-1", "welcome", "en", Category::Marketing, TemplateStatus::Approved, &components, Some("net-7"), None, id, T0,
        ).await.unwrap();
        assert!(created);
        assert_eq!(t, Template {
            id,
            org_id: org.id,
            waba_id: "waba-1".into(),
            name: "welcome".into(),
            language: "en".into(),
            category: "marketing".parse().unwrap(),
            status: "approved".parse().unwrap(),
            components: components.clone(),
            rejection_reason: None,
            network_id: Some("net-7".into()),
            created_at: T0,
            updated_at: T0,
        });
        assert_eq!(db.find_approved_template(org.id, "waba-1", "welcome", "en").await.unwrap(), Some(t.clone()));

        // The same data again: unchanged row, updated_at kept.
        let (same, created) = db.upsert_synced_template(
            org.id, "waba-1", "welcome", "en", Category::Marketing, TemplateStatus::Approved, &components, Some("net-7"), None, Uuid::now_v7(), T0 + 1,
        ).await.unwrap();
        assert!(!created);
        assert_eq!(same, t);
        // Without an id the stored one is kept, and nothing changed.
        let (same, _) = db.upsert_synced_template(
            org.id, "waba-1", "welcome", "en", Category::Marketing, TemplateStatus::Approved, &components, None, None, Uuid::now_v7(), T0 + 1,
        ).await.unwrap();
        assert_eq!(same, t);

        // Changed upstream.
        let new_components = json!([{"type": "BODY", "text": "Hello {{1}}"}]);
        let (changed, created) = db.upsert_synced_template(
            org.id, "waba-1", "welcome", "en", Category::Utility, TemplateStatus::Rejected, &new_components, Some("net-7"), Some("TAG_CONTENT_MISMATCH"), Uuid::now_v7(), T0 + 2,
        ).await.unwrap();
        assert!(!created);
        assert_eq!(changed, Template {
            category: "utility".parse().unwrap(),
            status: "rejected".parse().unwrap(),
            components: new_components,
            rejection_reason: Some("TAG_CONTENT_MISMATCH".into()),
            updated_at: T0 + 2,
            ..t.clone()
        });
        assert_eq!(db.find_approved_template(org.id, "waba-1", "welcome", "en").await.unwrap(), None);

        // Another organisation syncing the same WABA gets its own row.
        let (theirs, created) = db.upsert_synced_template(
            other.id, "waba-1", "welcome", "en", Category::Marketing, TemplateStatus::Approved, &components, Some("net-7"), None, Uuid::now_v7(), T0,
        ).await.unwrap();
        assert!(created);
        assert_ne!(theirs.id, t.id);
        assert_eq!(db.count_templates(org.id).await.unwrap(), 1);
        // A network status for that WABA reaches both organisations' rows.
        let changed = db.apply_template_status("waba-1", Some("net-7"), "welcome", Some("en"), TemplateStatus::Paused, None, T0 + 3).await.unwrap();
        assert_eq!(changed.len(), 2);
    },
}
