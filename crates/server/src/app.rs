//! Building and running the server.

use crate::config::Config;
use crate::test_network::SimNetwork;
use anyhow::{Context, Result};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tern_api::{AppState, NetworkWebhook, StateConfig};
use tern_core::Core;
use tern_domain::crypto::MasterKey;
use tern_engine::dispatch::{DispatchConfig, DispatchReport, Dispatcher};
use tern_engine::webhooks::WebhookWorkerConfig;
use tern_store::Db;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Connects to the database and applies pending migrations.
pub async fn open_db(config: &Config) -> Result<Db> {
    let db = Db::connect(&config.database_url).await.with_context(|| {
        format!(
            "cannot open database {}",
            crate::config::redact_url(&config.database_url)
        )
    })?;
    db.migrate()
        .await
        .context("cannot apply database migrations")?;
    Ok(db)
}

/// The master secret: from `TERN_SECRET_KEY`, or generated once and kept in the database
/// so that every instance sharing the database agrees on it.
pub async fn master_key(db: &Db, config: &Config) -> Result<MasterKey> {
    if let Some(s) = &config.secret_key {
        return MasterKey::from_config(s).context("TERN_SECRET_KEY is too short");
    }
    let stored = db
        .secret_get_or_insert("master_key", &MasterKey::generate())
        .await?;
    let bytes: [u8; 32] = stored
        .as_slice()
        .try_into()
        .context("the stored master key is damaged (not 32 bytes)")?;
    Ok(MasterKey::from_bytes(bytes))
}

/// The Cloud API client for the configured network.
pub fn cloud_client(config: &Config) -> Result<tern_cloudapi::CloudApiClient> {
    tern_cloudapi::CloudApiClient::new(tern_cloudapi::ClientConfig {
        base_url: config.graph_url.clone(),
        version: config.graph_version.clone(),
        ..Default::default()
    })
    .context("cannot build the Cloud API client")
}

/// The media service from the configuration (the store opened, the CA file read).
pub fn media_service(config: &Config) -> Result<tern_core::media::MediaService> {
    let extra_roots_pem = match &config.extra_ca_file {
        Some(p) => Some(std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?),
        None => None,
    };
    tern_core::media::MediaService::new(tern_core::media::MediaConfig {
        location: config.media_store.clone(),
        allow_networks: config.allow_networks.clone(),
        extra_roots_pem,
        import_timeout: config.media_import_timeout,
        public_url: config.public_url.clone(),
    })
    .map_err(|e| anyhow::anyhow!("TERN_MEDIA_STORE: {e}"))
}

/// The application state; fails on a media store that cannot be opened. No test network:
/// test numbers' messages wait for a process that runs one ([`try_state_with`]).
pub fn try_state(db: Db, key: MasterKey, config: &Config) -> Result<AppState> {
    try_state_with(db, key, config, None)
}

/// [`try_state`] with the test spaces' network (`tern serve` and `tern demo` run one).
pub fn try_state_with(
    db: Db,
    key: MasterKey,
    config: &Config,
    test_network: Option<Arc<SimNetwork>>,
) -> Result<AppState> {
    let cloud = cloud_client(config)?;
    let media = Arc::new(media_service(config)?);
    let mut core = Core::with_media(db, key, cloud, media)
        .with_people(config.people.clone())
        .with_request_log(tern_core::request_log::RequestLogSettings {
            days: config.request_log_days,
            ..Default::default()
        });
    if !config.rate_limits {
        core = core.with_limiter(tern_core::rate::Limiter::off());
    } else if let Some(url) = &config.redis_url {
        core = core.with_limiter(
            tern_core::rate::Limiter::with_redis(url).map_err(|e| anyhow::anyhow!(e))?,
        );
    }
    let test_secret = test_network
        .as_ref()
        .map(|n| n.secret().as_bytes().to_vec());
    if let Some(network) = test_network {
        core = core.with_test_network(network);
    }
    let metrics = crate::telemetry::metrics_handle();
    tern_core::request_log::describe_metrics();
    Ok(AppState::new(StateConfig {
        core,
        public_url: config.public_url.clone(),
        metrics,
        network: NetworkWebhook {
            app_secret: config.app_secret.as_ref().map(|s| s.as_bytes().to_vec()),
            verify_token: config.verify_token.clone(),
            test_secret,
        },
    }))
}

