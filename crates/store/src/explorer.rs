//! The app's message explorer (APP.md §4): an organisation's messages newest first, found by
//! a customer (their conversations) or one message, with filters. Every shape is answered by
//! an ordered index scan that stops after one page (PostgreSQL, 1,000,000 messages):
//!
//! | looking for | index |
//! |---|---|
//! | everything, status, direction, number, time (`id` bounds: ids are UUID v7) | `messages (org_id, id)` (0022) |
//! | a campaign's messages | `messages (campaign_id, id)` (0013) |
//! | a customer's messages | `messages (conversation_id, id)`, one scan per conversation |
//! | a message by id or wamid | the primary key / `messages (wamid)` |
//! | a customer by phone, BSUID, parent BSUID, username | `contacts (org_id, wa_id)`, `(org_id, user_id)`, `(org_id, parent_user_id)`, `(org_id, LOWER(username))` (0022) |
//!
//! Status, direction and number are filters on the scan rather than indexed columns: an
//! index on `status` would make every status write touch every index of `messages` (no
//! HOT update), which the status path cannot afford. A status that matches few messages
//! therefore reads further; a time range bounds that.

use uuid::Uuid;

use crate::contacts::{Contact, contact_columns};
use crate::db::{Db, with_pool};
use crate::error::Result;
use crate::messages::{Message, Row, message_columns};
use crate::sql::{bump_updated_at, push_id_list};
use tern_domain::message::{Direction, Status};

/// Most conversations of one customer searched at once (one per number of the
/// organisation they wrote to or were written to from).
pub const MAX_CONVERSATIONS: usize = 50;

/// What the explorer lists: the organisation's messages newest first, narrowed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExplorerQuery {
    pub org_id: Uuid,
    /// Only this message.
    pub message_id: Option<Uuid>,
    /// Only the messages of these conversations (a customer's); `Some(empty)` finds none.
    pub conversations: Option<Vec<Uuid>>,
    pub status: Option<Status>,
    pub direction: Option<Direction>,
    pub phone_number_id: Option<String>,
    pub campaign_id: Option<Uuid>,
    /// Only ids at or above this one (a time's lower bound, see [`id_at`]).
    pub since: Option<Uuid>,
    /// Only ids below this one: the page's cursor or a time's upper bound.
    pub before: Option<Uuid>,
    pub limit: i64,
}

/// The smallest UUID v7 of the millisecond `ms`: every id made at or after `ms` is at least
/// this, every id made before it is below. Turns a time range into an id range.
pub fn id_at(ms: i64) -> Uuid {
    let ms = u128::from(u64::try_from(ms.max(0)).unwrap_or(0) & 0xFFFF_FFFF_FFFF);
    Uuid::from_u128(ms << 80)
}

/// One of a customer's identifiers, as the explorer looks them up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CustomerKey<'a> {
    /// Phone digits without `+`.
    WaId(&'a str),
    /// A business-scoped user id.
    UserId(&'a str),
    /// A parent BSUID (`US.ENT.…`).
    ParentUserId(&'a str),
    /// A WhatsApp username without `@`, compared ignoring ASCII case.
    Username(&'a str),
}

/// What [`Db::redeliver_webhook_delivery`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivery {
    /// Pending again, due now.
    Queued,
    /// The receiver already took it.
    AlreadySucceeded,
    /// A worker is making an attempt right now.
    InFlight,
    /// No delivery of that event to that subscription (yet).
    Missing,
}

/// The SELECT of one scan: the query's filters, `conversation` when given, newest first,
/// one page.
fn push_scan<DB>(q: &mut sqlx::QueryBuilder<DB>, f: &ExplorerQuery, conversation: Option<Uuid>)
where
    DB: sqlx::Database,
    for<'t> Uuid: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    q.push(concat!(
        "SELECT ",
        message_columns!(),
        " FROM messages WHERE "
    ));
    // The campaign's own index when filtering by campaign; the organisation's otherwise.
    if let Some(c) = conversation {
        q.push("conversation_id = ").push_bind(c);
        q.push(" AND org_id = ").push_bind(f.org_id);
    } else {
        q.push("org_id = ").push_bind(f.org_id);
    }
    if let Some(id) = f.message_id {
        q.push(" AND id = ").push_bind(id);
    }
    if let Some(s) = f.status {
        q.push(" AND status = ").push_bind(s.as_str().to_string());
    }
    if let Some(d) = f.direction {
        q.push(" AND direction = ")
            .push_bind(d.as_str().to_string());
    }
    if let Some(n) = &f.phone_number_id {
        q.push(" AND phone_number_id = ").push_bind(n.clone());
    }
    if let Some(c) = f.campaign_id {
        q.push(" AND campaign_id = ").push_bind(c);
    }
    if let Some(id) = f.since {
        q.push(" AND id >= ").push_bind(id);
    }
    if let Some(id) = f.before {
        q.push(" AND id < ").push_bind(id);
    }
    q.push(" ORDER BY id DESC LIMIT ").push_bind(f.limit);
}

