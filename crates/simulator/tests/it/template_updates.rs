//! Template features of the 2026 network: `template_category_update`, the list's `summary`,
//! and 131062 for OTP authentication templates sent to a BSUID.

use crate::common::*;
use crate::identity::wait_for;

fn seed(e: &Env, name: &str, category: &str, components: Value) -> String {
    e.sim
        .seed_template(TemplateSeed {
            waba_id: WABA.into(),
            name: name.into(),
            language: "en_US".into(),
            category: category.into(),
            status: "APPROVED".into(),
            parameter_format: None,
            components: serde_json::from_value(components).unwrap(),
        })
        .id
}

async fn send_template(e: &Env, key: &str, to: &str, name: &str) -> (u16, Value) {
    raw_send(
        e,
        json!({"messaging_product": "whatsapp", key: to, "type": "template",
               "template": {"name": name, "language": {"code": "en_US"}}}),
    )
    .await
}

#[tokio::test]
async fn category_update_changes_the_template_and_notifies() {
    let e = env().await;
    let id = seed(
        &e,
        "promo",
        "UTILITY",
        json!([{"type": "BODY", "text": "Hi"}]),
    );
    let http = reqwest::Client::new();
    let url = |id: &str| format!("{}/_sim/templates/{id}/category", e.sim.base_url());
    let r = http
        .post(url(&id))
        .json(&json!({"new_category": "MARKETING"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let t: Value = r.json().await.unwrap();
    assert_eq!(
        (t["category"].clone(), t["previous_category"].clone()),
        (json!("MARKETING"), json!("UTILITY"))
    );

    let (entry, v) = wait_for(&e.rx, "template_category_update", |e, v| {
        Some((e.clone(), v.clone()))
    })
    .await;
    assert_eq!(entry["id"], WABA);
    assert!(entry["time"].is_i64(), "{entry}");
    assert_eq!(
        v,
        json!({"message_template_id": id.parse::<u64>().unwrap(), "message_template_name": "promo",
               "message_template_language": "en_US", "previous_category": "UTILITY",
               "new_category": "MARKETING"})
    );
    // the network bills it as the new category from now on
    let (status, v) = send_template(&e, "to", CUSTOMER, "promo").await;
    assert_eq!(status, 200, "{v}");
    let st =
        e.rx.wait_statuses(v["messages"][0]["id"].as_str().unwrap(), 1)
            .await;
    assert_eq!(
        st[0].pricing.as_ref().unwrap().category.as_deref(),
        Some("marketing")
    );
    // the list shows both categories
    let list: Value = http
        .get(format!(
            "{}/v25.0/{WABA}/message_templates",
            e.sim.base_url()
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"][0]["previous_category"], "UTILITY");

    for (id, body, status) in [
        (id.as_str(), json!({"new_category": "MARKETING"}), 400),
        (id.as_str(), json!({"new_category": "SPAM"}), 400),
        ("404404", json!({"new_category": "UTILITY"}), 404),
    ] {
        let r = http.post(url(id)).json(&body).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{body}");
    }
    e.sim.shutdown().await;
}

#[tokio::test]
async fn template_list_summary() {
    let e = env().await;
    for (name, status) in [("a", "APPROVED"), ("b", "APPROVED"), ("c", "PAUSED")] {
        e.sim.seed_template(TemplateSeed {
            waba_id: WABA.into(),
            name: name.into(),
            language: "en_US".into(),
            category: "UTILITY".into(),
            status: status.into(),
            parameter_format: None,
            components: vec![json!({"type": "BODY", "text": "x"})],
        });
    }
    let get = |q: &'static str| {
        let url = format!("{}/v25.0/{WABA}/message_templates?{q}", e.sim.base_url());
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(TOKEN)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let v = get("summary=total_count&limit=1").await;
    assert_eq!(v["data"].as_array().unwrap().len(), 1, "data kept");
    assert!(v["paging"]["next"].is_string());
    assert_eq!(
        v["summary"],
        json!({"total_count": 3, "message_template_count": 3, "message_template_limit": 250,
               "are_translations_complete": true})
    );
    let v = get("summary=total_count,message_template_count&status=APPROVED").await;
    assert_eq!(v["summary"]["total_count"], 2, "total of the filtered list");
    assert_eq!(v["summary"]["message_template_count"], 3, "all of the WABA");
    assert!(get("limit=5").await.get("summary").is_none());
    e.sim.shutdown().await;
}

#[tokio::test]
async fn otp_authentication_templates_need_a_phone() {
    let e = env().await;
    let otp = |otp_type: &str| {
        json!([{"type": "BODY", "add_security_recommendation": true},
               {"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": otp_type, "text": "Copy"}]}])
    };
    seed(&e, "otp_copy", "AUTHENTICATION", otp("COPY_CODE"));
    seed(&e, "otp_one_tap", "AUTHENTICATION", otp("ONE_TAP"));
    seed(&e, "otp_zero_tap", "authentication", otp("zero_tap"));
    seed(
        &e,
        "copy_button",
        "AUTHENTICATION",
        json!([{"type": "BODY", "text": "Code"}, {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "123"}]}]),
    );
    seed(
        &e,
        "utility_copy",
        "UTILITY",
        json!([{"type": "BODY", "text": "Coupon"}, {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "X"}]}]),
    );
    seed(
        &e,
        "auth_plain",
        "AUTHENTICATION",
        json!([{"type": "BODY", "text": "Code"}]),
    );
    for name in ["otp_copy", "otp_one_tap", "otp_zero_tap", "copy_button"] {
        for to in ["US.13491208655302741918", "US.ENT.1"] {
            let (status, v) = send_template(&e, "recipient", to, name).await;
            assert_eq!(status, 400, "{name} → {to}: {v}");
            assert_eq!(v["error"]["code"], 131062);
            assert_eq!(
                v["error"]["message"],
                "(#131062) BSUID recipients are not supported for this message"
            );
            assert_eq!(v["error"]["type"], "OAuthException");
            assert!(v["error"]["fbtrace_id"].is_string());
        }
        let (status, v) = send_template(&e, "to", CUSTOMER, name).await;
        assert_eq!(status, 200, "{name} to a phone: {v}");
        // `to` wins, so the phone send is fine even with a BSUID beside it
        let mut both = json!({"messaging_product": "whatsapp", "to": CUSTOMER, "recipient": "US.1",
            "type": "template", "template": {"name": name, "language": {"code": "en_US"}}});
        let (status, v) = raw_send(&e, both.take()).await;
        assert_eq!(status, 200, "{v}");
    }
    for name in ["utility_copy", "auth_plain"] {
        let (status, v) = send_template(&e, "recipient", "US.1", name).await;
        assert_eq!(status, 200, "{name}: {v}");
    }
    e.sim.shutdown().await;
}
