//! `inbox::apply`, one rule per test: each test stores network notifications as the webhook
//! route does (the JSON the network sends, `tern_cloudapi` reads it) and applies them as the
//! inbox worker does ([`fixtures::deliver`]), then reads what the database holds. The rules
//! come from docs/decisions/inbox.md (customers, content, edits, identity changes),
//! docs/decisions/conversations.md and the contract's states (S4–S7) and events (EV2, EV3).

use serde_json::{Value, json};
use tern_core::messages::failure::Failure;
use tern_domain::message::{Direction, Status};
use tern_domain::{new_id, time::now_ms};
use tern_store::{ContactKey, Contact, Conversation, Db, Message, Org};
use uuid::Uuid;

use crate::fixtures::{self, PNID, WABA, deliver, event_types, events, notification};

/// One test per rule, each on SQLite and on PostgreSQL.
macro_rules! rules {
    ($($name:ident),+ $(,)?) => {
        mod rules {
            $(#[tokio::test] async fn $name() { crate::fixtures::on_both(super::$name).await; })+
        }
    };
}

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
    let (contact, _) = db
        .upsert_contact_by_wa_id(org.id, PHONE, None, None, new_id(), t0)
        .await
        .unwrap();
    let conv = db
        .get_or_create_conversation(org.id, contact.id, PNID, new_id(), t0)
        .await
        .unwrap();
    let m = Message {
        id: new_id(),
        org_id: org.id,
        conversation_id: conv.id,
        contact_id: contact.id,
        phone_number_id: PNID.into(),
        direction: Direction::Outbound,
        r#type: "text".into(),
        status: Status::Sent,
        template_name: None,
        template_language: None,
        text: Some("hi".into()),
        media_id: None,
        wamid: wamid.map(str::to_string),
        request: json!({}),
        campaign_id: None,
        created_at: t0,
        sent_at: Some(t0),
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: t0,
        content: None,
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
    };
    assert!(db.insert_message(&m).await.unwrap());
    m
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
    assert_eq!((c.name.as_deref(), c.last_inbound_at), (Some("Ann"), Some(at)));
    let conv = conversation(&db, &org, &c).await;
    // The window runs 24 hours from the network's time of the message, not its arrival.
    assert_eq!(conv.last_inbound_at, Some(at));
    assert_eq!(conv.window_expires_at(), Some(at + 24 * HOUR));
    let got = inbound(&db, &org, &c).await;
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(
        (m.status, m.wamid.as_deref(), m.text.as_deref(), m.created_at),
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
        (c.wa_id.as_deref(), c.user_id.as_deref(), c.username.as_deref()),
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

async fn a_notification_applied_twice_stores_its_message_once(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["message.received"]).await;
    let body = text(ANN, &wamid(), network_time(0), "hi");
    let first = deliver(&db, &body).await;
    // The network's retry of the same webhook.
    let again = deliver(&db, &body).await;
    assert_eq!(
        (first.inbound_stored, again.inbound_stored, again.inbound_duplicates),
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

// --- Statuses ---

async fn statuses_move_a_message_sent_delivered_read_each_with_its_time(db: Db) {
    let org = org(&db).await;
    fixtures::subscribe(&db, &org, &["message.status"]).await;
    let t0 = network_time(60_000);
    let m = sent_message(&db, &org, Some("wamid.S"), t0).await;
    let r = deliver(&db, &statuses(vec![status("wamid.S", "delivered", t0 + 10_000)])).await;
    assert_eq!(r.statuses_applied, 1);
    let got = message(&db, &org, m.id).await;
    assert_eq!((got.status, got.delivered_at), (Status::Delivered, Some(t0 + 10_000)));
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
    deliver(&db, &statuses(vec![status("wamid.S", "delivered", t0 + 10_000)])).await;
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
        (131049, "This message was not delivered", "ecosystem_limited"),
        (
            131062,
            "BSUID recipients are not supported for this message",
            "phone_number_required",
        ),
        (131050, "Unable to deliver the message", "marketing_opted_out"),
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
    let r = deliver(&db, &statuses(vec![status("wamid.NOPE", "delivered", network_time(0))])).await;
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
    let r = deliver(&db, &statuses(vec![status("wamid.S", "deleted_somehow", t0 + 1_000)])).await;
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
    assert_eq!((got.text.as_deref(), got.edited_at), (Some("v2"), Some(t + 20_000)));
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
        (got[0].text.as_deref(), got[0].content.as_ref(), got[0].revoked_at, got[0].edited_at),
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
        (got[0].text.as_deref(), got[0].revoked_at, got[0].r#type.as_str()),
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
    let kinds: Vec<_> = inbound(&db, &org, &after)
        .await
        .into_iter()
        .map(|m| m.r#type)
        .collect();
    assert_eq!(kinds, ["system", "text"]);
}

async fn an_identity_notice_for_an_unknown_customer_creates_the_contact_under_the_new_ids(
    db: Db,
) {
    let org = org(&db).await;
    let r = deliver(&db, &bsuid_changed(BSUID, BSUID2, network_time(0))).await;
    assert_eq!(r.contacts_updated, 0);
    let c = contact(&db, &org, ContactKey::UserId(BSUID2)).await;
    let conv = conversation(&db, &org, &c).await;
    assert_eq!(conv.last_inbound_at, None, "a notice opens no window");
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
        ("REJECTED", "INVALID_FORMAT", "rejected", Some("INVALID_FORMAT")),
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
            assert_eq!((t.as_str(), &data["status"]), ("template.status", &json!(want)));
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
    deliver(&db, &statuses(vec![status("wamid.S", "delivered", network_time(0))])).await;
    let evs = events(&db).await;
    assert_eq!(reported(&evs), ["delivered"]);
    assert_eq!(evs[0].1["id"], m.id.to_string());
}

rules! {
    an_inbound_text_creates_the_contact_and_conversation_and_opens_the_window,
    the_window_runs_from_the_latest_network_time_and_never_moves_back,
    a_profile_name_fills_a_nameless_contact_and_never_replaces_a_name,
    a_phone_only_customer_is_a_contact_by_phone,
    a_bsuid_only_customer_is_a_contact_without_a_phone,
    a_username_customer_is_a_contact_with_the_username_and_no_phone,
    a_later_message_gives_a_bsuid_contact_its_phone,
    a_new_username_replaces_the_old_one,
    a_status_naming_a_phone_and_a_bsuid_of_two_contacts_merges_them_into_the_older,
    a_notification_applied_twice_stores_its_message_once,
    a_nul_from_the_network_becomes_the_replacement_character,
    a_notification_for_a_number_tern_does_not_hold_is_dropped,
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
