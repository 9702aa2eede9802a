//! A customer known only by username, end to end through the simulator over real HTTP in
//! both directions: they write in, Tern answers by BSUID and follows the message to `read`,
//! their edit reaches the original, the network's BSUID change and a template's new
//! category reach Tern.
//!
//! The network delivers on its own time: each step waits for the simulator's delivery, then
//! Tern's worker passes apply it (`settle`).

use crate::common::{APP_SECRET, Backend, TestApp, send, sim_delivered};
use serde_json::{Value, json};
use tern_simulator::{CustomerSpec, IdentityChangeRequest, NumberSpec, TemplateSeed};

const PN: &str = "555000222";
const API: &str = "/api/public/v1";

async fn get(app: &TestApp, key: &str, path: &str) -> Value {
    app.get(&format!("{API}{path}"), Some(key)).await.2
}

async fn username_customer_end_to_end(backend: Backend) {
    let sim = tern_simulator::start(tern_simulator::SimArgs::local(APP_SECRET))
        .await
        .unwrap();
    let app = TestApp::builder(backend)
        .graph(&sim.base_url())
        .start()
        .await;
    sim.set_callback_url(Some(app.url("/webhooks/whatsapp")));
    app.add_number(&app.org_id, PN, "+14155550222").await;
    sim.register_number(NumberSpec {
        id: PN.into(),
        display_phone_number: "+14155550222".into(),
        waba_id: "waba1".into(),
        access_token: "token".into(),
        throughput_mps: None,
        verified_name: None,
    })
    .unwrap();
    let key = app.owner_key("full_access").await.1;
    let zoe = sim
        .register_customer(CustomerSpec {
            username: Some("zoe.tern".into()),
            profile_name: Some("Zoe".into()),
            ..CustomerSpec::default()
        })
        .unwrap();
    assert_eq!(zoe.wa_id, None);

    // She writes in: a contact without a phone, found by her username.
    let sent = sim
        .inject_inbound(json!({"phone_number_id": PN, "username": "zoe.tern", "type": "text", "text": {"body": "Hi!"}}))
        .unwrap();
    sim_delivered(&sim, 1).await;
    app.settle().await;
    let page = get(&app, &key, "/contacts?q=zoe").await;
    let contact = page["data"][0].clone();
    assert_eq!(
        (
            contact["user_id"].as_str(),
            &contact["phone"],
            contact["name"].as_str()
        ),
        (Some(zoe.user_id.as_str()), &Value::Null, Some("Zoe")),
        "{contact}"
    );

    // Tern answers her; the dispatcher sends to her BSUID and the statuses come back.
    let (s, _, m) = send(
        app.http
            .post(app.url(&format!("{API}/messages")))
            .bearer_auth(&key)
            .header("Idempotency-Key", "k-e2e-zoe-1")
            .json(&json!({"to": {"contact_id": contact["id"]}, "type": "text", "text": {"body": "Hello Zoe"}})),
    )
    .await;
    assert_eq!(s, 202, "{m}");
    let id = m["id"].as_str().unwrap().to_string();
    app.settle().await;
    sim_delivered(&sim, 4).await;
    app.settle().await;
    let read = get(&app, &key, &format!("/messages/{id}")).await;
    assert!(
        read["status"] == "read" && read["sent_at"].is_string() && read["delivered_at"].is_string(),
        "{read}"
    );
    let on_network = sim
        .messages()
        .into_iter()
        .find(|r| r.biz_opaque_callback_data.as_deref() == Some(id.as_str()))
        .unwrap();
    assert_eq!(on_network.recipient.as_deref(), Some(zoe.user_id.as_str()));
    assert!(
        on_network.payload.get("to").is_none(),
        "{}",
        on_network.payload
    );

    // Her edit changes her message.
    let original = sent["wamid"].as_str().unwrap();
    sim.inject_inbound(json!({"phone_number_id": PN, "username": "zoe.tern", "type": "edit",
        "edit": {"original_message_id": original, "message": {"type": "text", "text": {"body": "Hi again!"}}}}))
        .unwrap();
    let conv = m["conversation_id"].as_str().unwrap().to_string();
    sim_delivered(&sim, 5).await;
    app.settle().await;
    let page = get(
        &app,
        &key,
        &format!("/conversations/{conv}/messages?direction=inbound"),
    )
    .await;
    let edited = page["data"]
        .as_array()
        .and_then(|a| a.iter().find(|m| m["wamid"] == original))
        .unwrap_or_else(|| panic!("her message: {page}"));
    assert!(edited["edited_at"].is_string(), "{edited}");
    assert_eq!(
        (edited["text"].as_str(), edited["content"].clone()),
        (Some("Hi again!"), json!({"body": "Hi again!"}))
    );

    // The network gives her a new BSUID: the same contact holds it.
    let update = sim
        .change_identity(IdentityChangeRequest {
            username: Some("zoe.tern".into()),
            phone_number_id: Some(PN.into()),
            ..IdentityChangeRequest::default()
        })
        .unwrap();
    let new_id = update["user_id"].as_str().unwrap().to_string();
    assert_ne!(new_id, zoe.user_id);
    let cid = contact["id"].as_str().unwrap();
    sim_delivered(&sim, 6).await;
    app.settle().await;
    let c = get(&app, &key, &format!("/contacts/{cid}")).await;
    assert_eq!(c["user_id"], new_id.as_str(), "{c}");
    // …and no second contact was made for her under the new one.
    let all = get(&app, &key, "/contacts").await;
    assert_eq!(all["data"].as_array().map(Vec::len), Some(1), "{all}");

    // A template synced from the network changes category there, then in Tern.
    let tpl = sim.seed_template(TemplateSeed {
        waba_id: "waba1".into(),
        name: "order_update".into(),
        language: "en_US".into(),
        category: "UTILITY".into(),
        status: "APPROVED".into(),
        parameter_format: None,
        components: vec![json!({"type": "BODY", "text": "Your order shipped."})],
    });
    app.admin(&["template", "sync", "--org", &app.org_id])
        .await
        .unwrap();
    sim.set_template_category(&tpl.id, "MARKETING").unwrap();
    sim_delivered(&sim, 7).await;
    app.settle().await;
    let list = get(&app, &key, "/templates").await;
    assert_eq!(list["data"][0]["category"], "marketing", "{list}");

    assert!(
        sim.deliveries()
            .iter()
            .all(|d| d.response_status == Some(200)),
        "{:?}",
        sim.deliveries()
    );
    sim.shutdown().await;
    app.stop().await;
}

tern_store::both_backends! { Backend;
    username_customer_end_to_end,
}
