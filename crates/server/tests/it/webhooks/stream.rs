//! `GET /events/stream` over HTTP against running servers (workers on), on both backends:
//! what arrives and how (the exact body a subscription receives), the `types` filter and
//! the refusals, resuming by `Last-Event-ID` (no gap, no repeat of acknowledged events,
//! events sent but not acknowledged again), two servers on one PostgreSQL database with the
//! stream moving between them, no event rows for an organisation without a stream, and
//! `POST /events/trigger` reaching a subscription and a stream.

use super::delivery::{app_for, consent, new_contact, received, subscribe};
use crate::common::{Backend, TestApp, assert_error, send};
use crate::media::fixture::FileServer;
use serde_json::{Value, json};
use std::time::Duration;
use tokio::sync::mpsc;

const STREAM: &str = "/api/public/v1/events/stream";
const TRIGGER: &str = "/api/public/v1/events/trigger";
/// How long an expected message may take (workers fan out at once; the poll is 750 ms).
const WITHIN: Duration = Duration::from_secs(15);

/// One thing read from an SSE connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Item {
    Event {
        event: String,
        id: String,
        data: String,
    },
    Comment(String),
}

/// An open SSE connection, read by a task (dropping it closes the connection).
pub(crate) struct Sse {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    rx: mpsc::UnboundedReceiver<Item>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Sse {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Sse {
    /// Connects to `base` + [`STREAM`] + `query` with `key` (and `Last-Event-ID`).
    pub(crate) async fn connect(
        base: &str,
        key: Option<&str>,
        query: &str,
        last: Option<&str>,
    ) -> Sse {
        let mut req = reqwest::Client::new().get(format!("{base}{STREAM}{query}"));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        if let Some(id) = last {
            req = req.header("last-event-id", id);
        }
        let res = req.send().await.expect("the stream answers");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            use futures::StreamExt as _;
            let mut body = res.bytes_stream();
            let mut buf = Vec::new();
            let (mut event, mut id, mut data) = (String::new(), String::new(), Vec::new());
            while let Some(Ok(chunk)) = body.next().await {
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=end).collect();
                    let line = String::from_utf8(line).unwrap();
                    let line = line.trim_end_matches('\n');
                    if line.is_empty() {
                        if !data.is_empty() {
                            let _ = tx.send(Item::Event {
                                event: std::mem::take(&mut event),
                                id: std::mem::take(&mut id),
                                data: std::mem::take::<Vec<String>>(&mut data).join("\n"),
                            });
                        }
                    } else if let Some(c) = line.strip_prefix(':') {
                        let _ = tx.send(Item::Comment(c.trim().to_string()));
                    } else {
                        let (f, v) = line.split_once(": ").unwrap_or((line, ""));
                        match f {
                            "event" => event = v.to_string(),
                            "id" => id = v.to_string(),
                            "data" => data.push(v.to_string()),
                            other => panic!("unexpected SSE field {other}"),
                        }
                    }
                }
            }
        });
        Sse {
            status,
            headers,
            rx,
            task,
        }
    }

    /// The next item, or `None` when the connection ended or nothing came within `within`.
    pub(crate) async fn next(&mut self, within: Duration) -> Option<Item> {
        tokio::time::timeout(within, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// The next event (comments skipped, keep-alives included); panics without one.
    pub(crate) async fn event(&mut self) -> (String, String, Value, String) {
        loop {
            match self.next(WITHIN).await {
                Some(Item::Event { event, id, data }) => {
                    let v = serde_json::from_str(&data).unwrap();
                    return (event, id, v, data);
                }
                Some(Item::Comment(_)) => continue,
                None => panic!("no event arrived"),
            }
        }
    }

    /// The next `n` events' ids.
    pub(crate) async fn ids(&mut self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        while out.len() < n {
            out.push(self.event().await.1);
        }
        out
    }

    /// Asserts that no event comes within `quiet` (comments are fine).
    pub(crate) async fn no_event(&mut self, quiet: Duration) {
        let deadline = tokio::time::Instant::now() + quiet;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(Item::Event { id, event, .. }) => panic!("unexpected event {event} {id}"),
                Some(Item::Comment(_)) => continue,
                None => return,
            }
        }
    }

    /// The next item, which must be a comment (e.g. the stream's first).
    pub(crate) async fn comment(&mut self) -> String {
        match self.next(WITHIN).await {
            Some(Item::Comment(c)) => c,
            other => panic!("expected a comment, got {other:?}"),
        }
    }
}

