//! The writes of many customers' plain inbound messages at once (the inbox applies the
//! messages of the webhook batches it claimed together): each statement here does for a
//! list what its one-row counterpart does for one, with the same rules, so that a batch
//! costs a handful of round trips instead of about ten per message.

use std::collections::{BTreeMap, HashMap};

use sqlx::types::Json;
use tern_domain::message::Direction;
use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::Result;
use crate::media::NewInboundMedia;
use crate::messages::{Inserted, Message, Row, Touched, message_columns};
use crate::sql::ROWS_PER_STATEMENT;

/// `message_columns!` of the updated table in an `UPDATE … FROM` (its `RETURNING`).
macro_rules! returning {
    () => {
        "messages.id, messages.org_id, messages.conversation_id, messages.contact_id, \
         messages.phone_number_id, messages.direction, messages.type, messages.status, \
         messages.template_name, messages.template_language, messages.text, messages.media_id, \
         messages.wamid, messages.request, messages.campaign_id, messages.created_at, \
         messages.sent_at, messages.delivered_at, messages.read_at, messages.failed_at, \
         messages.failure_code, messages.failure, messages.updated_at, messages.content, \
         messages.reply_to, messages.referral, messages.edited_at, messages.revoked_at, \
         messages.pricing"
    };
}

/// Inbound messages per insert statement: 29 binds a row, well under SQLite's 32,766.
const MESSAGES_PER_STATEMENT: usize = 500;

