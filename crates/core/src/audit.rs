//! The audit log: who did what to an organisation, when and from which address — whether
//! in the app, through the public API or by `tern admin` (APP.md §2). A change that is one
//! transaction writes its entry in that transaction ([`record_in`]), so a change without
//! its entry cannot exist; other facts (a sign-in) are recorded on their own ([`record`]).
//!
//! Actions (the only names written; the app and the docs list them):
//!
//! | action | target | written by |
//! |---|---|---|
//! | `sign_in.succeeded`, `sign_in.failed`, `sign_in.locked` | person | `people` |
//! | `member.invited`, `member.role_changed`, `member.removed`, `member.reset` | member | `people` |
//! | `two_factor.enabled`, `two_factor.disabled` | person | `people` |
//! | `org.two_factor_required` | organisation | `people` |
//! | `password.changed` | person | `people` |
//! | `key.created`, `key.rotated`, `key.revoked` | api_key | [`crate::keys`] |
//! | `subscription.created`, `subscription.updated`, `subscription.deleted`, `subscription.secret_rotated`, `subscription.replayed` | webhook_subscription | [`crate::webhooks`] |
//!
//! `detail` never holds a secret: no key value, no webhook secret, no password, no code.

use serde_json::Value;
use tern_domain::new_id;
use tern_domain::time::now_ms;
use tern_store::{AuditRow, Db, Tx};
use uuid::Uuid;

use crate::Result;

pub const SIGN_IN_SUCCEEDED: &str = "sign_in.succeeded";
pub const SIGN_IN_FAILED: &str = "sign_in.failed";
pub const SIGN_IN_LOCKED: &str = "sign_in.locked";
pub const MEMBER_INVITED: &str = "member.invited";
pub const MEMBER_ROLE_CHANGED: &str = "member.role_changed";
pub const MEMBER_REMOVED: &str = "member.removed";
pub const MEMBER_RESET: &str = "member.reset";
pub const TWO_FACTOR_ENABLED: &str = "two_factor.enabled";
pub const TWO_FACTOR_DISABLED: &str = "two_factor.disabled";
pub const ORG_TWO_FACTOR_REQUIRED: &str = "org.two_factor_required";
pub const PASSWORD_CHANGED: &str = "password.changed";
pub const KEY_CREATED: &str = "key.created";
pub const KEY_ROTATED: &str = "key.rotated";
pub const KEY_REVOKED: &str = "key.revoked";
pub const SUBSCRIPTION_CREATED: &str = "subscription.created";
pub const SUBSCRIPTION_UPDATED: &str = "subscription.updated";
pub const SUBSCRIPTION_DELETED: &str = "subscription.deleted";
pub const SUBSCRIPTION_SECRET_ROTATED: &str = "subscription.secret_rotated";
pub const SUBSCRIPTION_REPLAYED: &str = "subscription.replayed";
/// One delivery sent again from a message's timeline.
pub const SUBSCRIPTION_DELIVERY_REPLAYED: &str = "subscription.delivery_replayed";

/// Every action name, in the table's order.
pub const ACTIONS: &[&str] = &[
    SIGN_IN_SUCCEEDED,
    SIGN_IN_FAILED,
    SIGN_IN_LOCKED,
    MEMBER_INVITED,
    MEMBER_ROLE_CHANGED,
    MEMBER_REMOVED,
    MEMBER_RESET,
    TWO_FACTOR_ENABLED,
    TWO_FACTOR_DISABLED,
    ORG_TWO_FACTOR_REQUIRED,
    PASSWORD_CHANGED,
    KEY_CREATED,
    KEY_ROTATED,
    KEY_REVOKED,
    SUBSCRIPTION_CREATED,
    SUBSCRIPTION_UPDATED,
    SUBSCRIPTION_DELETED,
    SUBSCRIPTION_SECRET_ROTATED,
    SUBSCRIPTION_REPLAYED,
    SUBSCRIPTION_DELIVERY_REPLAYED,
];

/// Target kinds.
pub const TARGET_KEY: &str = "api_key";
pub const TARGET_SUBSCRIPTION: &str = "webhook_subscription";
pub const TARGET_MEMBER: &str = "member";
pub const TARGET_ORG: &str = "organisation";

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// A person signed in to the app (`id`: the person).
    Person { id: Uuid, email: String },
    /// An API key (the public API). `prefix` is the key's display prefix, never its value.
    Key {
        id: Uuid,
        name: String,
        prefix: String,
    },
    /// The operator (`tern admin`).
    Operator,
}

