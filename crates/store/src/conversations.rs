//! Conversations: one per (contact, business number), carrying the customer-service window.

use uuid::Uuid;

use crate::db::{Db, with_pool};
use crate::error::{Result, StoreError};
use crate::sql::{push_id_list, split_after};
use tern_domain::send::{WINDOW_MS, WindowState};

/// A conversation between a contact and one of the organisation's numbers.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Conversation {
    pub id: Uuid,
    pub org_id: Uuid,
    pub contact_id: Uuid,
    pub phone_number_id: String,
    /// The network's timestamp of the customer's latest message (never moves back).
    pub last_inbound_at: Option<i64>,
    /// Latest message in either direction (arrival / send time; never moves back).
    pub last_message_at: Option<i64>,
    pub created_at: i64,
}

impl Conversation {
    /// When the customer-service window closes (`None`: the customer never wrote); the
    /// domain's rule ([`WindowState`]).
    pub fn window_expires_at(&self) -> Option<i64> {
        WindowState::expires_at(self.last_inbound_at)
    }

    /// The window at `now_ms`: the same rule as the send check and the `open` filter of
    /// [`Db::list_conversations`] (`last_inbound_at > now - window`).
    pub fn window_state(&self, now_ms: i64) -> WindowState {
        WindowState::at(self.last_inbound_at, now_ms)
    }

    /// The key conversations are listed by (newest first): latest activity.
    pub fn sort_ts(&self) -> i64 {
        self.last_message_at.unwrap_or(self.created_at)
    }
}

/// Who a conversation is with, as a list shows it: enough to name the person.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ConversationContact {
    pub id: Uuid,
    pub name: Option<String>,
    /// Digits only, no `+`; `None` when the network withholds the phone.
    pub wa_id: Option<String>,
    pub username: Option<String>,
    pub user_id: Option<String>,
}

macro_rules! conversation_columns {
    () => {
        "id, org_id, contact_id, phone_number_id, last_inbound_at, last_message_at, created_at"
    };
}

impl Db {
    /// The conversation between the organisation's contact and its number, created (with
    /// id `new_id`, `created_at = at`) if absent. Racing callers get the same row.
    /// `NotFound` if the contact or the number is not the organisation's.
    pub async fn get_or_create_conversation(
        &self,
        org_id: Uuid,
        contact_id: Uuid,
        phone_number_id: &str,
        new_id: Uuid,
        at: i64,
    ) -> Result<Conversation> {
        with_pool!(self, pool => {
            // Insert only when both the contact and the number belong to the organisation;
            // the unique (contact_id, phone_number_id) makes a racing insert a no-op.
            sqlx::query(
                    "INSERT INTO conversations (id, org_id, contact_id, phone_number_id, created_at) \
                     SELECT $1, c.org_id, c.id, p.id, $5 \
                     FROM contacts c, phone_numbers p \
                     WHERE c.id = $3 AND c.org_id = $2 AND p.id = $4 AND p.org_id = $2 \
                     ON CONFLICT (contact_id, phone_number_id) DO NOTHING")
                .bind(new_id)
                .bind(org_id)
                .bind(contact_id)
                .bind(phone_number_id)
                .bind(at)
                .execute(pool)
                .await?;
            let conversation = sqlx::query_as::<_, Conversation>(concat!(
                    "SELECT ", conversation_columns!(), " FROM conversations \
                     WHERE contact_id = $1 AND phone_number_id = $2 AND org_id = $3"))
                .bind(contact_id)
                .bind(phone_number_id)
                .bind(org_id)
                .fetch_optional(pool)
                .await?;
            conversation.ok_or(StoreError::NotFound)
        })
    }

