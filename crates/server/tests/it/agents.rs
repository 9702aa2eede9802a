//! Conversations for agents over HTTP, on SQLite and PostgreSQL, with the simulator as the
//! network in both directions (the customer's messages reach Tern through its signed
//! webhook, so the network knows them): read marks with and without a typing indicator (the
//! network's exact request), the earlier messages read too, repeats, refusals (an outbound
//! message, a 31-day-old one, the network unreachable: nothing recorded); block and unblock
//! (twice each), a send to a blocked contact, a customer silent for 25 hours, a campaign
//! with a blocked recipient.

use crate::campaigns::{act, approved_template, call, create};
use crate::common::{APP_SECRET, Backend, TestApp, eventually_within, send};
use crate::network_webhook::{envelope, messages_change, text_message};
use serde_json::{Value, json};
use tern_simulator::{NumberSpec, SimHandle};

const API: &str = "/api/public/v1";
const PN: &str = "555000321";
const CUSTOMER: &str = "447700900321";
const DAY_SECS: i64 = 24 * 3600;

/// Tern (passes run by `settle`) with the simulator as its network and its webhook sender,
/// one number, and the owner's key.
struct Agents {
    app: TestApp,
    sim: SimHandle,
    key: String,
}

impl tern_store::testkit::Fixture for Agents {
    type Arg<'a> = &'a Agents;

    async fn start(backend: Backend) -> Agents {
        let sim = tern_simulator::start(tern_simulator::SimArgs::local(APP_SECRET))
            .await
            .unwrap();
        let app = TestApp::builder(backend)
            .graph(&sim.base_url())
            .start()
            .await;
        sim.set_callback_url(Some(app.url("/webhooks/whatsapp")));
        sim.register_number(NumberSpec {
            id: PN.into(),
            display_phone_number: "+14155550321".into(),
            waba_id: "waba1".into(),
            access_token: "token".into(),
            throughput_mps: None,
            verified_name: None,
        })
        .unwrap();
        app.add_number(&app.org_id, PN, "+14155550321").await;
        let key = app.owner_key("full_access").await.1;
        Agents { app, sim, key }
    }

    fn arg(&self) -> &Agents {
        self
    }

    async fn stop(self) {
        self.sim.shutdown().await;
        self.app.stop().await;
    }
}

