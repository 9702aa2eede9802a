//! Messages, inbound and outbound. Status changes are compare-and-set on the current
//! status, so concurrent webhooks and workers never overwrite each other's progress: the
//! caller reads, decides with the domain rules, and writes only if nothing moved meanwhile.

use serde_json::Value;
use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{Db, Tx, TxInner, with_pool, with_tx};
use crate::error::Result;
use crate::sql::{ROWS_PER_STATEMENT, push_id_list};
use tern_domain::failure::Failure;
use tern_domain::message::{Direction, Pricing, Status};

/// A message row.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: Uuid,
    pub org_id: Uuid,
    pub conversation_id: Uuid,
    pub contact_id: Uuid,
    pub phone_number_id: String,
    pub direction: Direction,
    pub r#type: String,
    pub status: Status,
    pub template_name: Option<String>,
    pub template_language: Option<String>,
    pub text: Option<String>,
    pub media_id: Option<Uuid>,
    pub wamid: Option<String>,
    /// The accepted request (outbound) or the network's message object (inbound).
    pub request: Value,
    pub campaign_id: Option<Uuid>,
    pub created_at: i64,
    pub sent_at: Option<i64>,
    pub delivered_at: Option<i64>,
    pub read_at: Option<i64>,
    pub failed_at: Option<i64>,
    pub failure_code: Option<String>,
    pub failure: Option<Failure>,
    pub updated_at: i64,
    /// Inbound: the type's object in the network's shape, as received or last edited;
    /// `None` once the customer deleted the message. Outbound messages leave it `None`: their
    /// content is the request's object (`tern_core::messages::content` reads either).
    pub content: Option<Value>,
    /// The message this one answers.
    pub reply_to: Option<ReplyTo>,
    /// The click-to-WhatsApp ad the customer came from (inbound).
    pub referral: Option<Value>,
    /// When the customer last edited the message (inbound).
    pub edited_at: Option<i64>,
    /// When the customer deleted the message (inbound).
    pub revoked_at: Option<i64>,
    /// The network's pricing of its latest status report that carried one (outbound).
    pub pricing: Option<Pricing>,
}

/// The message another one answers: the network's id, and Tern's when Tern holds it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ReplyTo {
    pub message_id: Option<Uuid>,
    pub wamid: String,
}

#[derive(sqlx::FromRow)]
pub(crate) struct Row {
    id: Uuid,
    org_id: Uuid,
    conversation_id: Uuid,
    contact_id: Uuid,
    phone_number_id: String,
    #[sqlx(try_from = "String")]
    direction: Direction,
    r#type: String,
    #[sqlx(try_from = "String")]
    status: Status,
    template_name: Option<String>,
    template_language: Option<String>,
    text: Option<String>,
    media_id: Option<Uuid>,
    wamid: Option<String>,
    request: Option<Json<Value>>,
    campaign_id: Option<Uuid>,
    created_at: i64,
    sent_at: Option<i64>,
    delivered_at: Option<i64>,
    read_at: Option<i64>,
    failed_at: Option<i64>,
    failure_code: Option<String>,
    failure: Option<Json<Failure>>,
    updated_at: i64,
    content: Option<Json<Value>>,
    reply_to: Option<Json<ReplyTo>>,
    referral: Option<Json<Value>>,
    edited_at: Option<i64>,
    revoked_at: Option<i64>,
    pricing: Option<Json<Pricing>>,
}

impl From<Row> for Message {
    fn from(r: Row) -> Self {
        Message {
            id: r.id,
            org_id: r.org_id,
            conversation_id: r.conversation_id,
            contact_id: r.contact_id,
            phone_number_id: r.phone_number_id,
            direction: r.direction,
            r#type: r.r#type,
            status: r.status,
            template_name: r.template_name,
            template_language: r.template_language,
            text: r.text,
            media_id: r.media_id,
            wamid: r.wamid,
            request: r.request.map(|j| j.0).unwrap_or(Value::Null),
            campaign_id: r.campaign_id,
            created_at: r.created_at,
            sent_at: r.sent_at,
            delivered_at: r.delivered_at,
            read_at: r.read_at,
            failed_at: r.failed_at,
            failure_code: r.failure_code,
            failure: r.failure.map(|j| j.0),
            updated_at: r.updated_at,
            content: r.content.map(|j| j.0),
            reply_to: r.reply_to.map(|j| j.0),
            referral: r.referral.map(|j| j.0),
            edited_at: r.edited_at,
            revoked_at: r.revoked_at,
            pricing: r.pricing.map(|j| j.0),
        }
    }
}

