//! The inbox's rules for what follows a message: statuses, a customer's edits and
//! deletions, a new BSUID or phone, template updates, and the events of each change.

use super::*;

// --- Statuses ---

async fn statuses_move_a_message_sent_delivered_read_each_with_its_time(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["message.status"]).await;
    let t0 = network_time(60_000);
    let m = sent_message(&db, &org, Some("wamid.S"), t0).await;
    let r = deliver(
        &db,
        &statuses(vec![status("wamid.S", "delivered", t0 + 10_000)]),
    )
    .await;
    assert_eq!(r.statuses_applied, 1);
    let got = message(&db, &org, m.id).await;
    assert_eq!(
        (got.status, got.delivered_at),
        (Status::Delivered, Some(t0 + 10_000))
    );
    deliver(&db, &statuses(vec![status("wamid.S", "read", t0 + 20_000)])).await;
    let got = message(&db, &org, m.id).await;
    assert_eq!(
        (got.status, got.sent_at, got.delivered_at, got.read_at),
        (Status::Read, Some(t0), Some(t0 + 10_000), Some(t0 + 20_000))
    );
    // One event per step, its data the message as it then was.
    assert_eq!(reported(&events(&db).await), ["delivered", "read"]);
}

async fn a_delivered_after_read_fills_its_time_and_never_moves_the_message_back(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["message.status"]).await;
    let t0 = network_time(60_000);
    let m = sent_message(&db, &org, Some("wamid.S"), t0).await;
    deliver(&db, &statuses(vec![status("wamid.S", "read", t0 + 20_000)])).await;
    deliver(
        &db,
        &statuses(vec![status("wamid.S", "delivered", t0 + 10_000)]),
    )
    .await;
    let got = message(&db, &org, m.id).await;
    assert_eq!(
        (got.status, got.delivered_at, got.read_at),
        (Status::Read, Some(t0 + 10_000), Some(t0 + 20_000))
    );
    // The late report is no new status: no event for it.
    assert_eq!(reported(&events(&db).await), ["read"]);
}

async fn a_failed_status_maps_the_network_code_to_terns_failure(db: Db) {
    let org = org(&db).await;
    let t0 = network_time(60_000);
    // (network code, title, Tern's failure code)
    let cases = [
        (131026, "Message undeliverable", "recipient_not_on_whatsapp"),
        (131047, "Re-engagement message", "window_expired"),
        (
            131049,
            "This message was not delivered",
            "ecosystem_limited",
        ),
        (
            131062,
            "BSUID recipients are not supported for this message",
            "phone_number_required",
        ),
        (
            131050,
            "Unable to deliver the message",
            "marketing_opted_out",
        ),
        (999_999, "Something new", "network_error"),
    ];
    for (code, title, tern) in cases {
        let wamid = format!("wamid.F{code}");
        let m = sent_message(&db, &org, Some(&wamid), t0).await;
        let mut s = status(&wamid, "failed", t0 + 5_000);
        s["errors"] = json!([{"code": code, "title": title,
            "href": "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"}]);
        deliver(&db, &statuses(vec![s])).await;
        let got = message(&db, &org, m.id).await;
        assert_eq!(
            (got.status, got.failed_at, got.failure_code.as_deref()),
            (Status::Failed, Some(t0 + 5_000), Some(tern)),
            "{code}"
        );
        let f: Failure = got.failure.unwrap();
        let f = serde_json::to_value(f).unwrap();
        assert_eq!(
            (&f["code"], &f["provider_code"], &f["provider_message"]),
            (&json!(tern), &json!(code.to_string()), &json!(title)),
            "{code}"
        );
        assert!(f["provider_href"].as_str().unwrap().starts_with("https://"));
    }
}

async fn a_failed_message_stays_failed_when_a_later_report_arrives(db: Db) {
    let org = org(&db).await;
    let t0 = network_time(60_000);
    let m = sent_message(&db, &org, Some("wamid.F"), t0).await;
    let mut failed = status("wamid.F", "failed", t0 + 5_000);
    failed["errors"] = json!([{"code": 131026, "title": "Message undeliverable"}]);
    deliver(&db, &statuses(vec![failed])).await;
    deliver(&db, &statuses(vec![status("wamid.F", "read", t0 + 6_000)])).await;
    assert_eq!(message(&db, &org, m.id).await.status, Status::Failed);
}

