//! A Cloud-API-compatible WhatsApp network simulator.
//!
//! It serves the Graph endpoints Tern uses (`/{version}/{pnid}/messages`, media, templates,
//! number info) with the network's validation and error shapes, emits signed status /
//! inbound / template webhooks to a callback URL, and offers a `/_sim/…` control API for
//! tests (register numbers and recipients, inject inbound messages, force errors, read back
//! every request). Customers have business-scoped user ids (BSUIDs) and may have a username
//! and no visible phone number, as on the 2026 network. With `SimArgs::magic_recipients` it is
//! the network of a Tern test space: the recipient decides a send's outcome
//! ([`MAGIC_RECIPIENTS`]). See `docs/simulator.md`.
//!
//! Embedding:
//! ```no_run
//! # async fn demo() -> Result<(), tern_simulator::SimError> {
//! let sim = tern_simulator::start(tern_simulator::SimArgs::local("app-secret")).await?;
//! sim.set_callback_url(Some("http://127.0.0.1:8080/webhooks/whatsapp".into()));
//! // point tern_cloudapi::ClientConfig::base_url at sim.base_url()
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

mod agents;
mod cloud;
mod config;
mod control;
mod customers;
mod graph;
mod inbound;
mod magic;
mod media;
mod model;
mod outbound;
mod pricing;
mod state;
mod templates;
mod validate;
mod webhooks;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub use agents::{BLOCK_FAILED, InboundRecord, MAX_BLOCK_USERS};
pub use config::{NumberSpec, ReviewMode, SimArgs};
pub use customers::{
    Customer, CustomerSpec, IdentityChangeRequest, derive_bsuid, is_bsuid, is_parent_bsuid,
};
pub use graph::{ERROR_HREF, GraphErr, webhook_error};
pub use magic::{
    MagicRecipient, RECIPIENTS as MAGIC_RECIPIENTS, REJECT_PREFIX, REPLY_TEXT,
    USERNAME as MAGIC_USERNAME, USERNAME_CUSTOMER_ID as MAGIC_USER_ID,
};
pub use media::sample_media;
pub use model::{
    Behaviour, DeliveryRecord, ForcedAction, MediaOrigin, MediaSummary, MessageRecord, Number,
    NumberPatch, RecipientSpec, RequestRecord, TemplateRec, TemplateSeed,
};
pub use pricing::NON_TEMPLATE_CHARGED_FROM;
pub use state::CtlError;
pub use validate::{ValidSend, placeholders, validate_send};
pub use webhooks::ascii_json;

use state::Sim;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("cannot listen: {0}")]
    Io(#[from] std::io::Error),
    #[error("cannot build HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    #[error("{0}")]
    Control(#[from] CtlError),
}

/// A running simulator. Dropping it does not stop the server; call [`SimHandle::shutdown`].
pub struct SimHandle {
    addr: SocketAddr,
    sim: Arc<Sim>,
    stop: watch::Sender<bool>,
    server: JoinHandle<()>,
}

/// Bind, register the `--number`s, start the webhook dispatcher and serve.
pub async fn start(args: SimArgs) -> Result<SimHandle, SimError> {
    let numbers = args.validate().map_err(SimError::Config)?;
    if args.app_secret.is_empty() {
        return Err(SimError::Config("--app-secret must not be empty".into()));
    }
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    let public_url = args
        .public_url
        .clone()
        .map(|u| u.trim_end_matches('/').to_owned())
        .unwrap_or_else(|| format!("http://{addr}"));
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = watch::channel(false);
    let sim = Sim::new(args, public_url, events_tx, stop_rx.clone())?;
    for n in numbers {
        sim.register_number(n)?;
    }
    if sim.args.magic_recipients {
        sim.seed_magic_customers()?;
    }
    tokio::spawn(webhooks::run_dispatcher(Arc::clone(&sim), events_rx));
    let app = cloud::router(Arc::clone(&sim)).merge(control::router(Arc::clone(&sim)));
    let mut stop = stop_rx;
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %e, "simulator server failed");
        }
    });
    tracing::info!(%addr, "network simulator listening");
    Ok(SimHandle {
        addr,
        sim,
        stop: stop_tx,
        server,
    })
}

/// Run until `shutdown` completes (for `tern simulator`).
pub async fn run(args: SimArgs, shutdown: impl Future<Output = ()>) -> Result<(), SimError> {
    let handle = start(args).await?;
    shutdown.await;
    handle.shutdown().await;
    Ok(())
}