macro_rules! message_columns {
    () => {
        "id, org_id, conversation_id, contact_id, phone_number_id, direction, type, status, \
         template_name, template_language, text, media_id, wamid, request, campaign_id, created_at, \
         sent_at, delivered_at, read_at, failed_at, failure_code, failure, updated_at, content, \
         reply_to, referral, edited_at, revoked_at, pricing"
    };
}
pub(crate) use message_columns;

/// What inserting a message with a wamid already stored does (returning the stored id when
/// it fills in an original, nothing for a duplicate): see [`Tx::insert_message`].
macro_rules! inbound_conflict {
    () => {
        " ON CONFLICT (wamid) WHERE wamid IS NOT NULL DO UPDATE SET \
           created_at = excluded.created_at, type = excluded.type, request = excluded.request, \
           reply_to = excluded.reply_to, referral = excluded.referral \
         WHERE messages.direction = 'inbound' AND excluded.direction = 'inbound' \
           AND messages.org_id = excluded.org_id \
           AND (messages.edited_at IS NOT NULL OR messages.revoked_at IS NOT NULL) \
           AND excluded.created_at < messages.created_at \
         RETURNING id"
    };
}
pub(crate) const INBOUND_CONFLICT: &str = inbound_conflict!();

/// The columns an accepted (outbound) message is inserted with, `message_columns!` less the
/// inbound-only ones and the reported pricing (content, referral, edited_at, revoked_at,
/// pricing: NULL): fewer binds on the
/// send path's batch inserts.
macro_rules! outbound_columns {
    () => {
        "id, org_id, conversation_id, contact_id, phone_number_id, direction, type, status, \
         template_name, template_language, text, media_id, wamid, request, campaign_id, created_at, \
         sent_at, delivered_at, read_at, failed_at, failure_code, failure, updated_at, reply_to"
    };
}
pub(crate) use outbound_columns;

/// The status fields written by `status_writes().update_message_status`.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusChange {
    pub status: Status,
    pub wamid: Option<String>,
    pub sent_at: Option<i64>,
    pub delivered_at: Option<i64>,
    pub read_at: Option<i64>,
    pub failed_at: Option<i64>,
    pub failure_code: Option<String>,
    pub failure: Option<Failure>,
    /// The message's pricing after the change (a network report's replaces the stored
    /// one); `None` keeps what is stored. Only `update_message_status` writes it: the
    /// dispatcher's outcomes bring no price.
    pub pricing: Option<Pricing>,
}

/// A message an edit or deletion was applied to ([`Tx::edit_inbound_message`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Touched {
    /// The message as it is now.
    pub message: Message,
    /// Whether this call changed it (`false`: an older edit, or an already deleted message).
    pub changed: bool,
}

impl Touched {
    fn unchanged(message: Message) -> Touched {
        Touched {
            message,
            changed: false,
        }
    }
}

/// What [`Tx::insert_message`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    New,
    /// The original of a message whose edit or deletion arrived first: it filled in its
    /// time, type, reply target and referral.
    FilledIn,
    /// A message with the same wamid exists: nothing written.
    Duplicate,
}

impl Db {
    /// Inserts a message. Returns `false` (and writes nothing) when a message with the
    /// same `wamid` exists: the network delivered the same inbound message twice. One
    /// exception: an inbound row that a customer's edit or deletion created before its
    /// original arrived (it carries `edited_at` / `revoked_at` and the later event's time as
    /// `created_at`) takes the original's time, type, reply target and referral, keeping
    /// the newer text and content (`true`).
    pub async fn insert_message(&self, m: &Message) -> Result<bool> {
        let mut tx = self.begin().await?;
        let r = tx.insert_message(m).await?;
        tx.commit().await?;
        Ok(r != Inserted::Duplicate)
    }