async fn a_status_for_an_unknown_message_is_ignored_and_creates_nothing(db: Db) {
    let org = org(&db).await;
    let r = deliver(
        &db,
        &statuses(vec![status("wamid.NOPE", "delivered", network_time(0))]),
    )
    .await;
    assert_eq!((r.statuses_applied, r.statuses_ignored), (0, 1));
    // Statuses never create contacts, and the batch is done (not retried).
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 0);
    assert_eq!(db.count_unprocessed_inbox().await.unwrap(), 0);
}

async fn a_status_finds_its_message_by_terns_id_when_the_send_answer_was_lost(db: Db) {
    let org = org(&db).await;
    let t0 = network_time(60_000);
    let m = sent_message(&db, &org, None, t0).await;
    let mut s = status("wamid.LOST", "delivered", t0 + 1_000);
    s["biz_opaque_callback_data"] = json!(m.id.to_string());
    assert_eq!(deliver(&db, &statuses(vec![s])).await.statuses_applied, 1);
    let got = message(&db, &org, m.id).await;
    assert_eq!(
        (got.status, got.wamid.as_deref()),
        (Status::Delivered, Some("wamid.LOST"))
    );
}

async fn an_unknown_status_value_is_ignored(db: Db) {
    let org = org(&db).await;
    let t0 = network_time(60_000);
    let m = sent_message(&db, &org, Some("wamid.S"), t0).await;
    let r = deliver(
        &db,
        &statuses(vec![status("wamid.S", "deleted_somehow", t0 + 1_000)]),
    )
    .await;
    assert_eq!((r.statuses_applied, r.statuses_ignored), (0, 1));
    assert_eq!(message(&db, &org, m.id).await.status, Status::Sent);
}

// --- Edits and deletions ---

async fn an_edit_replaces_the_text_and_content_of_the_original(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["message.updated"]).await;
    let t = network_time(60_000);
    let original = wamid();
    deliver(&db, &text(ANN, &original, t, "helo")).await;
    let r = deliver(&db, &edit(ANN, &original, t + 5_000, "hello")).await;
    assert_eq!((r.messages_updated, r.inbound_stored), (1, 0));
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    let got = inbound(&db, &org, &c).await;
    assert_eq!(got.len(), 1, "an edit is not a second message");
    assert_eq!(
        (
            got[0].wamid.as_deref(),
            got[0].text.as_deref(),
            got[0].edited_at
        ),
        (Some(original.as_str()), Some("hello"), Some(t + 5_000))
    );
    assert_eq!(got[0].content, Some(json!({"body": "hello"})));
    let evs = events(&db).await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(
        (evs[0].0.as_str(), &evs[0].1["text"]),
        ("message.updated", &json!("hello"))
    );
}

async fn an_edit_older_than_the_one_applied_changes_nothing(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["message.updated"]).await;
    let t = network_time(60_000);
    let original = wamid();
    deliver(&db, &text(ANN, &original, t, "v0")).await;
    deliver(&db, &edit(ANN, &original, t + 20_000, "v2")).await;
    deliver(&db, &edit(ANN, &original, t + 10_000, "v1")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    let got = &inbound(&db, &org, &c).await[0];
    assert_eq!(
        (got.text.as_deref(), got.edited_at),
        (Some("v2"), Some(t + 20_000))
    );
    assert_eq!(event_types(&db).await, ["message.updated"]);
}

async fn a_revoke_clears_the_message_and_a_later_edit_changes_nothing(db: Db) {
    let org = org(&db).await;
    let t = network_time(60_000);
    let original = wamid();
    deliver(&db, &text(ANN, &original, t, "oops")).await;
    let r = deliver(&db, &revoke(ANN, &original, t + 5_000)).await;
    assert_eq!(r.messages_updated, 1);
    deliver(&db, &edit(ANN, &original, t + 9_000, "back")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    let got = inbound(&db, &org, &c).await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        (
            got[0].text.as_deref(),
            got[0].content.as_ref(),
            got[0].revoked_at,
            got[0].edited_at
        ),
        (None, None, Some(t + 5_000), None)
    );
}

