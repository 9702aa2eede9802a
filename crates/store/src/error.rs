//! The store's error type.

use std::borrow::Cow;

/// Result alias used by every store method.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Errors returned by the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The addressed row does not exist (or is not visible to the caller's organisation).
    #[error("not found")]
    NotFound,
    /// A uniqueness rule or a state precondition refused the write.
    ///
    /// `constraint` is stable across backends: `<table>_pkey` or `<table>_<cols>_key` for
    /// unique constraints (e.g. `members_org_id_email_key`), or a state name such as
    /// `already_revoked`.
    #[error("conflict on {constraint}")]
    Conflict { constraint: String },
    /// Any other database error.
    #[error("database error: {0}")]
    Backend(sqlx::Error),
    /// Applying migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database URL is not `sqlite:…`, `postgres://…` or `postgresql://…`, or is malformed.
    #[error("invalid database url: {0}")]
    InvalidUrl(String),
}

impl StoreError {
    pub(crate) fn conflict(constraint: impl Into<String>) -> Self {
        Self::Conflict {
            constraint: constraint.into(),
        }
    }

    /// True when the database could not be reached or is temporarily unable to serve
    /// (connection refused/lost, pool exhausted or closed, server shutting down, SQLite busy).
    /// Callers map this to `503 unavailable` and retry later.
    pub fn is_unavailable(&self) -> bool {
        let Self::Backend(err) = self else {
            return false;
        };
        match err {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or(Cow::Borrowed(""));
                // PostgreSQL: class 08 = connection exception; 57P01..57P03 = admin/crash
                // shutdown, cannot connect now; 53300 = too many connections.
                // SQLite: 5 = SQLITE_BUSY, 6 = SQLITE_LOCKED (plus extended codes of these).
                code.starts_with("08")
                    || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300")
                    || code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
            }
            _ => false,
        }
    }

    /// True when the same statement may well succeed if run again: the database is
    /// unavailable ([`StoreError::is_unavailable`]), or PostgreSQL gave up on this
    /// transaction for another's sake (40001 serialization failure, 40P01 deadlock).
    pub fn is_transient(&self) -> bool {
        if self.is_unavailable() {
            return true;
        }
        match self {
            Self::Backend(sqlx::Error::Database(db)) => {
                matches!(db.code().as_deref(), Some("40001" | "40P01"))
            }
            _ => false,
        }
    }
}

/// Tables whose primary key is not the single column `id`, so a SQLite unique-violation
/// message can be mapped to PostgreSQL's `<table>_pkey` name.
const COMPOSITE_PRIMARY_KEYS: &[(&str, &str)] = &[
    ("settings", "key"),
    ("contact_tags", "contact_id_tag"),
    ("idempotency_keys", "org_id_key"),
    ("campaign_recipients", "campaign_id_contact_id"),
    ("usage_counters", "org_id_meter_period_start"),
    ("network_event_keys", "key"),
    ("media_network", "media_id_phone_number_id"),
    ("media_import_slots", "org_id_slot"),
    ("inbound_media", "org_id_wamid"),
    ("network_inbox_set_aside", "inbox_id_kind_item_key"),
    ("person_links", "token_hash"),
    ("recovery_codes", "person_id_code_hash"),
];

/// SQLite reports `UNIQUE constraint failed: members.org_id, members.email` instead of a
/// constraint name; rebuild the name the PostgreSQL migration gives that constraint.
fn sqlite_constraint_name(message: &str) -> Option<String> {
    let cols = message.split_once("constraint failed: ")?.1;
    let mut table = None;
    let mut names = Vec::new();
    for part in cols.split(',') {
        let (t, c) = part.trim().split_once('.')?;
        table.get_or_insert(t);
        names.push(c);
    }
    let table = table?;
    let joined = names.join("_");
    let pk = COMPOSITE_PRIMARY_KEYS
        .iter()
        .find(|(t, _)| *t == table)
        .map_or("id", |(_, c)| c);
    Some(if joined == pk {
        format!("{table}_pkey")
    } else {
        format!("{table}_{joined}_key")
    })
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match err {
            sqlx::Error::RowNotFound => Self::NotFound,
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                let constraint = db
                    .constraint()
                    .map(str::to_owned)
                    .or_else(|| sqlite_constraint_name(db.message()))
                    .unwrap_or_else(|| "unique".to_owned());
                Self::Conflict { constraint }
            }
            other => Self::Backend(other),
        }
    }
}

/// How a storage failure reaches a caller of a use case: a missing row is a 404, a unique
/// constraint a 409 naming it, anything else ours (logged here, 503 so the client retries,
/// no internals in the body).
impl From<StoreError> for tern_domain::Problem {
    fn from(e: StoreError) -> Self {
        use tern_domain::Problem;
        use tern_domain::error::ConflictReason;
        match e {
            StoreError::NotFound => Problem::not_found(),
            StoreError::Conflict { constraint } => Problem::conflict(ConflictReason::AlreadyExists)
                .with_detail("constraint", constraint),
            other => {
                tracing::error!(error = %other, "store error");
                Problem::unavailable()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{StoreError, sqlite_constraint_name};

    #[test]
    fn connection_failures_are_unavailable() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(StoreError::Backend(sqlx::Error::Io(refused)).is_unavailable());
        assert!(StoreError::Backend(sqlx::Error::PoolTimedOut).is_unavailable());
        assert!(!StoreError::Backend(sqlx::Error::RowNotFound).is_unavailable());
        assert!(!StoreError::NotFound.is_unavailable());
        assert!(!StoreError::conflict("x").is_unavailable());
    }

    #[test]
    fn sqlite_messages_map_to_postgres_names() {
        assert_eq!(
            sqlite_constraint_name("UNIQUE constraint failed: members.org_id, members.email")
                .as_deref(),
            Some("members_org_id_email_key")
        );
        assert_eq!(
            sqlite_constraint_name("UNIQUE constraint failed: api_keys.id").as_deref(),
            Some("api_keys_pkey")
        );
        assert_eq!(
            sqlite_constraint_name("UNIQUE constraint failed: settings.key").as_deref(),
            Some("settings_pkey")
        );
        assert_eq!(
            sqlite_constraint_name("UNIQUE constraint failed: messages.wamid").as_deref(),
            Some("messages_wamid_key")
        );
        assert_eq!(sqlite_constraint_name("something else"), None);
    }
}
