//! Template management, review webhooks and template send errors.

use crate::common::*;

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
