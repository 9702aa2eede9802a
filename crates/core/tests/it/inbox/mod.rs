//! `inbox::apply`, one rule per test: each test stores network notifications as the webhook
//! route does (the JSON the network sends, `tern_cloudapi` reads it) and applies them as the
//! inbox worker does ([`fixtures::deliver`]), then reads what the database holds. The rules
//! come from docs/decisions/inbox.md (customers, content, edits, identity changes),
//! docs/decisions/conversations.md and docs/contract.md (S4–S7, EV2, EV3, NI1–NI7).

use serde_json::{Value, json};
use tern_core::messages::failure::Failure;
use tern_domain::message::{Direction, Status};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Contact, ContactKey, Conversation, Db, Message, Org};
use uuid::Uuid;

use crate::fixtures::{self, PNID, WABA, deliver, event_types, events, notification};

mod together;
mod updates;

const HOUR: i64 = 3_600_000;
const PHONE: &str = "447700900001";
const BSUID: &str = "US.13491208655302741918";
const BSUID2: &str = "US.20000000000000000002";

/// The organisation with the number `PNID`.
async fn org(db: &Db) -> Org {
    let org = fixtures::org(db, json!({})).await;
    fixtures::number(db, &org, PNID).await;
    org
}

/// A time `ago` ms before now, in the network's whole seconds.
fn network_time(ago: i64) -> i64 {
    (now_ms() - ago) / 1000 * 1000
}

fn secs(ms: i64) -> String {
    (ms / 1000).to_string()
}

fn wamid() -> String {
    format!("wamid.{}", Uuid::now_v7().simple())
}

/// A customer as a notification names them.
#[derive(Clone, Copy, Default)]
struct Who<'a> {
    phone: Option<&'a str>,
    bsuid: Option<&'a str>,
    username: Option<&'a str>,
    name: Option<&'a str>,
}

const ANN: Who<'static> = Who {
    phone: Some(PHONE),
    bsuid: None,
    username: None,
    name: Some("Ann"),
};

/// A notification with one message of `who` (its `contacts[]` entry and the message's
/// `from` / `from_user_id`).
fn message_from(who: Who<'_>, mut message: Value) -> Value {
    let mut contact = json!({"profile": {}});
    if let Some(n) = who.name {
        contact["profile"]["name"] = json!(n);
    }
    if let Some(u) = who.username {
        contact["profile"]["username"] = json!(u);
    }
    if let Some(p) = who.phone {
        contact["wa_id"] = json!(p);
        message["from"] = json!(p);
    }
    if let Some(b) = who.bsuid {
        contact["user_id"] = json!(b);
        message["from_user_id"] = json!(b);
    }
    notification(json!([contact]), json!([message]), json!([]))
}

/// A text of `who` sent at `at` (ms, the network's time).
fn text(who: Who<'_>, id: &str, at: i64, body: &str) -> Value {
    message_from(
        who,
        json!({"id": id, "timestamp": secs(at), "type": "text", "text": {"body": body}}),
    )
}

fn edit(who: Who<'_>, original: &str, at: i64, body: &str) -> Value {
    message_from(
        who,
        json!({"id": wamid(), "timestamp": secs(at), "type": "edit",
               "edit": {"original_message_id": original,
                        "message": {"type": "text", "text": {"body": body}}}}),
    )
}

fn revoke(who: Who<'_>, original: &str, at: i64) -> Value {
    message_from(
        who,
        json!({"id": wamid(), "timestamp": secs(at), "type": "revoke",
               "revoke": {"original_message_id": original}}),
    )
}

/// A status report of `id` as the network sends it.
fn status(id: &str, status: &str, at: i64) -> Value {
    json!({"id": id, "status": status, "timestamp": secs(at), "recipient_id": PHONE})
}

fn statuses(list: Vec<Value>) -> Value {
    notification(json!([]), json!([]), Value::Array(list))
}

async fn contact(db: &Db, org: &Org, key: ContactKey<'_>) -> Contact {
    db.get_contact_by_key(org.id, key)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no contact {}", key.value()))
}

async fn conversation(db: &Db, org: &Org, c: &Contact) -> Conversation {
    db.find_conversation(org.id, c.id, PNID)
        .await
        .unwrap()
        .expect("a conversation on the number")
}

/// The inbound messages of the contact's conversation, newest first.
async fn inbound(db: &Db, org: &Org, c: &Contact) -> Vec<Message> {
    let conv = conversation(db, org, c).await;
    db.list_conversation_messages(org.id, conv.id, Some(Direction::Inbound), None, 100)
        .await
        .unwrap()
}

