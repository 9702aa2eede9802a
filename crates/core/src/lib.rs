//! Tern's use cases: what Tern does, callable from HTTP handlers, background workers and the
//! operator CLI alike. Every write goes through here (CORE.md rule 1); plain reads may call
//! the store directly. No HTTP types: a refusal is a [`Problem`], rendered by the adapter.
//!
//! | module | use cases |
//! |---|---|
//! | [`principal`] | the caller: key → organisation, effective plan, permissions |
//! | [`limits`] | plan count limits, checked atomically with the create |
//! | [`numbers`] | a sending number: can it send, its access token (one place) |
//! | [`messages::send`] | accept a message (POST /messages; its checks serve campaigns too) |
//! | [`messages::dispatch`] | one attempt of a queued message: prepare, send, decide (the dispatcher's lifecycle table) |
//! | [`messages::status`] | the only writer of a message's status |
//! | [`inbox`] | apply one stored network notification |
//! | [`templates`] | create, submit, sync, network status updates |
//! | [`contacts`] | contact writes |
//! | [`agents`] | mark a customer's message read (with typing), block and unblock a customer |
//! | [`media`] | uploads, guarded imports, signed links, network uploads, inbound files, expiry |
//! | [`events`] | events written in the transaction of the change they report |
//! | [`webhooks`] | subscriptions, signed deliveries, test sends, replays |
//! | [`views`] | the JSON of a Message, Contact and Template (API answers, event bodies) |
//! | [`load`] | how busy the API is (background work gives way to it) |
//! | [`admission`] | every public API request's checks: permission, plan feature, burst, quotas, `api_requests` |
//! | [`rate`] | request quotas (in-process or Redis) and the burst limiter |
//! | [`usage`] | the `api_requests` meter (group-committed, exact across processes) |
//! | [`campaigns`] | create, resolve, schedule, launch, pause, resume; the worker's fan-out step |
//! | [`people`] | the app's accounts: invitations, links, sign-in, sessions, two-factor, members |
//! | [`browse`] | the app's reads of conversations, contacts and templates (as the API lists them) |
//! | [`overview`] | the organisation at a glance (the app's overview page) |
//! | [`account`] | plan, limits, allowances, wallet and quotas as the usage page shows them |
//! | [`admin`] | operator writes: organisations, members, numbers, contact fields |
//! | [`keys`] | API keys: create, rotate, revoke (audited), who may manage one, the keys page's reads |
//! | [`audit`] | the audit log: who did what, when, from where |
//! | [`request_log`] | every public API request, recorded off the request path in batches; the app's reads |
//! | [`test_space`] | test mode: an organisation's test space, its number and the built-in network that answers it |
//! | `testkit` | (feature `testkit`, tests only) the seed of a test: organisation, members, numbers, keys, contacts, templates |

use std::sync::Arc;

use tern_cloudapi::CloudApiClient;
use tern_domain::Problem;
use tern_domain::crypto::MasterKey;
use tern_store::{AcceptQueue, Db, InboxQueue, Lookups};

pub mod account;
pub mod admin;
pub mod admission;
pub mod agents;
pub mod audit;
pub mod browse;
pub mod campaigns;
pub mod contacts;
pub mod events;
pub mod explorer;
mod guarded;
pub mod inbox;
pub mod keys;
pub mod limits;
pub mod load;
pub mod media;
pub mod messages;
pub mod numbers;
pub mod overview;
pub mod people;
pub mod principal;
pub mod rate;
pub mod request_log;
pub mod templates;
pub mod test_space;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod timeline;
pub mod usage;
pub mod views;
pub mod webhooks;

pub use principal::Principal;

/// A use case's result: a refusal is a [`Problem`] (store failures become one too).
pub type Result<T> = std::result::Result<T, Problem>;

/// What the use cases run against. Cheap to clone.
///
/// `db` is the connection pool the use cases' own statements run on. The dispatcher and
/// the inbox worker get connections of their own (so API bursts cannot starve them): they
/// run on [`Core::with_db`], the same core over their pool. Everything else is shared, among
/// it the acceptance writers and lookup readers, which keep the pool they were started with,
/// and the store's wake-ups ([`tern_store::Wakeups`]), which a pool made with
/// [`Db::with_own_pool`] shares.
#[derive(Clone)]
pub struct Core {
    pub db: Db,
    inner: Arc<Inner>,
}

