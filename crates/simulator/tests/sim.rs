#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end tests: `tern_cloudapi::CloudApiClient` against the simulator, with a local
//! webhook receiver that verifies every signature.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::{
    Router,
    body::Bytes,
    extract::{Query, State},
    http::{HeaderMap, StatusCode},
    routing::post,
};
use serde_json::{Value, json};
use tern_cloudapi::{
    Change, ClientConfig, CloudApiClient, DeliveryStatus, InboundContent, MessageContent,
    Notification, RetryClass, SendError, SendPayload, StatusUpdate, Template, TemplateEvent,
    TemplateLanguage, parse_notification, verify_signature,
};
use tern_simulator::{
    Behaviour, ForcedAction, NumberPatch, NumberSpec, RecipientSpec, SimArgs, SimHandle,
    TemplateSeed,
};

const SECRET: &str = "app-secret";
const PNID: &str = "106540352242922";
const WABA: &str = "102290129340398";
const TOKEN: &str = "tok-1";
const CUSTOMER: &str = "16505551234";

// ---- webhook receiver ----------------------------------------------------------------------

#[derive(Clone, Default)]
struct Receiver {
    bodies: Arc<Mutex<Vec<Notification>>>,
    raw: Arc<Mutex<Vec<Value>>>,
    bad_signatures: Arc<Mutex<u32>>,
    fail_next: Arc<Mutex<u32>>,
}