impl SimHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`: the `base_url` for `tern_cloudapi::ClientConfig`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Set or replace (or with `None` clear) the webhook callback URL.
    pub fn set_callback_url(&self, url: Option<String>) {
        self.sim.set_callback(url);
    }

    pub fn callback_url(&self) -> Option<String> {
        self.sim.callback()
    }

    /// Perform the `hub.challenge` handshake against the callback URL.
    pub async fn verify_callback(&self) -> Result<Value, SimError> {
        Ok(webhooks::verify_callback(&self.sim, None).await?)
    }

    pub fn register_number(&self, spec: NumberSpec) -> Result<Number, SimError> {
        Ok(self.sim.register_number(spec)?)
    }

    pub fn patch_number(&self, pnid: &str, patch: NumberPatch) -> Result<Number, SimError> {
        Ok(self.sim.patch_number(pnid, patch)?)
    }

    pub fn register_recipient(&self, spec: RecipientSpec) -> Result<RecipientSpec, SimError> {
        Ok(self.sim.register_recipient(spec)?)
    }

    /// Register (or update) a customer: phone and/or username, BSUIDs, behaviour.
    pub fn register_customer(&self, spec: CustomerSpec) -> Result<Customer, SimError> {
        Ok(self.sim.register_customer(spec)?)
    }

    /// Every customer the simulator knows (registered, written to or from).
    pub fn customers(&self) -> Vec<Customer> {
        self.sim.customers()
    }

    /// Give a customer a new BSUID or phone and send the network's identity-change `system`
    /// messages (see `POST /_sim/identity_change`).
    pub fn change_identity(&self, req: IdentityChangeRequest) -> Result<Value, SimError> {
        Ok(self.sim.change_identity(req)?)
    }

    /// Queue a forced reaction for the next `times` sends on `pnid`.
    pub fn force(&self, pnid: &str, action: ForcedAction, times: u32) -> Result<(), SimError> {
        self.sim.force(pnid, action, times)?;
        Ok(())
    }

    /// Inject an inbound customer message (same body as `POST /_sim/inbound`).
    pub fn inject_inbound(&self, body: Value) -> Result<Value, SimError> {
        Ok(self.sim.inject_inbound(body)?)
    }

    /// A customer writes to `number_id` (Tern's `POST /test/inbound`): `body` is
    /// `{"from": "<digits>"}` or `{"user_id": "<BSUID>"}`, `type`, the type's object (e.g.
    /// `"text": {"body": "hi"}`), optional `profile_name` and `context`. The signed webhook
    /// goes to the callback URL as for any customer message and the window opens. Returns
    /// the message's wamid; a malformed body is a 400 `CtlError` naming the field, an
    /// unknown number a 404.
    pub fn inject_inbound_to(&self, number_id: &str, body: Value) -> Result<String, CtlError> {
        self.sim.inject_customer_message(number_id, body)
    }

    /// Set or close (`None`) a customer service window.
    pub fn set_window(&self, pnid: &str, wa_id: &str, last_inbound_at: Option<i64>) {
        self.sim.set_window(pnid, wa_id, last_inbound_at);
    }

    /// Same for a customer named by BSUID (e.g. one whose phone the network withholds).
    pub fn set_window_for_user_id(&self, pnid: &str, user_id: &str, last_inbound_at: Option<i64>) {
        self.sim
            .set_window_for_user_id(pnid, user_id, last_inbound_at);
    }

    /// Move simulator time forward; returns the new "now" (unix seconds).
    pub fn advance_clock(&self, secs: i64) -> i64 {
        self.sim.advance_clock(secs)
    }

    /// Store a template directly (default APPROVED, no review webhook).
    pub fn seed_template(&self, seed: TemplateSeed) -> TemplateRec {
        self.sim.insert_template(seed)
    }

    /// Change a template's status and send `message_template_status_update`.
    pub fn set_template_status(
        &self,
        id: &str,
        event: &str,
        reason: Option<String>,
    ) -> Result<TemplateRec, SimError> {
        Ok(self.sim.set_template_status(id, event, reason)?)
    }

    /// Change a template's category and send `template_category_update`.
    pub fn set_template_category(&self, id: &str, category: &str) -> Result<TemplateRec, SimError> {
        Ok(self.sim.set_template_category(id, category)?)
    }

    pub fn templates(&self) -> Vec<TemplateRec> {
        self.sim.lock().templates.clone()
    }

    /// Every request received on the Cloud API surface, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.sim.lock().requests.clone()
    }

    /// Every customer's message the network holds, with its read mark and typing indicator.
    pub fn inbound(&self) -> Vec<InboundRecord> {
        self.sim.lock().inbound.clone()
    }

    /// The customers (phone digits, else `user:<BSUID>`) number `pnid` blocked, sorted.
    pub fn blocked(&self, pnid: &str) -> Vec<String> {
        let st = self.sim.lock();
        let mut keys: Vec<String> = st
            .blocked
            .iter()
            .filter(|(p, _)| p == pnid)
            .map(|(_, k)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// Every message accepted by the simulated network.
    pub fn messages(&self) -> Vec<MessageRecord> {
        self.sim.lock().messages.clone()
    }

    /// Every stored media id (uploaded or inbound, expired ones too), oldest first.
    pub fn media(&self) -> Vec<MediaSummary> {
        self.sim.media_summaries()
    }

    /// Make one media id expire now (as if its 30 / 7 days had passed): `GET /{media-id}`
    /// answers unknown object (100 / 33), its URLs 404, and sends using it fail with 131053.
    pub fn expire_media(&self, id: &str) -> Result<MediaSummary, SimError> {
        Ok(self.sim.expire_media(id)?)
    }

    /// Every webhook POST attempt.
    pub fn deliveries(&self) -> Vec<DeliveryRecord> {
        self.sim.lock().deliveries.clone()
    }

    pub fn reset(&self, keep_numbers: bool) {
        self.sim.reset(keep_numbers);
    }

    /// Stop serving and stop background tasks (pending webhooks are dropped).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        let mut server = self.server;
        if tokio::time::timeout(Duration::from_secs(5), &mut server)
            .await
            .is_err()
        {
            server.abort();
        }
    }
}
