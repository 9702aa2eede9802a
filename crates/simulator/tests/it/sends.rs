//! Sends: answers, validation errors, statuses, windows, rate limits.

use crate::common::*;

#[tokio::test]
async fn text_in_window_sent_delivered_read_with_callback_data() {
    let e = env().await;
    open_window(&e);
    e.rx.wait_until("inbound", |ns| {
        ns.iter()
            .any(|n| n.messages_values().any(|(_, v)| !v.messages.is_empty()))
    })
    .await;

    let ok = e
        .client
        .send_message(PNID, TOKEN, &text("+1 (650) 555-1234", "hello ☃", "msg_1"))
        .await
        .unwrap();
    assert!(ok.wamid.starts_with("wamid."));
    assert_eq!(ok.wa_id.as_deref(), Some(CUSTOMER));
    assert_eq!(ok.input.as_deref(), Some("+1 (650) 555-1234"));
    assert_eq!(
        ok.message_status, None,
        "only templates carry message_status"
    );

    let st = e.rx.wait_statuses(&ok.wamid, 3).await;
    let kinds: Vec<_> = st.iter().map(|s| s.status.clone()).collect();
    assert_eq!(
        kinds,
        vec![
            DeliveryStatus::Sent,
            DeliveryStatus::Delivered,
            DeliveryStatus::Read
        ]
    );
    for s in &st {
        assert_eq!(s.biz_opaque_callback_data.as_deref(), Some("msg_1"));
        assert_eq!(s.recipient_id.as_deref(), Some(CUSTOMER));
        assert!(s.timestamp.is_some());
        assert!(s.conversation.is_some());
    }
    // When each status was emitted, to the millisecond: one time per status, in order, in
    // the second the webhook's own timestamp names (read a moment apart: at most the next).
    let record = e
        .sim
        .messages()
        .into_iter()
        .find(|m| m.wamid == ok.wamid)
        .unwrap();
    assert_eq!(record.status_at_ms.len(), record.statuses.len());
    assert!(record.status_at_ms.is_sorted());
    for (s, at) in st.iter().zip(&record.status_at_ms) {
        assert!(
            (at.div_euclid(1000) - s.timestamp.unwrap()).abs() <= 1,
            "{at} ms"
        );
    }
    // A reply in the window: free until October 2026, charged per message from then on
    // (the report's own time decides).
    let pricing = st[0].pricing.as_ref().unwrap();
    assert_eq!(pricing.category.as_deref(), Some("service"));
    let free = st[0].timestamp.unwrap() < tern_simulator::NON_TEMPLATE_CHARGED_FROM;
    let want = if free {
        "free_customer_service"
    } else {
        "regular"
    };
    assert_eq!(pricing.pricing_type.as_deref(), Some(want));
    assert_eq!(pricing.billable, Some(!free));
    assert_eq!(pricing.pricing_model.as_deref(), Some("PMP"));
    assert!(
        st[1].pricing.is_some() && st[2].pricing.is_none(),
        "pricing on sent and one of delivered/read"
    );

    // the metadata routes the tenant
    let raw = e.rx.raw.lock().unwrap().clone();
    let last = raw.last().unwrap();
    assert_eq!(last["object"], "whatsapp_business_account");
    assert_eq!(last["entry"][0]["id"], WABA);
    assert_eq!(
        last["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"],
        PNID
    );
    assert_eq!(
        last["entry"][0]["changes"][0]["value"]["metadata"]["display_phone_number"],
        "15550783881"
    );

    // exactly one request reached the network for this message
    let sends: Vec<_> = e
        .sim
        .requests()
        .into_iter()
        .filter(|r| {
            r.path.ends_with("/messages") && r.biz_opaque_callback_data.as_deref() == Some("msg_1")
        })
        .collect();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0].wamid.as_deref(), Some(ok.wamid.as_str()));
    assert_eq!(sends[0].response_status, Some(200));
    assert_eq!(sends[0].body["text"]["body"], "hello ☃");
    assert_eq!(*e.rx.bad_signatures.lock().unwrap(), 0);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn outside_window_fails_131047_and_clock_closes_window() {
    let e = env().await;
    let ok = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "hi", "m1"))
        .await
        .unwrap();
    let st = e.rx.wait_statuses(&ok.wamid, 1).await;
    assert_eq!(st[0].status, DeliveryStatus::Failed);
    assert_eq!(st[0].errors[0].code, Some(131047));
    assert_eq!(st[0].errors[0].failure().code, "window_expired");
    assert_eq!(st[0].biz_opaque_callback_data.as_deref(), Some("m1"));

    open_window(&e);
    e.sim.advance_clock(25 * 3600);
    let ok = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "hi", "m2"))
        .await
        .unwrap();
    let st = e.rx.wait_statuses(&ok.wamid, 1).await;
    assert_eq!(
        st[0].errors[0].code,
        Some(131047),
        "window expired after 24 h"
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn recipient_behaviours() {
    let e = env().await;
    for (wa, b, code) in [
        ("15550000001", Behaviour::NotOnWhatsapp, None),
        ("15550000002", Behaviour::Fail, Some(131049)),
        ("15550000003", Behaviour::NeverReads, None),
        ("15550000004", Behaviour::NeverDelivers, None),
    ] {
        e.sim
            .register_recipient(RecipientSpec {
                wa_id: wa.into(),
                behaviour: b,
                fail_code: code,
                profile_name: None,
            })
            .unwrap();
        e.sim.set_window(PNID, wa, Some(e.sim.advance_clock(0)));
    }
    let mut sent = Vec::new();
    for to in ["15550000001", "15550000002", "15550000003", "15550000004"] {
        sent.push(
            e.client
                .send_message(PNID, TOKEN, &text(to, "x", to))
                .await
                .unwrap(),
        );
    }
    let [a, b, c, d] = <[_; 4]>::try_from(sent).unwrap();
    let sa = e.rx.wait_statuses(&a.wamid, 1).await;
    assert_eq!(sa[0].status, DeliveryStatus::Failed);
    assert_eq!(sa[0].errors[0].code, Some(131026));
    assert_eq!(
        e.rx.wait_statuses(&b.wamid, 1).await[0].errors[0].code,
        Some(131049)
    );
    let sc = e.rx.wait_statuses(&c.wamid, 2).await;
    let sd = e.rx.wait_statuses(&d.wamid, 1).await;
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(e.rx.statuses_for(&c.wamid).len(), 2, "never read: {sc:?}");
    assert_eq!(
        e.rx.statuses_for(&d.wamid).len(),
        1,
        "never delivered: {sd:?}"
    );
    let outcomes: Vec<_> = e.sim.messages().iter().map(|m| m.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        vec!["failed:131026", "failed:131049", "delivered", "sent"]
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn auth_and_unknown_number_errors() {
    let e = env().await;
    let g = graph_err(
        e.client
            .send_message(PNID, "wrong", &text(CUSTOMER, "x", "a"))
            .await,
    )
    .await;
    assert_eq!((g.http_status, g.code), (401, Some(190)));
    assert_eq!(g.error_type.as_deref(), Some("OAuthException"));
    assert!(g.fbtrace_id.is_some());

    let g = graph_err(
        e.client
            .send_message("999", TOKEN, &text(CUSTOMER, "x", "a"))
            .await,
    )
    .await;
    assert_eq!(
        (g.http_status, g.code, g.subcode),
        (400, Some(100), Some(33))
    );
    assert_eq!(g.error_type.as_deref(), Some("GraphMethodException"));

    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/v25.0/{PNID}/messages", e.sim.base_url()))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], 104);

    let r = http
        .post(format!("{}/latest/{PNID}/messages", e.sim.base_url()))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "bad version segment");
    // any vNN.N is accepted
    let other = CloudApiClient::new(ClientConfig {
        version: "v19.0".into(),
        ..e.client.config().clone()
    })
    .unwrap();
    assert!(other.get_phone_number(PNID, TOKEN).await.is_ok());
    e.sim.shutdown().await;
}

#[tokio::test]
async fn malformed_payloads() {
    let e = env().await;
    let cases = [
        (
            json!({"to": CUSTOMER, "type": "text", "text": {"body": "x"}}),
            100,
        ),
        (
            json!({"messaging_product": "whatsapp", "type": "text", "text": {"body": "x"}}),
            100,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "fax", "fax": {}}),
            100,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "text"}),
            131008,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "text", "text": {}}),
            131008,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": "abc", "type": "text", "text": {"body": "x"}}),
            131009,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "audio", "audio": {"id": "1", "caption": "no"}}),
            131009,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "image", "image": {"id": "1", "link": "https://x"}}),
            131009,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "image", "image": {}}),
            131008,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "reaction", "reaction": {"emoji": "x"}}),
            131008,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "location", "location": {"latitude": 91, "longitude": 0}}),
            131009,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "contacts", "contacts": [{"name": {}}]}),
            131008,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": CUSTOMER, "type": "interactive", "interactive": {
            "type": "button", "body": {"text": "pick"}, "action": {"buttons": [
                {"type": "reply", "reply": {"id": "a", "title": "Same"}},
                {"type": "reply", "reply": {"id": "b", "title": "Same"}}]}}}),
            131009,
        ),
        (
            json!({"messaging_product": "whatsapp", "to": "15550783881", "type": "text", "text": {"body": "x"}}),
            131021,
        ),
    ];
    for (body, code) in cases {
        let (status, v) = raw_send(&e, body.clone()).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(v["error"]["code"], code, "{body} → {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().starts_with('('),
            "{v}"
        );
        assert!(v["error"]["fbtrace_id"].is_string());
    }
    let (status, _) = raw_send(&e, json!("not an object")).await;
    assert_eq!(status, 400);
    assert!(e.sim.messages().is_empty(), "nothing was accepted");
    // all of them were logged anyway
    assert_eq!(e.sim.requests().len(), 15);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn every_outbound_type_is_accepted() {
    let e = env().await;
    open_window(&e);
    let id = e
        .client
        .upload_media(
            PNID,
            TOKEN,
            Bytes::from_static(b"\x89PNG...."),
            "image/png",
            "a.png",
        )
        .await
        .unwrap();
    let target = e.sim.messages().len(); // no outbound yet; react to the inbound message
    assert_eq!(target, 0);
    let inbound_wamid = e.sim.inject_inbound(json!({"phone_number_id": PNID, "from": CUSTOMER, "type": "text", "text": {"body": "yo"}})).unwrap()["wamid"]
        .as_str()
        .unwrap()
        .to_owned();
    let bodies = [
        json!({"type": "text", "text": {"body": "hi", "preview_url": true}}),
        json!({"type": "image", "image": {"id": id, "caption": "c"}}),
        json!({"type": "video", "video": {"link": "https://example.com/v.mp4"}}),
        json!({"type": "audio", "audio": {"link": "https://example.com/a.ogg", "voice": true}}),
        json!({"type": "document", "document": {"link": "https://example.com/d.pdf", "filename": "d.pdf", "caption": "doc"}}),
        json!({"type": "sticker", "sticker": {"link": "https://example.com/s.webp"}}),
        json!({"type": "location", "location": {"latitude": 37.4, "longitude": -122.1, "name": "HQ"}}),
        json!({"type": "contacts", "contacts": [{"name": {"formatted_name": "Ann"}, "phones": [{"phone": "+1555"}]}]}),
        json!({"type": "interactive", "interactive": {"type": "list", "body": {"text": "choose"}, "action": {
            "button": "Options", "sections": [{"title": "S", "rows": [{"id": "r1", "title": "Row"}]}]}}}),
        json!({"type": "interactive", "interactive": {"type": "cta_url", "body": {"text": "go"}, "action": {
            "name": "cta_url", "parameters": {"display_text": "Open", "url": "https://example.com"}}}}),
        json!({"type": "reaction", "reaction": {"message_id": inbound_wamid, "emoji": "👍"}}),
    ];
    for b in bodies {
        let mut full = b.clone();
        full["messaging_product"] = json!("whatsapp");
        full["to"] = json!(CUSTOMER);
        let (status, v) = raw_send(&e, full).await;
        assert_eq!(status, 200, "{b} → {v}");
        assert!(
            v["messages"][0]["id"]
                .as_str()
                .unwrap()
                .starts_with("wamid.")
        );
    }
    // reaction only gets `sent`; voice audio gets `played`
    let msgs = e.sim.messages();
    let reaction = msgs.iter().find(|m| m.message_type == "reaction").unwrap();
    let audio = msgs.iter().find(|m| m.message_type == "audio").unwrap();
    e.rx.wait_statuses(&audio.wamid, 4).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(e.rx.statuses_for(&reaction.wamid).len(), 1);
    assert_eq!(
        e.rx.statuses_for(&audio.wamid)[3].status,
        DeliveryStatus::Played
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn reaction_to_unknown_message_fails_131009_and_unknown_media_131053() {
    let e = env().await;
    open_window(&e);
    let p = SendPayload::new(
        CUSTOMER,
        MessageContent::Reaction {
            reaction: tern_cloudapi::Reaction {
                message_id: "wamid.NOPE".into(),
                emoji: "x".into(),
            },
        },
    );
    let ok = e.client.send_message(PNID, TOKEN, &p).await.unwrap();
    assert_eq!(
        e.rx.wait_statuses(&ok.wamid, 1).await[0].errors[0].code,
        Some(131009)
    );
    let p = SendPayload::new(
        CUSTOMER,
        MessageContent::Image {
            image: tern_cloudapi::CaptionedMedia {
                source: tern_cloudapi::MediaSource::Id("123".into()),
                caption: None,
            },
        },
    );
    let ok = e.client.send_message(PNID, TOKEN, &p).await.unwrap();
    assert_eq!(
        e.rx.wait_statuses(&ok.wamid, 1).await[0].errors[0].code,
        Some(131053)
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn throughput_and_pair_rate_limits() {
    let e = env().await;
    open_window(&e);
    e.sim
        .patch_number(
            PNID,
            NumberPatch {
                throughput_mps: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
    e.client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "1", "a"))
        .await
        .unwrap();
    let err = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "2", "b"))
        .await
        .unwrap_err();
    assert_eq!(err.graph().unwrap().code, Some(130429));
    assert_eq!(err.retry_class(), RetryClass::RetrySoon);
    assert_eq!(err.failure().code, "network_rate_limited");

    e.sim
        .patch_number(
            PNID,
            NumberPatch {
                throughput_mps: Some(100),
                pair_burst: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
    e.client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "1", "c"))
        .await
        .unwrap();
    let err = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "2", "d"))
        .await
        .unwrap_err();
    assert_eq!(err.graph().unwrap().code, Some(131056));
    assert_eq!(err.retry_class(), RetryClass::RetrySoon);
    // another recipient is not affected
    e.sim
        .set_window(PNID, "15550001111", Some(e.sim.advance_clock(0)));
    e.client
        .send_message(PNID, TOKEN, &text("15550001111", "x", "e"))
        .await
        .unwrap();
    e.sim.shutdown().await;
}

#[tokio::test]
async fn deterministic_ids_with_seed() {
    async fn wamids() -> Vec<String> {
        let e = env().await;
        open_window(&e);
        let mut out = Vec::new();
        for i in 0..3 {
            out.push(
                e.client
                    .send_message(PNID, TOKEN, &text(CUSTOMER, "x", &i.to_string()))
                    .await
                    .unwrap()
                    .wamid,
            );
        }
        e.sim.shutdown().await;
        out
    }
    let a = wamids().await;
    let b = wamids().await;
    assert_eq!(a, b);
    assert_eq!(a.iter().collect::<std::collections::HashSet<_>>().len(), 3);
}
