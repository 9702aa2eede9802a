//! Magic recipients (`magic_recipients`): outcomes decided by the recipient, the username
//! customer, template review by name, and `inject_inbound_to` (Tern's `POST /test/inbound`).

use crate::common::*;
use tern_cloudapi::GraphError;

const USER_ID: &str = "US.1000000000000000001";

async fn magic_env() -> Env {
    let mut a = fast_args();
    a.magic_recipients = true;
    let e = env_with(a).await;
    seed_template(&e, "hello", json!([{"type": "BODY", "text": "Hello"}]));
    e
}

/// A template send (no window needed) to `to`, echoing `tern_id`.
fn hello(to: &str, tern_id: &str) -> SendPayload {
    SendPayload::new(
        to,
        MessageContent::Template {
            template: Template {
                name: "hello".into(),
                language: TemplateLanguage::new("en_US"),
                components: None,
            },
        },
    )
    .callback_data(tern_id)
}

async fn send_ok(e: &Env, p: &SendPayload) -> String {
    e.client.send_message(PNID, TOKEN, p).await.unwrap().wamid
}

async fn send_refused(e: &Env, p: &SendPayload) -> GraphError {
    graph_err(e.client.send_message(PNID, TOKEN, p).await).await
}

fn kinds(st: &[StatusUpdate]) -> Vec<DeliveryStatus> {
    st.iter().map(|s| s.status.clone()).collect()
}

/// Every inbound `messages[]` item with its `contacts[0]`, from the raw webhook bodies.
fn inbound(rx: &Receiver) -> Vec<(Value, Value)> {
    let raw = rx.raw.lock().unwrap();
    let mut out = Vec::new();
    for body in raw.iter() {
        for entry in body["entry"].as_array().into_iter().flatten() {
            for change in entry["changes"].as_array().into_iter().flatten() {
                let v = &change["value"];
                for m in v["messages"].as_array().into_iter().flatten() {
                    out.push((m.clone(), v["contacts"][0].clone()));
                }
            }
        }
    }
    out
}

