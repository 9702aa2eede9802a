//! Forced answers: Graph errors, proxy pages, hangs, dropped connections, async failures.

use crate::common::*;

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