    /// Records a customer message sent at the network's time `network_ts` and received at
    /// `at`: `last_inbound_at = max(last_inbound_at, network_ts)` and
    /// `last_message_at = max(last_message_at, at)`. Returns the row; `NotFound` if missing.
    pub async fn touch_conversation_inbound(
        &self,
        conversation_id: Uuid,
        network_ts: i64,
        at: i64,
    ) -> Result<Conversation> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let conversation = with_pool!(self, pool => sqlx::query_as::<_, Conversation>(concat!(
                "UPDATE conversations SET \
                 last_inbound_at = CASE WHEN last_inbound_at IS NULL OR last_inbound_at < $2 \
                   THEN $2 ELSE last_inbound_at END, \
                 last_message_at = CASE WHEN last_message_at IS NULL OR last_message_at < $3 \
                   THEN $3 ELSE last_message_at END \
                 WHERE id = $1 RETURNING ", conversation_columns!()))
            .bind(conversation_id)
            .bind(network_ts)
            .bind(at)
            .fetch_optional(pool)
            .await)?;
        conversation.ok_or(StoreError::NotFound)
    }

    /// Records a message in the conversation at `at`: `last_message_at = max(…, at)`.
    /// Returns the row; `NotFound` if missing.
    pub async fn touch_conversation_message(
        &self,
        conversation_id: Uuid,
        at: i64,
    ) -> Result<Conversation> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let conversation = with_pool!(self, pool => sqlx::query_as::<_, Conversation>(concat!(
                "UPDATE conversations SET \
                 last_message_at = CASE WHEN last_message_at IS NULL OR last_message_at < $2 \
                   THEN $2 ELSE last_message_at END \
                 WHERE id = $1 RETURNING ", conversation_columns!()))
            .bind(conversation_id)
            .bind(at)
            .fetch_optional(pool)
            .await)?;
        conversation.ok_or(StoreError::NotFound)
    }

    /// The conversation between the organisation's contact and number, if one exists.
    pub async fn find_conversation(
        &self,
        org_id: Uuid,
        contact_id: Uuid,
        phone_number_id: &str,
    ) -> Result<Option<Conversation>> {
        let conversation = with_pool!(self, pool => sqlx::query_as::<_, Conversation>(concat!(
                "SELECT ", conversation_columns!(), " FROM conversations \
                 WHERE contact_id = $1 AND phone_number_id = $2 AND org_id = $3"))
            .bind(contact_id)
            .bind(phone_number_id)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(conversation)
    }

    /// The organisation's conversation `id` (`None` if missing or another organisation's).
    pub async fn get_conversation(&self, org_id: Uuid, id: Uuid) -> Result<Option<Conversation>> {
        let conversation = with_pool!(self, pool => sqlx::query_as::<_, Conversation>(concat!(
                "SELECT ", conversation_columns!(), " FROM conversations \
                 WHERE id = $1 AND org_id = $2"))
            .bind(id)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(conversation)
    }

    /// One page of the organisation's conversations, latest activity first by
    /// `(COALESCE(last_message_at, created_at), id)` ([`Conversation::sort_ts`]), starting
    /// after the keyset position `after = (sort_ts, id)`.
    ///
    /// Filters: `contact_id`; `window = Some((true, now))` keeps conversations whose window is
    /// open at `now` (`last_inbound_at > now - 24h`), `Some((false, now))` the others.
    /// A conversation with new activity moves to the front while a client pages.
    pub async fn list_conversations(
        &self,
        org_id: Uuid,
        contact_id: Option<Uuid>,
        window: Option<(bool, i64)>,
        after: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<Conversation>> {
        let cutoff = |open: bool| {
            window
                .filter(|(o, _)| *o == open)
                .map(|(_, now)| now - WINDOW_MS)
        };
        let (open_after, closed_until) = (cutoff(true), cutoff(false));
        let (after_ts, after_id) = split_after(after);
        let conversations = with_pool!(self, pool => sqlx::query_as::<_, Conversation>(concat!(
                "SELECT ", conversation_columns!(), " FROM conversations \
                 WHERE org_id = $1 AND ($2 IS NULL OR contact_id = $2) \
                   AND ($3 IS NULL OR last_inbound_at > $3) \
                   AND ($4 IS NULL OR last_inbound_at IS NULL OR last_inbound_at <= $4) \
                   AND ($5 IS NULL OR (COALESCE(last_message_at, created_at), id) < ($5, $6)) \
                 ORDER BY COALESCE(last_message_at, created_at) DESC, id DESC LIMIT $7"))
            .bind(org_id)
            .bind(contact_id)
            .bind(open_after)
            .bind(closed_until)
            .bind(after_ts)
            .bind(after_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(conversations)
    }

    /// The people of a page of conversations, in one query (`contact_ids` of one
    /// organisation; at most a page, so one statement).
    pub async fn conversation_contacts(
        &self,
        org_id: Uuid,
        contact_ids: &[Uuid],
    ) -> Result<Vec<ConversationContact>> {
        if contact_ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = with_pool!(self, pool => {
            let mut q = sqlx::QueryBuilder::new(
                "SELECT id, name, wa_id, username, user_id FROM contacts WHERE org_id = ");
            q.push_bind(org_id);
            q.push(" AND id IN ");
            push_id_list(&mut q, contact_ids.iter().copied());
            q.build_query_as::<ConversationContact>().persistent(false).fetch_all(pool).await
        })?;
        Ok(rows)
    }
}
