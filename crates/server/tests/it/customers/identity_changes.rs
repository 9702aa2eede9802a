//! A customer changes BSUID or phone: the network says so with a `system` message
//! (`user_changed_user_id`: new `system.user_id`, old `system.previous_user_id`, no `from`
//! and no `contacts`; `user_changed_number`: old phone in `from`, new in `system.wa_id`).
//! Their contact moves to the new identifiers and keeps their history — on SQLite and
//! PostgreSQL.

use super::{PNID, deliver, get, notification, setup, text_from, wamid};
use crate::common::TestApp;
use serde_json::{Value, json};

const A: &str = "US.10000000000000000001";
const B: &str = "US.20000000000000000002";

fn secs_ago(s: i64) -> String {
    (tern_domain::time::now_ms() / 1000 - s).to_string()
}

/// The network's `user_changed_user_id` system message, as pywa's sample has it.
fn bsuid_changed(previous: &str, current: &str) -> Value {
    notification(
        json!([]),
        json!([{"id": wamid(), "timestamp": secs_ago(0), "type": "system",
            "system": {"body": format!("User changed from {previous} to {current}"),
                       "user_id": current, "previous_user_id": previous, "type": "user_changed_user_id"}}]),
        json!([]),
    )
}

/// The network's `user_changed_number` system message.
fn number_changed(previous: &str, current: &str) -> Value {
    notification(
        json!([]),
        json!([{"from": previous, "id": wamid(), "timestamp": secs_ago(0), "type": "system",
            "system": {"body": format!("User A changed from {previous} to {current}"),
                       "wa_id": current, "type": "user_changed_number"}}]),
        json!([]),
    )
}

async fn contacts(app: &TestApp, key: &str) -> Vec<Value> {
    get(app, key, "/contacts").await["data"]
        .as_array()
        .unwrap()
        .clone()
}

/// The texts of a contact's only conversation, oldest first.
async fn texts_of(app: &TestApp, key: &str, contact: &str) -> Vec<String> {
    let convs = get(app, key, &format!("/conversations?contact_id={contact}")).await;
    let convs = convs["data"].as_array().unwrap();
    assert_eq!(convs.len(), 1, "{convs:?}");
    let conv = convs[0]["id"].as_str().unwrap();
    let page = get(
        app,
        key,
        &format!("/conversations/{conv}/messages?direction=inbound&limit=100"),
    )
    .await;
    let mut texts: Vec<String> = page["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["text"].as_str().map(str::to_owned))
        .collect();
    texts.sort();
    texts
}

async fn a_new_bsuid_keeps_the_contact(app: &TestApp) {
    let key = setup(app).await;
    deliver(app, &text_from(None, Some(A), None, "1 before")).await;
    let before = contacts(app, &key).await;
    assert_eq!(before.len(), 1);
    let report = deliver(app, &bsuid_changed(A, B)).await;
    assert_eq!(report.contacts_updated, 1, "{report:?}");
    deliver(app, &text_from(None, Some(B), None, "2 after")).await;
    let after = contacts(app, &key).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(
        (&after[0]["id"], after[0]["user_id"].as_str()),
        (&before[0]["id"], Some(B))
    );
    let id = after[0]["id"].as_str().unwrap();
    assert_eq!(texts_of(app, &key, id).await, ["1 before", "2 after"]);
    // The old BSUID names no one now.
    assert_eq!(
        get(app, &key, &format!("/contacts?q={A}")).await["data"],
        json!([])
    );
}

async fn a_new_bsuid_already_held_merges_the_contacts(app: &TestApp) {
    let key = setup(app).await;
    deliver(
        app,
        &text_from(Some("14155550177"), Some(A), None, "1 old id"),
    )
    .await;
    let first = contacts(app, &key).await[0]["id"].clone();
    // The customer writes with the new BSUID before the network's notice arrives.
    deliver(app, &text_from(None, Some(B), None, "2 new id")).await;
    assert_eq!(contacts(app, &key).await.len(), 2);
    deliver(app, &bsuid_changed(A, B)).await;
    let after = contacts(app, &key).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(
        (
            &after[0]["id"],
            after[0]["user_id"].as_str(),
            after[0]["wa_id"].as_str()
        ),
        (&first, Some(B), Some("14155550177")),
        "the older contact survives with the new BSUID and the phone"
    );
    let id = after[0]["id"].as_str().unwrap();
    assert_eq!(texts_of(app, &key, id).await, ["1 old id", "2 new id"]);
}

async fn a_new_phone_moves_the_contact(app: &TestApp) {
    let key = setup(app).await;
    // The customer wrote two days ago: the window is closed.
    let mut old = text_from(Some("14155550177"), None, None, "1 old phone");
    old["entry"][0]["changes"][0]["value"]["messages"][0]["timestamp"] = json!(secs_ago(172_800));
    deliver(app, &old).await;
    let first = contacts(app, &key).await[0]["id"].clone();
    let report = deliver(app, &number_changed("14155550177", "14155550188")).await;
    assert_eq!(report.contacts_updated, 1, "{report:?}");
    let after = contacts(app, &key).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(
        (&after[0]["id"], after[0]["phone"].as_str()),
        (&first, Some("+14155550188"))
    );
    let id = after[0]["id"].as_str().unwrap().to_string();
    // The network's notice is not the customer writing: the window stays closed.
    let convs = get(app, &key, &format!("/conversations?contact_id={id}")).await;
    assert_eq!(convs["data"][0]["window_state"], "closed", "{convs}");
    deliver(
        app,
        &text_from(Some("14155550188"), None, None, "2 new phone"),
    )
    .await;
    assert_eq!(contacts(app, &key).await.len(), 1);
    assert_eq!(
        texts_of(app, &key, &id).await,
        ["1 old phone", "2 new phone"]
    );
    assert_eq!(
        get(app, &key, "/contacts?q=14155550177").await["data"],
        json!([])
    );
}

/// A field named `user_id_update` is not the network's (it has none): it changes nothing.
async fn no_user_id_update_field(app: &TestApp) {
    let key = setup(app).await;
    deliver(app, &text_from(None, Some(A), None, "hi")).await;
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "waba1", "changes": [{
        "field": "user_id_update", "value": {"messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "14155550100", "phone_number_id": PNID},
            "user_id_update": [{"previous_user_id": A, "user_id": B}]}}]}]});
    assert_eq!(deliver(app, &body).await.contacts_updated, 0);
    assert_eq!(contacts(app, &key).await[0]["user_id"], A);
}

tern_store::both_backends! { TestApp;
    a_new_bsuid_keeps_the_contact_http => a_new_bsuid_keeps_the_contact,
    a_new_bsuid_already_held_merges_the_contacts_http => a_new_bsuid_already_held_merges_the_contacts,
    a_new_phone_moves_the_contact_http => a_new_phone_moves_the_contact,
    no_user_id_update_field_http => no_user_id_update_field,
}
