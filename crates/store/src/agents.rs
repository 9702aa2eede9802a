//! Conversations for agents (migration `0026_agents`): a read mark on the customer's
//! messages, and the contact's block.

use tern_domain::timeline::Detail;
use uuid::Uuid;

use crate::contacts::{Contact, contact_columns};
use crate::db::{Db, with_pool, with_tx};
use crate::error::{Result, StoreError};
use crate::messages::{Message, Row, message_columns};
use crate::sql::bump_updated_at;

/// A number the customer has a conversation with, and when they last wrote there.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ContactNumber {
    pub phone_number_id: String,
    /// The network's time of their latest message on the number (`None`: never wrote).
    pub last_inbound_at: Option<i64>,
}

impl Db {
    /// Records that the business marked the customer's message `message` read at `now`
    /// (the network did): `read_at` is set on it and on the earlier unread inbound messages
    /// of its conversation (received before it: by the network's time, then
    /// in the order Tern stored them), each with a `read_marked` entry naming
    /// the marked message's wamid; a message read before keeps its `read_at` (a repeat adds
    /// the marked message's entry only). Returns the message as it is now.
    pub async fn record_read_mark(&self, message: &Message, now: i64) -> Result<Message> {
        const MARK: &str = concat!(
            "UPDATE messages SET read_at = $4, updated_at = ",
            bump_updated_at!("messages", "$4"),
            " WHERE org_id = $1 AND conversation_id = $2 AND direction = 'inbound' \
               AND read_at IS NULL \
               AND (created_at < $3 OR (created_at = $3 AND id <= $5)) RETURNING id"
        );
        const GET: &str = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE org_id = $1 AND id = $2"
        );
        let mut tx = self.begin().await?;
        let marked: Vec<Uuid> = with_tx!(tx, conn => sqlx::query_scalar(MARK)
            .bind(message.org_id)
            .bind(message.conversation_id)
            .bind(message.created_at)
            .bind(now)
            .bind(message.id)
            .fetch_all(&mut **conn)
            .await)?;
        let entry = Detail::ReadMarked {
            wamid: message.wamid.clone(),
        };
        if !marked.contains(&message.id) {
            tx.add_timeline(message.id, now, &entry);
        }
        for id in &marked {
            tx.add_timeline(*id, now, &entry);
        }
        let row: Option<Row> = with_tx!(tx, conn => sqlx::query_as(GET)
            .bind(message.org_id)
            .bind(message.id)
            .fetch_optional(&mut **conn)
            .await)?;
        let row = row.ok_or(StoreError::NotFound)?;
        tx.commit().await?;
        Ok(row.into())
    }

    /// The numbers the contact has a conversation with (by id), with when they last wrote
    /// to each: where a block reaches them.
    pub async fn contact_numbers(
        &self,
        org_id: Uuid,
        contact_id: Uuid,
    ) -> Result<Vec<ContactNumber>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, ContactNumber>(
                "SELECT phone_number_id, last_inbound_at FROM conversations \
                 WHERE org_id = $1 AND contact_id = $2 ORDER BY phone_number_id LIMIT 100")
            .bind(org_id)
            .bind(contact_id)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// Sets (`Some(at)`) or clears (`None`) the contact's `blocked_at`. Blocking a blocked
    /// contact or unblocking an unblocked one changes nothing (not even `updated_at`).
    /// Returns the contact as it is now; `NotFound` when the organisation has no such contact.
    pub async fn set_contact_blocked(
        &self,
        org_id: Uuid,
        id: Uuid,
        blocked_at: Option<i64>,
        now: i64,
    ) -> Result<Contact> {
        const UPDATE: &str = concat!(
            "UPDATE contacts SET blocked_at = $3, updated_at = ",
            bump_updated_at!("contacts", "$4"),
            " WHERE id = $1 AND org_id = $2 AND ((blocked_at IS NULL) <> ($3 IS NULL)) \
             RETURNING ",
            contact_columns!()
        );
        let updated = with_pool!(self, pool => sqlx::query_as::<_, Contact>(UPDATE)
            .bind(id)
            .bind(org_id)
            .bind(blocked_at)
            .bind(now)
            .fetch_optional(pool)
            .await)?;
        let contact = match updated {
            Some(c) => self.load_tags(c).await?,
            None => self
                .get_contact(org_id, id)
                .await?
                .ok_or(StoreError::NotFound)?,
        };
        Ok(contact)
    }
}