/// `POST /events/trigger` of `kind` on `base`: the event id.
pub(crate) async fn trigger(base: &str, key: &str, kind: &str) -> (String, u64) {
    let (s, _, b) = send(
        reqwest::Client::new()
            .post(format!("{base}{TRIGGER}"))
            .bearer_auth(key)
            .json(&json!({"type": kind})),
    )
    .await;
    assert_eq!(s, 202, "{b}");
    (
        b["event_id"].as_str().unwrap().to_string(),
        b["recipients"].as_u64().unwrap(),
    )
}

/// Checks that a connection is open: its first comment (the stream is registered and held
/// before the answer's head is sent).
async fn opened(sse: &mut Sse) {
    assert_eq!(sse.status, 200);
    sse.comment().await;
}

async fn events_arrive_as_subscriptions_receive_them(backend: Backend) {
    let files = FileServer::start().await;
    let app = app_for(backend, &files, "0,0").workers().start().await;
    let key = app.owner_key("full_access").await.1;
    subscribe(&app, &key, &files.url("/hook/204"), &["contact.consent"]).await;
    let mut sse = Sse::connect(&app.base, Some(&key), "?types=contact.consent", None).await;
    assert_eq!(sse.status, 200);
    assert_eq!(sse.headers["content-type"], "text/event-stream");
    assert_eq!(sse.headers["cache-control"], "no-cache");
    assert_eq!(sse.headers["x-accel-buffering"], "no");
    assert_eq!(sse.comment().await, "starting from now");
    // An event written after connecting.
    let contact = new_contact(&app, &key, "+447700900123").await;
    consent(&app, &key, &contact, "opted_in").await;
    let (event, id, v, data) = sse.event().await;
    assert_eq!(event, "contact.consent");
    assert_eq!(v["id"], id.as_str());
    assert_eq!(v["type"], "contact.consent");
    assert_eq!(v["data"]["id"], contact.as_str());
    assert!(!data.contains('\n'));
    // Exactly the body the subscription got (same bytes).
    let got = crate::common::eventually_within(WITHIN, "the subscription's delivery", || {
        let r = received(&files, "/hook/204");
        async move { (!r.is_empty()).then_some(r) }
    })
    .await;
    assert_eq!(String::from_utf8(got[0].1.clone()).unwrap(), data);
    assert_eq!(got[0].0["webhook-id"].to_str().unwrap(), id);
    // Streams are not subscriptions: not listed, not counted.
    let list = app
        .get("/api/public/v1/webhook-subscriptions", Some(&key))
        .await
        .2;
    assert_eq!(list["data"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(
        app.db
            .count_webhook_subscriptions(app.org_uuid())
            .await
            .unwrap(),
        1
    );
    let streams = app.db.list_event_streams(app.org_uuid()).await.unwrap();
    assert_eq!(streams.len(), 1);
    assert_eq!(streams[0].event_types, ["contact.consent"]);
    drop(sse);
    files.stop();
    app.stop().await;
}

async fn types_filter_and_refusals(backend: Backend) {
    let app = TestApp::builder(backend).workers().start().await;
    let key = app.owner_key("full_access").await.1;
    let mut only = Sse::connect(&app.base, Some(&key), "?types=template.status", None).await;
    let mut all = Sse::connect(&app.base, Some(&key), "", None).await;
    opened(&mut only).await;
    opened(&mut all).await;
    let (consent_id, n) = trigger(&app.base, &key, "contact.consent").await;
    assert_eq!(n, 1, "only the stream of every type wants it");
    let (template_id, n) = trigger(&app.base, &key, "template.status").await;
    assert_eq!(n, 2);
    assert_eq!(all.ids(2).await, [consent_id, template_id.clone()]);
    let (event, id, v, _) = only.event().await;
    assert_eq!(
        (event.as_str(), id.as_str()),
        ("template.status", template_id.as_str())
    );
    assert_eq!(v["data"]["name"], "test_template");
    only.no_event(Duration::from_millis(1500)).await;

    // 400 with the field's path, 401 without a key, 403 without the permission.
    let (s, h, b) = app
        .get(&format!("{STREAM}?types=message.status,nope"), Some(&key))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "types[1]", "{b}");
    let (s, h, b) = app
        .get(&format!("{STREAM}?type=message.status"), Some(&key))
        .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    let (s, h, b) = app.get(STREAM, None).await;
    assert_error(s, &h, &b, 401, "unauthenticated");
    let reader = app.owner_key("read_only").await.1;
    let (s, h, b) = app.get(STREAM, Some(&reader)).await;
    assert_error(s, &h, &b, 403, "permission_denied");
    let (s, h, b) = send(
        app.http
            .post(app.url(TRIGGER))
            .bearer_auth(&reader)
            .json(&json!({"type": "contact.consent"})),
    )
    .await;
    assert_error(s, &h, &b, 403, "permission_denied");
    let (s, h, b) = send(
        app.http
            .post(app.url(TRIGGER))
            .bearer_auth(&key)
            .json(&json!({"type": "nope"})),
    )
    .await;
    assert_error(s, &h, &b, 400, "validation_failed");
    assert_eq!(b["details"]["fields"][0]["field"], "type", "{b}");
    drop((only, all));
    app.stop().await;
}

async fn reconnects_resume_without_gap_or_repeat(backend: Backend) {
    let app = TestApp::builder(backend).workers().start().await;
    let key = app.owner_key("full_access").await.1;
    let q = "?types=contact.consent";
    let mut sse = Sse::connect(&app.base, Some(&key), q, None).await;
    opened(&mut sse).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(trigger(&app.base, &key, "contact.consent").await.0);
    }
    assert_eq!(sse.ids(3).await, ids);
    drop(sse);
    // While nobody listens, two more.
    for _ in 0..2 {
        ids.push(trigger(&app.base, &key, "contact.consent").await.0);
    }
    // The client got only the first event: the two sent after it come again, then the gap.
    let mut sse = Sse::connect(&app.base, Some(&key), q, Some(&ids[0])).await;
    assert_eq!(sse.comment().await, format!("resuming after {}", ids[0]));
    assert_eq!(sse.ids(4).await, ids[1..5]);
    sse.no_event(Duration::from_millis(1500)).await;
    drop(sse);
    // Everything received: nothing again, new events only.
    let mut sse = Sse::connect(&app.base, Some(&key), q, Some(&ids[4])).await;
    opened(&mut sse).await;
    let next = trigger(&app.base, &key, "contact.consent").await.0;
    assert_eq!(sse.ids(1).await, [next]);
    sse.no_event(Duration::from_millis(1500)).await;
    drop(sse);
    let streams = app.db.list_event_streams(app.org_uuid()).await.unwrap();
    assert_eq!(streams.len(), 1, "one stream for the key and types");
    // An unknown id starts from now and says so: the event fanned out before it is not sent.
    let head = app.db.stream_head(app.org_uuid()).await.unwrap();
    trigger(&app.base, &key, "contact.consent").await;
    crate::common::eventually_within(WITHIN, "the fan-out", || async {
        (app.db.stream_head(app.org_uuid()).await.unwrap() == head + 1).then_some(())
    })
    .await;
    let mut sse = Sse::connect(&app.base, Some(&key), q, Some("not-an-event")).await;
    assert_eq!(
        sse.comment().await,
        "Last-Event-ID not-an-event is unknown or expired: starting from now"
    );
    assert_eq!(sse.comment().await, "starting from now");
    sse.no_event(Duration::from_millis(1500)).await;
    // A second connection takes the stream over; the first is told and ends.
    let mut second = Sse::connect(&app.base, Some(&key), q, None).await;
    opened(&mut second).await;
    let last = trigger(&app.base, &key, "contact.consent").await.0;
    assert_eq!(second.ids(1).await, [last]);
    let mut told = false;
    while let Some(item) = sse.next(WITHIN).await {
        assert!(matches!(item, Item::Comment(_)), "{item:?}");
        told |= item == Item::Comment("another connection took this stream over".into());
    }
    assert!(told, "the first connection is told it was taken over");
    drop(second);
    // Housekeeping: a stream no connection held for 24 hours goes, with its rows.
    // (A minute past: the closed connections' releases may land a moment after this.)
    let later =
        tern_domain::time::now_ms() + tern_engine::housekeeping::STREAM_RETENTION_MS + 60_000;
    let kept = tern_engine::housekeeping::once(&app.db, later - 120_000)
        .await
        .unwrap();
    assert_eq!(kept.event_streams, 0, "not yet 24 hours");
    let pruned = tern_engine::housekeeping::once(&app.db, later)
        .await
        .unwrap();
    assert_eq!(pruned.event_streams, 1, "{pruned:?}");
    assert!(
        app.db
            .list_event_streams(app.org_uuid())
            .await
            .unwrap()
            .is_empty()
    );
    app.stop().await;
}

