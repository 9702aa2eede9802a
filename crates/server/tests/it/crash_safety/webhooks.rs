//! Event webhooks survive `kill -9` (SQLite: one `tern serve`, killed mid-run and started
//! again; PostgreSQL: two `tern serve` processes on one database, one killed mid-run):
//! consent changes are made through both, a `tern serve` is killed while deliveries are
//! being made, and in the end every stored event has been delivered (verified with the
//! official Standard Webhooks library), none lost; a duplicate is only a repeated attempt
//! of one `webhook-id`, with the same bytes.

use super::*;
use crate::media::fixture::FileServer;
use tern_store::DeliveryStatus;

/// Contacts, one consent change each (one event each).
const N: usize = 120;
/// The server is killed once this many consent changes were answered.
const KILL_AT: usize = 50;

mod kill_9_during_deliveries_loses_no_event {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        scenario("wh-kill9-sqlite", Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_two_processes() {
        scenario("wh-kill9-postgres", Backend::Postgres).await;
    }
}

async fn scenario(label: &'static str, backend: Backend) {
    let files = FileServer::start().await;
    let mut fx = Fixture::new(label, backend).await;
    fx.extra_env = vec![
        ("TERN_ALLOW_NETWORKS".into(), "127.0.0.1/32".into()),
        (
            "TERN_EXTRA_CA_FILE".into(),
            files.ca_file.path().display().to_string(),
        ),
        // A killed process's claims come back soon.
        ("TERN_WEBHOOK_LEASE_SECS".into(), "2".into()),
        ("TERN_WEBHOOK_RETRY_SCHEDULE".into(), "1,1,1,1,1,1".into()),
    ];
    fx.provision().await;
    let a = fx.serve("tern-a", free_port(), false).await;
    let b = match backend {
        Backend::Postgres => Some(fx.serve("tern-b", free_port(), false).await),
        Backend::Sqlite => None,
    };
    let base = |port: u16| format!("http://127.0.0.1:{port}{API}");
    let key = fx.api_key.clone();
    let r = fx
        .http
        .post(format!("{}/webhook-subscriptions", base(a)))
        .bearer_auth(&key)
        .json(&json!({"url": files.url("/hook/204"), "events": ["contact.consent"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let secret = r.json::<Value>().await.unwrap()["secret"]
        .as_str()
        .unwrap()
        .to_string();
    let mut contacts = Vec::new();
    for i in 0..N {
        let r = fx
            .http
            .post(format!("{}/contacts", base(a)))
            .bearer_auth(&key)
            .json(&json!({"phone": format!("+4477009{i:05}")}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{r:?}");
        contacts.push(
            r.json::<Value>().await.unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }

    // Consent changes through every server, a few at a time; kill -9 server A mid-way.
    let answered = Arc::new(AtomicUsize::new(0));
    let kill_now = Arc::new(tokio::sync::Notify::new());
    let mut load = JoinSet::new();
    for (i, c) in contacts.iter().enumerate() {
        let port = match (b, i % 2) {
            (Some(b), 1) => b,
            _ => a,
        };
        let (http, url, key) = (
            fx.http.clone(),
            format!("{}/contacts/{c}/consent", base(port)),
            key.clone(),
        );
        let (answered, kill_now) = (answered.clone(), kill_now.clone());
        load.spawn(async move {
            let r = http
                .post(url)
                .bearer_auth(key)
                .json(&json!({"status": "opted_in", "source": "web_form"}))
                .send()
                .await;
            if matches!(&r, Ok(r) if r.status() == 200)
                && answered.fetch_add(1, Ordering::SeqCst) + 1 == KILL_AT
            {
                kill_now.notify_one();
            }
        });
        if load.len() >= 8 {
            load.join_next().await;
        }
    }
    tokio::time::timeout(Duration::from_secs(120), kill_now.notified())
        .await
        .expect("the load reached the kill point");
    let (_, server_a) = fx.servers.remove(0);
    server_a.kill_9();
    while load.join_next().await.is_some() {}
    // Server A comes back (SQLite: the only one; PostgreSQL: beside B).
    fx.serve("tern-a-again", free_port(), false).await;

    // Every stored event is delivered in the end.
    let deadline = Instant::now() + Duration::from_secs(120);
    let states = loop {
        let states = fx.db.webhook_delivery_states().await.unwrap();
        if !states.is_empty() && states.iter().all(|(_, s)| *s == DeliveryStatus::Succeeded) {
            break states;
        }
        assert!(
            Instant::now() < deadline,
            "{label}: deliveries not settled: {:?}",
            states.iter().fold(BTreeMap::new(), |mut m, (_, s)| {
                *m.entry(s.as_str()).or_insert(0) += 1;
                m
            })
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let events: HashSet<String> = states.iter().map(|(e, _)| e.to_string()).collect();
    let answered = answered.load(Ordering::SeqCst);
    assert!(
        (answered..=N).contains(&events.len()),
        "{label}: {} events for {answered} answered changes",
        events.len()
    );
    let got = files.hooks.lock().unwrap().clone();
    let mut bodies: HashMap<String, Vec<u8>> = HashMap::new();
    for (h, body) in &got {
        let id = h["webhook-id"].to_str().unwrap().to_string();
        assert!(
            events.contains(&id),
            "{label}: an unknown event {id} was delivered"
        );
        if let Some(first) = bodies.insert(id.clone(), body.clone()) {
            assert_eq!(first, *body, "{label}: {id} delivered with other bytes");
        }
    }
    assert_eq!(bodies.len(), events.len(), "{label}: every event delivered");
    let items: Vec<_> = got
        .iter()
        .map(|(h, b)| (secret.clone(), h.clone(), b.clone()))
        .collect();
    assert!(
        crate::webhooks::python_verifies_all(&items)
            .iter()
            .all(|ok| *ok)
    );
    eprintln!(
        "{label}: {answered} changes answered, {} events, {} deliveries received ({} repeats)",
        events.len(),
        got.len(),
        got.len() - events.len()
    );
    files.stop();
}
