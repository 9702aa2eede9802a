//! 2026 identities: BSUIDs, parent BSUIDs, usernames and customers whose phone the network
//! withholds — in inbound webhooks, status webhooks, send answers and the `system` messages
//! that announce a new BSUID or phone.
//! Assertions are on the raw webhook bodies (the network's field names).

use crate::common::*;
use tern_simulator::{CustomerSpec, IdentityChangeRequest, derive_bsuid};

/// Every `value` of a change with `field`, in arrival order, with its entry.
pub fn values(rx: &Receiver, field: &str) -> Vec<(Value, Value)> {
    rx.raw
        .lock()
        .unwrap()
        .iter()
        .flat_map(|b| b["entry"].as_array().cloned().unwrap_or_default())
        .flat_map(|e| {
            e["changes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c["field"] == field)
                .map(|c| (e.clone(), c["value"].clone()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Wait (bounded) until `f` finds something in the `field` values, and return it.
pub async fn wait_for<T>(rx: &Receiver, field: &str, f: impl Fn(&Value, &Value) -> Option<T>) -> T {
    for _ in 0..500 {
        if let Some(t) = values(rx, field).iter().find_map(|(e, v)| f(e, v)) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "timed out waiting for a {field} webhook: {:?}",
        values(rx, field)
    );
}

/// The inbound `(message, contact)` with this wamid.
async fn inbound(rx: &Receiver, wamid: &str) -> (Value, Value) {
    wait_for(rx, "messages", |_, v| {
        let m = v["messages"]
            .as_array()?
            .iter()
            .find(|m| m["id"] == wamid)?;
        Some((m.clone(), v["contacts"][0].clone()))
    })
    .await
}

/// `(status, contacts of its value)` for each status of `wamid`, once `n` arrived.
async fn statuses(rx: &Receiver, wamid: &str, n: usize) -> Vec<(Value, Option<Value>)> {
    let all = || -> Vec<(Value, Option<Value>)> {
        values(rx, "messages")
            .into_iter()
            .flat_map(|(_, v)| {
                v["statuses"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|s| s["id"] == wamid)
                    .map(|s| (s, v.get("contacts").cloned()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    for _ in 0..500 {
        if all().len() >= n {
            return all();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {n} statuses of {wamid}: {:?}", all());
}

fn inject(e: &Env, mut body: Value) -> String {
    body["phone_number_id"] = json!(PNID);
    e.sim.inject_inbound(body).unwrap()["wamid"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn text_to(recipient_key: &str, recipient: &str, body: &str) -> Value {
    json!({"messaging_product": "whatsapp", recipient_key: recipient, "type": "text",
           "text": {"body": body}})
}

fn ann(e: &Env) -> tern_simulator::Customer {
    e.sim
        .register_customer(CustomerSpec {
            username: Some("ann.lee".into()),
            parent_user_id: Some("US.ENT.11815799212886844830".into()),
            profile_name: Some("Ann".into()),
            ..CustomerSpec::default()
        })
        .unwrap()
}

#[tokio::test]
async fn phone_customer_has_a_derived_bsuid_everywhere() {
    let e = env().await;
    let bsuid = derive_bsuid(Some(7), "US", CUSTOMER);
    let wamid = inject(
        &e,
        json!({"from": CUSTOMER, "type": "text", "text": {"body": "hi"}}),
    );
    let (msg, contact) = inbound(&e.rx, &wamid).await;
    assert_eq!(msg["from"], CUSTOMER);
    assert_eq!(msg["from_user_id"], bsuid.as_str());
    assert!(msg.get("from_parent_user_id").is_none());
    assert_eq!(contact["wa_id"], CUSTOMER);
    assert_eq!(contact["user_id"], bsuid.as_str());
    assert!(contact["profile"]["name"].is_string());
    assert!(contact["profile"].get("username").is_none(), "{contact}");

    let (status, v) = raw_send(&e, text_to("to", "+1 650 555 1234", "yo")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["contacts"][0],
        json!({"input": "+1 650 555 1234", "wa_id": CUSTOMER})
    );
    let wamid = v["messages"][0]["id"].as_str().unwrap();
    let st = statuses(&e.rx, wamid, 3).await;
    for (s, contacts) in &st {
        assert_eq!(s["recipient_id"], CUSTOMER);
        assert_eq!(s["recipient_user_id"], bsuid.as_str());
        assert!(s.get("recipient_parent_user_id").is_none());
        let c = contacts.clone().expect("contacts beside statuses");
        assert_eq!(c, json!([{"user_id": bsuid, "wa_id": CUSTOMER}]), "{s}");
    }
    let listed = e.sim.customers();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].user_id, bsuid);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn username_customer_without_phone_writes_and_is_written_to() {
    let e = env().await;
    let c = ann(&e);
    assert_eq!(c.wa_id, None);
    assert!(tern_simulator::is_bsuid(&c.user_id), "{}", c.user_id);
    let parent = c.parent_user_id.clone().unwrap();

    // by username, then by BSUID: the same customer
    let w1 = inject(
        &e,
        json!({"username": "ann.lee", "type": "text", "text": {"body": "hi"}}),
    );
    let w2 = inject(
        &e,
        json!({"from_user_id": c.user_id, "type": "text", "text": {"body": "again"}}),
    );
    for w in [w1, w2] {
        let (msg, contact) = inbound(&e.rx, &w).await;
        assert!(msg.get("from").is_none(), "phone withheld: {msg}");
        assert_eq!(msg["from_user_id"], c.user_id.as_str());
        assert_eq!(msg["from_parent_user_id"], parent.as_str());
        assert_eq!(
            contact,
            json!({"profile": {"name": "Ann", "username": "ann.lee"},
                   "user_id": c.user_id, "parent_user_id": parent})
        );
    }

    // a send to the BSUID, inside the window opened above
    let (status, v) = raw_send(&e, text_to("recipient", &c.user_id, "hello")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["contacts"][0],
        json!({"input": c.user_id, "user_id": c.user_id})
    );
    let wamid = v["messages"][0]["id"].as_str().unwrap().to_owned();
    let st = statuses(&e.rx, &wamid, 3).await;
    let kinds: Vec<_> = st.iter().map(|(s, _)| s["status"].clone()).collect();
    assert_eq!(kinds, vec!["sent", "delivered", "read"]);
    for (s, contacts) in &st {
        assert!(s.get("recipient_id").is_none(), "sent to a BSUID: {s}");
        assert_eq!(s["recipient_user_id"], c.user_id.as_str());
        assert_eq!(s["recipient_parent_user_id"], parent.as_str());
        let contact = &contacts.as_ref().unwrap()[0];
        assert!(contact.get("wa_id").is_none());
        assert_eq!(contact["parent_user_id"], parent.as_str());
        let username = contact["profile"]["username"].as_str();
        if s["status"] == "sent" {
            assert_eq!(username, None, "no username on sent");
        } else {
            assert_eq!(username, Some("ann.lee"));
        }
    }
    let rec = e
        .sim
        .messages()
        .into_iter()
        .find(|m| m.wamid == wamid)
        .unwrap();
    assert_eq!(rec.recipient.as_deref(), Some(c.user_id.as_str()));
    assert_eq!(rec.wa_id, "");

    // the parent BSUID reaches the same customer
    let (status, v) = raw_send(&e, text_to("recipient", &parent, "via parent")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["contacts"][0]["user_id"], c.user_id.as_str());
    assert_eq!(v["contacts"][0]["input"], parent.as_str());
    e.sim.shutdown().await;
}

#[tokio::test]
async fn to_wins_over_recipient_and_bad_recipients_are_rejected() {
    let e = env().await;
    open_window(&e);
    let mut both = text_to("to", CUSTOMER, "x");
    both["recipient"] = json!("US.123");
    let (status, v) = raw_send(&e, both).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["contacts"][0],
        json!({"input": CUSTOMER, "wa_id": CUSTOMER})
    );

    for (recipient, code) in [
        (json!("nope"), 131009),
        (json!("us.1"), 131009),
        (json!(5), 100),
    ] {
        let mut b = text_to("recipient", "", "x");
        b["recipient"] = recipient.clone();
        let (status, v) = raw_send(&e, b).await;
        assert_eq!(
            (status, v["error"]["code"].clone()),
            (400, json!(code)),
            "{recipient}: {v}"
        );
    }
    e.sim.shutdown().await;
}

#[tokio::test]
async fn unknown_bsuid_is_handled_like_an_unknown_phone() {
    let e = env().await;
    // free-form without a window: accepted, then failed 131047 — as for an unknown phone
    let (status, v) = raw_send(&e, text_to("recipient", "BR.424242", "x")).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["contacts"][0],
        json!({"input": "BR.424242", "user_id": "BR.424242"})
    );
    let wamid = v["messages"][0]["id"].as_str().unwrap();
    let st = statuses(&e.rx, wamid, 1).await;
    let (failed, contacts) = &st[0];
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["errors"][0]["code"], 131047);
    assert_eq!(failed["recipient_user_id"], "BR.424242", "sent to a BSUID");
    assert!(failed.get("recipient_id").is_none());
    assert!(contacts.is_none(), "failed statuses have no contacts");

    // a template needs no window: delivered normally
    seed_template(&e, "hello", json!([{"type": "BODY", "text": "Hello"}]));
    let (status, v) = raw_send(
        &e,
        json!({"messaging_product": "whatsapp", "recipient": "BR.424242", "type": "template",
               "template": {"name": "hello", "language": {"code": "en_US"}}}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let st = statuses(&e.rx, v["messages"][0]["id"].as_str().unwrap(), 3).await;
    assert_eq!(st[2].0["status"], "read");
    assert_eq!(st[2].1, Some(json!([{"user_id": "BR.424242"}])));
    e.sim.shutdown().await;
}

#[tokio::test]
async fn failed_status_to_a_phone_has_no_bsuid_and_no_contacts() {
    let e = env().await;
    e.sim
        .register_recipient(tern_simulator::RecipientSpec {
            wa_id: "15550000001".into(),
            behaviour: tern_simulator::Behaviour::NotOnWhatsapp,
            ..Default::default()
        })
        .unwrap();
    let (_, v) = raw_send(&e, text_to("to", "15550000001", "x")).await;
    let st = statuses(&e.rx, v["messages"][0]["id"].as_str().unwrap(), 1).await;
    let (failed, contacts) = &st[0];
    assert_eq!(failed["errors"][0]["code"], 131026);
    assert_eq!(failed["recipient_id"], "15550000001");
    assert!(failed.get("recipient_user_id").is_none(), "{failed}");
    assert!(contacts.is_none());
    e.sim.shutdown().await;
}

#[tokio::test]
async fn windows_and_pair_limits_follow_the_customer_not_the_identifier() {
    let e = env().await;
    let c = ann(&e);
    e.sim
        .set_window(PNID, CUSTOMER, Some(e.sim.advance_clock(0)));
    // a window set over HTTP by BSUID for the phone-less customer
    let r = reqwest::Client::new()
        .post(format!("{}/_sim/windows", e.sim.base_url()))
        .json(&json!({"phone_number_id": PNID, "user_id": c.user_id, "last_inbound_at": e.sim.advance_clock(0)}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, v) = raw_send(&e, text_to("recipient", &c.user_id, "x")).await;
    let st = statuses(&e.rx, v["messages"][0]["id"].as_str().unwrap(), 1).await;
    assert_eq!(st[0].0["status"], "sent", "window open: {:?}", st[0]);

    // the phone customer's BSUID shares the phone's window and pair bucket
    let bsuid = derive_bsuid(Some(7), "US", CUSTOMER);
    e.sim
        .patch_number(
            PNID,
            tern_simulator::NumberPatch {
                pair_burst: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
    let (status, _) = raw_send(&e, text_to("to", CUSTOMER, "one")).await;
    assert_eq!(status, 200);
    let (status, v) = raw_send(&e, text_to("recipient", &bsuid, "two")).await;
    assert_eq!(
        (status, v["error"]["code"].clone()),
        (400, json!(131056)),
        "{v}"
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn edit_and_revoke_are_injected_in_the_network_shape() {
    let e = env().await;
    let original = inject(
        &e,
        json!({"from": CUSTOMER, "type": "text", "text": {"body": "helo"}}),
    );
    let edit = inject(
        &e,
        json!({"from": CUSTOMER, "type": "edit", "edit": {"original_message_id": original,
               "message": {"type": "text", "text": {"body": "hello"}}}}),
    );
    let revoke = inject(
        &e,
        json!({"from": CUSTOMER, "type": "revoke", "revoke": {"original_message_id": original}}),
    );
    let (m, _) = inbound(&e.rx, &edit).await;
    assert_eq!(m["type"], "edit");
    assert_eq!(m["edit"]["original_message_id"], original.as_str());
    assert_eq!(m["edit"]["message"]["text"]["body"], "hello");
    assert_eq!(m["from"], CUSTOMER);
    let (m, _) = inbound(&e.rx, &revoke).await;
    assert_eq!(m["revoke"], json!({"original_message_id": original}));
    // an edited image gets a usable media id like any inbound image
    let img = inject(
        &e,
        json!({"from": CUSTOMER, "type": "edit", "edit": {"original_message_id": original,
               "message": {"type": "image", "image": {"caption": "new"}}}}),
    );
    let (m, _) = inbound(&e.rx, &img).await;
    let media_id = m["edit"]["message"]["image"]["id"].as_str().unwrap();
    assert!(e.client.get_media(media_id, TOKEN).await.is_ok());

    for bad in [
        json!({"from": CUSTOMER, "type": "edit", "edit": {"message": {"type": "text"}}}),
        json!({"from": CUSTOMER, "type": "edit", "edit": {"original_message_id": "wamid.X"}}),
        json!({"from": CUSTOMER, "type": "revoke", "revoke": {}}),
        json!({"type": "text", "text": {"body": "no sender"}}),
        json!({"from_user_id": "not-a-bsuid", "type": "text", "text": {"body": "x"}}),
    ] {
        let mut b = bad.clone();
        b["phone_number_id"] = json!(PNID);
        assert!(e.sim.inject_inbound(b).is_err(), "{bad}");
    }
    e.sim.shutdown().await;
}

/// The `messages[]` item with this wamid and its value's `contacts` (if any).
async fn system_message(rx: &Receiver, wamid: &str) -> (Value, Option<Value>) {
    wait_for(rx, "messages", |_, v| {
        let m = v["messages"]
            .as_array()?
            .iter()
            .find(|m| m["id"] == wamid)?;
        Some((m.clone(), v.get("contacts").cloned()))
    })
    .await
}

/// The message with this wamid as Tern's parser reads it.
async fn parsed_message(rx: &Receiver, wamid: &str) -> tern_cloudapi::InboundMessage {
    let find = |bodies: &[Notification]| {
        bodies
            .iter()
            .flat_map(|n| n.messages_values().flat_map(|(_, v)| v.messages.clone()))
            .find(|m| m.id == wamid)
    };
    rx.wait_until(wamid, |b| find(b).is_some()).await;
    find(&rx.bodies.lock().unwrap()).unwrap()
}

#[tokio::test]
async fn a_new_bsuid_is_announced_by_a_system_message() {
    let e = env().await;
    let old = derive_bsuid(Some(7), "US", CUSTOMER);
    open_window(&e);
    let change = e
        .sim
        .change_identity(IdentityChangeRequest {
            wa_id: Some(CUSTOMER.into()),
            new_user_id: Some("US.777".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(change["previous_user_id"], old.as_str());
    assert_eq!(change["user_id"], "US.777");
    assert_eq!(change["wamids"].as_array().unwrap().len(), 1);
    // The network's shape (reference §11): a `system` message, no `from`, no `contacts`.
    let (m, contacts) = system_message(&e.rx, change["wamids"][0].as_str().unwrap()).await;
    assert_eq!(contacts, None);
    assert_eq!(m["type"], "system");
    assert!(
        m.get("from").is_none() && m.get("from_user_id").is_none(),
        "{m}"
    );
    assert!(m["timestamp"].as_str().unwrap().parse::<i64>().is_ok());
    assert_eq!(m["system"]["type"], "user_changed_user_id");
    assert_eq!(m["system"]["user_id"], "US.777");
    assert_eq!(m["system"]["previous_user_id"], old.as_str());
    // Tern's parser reads it as a change of BSUID.
    let parsed = parsed_message(&e.rx, change["wamids"][0].as_str().unwrap()).await;
    let ch = parsed.identity_change().unwrap();
    assert_eq!(
        (
            ch.previous.user_id.as_deref(),
            ch.current.user_id.as_deref()
        ),
        (Some(old.as_str()), Some("US.777"))
    );

    // the new BSUID reaches the customer (its window is open); the old one no longer does
    let (_, v) = raw_send(&e, text_to("recipient", "US.777", "x")).await;
    let st = statuses(&e.rx, v["messages"][0]["id"].as_str().unwrap(), 1).await;
    assert_eq!(st[0].0["status"], "sent");
    assert_eq!(
        st[0].1,
        Some(json!([{"user_id": "US.777", "wa_id": CUSTOMER}]))
    );
    let (_, v) = raw_send(&e, text_to("recipient", &old, "x")).await;
    let st = statuses(&e.rx, v["messages"][0]["id"].as_str().unwrap(), 1).await;
    assert_eq!(
        st[0].0["errors"][0]["code"], 131047,
        "the old BSUID is unknown"
    );
    let wamid = inject(
        &e,
        json!({"from": CUSTOMER, "type": "text", "text": {"body": "hi"}}),
    );
    assert_eq!(inbound(&e.rx, &wamid).await.0["from_user_id"], "US.777");

    // over HTTP, a phone-less customer by username, derived new id; errors
    let c = ann(&e);
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/_sim/identity_change", e.sim.base_url()))
        .json(&json!({"username": "ann.lee"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let change: Value = r.json().await.unwrap();
    assert_eq!(change["previous_user_id"], c.user_id.as_str());
    assert_eq!(change["wa_id"], Value::Null);
    assert_ne!(change["user_id"], change["previous_user_id"]);
    for (body, status) in [
        (json!({"username": "nobody"}), 404),
        (json!({}), 400),
        (json!({"wa_id": CUSTOMER, "new_user_id": "bad"}), 400),
        (json!({"wa_id": CUSTOMER, "new_user_id": "US.777"}), 400),
        (
            json!({"username": "ann.lee", "new_wa_id": "16505550000"}),
            400,
        ),
        (
            json!({"wa_id": CUSTOMER, "new_wa_id": "+1 650 555 1234"}),
            400,
        ),
        (json!({"wa_id": CUSTOMER, "new_wa_id": "x"}), 400),
    ] {
        let r = http
            .post(format!("{}/_sim/identity_change", e.sim.base_url()))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{body}");
    }
    e.sim.shutdown().await;
}

#[tokio::test]
async fn a_new_phone_is_announced_and_brings_a_new_bsuid() {
    let e = env().await;
    let old = derive_bsuid(Some(7), "US", CUSTOMER);
    open_window(&e);
    let change = e
        .sim
        .change_identity(IdentityChangeRequest {
            wa_id: Some(CUSTOMER.into()),
            new_wa_id: Some("+1 650 555 9999".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(
        (change["previous_wa_id"].as_str(), change["wa_id"].as_str()),
        (Some(CUSTOMER), Some("16505559999"))
    );
    let wamids = change["wamids"].as_array().unwrap();
    assert_eq!(wamids.len(), 1, "{change}");
    // The old phone in `from`, the new one in `system.wa_id`, the new BSUID with it.
    let (m, contacts) = system_message(&e.rx, wamids[0].as_str().unwrap()).await;
    assert_eq!(contacts, None);
    assert_eq!(m["from"], CUSTOMER);
    assert_eq!(m["system"]["type"], "user_changed_number");
    assert_eq!(m["system"]["wa_id"], "16505559999");
    assert_eq!(m["system"]["user_id"], change["user_id"]);
    assert_ne!(change["user_id"], old.as_str());
    let parsed = parsed_message(&e.rx, wamids[0].as_str().unwrap()).await;
    let ch = parsed.identity_change().unwrap();
    assert_eq!(
        (ch.previous.wa_id.as_deref(), ch.current.wa_id.as_deref()),
        (Some(CUSTOMER), Some("16505559999"))
    );
    assert_eq!(
        ch.current.user_id.as_ref(),
        change["user_id"].as_str().map(str::to_owned).as_ref()
    );
    // The customer is reached at the new phone, within the window opened before.
    let (_, v) = raw_send(&e, text_to("to", "16505559999", "x")).await;
    let st = statuses(&e.rx, v["messages"][0]["id"].as_str().unwrap(), 1).await;
    assert_eq!(st[0].0["status"], "sent", "{:?}", st[0]);
    assert_eq!(st[0].1.as_ref().unwrap()[0]["user_id"], change["user_id"]);
    let wamid = inject(
        &e,
        json!({"from": "16505559999", "type": "text", "text": {"body": "hi"}}),
    );
    assert_eq!(
        inbound(&e.rx, &wamid).await.0["from_user_id"],
        change["user_id"]
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn customers_over_http() {
    let e = env().await;
    let http = reqwest::Client::new();
    let base = e.sim.base_url();
    let r = http
        .post(format!("{base}/_sim/customers"))
        .json(&json!({"username": "bo", "user_id": "GB.12345", "profile_name": "Bo", "behaviour": "never_reads"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let c: Value = r.json().await.unwrap();
    assert_eq!(c["user_id"], "GB.12345");
    assert!(c["wa_id"].is_null());
    for (body, why) in [
        (json!({"profile_name": "x"}), "no phone and no username"),
        (
            json!({"wa_id": "15550001234", "user_id": "GB.12345"}),
            "BSUID taken",
        ),
        (
            json!({"wa_id": "+44 7700 900123", "username": "bo"}),
            "username taken",
        ),
        (json!({"username": "cy", "user_id": "GB-1"}), "bad BSUID"),
        (
            json!({"username": "cy", "parent_user_id": "GB.1"}),
            "bad parent BSUID",
        ),
        (json!({"username": "has space"}), "bad username"),
    ] {
        let r = http
            .post(format!("{base}/_sim/customers"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{why}");
    }
    // a phone customer's derived BSUID carries the phone's country
    let r = http
        .post(format!("{base}/_sim/customers"))
        .json(&json!({"wa_id": "+44 7700 900123"}))
        .send()
        .await
        .unwrap();
    let c: Value = r.json().await.unwrap();
    assert!(c["user_id"].as_str().unwrap().starts_with("GB."), "{c}");
    let list: Value = http
        .get(format!("{base}/_sim/customers"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"].as_array().unwrap().len(), 2);
    // the registered behaviour applies to BSUID sends too
    e.sim
        .set_window_for_user_id(PNID, "GB.12345", Some(e.sim.advance_clock(0)));
    let (_, v) = raw_send(&e, text_to("recipient", "GB.12345", "x")).await;
    let wamid = v["messages"][0]["id"].as_str().unwrap().to_owned();
    statuses(&e.rx, &wamid, 2).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(statuses(&e.rx, &wamid, 2).await.len(), 2, "never read");
    e.sim.shutdown().await;
}