async fn an_org_without_a_stream_stores_no_events(backend: Backend) {
    let app = TestApp::builder(backend).workers().start().await;
    let key = app.owner_key("full_access").await.1;
    let (other_org, other_key) = app
        .other_org("Quiet", tern_domain::auth::Preset::FullAccess)
        .await;
    let other_org: uuid::Uuid = other_org.parse().unwrap();
    let mut sse = Sse::connect(&app.base, Some(&key), "", None).await;
    opened(&mut sse).await;
    let c = new_contact(&app, &other_key, "+447700900555").await;
    consent(&app, &other_key, &c, "opted_in").await;
    let c = new_contact(&app, &key, "+447700900556").await;
    consent(&app, &key, &c, "opted_in").await;
    sse.event().await;
    assert_eq!(app.db.count_org_events(other_org).await.unwrap(), 0);
    assert_eq!(app.db.count_org_events(app.org_uuid()).await.unwrap(), 1);
    drop(sse);
    app.stop().await;
}

async fn trigger_reaches_a_subscription_and_a_stream(backend: Backend) {
    let files = FileServer::start().await;
    let app = app_for(backend, &files, "0,0").workers().start().await;
    let key = app.owner_key("full_access").await.1;
    subscribe(&app, &key, &files.url("/hook/200"), &["message.status"]).await;
    subscribe(&app, &key, &files.url("/hook/202"), &["template.status"]).await;
    let mut sse = Sse::connect(&app.base, Some(&key), "?types=message.status", None).await;
    opened(&mut sse).await;
    let (id, n) = trigger(&app.base, &key, "message.status").await;
    assert_eq!(n, 2);
    let (event, got, v, data) = sse.event().await;
    assert_eq!(
        (event.as_str(), got.as_str()),
        ("message.status", id.as_str())
    );
    assert_eq!(v["data"]["wamid"], "wamid.TEST");
    let hooks = crate::common::eventually_within(WITHIN, "the subscription's delivery", || {
        let r = received(&files, "/hook/200");
        async move { (!r.is_empty()).then_some(r) }
    })
    .await;
    assert_eq!(hooks.len(), 1);
    assert_eq!(String::from_utf8(hooks[0].1.clone()).unwrap(), data);
    assert!(received(&files, "/hook/202").is_empty());
    // Nobody wants it: nothing stored.
    let (_, n) = trigger(&app.base, &key, "campaign.status").await;
    assert_eq!(n, 0);
    drop(sse);
    files.stop();
    app.stop().await;
}

