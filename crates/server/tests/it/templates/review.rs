//! Submission for review, the network's answers, sync from the network, and the workers.

use super::*;

pub(super) async fn submit_then_review_approves_or_rejects((app, sim): (&TestApp, &SimHandle)) {
    let (_, key) = app.owner_key("full_access").await;
    let a = create(app, &key, &draft("order_shipped", "en_US")).await;
    let id = a["id"].as_str().unwrap().to_string();
    let (s, _, sub) = post(app, &api(&format!("/templates/{id}/submit")), &key, None).await;
    assert_eq!(s, 200, "{sub}");
    assert_eq!(sub["status"], "pending");
    assert_eq!(sub["id"], a["id"]);
    // The network got it in its own format.
    let on_network = sim
        .templates()
        .into_iter()
        .find(|t| t.name == "order_shipped")
        .unwrap();
    assert_eq!(on_network.category, "UTILITY");
    assert_eq!(on_network.language, "en_US");
    assert_eq!(Value::Array(on_network.components.clone()), a["components"]);
    let stored = app
        .db
        .get_template(app.org_uuid(), id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.network_id.as_deref(), Some(on_network.id.as_str()));

    // Pending templates cannot be submitted again.
    let (s, h, e) = post(app, &api(&format!("/templates/{id}/submit")), &key, None).await;
    assert_error(s, &h, &e, 409, "conflict");
    assert_eq!(e["details"]["reason"], "template_not_draft");
    assert_eq!(e["details"]["status"], "pending");

    // The network's review webhook approves it.
    sim.set_template_status(&on_network.id, "APPROVED", None)
        .unwrap();
    let approved = wait_status(app, &key, &id, "approved").await;
    assert!(approved["rejection_reason"].is_null());
    assert_example_sendable(&approved);
    let (_, _, listed) = app
        .get(&api("/templates?status=approved"), Some(&key))
        .await;
    assert_eq!(listed["data"][0]["id"], a["id"]);

    // Another one is rejected with a reason.
    let b = create(app, &key, &draft("promo_code", "en_US")).await;
    let bid = b["id"].as_str().unwrap().to_string();
    let (s, _, _) = post(app, &api(&format!("/templates/{bid}/submit")), &key, None).await;
    assert_eq!(s, 200);
    let nid = sim_template_id(sim, "promo_code", "en_US");
    sim.set_template_status(&nid, "REJECTED", Some("INVALID_FORMAT".into()))
        .unwrap();
    let rejected = wait_status(app, &key, &bid, "rejected").await;
    assert_eq!(rejected["rejection_reason"], "INVALID_FORMAT");
    // Paused later: still reported.
    sim.set_template_status(&on_network.id, "PAUSED", None)
        .unwrap();
    wait_status(app, &key, &id, "paused").await;
}

pub(super) async fn network_errors_on_submit((app, sim): (&TestApp, &SimHandle)) {
    let (_, key) = app.owner_key("full_access").await;
    // The network already holds this name and language (created in its own tools).
    sim.seed_template(TemplateSeed {
        waba_id: WABA.into(),
        name: "order_shipped".into(),
        language: "en_US".into(),
        category: "UTILITY".into(),
        status: "APPROVED".into(),
        parameter_format: None,
        components: vec![json!({"type": "BODY", "text": "Hello"})],
    });
    let a = create(app, &key, &draft("order_shipped", "en_US")).await;
    let id = a["id"].as_str().unwrap();
    let (s, h, e) = post(app, &api(&format!("/templates/{id}/submit")), &key, None).await;
    assert_error(s, &h, &e, 409, "conflict");
    assert_eq!(e["details"]["reason"], "network_rejected");
    assert_eq!(e["details"]["network_code"], 100);
    assert_eq!(e["details"]["network_subcode"], 2_388_024);
    assert!(
        e["details"]["network_details"]
            .as_str()
            .unwrap()
            .contains("already exists"),
        "{e}"
    );
    assert!(e["message"].as_str().unwrap().contains("already exists"));
    // Still a draft.
    let (_, _, still) = app.get(&api(&format!("/templates/{id}")), Some(&key)).await;
    assert_eq!(still["status"], "draft");

    // A token the network does not accept.
    app.admin(&[
        "number",
        "add",
        "--org",
        &app.org_id,
        "--phone-number-id",
        "100000000000003",
        "--display-phone-number",
        "+14155550103",
        "--waba-id",
        "200000000000003",
        "--access-token",
        "revoked-token",
    ])
    .await
    .unwrap();
    let mut other = draft("welcome", "en");
    other["waba_id"] = json!("200000000000003");
    let w = create(app, &key, &other).await;
    let (s, h, e) = post(
        app,
        &api(&format!("/templates/{}/submit", w["id"].as_str().unwrap())),
        &key,
        None,
    )
    .await;
    assert_error(s, &h, &e, 409, "conflict");
    assert_eq!(e["details"]["reason"], "network_rejected");
    assert_eq!(e["details"]["network_code"], 190);

    // No connected number of the WABA.
    app.admin(&[
        "number",
        "update",
        "--phone-number-id",
        "100000000000003",
        "--status",
        "disconnected",
    ])
    .await
    .unwrap();
    let (s, h, e) = post(
        app,
        &api(&format!("/templates/{}/submit", w["id"].as_str().unwrap())),
        &key,
        None,
    )
    .await;
    assert_error(s, &h, &e, 409, "conflict");
    assert_eq!(e["details"]["reason"], "no_connected_phone_number");

    // Unknown template.
    let (s, h, e) = post(
        app,
        &api(&format!("/templates/{}/submit", uuid::Uuid::now_v7())),
        &key,
        None,
    )
    .await;
    assert_error(s, &h, &e, 404, "not_found");
}