/// [`try_state`] for tests and tools whose configuration is known to be good.
pub fn state(db: Db, key: MasterKey, config: &Config) -> AppState {
    #[allow(clippy::expect_used)]
    try_state(db, key, config).expect("valid configuration")
}

/// Everything `tern serve` answers: the public API (with its own frame and fallback) and
/// the app under `/app` (with its own layers: its errors are pages, not JSON).
pub fn router(state: &AppState) -> axum::Router {
    let app = tern_app::AppState::new(
        state.core.clone(),
        tern_app::AppConfig {
            public_url: state.public_url.clone(),
            magic_recipients: magic_lines(),
        },
    );
    tern_api::router(state.clone()).merge(tern_app::router(app))
}

/// The test network's magic recipients, as the app's test mode page lists them.
fn magic_lines() -> Vec<tern_app::pages::test_mode::MagicLine> {
    let mut lines: Vec<_> = tern_simulator::MAGIC_RECIPIENTS
        .iter()
        .map(|m| tern_app::pages::test_mode::MagicLine {
            recipient: m.number.to_string(),
            outcome: m.outcome.to_string(),
        })
        .collect();
    if !lines
        .iter()
        .any(|l| l.recipient.contains(tern_simulator::MAGIC_USER_ID))
    {
        lines.push(tern_app::pages::test_mode::MagicLine {
            recipient: format!("{{\"user_id\": \"{}\"}}", tern_simulator::MAGIC_USER_ID),
            outcome: format!(
                "A customer with the username @{} and no phone number: receives and reads.",
                tern_simulator::MAGIC_USERNAME
            ),
        });
    }
    lines
}

/// Serves until `shutdown` completes, then drains in-flight requests; at most
/// [`crate::connections::DEFAULT_MAX`] connections at once.
pub async fn serve_on(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    serve_on_with(listener, state, crate::connections::DEFAULT_MAX, shutdown).await
}

/// [`serve_on`] with at most `max_connections` connections served at once.
pub async fn serve_on_with(
    listener: TcpListener,
    state: AppState,
    max_connections: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let router = router(&state);
    let draining = state.clone();
    crate::connections::serve(listener, router, max_connections, async move {
        shutdown.await;
        draining.start_draining();
        tracing::info!("shutting down: finishing in-flight requests");
    })
    .await
    .context("server error")?;
    Ok(())
}

/// Connections of the dispatcher and the inbox worker, apart from the API's pool.
const WORK_CONNECTIONS: u32 = 4;