/// An outbound message to `PHONE`, `sent` at `t0` with `wamid` (or without one: the send's
/// answer was lost).
async fn sent_message(db: &Db, org: &Org, wamid: Option<&str>, t0: i64) -> Message {
    fixtures::sent_message(db, org, PHONE, wamid, t0).await
}

async fn message(db: &Db, org: &Org, id: Uuid) -> Message {
    db.get_message(org.id, id).await.unwrap().unwrap()
}

/// The `status` field of each `message.status` event's data.
fn reported(evs: &[(String, Value)]) -> Vec<String> {
    evs.iter()
        .map(|(t, d)| {
            assert_eq!(t, "message.status");
            d["status"].as_str().unwrap().to_string()
        })
        .collect()
}

// --- Messages, contacts, conversations ---

async fn an_inbound_text_creates_the_contact_and_conversation_and_opens_the_window(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["message.received"]).await;
    let at = network_time(10 * 60_000);
    let id = wamid();
    let report = deliver(&db, &text(ANN, &id, at, "hi")).await;
    assert_eq!(report.inbound_stored, 1, "{report:?}");
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    assert_eq!(
        (c.name.as_deref(), c.last_inbound_at),
        (Some("Ann"), Some(at))
    );
    let conv = conversation(&db, &org, &c).await;
    // The window runs 24 hours from the network's time of the message, not its arrival.
    assert_eq!(conv.last_inbound_at, Some(at));
    assert_eq!(conv.window_expires_at(), Some(at + 24 * HOUR));
    let got = inbound(&db, &org, &c).await;
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(
        (
            m.status,
            m.wamid.as_deref(),
            m.text.as_deref(),
            m.created_at
        ),
        (Status::Received, Some(id.as_str()), Some("hi"), at)
    );
    assert_eq!(m.content, Some(json!({"body": "hi"})));
    let evs = events(&db).await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0].0, "message.received");
    assert_eq!(evs[0].1["id"], m.id.to_string());
}

