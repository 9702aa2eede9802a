//! Webhook delivery: retries, a late callback URL, chaos knobs.

use crate::common::*;

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