    /// One message of the organisation.
    pub async fn get_message(&self, org_id: Uuid, id: Uuid) -> Result<Option<Message>> {
        const SQL: &str = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE org_id = $1 AND id = $2"
        );
        let row: Option<Row> = with_pool!(self, pool => sqlx::query_as(SQL).bind(org_id).bind(id).fetch_optional(pool).await)?;
        Ok(row.map(Message::from))
    }

    /// The message a network status refers to: by `wamid`, or — when the send call's answer
    /// was lost and no wamid is stored yet — by Tern's id echoed in
    /// `biz_opaque_callback_data`.
    pub async fn find_message_for_status(
        &self,
        wamid: &str,
        tern_id: Option<Uuid>,
    ) -> Result<Option<Message>> {
        const BY_WAMID: &str = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE wamid = $1"
        );
        const BY_ID: &str = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE id = $1 AND direction = 'outbound'"
        );
        let row: Option<Row> = with_pool!(self, pool => sqlx::query_as(BY_WAMID).bind(wamid).fetch_optional(pool).await)?;
        if let Some(r) = row {
            return Ok(Some(r.into()));
        }
        let Some(id) = tern_id else { return Ok(None) };
        let row: Option<Row> =
            with_pool!(self, pool => sqlx::query_as(BY_ID).bind(id).fetch_optional(pool).await)?;
        Ok(row.map(Message::from))
    }

    /// The messages with these wamids (one read for a notification's statuses; a wamid Tern
    /// does not hold is simply absent).
    pub async fn find_messages_by_wamids(&self, wamids: &[&str]) -> Result<Vec<Message>> {
        self.messages_in("wamid", wamids).await
    }

    /// The messages with these ids (one read for a batch of send outcomes).
    pub async fn get_messages_by_ids(&self, ids: &[Uuid]) -> Result<Vec<Message>> {
        self.messages_in("id", ids).await
    }

    /// The messages whose `column` is one of `values`, in one statement.
    async fn messages_in<'a, T>(
        &self,
        column: &'static str,
        values: &'a [T],
    ) -> Result<Vec<Message>>
    where
        T: Copy
            + Send
            + Sync
            + 'a
            + sqlx::Encode<'a, sqlx::Postgres>
            + sqlx::Type<sqlx::Postgres>
            + sqlx::Encode<'a, sqlx::Sqlite>
            + sqlx::Type<sqlx::Sqlite>,
    {
        if values.is_empty() {
            return Ok(Vec::new());
        }
        let head = format!(
            concat!(
                "SELECT ",
                message_columns!(),
                " FROM messages WHERE {} IN ("
            ),
            column
        );
        let rows: Vec<Row> = with_pool!(self, pool => {
            let mut q = sqlx::QueryBuilder::new(head.as_str());
            let mut list = q.separated(", ");
            for v in values {
                list.push_bind(*v);
            }
            q.push(")");
            // Not kept prepared: each list length is another statement (memory per length).
            q.build_query_as::<Row>().persistent(false).fetch_all(pool).await
        })?;
        Ok(rows.into_iter().map(Message::from).collect())
    }

    /// Tern's id of the organisation's message with this wamid, if Tern holds it.
    pub async fn message_id_by_wamid(&self, org_id: Uuid, wamid: &str) -> Result<Option<Uuid>> {
        let id = with_pool!(self, pool => sqlx::query_scalar::<_, Uuid>(
                "SELECT id FROM messages WHERE wamid = $1 AND org_id = $2")
            .bind(wamid)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(id)
    }

    /// The customer edited their message `wamid` at `at` (see [`Tx::edit_inbound_message`]).
    /// Returns the message as it is now (`None`: Tern does not hold it).
    pub async fn edit_inbound_message(
        &self,
        org_id: Uuid,
        wamid: &str,
        text: Option<&str>,
        content: &Value,
        at: i64,
        now: i64,
    ) -> Result<Option<Message>> {
        let mut tx = self.begin().await?;
        let r = tx
            .edit_inbound_message(org_id, wamid, text, content, at, now)
            .await?;
        tx.commit().await?;
        Ok(r.map(|t| t.message))
    }

    /// The customer deleted their message `wamid` at `at` (see
    /// [`Tx::revoke_inbound_message`]). Returns the message as it is now.
    pub async fn revoke_inbound_message(
        &self,
        org_id: Uuid,
        wamid: &str,
        at: i64,
        now: i64,
    ) -> Result<Option<Message>> {
        let mut tx = self.begin().await?;
        let r = tx.revoke_inbound_message(org_id, wamid, at, now).await?;
        tx.commit().await?;
        Ok(r.map(|t| t.message))
    }

    /// [`Tx::update_message_status`] in a transaction of its own.
    pub(crate) async fn update_message_status(
        &self,
        id: Uuid,
        expected_status: Status,
        expected_updated_at: i64,
        change: &StatusChange,
        at: i64,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let r = tx
            .update_message_status(id, expected_status, expected_updated_at, change, at)
            .await?;
        tx.commit().await?;
        Ok(r)
    }

    /// Messages of one conversation, newest first, optionally by direction.
    pub async fn list_conversation_messages(
        &self,
        org_id: Uuid,
        conversation_id: Uuid,
        direction: Option<Direction>,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Message>> {
        // UUID v7 ids sort by creation time, so the id alone is the keyset.
        const SQL: &str = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE org_id = $1 AND conversation_id = $2 \
             AND ($3 IS NULL OR direction = $3) AND ($4 IS NULL OR id < $4) \
             ORDER BY id DESC LIMIT $5"
        );
        let rows: Vec<Row> = with_pool!(self, pool => sqlx::query_as(SQL)
            .bind(org_id)
            .bind(conversation_id)
            .bind(direction.map(Direction::as_str))
            .bind(before)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows.into_iter().map(Message::from).collect())
    }
}