async fn wait_inbound(rx: &Receiver, wamid: &str) -> (Value, Value) {
    for _ in 0..500 {
        if let Some(m) = inbound(rx).into_iter().find(|(m, _)| m["id"] == wamid) {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no inbound webhook for {wamid}");
}

fn planned_outcome(e: &Env, wamid: &str) -> String {
    e.sim
        .messages()
        .into_iter()
        .find(|m| m.wamid == wamid)
        .unwrap()
        .outcome
}

#[tokio::test]
async fn error_code_numbers_are_accepted_then_fail() {
    let e = magic_env().await;
    for (to, code) in [
        ("+1 555 013 1026", 131026),
        ("+1 555-013-1047", 131047),
        ("15550131049", 131049),
    ] {
        let wamid = send_ok(&e, &hello(to, &format!("m-{code}"))).await;
        let st = e.rx.wait_statuses(&wamid, 1).await;
        assert_eq!(kinds(&st), vec![DeliveryStatus::Failed], "{to}");
        assert_eq!(st[0].errors[0].code, Some(code), "{to}");
        assert_eq!(planned_outcome(&e, &wamid), format!("failed:{code}"));
    }
    // a free-form message inside the window fails with 131047 too (the number, not the window)
    e.sim
        .inject_inbound_to(
            PNID,
            json!({"from": "15550131047", "type": "text", "text": {"body": "hi"}}),
        )
        .unwrap();
    let wamid = send_ok(&e, &text("15550131047", "hello", "m-free")).await;
    assert_eq!(
        e.rx.wait_statuses(&wamid, 1).await[0].errors[0].code,
        Some(131047)
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn rate_limit_numbers_refuse_twice_then_accept() {
    let e = magic_env().await;
    for (to, code) in [("+1 555 013 1056", 131056), ("+1 555 013 0429", 130429)] {
        let p = hello(to, &format!("retry-{code}"));
        for attempt in 1..=2 {
            let g = send_refused(&e, &p).await;
            assert_eq!(
                (g.code, g.http_status),
                (Some(code), 400),
                "{to} #{attempt}"
            );
            assert!(g.details.is_some(), "the network's details");
        }
        let wamid = send_ok(&e, &p).await;
        let st = e.rx.wait_statuses(&wamid, 3).await;
        assert_eq!(
            kinds(&st),
            vec![
                DeliveryStatus::Sent,
                DeliveryStatus::Delivered,
                DeliveryStatus::Read
            ]
        );
        // each message is counted on its own: a new one is refused twice again
        let next = hello(to, &format!("retry-{code}-2"));
        assert_eq!(send_refused(&e, &next).await.code, Some(code));
    }
    // the request log shows 3 + 1 sends per number, one accepted
    let refused = e
        .sim
        .requests()
        .iter()
        .filter(|r| r.response_status == Some(400))
        .count();
    assert_eq!(refused, 6);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn without_callback_data_the_body_names_the_message() {
    let e = magic_env().await;
    // (free-form outside the window: accepted, then failed 131047; the refusals come first)
    let body = |text: &str| {
        json!({"messaging_product": "whatsapp", "to": "15550131056", "type": "text",
               "text": {"body": text}})
    };
    let a = body("a");
    assert_eq!(raw_send(&e, a.clone()).await.0, 400);
    assert_eq!(raw_send(&e, body("b")).await.0, 400, "another message");
    assert_eq!(raw_send(&e, a.clone()).await.0, 400);
    let (status, answer) = raw_send(&e, a).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(raw_send(&e, body("b")).await.0, 400, "b's second refusal");
    assert_eq!(raw_send(&e, body("b")).await.0, 200);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn never_reads_never_delivers_and_replies() {
    let e = magic_env().await;
    let w2 = send_ok(&e, &hello("+1 555 000 0002", "m2")).await;
    let w3 = send_ok(&e, &hello("+1 555 000 0003", "m3")).await;
    let w4 = send_ok(&e, &hello("+1 555 000 0004", "m4")).await;
    assert_eq!(planned_outcome(&e, &w2), "delivered");
    assert_eq!(planned_outcome(&e, &w3), "sent");
    assert_eq!(
        kinds(&e.rx.wait_statuses(&w4, 3).await),
        vec![
            DeliveryStatus::Sent,
            DeliveryStatus::Delivered,
            DeliveryStatus::Read
        ]
    );
    assert_eq!(
        kinds(&e.rx.wait_statuses(&w2, 2).await),
        vec![DeliveryStatus::Sent, DeliveryStatus::Delivered]
    );
    assert_eq!(
        kinds(&e.rx.wait_statuses(&w3, 1).await),
        vec![DeliveryStatus::Sent]
    );
    // the customer answers after reading: a text from that number
    e.rx.wait_until("Thanks!", |_| !inbound(&e.rx).is_empty())
        .await;
    let (msg, contact) = inbound(&e.rx).remove(0);
    assert_eq!(msg["from"], "15550000004");
    assert_eq!(msg["type"], "text");
    assert_eq!(msg["text"]["body"], "Thanks!");
    assert_eq!(contact["wa_id"], "15550000004");
    // ... which opens the window: a free-form reply is read, and not answered within the
    // minute (an echo bot and this customer would otherwise talk forever)
    let w = send_ok(&e, &text("15550000004", "Thanks!", "m5")).await;
    assert_eq!(
        e.rx.wait_statuses(&w, 3).await[2].status,
        DeliveryStatus::Read
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(inbound(&e.rx).len(), 1, "one answer a minute");
    // the statuses of 0002 and 0003 stop where planned
    let m = e.sim.messages();
    let statuses = |w: &str| m.iter().find(|r| r.wamid == w).unwrap().statuses.clone();
    assert_eq!(statuses(&w2), vec!["sent", "delivered"]);
    assert_eq!(statuses(&w3), vec!["sent"]);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn any_other_number_receives_and_reads() {
    let e = magic_env().await;
    for to in ["+44 7700 900123", "15550131027", "15550000005"] {
        let w = send_ok(&e, &hello(to, to)).await;
        assert_eq!(
            e.rx.wait_statuses(&w, 3).await[2].status,
            DeliveryStatus::Read
        );
    }
    // a customer registered with its own behaviour keeps it, magic number or not
    e.sim
        .register_recipient(RecipientSpec {
            wa_id: "15550131026".into(),
            behaviour: Behaviour::NeverReads,
            ..RecipientSpec::default()
        })
        .unwrap();
    let w = send_ok(&e, &hello("15550131026", "own")).await;
    assert_eq!(planned_outcome(&e, &w), "delivered");
    e.sim.shutdown().await;
}

#[tokio::test]
async fn the_username_customer_receives_and_reads() {
    let e = magic_env().await;
    let c = e
        .sim
        .customers()
        .into_iter()
        .find(|c| c.user_id == USER_ID)
        .expect("the magic customer exists from the start");
    assert_eq!((c.username.as_deref(), c.wa_id), (Some("tern_test"), None));
    let (status, answer) = raw_send(
        &e,
        json!({"messaging_product": "whatsapp", "recipient": USER_ID, "type": "template",
               "biz_opaque_callback_data": "u1",
               "template": {"name": "hello", "language": {"code": "en_US"}}}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["contacts"][0]["user_id"], USER_ID);
    let wamid = answer["messages"][0]["id"].as_str().unwrap().to_owned();
    let st = e.rx.wait_statuses(&wamid, 3).await;
    assert_eq!(st[2].status, DeliveryStatus::Read);
    assert!(
        st.iter()
            .all(|s| s.recipient_user_id.as_deref() == Some(USER_ID))
    );
    assert!(st.iter().all(|s| s.recipient_id.is_none()), "no phone");
    // a reset keeps the test network's customer
    e.sim.reset(true);
    assert!(e.sim.customers().iter().any(|c| c.user_id == USER_ID));
    e.sim.shutdown().await;
}

async fn create(e: &Env, name: &str) -> String {
    e.client
        .create_template(
            WABA,
            TOKEN,
            &json!({"name": name, "language": "en_US", "category": "MARKETING",
                    "components": [{"type": "BODY", "text": "Sale!"}]}),
        )
        .await
        .unwrap()
        .id
}

async fn review_of(e: &Env, id: &str) -> (TemplateEvent, Option<String>) {
    let id = id.to_owned();
    e.rx.wait_until("review", |ns| {
        ns.iter().any(|n| {
            n.template_updates()
                .any(|(_, u)| u.message_template_id.as_deref() == Some(id.as_str()))
        })
    })
    .await;
    let bodies = e.rx.bodies.lock().unwrap();
    let u = bodies
        .iter()
        .flat_map(|n| {
            n.template_updates()
                .map(|(_, u)| u.clone())
                .collect::<Vec<_>>()
        })
        .find(|u| u.message_template_id.as_deref() == Some(id.as_str()))
        .unwrap();
    (u.event, u.reason)
}

#[tokio::test]
async fn templates_are_reviewed_by_name() {
    let e = magic_env().await;
    let ok = create(&e, "spring_sale").await;
    let bad = create(&e, "reject_spring_sale").await;
    assert_eq!(review_of(&e, &ok).await.0, TemplateEvent::Approved);
    let (event, reason) = review_of(&e, &bad).await;
    assert_eq!(event, TemplateEvent::Rejected);
    assert_eq!(reason.as_deref(), Some("INVALID_FORMAT"));
    let status = |id: &str| {
        e.sim
            .templates()
            .into_iter()
            .find(|t| t.id == id)
            .unwrap()
            .status
    };
    assert_eq!(
        (status(&ok), status(&bad)),
        ("APPROVED".into(), "REJECTED".into())
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn inject_inbound_to_from_a_phone_and_a_user_id() {
    let e = magic_env().await;
    let w1 = e
        .sim
        .inject_inbound_to(
            PNID,
            json!({"from": "16505551234", "type": "text", "text": {"body": "hi"}, "profile_name": "Ann"}),
        )
        .unwrap();
    let (m, c) = wait_inbound(&e.rx, &w1).await;
    assert_eq!(
        (m["from"].as_str(), m["text"]["body"].as_str()),
        (Some("16505551234"), Some("hi"))
    );
    assert_eq!(c["profile"]["name"], "Ann");
    assert_eq!(c["wa_id"], "16505551234");

    let w2 = e
        .sim
        .inject_inbound_to(
            PNID,
            json!({"user_id": USER_ID, "type": "image", "image": {"caption": "look"},
                   "context": {"id": w1}}),
        )
        .unwrap();
    let (m, c) = wait_inbound(&e.rx, &w2).await;
    assert_eq!(m["from_user_id"], USER_ID);
    assert!(
        m.get("from").is_none(),
        "the network withholds this customer's phone"
    );
    assert!(m["image"]["id"].is_string(), "a media id is made");
    assert_eq!(m["context"]["id"], w1.as_str());
    assert_eq!(c["profile"]["username"], "tern_test");
    // the window opened: a free-form send to the BSUID is read
    let (status, answer) = raw_send(
        &e,
        json!({"messaging_product": "whatsapp", "recipient": USER_ID, "type": "text",
               "text": {"body": "Welcome"}}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let wamid = answer["messages"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        e.rx.wait_statuses(&wamid, 3).await[2].status,
        DeliveryStatus::Read
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn inject_inbound_to_names_the_bad_field() {
    let e = magic_env().await;
    let text = json!({"body": "hi"});
    let cases = [
        (
            json!({"type": "text", "text": text}),
            "from or user_id is required",
        ),
        (
            json!({"from": "1555", "user_id": USER_ID, "type": "text", "text": text}),
            "not both",
        ),
        (
            json!({"from": "+15550001", "type": "text", "text": text}),
            "from must be",
        ),
        (
            json!({"from": 15550001, "type": "text", "text": text}),
            "from must be a string",
        ),
        (
            json!({"user_id": "tern_test", "type": "text", "text": text}),
            "user_id must be",
        ),
        (
            json!({"from": "15550001", "text": text}),
            "type is required",
        ),
        (
            json!({"from": "15550001", "type": "fax", "fax": {}}),
            "type must be one of",
        ),
        (
            json!({"from": "15550001", "type": "text"}),
            "text is required",
        ),
        (
            json!({"from": "15550001", "type": "text", "text": {}}),
            "text.body is required",
        ),
        (
            json!({"from": "15550001", "type": "text", "text": text, "timestamp": 1}),
            "unknown field timestamp",
        ),
        (
            json!({"from": "15550001", "type": "text", "text": text, "profile_name": 3}),
            "profile_name must be a string",
        ),
        (json!(["text"]), "JSON object"),
    ];
    for (body, want) in cases {
        let err = e.sim.inject_inbound_to(PNID, body.clone()).unwrap_err();
        assert_eq!(err.status, 400, "{body}");
        assert!(err.message.contains(want), "{body}: {}", err.message);
    }
    let err = e
        .sim
        .inject_inbound_to(
            "999",
            json!({"from": "15550001", "type": "text", "text": text}),
        )
        .unwrap_err();
    assert_eq!(err.status, 404);
    assert!(inbound(&e.rx).is_empty(), "nothing was sent");
    e.sim.shutdown().await;
}

#[tokio::test]
async fn without_magic_recipients_nothing_is_magic() {
    let e = env().await;
    seed_template(&e, "hello", json!([{"type": "BODY", "text": "Hello"}]));
    for to in ["15550131026", "15550131047", "15550000003", "15550000004"] {
        let w = send_ok(&e, &hello(to, to)).await;
        assert_eq!(planned_outcome(&e, &w), "read", "{to}");
    }
    // accepted at once
    for to in ["15550131056", "15550130429"] {
        send_ok(&e, &hello(to, to)).await;
    }
    assert!(!e.sim.customers().iter().any(|c| c.user_id == USER_ID));
    let id = create(&e, "reject_me").await;
    assert_eq!(review_of(&e, &id).await.0, TemplateEvent::Approved);
    // 0004 read the message but writes nothing
    let w = send_ok(&e, &hello("15550000004", "again")).await;
    e.rx.wait_statuses(&w, 3).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(inbound(&e.rx).is_empty());
    e.sim.shutdown().await;
}
