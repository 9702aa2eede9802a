//! The audit log: who (a person, a key, the operator) did what to an organisation, when and
//! from which address. Written in the transaction of the change it records
//! ([`Tx::insert_audit`]) or on its own ([`Db::insert_audit`]); read newest first.

use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::Result;
use crate::sql::split_after;

/// One entry (`detail` is JSON text, never a secret: core::audit builds it). Core reads
/// entries back as `AuditRow<serde_json::Value>` ([`AuditRow::map_detail`]).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AuditRow<D = String> {
    pub id: Uuid,
    /// `None` for an installation-wide entry (e.g. a failed sign-in of an unknown email).
    pub org_id: Option<Uuid>,
    pub at: i64,
    /// `person`, `key` or `operator`.
    pub actor_kind: String,
    pub actor_id: Option<String>,
    /// The person's email, the key's name and prefix, or `operator`.
    pub actor_label: String,
    pub action: String,
    pub target_kind: Option<String>,
    pub target_id: Option<String>,
    pub detail: Option<D>,
    pub address: Option<String>,
}

impl AuditRow {
    /// The same entry with `detail` read by `read` (e.g. parsed as JSON).
    pub fn map_detail<D>(self, read: impl FnOnce(String) -> Option<D>) -> AuditRow<D> {
        AuditRow {
            id: self.id,
            org_id: self.org_id,
            at: self.at,
            actor_kind: self.actor_kind,
            actor_id: self.actor_id,
            actor_label: self.actor_label,
            action: self.action,
            target_kind: self.target_kind,
            target_id: self.target_id,
            detail: self.detail.and_then(read),
            address: self.address,
        }
    }
}

macro_rules! audit_columns {
    () => {
        "id, org_id, at, actor_kind, actor_id, actor_label, action, target_kind, target_id, \
         detail, address"
    };
}

macro_rules! insert_audit {
    ($r:expr) => {{
        let r: &AuditRow = $r;
        sqlx::query(concat!(
            "INSERT INTO audit_log (",
            audit_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ))
        .bind(r.id)
        .bind(r.org_id)
        .bind(r.at)
        .bind(&r.actor_kind)
        .bind(&r.actor_id)
        .bind(&r.actor_label)
        .bind(&r.action)
        .bind(&r.target_kind)
        .bind(&r.target_id)
        .bind(&r.detail)
        .bind(&r.address)
    }};
}

impl Tx {
    /// Records an entry with the change this transaction makes (both or neither).
    pub async fn insert_audit(&mut self, row: &AuditRow) -> Result<()> {
        with_tx!(self, conn => insert_audit!(row).execute(&mut **conn).await.map(|r| r.rows_affected()))?;
        Ok(())
    }
}

impl Db {
    /// Records an entry in a statement of its own (a change that is not one transaction,
    /// or an event such as a sign-in).
    pub async fn insert_audit(&self, row: &AuditRow) -> Result<()> {
        with_pool!(self, pool => insert_audit!(row).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// The organisation's entries newest first (`at`, then id), strictly before the keyset
    /// position `before`, at most `limit`; with `action_prefix` only the actions starting
    /// with it (e.g. `key.`).
    pub async fn list_audit(
        &self,
        org_id: Uuid,
        action_prefix: Option<&str>,
        before: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<AuditRow>> {
        // A prefix match without LIKE: action names may contain `_`, a LIKE wildcard.
        const SQL: &str = concat!(
            "SELECT ",
            audit_columns!(),
            " FROM audit_log WHERE org_id = $1 \
               AND ($2 IS NULL OR substr(action, 1, length($2)) = $2) \
               AND ($3 IS NULL OR at < $3 OR (at = $3 AND id < $4)) \
             ORDER BY at DESC, id DESC LIMIT $5"
        );
        let (before_at, before_id) = split_after(before);
        let rows = with_pool!(self, pool => sqlx::query_as::<_, AuditRow>(SQL)
            .bind(org_id)
            .bind(action_prefix)
            .bind(before_at)
            .bind(before_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }
}
