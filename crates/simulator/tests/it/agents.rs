//! Read marks with a typing indicator, and the block list: through `CloudApiClient`, as Tern
//! calls them, and raw HTTP for what the client never sends.

use crate::common::*;
use tern_cloudapi::UserOutcome;

/// The customer writes `n` messages to the number; their wamids, oldest first.
fn writes(e: &Env, from: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            e.sim
                .inject_inbound(json!({"phone_number_id": PNID, "from": from, "type": "text", "text": {"body": format!("m{i}")}}))
                .unwrap()["wamid"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn read_at(e: &Env, wamid: &str) -> (Option<i64>, Option<i64>) {
    let m = e
        .sim
        .inbound()
        .into_iter()
        .find(|m| m.wamid == wamid)
        .unwrap();
    (m.read_at, m.typing_at)
}

fn graph(r: Result<impl std::fmt::Debug, SendError>) -> tern_cloudapi::GraphError {
    match r {
        Err(SendError::Graph(g)) => *g,
        other => panic!("expected a Graph error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_read_mark_marks_earlier_messages_and_shows_typing() {
    let e = env().await;
    let w = writes(&e, CUSTOMER, 3);
    let other = writes(&e, "16505550000", 1);
    e.client.mark_read(PNID, TOKEN, &w[1], true).await.unwrap();
    // The marked message and the earlier one are read; the later one and another
    // customer's are not. Typing shows on the marked message only.
    assert!(read_at(&e, &w[0]).0.is_some());
    assert!(read_at(&e, &w[1]).0.is_some() && read_at(&e, &w[1]).1.is_some());
    assert_eq!(read_at(&e, &w[0]).1, None);
    assert_eq!(read_at(&e, &w[2]), (None, None));
    assert_eq!(read_at(&e, &other[0]), (None, None));
    // Without typing: no indicator; a repeat is harmless.
    e.client.mark_read(PNID, TOKEN, &w[2], false).await.unwrap();
    e.client.mark_read(PNID, TOKEN, &w[2], false).await.unwrap();
    assert_eq!(read_at(&e, &w[2]).1, None);
    assert!(read_at(&e, &w[2]).0.is_some());
    // The exact bodies the network received.
    let bodies: Vec<Value> = e
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/messages"))
        .map(|r| r.body)
        .collect();
    assert_eq!(
        bodies[0],
        json!({"messaging_product": "whatsapp", "status": "read", "message_id": w[1],
               "typing_indicator": {"type": "text"}})
    );
    assert_eq!(
        bodies[1],
        json!({"messaging_product": "whatsapp", "status": "read", "message_id": w[2]})
    );
}

#[tokio::test]
async fn an_unknown_or_old_message_is_131009() {
    let e = env().await;
    let w = writes(&e, CUSTOMER, 1);
    // Unknown id, the business's own message, an id another number received: all unknown.
    let g = graph(e.client.mark_read(PNID, TOKEN, "wamid.NOPE", false).await);
    assert_eq!((g.http_status, g.code), (400, Some(131009)));
    let sent = e
        .client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "hello", "t1"))
        .await
        .unwrap();
    let g = graph(e.client.mark_read(PNID, TOKEN, &sent.wamid, false).await);
    assert_eq!(g.code, Some(131009));
    // Older than 30 days.
    e.sim.advance_clock(31 * 24 * 3600);
    let g = graph(e.client.mark_read(PNID, TOKEN, &w[0], false).await);
    assert_eq!(g.code, Some(131009));
    assert!(g.details.unwrap().contains("30 days"));
    assert_eq!(read_at(&e, &w[0]), (None, None));
    // A typing indicator of another kind is refused.
    let (s, b) = raw_send(
        &e,
        json!({"messaging_product": "whatsapp", "status": "read", "message_id": w[0],
               "typing_indicator": {"type": "audio"}}),
    )
    .await;
    assert_eq!((s, b["error"]["code"].as_i64()), (400, Some(100)));
}

#[tokio::test]
async fn only_customers_who_wrote_in_24_hours_are_blocked_each_with_their_outcome() {
    let e = env().await;
    writes(&e, CUSTOMER, 1);
    let silent = "16505550001";
    // One request: a customer who wrote, one who never did.
    let got = e
        .client
        .block_users(PNID, TOKEN, &[CUSTOMER, silent])
        .await
        .unwrap();
    assert_eq!(got.len(), 2);
    assert!(
        matches!(&got[0], UserOutcome::Done { input, wa_id, .. } if input == CUSTOMER && wa_id.as_deref() == Some(CUSTOMER)),
        "{got:?}"
    );
    assert!(
        matches!(&got[1], UserOutcome::Failed { input, code: Some(139100), .. } if input == silent),
        "{got:?}"
    );
    assert_eq!(e.sim.blocked(PNID), vec![CUSTOMER.to_string()]);
    // The list, by GET.
    let r = reqwest::Client::new()
        .get(format!("{}/v25.0/{PNID}/block_users", e.sim.base_url()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let list: Value = r.json().await.unwrap();
    assert_eq!(list["data"][0]["wa_id"], CUSTOMER, "{list}");
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    // 25 hours later, a customer who wrote then is no longer blockable.
    let late = "16505550002";
    writes(&e, late, 1);
    e.sim.advance_clock(25 * 3600);
    let got = e.client.block_users(PNID, TOKEN, &[late]).await.unwrap();
    assert!(matches!(&got[0], UserOutcome::Failed { .. }), "{got:?}");
    // Unblock needs no recent message.
    let got = e
        .client
        .unblock_users(PNID, TOKEN, &[CUSTOMER])
        .await
        .unwrap();
    assert!(matches!(&got[0], UserOutcome::Done { .. }), "{got:?}");
    assert!(e.sim.blocked(PNID).is_empty());
}

#[tokio::test]
async fn a_block_list_request_is_checked_as_a_whole() {
    let e = env().await;
    let post = |body: Value| {
        let url = format!("{}/v25.0/{PNID}/block_users", e.sim.base_url());
        async move {
            let r = reqwest::Client::new()
                .post(url)
                .bearer_auth(TOKEN)
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let many: Vec<Value> = (0..1001)
        .map(|i| json!({"user": format!("1650555{i:04}")}))
        .collect();
    let (s, b) = post(json!({"messaging_product": "whatsapp", "block_users": many})).await;
    assert_eq!((s, b["error"]["code"].as_i64()), (400, Some(100)), "{b}");
    let (s, _) = post(json!({"messaging_product": "whatsapp", "block_users": []})).await;
    assert_eq!(s, 400);
    let (s, _) = post(json!({"block_users": [{"user": CUSTOMER}]})).await;
    assert_eq!(s, 400);
    // Another number's token cannot touch this number's list.
    let r = reqwest::Client::new()
        .post(format!("{}/v25.0/{PNID}/block_users", e.sim.base_url()))
        .bearer_auth("not-a-token")
        .json(&json!({"messaging_product": "whatsapp", "block_users": [{"user": CUSTOMER}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(e.sim.blocked(PNID).is_empty());
}

#[tokio::test]
async fn a_blocked_customer_receives_nothing_and_cannot_write() {
    let e = env().await;
    writes(&e, CUSTOMER, 1);
    e.rx.wait_until("the customer's message", |n| !n.is_empty())
        .await;
    let got = e
        .client
        .block_users(PNID, TOKEN, &[CUSTOMER])
        .await
        .unwrap();
    assert!(matches!(&got[0], UserOutcome::Done { .. }));
    let before = e.sim.messages().len();
    let g = graph(
        e.client
            .send_message(PNID, TOKEN, &text(CUSTOMER, "still there?", "t2"))
            .await,
    );
    assert_eq!(g.code, Some(130403));
    assert_eq!(e.sim.messages().len(), before, "nothing was accepted");
    let refused = e
        .sim
        .inject_inbound(json!({"phone_number_id": PNID, "from": CUSTOMER, "type": "text", "text": {"body": "hello?"}}));
    assert!(refused.is_err());
    // Unblocked: they are reached again.
    e.client
        .unblock_users(PNID, TOKEN, &[CUSTOMER])
        .await
        .unwrap();
    e.client
        .send_message(PNID, TOKEN, &text(CUSTOMER, "welcome back", "t3"))
        .await
        .unwrap();
    assert_eq!(e.sim.messages().len(), before + 1);
}