pub struct Inner {
    /// Encrypts stored access tokens (see [`numbers::access_token`]).
    pub key: MasterKey,
    /// The messaging network.
    pub cloud: CloudApiClient,
    /// Group commit of message acceptances.
    pub acceptor: AcceptQueue,
    /// Group commit of the network's webhooks into the inbox.
    pub intake: InboxQueue,
    /// Batched key lookups and send reads (one statement for concurrent requests).
    pub lookups: Lookups,
    /// The media store, the address guard and the importer.
    pub media: Arc<media::MediaService>,
    /// Event-webhook deliveries (the guarded client, kept alive per receiver).
    pub webhooks: webhooks::send::Sender,
    /// The API's load, which background work gives way to.
    pub api_load: Arc<load::ApiLoad>,
    /// Request quotas and the burst limiter.
    pub limiter: rate::Limiter,
    /// The `api_requests` meter.
    pub requests: usage::RequestMeter,
    /// The app's durations (sessions, links, confirmation, lock-out).
    pub people: people::PeopleSettings,
    /// The per-address sign-in failure limit.
    pub people_throttle: people::AddressThrottle,
    /// The request log's recorder (`TERN_REQUEST_LOG_DAYS`).
    pub request_log: request_log::RequestLog,
    /// The network of test spaces (the built-in simulator), when this process runs one.
    pub test_network: Option<Arc<dyn test_space::TestNetwork>>,
}

impl Core {
    /// Must be called inside a Tokio runtime (it starts the acceptance writers and the
    /// lookup readers).
    /// Media are kept in memory: for tools and tests that never serve media (see
    /// [`Core::with_media`]).
    pub fn new(db: Db, key: MasterKey, cloud: CloudApiClient) -> Core {
        // An in-memory store and a client without extra roots always build.
        #[allow(clippy::expect_used)]
        let media = media::MediaService::new(media::MediaConfig::in_memory())
            .expect("in-memory media service");
        Self::with_media(db, key, cloud, Arc::new(media))
    }

    /// Like [`Core::new`], with the configured media service.
    pub fn with_media(
        db: Db,
        key: MasterKey,
        cloud: CloudApiClient,
        media: Arc<media::MediaService>,
    ) -> Core {
        // The importer was built from the same guard and roots, so this client builds too.
        #[allow(clippy::expect_used)]
        let webhooks = webhooks::send::Sender::new(
            media.shared_guard(),
            media.extra_roots_pem(),
            webhooks::send::DELIVERY_TIMEOUT,
        )
        .expect("event-webhook client");
        let inner = Arc::new(Inner {
            webhooks,
            api_load: Arc::default(),
            limiter: rate::Limiter::default(),
            requests: usage::RequestMeter::start(db.clone()),
            media,
            acceptor: AcceptQueue::start(db.clone()),
            intake: InboxQueue::start(db.clone()),
            lookups: Lookups::start(db.clone()),
            key,
            cloud,
            people: people::PeopleSettings::default(),
            people_throttle: people::AddressThrottle::default(),
            request_log: request_log::RequestLog::start(db.clone(), Default::default()),
            test_network: None,
        });
        Core { db, inner }
    }

    /// The same core whose own statements run on `db` (a worker's pool: see [`Core`]).
    pub fn with_db(&self, db: Db) -> Core {
        Core {
            db,
            inner: Arc::clone(&self.inner),
        }
    }
}

impl Core {
    /// The same core counting quotas with `limiter` (Redis-backed ones). Call right after
    /// construction, before the core is shared.
    pub fn with_limiter(mut self, limiter: rate::Limiter) -> Core {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.limiter = limiter,
            None => tracing::error!("with_limiter on a shared core: limiter not replaced"),
        }
        self
    }
}

impl Core {
    /// The same core with these app durations. Call right after construction, before the
    /// core is shared.
    pub fn with_people(mut self, settings: people::PeopleSettings) -> Core {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.people = settings,
            None => tracing::error!("with_people on a shared core: settings not replaced"),
        }
        self
    }
}

impl Core {
    /// The same core with these request log settings (`0` days: nothing recorded). Call
    /// right after construction, before the core is shared.
    pub fn with_request_log(mut self, settings: request_log::RequestLogSettings) -> Core {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => {
                inner.request_log = request_log::RequestLog::start(self.db.clone(), settings)
            }
            None => tracing::error!("with_request_log on a shared core: settings not replaced"),
        }
        self
    }
}

impl Core {
    /// The same core answering test spaces' numbers with `network`. Call right after
    /// construction, before the core is shared.
    pub fn with_test_network(mut self, network: Arc<dyn test_space::TestNetwork>) -> Core {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.test_network = Some(network),
            None => tracing::error!("with_test_network on a shared core: not set"),
        }
        self
    }

    /// The network that answers numbers of `mode`: the configured one for live numbers, the
    /// built-in simulator for test numbers (never the real network, whatever
    /// `TERN_GRAPH_URL` says). `None`: a test number in a process without a test network.
    pub fn network(&self, mode: tern_domain::auth::Mode) -> Option<&CloudApiClient> {
        match mode {
            tern_domain::auth::Mode::Live => Some(&self.inner.cloud),
            tern_domain::auth::Mode::Test => self.inner.test_network.as_deref().map(|n| n.client()),
        }
    }
}

impl Core {
    /// The network that answers `number` ([`Core::network`]); a test number is made known
    /// to this process's test network first.
    pub fn network_for(&self, number: &tern_store::PhoneNumber) -> Option<&CloudApiClient> {
        if number.mode == tern_domain::auth::Mode::Test {
            test_space::learn(self, number);
        }
        self.network(number.mode)
    }
}

impl std::ops::Deref for Core {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}