impl Agents {
    /// `from` writes to the number (at the network's time `ts`, default now) through the
    /// simulator; once Tern has applied it, its message id.
    async fn writes(&self, from: &str, body: &str, ts: Option<i64>) -> (String, String) {
        let mut msg =
            json!({"phone_number_id": PN, "from": from, "type": "text", "text": {"body": body}});
        if let Some(ts) = ts {
            msg["timestamp"] = json!(ts);
        }
        let wamid = self.sim.inject_inbound(msg).unwrap()["wamid"]
            .as_str()
            .unwrap()
            .to_string();
        // The network delivers on its own time (status reports of earlier sends too).
        let id = eventually_within(
            std::time::Duration::from_secs(10),
            "the customer's message in Tern",
            || async {
                self.app.settle().await;
                self.app
                    .db
                    .message_id_by_wamid(self.app.org_uuid(), &wamid)
                    .await
                    .unwrap()
            },
        )
        .await;
        (id.to_string(), wamid)
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = self.app.url(&format!("{API}{path}"));
        let mut req = match method {
            "POST" => self.app.http.post(url),
            "DELETE" => self.app.http.delete(url),
            _ => self.app.http.get(url),
        }
        .bearer_auth(&self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let (s, _, b) = send(req).await;
        (s, b)
    }

    async fn message(&self, id: &str) -> Value {
        let (s, m) = self.call("GET", &format!("/messages/{id}"), None).await;
        assert_eq!(s, 200, "{m}");
        m
    }

    /// The bodies of the network's `POST /{pnid}/messages` requests that are read marks.
    fn read_requests(&self) -> Vec<Value> {
        self.sim
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/messages"))
            .map(|r| r.body)
            .filter(|b| b["status"] == "read")
            .collect()
    }

    fn block_requests(&self) -> Vec<(String, Value)> {
        self.sim
            .requests()
            .into_iter()
            .filter(|r| r.path.ends_with("/block_users"))
            .map(|r| (r.method, r.body))
            .collect()
    }

    async fn read_marks(&self, id: &str) -> usize {
        let (s, page) = self
            .call("GET", &format!("/messages/{id}/timeline?limit=100"), None)
            .await;
        assert_eq!(s, 200, "{page}");
        page["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "read_marked")
            .count()
    }

    /// The contact of the customer `wa_id`.
    async fn contact(&self, wa_id: &str) -> Value {
        let (s, page) = self
            .call("GET", &format!("/contacts?q={wa_id}"), None)
            .await;
        assert_eq!(s, 200, "{page}");
        page["data"][0].clone()
    }
}

async fn read_with_and_without_typing(a: &Agents) {
    let (first, _) = a.writes(CUSTOMER, "Hi", None).await;
    let (second, wamid2) = a.writes(CUSTOMER, "Are you there?", None).await;
    assert_eq!(a.message(&first).await["read_at"], Value::Null);

    // With a typing indicator: the network gets exactly the read mark and the indicator.
    let (s, m) = a
        .call(
            "POST",
            &format!("/messages/{second}/read"),
            Some(json!({"typing_indicator": true})),
        )
        .await;
    assert_eq!(s, 200, "{m}");
    assert_eq!(m["id"], second.as_str());
    let read_at = m["read_at"].as_str().expect("read_at is set").to_string();
    assert_eq!(
        a.read_requests(),
        vec![
            json!({"messaging_product": "whatsapp", "status": "read", "message_id": wamid2,
                    "typing_indicator": {"type": "text"}})
        ]
    );
    // The earlier message is read with it, and says so in its timeline.
    assert_eq!(a.message(&first).await["read_at"], read_at.as_str());
    assert_eq!(a.read_marks(&first).await, 1);
    assert_eq!(a.read_marks(&second).await, 1);

    // Without: no indicator. A repeat is harmless: 200, read_at kept.
    let (s, m) = a
        .call("POST", &format!("/messages/{second}/read"), Some(json!({})))
        .await;
    assert_eq!(s, 200, "{m}");
    assert_eq!(m["read_at"], read_at.as_str());
    assert_eq!(
        a.read_requests()[1],
        json!({"messaging_product": "whatsapp", "status": "read", "message_id": wamid2})
    );
    assert_eq!(a.read_marks(&second).await, 2);
    assert_eq!(a.read_marks(&first).await, 1);

    // A later message is still unread until marked.
    let (third, _) = a.writes(CUSTOMER, "Hello?", None).await;
    assert_eq!(a.message(&third).await["read_at"], Value::Null);

    // Bad bodies are named by field.
    for (body, field) in [
        (json!({"typing_indicator": "yes"}), "typing_indicator"),
        (json!({"typing": true}), "typing"),
    ] {
        let (s, e) = a
            .call("POST", &format!("/messages/{third}/read"), Some(body))
            .await;
        assert_eq!(s, 400, "{e}");
        assert_eq!(e["details"]["fields"][0]["field"], field, "{e}");
    }
    assert_eq!(
        a.read_requests().len(),
        2,
        "no bad request reached the network"
    );
}

async fn read_refusals(a: &Agents) {
    let (recent, _) = a.writes(CUSTOMER, "Hi", None).await;
    // The business's own message.
    let (s, _, sent) = send(
        a.app
            .http
            .post(a.app.url(&format!("{API}/messages")))
            .bearer_auth(&a.key)
            .header("Idempotency-Key", "agents-outbound-1")
            .json(
                &json!({"to": format!("+{CUSTOMER}"), "type": "text", "text": {"body": "Hello"}}),
            ),
    )
    .await;
    assert_eq!(s, 202, "{sent}");
    let (s, e) = a
        .call(
            "POST",
            &format!("/messages/{}/read", sent["id"].as_str().unwrap()),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (s, e["details"]["reason"].as_str()),
        (409, Some("not_inbound")),
        "{e}"
    );
    // A message received 31 days ago.
    let old_ts = tern_domain::time::now_ms() / 1000 - 31 * DAY_SECS;
    let (old, _) = a.writes("447700900322", "Long ago", Some(old_ts)).await;
    let (s, e) = a
        .call("POST", &format!("/messages/{old}/read"), Some(json!({})))
        .await;
    assert_eq!(
        (s, e["details"]["reason"].as_str()),
        (409, Some("too_old")),
        "{e}"
    );
    assert_eq!(a.message(&old).await["read_at"], Value::Null);
    assert_eq!(a.read_marks(&old).await, 0);
    // Unknown, and another organisation's: 404.
    let (s, _) = a
        .call(
            "POST",
            &format!("/messages/{}/read", uuid::Uuid::now_v7()),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 404);
    let (_, other_key) = a
        .app
        .other_org("Other", tern_domain::auth::Preset::FullAccess)
        .await;
    let (s, _, e) = send(
        a.app
            .http
            .post(a.app.url(&format!("{API}/messages/{recent}/read")))
            .bearer_auth(&other_key)
            .json(&json!({})),
    )
    .await;
    assert_eq!(s, 404, "{e}");
    assert!(
        a.read_requests().is_empty(),
        "no refusal reached the network"
    );
    assert_eq!(a.message(&recent).await["read_at"], Value::Null);
}

async fn block_and_unblock(a: &Agents) {
    a.writes(CUSTOMER, "Hi", None).await;
    let contact = a.contact(CUSTOMER).await;
    let id = contact["id"].as_str().unwrap().to_string();
    assert_eq!(contact["blocked_at"], Value::Null, "{contact}");

    let (s, c) = a.call("POST", &format!("/contacts/{id}/block"), None).await;
    assert_eq!(s, 200, "{c}");
    assert!(c["blocked_at"].is_string(), "{c}");
    assert_eq!(a.sim.blocked(PN), vec![CUSTOMER.to_string()]);
    assert_eq!(
        a.block_requests(),
        vec![(
            "POST".to_string(),
            json!({"messaging_product": "whatsapp", "block_users": [{"user": CUSTOMER}]})
        )]
    );
    // Twice: 200, the contact unchanged, the network not asked again.
    let (s, again) = a.call("POST", &format!("/contacts/{id}/block"), None).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again, c);
    assert_eq!(a.block_requests().len(), 1);

    // A send to the blocked contact is refused before anything is stored.
    let (s, _, e) = send(
        a.app
            .http
            .post(a.app.url(&format!("{API}/messages")))
            .bearer_auth(&a.key)
            .header("Idempotency-Key", "agents-blocked-1")
            .json(&json!({"to": {"contact_id": id}, "type": "text", "text": {"body": "Hello"}})),
    )
    .await;
    assert_eq!(
        (s, e["details"]["reason"].as_str()),
        (409, Some("contact_blocked")),
        "{e}"
    );

    // Unblocked: the network is told, and sends go again.
    let (s, open) = a
        .call("DELETE", &format!("/contacts/{id}/block"), None)
        .await;
    assert_eq!(s, 200, "{open}");
    assert_eq!(open["blocked_at"], Value::Null);
    assert!(a.sim.blocked(PN).is_empty());
    assert_eq!(a.block_requests()[1].0, "DELETE");
    let (s, same) = a
        .call("DELETE", &format!("/contacts/{id}/block"), None)
        .await;
    assert_eq!((s, &same), (200, &open));
    assert_eq!(a.block_requests().len(), 2);
    let (s, _, m) = send(
        a.app
            .http
            .post(a.app.url(&format!("{API}/messages")))
            .bearer_auth(&a.key)
            .header("Idempotency-Key", "agents-blocked-2")
            .json(&json!({"to": {"contact_id": id}, "type": "text", "text": {"body": "Hello"}})),
    )
    .await;
    assert_eq!(s, 202, "{m}");

    // Another organisation cannot block this contact.
    let (_, other_key) = a
        .app
        .other_org("Other", tern_domain::auth::Preset::FullAccess)
        .await;
    let (s, _, _) = send(
        a.app
            .http
            .post(a.app.url(&format!("{API}/contacts/{id}/block")))
            .bearer_auth(&other_key),
    )
    .await;
    assert_eq!(s, 404);
    assert!(a.sim.blocked(PN).is_empty());
}

async fn a_customer_silent_for_25_hours_cannot_be_blocked(a: &Agents) {
    let ts = tern_domain::time::now_ms() / 1000 - 25 * 3600;
    a.writes(CUSTOMER, "Yesterday", Some(ts)).await;
    let id = a.contact(CUSTOMER).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, e) = a.call("POST", &format!("/contacts/{id}/block"), None).await;
    assert_eq!(
        (s, e["details"]["reason"].as_str()),
        (409, Some("block_needs_recent_message")),
        "{e}"
    );
    assert!(a.block_requests().is_empty(), "the network was not asked");
    assert_eq!(a.contact(CUSTOMER).await["blocked_at"], Value::Null);
    // A contact who never wrote neither.
    let (s, c) = a
        .call("POST", "/contacts", Some(json!({"phone": "+447700900329"})))
        .await;
    assert!(s == 200 || s == 201, "{c}");
    let (s, e) = a
        .call(
            "POST",
            &format!("/contacts/{}/block", c["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(
        (s, e["details"]["reason"].as_str()),
        (409, Some("block_needs_recent_message"))
    );
}

async fn a_campaign_skips_a_blocked_recipient(a: &Agents) {
    a.writes(CUSTOMER, "Hi", None).await;
    let blocked = a.contact(CUSTOMER).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, c) = a
        .call("POST", &format!("/contacts/{blocked}/block"), None)
        .await;
    assert_eq!(s, 200, "{c}");
    let (s, free) = a
        .call("POST", "/contacts", Some(json!({"phone": "+447700900323"})))
        .await;
    assert!(s == 200 || s == 201, "{free}");
    approved_template(&a.app, "promo", 0).await;
    let campaign = create(
        &a.app,
        &a.key,
        json!({"name": "Spring", "template": {"name": "promo", "language": "en_US"},
               "audience": {"contact_ids": [blocked, free["id"]]}}),
    )
    .await;
    let id = campaign["id"].as_str().unwrap();
    let (s, r) = act(&a.app, &a.key, id, "resolve", None).await;
    assert_eq!(s, 200, "{r}");
    let (s, _, p) = call(
        &a.app,
        &a.key,
        "GET",
        &format!("/campaigns/{id}/progress"),
        None,
    )
    .await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["skipped_reasons"], json!({"blocked": 1}), "{p}");
    assert_eq!(p["pending"], 1, "{p}");
}

