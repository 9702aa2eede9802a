//! The organisation's custom contact field definitions.

use uuid::Uuid;

use crate::db::{Db, with_pool};
use crate::error::Result;

/// A custom contact field; contacts hold values under `key` in `custom_fields`.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ContactField {
    pub id: Uuid,
    pub org_id: Uuid,
    pub key: String,
    pub label: String,
    pub field_type: String,
    pub created_at: i64,
}

impl Db {
    /// Inserts a field definition. `Conflict { "contact_fields_org_id_key_key" }` if the
    /// organisation already has a field with that key.
    pub async fn insert_contact_field(&self, field: &ContactField) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => sqlx::query(
                "INSERT INTO contact_fields (id, org_id, key, label, field_type, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(field.id)
            .bind(field.org_id)
            .bind(&field.key)
            .bind(&field.label)
            .bind(&field.field_type)
            .bind(field.created_at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// One page of the organisation's fields ordered by key, starting after `after_key`.
    pub async fn list_contact_fields(
        &self,
        org_id: Uuid,
        after_key: Option<&str>,
        limit: i64,
    ) -> Result<Vec<ContactField>> {
        let fields = with_pool!(self, pool => sqlx::query_as::<_, ContactField>(
                "SELECT id, org_id, key, label, field_type, created_at FROM contact_fields \
                 WHERE org_id = $1 AND ($2 IS NULL OR key > $2) \
                 ORDER BY key LIMIT $3")
            .bind(org_id)
            .bind(after_key)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(fields)
    }
}
