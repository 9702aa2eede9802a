//! `inbox::apply_messages_together` (what the inbox worker does with the notifications it
//! claimed): a batch mixing every kind of message ends exactly as the same notifications
//! applied one by one (`inbox::apply_received`); applied again it changes nothing; a
//! message the database refuses is listed alone and the others are stored.
//!
//! Two organisations, each with its own number, get the same notifications (their wamids
//! prefixed `A.` and `B.`): one one by one, the other together; then what each holds is
//! compared.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use tern_core::inbox::{Received, Report, apply_messages_together, apply_received};
use tern_core::testkit::{NumberSeed, Seed};
use tern_domain::time::now_ms;
use tern_store::{Db, Org};

use crate::fixtures::{self, WABA, events};

const PN_A: &str = "106540352200001";
const PN_B: &str = "106540352200002";
const PHONE: &str = "447700900001";
const PHONE2: &str = "447700900002";
const BSUID: &str = "US.13491208655302741918";
const BSUID2: &str = "US.20000000000000000002";

async fn org_with_number(db: &Db, name: &str, pnid: &str) -> Org {
    let org = Seed::org(name).create(db, &fixtures::key()).await.org;
    tern_core::testkit::add_number(db, &fixtures::key(), org.id, &NumberSeed::new(pnid)).await;
    org
}

/// One notification of the number `pnid` with these contacts and messages; every `W.` in
/// it becomes `prefix.`.
fn notification(pnid: &str, prefix: &str, contacts: Value, messages: Value) -> Vec<u8> {
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": WABA, "changes": [{
        "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": pnid},
            "contacts": contacts, "messages": messages, "statuses": []}}]}]});
    body.to_string()
        .replace("\"W.", &format!("\"{prefix}."))
        .into_bytes()
}

fn secs(t: i64) -> String {
    (t / 1000).to_string()
}