/// The whole statement: one scan, or one per conversation merged (each stops after a page,
/// so a customer with a long history costs a page per conversation, not their history).
fn push_query<DB>(q: &mut sqlx::QueryBuilder<DB>, f: &ExplorerQuery)
where
    DB: sqlx::Database,
    for<'t> Uuid: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    match f.conversations.as_deref() {
        None => push_scan(q, f, None),
        Some([one]) => push_scan(q, f, Some(*one)),
        Some(many) => {
            for (i, c) in many.iter().take(MAX_CONVERSATIONS).enumerate() {
                if i > 0 {
                    q.push(" UNION ALL ");
                }
                q.push("SELECT * FROM (");
                push_scan(q, f, Some(*c));
                q.push(format!(") s{i}"));
            }
            q.push(" ORDER BY id DESC LIMIT ").push_bind(f.limit);
        }
    }
}

impl Db {
    /// One page of the explorer (see [`ExplorerQuery`]), newest first.
    pub async fn explore_messages(&self, f: &ExplorerQuery) -> Result<Vec<Message>> {
        if f.limit <= 0 || f.conversations.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let rows: Vec<Row> = with_pool!(self, pool => {
            let mut q = sqlx::QueryBuilder::new("");
            push_query(&mut q, f);
            // A handful of shapes, but the conversation count varies: not kept prepared.
            q.build_query_as::<Row>().persistent(false).fetch_all(pool).await
        })?;
        Ok(rows.into_iter().map(Message::from).collect())
    }

    /// The ids of the organisation's contacts with this identifier (at most a few: phone and
    /// BSUID are unique; a parent BSUID or a username may name several).
    pub async fn customer_contact_ids(
        &self,
        org_id: Uuid,
        key: CustomerKey<'_>,
    ) -> Result<Vec<Uuid>> {
        let (sql, value): (&str, &str) = match key {
            CustomerKey::WaId(v) => (
                "SELECT id FROM contacts WHERE org_id = $1 AND wa_id = $2 LIMIT 50",
                v,
            ),
            CustomerKey::UserId(v) => (
                "SELECT id FROM contacts WHERE org_id = $1 AND user_id = $2 LIMIT 50",
                v,
            ),
            CustomerKey::ParentUserId(v) => (
                "SELECT id FROM contacts WHERE org_id = $1 AND parent_user_id = $2 LIMIT 50",
                v,
            ),
            CustomerKey::Username(v) => (
                "SELECT id FROM contacts WHERE org_id = $1 AND username IS NOT NULL \
                 AND LOWER(username) = LOWER($2) LIMIT 50",
                v,
            ),
        };
        let ids = with_pool!(self, pool => sqlx::query_scalar::<_, Uuid>(sql)
            .bind(org_id)
            .bind(value)
            .fetch_all(pool)
            .await)?;
        Ok(ids)
    }

