//! The message explorer and the message page over HTTP with a real session (APP.md §4): each
//! kind of search term finds the organisation's message and never another organisation's,
//! the filters, pages of 50, the message page and its live fragment, 404 for another
//! organisation's message. ("Replay" of a delivery: `message_replay.rs`.)

use super::signed_in;
use crate::common::TestApp;
use crate::customers::{deliver, text_from};
use serde_json::json;
use tern_domain::failure::Failure;
use tern_domain::message::{Direction, Status};
use tern_store::Message;
use uuid::Uuid;

const PNID: &str = "900100";
const OTHER_PNID: &str = "900777";
const PHONE: &str = "447700900001";
const BSUID: &str = "US.13491208655302741918";

/// The organisation's message with this wamid.
pub(super) async fn by_wamid(app: &TestApp, org: &str, wamid: &str) -> Message {
    let id = app
        .db
        .message_id_by_wamid(org.parse().unwrap(), wamid)
        .await
        .unwrap()
        .expect("stored");
    app.db
        .get_message(org.parse().unwrap(), id)
        .await
        .unwrap()
        .unwrap()
}

/// An outbound message to the contact of `like` (same conversation), as the send path stores
/// it, in `status`.
pub(super) async fn outbound_like(
    app: &TestApp,
    like: &Message,
    status: Status,
    campaign: Option<Uuid>,
) -> Message {
    let now = tern_domain::time::now_ms();
    let failed = status == Status::Failed;
    let m = Message {
        id: Uuid::now_v7(),
        direction: Direction::Outbound,
        status,
        r#type: "text".into(),
        text: Some("Your order shipped".into()),
        wamid: Some(format!("wamid.OUT{}", Uuid::now_v7().simple())),
        request: json!({}),
        campaign_id: campaign,
        created_at: now,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: failed.then_some(now),
        failure_code: failed.then(|| "recipient_unreachable".to_string()),
        failure: failed.then(|| {
            Failure::tern(
                "recipient_unreachable",
                "The network could not reach the customer.",
            )
        }),
        updated_at: now,
        content: None,
        reply_to: None,
        referral: None,
        edited_at: None,
        revoked_at: None,
        ..like.clone()
    };
    assert!(app.db.insert_message(&m).await.unwrap());
    m
}

/// Whether the explorer's page lists message `id`.
fn lists(page: &str, id: &Uuid) -> bool {
    page.contains(&format!("href=\"/app/messages/{id}\""))
}

async fn search(b: &super::Browser, query: &str) -> (u16, String) {
    b.get(&format!("/app/messages?{query}")).await
}

fn q(term: &str) -> String {
    format!(
        "q={}",
        url::form_urlencoded::byte_serialize(term.as_bytes()).collect::<String>()
    )
}

