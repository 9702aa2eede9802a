#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The dispatcher against the network simulator over real HTTP, with a real database
//! (every test on SQLite and on PostgreSQL).

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tern_cloudapi::{ClientConfig, CloudApiClient};
use tern_core::Core;
use tern_domain::crypto::{MasterKey, Purpose};
use tern_domain::message::{Direction, Status};
use tern_domain::time::now_ms;
use tern_engine::dispatch::{DispatchConfig, DispatchReport, Dispatcher};
use tern_simulator::{ForcedAction, NumberSpec, SimArgs, SimHandle};
use tern_store::testkit::Fixture;
use tern_store::{Backend, Db, DispatchClaim, Message, Org, PhoneNumber};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const PNID: &str = "106540352242922";
const DISPLAY: &str = "+15550783881";
const WABA: &str = "102290129340398";
const TOKEN: &str = "sim-token-1";

/// A database with one organisation and its connected number, registered in a simulator.
#[derive(Clone)]
struct Env {
    db: Db,
    sim: Arc<SimHandle>,
    key: MasterKey,
    org_id: Uuid,
    backend: Backend,
    /// The SQLite database's directory, kept while the test runs.
    _dir: Option<Arc<tempfile::TempDir>>,
}

/// Test settings: short lease and grace, fast backoff and polling.
fn config() -> DispatchConfig {
    DispatchConfig {
        lease: Duration::from_secs(3),
        unknown_grace: Duration::from_millis(600),
        max_attempts: 6,
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_millis(80),
        batch_size: 20,
        max_in_flight: 16,
        poll_interval: Duration::from_millis(50),
        sweep_interval: Duration::from_millis(100),
        number_refresh: Duration::from_secs(5),
        default_mps: 80,
    }
}

impl Env {
    async fn start(backend: Backend) -> Env {
        let (db, dir) = match backend {
            Backend::Sqlite => {
                let (db, dir) = tern_store::testkit::fresh_sqlite().await;
                (db, Some(dir))
            }
            Backend::Postgres => (tern_store::testkit::fresh_postgres().await, None),
        };
        let mut args = SimArgs::local("test-app-secret");
        args.no_window = true;
        args.pair_burst = 100_000;
        args.pair_period_ms = 1;
        let sim = tern_simulator::start(args).await.unwrap();
        sim.register_number(NumberSpec {
            id: PNID.into(),
            display_phone_number: DISPLAY.into(),
            waba_id: WABA.into(),
            access_token: TOKEN.into(),
            throughput_mps: Some(1000),
            verified_name: None,
        })
        .unwrap();
        let key = MasterKey::from_bytes([7; 32]);
        let now = now_ms();
        let org = Org {
            id: Uuid::now_v7(),
            name: "Acme".into(),
            plan: "growth".into(),
            subscription_status: tern_domain::plan::SubscriptionStatus::Active,
            wallet_balance_minor: 0,
            wallet_currency: "EUR".into(),
            overrides: json!({}),
            billing_period_start: now,
            two_factor_required: false,
            created_at: now,
            updated_at: now,
            live_org_id: None,
        };
        db.insert_org(&org).await.unwrap();
        let env = Env {
            db,
            sim: Arc::new(sim),
            key,
            org_id: org.id,
            backend,
            _dir: dir.map(Arc::new),
        };
        env.add_number(PNID, "connected", Some(TOKEN), 1000).await;
        env
    }

    async fn add_number(&self, id: &str, status: &str, token: Option<&str>, mps: i64) {
        let now = now_ms();
        let access_token_enc = match token {
            Some(t) => self.key.seal(Purpose::TokenEncryption, t.as_bytes()),
            None => vec![1, 2, 3],
        };
        self.db
            .insert_phone_number(&PhoneNumber {
                id: id.into(),
                org_id: self.org_id,
                display_phone_number: format!("+1555{}", &id[id.len() - 7..]),
                waba_id: WABA.into(),
                access_token_enc,
                status: status.parse().unwrap(),
                throughput_mps: mps,
                created_at: now,
                updated_at: now,
                mode: tern_domain::auth::Mode::Live,
            })
            .await
            .unwrap();
    }

    fn client(&self, request_timeout: Duration) -> CloudApiClient {
        client_for(&self.sim.base_url(), request_timeout)
    }

