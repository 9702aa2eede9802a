//! The `/_sim` control API over HTTP and the CLI arguments.

use crate::common::*;

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
