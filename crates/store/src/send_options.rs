//! The reads of a send in one statement: the organisation's numbers with the recipient's
//! contact and conversation on each ([`Db::send_options`]), and, batched across concurrent
//! requests, the caller's key with them ([`Db::send_lookups`]).

use uuid::Uuid;

use crate::api_keys::{AuthRecord, AuthRow, auth_select, data_org};
use crate::db::{Db, Pool, with_pool};
use crate::error::Result;
use crate::phone_numbers::PhoneNumber;
use tern_domain::contact::Consent;

/// One of the organisation's numbers with what the send path needs to know about the
/// recipient on it, read in one statement ([`Db::send_options`]).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct SendOption {
    #[sqlx(flatten)]
    pub number: PhoneNumber,
    /// The recipient's contact (`None`: no such contact in the organisation).
    pub contact_id: Option<Uuid>,
    pub contact_wa_id: Option<String>,
    /// The contact's business-scoped user id (a send without a phone goes to it).
    pub contact_user_id: Option<String>,
    /// `unknown` when there is no contact yet.
    #[sqlx(try_from = "String")]
    pub consent_status: Consent,
    /// When the organisation blocked the contact (`None`: not blocked, or no contact).
    pub contact_blocked_at: Option<i64>,
    /// The conversation between the contact and this number, if any.
    pub conversation_id: Option<Uuid>,
    /// The network's timestamp of the customer's latest message on this number.
    pub last_inbound_at: Option<i64>,
}

/// Who a message is addressed to, as [`Db::send_options`] looks it up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ContactRef<'a> {
    Id(Uuid),
    WaId(&'a str),
    UserId(&'a str),
}

/// One lookup of [`Db::send_lookups`]: the caller's key and the recipient of the send.
#[derive(Debug, Clone, PartialEq)]
pub struct SendLookup {
    /// SHA-256 of the API key.
    pub hash: Vec<u8>,
    pub contact_id: Option<Uuid>,
    pub wa_id: Option<String>,
    pub user_id: Option<String>,
}

impl SendLookup {
    /// `contact: None` reads the key only (a body that names no recipient).
    pub fn new(hash: &[u8], contact: Option<ContactRef<'_>>) -> Self {
        let mut q = SendLookup {
            hash: hash.to_vec(),
            contact_id: None,
            wa_id: None,
            user_id: None,
        };
        match contact {
            Some(ContactRef::Id(id)) => q.contact_id = Some(id),
            Some(ContactRef::WaId(w)) => q.wa_id = Some(w.to_string()),
            Some(ContactRef::UserId(u)) => q.user_id = Some(u.to_string()),
            None => {}
        }
        q
    }

    fn contact(&self) -> Option<ContactRef<'_>> {
        match (&self.contact_id, &self.wa_id, &self.user_id) {
            (Some(id), _, _) => Some(ContactRef::Id(*id)),
            (None, Some(w), _) => Some(ContactRef::WaId(w)),
            (None, None, Some(u)) => Some(ContactRef::UserId(u)),
            (None, None, None) => None,
        }
    }
}

/// The answer to a [`SendLookup`] whose key exists.
#[derive(Debug, Clone, PartialEq)]
pub struct SendContext {
    /// As [`Db::find_auth_by_hash`] (revoked keys included: the caller decides).
    pub auth: AuthRecord,
    /// As [`Db::send_options`] for the key's organisation (empty without a recipient).
    pub options: Vec<SendOption>,
}

/// A row of [`Db::send_lookups`]: the key (repeated) and one number, if any.
#[derive(sqlx::FromRow)]
struct SendLookupRow {
    i: i64,
    #[sqlx(flatten)]
    auth: AuthRow,
    p_id: Option<String>,
    p_display_phone_number: Option<String>,
    p_waba_id: Option<String>,
    p_access_token_enc: Option<Vec<u8>>,
    p_status: Option<String>,
    p_throughput_mps: Option<i64>,
    p_created_at: Option<i64>,
    p_updated_at: Option<i64>,
    p_mode: Option<String>,
    contact_id: Option<Uuid>,
    contact_wa_id: Option<String>,
    contact_user_id: Option<String>,
    consent_status: Option<String>,
    contact_blocked_at: Option<i64>,
    conversation_id: Option<Uuid>,
    last_inbound_at: Option<i64>,
}