/// The notifications of the scenario, in the order they arrive: customers by phone, by
/// BSUID and username, by both (merging a phone-only and a BSUID-only contact); texts,
/// reactions and replies to messages of the same batch and of earlier ones, an image, edits
/// and a deletion of earlier messages, edits before their original, a repeat of a message,
/// a change of BSUID.
fn scenario(pnid: &str, prefix: &str, t: i64) -> Vec<Vec<u8>> {
    let ann = json!({"wa_id": PHONE, "profile": {"name": "Ann"}});
    let bo = json!({"user_id": BSUID, "profile": {"name": "Bo", "username": "bo"}});
    let cy_phone = json!({"wa_id": PHONE2, "profile": {"name": "Cy"}});
    let cy_both = json!({"wa_id": PHONE2, "user_id": BSUID2, "profile": {"name": "Cy"}});
    let text = |id: &str, from: Value, at: i64, body: &str| {
        let mut m =
            json!({"id": id, "timestamp": secs(at), "type": "text", "text": {"body": body}});
        if let Some(p) = from.get("wa_id") {
            m["from"] = p.clone();
        }
        if let Some(u) = from.get("user_id") {
            m["from_user_id"] = u.clone();
        }
        m
    };
    let n = |contacts: Value, messages: Value| notification(pnid, prefix, contacts, messages);
    let mut reaction = text("W.r1", ann.clone(), t + 3_000, "");
    reaction["type"] = json!("reaction");
    reaction["reaction"] = json!({"message_id": "W.a1", "emoji": "👍"});
    reaction.as_object_mut().unwrap().remove("text");
    let mut image = text("W.b2", bo.clone(), t + 4_000, "");
    image["type"] = json!("image");
    image["image"] =
        json!({"id": "media-1", "mime_type": "image/jpeg", "sha256": "x", "caption": "c"});
    image["context"] = json!({"from": PHONE, "id": "W.b1"});
    image.as_object_mut().unwrap().remove("text");
    let mut edit = text("W.e1", ann.clone(), t + 5_000, "");
    edit["type"] = json!("edit");
    edit["edit"] = json!({"original_message_id": "W.a1",
        "message": {"type": "text", "text": {"body": "hello, edited"}}});
    edit.as_object_mut().unwrap().remove("text");
    let mut early_edit = text("W.e2", bo.clone(), t + 9_000, "");
    early_edit["type"] = json!("edit");
    early_edit["edit"] = json!({"original_message_id": "W.b3",
        "message": {"type": "text", "text": {"body": "late, edited"}}});
    early_edit.as_object_mut().unwrap().remove("text");
    let mut revoke = text("W.v1", bo.clone(), t + 10_000, "");
    revoke["type"] = json!("revoke");
    revoke["revoke"] = json!({"original_message_id": "W.b1"});
    revoke.as_object_mut().unwrap().remove("text");
    let mut reply = text("W.a3", ann.clone(), t + 11_000, "to the late one");
    reply["context"] = json!({"from": PHONE, "id": "W.b3"});
    let edit_of = |id: &str, original: &str, at: i64, body: &str| {
        let mut e = text(id, ann.clone(), at, "");
        e["type"] = json!("edit");
        e["edit"] = json!({"original_message_id": original,
            "message": {"type": "text", "text": {"body": body}}});
        e.as_object_mut().unwrap().remove("text");
        e
    };
    let changed = json!({"id": "W.s1", "timestamp": secs(t + 12_000), "type": "system",
        "system": {"body": "changed", "user_id": "US.30000000000000000003",
                   "previous_user_id": BSUID2, "type": "user_changed_user_id"}});
    vec![
        n(
            json!([ann, bo, cy_phone]),
            json!([
                text("W.a1", ann.clone(), t, "hello"),
                text("W.b1", bo.clone(), t + 1_000, "hi"),
                text("W.c1", cy_phone.clone(), t + 2_000, "by phone"),
                reaction,
            ]),
        ),
        n(
            json!([bo, ann]),
            json!([image, edit, text("W.a2", ann.clone(), t + 6_000, "again")]),
        ),
        n(
            json!([{"user_id": BSUID2, "profile": {"name": "Cy"}}, cy_both, bo]),
            json!([
                text("W.c2", json!({"user_id": BSUID2}), t + 7_000, "by bsuid"),
                text("W.c3", cy_both.clone(), t + 8_000, "both: one customer"),
                early_edit,
                text("W.b3", bo.clone(), t + 8_500, "late"),
                revoke,
            ]),
        ),
        n(
            json!([ann]),
            json!([
                reply,
                text("W.a1", ann.clone(), t, "hello"),
                edit_of("W.e4", "W.zz", t + 11_500, "of one never seen"),
                edit_of("W.e3", "W.a1", t + 11_800, "hello, edited twice"),
                changed
            ]),
        ),
    ]
}

fn received(bodies: &[Vec<u8>]) -> Vec<Received<'_>> {
    bodies
        .iter()
        .map(|body| Received {
            body,
            received_at: 1_700_000_000_000,
        })
        .collect()
}