/// Background workers of one instance; safe to run in every instance (leases). Each starts
/// as `run(core, config, cancel)`. The dispatcher and the inbox worker run on a core whose
/// `db` is a pool of their own (`Core::with_db`), so a burst of API requests cannot starve
/// them; that pool shares the API's wake-ups (`tern_store::Wakeups`), so the commits of the
/// API's acceptances and stored webhooks wake them.
pub struct Workers {
    cancel: CancellationToken,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl Workers {
    pub fn start(db: &Db, state: &AppState) -> Workers {
        Self::start_with(db, state, DispatchConfig::default())
    }

    /// Like [`Workers::start`] with the dispatcher's settings.
    pub fn start_with(db: &Db, state: &AppState, dispatch: DispatchConfig) -> Workers {
        Self::start_full(db, state, dispatch, Default::default(), Default::default())
    }

    /// Like [`Workers::start_with`] with the media worker's settings too.
    pub fn start_full(
        db: &Db,
        state: &AppState,
        dispatch: DispatchConfig,
        media: tern_engine::media::MediaWorkerConfig,
        webhooks: WebhookWorkerConfig,
    ) -> Workers {
        let cancel = CancellationToken::new();
        let core = &state.core;
        let work = core.with_db(db.with_own_pool(WORK_CONNECTIONS));
        let handles = vec![
            // Accepted messages → the network, paced per number.
            tokio::spawn(tern_engine::dispatch::run(
                work.clone(),
                dispatch,
                cancel.clone(),
            )),
            // The network's webhooks, stored by the API, applied (effects through a pool of
            // its own with deferred commits).
            tokio::spawn(tern_engine::inbox::run(
                work,
                Default::default(),
                cancel.clone(),
            )),
            // Customers' files from the network; media past their 30 days.
            tokio::spawn(tern_engine::media::run(core.clone(), media, cancel.clone())),
            // Event webhooks: signed deliveries, retried on the schedule.
            tokio::spawn(tern_engine::webhooks::run(
                core.clone(),
                webhooks,
                cancel.clone(),
            )),
            // Scheduled launches, expiry, auto-pause and fan-out of campaigns.
            tokio::spawn(tern_engine::campaigns::run(
                core.clone(),
                Default::default(),
                cancel.clone(),
            )),
            // Expired idempotency keys, old processed webhook batches and event keys.
            tokio::spawn(tern_engine::housekeeping::run(
                core.clone(),
                Default::default(),
                cancel.clone(),
            )),
            // Templates created outside Tern, and statuses whose webhook was missed.
            tokio::spawn(tern_engine::templates::run(
                core.clone(),
                Default::default(),
                cancel.clone(),
            )),
        ];
        Workers { cancel, handles }
    }

    /// Stops the workers after their current step.
    pub async fn stop(self) {
        self.cancel.cancel();
        for h in self.handles {
            let _ = h.await;
        }
    }
}

/// The delivery workers' settings from the configuration.
pub fn webhook_config(config: &Config) -> WebhookWorkerConfig {
    WebhookWorkerConfig {
        schedule: config.webhook_retry_schedule.clone(),
        lease: config.webhook_lease,
        send_nice: config.webhook_send_nice,
        busy_rest: config.webhook_busy_rest,
        ..Default::default()
    }
}

/// The dispatcher's settings from the configuration.
pub fn dispatch_config(config: &Config) -> DispatchConfig {
    DispatchConfig {
        unknown_grace: config.dispatch_unknown_grace,
        ..Default::default()
    }
}

/// Rounds [`Passes::settle`] runs at most.
const SETTLE_ROUNDS: usize = 8;

/// The workers' one-pass functions, for an app whose background workers do not run (tests):
/// [`Passes::settle`] does in one call what the loops would do by and by.
#[derive(Clone)]
pub struct Passes {
    core: Core,
    dispatch: DispatchConfig,
    webhooks: WebhookWorkerConfig,
    /// The lease owner of the campaign steps and deliveries (a campaign's lease is kept
    /// from one settle to the next).
    owner: String,
}

/// What [`Passes::settle`] did, summed over its rounds.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Rounds run (the last one moved nothing, unless the bound was reached).
    pub rounds: usize,
    pub inbox: tern_core::inbox::Report,
    /// Campaign messages accepted by fan-out.
    pub campaign_messages: usize,
    pub dispatch: DispatchReport,
    /// Events fanned out plus delivery attempts made.
    pub webhooks: usize,
}

impl Passes {
    pub fn new(core: Core, config: &Config) -> Passes {
        Passes {
            core,
            dispatch: dispatch_config(config),
            webhooks: webhook_config(config),
            owner: format!("settle-{}", tern_domain::new_id()),
        }
    }