pub(super) async fn sync_from_the_network_through_the_admin_command(
    (app, sim): (&TestApp, &SimHandle),
) {
    let (_, key) = app.owner_key("full_access").await;
    let seed = |name: &str, status: &str, category: &str, components: Vec<Value>| TemplateSeed {
        waba_id: WABA.into(),
        name: name.into(),
        language: "en_US".into(),
        category: category.into(),
        status: status.into(),
        parameter_format: None,
        components,
    };
    let body = json!({"type": "BODY", "text": "Hi {{1}}, order {{2}} shipped.", "example": {"body_text": [["Ada", "A-1"]]}});
    let approved = sim.seed_template(seed(
        "shipping_update",
        "APPROVED",
        "UTILITY",
        vec![body.clone()],
    ));
    sim.seed_template(seed(
        "spring_sale",
        "REJECTED",
        "MARKETING",
        vec![json!({"type": "BODY", "text": "Sale!"})],
    ));
    sim.seed_template(seed(
        "media_offer",
        "APPROVED",
        "MARKETING",
        vec![
            json!({"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::aW1n"]}}),
            body.clone(),
            json!({"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "SAVE10"}]}),
        ],
    ));
    // Another WABA's template is not the organisation's.
    sim.seed_template(TemplateSeed {
        waba_id: "200000000000777".into(),
        ..seed("elsewhere", "APPROVED", "UTILITY", vec![body.clone()])
    });
    // Enough to need two pages of the network's list (100 a page).
    for i in 0..100 {
        sim.seed_template(seed(
            &format!("bulk_{i:03}"),
            "APPROVED",
            "UTILITY",
            vec![json!({"type": "BODY", "text": "Hello"})],
        ));
    }
    // A Tern draft of the same name and language is the same template.
    let draft_shipping = create(app, &key, &draft("shipping_update", "en_US")).await;

    let out = app
        .admin(&["template", "sync", "--org", &app.org_id])
        .await
        .unwrap();
    assert_eq!(out["org_id"], app.org_id.as_str());
    assert_eq!(out["synced"], 103, "{out}");
    assert_eq!(out["created"], 102, "{out}");
    assert_eq!(out["updated"], 1, "{out}");

    let approved_list = list_all(app, &key, "language=en_US&status=approved").await;
    assert_eq!(approved_list.len(), 102);
    let names: Vec<&str> = approved_list
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"shipping_update") && names.contains(&"media_offer"),
        "{names:?}"
    );
    assert!(!names.contains(&"elsewhere"));
    let (_, _, shipping) = app
        .get(
            &api(&format!(
                "/templates/{}",
                draft_shipping["id"].as_str().unwrap()
            )),
            Some(&key),
        )
        .await;
    assert_eq!(shipping["status"], "approved");
    assert_eq!(shipping["components"], json!([body]));
    assert_example_sendable(&shipping);
    assert_eq!(
        shipping["example"]["template"]["variables"],
        json!(["Ada", "A-1"])
    );
    let stored = app
        .db
        .get_template(
            app.org_uuid(),
            draft_shipping["id"].as_str().unwrap().parse().unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.network_id.as_deref(), Some(approved.id.as_str()));
    let (_, _, rejected) = app
        .get(&api("/templates?status=rejected"), Some(&key))
        .await;
    assert_eq!(rejected["data"][0]["name"], "spring_sale");
    assert_eq!(rejected["data"][0]["category"], "marketing");
    let media = approved_list
        .iter()
        .find(|t| t["name"] == "media_offer")
        .unwrap();
    assert_example_sendable(media);
    assert!(media["example"]["template"]["components"].is_array());

    // Nothing changed: nothing written.
    let again = app
        .admin(&["template", "sync", "--org", &app.org_id])
        .await
        .unwrap();
    assert_eq!(
        (
            again["synced"].as_u64(),
            again["created"].as_u64(),
            again["updated"].as_u64()
        ),
        (Some(103), Some(0), Some(0)),
        "{again}"
    );
    // A status changed on the network (its webhook not processed): the sync catches up.
    sim.set_template_status(&approved.id, "PAUSED", None)
        .unwrap();
    let third = app
        .admin(&["template", "sync", "--org", &app.org_id])
        .await
        .unwrap();
    assert_eq!(third["updated"], 1, "{third}");
    let (_, _, paused) = app.get(&api("/templates?status=paused"), Some(&key)).await;
    assert_eq!(paused["data"][0]["name"], "shipping_update");

    // Refusals.
    let err = app
        .admin(&[
            "template",
            "sync",
            "--org",
            &uuid::Uuid::now_v7().to_string(),
        ])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    app.admin(&[
        "number",
        "add",
        "--org",
        &app.org_id,
        "--phone-number-id",
        "100000000000004",
        "--display-phone-number",
        "+14155550104",
        "--waba-id",
        "200000000000004",
        "--access-token",
        "unknown-token",
    ])
    .await
    .unwrap();
    let err = app
        .admin(&["template", "sync", "--org", &app.org_id])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("200000000000004"), "{err}");
}