impl SendLookupRow {
    fn option(&mut self) -> Option<SendOption> {
        Some(SendOption {
            number: PhoneNumber {
                id: self.p_id.take()?,
                org_id: self.auth.data_org_id()?,
                display_phone_number: self.p_display_phone_number.take()?,
                waba_id: self.p_waba_id.take()?,
                access_token_enc: self.p_access_token_enc.take()?,
                status: self.p_status.as_deref()?.parse().ok()?,
                throughput_mps: self.p_throughput_mps?,
                created_at: self.p_created_at?,
                updated_at: self.p_updated_at?,
                mode: self
                    .p_mode
                    .as_deref()
                    .and_then(tern_domain::auth::Mode::parse)?,
            },
            contact_id: self.contact_id,
            contact_wa_id: self.contact_wa_id.take(),
            contact_user_id: self.contact_user_id.take(),
            consent_status: self
                .consent_status
                .as_deref()
                .and_then(Consent::parse)
                .unwrap_or(Consent::Unknown),
            contact_blocked_at: self.contact_blocked_at,
            conversation_id: self.conversation_id,
            last_inbound_at: self.last_inbound_at,
        })
    }
}

/// The columns of a [`SendLookupRow`] after `i` and before the key's.
macro_rules! send_lookup_columns {
    () => {
        "p.id AS p_id, p.display_phone_number AS p_display_phone_number, \
         p.waba_id AS p_waba_id, p.access_token_enc AS p_access_token_enc, \
         p.status AS p_status, p.throughput_mps AS p_throughput_mps, \
         p.created_at AS p_created_at, p.updated_at AS p_updated_at, \
         p.mode AS p_mode, \
         c.id AS contact_id, c.wa_id AS contact_wa_id, \
         c.user_id AS contact_user_id, c.consent_status, \
         c.blocked_at AS contact_blocked_at, v.id AS conversation_id, v.last_inbound_at, "
    };
}

/// Adds a row of [`Db::send_lookups`] to the answer of its lookup `q`: the key (the first
/// row) and the number on it, if any. A lookup without a recipient reads the key only.
fn absorb(slot: &mut Option<SendContext>, q: &SendLookup, mut row: SendLookupRow) {
    let option = q.contact().and_then(|_| row.option());
    let ctx = slot.get_or_insert_with(|| SendContext {
        auth: AuthRecord::from(row.auth),
        options: Vec::new(),
    });
    ctx.options.extend(option);
}

/// The statement of [`Db::send_options`]; `$contact` picks the contact (`$2`).
macro_rules! send_options_sql {
    ($contact:literal) => {
        concat!(
            "SELECT p.id, p.org_id, p.display_phone_number, p.waba_id, p.access_token_enc, \
             p.status, p.throughput_mps, p.created_at, p.updated_at, p.mode, \
             c.id AS contact_id, c.wa_id AS contact_wa_id, c.user_id AS contact_user_id, \
             COALESCE(c.consent_status, 'unknown') AS consent_status, \
             c.blocked_at AS contact_blocked_at, v.id AS conversation_id, v.last_inbound_at \
             FROM phone_numbers p \
             LEFT JOIN contacts c ON c.org_id = p.org_id AND ",
            $contact,
            " LEFT JOIN conversations v ON v.contact_id = c.id AND v.phone_number_id = p.id \
             WHERE p.org_id = $1 ORDER BY p.id LIMIT 100"
        )
    };
}

impl Db {
    /// Every number of the organisation (ordered by id, at most 100, as
    /// [`Db::list_phone_numbers`]), each with the recipient's contact and their
    /// conversation on that number: the reads of a send in one statement.
    pub async fn send_options(
        &self,
        org_id: Uuid,
        contact: ContactRef<'_>,
    ) -> Result<Vec<SendOption>> {
        let rows = match contact {
            ContactRef::Id(id) => with_pool!(self, pool => sqlx::query_as::<_, SendOption>(
                    send_options_sql!("c.id = $2"))
                .bind(org_id)
                .bind(id)
                .fetch_all(pool)
                .await)?,
            ContactRef::WaId(wa_id) => with_pool!(self, pool => sqlx::query_as::<_, SendOption>(
                    send_options_sql!("c.wa_id = $2"))
                .bind(org_id)
                .bind(wa_id)
                .fetch_all(pool)
                .await)?,
            ContactRef::UserId(user_id) => {
                with_pool!(self, pool => sqlx::query_as::<_, SendOption>(
                    send_options_sql!("c.user_id = $2"))
                .bind(org_id)
                .bind(user_id)
                .fetch_all(pool)
                .await)?
            }
        };
        Ok(rows)
    }