async fn an_edit_before_its_original_makes_one_message_that_the_original_completes(db: Db) {
    let org = org(&db).await;
    let t = network_time(60_000);
    let original = wamid();
    let r = deliver(&db, &edit(ANN, &original, t + 5_000, "edited")).await;
    assert_eq!(r.inbound_stored, 1, "created under the original's wamid");
    deliver(&db, &text(ANN, &original, t, "first")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    let got = inbound(&db, &org, &c).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        (
            got[0].wamid.as_deref(),
            got[0].text.as_deref(),
            got[0].created_at,
            got[0].edited_at
        ),
        (Some(original.as_str()), Some("edited"), t, Some(t + 5_000))
    );
}

async fn a_revoke_before_its_original_keeps_the_message_deleted(db: Db) {
    let org = org(&db).await;
    let t = network_time(60_000);
    let original = wamid();
    deliver(&db, &revoke(ANN, &original, t + 5_000)).await;
    deliver(&db, &text(ANN, &original, t, "secret")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    let got = inbound(&db, &org, &c).await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        (
            got[0].text.as_deref(),
            got[0].revoked_at,
            got[0].r#type.as_str()
        ),
        (None, Some(t + 5_000), "text")
    );
}

// --- A customer's new BSUID or phone ---

/// The network's `user_changed_user_id` notice: no `from`, no `contacts`.
fn bsuid_changed(previous: &str, current: &str, at: i64) -> Value {
    notification(
        json!([]),
        json!([{"id": wamid(), "timestamp": secs(at), "type": "system",
            "system": {"body": format!("User changed from {previous} to {current}"),
                       "user_id": current, "previous_user_id": previous,
                       "type": "user_changed_user_id"}}]),
        json!([]),
    )
}

/// The network's `user_changed_number` notice: the old phone in `from`.
fn number_changed(previous: &str, current: &str, at: i64) -> Value {
    notification(
        json!([]),
        json!([{"from": previous, "id": wamid(), "timestamp": secs(at), "type": "system",
            "system": {"body": format!("User A changed from {previous} to {current}"),
                       "wa_id": current, "type": "user_changed_number"}}]),
        json!([]),
    )
}

async fn user_changed_user_id_moves_the_contact_to_the_new_bsuid(db: Db) {
    let org = org(&db).await;
    let by_id = Who {
        phone: None,
        bsuid: Some(BSUID),
        ..ANN
    };
    deliver(&db, &text(by_id, &wamid(), network_time(60_000), "before")).await;
    let before = contact(&db, &org, ContactKey::UserId(BSUID)).await;
    let r = deliver(&db, &bsuid_changed(BSUID, BSUID2, network_time(0))).await;
    assert_eq!(r.contacts_updated, 1, "{r:?}");
    let after = contact(&db, &org, ContactKey::UserId(BSUID2)).await;
    assert_eq!(after.id, before.id);
    assert!(
        db.get_contact_by_key(org.id, ContactKey::UserId(BSUID))
            .await
            .unwrap()
            .is_none(),
        "the old BSUID names no one"
    );
    // The customer's next message is theirs under the new BSUID.
    let moved = Who {
        bsuid: Some(BSUID2),
        ..by_id
    };
    deliver(&db, &text(moved, &wamid(), network_time(0), "after")).await;
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
}

async fn a_new_bsuid_already_held_merges_the_two_contacts_into_the_older(db: Db) {
    let org = org(&db).await;
    let old = Who {
        bsuid: Some(BSUID),
        ..ANN
    };
    deliver(&db, &text(old, &wamid(), network_time(60_000), "old id")).await;
    let first = contact(&db, &org, ContactKey::UserId(BSUID)).await;
    // The customer writes under the new BSUID before the notice arrives.
    let new = Who {
        phone: None,
        bsuid: Some(BSUID2),
        ..ANN
    };
    deliver(&db, &text(new, &wamid(), network_time(30_000), "new id")).await;
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 2);
    deliver(&db, &bsuid_changed(BSUID, BSUID2, network_time(0))).await;
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
    let c = contact(&db, &org, ContactKey::UserId(BSUID2)).await;
    assert_eq!((c.id, c.wa_id.as_deref()), (first.id, Some(PHONE)));
    let texts: Vec<_> = inbound(&db, &org, &c)
        .await
        .into_iter()
        .filter_map(|m| m.text)
        .collect();
    assert_eq!(texts, ["new id", "old id"]);
}