/// A campaign's messages waiting in the dispatch queue (`$1` campaign, `$2` its number,
/// `$3` limit), in id order: the per-number queue index finds them.
macro_rules! campaign_queue {
    () => {
        concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE phone_number_id = $2 AND dispatch_state = 'queued' \
             AND campaign_id IS NOT NULL AND campaign_id = $1 AND status IN ('accepted', 'sending') \
             ORDER BY id LIMIT $3"
        )
    };
}

impl Tx {
    /// Takes up to `limit` of a campaign's messages still waiting in the dispatch queue
    /// (not claimed: they never reached the network) out of it as `failed` with `failure`
    /// at `now`, in id order (the status writers' lock order). A message a claim holds at
    /// that moment is left to the claim (PostgreSQL `SKIP LOCKED`; SQLite's writer holds the
    /// lock). Returns the messages as they were before. For the status writer only (the
    /// move `accepted`/`sending` → `failed` is one the rule always allows).
    pub(crate) async fn fail_queued_campaign_messages(
        &mut self,
        campaign_id: Uuid,
        phone_number_id: &str,
        failure: &Failure,
        now: i64,
        limit: i64,
    ) -> Result<Vec<Message>> {
        let rows: Vec<Row> = match &mut self.inner {
            TxInner::Sqlite(conn) => {
                sqlx::query_as(campaign_queue!())
                    .bind(campaign_id)
                    .bind(phone_number_id)
                    .bind(limit)
                    .fetch_all(&mut **conn)
                    .await?
            }
            TxInner::Postgres(conn) => {
                sqlx::query_as(concat!(campaign_queue!(), " FOR NO KEY UPDATE SKIP LOCKED"))
                    .bind(campaign_id)
                    .bind(phone_number_id)
                    .bind(limit)
                    .fetch_all(&mut **conn)
                    .await?
            }
        };
        let before: Vec<Message> = rows.into_iter().map(Message::from).collect();
        for chunk in before.chunks(ROWS_PER_STATEMENT) {
            with_tx!(self, conn => {
                let mut q = sqlx::QueryBuilder::new(
                    "UPDATE messages SET status = 'failed', dispatch_state = NULL, \
                     next_attempt_at = NULL, locked_until = NULL, failed_at = ");
                q.push_bind(now);
                q.push(", failure_code = ");
                q.push_bind(failure.code.as_str());
                q.push(", failure = ");
                q.push_bind(Json(failure));
                q.push(", updated_at = CASE WHEN ");
                q.push_bind(now);
                q.push(" > updated_at THEN ");
                q.push_bind(now);
                q.push(" ELSE updated_at + 1 END WHERE dispatch_state = 'queued' AND id IN ");
                push_id_list(&mut q, chunk.iter().map(|m| m.id));
                q.build().persistent(false).execute(&mut **conn).await.map(drop)
            })?;
        }
        Ok(before)
    }
}