impl Actor {
    /// `person`, `key` or `operator`.
    pub fn kind(&self) -> &'static str {
        match self {
            Actor::Person { .. } => "person",
            Actor::Key { .. } => "key",
            Actor::Operator => "operator",
        }
    }

    fn id(&self) -> Option<String> {
        match self {
            Actor::Person { id, .. } | Actor::Key { id, .. } => Some(id.to_string()),
            Actor::Operator => None,
        }
    }

    /// What the log shows: the email, the key's name and prefix, or `operator`.
    pub fn label(&self) -> String {
        match self {
            Actor::Person { email, .. } => email.clone(),
            Actor::Key { name, prefix, .. } => format!("{name} ({prefix})"),
            Actor::Operator => "operator".to_string(),
        }
    }
}

/// Who acts and from where: what every audited use case is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    pub actor: Actor,
    /// The client's address, when the adapter knows it.
    pub address: Option<String>,
}

impl Context {
    /// The operator at the server's shell.
    pub fn operator() -> Context {
        Context {
            actor: Actor::Operator,
            address: None,
        }
    }
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    /// `None` for an installation-wide fact (a sign-in failure for an unknown email).
    pub org_id: Option<Uuid>,
    /// One of [`ACTIONS`].
    pub action: &'a str,
    /// The kind and id of what was changed.
    pub target: Option<(&'a str, String)>,
    /// Details; never a secret.
    pub detail: Option<Value>,
}

impl<'a> Entry<'a> {
    pub fn new(org_id: Option<Uuid>, action: &'a str) -> Self {
        Entry {
            org_id,
            action,
            target: None,
            detail: None,
        }
    }

    pub fn target(mut self, kind: &'a str, id: impl ToString) -> Self {
        self.target = Some((kind, id.to_string()));
        self
    }

    pub fn detail(mut self, detail: Value) -> Self {
        self.detail = Some(detail);
        self
    }
}

fn row(ctx: &Context, e: Entry<'_>) -> AuditRow {
    let (target_kind, target_id) = match e.target {
        Some((k, id)) => (Some(k.to_string()), Some(id)),
        None => (None, None),
    };
    AuditRow {
        id: new_id(),
        org_id: e.org_id,
        at: now_ms(),
        actor_kind: ctx.actor.kind().to_string(),
        actor_id: ctx.actor.id(),
        actor_label: ctx.actor.label(),
        action: e.action.to_string(),
        target_kind,
        target_id,
        detail: e.detail.map(|d| d.to_string()),
        address: ctx.address.clone(),
    }
}

/// Records `e` in a statement of its own.
pub async fn record(db: &Db, ctx: &Context, e: Entry<'_>) -> Result<()> {
    db.insert_audit(&row(ctx, e)).await?;
    Ok(())
}

/// Records `e` in the transaction of the change it reports (both commit or neither).
pub async fn record_in(tx: &mut Tx, ctx: &Context, e: Entry<'_>) -> Result<()> {
    tx.insert_audit(&row(ctx, e)).await?;
    Ok(())
}

/// One entry as read back, `detail` parsed (an unreadable one is `None`).
pub type AuditEntry = AuditRow<Value>;

/// Which page of the log to read.
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    /// 1..=200 (clamped; 0 means 50).
    pub limit: u32,
    /// The `next` of the previous page.
    pub before: Option<(i64, Uuid)>,
    /// Only actions starting with this (e.g. `key.`).
    pub action_prefix: Option<String>,
}

/// A page of entries, newest first; `next` is where the following page starts.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<(i64, Uuid)>,
}

/// The organisation's log, newest first.
pub async fn list(db: &Db, org_id: Uuid, page: &PageRequest) -> Result<Page<AuditEntry>> {
    let limit = match page.limit {
        0 => 50,
        n => n.min(200),
    };
    // One more than asked tells whether a next page exists.
    let mut rows = db
        .list_audit(
            org_id,
            page.action_prefix.as_deref(),
            page.before,
            i64::from(limit) + 1,
        )
        .await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = if more {
        rows.last().map(|r| (r.at, r.id))
    } else {
        None
    };
    Ok(Page {
        items: rows
            .into_iter()
            .map(|r| r.map_detail(|d| serde_json::from_str(&d).ok()))
            .collect(),
        next,
    })
}