tern_store::both_backends! { Agents;
    agents_read_with_and_without_typing => read_with_and_without_typing,
    agents_read_refusals => read_refusals,
    agents_block_and_unblock => block_and_unblock,
    agents_a_customer_silent_for_25_hours_cannot_be_blocked => a_customer_silent_for_25_hours_cannot_be_blocked,
    agents_a_campaign_skips_a_blocked_recipient => a_campaign_skips_a_blocked_recipient,
}

mod unreachable {
    use super::*;

    /// The network cannot be reached: `503`, and nothing is recorded (no `read_at`, no entry).
    async fn read_with_the_network_unreachable(backend: Backend) {
        // Nothing listens on this port.
        let dead = format!("http://127.0.0.1:{}", crate::common::free_port());
        let app = TestApp::builder(backend).graph(&dead).start().await;
        app.add_number(&app.org_id, PN, "+14155550321").await;
        let key = app.owner_key("full_access").await.1;
        let now = tern_domain::time::now_ms() / 1000;
        let contacts = vec![json!({"wa_id": CUSTOMER, "profile": {"name": "Ada"}})];
        let body = serde_json::to_vec(&envelope(vec![messages_change(
            PN,
            contacts,
            vec![text_message("wamid.UNREACHABLE", CUSTOMER, now, "Hi")],
            vec![],
        )]))
        .unwrap();
        assert_eq!(app.post_network(&body).await.0, 200);
        app.settle().await;
        let id = app
            .db
            .message_id_by_wamid(app.org_uuid(), "wamid.UNREACHABLE")
            .await
            .unwrap()
            .unwrap();
        let (s, _, e) = send(
            app.http
                .post(app.url(&format!("{API}/messages/{id}/read")))
                .bearer_auth(&key)
                .json(&json!({"typing_indicator": true})),
        )
        .await;
        assert_eq!((s, e["code"].as_str()), (503, Some("unavailable")), "{e}");
        let (_, _, m) = app.get(&format!("{API}/messages/{id}"), Some(&key)).await;
        assert_eq!(m["read_at"], Value::Null, "{m}");
        let (_, _, page) = app
            .get(&format!("{API}/messages/{id}/timeline"), Some(&key))
            .await;
        assert!(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .all(|e| e["kind"] != "read_marked"),
            "{page}"
        );
        // A block neither.
        let (_, _, contacts) = app.get(&format!("{API}/contacts"), Some(&key)).await;
        let cid = contacts["data"][0]["id"].as_str().unwrap().to_string();
        let (s, _, e) = send(
            app.http
                .post(app.url(&format!("{API}/contacts/{cid}/block")))
                .bearer_auth(&key),
        )
        .await;
        assert_eq!(s, 503, "{e}");
        let (_, _, c) = app.get(&format!("{API}/contacts/{cid}"), Some(&key)).await;
        assert_eq!(c["blocked_at"], Value::Null, "{c}");
        app.stop().await;
    }

    tern_store::both_backends! { Backend;
        read_with_the_network_unreachable,
    }
}