    /// A core over this database whose network client is `cloud`.
    fn core(&self, cloud: CloudApiClient) -> Core {
        Core::new(self.db.clone(), self.key.clone(), cloud)
    }

    fn dispatcher(&self, config: DispatchConfig) -> Dispatcher {
        Dispatcher::new(self.core(self.client(Duration::from_secs(2))), config)
    }

    /// An accepted outbound message from `pnid` to `wa_id`, queued as the API does.
    async fn accept_on(&self, pnid: &str, wa_id: &str, request: Value) -> Uuid {
        let now = now_ms();
        let (contact, _) = self
            .db
            .upsert_contact_by_wa_id(self.org_id, wa_id, None, None, Uuid::now_v7(), now)
            .await
            .unwrap();
        let conversation = self
            .db
            .get_or_create_conversation(self.org_id, contact.id, pnid, Uuid::now_v7(), now)
            .await
            .unwrap();
        let id = Uuid::now_v7();
        let m = Message {
            id,
            org_id: self.org_id,
            conversation_id: conversation.id,
            contact_id: contact.id,
            phone_number_id: pnid.into(),
            direction: Direction::Outbound,
            r#type: request["type"].as_str().unwrap_or("text").into(),
            status: Status::Accepted,
            template_name: None,
            template_language: None,
            text: None,
            media_id: None,
            wamid: None,
            request,
            campaign_id: None,
            created_at: now,
            sent_at: None,
            delivered_at: None,
            read_at: None,
            failed_at: None,
            failure_code: None,
            failure: None,
            updated_at: now,
            content: None,
            reply_to: None,
            referral: None,
            edited_at: None,
            revoked_at: None,
            pricing: None,
        };
        assert!(self.db.insert_message(&m).await.unwrap());
        assert!(self.db.queue_message_dispatch(id, now).await.unwrap());
        id
    }

    async fn accept_text(&self, wa_id: &str, body: &str) -> Uuid {
        self.accept_on(
            PNID,
            wa_id,
            json!({"to": wa_id, "type": "text", "text": {"body": body}}),
        )
        .await
    }

    async fn message(&self, id: Uuid) -> Message {
        self.db
            .get_message(self.org_id, id)
            .await
            .unwrap()
            .expect("message exists")
    }

    /// Send requests the simulator received for message `id` (answered or not).
    fn requests_for(&self, id: Uuid) -> Vec<tern_simulator::RequestRecord> {
        let id = id.to_string();
        self.sim
            .requests()
            .into_iter()
            .filter(|r| r.body["biz_opaque_callback_data"].as_str() == Some(id.as_str()))
            .collect()
    }

    /// Messages the simulated network accepted for `id`.
    fn accepted_for(&self, id: Uuid) -> Vec<tern_simulator::MessageRecord> {
        let id = id.to_string();
        self.sim
            .messages()
            .into_iter()
            .filter(|m| m.biz_opaque_callback_data.as_deref() == Some(id.as_str()))
            .collect()
    }

    /// Debits the wallet for message `id` as the API does for a template message.
    async fn debit(&self, id: Uuid, amount: i64) {
        self.db
            .adjust_wallet(self.org_id, amount, "top_up", None, now_ms())
            .await
            .unwrap();
        self.db
            .adjust_wallet(self.org_id, -amount, "message_debit", Some(id), now_ms())
            .await
            .unwrap();
    }

    async fn balance(&self) -> i64 {
        self.db
            .get_org(self.org_id)
            .await
            .unwrap()
            .unwrap()
            .wallet_balance_minor
    }

    fn force(&self, action: ForcedAction, times: u32) {
        self.sim.force(PNID, action, times).unwrap();
    }
}

fn client_for(base_url: &str, request_timeout: Duration) -> CloudApiClient {
    CloudApiClient::new(ClientConfig {
        base_url: base_url.to_string(),
        connect_timeout: Duration::from_secs(1),
        request_timeout,
        ..ClientConfig::default()
    })
    .unwrap()
}

fn graph_error(code: i64) -> ForcedAction {
    ForcedAction::Error {
        code,
        subcode: None,
        http_status: None,
        title: None,
        details: None,
    }
}