/// What the organisation holds, with its own ids replaced by wamids and identifiers, so two
/// organisations can be compared.
async fn state(db: &Db, org: &Org, prefix: &str) -> Value {
    let unprefix = |s: &str| s.replace(&format!("{prefix}."), "W.");
    let contacts = db.list_contacts(org.id, None, 100).await.unwrap();
    let who = |id: uuid::Uuid| {
        let c = contacts.iter().find(|c| c.id == id).expect("a contact");
        json!([c.wa_id, c.user_id])
    };
    let mut contact_rows: Vec<Value> = contacts
        .iter()
        .map(|c| json!([c.wa_id, c.user_id, c.username, c.name, c.last_inbound_at]))
        .collect();
    contact_rows.sort_by_key(Value::to_string);
    let mut conversations = Vec::new();
    let mut messages = BTreeMap::new();
    let mut wamid_of = BTreeMap::new();
    let mut all = Vec::new();
    for c in &contacts {
        let Some(conv) = db
            .find_conversation(org.id, c.id, &org_pnid(prefix))
            .await
            .unwrap()
        else {
            continue;
        };
        conversations.push(json!([who(c.id), conv.last_inbound_at]));
        let list = db
            .list_conversation_messages(org.id, conv.id, None, None, 100)
            .await
            .unwrap();
        for m in list {
            wamid_of.insert(m.id, unprefix(m.wamid.as_deref().unwrap_or_default()));
            all.push(m);
        }
    }
    conversations.sort_by_key(Value::to_string);
    for m in all {
        let named = |id: Option<&Value>| {
            id.and_then(Value::as_str)
                .and_then(|s| s.parse::<uuid::Uuid>().ok())
                .map(|id| wamid_of.get(&id).cloned().unwrap_or_default())
        };
        let mut content = m.content.clone().unwrap_or(Value::Null);
        if let Some(o) = content.as_object_mut()
            && o.contains_key("message_id")
        {
            o.insert("message_id".into(), json!(named(o.get("message_id"))));
        }
        let reply = m.reply_to.as_ref().map(|r| {
            json!([
                unprefix(&r.wamid),
                r.message_id.map(|id| wamid_of.get(&id).cloned())
            ])
        });
        let timeline: Vec<String> = db
            .timeline_rows(m.id)
            .await
            .unwrap()
            .iter()
            .map(|r| match &r.detail {
                tern_domain::timeline::Detail::Event { event_type, .. } => event_type.clone(),
                other => unprefix(&serde_json::to_string(other).unwrap()),
            })
            .collect();
        messages.insert(
            unprefix(m.wamid.as_deref().unwrap_or_default()),
            json!({"type": m.r#type, "text": m.text, "content": unprefix(&content.to_string()),
                   "reply_to": reply, "created_at": m.created_at, "edited_at": m.edited_at,
                   "revoked_at": m.revoked_at, "contact": who(m.contact_id),
                   "timeline": timeline}),
        );
    }
    json!({"contacts": contact_rows, "conversations": conversations, "messages": messages})
}

fn org_pnid(prefix: &str) -> String {
    if prefix == "A" { PN_A } else { PN_B }.to_string()
}

/// The events written since the last call, per message wamid (unprefixed), in order.
async fn events_by_message(db: &Db) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (kind, data) in events(db).await {
        let wamid = data["wamid"].as_str().unwrap_or_default();
        out.entry(wamid.to_string()).or_default().push(kind);
    }
    out
}

fn only(events: &BTreeMap<String, Vec<String>>, prefix: &str) -> BTreeMap<String, Vec<String>> {
    events
        .iter()
        .filter_map(|(w, e)| {
            w.strip_prefix(&format!("{prefix}."))
                .map(|w| (format!("W.{w}"), e.clone()))
        })
        .collect()
}

/// The reports summed, without what names items.
fn summed(reports: impl IntoIterator<Item = Report>) -> Report {
    let mut total = Report::default();
    for r in reports {
        total.add(&r);
    }
    total
}

async fn a_batch_mixing_every_kind_ends_as_one_by_one(db: Db) {
    let a = org_with_number(&db, "Alpha", PN_A).await;
    let b = org_with_number(&db, "Beta", PN_B).await;
    for org in [&a, &b] {
        fixtures::subscribe(&db, org, &["message.received", "message.updated"]).await;
    }
    let t = (now_ms() - 60_000) / 1000 * 1000;
    let one_by_one = scenario(PN_A, "A", t);
    let together = scenario(PN_B, "B", t);

    let mut alone = Vec::new();
    for body in &one_by_one {
        alone.push(apply_received(&db, body, 1_700_000_000_000).await.unwrap());
    }
    let reports = apply_messages_together(&db, &received(&together))
        .await
        .unwrap();
    assert!(reports.iter().all(Option::is_some), "{reports:?}");
    let reports: Vec<Report> = reports.into_iter().flatten().collect();
    // Each notification's own report is the same.
    assert_eq!(reports, alone);
    let total = summed(reports);
    // Stored: 9 messages, the late original filling in its edit's row, the two edits before
    // their original, the notice; the repeat of W.a1 a duplicate; W.a1 edited twice and
    // W.b1 deleted; Cy's two contacts merged, then Cy's BSUID changed.
    assert_eq!(
        (
            total.inbound_stored,
            total.inbound_duplicates,
            total.messages_updated,
            total.contacts_updated,
            total.failed.len()
        ),
        (13, 1, 3, 2, 0),
        "{total:?}"
    );
    assert_eq!(state(&db, &b, "B").await, state(&db, &a, "A").await);
    let emitted = events_by_message(&db).await;
    assert_eq!(only(&emitted, "B"), only(&emitted, "A"));
    assert!(!only(&emitted, "B").is_empty());
    // The image's download is queued once, for each organisation.
    let media: Vec<_> = db
        .claim_inbound_media("tests", now_ms(), 60_000, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.wamid)
        .collect();
    assert_eq!(media.len(), 2, "{media:?}");

    // Applied again (the network's retry, or a crash before the batch was marked done):
    // as one by one, nothing is stored again (the edit that made W.zz's row now finds it
    // held: an update that changes nothing) and no event is written; what each holds is
    // what it held.
    let before = state(&db, &b, "B").await;
    let mut alone = Vec::new();
    for body in &one_by_one {
        alone.push(apply_received(&db, body, 1_700_000_000_000).await.unwrap());
    }
    let again: Vec<Report> = apply_messages_together(&db, &received(&together))
        .await
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(again, alone);
    let again = summed(again);
    assert_eq!(
        (
            again.inbound_stored,
            again.inbound_duplicates,
            again.failed.len()
        ),
        (0, 12, 0),
        "{again:?}"
    );
    assert_eq!(state(&db, &b, "B").await, before);
    assert_eq!(state(&db, &a, "A").await, before);
    assert_eq!(events_by_message(&db).await, BTreeMap::new());
}

