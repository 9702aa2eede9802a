//! The simulator's signed webhooks reach Tern's receiver and the inbox worker's pass applies
//! them, over real HTTP in both directions, on both backends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{APP_SECRET, Backend, TestApp};
use std::time::Duration;

async fn inbound_flows_from_simulator(backend: Backend) {
    let app = TestApp::builder(backend).start().await;
    app.add_number(&app.org_id, "555000111", "+14155550111")
        .await;
    let mut args = tern_simulator::SimArgs::local(APP_SECRET);
    args.callback_url = Some(app.url("/webhooks/whatsapp"));
    let sim = tern_simulator::start(args).await.unwrap();
    sim.register_number(tern_simulator::NumberSpec {
        id: "555000111".into(),
        display_phone_number: "+14155550111".into(),
        waba_id: "waba1".into(),
        access_token: "token".into(),
        throughput_mps: None,
        verified_name: None,
    })
    .unwrap();
    for (i, kind) in ["text", "location", "reaction"].iter().enumerate() {
        let body = match *kind {
            "text" => serde_json::json!({"text": {"body": "hello"}}),
            "location" => {
                serde_json::json!({"location": {"latitude": 51.5, "longitude": -0.12, "name": "Office"}})
            }
            _ => serde_json::json!({"reaction": {"message_id": "wamid.x", "emoji": "👍"}}),
        };
        let mut msg = serde_json::json!({"phone_number_id": "555000111", "from": format!("4477009000{i}"),
            "profile_name": "Grace", "type": kind});
        msg.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        sim.inject_inbound(msg).unwrap();
    }
    // The network delivers on its own time: wait (bounded) until it has delivered all three,
    // then Tern's passes apply them.
    for _ in 0..200 {
        if sim.deliveries().len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let settled = app.settle().await;
    assert_eq!(settled.inbox.inbound_stored, 3, "{settled:?}");
    let org = app.org_uuid();
    let n = app.db.count_contacts(org).await.unwrap();
    assert_eq!(app.db.count_unprocessed_inbox().await.unwrap(), 0);
    assert_eq!(n, 3, "three customers wrote in");
    let c = app
        .db
        .get_contact_by_wa_id(org, "44770090000")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.name.as_deref(), Some("Grace"));
    assert!(c.last_inbound_at.is_some());
    // Every delivery the simulator made was answered 200 (signature accepted).
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
    inbound_flows_from_simulator,
}