async fn the_window_runs_from_the_latest_network_time_and_never_moves_back(db: Db) {
    let org = org(&db).await;
    let (t0, t1, t2) = (
        network_time(3 * HOUR),
        network_time(2 * HOUR),
        network_time(HOUR),
    );
    deliver(&db, &text(ANN, &wamid(), t1, "second")).await;
    // The network's retry of an older message arrives late.
    deliver(&db, &text(ANN, &wamid(), t0, "first")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    assert_eq!(c.last_inbound_at, Some(t1));
    assert_eq!(conversation(&db, &org, &c).await.last_inbound_at, Some(t1));
    deliver(&db, &text(ANN, &wamid(), t2, "third")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    assert_eq!(c.last_inbound_at, Some(t2));
    assert_eq!(conversation(&db, &org, &c).await.last_inbound_at, Some(t2));
    // One customer, one conversation, three messages.
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
    assert_eq!(inbound(&db, &org, &c).await.len(), 3);
}

async fn a_profile_name_fills_a_nameless_contact_and_never_replaces_a_name(db: Db) {
    let org = org(&db).await;
    let at = network_time(60_000);
    let nameless = Who { name: None, ..ANN };
    deliver(&db, &text(nameless, &wamid(), at, "1")).await;
    assert_eq!(contact(&db, &org, ContactKey::WaId(PHONE)).await.name, None);
    deliver(&db, &text(ANN, &wamid(), at, "2")).await;
    let annie = Who {
        name: Some("Annie"),
        ..ANN
    };
    deliver(&db, &text(annie, &wamid(), at, "3")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    assert_eq!(c.name.as_deref(), Some("Ann"));
}

async fn a_phone_only_customer_is_a_contact_by_phone(db: Db) {
    let org = org(&db).await;
    deliver(&db, &text(ANN, &wamid(), network_time(0), "hi")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    assert_eq!(
        (
            c.wa_id.as_deref(),
            c.user_id.as_deref(),
            c.username.as_deref()
        ),
        (Some(PHONE), None, None)
    );
}

async fn a_bsuid_only_customer_is_a_contact_without_a_phone(db: Db) {
    let org = org(&db).await;
    let at = network_time(0);
    let body = notification(
        json!([{"profile": {"name": "Sheena"}, "wa_id": "", "user_id": BSUID, "parent_user_id": "US.ENT.99"}]),
        json!([{"from_user_id": BSUID, "from_parent_user_id": "US.ENT.99", "id": wamid(),
                "timestamp": secs(at), "type": "text", "text": {"body": "hey"}}]),
        json!([]),
    );
    assert_eq!(deliver(&db, &body).await.inbound_stored, 1);
    let c = contact(&db, &org, ContactKey::UserId(BSUID)).await;
    assert_eq!(
        (
            c.wa_id.as_deref(),
            c.parent_user_id.as_deref(),
            c.name.as_deref()
        ),
        (None, Some("US.ENT.99"), Some("Sheena"))
    );
    // Their window is open like anyone's.
    assert_eq!(conversation(&db, &org, &c).await.last_inbound_at, Some(at));
}

async fn a_username_customer_is_a_contact_with_the_username_and_no_phone(db: Db) {
    let org = org(&db).await;
    let kim = Who {
        phone: None,
        bsuid: Some(BSUID),
        username: Some("kim.codes"),
        name: Some("Kim"),
    };
    deliver(&db, &text(kim, &wamid(), network_time(0), "no phone here")).await;
    let c = contact(&db, &org, ContactKey::UserId(BSUID)).await;
    assert_eq!(
        (c.username.as_deref(), c.wa_id.as_deref(), c.name.as_deref()),
        (Some("kim.codes"), None, Some("Kim"))
    );
}

async fn a_later_message_gives_a_bsuid_contact_its_phone(db: Db) {
    let org = org(&db).await;
    let at = network_time(0);
    let by_id = Who {
        phone: None,
        bsuid: Some(BSUID),
        ..ANN
    };
    deliver(&db, &text(by_id, &wamid(), at, "1")).await;
    let first = contact(&db, &org, ContactKey::UserId(BSUID)).await;
    let both = Who {
        bsuid: Some(BSUID),
        ..ANN
    };
    deliver(&db, &text(both, &wamid(), at, "2")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    assert_eq!((c.id, c.user_id.as_deref()), (first.id, Some(BSUID)));
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
}

async fn a_new_username_replaces_the_old_one(db: Db) {
    let org = org(&db).await;
    let at = network_time(0);
    let old = Who {
        phone: None,
        bsuid: Some(BSUID),
        username: Some("kim.old"),
        name: None,
    };
    deliver(&db, &text(old, &wamid(), at, "1")).await;
    let new = Who {
        username: Some("kim.new"),
        ..old
    };
    deliver(&db, &text(new, &wamid(), at, "2")).await;
    let c = contact(&db, &org, ContactKey::UserId(BSUID)).await;
    assert_eq!(c.username.as_deref(), Some("kim.new"));
}

async fn a_status_naming_a_phone_and_a_bsuid_of_two_contacts_merges_them_into_the_older(db: Db) {
    let org = org(&db).await;
    let m = sent_message(&db, &org, Some("wamid.M"), network_time(60_000)).await;
    let by_phone = m.contact_id;
    let by_id = Who {
        phone: None,
        bsuid: Some(BSUID),
        username: Some("ann_x"),
        name: Some("Ann"),
    };
    deliver(&db, &text(by_id, &wamid(), network_time(0), "it's me")).await;
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 2);
    let mut s = status("wamid.M", "delivered", network_time(0));
    s["recipient_user_id"] = json!(BSUID);
    let report = deliver(
        &db,
        &notification(
            json!([{"wa_id": PHONE, "user_id": BSUID, "profile": {"name": "Ann", "username": "ann_x"}}]),
            json!([]),
            json!([s]),
        ),
    )
    .await;
    assert_eq!(report.contacts_updated, 1, "{report:?}");
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 1);
    let c = contact(&db, &org, ContactKey::UserId(BSUID)).await;
    assert_eq!(
        (c.id, c.wa_id.as_deref(), c.username.as_deref()),
        (by_phone, Some(PHONE), Some("ann_x"))
    );
    // One conversation, holding both messages, with the window the customer opened.
    let conv = conversation(&db, &org, &c).await;
    let all = db
        .list_conversation_messages(org.id, conv.id, None, None, 10)
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    assert!(conv.last_inbound_at.is_some());
}

/// The network sends most statuses one a webhook, each naming its customer (since 2026 by
/// BSUID too): the worker applies such webhooks together, and learns their customers in one
/// pass, as it would one by one.
async fn statuses_of_many_webhooks_teach_their_customers_together(db: Db) {
    let org = org(&db).await;
    let t0 = network_time(60_000);
    let phones = ["447700900011", "447700900012", "447700900013"];
    let mut ids = Vec::new();
    let mut bodies = Vec::new();
    for (n, phone) in phones.iter().enumerate() {
        let wamid = format!("wamid.T{n}");
        ids.push(
            fixtures::sent_message(&db, &org, phone, Some(&wamid), t0)
                .await
                .id,
        );
        for step in ["delivered", "read"] {
            let mut s = status(&wamid, step, t0 + 1000);
            s["recipient_id"] = json!(phone);
            s["recipient_user_id"] = json!(format!("US.T{n}"));
            bodies.push(serde_json::to_vec(&statuses(vec![s])).unwrap());
        }
    }
    // A BSUID-only contact that the first status shows to hold the second phone: merged.
    let by_id = Who {
        phone: None,
        bsuid: Some("US.T1"),
        username: None,
        name: None,
    };
    deliver(&db, &text(by_id, &wamid(), t0, "hi")).await;
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 4);
    let received: Vec<_> = bodies
        .iter()
        .map(|body| tern_core::inbox::Received {
            body,
            received_at: now_ms(),
        })
        .collect();
    let reports = tern_core::inbox::apply_statuses_together(&db, &received)
        .await
        .unwrap();
    let reports: Vec<_> = reports.into_iter().map(Option::unwrap).collect();
    let applied: usize = reports.iter().map(|r| r.statuses_applied).sum();
    let updated: usize = reports.iter().map(|r| r.contacts_updated).sum();
    // Each customer written once: two learn their BSUID, one's two contacts are merged.
    assert_eq!((applied, updated), (6, 3), "{reports:?}");
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 3);
    for (n, phone) in phones.iter().enumerate() {
        let c = contact(&db, &org, ContactKey::WaId(phone)).await;
        assert_eq!(c.user_id.as_deref(), Some(format!("US.T{n}").as_str()));
        assert_eq!(message(&db, &org, ids[n]).await.status, Status::Read);
    }
}

async fn a_notification_applied_twice_stores_its_message_once(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["message.received"]).await;
    let body = text(ANN, &wamid(), network_time(0), "hi");
    let first = deliver(&db, &body).await;
    // The network's retry of the same webhook.
    let again = deliver(&db, &body).await;
    assert_eq!(
        (
            first.inbound_stored,
            again.inbound_stored,
            again.inbound_duplicates
        ),
        (1, 0, 1)
    );
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    assert_eq!(inbound(&db, &org, &c).await.len(), 1);
    assert_eq!(event_types(&db).await, ["message.received"]);
}

