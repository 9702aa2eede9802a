use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tern_core::Core;
use tern_store::Db;

/// Shared, cheaply cloned application state.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    /// The use cases: every write goes through them.
    pub core: Core,
    /// For plain reads (GET, lists): the same database as the core's.
    pub db: Db,
    /// Base of links Tern hands out (`docs_url`, media downloads), without trailing slash.
    pub public_url: String,
    pub metrics: Option<PrometheusHandle>,
    /// Settings of the network's webhook (`/webhooks/whatsapp`); `None` refuses deliveries.
    pub network: NetworkWebhook,
    draining: AtomicBool,
    /// Set with `draining`: long-lived answers (event streams) end so the server can stop.
    closing: tokio::sync::watch::Sender<bool>,
}

/// Secrets shared with the messaging network.
#[derive(Clone, Default)]
pub struct NetworkWebhook {
    /// `TERN_APP_SECRET`: key of the `X-Hub-Signature-256` HMAC.
    pub app_secret: Option<Vec<u8>>,
    /// `TERN_VERIFY_TOKEN`: answer to the subscription handshake.
    pub verify_token: Option<String>,
    /// The built-in test network's app secret (`/webhooks/whatsapp/test`); `None`: no test
    /// network in this process.
    pub test_secret: Option<Vec<u8>>,
}

pub struct StateConfig {
    pub core: Core,
    pub public_url: String,
    pub metrics: Option<PrometheusHandle>,
    pub network: NetworkWebhook,
}

impl AppState {
    pub fn new(c: StateConfig) -> Self {
        AppState(Arc::new(Inner {
            db: c.core.db.clone(),
            core: c.core,
            public_url: c.public_url.trim_end_matches('/').to_string(),
            metrics: c.metrics,
            network: c.network,
            draining: AtomicBool::new(false),
            closing: tokio::sync::watch::Sender::new(false),
        }))
    }

    /// Marks the instance as shutting down: `/readyz` fails so load balancers stop
    /// sending traffic while in-flight requests finish.
    pub fn start_draining(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
        self.0.closing.send_replace(true);
    }

    /// Finishes when the instance starts shutting down (at once if it has): long-lived
    /// answers end then, since a graceful shutdown waits for every answer to finish.
    pub fn closing(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.0.closing.subscribe();
        async move {
            // An error means the state is gone: stop too.
            let _ = rx.wait_for(|closing| *closing).await;
        }
    }

    pub fn is_draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    pub fn docs_url(&self, code: &str) -> String {
        format!("{}/docs/errors/{code}", self.0.public_url)
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}