    /// The conversations of these contacts of the organisation (at most
    /// [`MAX_CONVERSATIONS`]).
    pub async fn conversations_of_contacts(
        &self,
        org_id: Uuid,
        contact_ids: &[Uuid],
    ) -> Result<Vec<Uuid>> {
        if contact_ids.is_empty() {
            return Ok(Vec::new());
        }
        let ids = with_pool!(self, pool => {
            let mut q = sqlx::QueryBuilder::new("SELECT id FROM conversations WHERE org_id = ");
            q.push_bind(org_id);
            q.push(" AND contact_id IN ");
            push_id_list(&mut q, contact_ids.iter().copied());
            q.push(" ORDER BY id LIMIT ");
            q.push_bind(MAX_CONVERSATIONS as i64);
            q.build_query_scalar::<Uuid>().persistent(false).fetch_all(pool).await
        })?;
        Ok(ids)
    }

    /// The organisation's contacts with these ids, without their tags (a page's names).
    pub async fn contacts_by_ids(&self, org_id: Uuid, ids: &[Uuid]) -> Result<Vec<Contact>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let rows = with_pool!(self, pool => {
            let mut q = sqlx::QueryBuilder::new(concat!(
                "SELECT ", contact_columns!(), " FROM contacts WHERE org_id = "));
            q.push_bind(org_id);
            q.push(" AND id IN ");
            push_id_list(&mut q, ids.iter().copied());
            q.build_query_as::<Contact>().persistent(false).fetch_all(pool).await
        })?;
        Ok(rows)
    }

    /// Puts one delivery (event `event_id` to subscription `subscription_id`) back in the
    /// queue, due at `now`, keeping its attempt count (the next attempt is numbered on from
    /// the last). A failed delivery, or a pending one waiting for its next retry (or whose
    /// worker's lease ran out), is queued; one that succeeded or that a worker holds now is
    /// left as it is. The caller checks that the subscription is the organisation's.
    pub async fn redeliver_webhook_delivery(
        &self,
        subscription_id: Uuid,
        event_id: Uuid,
        now: i64,
    ) -> Result<Redelivery> {
        const SQL: &str = concat!(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $3, \
             locked_until = NULL, lease_owner = NULL, updated_at = ",
            bump_updated_at!("webhook_deliveries", "$3"),
            " WHERE subscription_id = $1 AND event_id = $2 AND (status = 'failed' \
               OR (status = 'pending' AND (locked_until IS NULL OR locked_until <= $3)))"
        );
        let n = with_pool!(self, pool => sqlx::query(SQL)
            .bind(subscription_id)
            .bind(event_id)
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        if n > 0 {
            self.wakeups.deliveries.notify_one();
            return Ok(Redelivery::Queued);
        }
        let status = with_pool!(self, pool => sqlx::query_scalar::<_, String>(
                "SELECT status FROM webhook_deliveries WHERE subscription_id = $1 AND event_id = $2")
            .bind(subscription_id)
            .bind(event_id)
            .fetch_optional(pool)
            .await)?;
        Ok(match status.as_deref() {
            None => Redelivery::Missing,
            Some("succeeded") => Redelivery::AlreadySucceeded,
            // Pending and leased (a failed one was queued above).
            Some(_) => Redelivery::InFlight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_at_bounds_the_ids_of_a_millisecond() {
        let ms = 1_767_225_600_123_i64;
        let lo = id_at(ms);
        let hi = id_at(ms + 1);
        for _ in 0..100 {
            let ts = uuid::Timestamp::from_unix(
                uuid::NoContext,
                u64::try_from(ms / 1000).unwrap(),
                u32::try_from((ms % 1000) * 1_000_000).unwrap(),
            );
            let id = Uuid::new_v7(ts);
            assert!(lo <= id && id < hi, "{lo} {id} {hi}");
        }
        assert!(id_at(-5) == Uuid::nil());
    }
}