/// The network cannot be reached at all: 503, the template stays a draft.
pub(super) async fn unreachable_network(backend: Backend) {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let app = TestApp::builder(backend).graph(&url).start().await;
    app.admin(&[
        "number",
        "add",
        "--org",
        &app.org_id,
        "--phone-number-id",
        PNID,
        "--display-phone-number",
        "+14155550100",
        "--waba-id",
        WABA,
        "--access-token",
        TOKEN,
    ])
    .await
    .unwrap();
    let (_, key) = app.owner_key("full_access").await;
    let a = create(&app, &key, &draft("order_shipped", "en_US")).await;
    let id = a["id"].as_str().unwrap();
    let (s, h, e) = post(&app, &api(&format!("/templates/{id}/submit")), &key, None).await;
    assert_error(s, &h, &e, 503, "unavailable");
    assert_eq!(e["details"]["reason"], "network_unavailable");
    assert!(h.get("retry-after").is_some());
    let (_, _, still) = app.get(&api(&format!("/templates/{id}")), Some(&key)).await;
    assert_eq!(still["status"], "draft");
    let err = app
        .admin(&["template", "sync", "--org", &app.org_id])
        .await
        .unwrap_err();
    assert!(err.to_string().contains(WABA), "{err}");
    app.stop().await;
}

/// With the workers running (as in `tern serve`), the review webhook is applied without
/// draining by hand, and the sync worker imports templates created outside Tern on start.
pub(super) async fn workers_apply_reviews_and_sync(backend: Backend) {
    let sim = tern_simulator::start(tern_simulator::SimArgs::local(APP_SECRET))
        .await
        .unwrap();
    sim.register_number(NumberSpec {
        id: PNID.into(),
        display_phone_number: "+14155550100".into(),
        waba_id: WABA.into(),
        access_token: TOKEN.into(),
        throughput_mps: None,
        verified_name: None,
    })
    .unwrap();
    sim.seed_template(TemplateSeed {
        waba_id: WABA.into(),
        name: "made_elsewhere".into(),
        language: "en".into(),
        category: "UTILITY".into(),
        status: "APPROVED".into(),
        parameter_format: None,
        components: vec![json!({"type": "BODY", "text": "Hello"})],
    });
    let app = TestApp::builder(backend)
        .graph(&sim.base_url())
        .start()
        .await;
    sim.set_callback_url(Some(app.url("/webhooks/whatsapp")));
    app.admin(&[
        "number",
        "add",
        "--org",
        &app.org_id,
        "--phone-number-id",
        PNID,
        "--display-phone-number",
        "+14155550100",
        "--waba-id",
        WABA,
        "--access-token",
        TOKEN,
    ])
    .await
    .unwrap();
    let (_, key) = app.owner_key("full_access").await;
    let a = create(&app, &key, &draft("order_shipped", "en_US")).await;
    // Workers of a second instance on the same database (the app's own were not started).
    let state = tern::app::state(app.db.clone(), app.key.clone(), &{
        let mut c = crate::common::test_config();
        c.graph_url = sim.base_url();
        c
    });
    let workers = tern::app::Workers::start(&app.db, &state);
    let id = a["id"].as_str().unwrap();
    let (s, _, sub) = post(&app, &api(&format!("/templates/{id}/submit")), &key, None).await;
    assert_eq!(s, 200, "{sub}");
    // The simulator approves after its review delay; the inbox worker applies it.
    let mut status = Value::Null;
    let mut imported = false;
    for _ in 0..200 {
        let (_, _, t) = app.get(&api(&format!("/templates/{id}")), Some(&key)).await;
        status = t["status"].clone();
        let (_, _, all) = app.get(&api("/templates?language=en"), Some(&key)).await;
        imported = all["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "made_elsewhere" && t["status"] == "approved");
        if status == "approved" && imported {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(status, "approved");
    assert!(imported, "the sync worker imported the network's template");
    workers.stop().await;
    sim.shutdown().await;
    app.stop().await;
}

tern_store::both_backends! { Backend;
    unreachable_network,
    workers_apply_reviews_and_sync,
}
