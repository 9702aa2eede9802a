//! Contact tags (free-form strings, per contact; `GET /tags` lists them per organisation).

use uuid::Uuid;

use crate::contacts::{Contact, contact_columns, tags_of};
use crate::db::{BeginWrite as _, Db, with_pool};
use crate::error::{Result, StoreError};
use crate::sql::{bump_updated_at, lock_for_write};

/// Locks the organisation's contact `$1`/`$2` for the rest of the transaction.
macro_rules! lock_contact_sql {
    ($db:expr) => {
        lock_for_write!(
            $db,
            "SELECT ",
            contact_columns!(),
            " FROM contacts WHERE id = $1 AND org_id = $2"
        )
    };
}

/// Moves a contact's `updated_at` for a change at `at`, returning the row.
macro_rules! bump_contact {
    ($contact:expr, $at:expr) => {
        sqlx::query_as::<_, Contact>(concat!(
            "UPDATE contacts SET updated_at = ",
            bump_updated_at!("contacts", "$2"),
            " WHERE id = $1 RETURNING ",
            contact_columns!()
        ))
        .bind($contact.id)
        .bind($at)
    };
}

impl Db {
    /// Adds `tags` to the organisation's contact (idempotent: tags it already has are
    /// skipped) and returns the contact. `updated_at` moves only if a tag was added.
    /// `NotFound` if the contact is missing or another organisation's.
    pub async fn add_contact_tags(
        &self,
        org_id: Uuid,
        contact_id: Uuid,
        tags: &[String],
        at: i64,
    ) -> Result<Contact> {
        let mut unique: Vec<&str> = tags.iter().map(String::as_str).collect();
        unique.sort_unstable();
        unique.dedup();
        let lock = lock_contact_sql!(self);
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            // The contact row is locked first, so concurrent tag writes on one contact
            // serialise and `updated_at` is bumped once per change.
            let mut contact = sqlx::query_as::<_, Contact>(lock)
                .bind(contact_id)
                .bind(org_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound)?;
            let mut added = 0;
            for tag in unique {
                added += sqlx::query(
                        "INSERT INTO contact_tags (org_id, contact_id, tag, created_at) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (contact_id, tag) DO NOTHING")
                    .bind(org_id)
                    .bind(contact_id)
                    .bind(tag)
                    .bind(at)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
            }
            if added > 0 {
                contact = bump_contact!(contact, at).fetch_one(&mut *tx).await?;
            }
            contact.tags = tags_of!(contact.id).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            Ok(contact)
        })
    }

    /// Removes `tag` from the organisation's contact and returns the contact; removing a tag
    /// the contact does not have is a successful no-op (and does not move `updated_at`).
    /// `NotFound` if the contact is missing or another organisation's.
    pub async fn remove_contact_tag(
        &self,
        org_id: Uuid,
        contact_id: Uuid,
        tag: &str,
        at: i64,
    ) -> Result<Contact> {
        let lock = lock_contact_sql!(self);
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let mut contact = sqlx::query_as::<_, Contact>(lock)
                .bind(contact_id)
                .bind(org_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound)?;
            let removed = sqlx::query(
                    "DELETE FROM contact_tags WHERE contact_id = $1 AND org_id = $2 AND tag = $3")
                .bind(contact_id)
                .bind(org_id)
                .bind(tag)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if removed > 0 {
                contact = bump_contact!(contact, at).fetch_one(&mut *tx).await?;
            }
            contact.tags = tags_of!(contact.id).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            Ok(contact)
        })
    }

    /// One page of the organisation's distinct tags with the number of contacts holding each,
    /// ordered bytewise by tag, starting after the tag `after`.
    pub async fn list_tags(
        &self,
        org_id: Uuid,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<(String, i64)>> {
        // contact_tags.tag is COLLATE "C" on PostgreSQL: bytewise like SQLite.
        let tags = with_pool!(self, pool => sqlx::query_as::<_, (String, i64)>(
                "SELECT tag, COUNT(*) FROM contact_tags \
                 WHERE org_id = $1 AND ($2 IS NULL OR tag > $2) \
                 GROUP BY tag ORDER BY tag LIMIT $3")
            .bind(org_id)
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(tags)
    }
}
