//! Tern's persistence layer: one [`Db`] facade over SQLite (embedded default) and
//! PostgreSQL (production), with the same SQL text, migrations per backend and a
//! conformance suite that runs every method on both (see `tests/conformance`).
//!
//! Conventions: instants are `i64` epoch milliseconds; ids are `Uuid` (v7) except phone
//! numbers (the network's id); JSON columns are whole `serde_json::Value`s / typed values.
//! Every write is safe with several `tern serve` processes on one PostgreSQL: single-statement
//! conditional updates, upserts and unique constraints, or transactions with row locks.

mod accept_queue;
mod agents;
mod api_keys;
mod app_sessions;
mod audit;
mod campaign_counts;
mod campaign_recipients;
mod campaigns;
mod checkpoint;
mod contact_fields;
mod contacts;
mod conversations;
mod db;
mod dispatch;
mod dispatch_completion;
mod error;
mod events;
mod explorer;
mod held;
mod identities_learned;
mod identity;
mod inbound_batch;
mod inbox_queue;
mod limits;
mod lookups;
mod media;
mod memberships;
mod messages;
mod network_inbox;
mod nodelay;
mod orgs;
mod outbound;
mod overview;
mod people;
mod phone_numbers;
mod request_log;
mod send_options;
mod settings;
mod sql;
mod status_batch;
mod status_writes;
mod tags;
mod templates;
#[cfg(feature = "testkit")]
pub mod testkit;
mod timeline;
mod usage;

pub use accept_queue::{AcceptQueue, MAX_BATCH as ACCEPT_MAX_BATCH};
pub use agents::ContactNumber;
pub use api_keys::{ApiKey, AuthRecord, KeyRow, KeySummary, LAST_USED_GRANULARITY_MS};
pub use app_sessions::{AppSession, SEEN_GRANULARITY_MS};
pub use audit::AuditRow;
pub use campaign_counts::CountMove;
pub use campaigns::{
    AudienceContact, COUNTER_SHARDS, Campaign, CampaignCounts, NewRecipient, PendingRecipient,
    RecipientRow, counter_shard,
};
pub use contact_fields::ContactField;
pub use contacts::{Contact, ContactKey};
pub use conversations::{Conversation, ConversationContact};
pub use db::{Backend, Db, Tx, Wakeups};
pub use dispatch::{
    DISPATCH_IN_FLIGHT, DISPATCH_QUEUED, DISPATCH_UNKNOWN, DispatchClaim, DispatchCounts,
    DispatchInfo, DispatchItem, DispatchLease, DispatchSweep, DispatchWrite, ExpiredDispatch,
};
pub use dispatch_completion::DispatchCompletion;
pub use error::{Result, StoreError};
pub use events::{
    AttemptRecord, AttemptStatus, Delivery, DeliveryJob, DeliveryOutcome, DeliveryStatus, NewEvent,
    NewSubscription, OpenedStream, Recording, StreamItem, StreamState, Subscription,
    SubscriptionPatch, WebhookAttempt,
};
pub use explorer::{CustomerKey, ExplorerQuery, MAX_CONVERSATIONS, Redelivery, id_at};
pub use identity::{Identity, InboundSeen, Observed};
pub use inbound_batch::InboundChange;
pub use inbox_queue::{InboxQueue, NewInboxItem, QUEUE as INTAKE_QUEUE};
pub use limits::Counted;
pub use lookups::{Lookups, MAX_BATCH as LOOKUP_MAX_BATCH};
pub use media::{InboundMediaJob, InboundMediaState, Media, MediaSource, NewInboundMedia};
pub use memberships::{MemberPerson, Membership};
pub use messages::{Inserted, Message, ReplyTo, StatusChange, Touched};
pub use network_inbox::{InboxItem, SetAside};
pub use orgs::{Member, Org};
pub use outbound::{Accept, Acceptance, Charges, IdempotencyRecord, NewContact};
pub use overview::{LedgerEntry, MessageCount, SubscriptionHealth};
pub use people::{Failures, Person, PersonLink};
pub use phone_numbers::PhoneNumber;
pub use request_log::{RequestLogFilter, RequestLogRow, v7_floor};
pub use send_options::{ContactRef, SendContext, SendLookup, SendOption};
/// JSON columns' wrapper (campaigns' audience and parameters).
pub use sqlx::types::Json;
pub use status_batch::StatusWrite;
pub use status_writes::{StatusWrites, TxStatusWrites};
pub use templates::Template;
pub use timeline::{MAX_ENTRIES as TIMELINE_MAX_ENTRIES, Origin, TimelineRow};
pub use usage::{UsageAdd, UsageGrant, UsageTake};