    /// Runs the passes in order (inbox → campaigns → dispatch → inbox → webhooks) until a
    /// whole round moves nothing, at most [`SETTLE_ROUNDS`] rounds. Work due later (a retry's
    /// backoff, a campaign's schedule) is left for a later call.
    pub async fn settle(&self) -> Result<Settled> {
        let core = &self.core;
        let mut total = Settled::default();
        while total.rounds < SETTLE_ROUNDS {
            total.rounds += 1;
            let mut moved = false;
            let inbox = tern_engine::inbox::drain(&core.db).await?;
            moved |= inbox != Default::default();
            total.inbox.add(&inbox);
            let accepted =
                tern_engine::campaigns::once(core, &self.owner, tern_domain::time::now_ms()).await;
            moved |= accepted > 0;
            total.campaign_messages += accepted;
            // A dispatcher of its own each time: numbers are read afresh.
            let mut dispatcher = Dispatcher::new(core.clone(), self.dispatch.clone());
            let sent = dispatcher.drain_once().await?;
            moved |= sent != Default::default();
            total.dispatch.add(&sent);
            let inbox = tern_engine::inbox::drain(&core.db).await?;
            moved |= inbox != Default::default();
            total.inbox.add(&inbox);
            let delivered =
                tern_engine::webhooks::drain_once(core, &self.webhooks, &self.owner).await?;
            moved |= delivered > 0;
            total.webhooks += delivered;
            if !moved {
                break;
            }
        }
        Ok(total)
    }
}

/// Opens the API's port, with a kernel accept queue of
/// [`crate::connections::BACKLOG`] (std's default is 128, which a burst of webhook POSTs
/// overflows); a refusal says which setting chooses another (`--listen` or `TERN_LISTEN`),
/// the likely cause when the port is taken.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener> {
    let listen = || {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        // As std's and tokio's `bind`: a restart may reuse the port at once.
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(crate::connections::BACKLOG)
    };
    listen().map_err(|e: std::io::Error| {
        let cause = if e.kind() == std::io::ErrorKind::AddrInUse {
            "the port is already in use (another tern, or another program, holds it)".to_string()
        } else {
            e.to_string()
        };
        anyhow::anyhow!(
            "cannot listen on {addr}: {cause}; choose another address with --listen HOST:PORT \
             or the TERN_LISTEN variable"
        )
    })
}

/// Waits (briefly) for the request meter's last counts (and the request log's last batch)
/// once the server and workers, which hold their handles, are gone; then the database may
/// close.
pub async fn settle_meter(done: impl std::future::Future<Output = ()>) {
    if tokio::time::timeout(std::time::Duration::from_secs(10), done)
        .await
        .is_err()
    {
        tracing::warn!("the request meter or log did not finish within 10 s; closing anyway");
    }
}

/// `tern serve`.
pub async fn serve(config: Config) -> Result<()> {
    let db = open_db(&config).await?;
    let key = master_key(&db, &config).await?;
    // Everything slow (the TLS roots of the Cloud API client) happens before the port opens,
    // so a signal sent as soon as the port answers finds the shutdown handler in place.
    let test_network = SimNetwork::start(&key, &config.graph_version).await?;
    let state = try_state_with(db.clone(), key, &config, Some(test_network.clone()))?;
    let shutdown = shutdown_signal();
    let listener = bind(config.listen).await?;
    let addr: SocketAddr = listener.local_addr()?;
    test_network.call_back(addr);
    tracing::info!(%addr, backend = ?db.backend(), "tern listening");
    let workers = Workers::start_full(
        &db,
        &state,
        dispatch_config(&config),
        Default::default(),
        webhook_config(&config),
    );
    let meter_done = state.core.requests.finished();
    let log_done = state.core.request_log.finished();
    serve_on_with(listener, state, config.max_connections, shutdown).await?;
    workers.stop().await;
    settle_meter(async move {
        tokio::join!(meter_done, log_done);
    })
    .await;
    db.close().await;
    tracing::info!("stopped");
    Ok(())
}

/// Completes on SIGINT or SIGTERM. The handlers are registered when this is called, not
/// when the future is first polled, so a signal that arrives while the server is still
/// starting is not lost (nor handled by the default action, which would kill the process).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let int = signal(SignalKind::interrupt()).ok();
        let term = signal(SignalKind::terminate()).ok();
        async move {
            let wait = |s: Option<tokio::signal::unix::Signal>| async move {
                match s {
                    Some(mut s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(int) => {},
                _ = wait(term) => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}