async fn user_changed_number_moves_the_contact_and_does_not_open_the_window(db: Db) {
    let org = org(&db).await;
    let two_days_ago = network_time(48 * HOUR);
    deliver(&db, &text(ANN, &wamid(), two_days_ago, "old phone")).await;
    let before = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    let r = deliver(&db, &number_changed(PHONE, "447700900002", network_time(0))).await;
    assert_eq!(r.contacts_updated, 1, "{r:?}");
    let after = contact(&db, &org, ContactKey::WaId("447700900002")).await;
    assert_eq!(after.id, before.id);
    // The notice is kept as the customer's `system` message, but the customer did not write.
    let conv = conversation(&db, &org, &after).await;
    assert_eq!(conv.last_inbound_at, Some(two_days_ago));
    assert_eq!(
        after.last_inbound_at,
        Some(two_days_ago),
        "nor moves the contact's"
    );
    let kinds: Vec<_> = inbound(&db, &org, &after)
        .await
        .into_iter()
        .map(|m| m.r#type)
        .collect();
    assert_eq!(kinds, ["system", "text"]);
}

async fn an_identity_notice_for_an_unknown_customer_creates_the_contact_under_the_new_ids(db: Db) {
    let org = org(&db).await;
    let r = deliver(&db, &bsuid_changed(BSUID, BSUID2, network_time(0))).await;
    assert_eq!(r.contacts_updated, 0);
    let c = contact(&db, &org, ContactKey::UserId(BSUID2)).await;
    let conv = conversation(&db, &org, &c).await;
    assert_eq!(conv.last_inbound_at, None, "a notice opens no window");
    assert_eq!(c.last_inbound_at, None, "the customer has not written");
}

// --- Templates ---

async fn pending_template(db: &Db, org: &Org) -> Uuid {
    let now = now_ms();
    let id = new_id();
    db.insert_template(&tern_store::Template {
        id,
        org_id: org.id,
        waba_id: WABA.into(),
        name: "order_update".into(),
        language: "en_US".into(),
        category: "utility".parse().unwrap(),
        status: "pending".parse().unwrap(),
        components: json!([{"type": "BODY", "text": "Shipped."}]),
        rejection_reason: None,
        network_id: Some("594425479261596".into()),
        created_at: now,
        updated_at: now,
    })
    .await
    .unwrap();
    id
}

fn template_update(field: &str, value: Value) -> Value {
    json!({"object": "whatsapp_business_account", "entry": [{"id": WABA, "time": 1_700_000_000,
        "changes": [{"field": field, "value": value}]}]})
}

async fn template_status_updates_follow_the_network(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["template.status"]).await;
    let id = pending_template(&db, &org).await;
    // In order: (the network's event, its reason, Tern's status after, its reason after).
    let steps = [
        (
            "REJECTED",
            "INVALID_FORMAT",
            "rejected",
            Some("INVALID_FORMAT"),
        ),
        ("APPROVED", "NONE", "approved", None),
        ("FLAGGED", "NONE", "approved", None),
        ("PAUSED", "NONE", "paused", None),
        ("REINSTATED", "NONE", "approved", None),
        ("IN_APPEAL", "NONE", "pending", None),
        ("DISABLED", "NONE", "disabled", None),
    ];
    for (event, reason, want, want_reason) in steps {
        let body = template_update(
            "message_template_status_update",
            json!({"event": event, "message_template_id": 594425479261596u64,
                   "message_template_name": "order_update",
                   "message_template_language": "en_US", "reason": reason}),
        );
        let r = deliver(&db, &body).await;
        let t = db.get_template(org.id, id).await.unwrap().unwrap();
        assert_eq!(
            (t.status.as_str(), t.rejection_reason.as_deref()),
            (want, want_reason),
            "{event}"
        );
        // A change is one `template.status` event; FLAGGED changes nothing.
        let changed = usize::from(event != "FLAGGED");
        assert_eq!(r.templates_updated, changed, "{event}");
        let evs = events(&db).await;
        assert_eq!(evs.len(), changed, "{event}: {evs:?}");
        if let Some((t, data)) = evs.first() {
            assert_eq!(
                (t.as_str(), &data["status"]),
                ("template.status", &json!(want))
            );
        }
    }
}