async fn hook(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let sig = headers
        .get("x-hub-signature-256")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !verify_signature(SECRET.as_bytes(), &body, sig) {
        *r.bad_signatures.lock().unwrap() += 1;
        return StatusCode::UNAUTHORIZED;
    }
    {
        let mut f = r.fail_next.lock().unwrap();
        if *f > 0 {
            *f -= 1;
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
    }
    assert!(body.is_ascii(), "non-ASCII must be escaped");
    r.raw
        .lock()
        .unwrap()
        .push(serde_json::from_slice(&body).unwrap());
    r.bodies
        .lock()
        .unwrap()
        .push(parse_notification(&body).unwrap());
    StatusCode::OK
}

async fn handshake(Query(q): Query<Vec<(String, String)>>) -> (StatusCode, String) {
    let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if get("hub.mode").as_deref() == Some("subscribe")
        && get("hub.verify_token").as_deref() == Some("vt")
    {
        (StatusCode::OK, get("hub.challenge").unwrap_or_default())
    } else {
        (StatusCode::FORBIDDEN, String::new())
    }
}

impl Receiver {
    async fn start() -> (Self, String) {
        let r = Receiver::default();
        let app = Router::new()
            .route("/hook", post(hook).get(handshake))
            .with_state(r.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (r, format!("http://{addr}/hook"))
    }

    fn statuses(&self) -> Vec<StatusUpdate> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .flat_map(|n| {
                n.messages_values()
                    .flat_map(|(_, v)| v.statuses.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    fn statuses_for(&self, wamid: &str) -> Vec<StatusUpdate> {
        self.statuses()
            .into_iter()
            .filter(|s| s.id == wamid)
            .collect()
    }

    async fn wait_statuses(&self, wamid: &str, n: usize) -> Vec<StatusUpdate> {
        for _ in 0..500 {
            let s = self.statuses_for(wamid);
            if s.len() >= n {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "timed out waiting for {n} statuses of {wamid}: {:?}",
            self.statuses_for(wamid)
        );
    }

    async fn wait_until(&self, what: &str, f: impl Fn(&[Notification]) -> bool) {
        for _ in 0..500 {
            if f(&self.bodies.lock().unwrap()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("timed out waiting for {what}");
    }
}

// ---- setup ---------------------------------------------------------------------------------

fn fast_args() -> SimArgs {
    let mut a = SimArgs::local(SECRET);
    a.sent_delay_ms = 5;
    a.delivered_delay_ms = 5;
    a.read_delay_ms = 5;
    a.template_review_delay_ms = 10;
    a.webhook_retry_base_ms = 10;
    a.seed = Some(7);
    a.verify_token = Some("vt".into());
    a
}

struct Env {
    sim: SimHandle,
    rx: Receiver,
    client: CloudApiClient,
}

async fn env_with(args: SimArgs) -> Env {
    let sim = tern_simulator::start(args).await.unwrap();
    sim.register_number(NumberSpec {
        id: PNID.into(),
        display_phone_number: "+1 555-078-3881".into(),
        waba_id: WABA.into(),
        access_token: TOKEN.into(),
        throughput_mps: None,
        verified_name: Some("Tern Test".into()),
    })
    .unwrap();
    // the receiver starts after the simulator, as Tern does in tests
    let (rx, url) = Receiver::start().await;
    sim.set_callback_url(Some(url));
    let client = client_for(&sim, 2000);
    Env { sim, rx, client }
}

async fn env() -> Env {
    env_with(fast_args()).await
}

fn client_for(sim: &SimHandle, timeout_ms: u64) -> CloudApiClient {
    CloudApiClient::new(ClientConfig {
        base_url: sim.base_url(),
        version: "v25.0".into(),
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_millis(timeout_ms),
    })
    .unwrap()
}

fn text(to: &str, body: &str, tern_id: &str) -> SendPayload {
    SendPayload::new(to, MessageContent::text(body)).callback_data(tern_id)
}

fn open_window(e: &Env) {
    e.sim
        .inject_inbound(json!({"phone_number_id": PNID, "from": CUSTOMER, "type": "text", "text": {"body": "hi"}}))
        .unwrap();
}

async fn graph_err(r: Result<tern_cloudapi::SendAccepted, SendError>) -> tern_cloudapi::GraphError {
    match r {
        Err(SendError::Graph(g)) => *g,
        other => panic!("expected a Graph error, got {other:?}"),
    }
}

fn seed_template(e: &Env, name: &str, components: Value) -> String {
    e.sim
        .seed_template(TemplateSeed {
            waba_id: WABA.into(),
            name: name.into(),
            language: "en_US".into(),
            category: "UTILITY".into(),
            status: "APPROVED".into(),
            parameter_format: None,
            components: serde_json::from_value(components).unwrap(),
        })
        .id
}

fn template(name: &str, lang: &str, components: Option<Value>) -> SendPayload {
    SendPayload::new(
        CUSTOMER,
        MessageContent::Template {
            template: Template {
                name: name.into(),
                language: TemplateLanguage::new(lang),
                components: components.map(|c| serde_json::from_value(c).unwrap()),
            },
        },
    )
    .callback_data("tpl-msg")
}

// ---- tests ---------------------------------------------------------------------------------

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
    let pricing = st[0].pricing.as_ref().unwrap();
    assert_eq!(pricing.category.as_deref(), Some("service"));
    assert_eq!(
        pricing.pricing_type.as_deref(),
        Some("free_customer_service")
    );
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

async fn raw_send(e: &Env, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/v25.0/{PNID}/messages", e.sim.base_url()))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
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
async fn template_lifecycle_and_send_errors() {
    let e = env().await;
    // create → PENDING, auto-review → APPROVED webhook
    let created = e
        .client
        .create_template(
            WABA,
            TOKEN,
            &json!({"name": "order_update", "language": "en_US", "category": "UTILITY",
            "components": [{"type": "HEADER", "format": "TEXT", "text": "Order {{1}}"},
                           {"type": "BODY", "text": "Hi {{1}}, your order {{2}} shipped."}]}),
        )
        .await
        .unwrap();
    assert_eq!(created.status.as_deref(), Some("PENDING"));
    assert_eq!(created.category.as_deref(), Some("UTILITY"));
    e.rx.wait_until("template approval", |ns| {
        ns.iter().any(|n| {
            n.template_updates()
                .any(|(_, u)| u.event == TemplateEvent::Approved)
        })
    })
    .await;
    {
        let bodies = e.rx.bodies.lock().unwrap();
        let (waba, up) = bodies
            .iter()
            .find_map(|n| n.template_updates().next())
            .unwrap();
        assert_eq!(waba, WABA);
        assert_eq!(up.message_template_id.as_deref(), Some(created.id.as_str()));
        assert_eq!(up.name.as_deref(), Some("order_update"));
        assert_eq!(up.language.as_deref(), Some("en_US"));
    }
    // duplicate name+language → 100
    let dup = e
        .client
        .create_template(
            WABA,
            TOKEN,
            &json!({"name": "order_update", "language": "en_US", "category": "UTILITY",
            "components": [{"type": "BODY", "text": "x"}]}),
        )
        .await
        .unwrap_err();
    assert_eq!(dup.graph().unwrap().code, Some(100));

    let good = json!([{"type": "header", "parameters": [{"type": "text", "text": "A1"}]},
                      {"type": "body", "parameters": [{"type": "text", "text": "Ann"}, {"type": "text", "text": "A1"}]}]);
    let ok = e
        .client
        .send_message(PNID, TOKEN, &template("order_update", "en_US", Some(good)))
        .await
        .unwrap();
    assert_eq!(ok.message_status.as_deref(), Some("accepted"));
    let st = e.rx.wait_statuses(&ok.wamid, 3).await;
    assert_eq!(
        st[0].pricing.as_ref().unwrap().category.as_deref(),
        Some("utility"),
        "templates need no window"
    );

    let cases = [
        (template("order_update", "de", None), 132001),
        (template("nope", "en_US", None), 132001),
        (
            template(
                "order_update",
                "en_US",
                Some(json!([{"type": "body", "parameters": [{"type": "text", "text": "x"}]}])),
            ),
            132000,
        ),
        (
            template(
                "order_update",
                "en_US",
                Some(json!([
            {"type": "header", "parameters": [{"type": "text", "text": "A1"}]},
            {"type": "body", "parameters": [{"type": "text", "text": "line\nbreak"}, {"type": "text", "text": "A1"}]}])),
            ),
            132018,
        ),
        (
            template(
                "order_update",
                "en_US",
                Some(json!([
            {"type": "header", "parameters": [{"type": "text", "text": "A1"}]},
            {"type": "body", "parameters": [{"type": "text", "text": "Ann", "parameter_name": "x"}, {"type": "text", "text": "A1"}]}])),
            ),
            132012,
        ),
    ];
    for (p, code) in cases {
        let g = graph_err(e.client.send_message(PNID, TOKEN, &p).await).await;
        assert_eq!(g.code, Some(code), "{g:?}");
        assert_eq!(g.retry_class(), RetryClass::Never);
    }

    // named templates, media headers, pause/disable
    let named = seed_template(
        &e,
        "welcome",
        json!([{"type": "HEADER", "format": "IMAGE"},
        {"type": "BODY", "text": "Hello {{first_name}}"}]),
    );
    let body_named = |pname: &str, htype: &str| {
        json!([{"type": "header", "parameters": [{"type": htype, htype: {"link": "https://x/y"}}]},
               {"type": "body", "parameters": [{"type": "text", "text": "Ann", "parameter_name": pname}]}])
    };
    assert!(
        e.client
            .send_message(
                PNID,
                TOKEN,
                &template("welcome", "en_US", Some(body_named("first_name", "image")))
            )
            .await
            .is_ok()
    );
    let g = graph_err(
        e.client
            .send_message(
                PNID,
                TOKEN,
                &template("welcome", "en_US", Some(body_named("other", "image"))),
            )
            .await,
    )
    .await;
    assert_eq!(g.code, Some(132012));
    let g = graph_err(
        e.client
            .send_message(
                PNID,
                TOKEN,
                &template("welcome", "en_US", Some(body_named("first_name", "video"))),
            )
            .await,
    )
    .await;
    assert_eq!(g.code, Some(132012));

    e.sim.set_template_status(&named, "PAUSED", None).unwrap();
    let g = graph_err(
        e.client
            .send_message(
                PNID,
                TOKEN,
                &template("welcome", "en_US", Some(body_named("first_name", "image"))),
            )
            .await,
    )
    .await;
    assert_eq!(g.code, Some(132015));
    e.sim.set_template_status(&named, "DISABLED", None).unwrap();
    let g = graph_err(
        e.client
            .send_message(
                PNID,
                TOKEN,
                &template("welcome", "en_US", Some(body_named("first_name", "image"))),
            )
            .await,
    )
    .await;
    assert_eq!(g.code, Some(132016));
    e.rx.wait_until("disabled webhook", |ns| {
        ns.iter().any(|n| {
            n.template_updates()
                .any(|(_, u)| u.event == TemplateEvent::Disabled)
        })
    })
    .await;

    // listing, paged
    for i in 0..3 {
        seed_template(
            &e,
            &format!("bulk_{i}"),
            json!([{"type": "BODY", "text": "x"}]),
        );
    }
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    let http = reqwest::Client::new();
    loop {
        let mut url = format!(
            "{}/v25.0/{WABA}/message_templates?limit=2",
            e.sim.base_url()
        );
        if let Some(c) = &cursor {
            url.push_str(&format!("&after={c}"));
        }
        let v: Value = http
            .get(url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        all.extend(v["data"].as_array().unwrap().clone());
        if v["paging"]["next"].is_string() {
            cursor = v["paging"]["cursors"]["after"].as_str().map(str::to_owned);
        } else {
            break;
        }
    }
    assert_eq!(all.len(), 5);
    let page = e.client.list_templates(WABA, TOKEN, None).await.unwrap();
    assert_eq!(page.templates.len(), 5);
    assert_eq!(page.next_cursor, None);
    let t = page
        .templates
        .iter()
        .find(|t| t.name == "order_update")
        .unwrap();
    assert_eq!(t.status, "APPROVED");
    e.sim.shutdown().await;
}

#[tokio::test]
async fn template_rejection_in_reject_mode() {
    let mut args = fast_args();
    args.template_review = tern_simulator::ReviewMode::Reject;
    let e = env_with(args).await;
    e.client
        .create_template(
            WABA,
            TOKEN,
            &json!({"name": "promo", "language": "en", "category": "marketing",
            "components": [{"type": "BODY", "text": "Sale!"}]}),
        )
        .await
        .unwrap();
    e.rx.wait_until("rejection", |ns| {
        ns.iter().any(|n| {
            n.template_updates().any(|(_, u)| {
                u.event == TemplateEvent::Rejected && u.reason.as_deref() == Some("INVALID_FORMAT")
            })
        })
    })
    .await;
    let page = e.client.list_templates(WABA, TOKEN, None).await.unwrap();
    assert_eq!(
        page.templates[0].rejected_reason.as_deref(),
        Some("INVALID_FORMAT")
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
async fn forced_errors_hangs_and_drops() {
    let e = env().await;
    open_window(&e);
    e.sim
        .force(
            PNID,
            ForcedAction::Error {
                code: 130429,
                subcode: None,
                http_status: None,
                title: None,
                details: None,
            },
            2,
        )
        .unwrap();
    for _ in 0..2 {
        let err = e
            .client
            .send_message(PNID, TOKEN, &text(CUSTOMER, "x", "f"))
            .await
            .unwrap_err();
        assert_eq!(err.graph().unwrap().code, Some(130429));
    }
    e.client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "x", "after"))
        .await
        .unwrap();

    e.sim
        .force(PNID, ForcedAction::Html { http_status: 502 }, 1)
        .unwrap();
    let err = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "x", "html"))
        .await
        .unwrap_err();
    assert_eq!(err.graph().unwrap().http_status, 502);
    assert_eq!(err.retry_class(), RetryClass::RetryLater);

    // hang past the client timeout: the outcome is unknown, but the network did accept it
    e.sim
        .force(
            PNID,
            ForcedAction::Hang {
                ms: Some(2000),
                accept: true,
            },
            1,
        )
        .unwrap();
    let short = client_for(&e.sim, 300);
    let err = short
        .send_message(PNID, TOKEN, &text(CUSTOMER, "x", "hung-msg"))
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::OutcomeUnknown { .. }), "{err:?}");
    let m = e
        .sim
        .messages()
        .into_iter()
        .find(|m| m.biz_opaque_callback_data.as_deref() == Some("hung-msg"))
        .unwrap();
    let st = e.rx.wait_statuses(&m.wamid, 3).await;
    assert_eq!(
        st[0].biz_opaque_callback_data.as_deref(),
        Some("hung-msg"),
        "status matchable without the wamid"
    );

    // dropped connection after reading the request
    e.sim
        .force(PNID, ForcedAction::Drop { accept: true }, 1)
        .unwrap();
    let err = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "x", "dropped"))
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::OutcomeUnknown { .. }), "{err:?}");
    // not accepted variant: nothing is recorded as a message
    e.sim
        .force(PNID, ForcedAction::Drop { accept: false }, 1)
        .unwrap();
    let err = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "x", "dropped-2"))
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::OutcomeUnknown { .. }), "{err:?}");
    let msgs = e.sim.messages();
    assert!(
        msgs.iter()
            .any(|m| m.biz_opaque_callback_data.as_deref() == Some("dropped"))
    );
    assert!(
        !msgs
            .iter()
            .any(|m| m.biz_opaque_callback_data.as_deref() == Some("dropped-2"))
    );

    // fail_async: 200 then failed
    e.sim
        .force(
            PNID,
            ForcedAction::FailAsync {
                code: 131026,
                details: None,
            },
            1,
        )
        .unwrap();
    let ok = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "x", "fa"))
        .await
        .unwrap();
    assert_eq!(
        e.rx.wait_statuses(&ok.wamid, 1).await[0].errors[0].code,
        Some(131026)
    );

    // the request log shows each attempt exactly once with the forced action
    let reqs = e.sim.requests();
    let forced: Vec<_> = reqs.iter().filter_map(|r| r.forced.clone()).collect();
    assert_eq!(
        forced,
        vec![
            "error",
            "error",
            "html",
            "hang",
            "drop",
            "drop",
            "fail_async"
        ]
    );
    assert_eq!(
        reqs.iter()
            .filter(|r| r.biz_opaque_callback_data.as_deref() == Some("hung-msg"))
            .count(),
        1
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn webhook_retries_until_200() {
    let e = env().await;
    *e.rx.fail_next.lock().unwrap() = 2;
    open_window(&e);
    e.rx.wait_until("inbound after retries", |ns| {
        ns.iter()
            .any(|n| n.messages_values().any(|(_, v)| !v.messages.is_empty()))
    })
    .await;
    // The third attempt is recorded once its answer is back, which can trail the receiver.
    let mut d = e.sim.deliveries();
    for _ in 0..200 {
        if d.len() >= 3 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        d = e.sim.deliveries();
    }
    let attempts: Vec<_> = d.iter().map(|r| (r.attempt, r.response_status)).collect();
    assert_eq!(
        attempts,
        vec![(1, Some(500)), (2, Some(500)), (3, Some(200))]
    );
    assert!(
        d.iter()
            .all(|r| r.post_id == d[0].post_id && r.signature.starts_with("sha256="))
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn webhooks_wait_for_a_callback_url() {
    let mut args = fast_args();
    args.webhook_retry_base_ms = 20;
    let sim = tern_simulator::start(args).await.unwrap();
    sim.register_number(NumberSpec {
        id: PNID.into(),
        display_phone_number: "15550783881".into(),
        waba_id: WABA.into(),
        access_token: TOKEN.into(),
        throughput_mps: Some(10),
        verified_name: None,
    })
    .unwrap();
    sim.inject_inbound(json!({"phone_number_id": PNID, "from": CUSTOMER, "type": "text", "text": {"body": "early"}}))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let (rx, url) = Receiver::start().await;
    sim.set_callback_url(Some(url));
    rx.wait_until("late delivery", |ns| !ns.is_empty()).await;
    assert!(
        sim.deliveries()[0]
            .error
            .as_deref()
            .unwrap()
            .contains("no callback")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn chaos_duplicates_batches_and_out_of_order() {
    let mut args = fast_args();
    args.duplicate = 1.0;
    args.batch_window_ms = 200;
    args.out_of_order = 1.0;
    let e = env_with(args).await;
    open_window(&e);
    let ok = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "x", "chaos"))
        .await
        .unwrap();
    let st = e.rx.wait_statuses(&ok.wamid, 6).await;
    // duplicated deliveries
    assert_eq!(st.len(), 6);
    // several statuses batched into one POST
    let max_per_post =
        e.rx.bodies
            .lock()
            .unwrap()
            .iter()
            .map(|n| {
                n.messages_values()
                    .map(|(_, v)| v.statuses.len())
                    .sum::<usize>()
            })
            .max()
            .unwrap();
    assert!(max_per_post >= 2, "expected a batched POST");
    // A delivery is recorded once its POST has been answered, which can trail the receiver
    // seeing the body; wait (bounded) for the duplicate's record.
    let mut recorded_duplicate = false;
    for _ in 0..200 {
        recorded_duplicate = e.sim.deliveries().iter().any(|d| d.duplicate);
        if recorded_duplicate {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(
        recorded_duplicate,
        "a duplicated delivery is recorded as such"
    );
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

#[tokio::test]
async fn media_upload_info_download_and_inbound_media() {
    let e = env().await;
    let id = e
        .client
        .upload_media(
            PNID,
            TOKEN,
            Bytes::from_static(b"%PDF-1.4 test"),
            "application/pdf",
            "a.pdf",
        )
        .await
        .unwrap();
    let info = e.client.get_media(&id, TOKEN).await.unwrap();
    assert_eq!(info.mime_type.as_deref(), Some("application/pdf"));
    assert_eq!(info.file_size, Some(13));
    let bytes = e.client.download_media(&info.url, TOKEN).await.unwrap();
    assert_eq!(&bytes[..], b"%PDF-1.4 test");
    // the download URL needs the token
    let r = reqwest::get(&info.url).await.unwrap();
    assert_eq!(r.status(), 401);

    let err = e
        .client
        .upload_media(
            PNID,
            TOKEN,
            Bytes::from_static(b"x"),
            "application/x-msdownload",
            "a.exe",
        )
        .await
        .unwrap_err();
    assert_eq!(err.graph().unwrap().code, Some(131053));

    // inbound image: media id usable with GET /{media-id}
    e.sim
        .inject_inbound(
            json!({"phone_number_id": PNID, "from": CUSTOMER, "profile_name": "Ann",
            "type": "image", "image": {"caption": "look", "mime_type": "image/png"},
            "media_base64": "iVBORw0KGgo="}),
        )
        .unwrap();
    e.rx.wait_until("inbound image", |ns| {
        ns.iter()
            .any(|n| n.messages_values().any(|(_, v)| !v.messages.is_empty()))
    })
    .await;
    let media_id = {
        let bodies = e.rx.bodies.lock().unwrap();
        let (_, v) = bodies
            .iter()
            .find_map(|n| n.messages_values().next())
            .unwrap();
        assert_eq!(v.profile_name(CUSTOMER), Some("Ann"));
        match &v.messages[0].content {
            InboundContent::Image(m) => {
                assert_eq!(m.caption.as_deref(), Some("look"));
                assert!(m.sha256.is_some());
                m.id.clone().unwrap()
            }
            other => panic!("{other:?}"),
        }
    };
    let info = e.client.get_media(&media_id, TOKEN).await.unwrap();
    let bytes = e.client.download_media(&info.url, TOKEN).await.unwrap();
    assert_eq!(&bytes[..], b"\x89PNG\r\n\x1a\n");
    e.sim.shutdown().await;
}

#[tokio::test]
async fn inbound_every_type_parses() {
    let e = env().await;
    let items = [
        json!({"type": "text", "text": {"body": "hi"}}),
        json!({"type": "image", "image": {}}),
        json!({"type": "audio", "audio": {"voice": true}}),
        json!({"type": "video", "video": {}}),
        json!({"type": "document", "document": {"filename": "x.pdf"}}),
        json!({"type": "sticker", "sticker": {"animated": false}}),
        json!({"type": "location", "location": {"latitude": "1.5", "longitude": "2.5"}}),
        json!({"type": "contacts", "contacts": [{"name": {"formatted_name": "A"}}]}),
        json!({"type": "interactive", "interactive": {"type": "button_reply", "button_reply": {"id": "y", "title": "Yes"}}}),
        json!({"type": "interactive", "interactive": {"type": "list_reply", "list_reply": {"id": "r", "title": "Row"}}}),
        json!({"type": "interactive", "interactive": {"type": "nfm_reply", "nfm_reply": {"name": "flow", "response_json": "{}"}}}),
        json!({"type": "button", "button": {"text": "Stop", "payload": "STOP"}, "context": {"from": "15550783881", "id": "wamid.T"}}),
        json!({"type": "reaction", "reaction": {"message_id": "wamid.T", "emoji": "❤"}}),
        json!({"type": "order", "order": {"catalog_id": "c", "product_items": []}}),
        json!({"type": "system", "system": {"body": "changed", "type": "customer_changed_number", "new_wa_id": "1555"}}),
        json!({"type": "unsupported"}),
    ];
    let n = items.len();
    for mut it in items {
        it["phone_number_id"] = json!(PNID);
        it["from"] = json!(CUSTOMER);
        e.sim.inject_inbound(it).unwrap();
    }
    e.rx.wait_until("all inbound", |ns| {
        ns.iter()
            .map(|x| {
                x.messages_values()
                    .map(|(_, v)| v.messages.len())
                    .sum::<usize>()
            })
            .sum::<usize>()
            == n
    })
    .await;
    let bodies = e.rx.bodies.lock().unwrap().clone();
    let msgs: Vec<_> = bodies
        .iter()
        .flat_map(|x| {
            x.messages_values()
                .flat_map(|(_, v)| v.messages.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    let unknown: Vec<_> = msgs
        .iter()
        .filter(|m| matches!(m.content, InboundContent::Unknown { .. }))
        .collect();
    assert!(unknown.is_empty(), "{unknown:?}");
    let unsupported = msgs.iter().find(|m| m.type_name == "unsupported").unwrap();
    assert_eq!(unsupported.errors[0].code, Some(131051));
    assert!(
        msgs.iter()
            .all(|m| m.id.starts_with("wamid.") && m.timestamp.is_some())
    );
    assert!(bodies.iter().all(|b| {
        b.entries
            .iter()
            .all(|en| en.changes.iter().all(|c| matches!(c, Change::Messages(_))))
    }));
    e.sim.shutdown().await;
}

#[tokio::test]
async fn control_api_over_http_and_handshake() {
    let e = env().await;
    let http = reqwest::Client::new();
    let base = e.sim.base_url();
    let r = http
        .post(format!("{base}/_sim/numbers"))
        .json(&json!({"id": "222", "display_phone_number": "+15550001234", "waba_id": "W2", "access_token": "t2", "throughput_mps": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let n = e.client.get_phone_number("222", "t2").await.unwrap();
    assert_eq!(n.display_phone_number.as_deref(), Some("+15550001234"));
    assert_eq!(n.throughput_level.as_deref(), Some("STANDARD"));
    assert_eq!(n.quality_rating.as_deref(), Some("GREEN"));

    let r = http
        .post(format!("{base}/_sim/recipients"))
        .json(&json!({"wa_id": "+1 555 000 9999", "behaviour": "not_on_whatsapp"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = http
        .post(format!("{base}/_sim/recipients"))
        .json(&json!({"behaviour": 3}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    let r = http
        .post(format!("{base}/_sim/numbers/{PNID}/force"))
        .json(&json!({"action": "error", "code": 131000, "times": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let err = e
        .client
        .send_message(PNID, TOKEN, &template("x", "en", None))
        .await
        .unwrap_err();
    assert_eq!(err.graph().unwrap().code, Some(131000));
    assert_eq!(err.graph().unwrap().http_status, 500);
    assert_eq!(err.retry_class(), RetryClass::RetryLater);

    let r = http
        .post(format!("{base}/_sim/inbound"))
        .json(&json!({"phone_number_id": PNID, "from": CUSTOMER, "type": "text", "text": {"body": "via http"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let v: Value = r.json().await.unwrap();
    assert!(v["wamid"].as_str().unwrap().starts_with("wamid."));

    let v: Value = http
        .get(format!(
            "{base}/_sim/requests?method=POST&path_contains=/messages"
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 1);

    let v: Value = http
        .post(format!("{base}/_sim/callback/verify"))
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["verified"], true, "{v}");
    let v: Value = http
        .post(format!("{base}/_sim/callback/verify"))
        .json(&json!({"verify_token": "wrong"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["verified"], false);

    let r = http
        .post(format!("{base}/_sim/reset"))
        .json(&json!({"keep_numbers": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(e.sim.requests().is_empty());
    assert!(
        e.client.get_phone_number("222", "t2").await.is_ok(),
        "numbers kept"
    );
    http.post(format!("{base}/_sim/reset"))
        .send()
        .await
        .unwrap();
    let err = e.client.get_phone_number("222", "t2").await.unwrap_err();
    assert_eq!(err.graph().unwrap().code, Some(190));
    e.sim.shutdown().await;
}

#[tokio::test]
async fn cli_args_parse() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }
    let cli = Cli::try_parse_from([
        "tern",
        "--listen",
        "127.0.0.1:0",
        "--app-secret",
        "s",
        "--callback-url",
        "http://x/y",
        "--seed",
        "3",
        "--sent-delay-ms",
        "0",
        "--duplicate",
        "0.5",
        "--number",
        "1:+1555:9:tok:10",
        "--template-review",
        "manual",
    ])
    .unwrap();
    assert_eq!(cli.sim.seed, Some(3));
    assert_eq!(cli.sim.sent_delay_ms, 0);
    assert_eq!(cli.sim.template_review, tern_simulator::ReviewMode::Manual);
    let h = tern_simulator::start(cli.sim).await.unwrap();
    assert_ne!(h.addr().port(), 0);
    let c = client_for(&h, 1000);
    assert!(c.get_phone_number("1", "tok").await.is_ok());
    h.shutdown().await;
}