async fn search_and_filters(app: &TestApp) {
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    // Kim writes with a phone, a BSUID and a username; Lee with a phone only.
    deliver(
        app,
        &text_from(Some(PHONE), Some(BSUID), Some("Kim.H"), "hello"),
    )
    .await;
    deliver(
        app,
        &text_from(Some("447700900002"), None, None, "hi there"),
    )
    .await;
    let org = app.org_id.clone();
    let msgs = app
        .db
        .explore_messages(&tern_store::ExplorerQuery {
            org_id: app.org_uuid(),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(msgs.len(), 2);
    let lee_in = msgs[0].clone();
    let kim_in = msgs[1].clone();
    let kim_out = outbound_like(app, &kim_in, Status::Failed, None).await;
    // Another organisation: the same customer writes to its number.
    let other = app.new_org("Globex", "growth").await;
    app.add_number(&other, OTHER_PNID, "+14155550199").await;
    let mut body = text_from(Some(PHONE), Some(BSUID), Some("Kim.H"), "hello other");
    body["entry"][0]["changes"][0]["value"]["metadata"]["phone_number_id"] = json!(OTHER_PNID);
    let other_wamid = body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    deliver(app, &body).await;
    let other_msg = by_wamid(app, &other, &other_wamid).await;

    let b = signed_in(app, &org, "explorer@acme.test", "developer").await;
    let (s, h, all) = b.get_full("/app/messages").await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(h["cache-control"], "no-store");
    for m in [&kim_in, &kim_out, &lee_in] {
        assert!(lists(&all, &m.id), "{all}");
    }
    assert!(!lists(&all, &other_msg.id));
    // Newest first.
    let pos = |id: &Uuid| all.find(&format!("/app/messages/{id}\"")).unwrap();
    assert!(pos(&kim_out.id) < pos(&lee_in.id) && pos(&lee_in.id) < pos(&kim_in.id));
    assert!(all.contains("+447700900001 (Kim)"), "{all}");
    assert!(all.contains("recipient_unreachable"));

    // Each kind of term finds Kim's messages, and never the other organisation's.
    for term in [
        "+44 7700 900001",
        "447700900001",
        "+44 (7700) 900-001",
        "@kim.h",
        BSUID,
    ] {
        let (s, page) = search(&b, &q(term)).await;
        assert_eq!(s, 200, "{term}: {page}");
        assert!(
            lists(&page, &kim_in.id) && lists(&page, &kim_out.id),
            "{term}: {page}"
        );
        assert!(!lists(&page, &lee_in.id), "{term}");
        assert!(!lists(&page, &other_msg.id), "{term}");
    }
    for (term, want) in [
        (kim_in.wamid.clone().unwrap(), &kim_in),
        (kim_out.id.to_string(), &kim_out),
    ] {
        let (_, page) = search(&b, &q(&term)).await;
        assert!(lists(&page, &want.id), "{term}: {page}");
        assert!(!lists(&page, &lee_in.id));
    }
    // Another organisation's wamid and id find nothing here.
    for term in [other_wamid.clone(), other_msg.id.to_string()] {
        let (s, page) = search(&b, &q(&term)).await;
        assert_eq!(s, 200);
        assert!(page.contains("No message matches"), "{page}");
        assert!(!lists(&page, &other_msg.id));
    }
    // An unknown customer: nothing, explained.
    let (_, page) = search(&b, &q("+1 415 555 0199")).await;
    assert!(page.contains("No message matches"), "{page}");
    // A term the explorer cannot read: words, not a 500.
    let (s, page) = search(&b, &q("hello world")).await;
    assert_eq!(s, 422);
    assert!(
        page.contains("id=\"explorer-problems\"") && page.contains("hello world"),
        "{page}"
    );

    // Filters, alone and with a term.
    let (_, page) = search(&b, "status=failed").await;
    assert!(lists(&page, &kim_out.id) && !lists(&page, &kim_in.id) && !lists(&page, &lee_in.id));
    let (_, page) = search(&b, "direction=inbound").await;
    assert!(lists(&page, &kim_in.id) && lists(&page, &lee_in.id) && !lists(&page, &kim_out.id));
    let (_, page) = search(&b, &format!("{}&direction=outbound", q(PHONE))).await;
    assert!(lists(&page, &kim_out.id) && !lists(&page, &kim_in.id));
    let (_, page) = search(&b, &format!("number={PNID}")).await;
    assert!(lists(&page, &kim_in.id) && lists(&page, &lee_in.id));
    let (_, page) = search(&b, &format!("number={OTHER_PNID}")).await;
    assert!(!lists(&page, &other_msg.id) && page.contains("No message matches"));
    let (_, page) = search(&b, "from=2100-01-01T00:00").await;
    assert!(page.contains("No message matches"), "{page}");
    let (_, page) = search(&b, "until=2000-01-01T00:00").await;
    assert!(page.contains("No message matches"));
    let (_, page) = search(&b, "from=2000-01-01T00:00&until=2100-01-01T00:00").await;
    assert!(lists(&page, &kim_in.id) && lists(&page, &lee_in.id));
    let (s, page) = search(&b, "status=lost&from=soon").await;
    assert_eq!(s, 422);
    assert!(
        page.contains("Choose a status") && page.contains("From: enter a date"),
        "{page}"
    );

    // The message page: its fields, and 404 for another organisation's message.
    let (s, h, page) = b.get_full(&format!("/app/messages/{}", kim_out.id)).await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(h["cache-control"], "no-store");
    assert!(
        page.contains("Your order shipped") && page.contains("+14155550100"),
        "{page}"
    );
    assert!(
        page.contains("recipient_unreachable")
            && page.contains("The network could not reach the customer.")
    );
    // Failed a moment ago: its last event may still be delivered, so the page refreshes
    // itself for a minute after its last entry (`settled`, unit-tested in the app).
    assert!(
        page.contains("data-final=\"false\""),
        "a message that has just failed still refreshes"
    );
    assert_eq!(
        b.get(&format!("/app/messages/{}", other_msg.id)).await.0,
        404
    );
    assert_eq!(
        b.get(&format!("/app/messages/{}/live", other_msg.id))
            .await
            .0,
        404
    );
    assert_eq!(b.get("/app/messages/not-an-id").await.0, 404);
    // The live fragment of a message still moving says so.
    let sent = outbound_like(app, &kim_in, Status::Sent, None).await;
    let (s, h, frag) = b.get_full(&format!("/app/messages/{}/live", sent.id)).await;
    assert_eq!(s, 200);
    assert_eq!(h["cache-control"], "no-store");
    assert!(
        frag.trim_start().starts_with("<div id=\"message-live\""),
        "{frag}"
    );
    assert!(frag.contains("data-final=\"false\"") && frag.contains("data-status=\"sent\""));
    assert!(!frag.contains("<html"), "a fragment, not a page");
    let (_, page) = b.get(&format!("/app/messages/{}", sent.id)).await;
    assert!(
        page.contains("data-live-refresh"),
        "a Refresh link without script"
    );
    // An inbound message received a moment ago refreshes too, for a minute: its
    // `message.received` deliveries come after it.
    let (_, frag) = b.get(&format!("/app/messages/{}/live", kim_in.id)).await;
    assert!(frag.contains("data-final=\"false\"") && frag.contains("data-status=\"received\""));
}

async fn pages_of_fifty(app: &TestApp) {
    app.add_number(&app.org_id, PNID, "+14155550100").await;
    deliver(app, &text_from(Some(PHONE), None, None, "first")).await;
    let first = app
        .db
        .explore_messages(&tern_store::ExplorerQuery {
            org_id: app.org_uuid(),
            limit: 1,
            ..Default::default()
        })
        .await
        .unwrap()
        .remove(0);
    let mut ids = vec![first.id];
    for _ in 0..54 {
        ids.push(outbound_like(app, &first, Status::Delivered, None).await.id);
    }
    let b = signed_in(app, &app.org_id, "pages@acme.test", "owner").await;
    let (_, page1) = search(&b, &q(PHONE)).await;
    let listed = |p: &str| ids.iter().filter(|id| lists(p, id)).count();
    assert_eq!(listed(&page1), 50);
    assert!(lists(&page1, &ids[54]) && !lists(&page1, &ids[4]));
    let at = page1.find("Older messages").expect("a next page");
    let href_start = page1[..at].rfind("href=\"").unwrap() + 6;
    let href = page1[href_start..at]
        .split('"')
        .next()
        .unwrap()
        .replace("&#38;", "&");
    assert!(
        href.contains("q=447700900001") && href.contains("before="),
        "{href}"
    );
    let (_, page2) = b.get(&href).await;
    assert_eq!(listed(&page2), 5, "{page2}");
    assert!(lists(&page2, &ids[0]) && !page2.contains("Older messages"));
    assert!(page2.contains("Newest messages"));
}

tern_store::both_backends! { TestApp;
    each_term_and_filter_finds_the_organisations_messages => search_and_filters,
    the_explorer_pages_by_fifty => pages_of_fifty,
}