    /// The key lookup and the reads of a send, for several sends at once: per lookup, the
    /// key as [`Db::find_auth_by_hash`] and the key's organisation's [`Db::send_options`]
    /// (`None`: no such key). Answers in the lookups' order. PostgreSQL: one statement for
    /// all; SQLite: one statement per lookup, on one connection.
    pub async fn send_lookups(&self, qs: &[SendLookup]) -> Result<Vec<Option<SendContext>>> {
        let mut out: Vec<Option<SendContext>> = qs.iter().map(|_| None).collect();
        match &self.pool {
            Pool::Sqlite(pool) => {
                // One statement per lookup: each statement is a round trip to the
                // connection's thread, and on a busy machine the wake-ups of those round
                // trips, not the reads, were the cost (docs/performance.md, issue 33).
                let mut conn = pool.acquire().await?;
                for (slot, q) in out.iter_mut().zip(qs) {
                    let rows = sqlx::query_as::<_, SendLookupRow>(concat!(
                        auth_select!("1 AS i, ", send_lookup_columns!()),
                        " LEFT JOIN phone_numbers p ON p.org_id = ",
                        data_org!(),
                        " LEFT JOIN contacts c ON c.org_id = ",
                        data_org!(),
                        " AND c.id = COALESCE($2, \
                           (SELECT x.id FROM contacts x WHERE x.org_id = ",
                        data_org!(),
                        " AND x.wa_id = $3), \
                           (SELECT x.id FROM contacts x WHERE x.org_id = ",
                        data_org!(),
                        " AND x.user_id = $4)) \
                         LEFT JOIN conversations v ON v.contact_id = c.id AND v.phone_number_id = p.id \
                         WHERE k.key_hash = $1 ORDER BY p.id LIMIT 100"
                    ))
                    .bind(&q.hash)
                    .bind(q.contact_id)
                    .bind(q.wa_id.as_deref())
                    .bind(q.user_id.as_deref())
                    .fetch_all(&mut *conn)
                    .await?;
                    for row in rows {
                        absorb(slot, q, row);
                    }
                }
            }
            Pool::Postgres(pool) => {
                // The contact by id, else by wa_id, else by user_id (COALESCE runs a
                // lookup only when the earlier ones gave nothing); the organisation's numbers as in send_options, or
                // one row of NULLs when it has none, so the key is answered anyway.
                let rows = sqlx::query_as::<_, SendLookupRow>(concat!(
                    auth_select!("h.i AS i, ", send_lookup_columns!()),
                    " JOIN UNNEST($1::bytea[], $2::uuid[], $3::text[], $4::text[]) WITH ORDINALITY \
                       AS h(hash, contact_id, wa_id, user_id, i) ON k.key_hash = h.hash \
                     LEFT JOIN LATERAL (SELECT * FROM phone_numbers n WHERE n.org_id = ",
                    data_org!(),
                    " \
                       ORDER BY n.id LIMIT 100) p ON true \
                     LEFT JOIN contacts c ON c.org_id = ",
                    data_org!(),
                    " AND c.id = COALESCE(h.contact_id, \
                       (SELECT x.id FROM contacts x WHERE x.org_id = ",
                    data_org!(),
                    " AND x.wa_id = h.wa_id), \
                       (SELECT x.id FROM contacts x WHERE x.org_id = ",
                    data_org!(),
                    " AND x.user_id = h.user_id)) \
                     LEFT JOIN conversations v ON v.contact_id = c.id AND v.phone_number_id = p.id \
                     ORDER BY h.i, p.id"
                ))
                .bind(qs.iter().map(|q| q.hash.as_slice()).collect::<Vec<_>>())
                .bind(qs.iter().map(|q| q.contact_id).collect::<Vec<_>>())
                .bind(qs.iter().map(|q| q.wa_id.as_deref()).collect::<Vec<_>>())
                .bind(qs.iter().map(|q| q.user_id.as_deref()).collect::<Vec<_>>())
                .fetch_all(pool)
                .await?;
                for row in rows {
                    let Some(i) = usize::try_from(row.i - 1).ok().filter(|&i| i < qs.len()) else {
                        continue;
                    };
                    absorb(&mut out[i], &qs[i], row);
                }
            }
        }
        Ok(out)
    }
}