async fn a_nul_from_the_network_becomes_the_replacement_character(db: Db) {
    let org = org(&db).await;
    deliver(&db, &text(ANN, &wamid(), network_time(0), "a\u{0}b")).await;
    let c = contact(&db, &org, ContactKey::WaId(PHONE)).await;
    assert_eq!(
        inbound(&db, &org, &c).await[0].text.as_deref(),
        Some("a\u{fffd}b")
    );
}

async fn a_notification_for_a_number_tern_does_not_hold_is_dropped(db: Db) {
    let org = org(&db).await;
    let mut body = text(ANN, &wamid(), network_time(0), "hi");
    body["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = json!("999");
    let report = deliver(&db, &body).await;
    assert_eq!((report.unknown_numbers, report.inbound_stored), (1, 0));
    assert_eq!(db.count_contacts(org.id).await.unwrap(), 0);
}

// One test per rule, each on SQLite and on PostgreSQL.
tern_store::both_backends! { tern_store::testkit::TestDb;
    an_inbound_text_creates_the_contact_and_conversation_and_opens_the_window,
    the_window_runs_from_the_latest_network_time_and_never_moves_back,
    a_profile_name_fills_a_nameless_contact_and_never_replaces_a_name,
    a_phone_only_customer_is_a_contact_by_phone,
    a_bsuid_only_customer_is_a_contact_without_a_phone,
    a_username_customer_is_a_contact_with_the_username_and_no_phone,
    a_later_message_gives_a_bsuid_contact_its_phone,
    a_new_username_replaces_the_old_one,
    a_status_naming_a_phone_and_a_bsuid_of_two_contacts_merges_them_into_the_older,
    statuses_of_many_webhooks_teach_their_customers_together,
    a_notification_applied_twice_stores_its_message_once,
    a_nul_from_the_network_becomes_the_replacement_character,
    a_notification_for_a_number_tern_does_not_hold_is_dropped,
}