impl Db {
    /// [`Db::get_or_create_conversation`] then [`Db::touch_conversation_inbound`] for each
    /// contact of `latest` (contact id → (id of a conversation to create, the network's time
    /// of the customer's latest message)) on the organisation's number `phone_number_id`, in
    /// one statement: created if absent, `last_inbound_at` and `last_message_at = at` only
    /// move forward. Returns contact id → conversation id; a contact that is not (or no
    /// longer) the organisation's is absent. Rows are locked in contact order, so two such
    /// statements cannot deadlock each other.
    pub async fn touch_inbound_conversations(
        &self,
        org_id: Uuid,
        phone_number_id: &str,
        latest: &BTreeMap<Uuid, (Uuid, i64)>,
        at: i64,
    ) -> Result<HashMap<Uuid, Uuid>> {
        let mut out = HashMap::with_capacity(latest.len());
        let entries: Vec<(&Uuid, &(Uuid, i64))> = latest.iter().collect();
        for chunk in entries.chunks(ROWS_PER_STATEMENT) {
            let rows: Vec<(Uuid, Uuid)> = with_pool!(self, pool => {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO conversations (id, org_id, contact_id, phone_number_id, \
                     created_at, last_inbound_at, last_message_at) \
                     SELECT v.column2, c.org_id, c.id, p.id, v.column4, v.column3, v.column4 FROM (");
                q.push_values(chunk, |mut row, (contact, (id, ts))| {
                    row.push_bind(**contact).push_bind(*id).push_bind(*ts).push_bind(at);
                });
                q.push(") AS v JOIN contacts c ON c.id = v.column1 JOIN phone_numbers p ON p.id = ");
                q.push_bind(phone_number_id);
                q.push(" WHERE c.org_id = ");
                q.push_bind(org_id);
                q.push(" AND p.org_id = ");
                q.push_bind(org_id);
                q.push(
                    " ORDER BY c.id ON CONFLICT (contact_id, phone_number_id) DO UPDATE SET \
                     last_inbound_at = CASE WHEN conversations.last_inbound_at IS NULL \
                       OR conversations.last_inbound_at < excluded.last_inbound_at \
                       THEN excluded.last_inbound_at ELSE conversations.last_inbound_at END, \
                     last_message_at = CASE WHEN conversations.last_message_at IS NULL \
                       OR conversations.last_message_at < excluded.last_message_at \
                       THEN excluded.last_message_at ELSE conversations.last_message_at END \
                     RETURNING contact_id, id",
                );
                q.build_query_as::<(Uuid, Uuid)>().persistent(false).fetch_all(pool).await
            })?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// The ids of the organisation's messages with these wamids (one read for a batch's
    /// reactions and replies; a wamid Tern does not hold is absent).
    pub async fn message_ids_by_wamids(
        &self,
        org_id: Uuid,
        wamids: &[&str],
    ) -> Result<HashMap<String, Uuid>> {
        let mut out = HashMap::with_capacity(wamids.len());
        for chunk in wamids.chunks(ROWS_PER_STATEMENT) {
            let rows: Vec<(String, Uuid)> = with_pool!(self, pool => {
                let mut q = sqlx::QueryBuilder::new(
                    "SELECT wamid, id FROM messages WHERE org_id = ");
                q.push_bind(org_id);
                q.push(" AND wamid IN (");
                let mut list = q.separated(", ");
                for w in chunk {
                    list.push_bind(*w);
                }
                q.push(")");
                q.build_query_as::<(String, Uuid)>().persistent(false).fetch_all(pool).await
            })?;
            out.extend(rows);
        }
        Ok(out)
    }

    /// [`Db::enqueue_inbound_media`] of many files (each written once, keyed by its wamid).
    pub async fn enqueue_inbound_media_many(
        &self,
        jobs: &[NewInboundMedia],
        now: i64,
    ) -> Result<()> {
        for chunk in jobs.chunks(ROWS_PER_STATEMENT / 8) {
            with_pool!(self, pool => {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO inbound_media (org_id, wamid, phone_number_id, network_media_id, \
                     mime_type, sha256, filename, created_at, next_attempt_at) ");
                q.push_values(chunk, |mut row, job| {
                    row.push_bind(job.org_id)
                        .push_bind(&job.wamid)
                        .push_bind(&job.phone_number_id)
                        .push_bind(&job.network_media_id)
                        .push_bind(&job.mime_type)
                        .push_bind(&job.sha256)
                        .push_bind(&job.filename)
                        .push_bind(now)
                        .push_bind(now);
                });
                q.push(" ON CONFLICT (org_id, wamid) DO NOTHING");
                q.build().persistent(false).execute(pool).await.map(drop)
            })?;
        }
        Ok(())
    }
}

impl Tx {
    /// [`Tx::insert_message`] of many inbound messages (their wamids set and distinct), in
    /// as few statements: what each did, at its index.
    pub async fn insert_inbound_messages(&mut self, rows: &[Message]) -> Result<Vec<Inserted>> {
        let mut ids: HashMap<String, Uuid> = HashMap::with_capacity(rows.len());
        for chunk in rows.chunks(MESSAGES_PER_STATEMENT) {
            let returned: Vec<(Uuid, String)> = with_tx!(self, conn => {
                let mut q = sqlx::QueryBuilder::new(concat!(
                    "INSERT INTO messages (", message_columns!(), ") "));
                q.push_values(chunk, |mut b, m| {
                    b.push_bind(m.id)
                        .push_bind(m.org_id)
                        .push_bind(m.conversation_id)
                        .push_bind(m.contact_id)
                        .push_bind(&m.phone_number_id)
                        .push_bind(m.direction.as_str())
                        .push_bind(&m.r#type)
                        .push_bind(m.status.as_str())
                        .push_bind(&m.template_name)
                        .push_bind(&m.template_language)
                        .push_bind(&m.text)
                        .push_bind(m.media_id)
                        .push_bind(&m.wamid)
                        .push_bind(Json(&m.request))
                        .push_bind(m.campaign_id)
                        .push_bind(m.created_at)
                        .push_bind(m.sent_at)
                        .push_bind(m.delivered_at)
                        .push_bind(m.read_at)
                        .push_bind(m.failed_at)
                        .push_bind(&m.failure_code)
                        .push_bind(m.failure.as_ref().map(Json))
                        .push_bind(m.updated_at)
                        .push_bind(m.content.as_ref().map(Json))
                        .push_bind(m.reply_to.as_ref().map(Json))
                        .push_bind(m.referral.as_ref().map(Json))
                        .push_bind(m.edited_at)
                        .push_bind(m.revoked_at)
                        .push_bind(m.pricing.as_ref().map(Json));
                });
                // The conflict rule of `Tx::insert_message`.
                q.push(crate::messages::INBOUND_CONFLICT);
                q.push(", wamid");
                q.build_query_as::<(Uuid, String)>().persistent(false).fetch_all(&mut **conn).await
            })?;
            ids.extend(returned.into_iter().map(|(id, wamid)| (wamid, id)));
        }
        Ok(rows
            .iter()
            .map(|m| match m.wamid.as_ref().and_then(|w| ids.get(w)) {
                None => Inserted::Duplicate,
                Some(id) if *id == m.id => Inserted::New,
                Some(_) => Inserted::FilledIn,
            })
            .collect())
    }
}

/// A customer's edit or deletion of their message `wamid` at `at` (the network's time), for
/// [`Tx::change_inbound_messages`].
#[derive(Debug, Clone, Copy)]
pub enum InboundChange<'a> {
    Edit {
        wamid: &'a str,
        text: Option<&'a str>,
        content: &'a serde_json::Value,
        at: i64,
    },
    Revoke {
        wamid: &'a str,
        at: i64,
    },
}

impl InboundChange<'_> {
    fn wamid(&self) -> &str {
        match self {
            InboundChange::Edit { wamid, .. } | InboundChange::Revoke { wamid, .. } => wamid,
        }
    }
}

impl Tx {
    /// [`Tx::edit_inbound_message`] and [`Tx::revoke_inbound_message`] of many messages
    /// (their wamids distinct), the edits in one statement and the deletions in another, with
    /// the same rules. What each did at its index: `Some` as it is now (changed or not),
    /// `None` when Tern does not hold it — or when it was stored meanwhile and would change:
    /// the caller applies that one alone.
    pub async fn change_inbound_messages(
        &mut self,
        org_id: Uuid,
        changes: &[InboundChange<'_>],
        now: i64,
    ) -> Result<Vec<Option<Touched>>> {
        let mut changed: HashMap<String, Message> = HashMap::new();
        let edits: Vec<_> = changes
            .iter()
            .filter_map(|c| match c {
                InboundChange::Edit {
                    wamid,
                    text,
                    content,
                    at,
                } => Some((*wamid, *text, *content, *at)),
                InboundChange::Revoke { .. } => None,
            })
            .collect();
        let revokes: Vec<_> = changes
            .iter()
            .filter_map(|c| match c {
                InboundChange::Revoke { wamid, at } => Some((*wamid, *at)),
                InboundChange::Edit { .. } => None,
            })
            .collect();
        for chunk in edits.chunks(ROWS_PER_STATEMENT / 4) {
            let rows: Vec<Row> = with_tx!(self, conn => {
                let mut q = sqlx::QueryBuilder::new(
                    "UPDATE messages SET text = v.column2, content = v.column3, \
                     edited_at = v.column4, updated_at = CASE WHEN v.column5 > messages.updated_at \
                     THEN v.column5 ELSE messages.updated_at + 1 END FROM (");
                q.push_values(chunk, |mut b, (wamid, text, content, at)| {
                    b.push_bind(*wamid).push_bind(*text).push_bind(Json(*content)).push_bind(*at).push_bind(now);
                });
                q.push(") AS v WHERE messages.wamid = v.column1 AND messages.org_id = ");
                q.push_bind(org_id);
                q.push(concat!(
                    " AND messages.direction = 'inbound' AND messages.revoked_at IS NULL \
                     AND (messages.edited_at IS NULL OR messages.edited_at < v.column4) RETURNING ",
                    returning!()));
                q.build_query_as::<Row>().persistent(false).fetch_all(&mut **conn).await
            })?;
            changed.extend(rows.into_iter().map(|r| {
                let m = Message::from(r);
                (m.wamid.clone().unwrap_or_default(), m)
            }));
        }
        for chunk in revokes.chunks(ROWS_PER_STATEMENT / 4) {
            let rows: Vec<Row> = with_tx!(self, conn => {
                let mut q = sqlx::QueryBuilder::new(
                    "UPDATE messages SET text = NULL, content = NULL, revoked_at = v.column2, \
                     updated_at = CASE WHEN v.column3 > messages.updated_at \
                     THEN v.column3 ELSE messages.updated_at + 1 END FROM (");
                q.push_values(chunk, |mut b, (wamid, at)| {
                    b.push_bind(*wamid).push_bind(*at).push_bind(now);
                });
                q.push(") AS v WHERE messages.wamid = v.column1 AND messages.org_id = ");
                q.push_bind(org_id);
                q.push(concat!(
                    " AND messages.direction = 'inbound' AND messages.revoked_at IS NULL RETURNING ",
                    returning!()));
                q.build_query_as::<Row>().persistent(false).fetch_all(&mut **conn).await
            })?;
            changed.extend(rows.into_iter().map(|r| {
                let m = Message::from(r);
                (m.wamid.clone().unwrap_or_default(), m)
            }));
        }
        // The others as they are now: unchanged, or not held.
        let rest: Vec<&str> = changes
            .iter()
            .map(InboundChange::wamid)
            .filter(|w| !changed.contains_key(*w))
            .collect();
        let mut current: HashMap<String, Message> = HashMap::new();
        for chunk in rest.chunks(ROWS_PER_STATEMENT) {
            let rows: Vec<Row> = with_tx!(self, conn => {
                let mut q = sqlx::QueryBuilder::new(concat!(
                    "SELECT ", message_columns!(), " FROM messages WHERE org_id = "));
                q.push_bind(org_id);
                q.push(" AND wamid IN (");
                let mut list = q.separated(", ");
                for w in chunk {
                    list.push_bind(*w);
                }
                q.push(")");
                q.build_query_as::<Row>().persistent(false).fetch_all(&mut **conn).await
            })?;
            current.extend(rows.into_iter().map(|r| {
                let m = Message::from(r);
                (m.wamid.clone().unwrap_or_default(), m)
            }));
        }
        Ok(changes
            .iter()
            .map(|c| {
                if let Some(m) = changed.remove(c.wamid()) {
                    return Some(Touched {
                        message: m,
                        changed: true,
                    });
                }
                let m = current.remove(c.wamid())?;
                // Stored meanwhile and would change: left to the one-row path.
                let would_change = m.direction == Direction::Inbound
                    && m.revoked_at.is_none()
                    && match c {
                        InboundChange::Edit { at, .. } => m.edited_at.is_none_or(|e| e < *at),
                        InboundChange::Revoke { .. } => true,
                    };
                (!would_change).then_some(Touched {
                    message: m,
                    changed: false,
                })
            })
            .collect())
    }
}