/// Polls `f` every 20 ms until it yields, for at most `secs` seconds.
impl Env {
    /// Waits (at most 30 s) until nothing is queued, in flight or in doubt.
    async fn wait_for_empty_queue(&self, what: &str) {
        wait_for(what, 30, || {
            let env = self.clone();
            async move {
                (env.db.count_dispatch_queue().await.unwrap() == Default::default()).then_some(())
            }
        })
        .await;
    }
}

async fn wait_for<T, F, Fut>(what: &str, secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Drains until message `id` has status `status` (retries come due after short backoffs),
/// for at most 20 s; returns the summed report and the message.
async fn drain_until(
    env: &Env,
    d: &mut Dispatcher,
    id: Uuid,
    status: &str,
) -> (DispatchReport, Message) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mut total = DispatchReport::default();
    loop {
        let r = d.drain_once().await.unwrap();
        total.sent += r.sent;
        total.retried += r.retried;
        total.unknown += r.unknown;
        total.failed += r.failed;
        total.expired += r.expired;
        total.stale += r.stale;
        total.errors += r.errors;
        let m = env.message(id).await;
        if m.status.as_str() == status {
            return (total, m);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {id} to become {status}: {m:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The fixture of `both_backends!`: each test is given a clone of the `Env`.
impl Fixture for Env {
    type Arg<'a> = Env;
    fn start(backend: Backend) -> impl Future<Output = Self> {
        Env::start(backend)
    }
    fn arg(&self) -> Env {
        self.clone()
    }
    async fn stop(self) {
        match self.backend {
            Backend::Sqlite => self.db.close().await,
            Backend::Postgres => self.db.drop_test_schema().await.expect("drop test schema"),
        }
    }
}

tern_store::both_backends! { Env;
    housekeeping_prunes_only_what_outlived_its_purpose => async |env| {
        use tern_engine::housekeeping::{self, NETWORK_RETENTION_MS};
        let id = env.accept_text("16505551234", "kept").await;
        let m = env.message(id).await;
        let now = now_ms();
        // A key that expired and one still live.
        let old = Message { id: Uuid::now_v7(), ..m.clone() };
        env.db.accept_message(&old, "expired-key", &[1; 32], now - 1, &Default::default()).await.unwrap();
        let live = Message { id: Uuid::now_v7(), ..m };
        env.db.accept_message(&live, "live-key-1", &[1; 32], now + 60_000, &Default::default()).await.unwrap();
        // A processed batch and an event key older than the retention, and fresh ones.
        for (at, key) in [(now - NETWORK_RETENTION_MS - 1, "old"), (now, "new")] {
            let batch = Uuid::now_v7();
            env.db.insert_inbox(batch, b"{}", "sig", at).await.unwrap();
            env.db.mark_inbox_processed(batch, at).await.unwrap();
            assert!(env.db.remember_network_event(key, at).await.unwrap());
        }
        let pruned = housekeeping::once(&env.db, now).await.unwrap();
        assert_eq!((pruned.idempotency_keys, pruned.inbox_batches, pruned.network_event_keys), (1, 1, 1));
        assert!(env.db.get_idempotency_key(env.org_id, "live-key-1", now).await.unwrap().is_some());
        assert!(!env.db.remember_network_event("new", now).await.unwrap(), "fresh key kept");
        assert!(env.db.remember_network_event("old", now).await.unwrap(), "old key pruned");
        // The messages themselves stay.
        assert_eq!(env.message(old.id).await.id, old.id);
        assert_eq!(housekeeping::once(&env.db, now).await.unwrap(), Default::default());
    },

    sends_each_message_once_with_its_wamid => async |env| {
        let ids = [
            env.accept_text("16505551234", "one").await,
            env.accept_text("16505551235", "two").await,
            env.accept_text("447700900123", "three").await,
        ];
        let cancel = CancellationToken::new();
        let worker = tokio::spawn(tern_engine::dispatch::run(
            env.core(env.client(Duration::from_secs(2))), config(), cancel.clone()));
        for id in ids {
            let m = wait_for("sent", 10, || {
                let env = env.clone();
                async move { Some(env.message(id).await).filter(|m| m.status == Status::Sent) }
            }).await;
            let accepted = env.accepted_for(id);
            assert_eq!(accepted.len(), 1, "{id} accepted once");
            assert_eq!(m.wamid.as_deref(), Some(accepted[0].wamid.as_str()));
            assert!(m.sent_at.is_some_and(|t| t >= m.created_at));
            let requests = env.requests_for(id);
            assert_eq!(requests.len(), 1);
            let body = &requests[0].body;
            assert_eq!(body["messaging_product"], "whatsapp");
            assert_eq!(body["recipient_type"], "individual");
            assert_eq!(body["to"], format!("+{}", accepted[0].wa_id));
            assert_eq!(body["biz_opaque_callback_data"], id.to_string());
            assert_eq!(requests[0].path, format!("/v25.0/{PNID}/messages"));
            let info = env.db.dispatch_info(id).await.unwrap();
            assert_eq!((info.dispatch_state, info.attempts), (None, 1));
        }
        assert_eq!(env.accepted_for(ids[0])[0].payload["text"]["body"], "one");
        cancel.cancel();
        worker.await.unwrap();
        assert_eq!(env.db.count_dispatch_queue().await.unwrap(), Default::default());
    },

    wakeup_claims_at_once_without_waiting_for_a_poll => async |env| {
        // With a 60 s poll only the wakeup can start these sends within the wait below: the
        // store's, notified when the queue write commits.
        let cancel = CancellationToken::new();
        let worker = tokio::spawn(tern_engine::dispatch::run(
            env.core(env.client(Duration::from_secs(2))),
            DispatchConfig { poll_interval: Duration::from_secs(60), sweep_interval: Duration::from_secs(60), ..config() },
            cancel.clone()));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut latencies = Vec::new();
        for i in 0..20 {
            let id = env.accept_text("16505551234", &format!("m{i}")).await;
            let m = wait_for("sent after a wakeup", 5, || {
                let env = env.clone();
                async move { Some(env.message(id).await).filter(|m| m.status == Status::Sent) }
            }).await;
            latencies.push(m.sent_at.unwrap() - m.created_at);
        }
        latencies.sort_unstable();
        eprintln!("{:?}: accepted → sent p50 {} ms, max {} ms", env.backend, latencies[10], latencies[19]);
        cancel.cancel();
        worker.await.unwrap();
    },

    permanent_errors_fail_at_once_with_the_network_code => async |env| {
        env.force(ForcedAction::Error {
            code: 131047, subcode: None, http_status: None, title: None,
            details: Some("Message failed to send because more than 24 hours have passed".into()),
        }, 1);
        let id = env.accept_text("16505551234", "late").await;
        env.debit(id, 12).await;
        assert_eq!(env.balance().await, 0);
        let mut d = env.dispatcher(config());
        let r = d.drain_once().await.unwrap();
        assert_eq!((r.failed, r.sent, r.retried), (1, 0, 0));
        // It never reached the network: the debit is given back.
        assert_eq!(env.balance().await, 12);
        let m = env.message(id).await;
        assert_eq!(m.status, Status::Failed);
        assert_eq!(m.failure_code.as_deref(), Some("window_expired"));
        assert!(m.failed_at.is_some());
        let f = serde_json::to_value(m.failure.unwrap()).unwrap();
        assert_eq!(f["code"], "window_expired");
        assert_eq!(f["provider_code"], "131047");
        let wording = f["provider_message"].as_str().unwrap();
        assert!(wording.contains("(#131047)") && wording.contains("24 hours"), "{wording}");
        assert!(f["message"].as_str().unwrap().contains("template"), "{f}");
        assert!(f.get("provider_href").is_none());
        assert_eq!(env.requests_for(id).len(), 1);
        assert!(env.accepted_for(id).is_empty());
        let info = env.db.dispatch_info(id).await.unwrap();
        assert_eq!((info.dispatch_state, info.attempts), (None, 1));
        // Nothing more happens.
        assert_eq!(d.drain_once().await.unwrap(), DispatchReport::default());
        assert_eq!(env.requests_for(id).len(), 1);
    },

    throttling_and_server_errors_are_retried_then_sent => async |env| {
        env.force(graph_error(130429), 1);
        env.force(graph_error(131000), 1);
        env.force(ForcedAction::Html { http_status: 502 }, 1);
        env.force(graph_error(131016), 1);
        let id = env.accept_text("16505551234", "persist").await;
        env.debit(id, 5).await;
        let mut d = env.dispatcher(config());
        let (r, _) = drain_until(&env, &mut d, id, "sent").await;
        assert_eq!((r.retried, r.sent, r.failed), (4, 1, 0));
        let requests = env.requests_for(id);
        assert_eq!(requests.iter().map(|r| r.response_status).collect::<Vec<_>>(),
                   [Some(400), Some(500), Some(502), Some(500), Some(200)]);
        assert_eq!(env.accepted_for(id).len(), 1);
        let info = env.db.dispatch_info(id).await.unwrap();
        assert_eq!((info.dispatch_state, info.attempts), (None, 5));
        assert!(info.last_error.unwrap().contains("131016"));
        let m = env.message(id).await;
        assert_eq!(m.wamid.as_deref(), Some(env.accepted_for(id)[0].wamid.as_str()));
        assert_eq!(env.balance().await, 0, "sent: the debit stands");
    },

    retries_are_bounded_and_then_fail_with_the_network_code => async |env| {
        env.force(graph_error(131000), 10);
        let id = env.accept_text("16505551234", "doomed").await;
        let mut d = env.dispatcher(DispatchConfig { max_attempts: 3, ..config() });
        let (r, _) = drain_until(&env, &mut d, id, "failed").await;
        assert_eq!((r.retried, r.failed), (2, 1));
        assert_eq!(env.requests_for(id).len(), 3);
        let m = env.message(id).await;
        assert_eq!(m.failure_code.as_deref(), Some("network_error"));
        let f = serde_json::to_value(m.failure.unwrap()).unwrap();
        assert_eq!(f["provider_code"], "131000");
        assert!(f["message"].as_str().unwrap().contains("gave up after 3 attempts"), "{f}");
        assert_eq!(env.db.dispatch_info(id).await.unwrap().dispatch_state, None);
    },

    a_request_that_never_left_is_retried => async |env| {
        // A closed port: connection refused, nothing reached the network.
        // The port stays bound (so no parallel test can take it) but never listens.
        let reserved = tokio::net::TcpSocket::new_v4().unwrap();
        reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let closed = reserved.local_addr().unwrap();
        let id = env.accept_text("16505551234", "offline").await;
        // A longer backoff, so the retry rarely comes due again within this drain; when the
        // jitter is short it may, and each such attempt must be a retry too.
        let slow = DispatchConfig { backoff_base: Duration::from_millis(200), backoff_cap: Duration::from_millis(200), ..config() };
        let mut offline = Dispatcher::new(env.core(client_for(&format!("http://{closed}"), Duration::from_secs(2))), slow);
        let r = offline.drain_once().await.unwrap();
        assert!(r.retried >= 1, "{r:?}");
        assert_eq!((r.unknown, r.failed, r.sent), (0, 0, 0));
        let info = env.db.dispatch_info(id).await.unwrap();
        assert_eq!((info.status.as_str(), info.dispatch_state.as_deref(), info.attempts),
                   ("sending", Some("queued"), r.retried as i64));
        assert!(info.last_error.unwrap().contains("request not sent"));
        // The network is reachable again: sent once, on the next attempt.
        let mut d = env.dispatcher(config());
        let (r2, _) = drain_until(&env, &mut d, id, "sent").await;
        assert_eq!(r2.sent, 1);
        assert_eq!(env.requests_for(id).len(), 1);
        assert_eq!(env.db.dispatch_info(id).await.unwrap().attempts, r.retried as i64 + 1);
    },

    a_timeout_is_an_unknown_outcome_never_resent_then_failed_after_the_grace => async |env| {
        // The network takes the message but answers after the client gave up.
        env.force(ForcedAction::Hang { ms: Some(10_000), accept: true }, 1);
        let id = env.accept_text("16505551234", "slow").await;
        env.debit(id, 7).await;
        let mut d = Dispatcher::new(env.core(env.client(Duration::from_millis(300))), config());
        let r = d.drain_once().await.unwrap();
        assert_eq!((r.unknown, r.retried, r.sent), (1, 0, 0));
        let info = env.db.dispatch_info(id).await.unwrap();
        assert_eq!((info.status.as_str(), info.dispatch_state.as_deref()), ("sending", Some("unknown")));
        assert!(info.last_error.unwrap().contains("outcome unknown"));
        // Not sent again while in doubt, and failed once the grace period is over.
        let (r, m) = drain_until(&env, &mut d, id, "failed").await;
        assert_eq!((r.expired, r.sent, r.retried), (1, 0, 0));
        assert_eq!(m.failure_code.as_deref(), Some("network_outcome_unknown"));
        let f = serde_json::to_value(m.failure.unwrap()).unwrap();
        assert_eq!((f["code"].as_str(), &f["provider_code"]), (Some("network_outcome_unknown"), &Value::Null));
        assert!(f["message"].as_str().unwrap().contains("not sent again"), "{f}");
        assert_eq!(env.requests_for(id).len(), 1);
        assert_eq!(env.db.dispatch_info(id).await.unwrap().dispatch_state, None);
        // It may have reached the network: no refund.
        assert_eq!(env.balance().await, 0);
    },

    a_dropped_answer_is_settled_by_the_status_webhook => async |env| {
        env.force(ForcedAction::Drop { accept: true }, 1);
        let id = env.accept_text("16505551234", "dropped").await;
        let mut d = env.dispatcher(config());
        let r = d.drain_once().await.unwrap();
        assert_eq!(r.unknown, 1);
        assert_eq!(env.message(id).await.status, Status::Sending);
        // The network's `sent` status (no callback is set, so take it from the
        // simulator's delivery log) names the message by biz_opaque_callback_data.
        let body = wait_for("the sent status webhook", 10, || {
            let env = env.clone();
            async move {
                env.sim.deliveries().into_iter().map(|d| d.body).find(|b| {
                    let s = &b["entry"][0]["changes"][0]["value"]["statuses"][0];
                    s["status"] == "sent" && s["biz_opaque_callback_data"] == id.to_string()
                })
            }
        }).await;
        tern_engine::inbox::process_body(&env.db, &serde_json::to_vec(&body).unwrap()).await.unwrap();
        let m = env.message(id).await;
        assert_eq!(m.status, Status::Sent);
        assert_eq!(m.wamid.as_deref(), Some(env.accepted_for(id)[0].wamid.as_str()));
        // Past the grace period nothing fails and nothing is resent.
        tokio::time::sleep(config().unknown_grace + Duration::from_millis(100)).await;
        let r = d.drain_once().await.unwrap();
        assert_eq!(r.expired, 0);
        assert_eq!(env.message(id).await.status, Status::Sent);
        assert_eq!(env.db.dispatch_info(id).await.unwrap().dispatch_state, None);
        assert_eq!(env.requests_for(id).len(), 1);
    },

    outcomes_recorded_together_are_each_decided_as_alone => async |env| {
        use tern_core::messages::failure::Failure;
        use tern_core::messages::status::{self, Recorded, Report};
        use tern_domain::message::Precision;
        let mut ids = Vec::new();
        for i in 0..4 {
            ids.push(env.accept_text(&format!("1650555{i:04}"), "batch").await);
        }
        let claimed = env.db.status_writes().claim_dispatch(&DispatchClaim {
            phone_number_id: None, api_only: false, limit: 10, owner: "batch-worker", now: now_ms(),
            lease_ms: 30_000, grace_ms: 30_000,
        }).await.unwrap();
        assert_eq!(claimed.len(), 4);
        let item = |id: Uuid| claimed.iter().find(|c| c.id == id).unwrap();
        let report = |status, wamid, failure| Report { status, at: now_ms(), precision: Precision::Millis, wamid, failure, seen: None, attempt: None };
        // The network's `delivered` for the first came before its send answer.
        let delivered = report(Status::Delivered, None, None);
        status::apply_report(&env.db, env.org_id, "wamid.B0", Some(ids[0]), &delivered).await.unwrap();
        // The last one's claim went to another worker: its outcome is stale.
        let mut stale = item(ids[3]).clone();
        stale.lease_owner = "another-worker".into();
        let f = Failure::tern("message_payload_invalid", "x");
        let outcomes = [
            (item(ids[0]), report(Status::Sent, Some("wamid.B0"), None)),
            (item(ids[1]), report(Status::Sent, Some("wamid.B1"), None)),
            (item(ids[2]), report(Status::Failed, None, Some(&f))),
            (&stale, report(Status::Sent, Some("wamid.B3"), None)),
        ];
        let written = Recorded::Written { refunded_minor: 0 };
        assert_eq!(
            status::record_sends(&env.db, &outcomes).await.unwrap(),
            [written, written, written, Recorded::Stale]
        );
        let m: Vec<Message> = futures::future::join_all(ids.iter().map(|id| env.message(*id))).await;
        assert_eq!((m[0].status, m[0].wamid.as_deref()), (Status::Delivered, Some("wamid.B0")));
        assert!(m[0].sent_at.is_some() && m[0].sent_at <= m[0].delivered_at);
        assert_eq!((m[1].status, m[1].wamid.as_deref()), (Status::Sent, Some("wamid.B1")));
        assert_eq!((m[2].status, m[2].failure_code.as_deref()), (Status::Failed, Some("message_payload_invalid")));
        assert_eq!((m[3].status, m[3].wamid.as_deref()), (Status::Sending, None));
        for (i, id) in ids.iter().enumerate() {
            let state = env.db.dispatch_info(*id).await.unwrap().dispatch_state;
            assert_eq!(state.is_some(), i == 3, "message {i}: {state:?}");
        }
        // Recorded again (a retry after a lost answer): answered as alone, nothing changes.
        let (item1, sent1) = &outcomes[1];
        let alone = status::record_send(&env.db, item1, sent1).await.unwrap();
        assert_eq!(status::record_sends(&env.db, &outcomes[1..2]).await.unwrap(), [alone]);
        let again = env.message(ids[1]).await;
        assert_eq!(Message { updated_at: m[1].updated_at, ..again }, m[1]);
    },

    an_abandoned_claim_is_never_resent_and_fails_at_its_deadline => async |env| {
        let id = env.accept_text("16505551234", "orphan").await;
        // A worker claims it and dies (kill -9) before recording anything.
        let claimed = env.db.status_writes().claim_dispatch(&DispatchClaim {
            phone_number_id: None, api_only: false, limit: 10, owner: "crashed-worker", now: now_ms(),
            lease_ms: 200, grace_ms: 400,
        }).await.unwrap();
        assert_eq!(claimed.len(), 1);
        let mut d = env.dispatcher(config());
        assert_eq!(d.drain_once().await.unwrap(), DispatchReport::default());
        let (r, m) = drain_until(&env, &mut d, id, "failed").await;
        assert_eq!((r.expired, r.sent), (1, 0));
        assert!(m.failed_at.unwrap() >= claimed[0].deadline);
        assert_eq!(m.failure_code.as_deref(), Some("network_outcome_unknown"));
        assert!(env.requests_for(id).is_empty(), "never sent");
    },

    unusable_numbers_and_requests_fail_with_a_tern_code => async |env| {
        env.add_number("200000000000001", "disconnected", Some("t"), 80).await;
        env.add_number("200000000000002", "connected", None, 80).await;
        let text = |to: &str| json!({"to": to, "type": "text", "text": {"body": "x"}});
        let disconnected = env.accept_on("200000000000001", "16505551234", text("16505551234")).await;
        let unreadable = env.accept_on("200000000000002", "16505551234", text("16505551234")).await;
        let invalid = env.accept_on(PNID, "16505551234", json!({"to": "16505551234", "type": "text"})).await;
        let mut d = env.dispatcher(config());
        let r = d.drain_once().await.unwrap();
        assert_eq!((r.failed, r.sent), (3, 0));
        for (id, code) in [(disconnected, "phone_number_not_connected"),
                           (unreadable, "phone_number_token_unreadable"),
                           (invalid, "message_payload_invalid")] {
            let m = env.message(id).await;
            assert_eq!((m.status.as_str(), m.failure_code.as_deref()), ("failed", Some(code)));
            let f = serde_json::to_value(m.failure.unwrap()).unwrap();
            assert_eq!((f["code"].as_str(), &f["provider_code"]), (Some(code), &Value::Null));
            assert!(!f["message"].as_str().unwrap().is_empty());
        }
        assert!(env.sim.requests().is_empty());
    },

    sends_are_paced_at_the_numbers_throughput => async |env| {
        env.add_number("300000000000001", "connected", Some(TOKEN), 5).await;
        env.sim.register_number(NumberSpec {
            id: "300000000000001".into(), display_phone_number: "+15550000001".into(),
            waba_id: WABA.into(), access_token: TOKEN.into(), throughput_mps: Some(1000),
            verified_name: None,
        }).unwrap();
        let mut ids = Vec::new();
        for i in 0..12 {
            let to = format!("1650555{i:04}");
            ids.push(env.accept_on("300000000000001", &to, json!({"to": to, "type": "text", "text": {"body": "p"}})).await);
        }
        let mut d = env.dispatcher(config());
        let start = now_ms();
        let r = d.drain_once().await.unwrap();
        assert_eq!(r.sent, 12);
        let mut times: Vec<i64> = env.sim.requests().iter().map(|r| r.received_at_ms).collect();
        times.sort_unstable();
        assert_eq!(times.len(), 12);
        // 5 per second with a burst of 5 (the bucket starts full when the dispatcher first
        // sees the number): the 12th leaves no sooner than 7/5 s after the start.
        assert!(times[11] - start >= 1_350, "sent too fast: {start} {times:?}");
    },

    sends_go_on_while_wakeups_never_stop => async |env| {
        // Under an API burst every acceptance wakes the dispatcher. Finished sends must still
        // free their slots: four slots, no polling, and a wakeup always pending.
        let mut ids = Vec::new();
        for i in 0..40 {
            ids.push(env.accept_text(&format!("1650555{i:04}"), &format!("w{i}")).await);
        }
        let wakeup = env.db.wakeups();
        let cancel = CancellationToken::new();
        let slots = DispatchConfig {
            max_in_flight: 4,
            poll_interval: Duration::from_secs(600),
            ..config()
        };
        let worker = tokio::spawn(tern_engine::dispatch::run(
            env.core(env.client(Duration::from_secs(2))), slots, cancel.clone()));
        let burst = {
            let (wakeup, cancel) = (wakeup.clone(), cancel.clone());
            tokio::spawn(async move {
                while !cancel.is_cancelled() {
                    wakeup.dispatch.notify_one();
                    tokio::task::yield_now().await;
                }
            })
        };
        env.wait_for_empty_queue("every message sent during the wakeups").await;
        cancel.cancel();
        worker.await.unwrap();
        burst.await.unwrap();
        for id in ids {
            assert_eq!(env.requests_for(id).len(), 1, "{id} sent once");
            assert_eq!(env.message(id).await.status, Status::Sent);
        }
    },

    two_dispatchers_share_the_queue_and_send_each_message_once => async |env| {
        let mut ids = Vec::new();
        for i in 0..120 {
            ids.push(env.accept_text(&format!("1650555{i:04}"), &format!("n{i}")).await);
        }
        let cancel = CancellationToken::new();
        let small = DispatchConfig { batch_size: 5, max_in_flight: 4, ..config() };
        let workers: Vec<_> = (0..2).map(|_| {
            tokio::spawn(tern_engine::dispatch::run(
                env.core(env.client(Duration::from_secs(2))), small.clone(), cancel.clone()))
        }).collect();
        env.wait_for_empty_queue("every message sent").await;
        cancel.cancel();
        for w in workers {
            w.await.unwrap();
        }
        let mut per_message: HashMap<String, usize> = HashMap::new();
        for r in env.sim.requests() {
            let id = r.body["biz_opaque_callback_data"].as_str().unwrap().to_string();
            *per_message.entry(id).or_default() += 1;
        }
        let mut owners: HashMap<String, usize> = HashMap::new();
        for id in &ids {
            assert_eq!(per_message.get(&id.to_string()), Some(&1), "{id} sent once");
            assert_eq!(env.accepted_for(*id).len(), 1);
            assert_eq!(env.message(*id).await.status, Status::Sent);
            *owners.entry(env.db.dispatch_info(*id).await.unwrap().lease_owner.unwrap()).or_default() += 1;
        }
        assert_eq!(per_message.len(), ids.len());
        eprintln!("{:?}: messages per dispatcher {:?}", env.backend, owners.values().collect::<Vec<_>>());
    },
}