async fn a_template_category_update_sets_the_category_in_force(db: Db) {
    let org = org(&db).await;
    let id = pending_template(&db, &org).await;
    let category = || async {
        db.get_template(org.id, id)
            .await
            .unwrap()
            .unwrap()
            .category
            .as_str()
            .to_string()
    };
    // An announcement of a later change changes nothing yet.
    let announce = template_update(
        "template_category_update",
        json!({"message_template_id": 594425479261596u64, "message_template_name": "order_update",
               "message_template_language": "en_US", "new_category": "UTILITY",
               "correct_category": "MARKETING"}),
    );
    deliver(&db, &announce).await;
    assert_eq!(category().await, "utility");
    let change = template_update(
        "template_category_update",
        json!({"message_template_id": 594425479261596u64, "message_template_name": "order_update",
               "message_template_language": "en_US", "previous_category": "UTILITY",
               "new_category": "MARKETING"}),
    );
    assert_eq!(deliver(&db, &change).await.templates_updated, 1);
    assert_eq!(category().await, "marketing");
}

// --- Events ---

async fn an_event_goes_only_to_subscriptions_of_its_type(db: Db) {
    let org = org(&db).await;
    // No subscription: nothing is written.
    deliver(&db, &text(ANN, &wamid(), network_time(0), "1")).await;
    assert_eq!(event_types(&db).await, Vec::<String>::new());
    // A subscription to statuses only: a customer's message is not one.
    fixtures::subscribe(&db, &org, &["message.status"]).await;
    deliver(&db, &text(ANN, &wamid(), network_time(0), "2")).await;
    let m = sent_message(&db, &org, Some("wamid.S"), network_time(60_000)).await;
    deliver(
        &db,
        &statuses(vec![status("wamid.S", "delivered", network_time(0))]),
    )
    .await;
    let evs = events(&db).await;
    assert_eq!(reported(&evs), ["delivered"]);
    assert_eq!(evs[0].1["id"], m.id.to_string());
}

// One test per rule, each on SQLite and on PostgreSQL.
tern_store::both_backends! { tern_store::testkit::TestDb;
    statuses_move_a_message_sent_delivered_read_each_with_its_time,
    a_delivered_after_read_fills_its_time_and_never_moves_the_message_back,
    a_failed_status_maps_the_network_code_to_terns_failure,
    a_failed_message_stays_failed_when_a_later_report_arrives,
    a_status_for_an_unknown_message_is_ignored_and_creates_nothing,
    a_status_finds_its_message_by_terns_id_when_the_send_answer_was_lost,
    an_unknown_status_value_is_ignored,
    an_edit_replaces_the_text_and_content_of_the_original,
    an_edit_older_than_the_one_applied_changes_nothing,
    a_revoke_clears_the_message_and_a_later_edit_changes_nothing,
    an_edit_before_its_original_makes_one_message_that_the_original_completes,
    a_revoke_before_its_original_keeps_the_message_deleted,
    user_changed_user_id_moves_the_contact_to_the_new_bsuid,
    a_new_bsuid_already_held_merges_the_two_contacts_into_the_older,
    user_changed_number_moves_the_contact_and_does_not_open_the_window,
    an_identity_notice_for_an_unknown_customer_creates_the_contact_under_the_new_ids,
    template_status_updates_follow_the_network,
    a_template_category_update_sets_the_category_in_force,
    an_event_goes_only_to_subscriptions_of_its_type,
}
