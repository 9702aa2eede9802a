//! Shared setup: a simulator with one number, a webhook receiver that verifies every
//! signature and keeps the raw and parsed bodies, and a Cloud API client.

pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

pub use axum::{
    Router,
    body::Bytes,
    extract::{Query, State},
    http::{HeaderMap, StatusCode},
    routing::post,
};
pub use serde_json::{Value, json};
pub use tern_cloudapi::{
    Change, ClientConfig, CloudApiClient, DeliveryStatus, InboundContent, MessageContent,
    Notification, RetryClass, SendError, SendPayload, StatusUpdate, Template, TemplateEvent,
    TemplateLanguage, parse_notification, verify_signature,
};
pub use tern_simulator::{
    Behaviour, ForcedAction, NumberPatch, NumberSpec, RecipientSpec, SimArgs, SimHandle,
    TemplateSeed,
};

pub const SECRET: &str = "app-secret";
pub const PNID: &str = "106540352242922";
pub const WABA: &str = "102290129340398";
pub const TOKEN: &str = "tok-1";
pub const CUSTOMER: &str = "16505551234";

// ---- webhook receiver ----------------------------------------------------------------------

#[derive(Clone, Default)]
pub struct Receiver {
    pub bodies: Arc<Mutex<Vec<Notification>>>,
    pub raw: Arc<Mutex<Vec<Value>>>,
    pub bad_signatures: Arc<Mutex<u32>>,
    pub fail_next: Arc<Mutex<u32>>,
}

pub async fn hook(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
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

pub async fn handshake(Query(q): Query<Vec<(String, String)>>) -> (StatusCode, String) {
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
    pub async fn start() -> (Self, String) {
        let r = Receiver::default();
        let app = Router::new()
            .route("/hook", post(hook).get(handshake))
            .with_state(r.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (r, format!("http://{addr}/hook"))
    }

    pub fn statuses(&self) -> Vec<StatusUpdate> {
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

    pub fn statuses_for(&self, wamid: &str) -> Vec<StatusUpdate> {
        self.statuses()
            .into_iter()
            .filter(|s| s.id == wamid)
            .collect()
    }

    pub async fn wait_statuses(&self, wamid: &str, n: usize) -> Vec<StatusUpdate> {
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

    pub async fn wait_until(&self, what: &str, f: impl Fn(&[Notification]) -> bool) {
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

pub fn fast_args() -> SimArgs {
    let mut a = SimArgs::local(SECRET);
    a.sent_delay_ms = 5;
    a.delivered_delay_ms = 5;
    a.read_delay_ms = 5;
    a.template_review_delay_ms = Some(10);
    a.webhook_retry_base_ms = 10;
    a.seed = Some(7);
    a.verify_token = Some("vt".into());
    a
}

pub struct Env {
    pub sim: SimHandle,
    pub rx: Receiver,
    pub client: CloudApiClient,
}

pub async fn env_with(args: SimArgs) -> Env {
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

pub async fn env() -> Env {
    env_with(fast_args()).await
}

pub fn client_for(sim: &SimHandle, timeout_ms: u64) -> CloudApiClient {
    CloudApiClient::new(ClientConfig {
        base_url: sim.base_url(),
        version: "v25.0".into(),
        connect_timeout: Duration::from_millis(500),
        request_timeout: Duration::from_millis(timeout_ms),
    })
    .unwrap()
}

pub fn text(to: &str, body: &str, tern_id: &str) -> SendPayload {
    SendPayload::new(to, MessageContent::text(body)).callback_data(tern_id)
}

pub fn open_window(e: &Env) {
    e.sim
        .inject_inbound(json!({"phone_number_id": PNID, "from": CUSTOMER, "type": "text", "text": {"body": "hi"}}))
        .unwrap();
}

pub async fn graph_err(
    r: Result<tern_cloudapi::SendAccepted, SendError>,
) -> tern_cloudapi::GraphError {
    match r {
        Err(SendError::Graph(g)) => *g,
        other => panic!("expected a Graph error, got {other:?}"),
    }
}

pub fn seed_template(e: &Env, name: &str, components: Value) -> String {
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

pub fn template(name: &str, lang: &str, components: Option<Value>) -> SendPayload {
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

pub async fn raw_send(e: &Env, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/v25.0/{PNID}/messages", e.sim.base_url()))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}
