use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tern_cloudapi::CloudApiClient;
use tern_domain::crypto::MasterKey;
use tern_domain::crypto::Purpose;
use tern_store::{AcceptQueue, Db, Lookups};
use tokio::sync::Notify;

/// Shared, cheaply cloned application state.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

pub struct Inner {
    pub db: Db,
    pub key: MasterKey,
    /// Base of links Tern hands out (`docs_url`, media downloads), without trailing slash.
    pub public_url: String,
    pub metrics: Option<PrometheusHandle>,
    /// Settings of the network's webhook (`/webhooks/whatsapp`); `None` refuses deliveries.
    pub network: NetworkWebhook,
    /// Wakes the inbox processor when a batch was stored.
    pub inbox_wakeup: Arc<Notify>,
    /// Wakes the dispatcher when a message was accepted.
    pub dispatch_wakeup: Arc<Notify>,
    /// The messaging network (Cloud API) client.
    pub cloud: CloudApiClient,
    /// Group commit of POST /messages acceptances.
    pub acceptor: AcceptQueue,
    /// Batched key lookups and send reads (one statement for concurrent requests).
    pub lookups: Lookups,
    draining: AtomicBool,
}

/// Secrets shared with the messaging network.
#[derive(Clone, Default)]
pub struct NetworkWebhook {
    /// `TERN_APP_SECRET`: key of the `X-Hub-Signature-256` HMAC.
    pub app_secret: Option<Vec<u8>>,
    /// `TERN_VERIFY_TOKEN`: answer to the subscription handshake.
    pub verify_token: Option<String>,
}

pub struct StateConfig {
    pub db: Db,
    pub key: MasterKey,
    pub public_url: String,
    pub metrics: Option<PrometheusHandle>,
    pub network: NetworkWebhook,
    pub inbox_wakeup: Arc<Notify>,
    pub dispatch_wakeup: Arc<Notify>,
    pub cloud: CloudApiClient,
}

impl AppState {
    /// Must be called inside a Tokio runtime (it starts the acceptance writer and the
    /// lookup readers).
    pub fn new(c: StateConfig) -> Self {
        AppState(Arc::new(Inner {
            acceptor: AcceptQueue::start(c.db.clone()),
            lookups: Lookups::start(c.db.clone()),
            db: c.db,
            key: c.key,
            public_url: c.public_url.trim_end_matches('/').to_string(),
            metrics: c.metrics,
            network: c.network,
            inbox_wakeup: c.inbox_wakeup,
            dispatch_wakeup: c.dispatch_wakeup,
            cloud: c.cloud,
            draining: AtomicBool::new(false),
        }))
    }

    /// Marks the instance as shutting down: `/readyz` fails so load balancers stop
    /// sending traffic while in-flight requests finish.
    pub fn start_draining(&self) {
        self.0.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.0.draining.load(Ordering::SeqCst)
    }

    /// The decrypted access token of one of the organisation's numbers.
    pub fn access_token(&self, number: &tern_store::PhoneNumber) -> Option<String> {
        let bytes = self
            .key
            .open(Purpose::TokenEncryption, &number.access_token_enc)?;
        String::from_utf8(bytes).ok()
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