/// A server of its own on `db` (its own wake-ups, as another process), with workers.
async fn server_on(
    db: tern_store::Db,
) -> (String, tokio::sync::oneshot::Sender<()>, tern::app::Workers) {
    let config = tern::config::Config::load(None).unwrap();
    let key = tern::app::master_key(&db, &config).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = tern::app::state(db.clone(), key, &config);
    let workers = tern::app::Workers::start(&db, &state);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(tern::app::serve_on(listener, state, async move {
        let _ = rx.await;
    }));
    (base, tx, workers)
}

/// Two servers on one PostgreSQL database: events written through either reach the stream
/// wherever it is connected, and the stream moves from one server to the other (taken over,
/// then resumed after the first one stops) with no gap and no repeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_moves_between_two_servers_on_one_postgres() {
    let (url, schema) = crate::common::create_pg_schema();
    let db_a = tern_store::Db::connect(&url).await.unwrap();
    db_a.migrate().await.unwrap();
    let db_b = tern_store::Db::connect(&url).await.unwrap();
    let config = tern::config::Config::load(None).unwrap();
    let master = tern::app::master_key(&db_a, &config).await.unwrap();
    let seeded = tern_core::testkit::Seed::org("Shared")
        .key("dev@shared.test", tern_domain::auth::Preset::FullAccess)
        .create(&db_a, &master)
        .await;
    let key = seeded.keys[0].plaintext.clone();
    let (a, stop_a, workers_a) = server_on(db_a.clone()).await;
    let (b, stop_b, workers_b) = server_on(db_b.clone()).await;
    let q = "?types=template.status";

    let mut on_a = Sse::connect(&a, Some(&key), q, None).await;
    opened(&mut on_a).await;
    // Written through B (another process's fan-out): A's stream finds it by polling.
    let first = trigger(&b, &key, "template.status").await.0;
    let second = trigger(&a, &key, "template.status").await.0;
    assert_eq!(on_a.ids(2).await, [first.clone(), second.clone()]);
    // The stream moves to B, resuming after the first event: the second comes again.
    let third = trigger(&b, &key, "template.status").await.0;
    let mut on_b = Sse::connect(&b, Some(&key), q, Some(&first)).await;
    assert_eq!(on_b.ids(2).await, [second.clone(), third.clone()]);
    let mut told = false;
    while let Some(item) = on_a.next(WITHIN).await {
        told |= item == Item::Comment("another connection took this stream over".into());
        assert!(
            matches!(item, Item::Comment(_)),
            "A sends nothing more: {item:?}"
        );
    }
    assert!(told);
    // B stops (its stream ends, told so); the client goes back to A where it left off.
    let fourth = trigger(&a, &key, "template.status").await.0;
    assert_eq!(on_b.ids(1).await, std::slice::from_ref(&fourth));
    let _ = stop_b.send(());
    let mut ended_with = Vec::new();
    while let Some(item) = on_b.next(WITHIN).await {
        ended_with.push(item);
    }
    assert!(
        ended_with.contains(&Item::Comment(
            "the server is shutting down: reconnect with Last-Event-ID".into()
        )),
        "{ended_with:?}"
    );
    workers_b.stop().await;
    let fifth = trigger(&a, &key, "template.status").await.0;
    let mut back = Sse::connect(&a, Some(&key), q, Some(&fourth)).await;
    assert_eq!(back.ids(1).await, [fifth]);
    back.no_event(Duration::from_millis(1500)).await;
    drop((on_a, on_b, back));
    let _ = stop_a.send(());
    workers_a.stop().await;
    let _ = schema;
    db_a.drop_test_schema().await.unwrap();
}

tern_store::both_backends! { Backend;
    events_arrive_as_subscriptions_receive_them,
    types_filter_and_refusals,
    reconnects_resume_without_gap_or_repeat,
    an_org_without_a_stream_stores_no_events,
    trigger_reaches_a_subscription_and_a_stream,
}