impl Tx {
    /// [`Db::get_message`] in this transaction (a change's event carries the row as written).
    pub async fn get_message(&mut self, org_id: Uuid, id: Uuid) -> Result<Option<Message>> {
        const SQL: &str = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE org_id = $1 AND id = $2"
        );
        let row: Option<Row> = with_tx!(self, conn => sqlx::query_as(SQL).bind(org_id).bind(id).fetch_optional(&mut **conn).await)?;
        Ok(row.map(Message::from))
    }

    /// The customer edited their message `wamid` at `at` (the network's time): its `text`
    /// and `content` become the new ones and `edited_at` is set. An edit older than the
    /// last one applied, or of a deleted message, changes nothing. Returns the message as
    /// it is now (`None`: Tern does not hold it).
    pub async fn edit_inbound_message(
        &mut self,
        org_id: Uuid,
        wamid: &str,
        text: Option<&str>,
        content: &Value,
        at: i64,
        now: i64,
    ) -> Result<Option<Touched>> {
        const SQL: &str = concat!(
            "UPDATE messages SET text = $3, content = $4, edited_at = $5, \
             updated_at = CASE WHEN $6 > updated_at THEN $6 ELSE updated_at + 1 END \
             WHERE wamid = $1 AND org_id = $2 AND direction = 'inbound' AND revoked_at IS NULL \
               AND (edited_at IS NULL OR edited_at < $5) RETURNING ",
            message_columns!()
        );
        // Twice at most: the original may be stored between the update and the read.
        for _ in 0..2 {
            let row: Option<Row> = with_tx!(self, conn => sqlx::query_as(SQL)
                .bind(wamid)
                .bind(org_id)
                .bind(text)
                .bind(Json(content))
                .bind(at)
                .bind(now)
                .fetch_optional(&mut **conn)
                .await)?;
            if let Some(r) = row {
                return Ok(Some(Touched {
                    message: r.into(),
                    changed: true,
                }));
            }
            match self.message_by_wamid(org_id, wamid).await? {
                Some(m)
                    if m.direction == Direction::Inbound
                        && m.revoked_at.is_none()
                        && m.edited_at.is_none_or(|e| e < at) => {}
                current => return Ok(current.map(Touched::unchanged)),
            }
        }
        Ok(self
            .message_by_wamid(org_id, wamid)
            .await?
            .map(Touched::unchanged))
    }

    /// The customer deleted their message `wamid` at `at`: `text` and `content` are
    /// cleared and `revoked_at` is set (once). Returns the message as it is now and whether
    /// this changed it.
    pub async fn revoke_inbound_message(
        &mut self,
        org_id: Uuid,
        wamid: &str,
        at: i64,
        now: i64,
    ) -> Result<Option<Touched>> {
        const SQL: &str = concat!(
            "UPDATE messages SET text = NULL, content = NULL, revoked_at = $3, \
             updated_at = CASE WHEN $4 > updated_at THEN $4 ELSE updated_at + 1 END \
             WHERE wamid = $1 AND org_id = $2 AND direction = 'inbound' AND revoked_at IS NULL \
             RETURNING ",
            message_columns!()
        );
        // Twice at most: the original may be stored between the update and the read.
        for _ in 0..2 {
            let row: Option<Row> = with_tx!(self, conn => sqlx::query_as(SQL)
                .bind(wamid)
                .bind(org_id)
                .bind(at)
                .bind(now)
                .fetch_optional(&mut **conn)
                .await)?;
            if let Some(r) = row {
                return Ok(Some(Touched {
                    message: r.into(),
                    changed: true,
                }));
            }
            match self.message_by_wamid(org_id, wamid).await? {
                Some(m) if m.direction == Direction::Inbound && m.revoked_at.is_none() => {}
                current => return Ok(current.map(Touched::unchanged)),
            }
        }
        Ok(self
            .message_by_wamid(org_id, wamid)
            .await?
            .map(Touched::unchanged))
    }

    async fn message_by_wamid(&mut self, org_id: Uuid, wamid: &str) -> Result<Option<Message>> {
        const SQL: &str = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE wamid = $1 AND org_id = $2"
        );
        let row: Option<Row> = with_tx!(self, conn => sqlx::query_as(SQL).bind(wamid).bind(org_id).fetch_optional(&mut **conn).await)?;
        Ok(row.map(Message::from))
    }

    /// [`Db::insert_message`] in this transaction, telling a new message from an original
    /// that filled in the row its edit or deletion created, and from a duplicate.
    pub async fn insert_message(&mut self, m: &Message) -> Result<Inserted> {
        const SQL: &str = concat!(
            "INSERT INTO messages (",
            message_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29)",
            inbound_conflict!()
        );
        let id = with_tx!(self, conn => sqlx::query_scalar::<_, Uuid>(SQL)
            .bind(m.id)
            .bind(m.org_id)
            .bind(m.conversation_id)
            .bind(m.contact_id)
            .bind(&m.phone_number_id)
            .bind(m.direction.as_str())
            .bind(&m.r#type)
            .bind(m.status.as_str())
            .bind(&m.template_name)
            .bind(&m.template_language)
            .bind(&m.text)
            .bind(m.media_id)
            .bind(&m.wamid)
            .bind(Json(&m.request))
            .bind(m.campaign_id)
            .bind(m.created_at)
            .bind(m.sent_at)
            .bind(m.delivered_at)
            .bind(m.read_at)
            .bind(m.failed_at)
            .bind(&m.failure_code)
            .bind(m.failure.as_ref().map(Json))
            .bind(m.updated_at)
            .bind(m.content.as_ref().map(Json))
            .bind(m.reply_to.as_ref().map(Json))
            .bind(m.referral.as_ref().map(Json))
            .bind(m.edited_at)
            .bind(m.revoked_at)
            .bind(m.pricing.as_ref().map(Json))
            .fetch_optional(&mut **conn)
            .await)?;
        Ok(match id {
            None => Inserted::Duplicate,
            Some(id) if id == m.id => Inserted::New,
            Some(_) => Inserted::FilledIn,
        })
    }

    /// Writes a status change if the message is still in `expected_status` (and still has
    /// the `expected_updated_at` it was read with). Returns `false` when someone else moved
    /// it first; the caller re-reads and decides again. A wamid is set only if none is
    /// stored yet.
    pub(crate) async fn update_message_status(
        &mut self,
        id: Uuid,
        expected_status: Status,
        expected_updated_at: i64,
        change: &StatusChange,
        at: i64,
    ) -> Result<bool> {
        // A message that moved past `sending` has left the dispatch queue, even when its
        // worker never recorded the send call's answer (the webhook settled it).
        const SQL: &str = "UPDATE messages SET status = $1, wamid = COALESCE(wamid, $2), sent_at = $3, \
             delivered_at = $4, read_at = $5, failed_at = $6, failure_code = $7, failure = $8, \
             updated_at = CASE WHEN $9 > updated_at THEN $9 ELSE updated_at + 1 END, \
             pricing = COALESCE($13, pricing), \
             dispatch_state = CASE WHEN $1 IN ('accepted', 'sending') THEN dispatch_state ELSE NULL END, \
             next_attempt_at = CASE WHEN $1 IN ('accepted', 'sending') THEN next_attempt_at ELSE NULL END, \
             locked_until = CASE WHEN $1 IN ('accepted', 'sending') THEN locked_until ELSE NULL END \
             WHERE id = $10 AND status = $11 AND updated_at = $12";
        let n = with_tx!(self, conn => sqlx::query(SQL)
            .bind(change.status.as_str())
            .bind(&change.wamid)
            .bind(change.sent_at)
            .bind(change.delivered_at)
            .bind(change.read_at)
            .bind(change.failed_at)
            .bind(&change.failure_code)
            .bind(change.failure.as_ref().map(Json))
            .bind(at)
            .bind(id)
            .bind(expected_status.as_str())
            .bind(expected_updated_at)
            .bind(change.pricing.as_ref().map(Json))
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }
}