/// Makes the database refuse the inbound message `B.refused`.
fn refusing_trigger(db: &Db) -> &'static str {
    match db.backend() {
        tern_store::Backend::Sqlite => {
            "CREATE TRIGGER refuse_wamid BEFORE INSERT ON messages \
             WHEN NEW.wamid = 'B.refused' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;"
        }
        tern_store::Backend::Postgres => {
            "CREATE FUNCTION refuse_wamid() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN IF NEW.wamid = 'B.refused' THEN RAISE EXCEPTION 'refused by the test'; \
             END IF; RETURN NEW; END $$; \
             CREATE TRIGGER refuse_wamid BEFORE INSERT ON messages \
             FOR EACH ROW EXECUTE FUNCTION refuse_wamid();"
        }
    }
}

async fn a_refused_message_fails_alone_and_the_rest_is_stored(db: Db) {
    let b = org_with_number(&db, "Beta", PN_B).await;
    db.execute_test_sql(refusing_trigger(&db)).await.unwrap();
    let t = (now_ms() - 60_000) / 1000 * 1000;
    let ann = json!({"wa_id": PHONE, "profile": {"name": "Ann"}});
    let text = |id: &str, at: i64| {
        json!({"id": id, "from": PHONE, "timestamp": secs(at), "type": "text",
               "text": {"body": id}})
    };
    let bodies = vec![
        notification(PN_B, "B", json!([ann]), json!([text("W.k1", t)])),
        notification(
            PN_B,
            "B",
            json!([ann]),
            json!([text("W.refused", t + 1_000), text("W.k2", t + 2_000)]),
        ),
        notification(PN_B, "B", json!([ann]), json!([text("W.k3", t + 3_000)])),
    ];
    let reports: Vec<Report> = apply_messages_together(&db, &received(&bodies))
        .await
        .unwrap()
        .into_iter()
        .flatten()
        .collect();
    let failed: Vec<Vec<&str>> = reports
        .iter()
        .map(|r| r.failed.iter().map(|f| f.key.as_str()).collect())
        .collect();
    assert_eq!(failed, [vec![], vec!["B.refused"], vec![]]);
    let stored: Vec<usize> = reports.iter().map(|r| r.inbound_stored).collect();
    assert_eq!(stored, [1, 1, 1]);
    let held = db
        .find_messages_by_wamids(&["B.k1", "B.k2", "B.k3", "B.refused"])
        .await
        .unwrap();
    let mut wamids: Vec<_> = held.iter().filter_map(|m| m.wamid.clone()).collect();
    wamids.sort();
    assert_eq!(wamids, ["B.k1", "B.k2", "B.k3"]);
    let contact = db
        .get_contact_by_wa_id(b.id, PHONE)
        .await
        .unwrap()
        .expect("the customer");
    assert_eq!(contact.last_inbound_at, Some(t + 3_000));
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    a_batch_mixing_every_kind_ends_as_one_by_one,
    a_refused_message_fails_alone_and_the_rest_is_stored,
}
