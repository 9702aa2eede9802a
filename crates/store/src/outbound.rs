//! Accepting an outbound message: the idempotency key, the billing effects and the queued
//! message are written in one transaction, so a message exists exactly when its key is bound
//! (and its debit and usage were recorded), whatever crashes or races happen.

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::types::Json;
use sqlx::{PgConnection, SqliteConnection};
use uuid::Uuid;

use crate::db::{Backend, BeginWrite as _, Db, with_pool};
use crate::error::{Result, StoreError};
use crate::messages::Message;
use crate::sql::lock_for_write;
use crate::usage::{UsageAdd, UsageGrant, add_usage_on, give_back_on};

/// A bound idempotency key.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct IdempotencyRecord {
    pub key: String,
    /// SHA-256 of the canonical request body.
    pub fingerprint: Vec<u8>,
    pub message_id: Option<Uuid>,
    pub created_at: i64,
    pub expires_at: i64,
}

/// Billing effects of accepting a message, checked and applied inside the transaction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Charges {
    /// Debit the wallet by this amount (a template message); refused when the balance is
    /// lower.
    pub debit_minor: Option<i64>,
    /// Count one `messages_sent` in the period starting at `.0`; refused when `.1` (the
    /// allowance) is already used.
    pub messages_sent: Option<(i64, i64)>,
}

/// What [`Db::accept_message`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Acceptance {
    /// The key was free: the message is stored and queued.
    Accepted,
    /// The key is bound (another request won the race): nothing was written.
    KeyTaken(IdempotencyRecord),
    /// The wallet cannot cover `debit_minor`: nothing was written.
    WalletLow { balance_minor: i64 },
    /// The `messages_sent` allowance is used up: nothing was written.
    AllowanceUsed { used: i64 },
    /// The recipient is new and the organisation's contacts reach the plan's limit
    /// (`used` of them): nothing was written.
    ContactLimit { used: i64 },
}

/// The identifier of a recipient that a send creates a contact for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewContact {
    /// Phone digits without `+`.
    WaId(String),
    /// Business-scoped user id.
    UserId(String),
}

impl NewContact {
    fn value(&self) -> &str {
        match self {
            NewContact::WaId(v) | NewContact::UserId(v) => v,
        }
    }

    /// The statement for this identifier's column: `wa_id`'s or `user_id`'s.
    fn pick(&self, wa_id: &'static str, user_id: &'static str) -> &'static str {
        match self {
            NewContact::WaId(_) => wa_id,
            NewContact::UserId(_) => user_id,
        }
    }
}

/// One message to accept with [`Db::accept_messages`].
#[derive(Debug, Clone, PartialEq)]
pub struct Accept {
    /// The message (status `accepted`); `contact_id` / `conversation_id` are the existing
    /// rows' ids, or the ids to create them with (see below).
    pub message: Message,
    pub key: String,
    /// SHA-256 of the canonical request body.
    pub fingerprint: Vec<u8>,
    pub key_expires_at: i64,
    pub charges: Charges,
    /// Create the contact with this identifier (id `message.contact_id`) if it does not
    /// exist.
    pub new_contact: Option<NewContact>,
    /// The plan's contact limit, for a `new_contact`: refused with
    /// [`Acceptance::ContactLimit`] when the organisation's contacts already reach it
    /// (counted under the organisation's row lock, so concurrent sends to new recipients
    /// cannot pass it together).
    pub contact_limit: Option<i64>,
    /// Create the conversation (id `message.conversation_id`) if it does not exist.
    pub new_conversation: bool,
    /// The API key that sent it and the request's id (the `accepted` timeline entry), stored
    /// on the message with `key`; `None` for a campaign's messages.
    pub api_key_id: Option<Uuid>,
    pub request_id: Option<String>,
}

impl Accept {
    /// Nothing to check or create besides the key, the message and a `messages_sent` count.
    fn is_plain(&self) -> bool {
        self.charges.debit_minor.is_none_or(|a| a <= 0)
            && self.new_contact.is_none()
            && !self.new_conversation
    }

    /// The counter this item counts one `messages_sent` in: (organisation, period start).
    fn counter(&self) -> Option<(Uuid, i64)> {
        self.charges
            .messages_sent
            .map(|(start, _)| (self.message.org_id, start))
    }
}

/// The `messages_sent` units of a round: taken for all its counted items at once (one
/// statement per counter, up to the largest allowance among them), handed out in the
/// round's order so each item gets what it would alone, the rest given back.
#[derive(Default, Clone)]
struct Units {
    counters: BTreeMap<(Uuid, i64), Counted>,
}

#[derive(Debug, Clone, Copy)]
struct Counted {
    /// The counter before this round's take.
    before: i64,
    granted: i64,
    handed: i64,
}

impl Units {
    /// The adds for `items`: one per counter, as many units as items counting in it.
    fn wanted<'a>(items: impl Iterator<Item = &'a Accept>) -> Vec<UsageAdd> {
        let mut want: BTreeMap<(Uuid, i64), (i64, i64)> = BTreeMap::new();
        for it in items {
            if let (Some(c), Some((_, allowance))) = (it.counter(), it.charges.messages_sent) {
                let e = want.entry(c).or_insert((0, allowance));
                e.0 += 1;
                e.1 = e.1.max(allowance);
            }
        }
        want.into_iter()
            .map(|((org_id, period_start), (units, allowance))| UsageAdd {
                org_id,
                meter: MESSAGES_SENT,
                period_start,
                units,
                allowance: Some(allowance),
            })
            .collect()
    }

    fn granted(adds: &[UsageAdd], grants: &[UsageGrant]) -> Units {
        Units {
            counters: adds
                .iter()
                .zip(grants)
                .map(|(a, g)| {
                    let c = Counted {
                        before: g.count - g.granted,
                        granted: g.granted,
                        handed: 0,
                    };
                    ((a.org_id, a.period_start), c)
                })
                .collect(),
        }
    }

    /// One unit for `it`, or `Err(allowance)` when its own allowance has none left.
    fn take(&mut self, it: &Accept) -> std::result::Result<(), i64> {
        let (Some(c), Some((_, allowance))) = (it.counter(), it.charges.messages_sent) else {
            return Ok(());
        };
        match self.counters.get_mut(&c) {
            Some(u) if u.handed < u.granted && u.before + u.handed < allowance => {
                u.handed += 1;
                Ok(())
            }
            _ => Err(allowance),
        }
    }

    /// Returns `it`'s unit (refused after taking it).
    fn put_back(&mut self, it: &Accept) {
        if let Some(u) = it.counter().and_then(|c| self.counters.get_mut(&c)) {
            u.handed -= 1;
        }
    }

    /// Units taken but not handed out, per counter.
    fn unused(&self) -> impl Iterator<Item = ((Uuid, i64), i64)> + '_ {
        self.counters
            .iter()
            .map(|(k, u)| (*k, u.granted - u.handed))
            .filter(|(_, n)| *n > 0)
    }
}

const MESSAGES_SENT: &str = "messages_sent";

/// Unbinds a key bound earlier in the acceptance transaction.
macro_rules! release_key {
    ($tx:ident, $org:expr, $key:expr) => {
        sqlx::query("DELETE FROM idempotency_keys WHERE org_id = $1 AND key = $2")
            .bind($org)
            .bind($key)
            .execute(&mut *$tx)
            .await?
    };
}

impl Db {
    /// The organisation's idempotency key if it is bound and not expired at `now`.
    pub async fn get_idempotency_key(
        &self,
        org_id: Uuid,
        key: &str,
        now: i64,
    ) -> Result<Option<IdempotencyRecord>> {
        let rec = with_pool!(self, pool => sqlx::query_as::<_, IdempotencyRecord>(
                "SELECT key, fingerprint, message_id, created_at, expires_at FROM idempotency_keys \
                 WHERE org_id = $1 AND key = $2 AND expires_at > $3 AND state = 'completed'")
            .bind(org_id)
            .bind(key)
            .bind(now)
            .fetch_optional(pool)
            .await)?;
        Ok(rec)
    }

    /// Stores an outbound message `m` (status `accepted`, queued for dispatch now) bound to
    /// the idempotency `key` until `key_expires_at`, applies `charges`, and records the
    /// message in its conversation — all or nothing. One-item form of
    /// [`Db::accept_messages`]; the contact and conversation must exist.
    pub async fn accept_message(
        &self,
        m: &Message,
        key: &str,
        fingerprint: &[u8],
        key_expires_at: i64,
        charges: &Charges,
    ) -> Result<Acceptance> {
        let mut items = [Accept {
            message: m.clone(),
            key: key.to_string(),
            fingerprint: fingerprint.to_vec(),
            key_expires_at,
            charges: charges.clone(),
            new_contact: None,
            contact_limit: None,
            new_conversation: false,
            api_key_id: None,
            request_id: None,
        }];
        self.accept_messages(&mut items)
            .await
            .pop()
            .unwrap_or(Err(StoreError::NotFound))
    }

    /// Accepts several outbound messages in as few transactions as possible (group commit):
    /// each item's outcome is exactly what [`Db::accept_message`] would give it alone, run
    /// in the slice's order. Per item: the key is bound (or [`Acceptance::KeyTaken`]), its
    /// charges apply (or it is refused and nothing of it stays), the contact and the
    /// conversation are created when asked (ids written back into `message` when a
    /// concurrent request created them first), the message is stored queued for dispatch,
    /// and the conversation's `last_message_at` moves forward.
    ///
    /// Items sharing an (organisation, key) run in later rounds, so the second sees the
    /// first one's key. If a batch transaction fails (a deadlock between processes, a bad
    /// row), its items are retried one transaction each, so one item's error is its own.
    pub async fn accept_messages(&self, items: &mut [Accept]) -> Vec<Result<Acceptance>> {
        let mut out: Vec<Option<Result<Acceptance>>> = items.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..items.len()).collect();
        while !pending.is_empty() {
            let mut seen = HashSet::new();
            let (round, later): (Vec<usize>, Vec<usize>) = pending
                .into_iter()
                .partition(|&i| seen.insert((items[i].message.org_id, items[i].key.clone())));
            match self.accept_round(items, &round).await {
                Ok(results) => {
                    for (i, r) in round.iter().zip(results) {
                        out[*i] = Some(Ok(r));
                    }
                }
                Err(e) if round.len() == 1 => out[round[0]] = Some(Err(e)),
                Err(e) => {
                    tracing::debug!(error = %e, items = round.len(), "batch acceptance failed; one by one");
                    for i in round {
                        out[i] = Some(
                            self.accept_round(items, &[i])
                                .await
                                .map(|mut r| r.remove(0)),
                        );
                    }
                }
            }
            pending = later;
        }
        // Committed: the dispatcher of this process starts on them at once.
        if out
            .iter()
            .any(|r| matches!(r, Some(Ok(Acceptance::Accepted))))
        {
            self.wakeups.dispatch.notify_one();
        }
        out.into_iter()
            .map(|r| r.unwrap_or(Err(StoreError::NotFound)))
            .collect()
    }

    /// One round over `items[idx]` (distinct keys); outcomes in `idx` order. On PostgreSQL
    /// a round of plain items (no debit, no new contact or conversation) is one statement
    /// that also counts their `messages_sent` ([`AcceptBatch::accept_plain`]); any other
    /// round, or one that would pass an allowance, is a transaction.
    async fn accept_round(&self, items: &mut [Accept], idx: &[usize]) -> Result<Vec<Acceptance>> {
        // SQLite has no single statement for it (and its transactions cost no round trips).
        if self.backend() == Backend::Sqlite || !idx.iter().all(|&i| items[i].is_plain()) {
            return self.accept_in_tx(items, idx).await;
        }
        let bound = with_pool!(self, pool => {
            let mut conn = pool.acquire().await?;
            let batch: Vec<&Accept> = idx.iter().map(|&i| &items[i]).collect();
            AcceptBatch::accept_plain(&mut *conn, &batch).await?
        });
        let Some(bound) = bound else {
            return self.accept_in_tx(items, idx).await;
        };
        let mut outcome = Vec::with_capacity(idx.len());
        // A key the statement found taken whose record is gone by now expired in between:
        // it is free again, so the item gets a round of its own.
        let mut again = Vec::new();
        for (slot, &i) in idx.iter().enumerate() {
            let it = &items[i];
            if bound.contains(&(it.message.org_id, it.key.clone())) {
                outcome.push(Some(Acceptance::Accepted));
                continue;
            }
            match self.key_record(it.message.org_id, &it.key).await? {
                Some(rec) => outcome.push(Some(Acceptance::KeyTaken(rec))),
                None => {
                    outcome.push(None);
                    again.push((slot, i));
                }
            }
        }
        if !again.is_empty() {
            let retry: Vec<usize> = again.iter().map(|&(_, i)| i).collect();
            let results = self.accept_in_tx(items, &retry).await?;
            for ((slot, _), r) in again.into_iter().zip(results) {
                outcome[slot] = Some(r);
            }
        }
        outcome
            .into_iter()
            .map(|o| o.ok_or(StoreError::NotFound))
            .collect()
    }

    /// A key's record whether or not it expired.
    async fn key_record(&self, org_id: Uuid, key: &str) -> Result<Option<IdempotencyRecord>> {
        let rec = with_pool!(self, pool => sqlx::query_as::<_, IdempotencyRecord>(
                "SELECT key, fingerprint, message_id, created_at, expires_at \
                 FROM idempotency_keys WHERE org_id = $1 AND key = $2")
            .bind(org_id)
            .bind(key)
            .fetch_optional(pool)
            .await)?;
        Ok(rec)
    }

    /// [`Db::accept_round`] as one transaction.
    async fn accept_in_tx(&self, items: &mut [Accept], idx: &[usize]) -> Result<Vec<Acceptance>> {
        let mut outcome: Vec<Option<Acceptance>> = idx.iter().map(|_| None).collect();
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;

            // 1. Bind every key that is free (or expired) in one statement.
            let bound = {
                let batch: Vec<&Accept> = idx.iter().map(|&i| &items[i]).collect();
                AcceptBatch::bind_keys(&mut *tx, &batch).await?
            };
            // 1a. The `messages_sent` units of the items whose key was bound, one statement
            // per counter.
            let adds = Units::wanted(idx.iter().map(|&i| &items[i])
                .filter(|it| bound.contains(&(it.message.org_id, it.key.clone()))));
            let mut grants = Vec::with_capacity(adds.len());
            for a in &adds {
                grants.push(add_usage_on!(self.backend(), &mut *tx, a)?);
            }
            let mut units = Units::granted(&adds, &grants);
            let mut new_conversations = Vec::new();

            for (slot, &i) in idx.iter().enumerate() {
                let it = &items[i];
                let org_id = it.message.org_id;
                if !bound.contains(&(org_id, it.key.clone())) {
                    let rec = sqlx::query_as::<_, IdempotencyRecord>(
                            "SELECT key, fingerprint, message_id, created_at, expires_at \
                             FROM idempotency_keys WHERE org_id = $1 AND key = $2")
                        .bind(org_id)
                        .bind(&it.key)
                        .fetch_one(&mut *tx)
                        .await?;
                    outcome[slot] = Some(Acceptance::KeyTaken(rec));
                    continue;
                }

                // 1b. A new recipient counts against the plan's contact limit, under the
                // organisation's row lock (PostgreSQL; SQLite holds the write lock).
                if let (Some(who), Some(limit)) = (&it.new_contact, it.contact_limit) {
                    sqlx::query(lock_for_write!(self, "SELECT id FROM organisations WHERE id = $1"))
                        .bind(org_id)
                        .execute(&mut *tx)
                        .await?;
                    let (total, exists): (i64, i64) = sqlx::query_as(who.pick(
                            "SELECT COUNT(*), COUNT(CASE WHEN wa_id = $2 THEN 1 END) \
                             FROM contacts WHERE org_id = $1",
                            "SELECT COUNT(*), COUNT(CASE WHEN user_id = $2 THEN 1 END) \
                             FROM contacts WHERE org_id = $1"))
                        .bind(org_id)
                        .bind(who.value())
                        .fetch_one(&mut *tx)
                        .await?;
                    // Created meanwhile by another request, the recipient is no new contact.
                    if exists == 0 && total >= limit {
                        release_key!(tx, org_id, &it.key);
                        outcome[slot] = Some(Acceptance::ContactLimit { used: total });
                        continue;
                    }
                }

                // 2. Charges, in order; a refused item gives its key back (a deleted key is
                // the same as an expired one to every reader) and its unit.
                if let Err(allowance) = units.take(it) {
                    release_key!(tx, org_id, &it.key);
                    outcome[slot] = Some(Acceptance::AllowanceUsed { used: allowance });
                    continue;
                }
                if let Some(amount) = it.charges.debit_minor.filter(|a| *a > 0) {
                    let balance: Option<i64> = sqlx::query_scalar(
                            "UPDATE organisations SET wallet_balance_minor = wallet_balance_minor - $2 \
                             WHERE id = $1 AND wallet_balance_minor >= $2 RETURNING wallet_balance_minor")
                        .bind(org_id)
                        .bind(amount)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if balance.is_none() {
                        let balance: i64 = sqlx::query_scalar(
                                "SELECT wallet_balance_minor FROM organisations WHERE id = $1")
                            .bind(org_id)
                            .fetch_optional(&mut *tx)
                            .await?
                            .ok_or(StoreError::NotFound)?;
                        units.put_back(it);
                        release_key!(tx, org_id, &it.key);
                        outcome[slot] = Some(Acceptance::WalletLow { balance_minor: balance });
                        continue;
                    }
                    sqlx::query(
                            "INSERT INTO wallet_ledger (id, org_id, amount_minor, reason, message_id, created_at) \
                             VALUES ($1, $2, $3, 'message_debit', $4, $5)")
                        .bind(Uuid::now_v7())
                        .bind(org_id)
                        .bind(-amount)
                        .bind(it.message.id)
                        .bind(it.message.created_at)
                        .execute(&mut *tx)
                        .await?;
                }

                // 3. A new recipient: its contact and conversation, unless a concurrent
                // request created them first (then theirs are used).
                if let Some(who) = it.new_contact.clone() {
                    sqlx::query(who.pick(
                            "INSERT INTO contacts (id, org_id, wa_id, custom_fields, consent_status, \
                             created_at, updated_at) VALUES ($1, $2, $3, $4, 'unknown', $5, $5) \
                             ON CONFLICT (org_id, wa_id) DO NOTHING",
                            "INSERT INTO contacts (id, org_id, user_id, custom_fields, consent_status, \
                             created_at, updated_at) VALUES ($1, $2, $3, $4, 'unknown', $5, $5) \
                             ON CONFLICT (org_id, user_id) WHERE user_id IS NOT NULL DO NOTHING"))
                        .bind(it.message.contact_id)
                        .bind(org_id)
                        .bind(who.value())
                        .bind(Json(serde_json::Map::new()))
                        .bind(it.message.created_at)
                        .execute(&mut *tx)
                        .await?;
                    let id: Uuid = sqlx::query_scalar(who.pick(
                            "SELECT id FROM contacts WHERE org_id = $1 AND wa_id = $2",
                            "SELECT id FROM contacts WHERE org_id = $1 AND user_id = $2"))
                        .bind(org_id)
                        .bind(who.value())
                        .fetch_one(&mut *tx)
                        .await?;
                    items[i].message.contact_id = id;
                }
                if items[i].new_conversation {
                    new_conversations.push(i);
                }
                outcome[slot] = Some(Acceptance::Accepted);
            }

            // 3a. The new recipients' conversations, two statements for all (a campaign to
            // imported contacts opens one per message), unless a concurrent request created
            // them first (then theirs are used).
            if !new_conversations.is_empty() {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO conversations (id, org_id, contact_id, phone_number_id, created_at) ");
                q.push_values(&new_conversations, |mut b, &i| {
                    let m = &items[i].message;
                    b.push_bind(m.conversation_id)
                        .push_bind(m.org_id)
                        .push_bind(m.contact_id)
                        .push_bind(m.phone_number_id.clone())
                        .push_bind(m.created_at);
                });
                q.push(" ON CONFLICT (contact_id, phone_number_id) DO NOTHING");
                // Not kept prepared: each batch size is another statement (memory per size).
                q.build().persistent(false).execute(&mut *tx).await?;
                let mut q = sqlx::QueryBuilder::new(
                    "SELECT contact_id, phone_number_id, id FROM conversations WHERE contact_id IN (");
                let mut list = q.separated(", ");
                for &i in &new_conversations {
                    list.push_bind(items[i].message.contact_id);
                }
                q.push(")");
                let found: HashMap<(Uuid, String), Uuid> = q
                    .build_query_as::<(Uuid, String, Uuid)>()
                    .persistent(false)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(|(c, p, id)| ((c, p), id))
                    .collect();
                for &i in &new_conversations {
                    let m = &mut items[i].message;
                    if let Some(id) = found.get(&(m.contact_id, m.phone_number_id.clone())) {
                        m.conversation_id = *id;
                    }
                }
            }

            // 4. The accepted messages, queued for dispatch now, in one statement.
            let accepted: Vec<&Accept> = idx
                .iter()
                .zip(&outcome)
                .filter(|(_, o)| matches!(o, Some(Acceptance::Accepted)))
                .map(|(&i, _)| &items[i])
                .collect();
            if !accepted.is_empty() {
                AcceptBatch::insert_queued(&mut *tx, &accepted).await?;
                // 5. Each conversation's latest activity, once per conversation.
                let mut latest: BTreeMap<Uuid, i64> = BTreeMap::new();
                for m in accepted.iter().map(|it| &it.message) {
                    let t = latest.entry(m.conversation_id).or_insert(m.created_at);
                    *t = (*t).max(m.created_at);
                }
                AcceptBatch::touch_conversations(&mut *tx, &latest).await?;
            }
            for ((org, period), n) in units.unused() {
                give_back_on!(&mut *tx, org, MESSAGES_SENT, period, n)?;
            }
            tx.commit().await?;
            Ok::<_, StoreError>(())
        })?;
        // Every item of the round has an outcome (each branch above sets one).
        outcome
            .into_iter()
            .map(|o| o.ok_or(StoreError::NotFound))
            .collect()
    }

    /// Deletes idempotency keys that expired before `now`; returns how many.
    pub async fn prune_idempotency_keys(&self, now: i64) -> Result<u64> {
        let n = with_pool!(self, pool => sqlx::query(
                "DELETE FROM idempotency_keys WHERE expires_at <= $1")
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }

    /// `messages_sent` counted in the period starting at `period_start`.
    pub async fn messages_sent_in_period(&self, org_id: Uuid, period_start: i64) -> Result<i64> {
        self.usage_in_period(org_id, "messages_sent", period_start)
            .await
    }
}

/// Binds the columns of `$ms` (`&[&Message]`) as arrays, `$1`…`$24` in
/// `outbound_columns!` order, for the PostgreSQL `UNNEST` statements.
macro_rules! bind_message_arrays {
    ($q:expr, $ms:expr) => {{
        let ms: &[&Message] = $ms;
        $q.bind(ms.iter().map(|m| m.id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.org_id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.conversation_id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.contact_id).collect::<Vec<_>>())
            .bind(
                ms.iter()
                    .map(|m| m.phone_number_id.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(ms.iter().map(|m| m.direction.as_str()).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.r#type.as_str()).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.status.as_str()).collect::<Vec<_>>())
            .bind(
                ms.iter()
                    .map(|m| m.template_name.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(
                ms.iter()
                    .map(|m| m.template_language.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(ms.iter().map(|m| m.text.as_deref()).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.media_id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.wamid.as_deref()).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| Json(&m.request)).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.campaign_id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.created_at).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.sent_at).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.delivered_at).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.read_at).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.failed_at).collect::<Vec<_>>())
            .bind(
                ms.iter()
                    .map(|m| m.failure_code.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(
                ms.iter()
                    .map(|m| m.failure.as_ref().map(Json))
                    .collect::<Vec<_>>(),
            )
            .bind(ms.iter().map(|m| m.updated_at).collect::<Vec<_>>())
            .bind(
                ms.iter()
                    .map(|m| m.reply_to.as_ref().map(Json))
                    .collect::<Vec<_>>(),
            )
    }};
}

/// The statements of [`Db::accept_messages`] that cover a whole batch. SQLite gets
/// multi-row `VALUES` (not kept prepared: a cached statement per batch size and connection
/// cost hundreds of MiB); PostgreSQL gets one fixed statement over arrays (`UNNEST`),
/// prepared once per connection.
trait AcceptBatch {
    /// Binds each item's key where it is free or expired; returns the keys bound.
    async fn bind_keys(&mut self, items: &[&Accept]) -> Result<HashSet<(Uuid, String)>>;
    /// Inserts the items' messages (with who sent them), queued for dispatch at their
    /// `created_at`.
    async fn insert_queued(&mut self, items: &[&Accept]) -> Result<()>;
    /// `last_message_at = max(last_message_at, t)` per conversation.
    async fn touch_conversations(&mut self, latest: &BTreeMap<Uuid, i64>) -> Result<()>;
    /// Plain items ([`Accept::is_plain`]) in one statement, which is its own transaction:
    /// binds the free keys, stores those items' messages queued, touches their
    /// conversations and counts their `messages_sent`. Returns the keys bound, or `None`
    /// where the backend cannot, or when a counter would pass its allowance (then nothing
    /// was written and the transaction path decides item by item).
    async fn accept_plain(&mut self, items: &[&Accept]) -> Result<Option<HashSet<(Uuid, String)>>>;
}

/// What a key insert does when the key exists: take it over only if it expired.
macro_rules! key_conflict {
    () => {
        " ON CONFLICT (org_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, \
         message_id = excluded.message_id, state = 'completed', \
         created_at = excluded.created_at, expires_at = excluded.expires_at, locked_until = NULL \
         WHERE idempotency_keys.expires_at <= excluded.created_at RETURNING org_id, key"
    };
}

impl AcceptBatch for SqliteConnection {
    // SQLite has no data-modifying CTEs; its transactions are cheap anyway (no round trips).
    async fn accept_plain(
        &mut self,
        _items: &[&Accept],
    ) -> Result<Option<HashSet<(Uuid, String)>>> {
        Ok(None)
    }

    async fn bind_keys(&mut self, items: &[&Accept]) -> Result<HashSet<(Uuid, String)>> {
        let mut q = sqlx::QueryBuilder::new(
            "INSERT INTO idempotency_keys (org_id, key, fingerprint, message_id, state, \
             created_at, expires_at) ",
        );
        q.push_values(items, |mut b, it| {
            b.push_bind(it.message.org_id)
                .push_bind(it.key.as_str())
                .push_bind(it.fingerprint.as_slice())
                .push_bind(it.message.id)
                .push_bind("completed")
                .push_bind(it.message.created_at)
                .push_bind(it.key_expires_at);
        });
        q.push(key_conflict!());
        let rows = q
            .build_query_as::<(Uuid, String)>()
            .persistent(false)
            .fetch_all(&mut *self)
            .await?;
        Ok(rows.into_iter().collect())
    }

    async fn insert_queued(&mut self, items: &[&Accept]) -> Result<()> {
        let mut q = sqlx::QueryBuilder::new(concat!(
            "INSERT INTO messages (",
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, idempotency_key, attempts, next_attempt_at, dispatch_state) "
        ));
        q.push_values(items, |mut b, it| {
            let m = &it.message;
            b.push_bind(m.id)
                .push_bind(m.org_id)
                .push_bind(m.conversation_id)
                .push_bind(m.contact_id)
                .push_bind(m.phone_number_id.as_str())
                .push_bind(m.direction.as_str())
                .push_bind(m.r#type.as_str())
                .push_bind(m.status.as_str())
                .push_bind(m.template_name.as_deref())
                .push_bind(m.template_language.as_deref())
                .push_bind(m.text.as_deref())
                .push_bind(m.media_id)
                .push_bind(m.wamid.as_deref())
                .push_bind(Json(&m.request))
                .push_bind(m.campaign_id)
                .push_bind(m.created_at)
                .push_bind(m.sent_at)
                .push_bind(m.delivered_at)
                .push_bind(m.read_at)
                .push_bind(m.failed_at)
                .push_bind(m.failure_code.as_deref())
                .push_bind(m.failure.as_ref().map(Json))
                .push_bind(m.updated_at)
                .push_bind(m.reply_to.as_ref().map(Json))
                .push_bind(it.api_key_id)
                .push_bind(it.request_id.as_deref())
                .push_bind(it.key.as_str())
                .push_bind(0_i64)
                .push_bind(m.created_at)
                .push_bind(crate::dispatch::DISPATCH_QUEUED);
        });
        q.build().persistent(false).execute(&mut *self).await?;
        Ok(())
    }

    async fn touch_conversations(&mut self, latest: &BTreeMap<Uuid, i64>) -> Result<()> {
        let mut q =
            sqlx::QueryBuilder::new("UPDATE conversations SET last_message_at = v.column2 FROM (");
        q.push_values(latest, |mut b, (id, t)| {
            b.push_bind(*id).push_bind(*t);
        });
        q.push(
            ") AS v WHERE conversations.id = v.column1 AND \
             (conversations.last_message_at IS NULL OR conversations.last_message_at < v.column2)",
        );
        q.build().persistent(false).execute(&mut *self).await?;
        Ok(())
    }
}

impl AcceptBatch for PgConnection {
    // One round trip instead of five (BEGIN, keys, messages, conversations, COMMIT): the
    // per-statement cost, not the rows, is what PostgreSQL spends most on here.
    // The conversations are touched by an upsert on their primary key, which always probes
    // that index. An UPDATE … FROM got a cached generic plan that scanned the whole table
    // (cheapest while it was small), and every touch leaves a dead row version there (its
    // activity index keeps the update from being HOT), so each batch scanned more and more
    // dead rows until a vacuum: the same build measured 3,100 or 4,800 sends/s depending on
    // which plan it happened to cache. The conversation exists (the send read it, and
    // conversations are never deleted); were it missing, the insert half would create it
    // from the message's own ids, and the unique (contact, number) key forbids a second.
    // Rows are locked in id order, so two batches touching the same conversations cannot
    // deadlock (a deadlock is only detected after a second: it showed as p99 ≈ 900 ms).
    async fn accept_plain(&mut self, items: &[&Accept]) -> Result<Option<HashSet<(Uuid, String)>>> {
        const SQL: &str = concat!(
            "WITH t AS (SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], \
               $4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
               $11::text[], $12::uuid[], $13::text[], $14::jsonb[], $15::uuid[], $16::int8[], \
               $17::int8[], $18::int8[], $19::int8[], $20::int8[], $21::text[], $22::jsonb[], \
               $23::int8[], $24::jsonb[], $25::text[], $26::bytea[], $27::int8[], $28::int8[], \
               $29::int8[], $30::uuid[], $31::text[]) AS t(id, org_id, \
               conversation_id, contact_id, phone_number_id, direction, type, status, \
               template_name, template_language, text, media_id, wamid, request, campaign_id, \
               created_at, sent_at, delivered_at, read_at, failed_at, failure_code, failure, \
               updated_at, reply_to, key, fingerprint, key_expires_at, period, allowance, \
               api_key_id, request_id)), \
             k AS (INSERT INTO idempotency_keys (org_id, key, fingerprint, message_id, state, \
               created_at, expires_at) \
               SELECT org_id, key, fingerprint, id, 'completed', created_at, key_expires_at FROM t",
            key_conflict!(),
            ", message_id), \
             m AS (INSERT INTO messages (",
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, idempotency_key, attempts, next_attempt_at, \
               dispatch_state) SELECT ",
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, key, 0, created_at, 'queued' FROM t \
               WHERE id IN (SELECT message_id FROM k) \
               RETURNING id, conversation_id, org_id, contact_id, phone_number_id, created_at), \
             c AS (INSERT INTO conversations (id, org_id, contact_id, phone_number_id, created_at, \
                 last_message_at) \
               SELECT conversation_id, org_id, contact_id, phone_number_id, max(created_at), \
                 max(created_at) FROM m GROUP BY conversation_id, org_id, contact_id, phone_number_id \
               ORDER BY conversation_id \
               ON CONFLICT (id) DO UPDATE SET last_message_at = excluded.last_message_at \
               WHERE conversations.last_message_at IS NULL \
                 OR conversations.last_message_at < excluded.last_message_at), \
             g AS (SELECT t.org_id, t.period, count(*) AS n, min(t.allowance) AS allowance \
               FROM m JOIN t ON t.id = m.id WHERE t.period IS NOT NULL GROUP BY t.org_id, t.period), \
             u AS (INSERT INTO usage_counters (org_id, meter, period_start, count, last_grant) \
               SELECT org_id, 'messages_sent', period, n, allowance FROM g WHERE n <= allowance \
               ORDER BY org_id, period \
               ON CONFLICT (org_id, meter, period_start) DO UPDATE \
               SET count = usage_counters.count + excluded.count \
               WHERE usage_counters.count + excluded.count <= excluded.last_grant RETURNING 1) \
             SELECT org_id, key, 1 / (CASE WHEN (SELECT count(*) FROM u) = (SELECT count(*) FROM g) \
               THEN 1 ELSE 0 END) FROM k"
        );
        let ms: Vec<&Message> = items.iter().map(|i| &i.message).collect();
        let rows = bind_message_arrays!(sqlx::query_as::<_, (Uuid, String, i32)>(SQL), &ms)
            .bind(items.iter().map(|i| i.key.as_str()).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.fingerprint.as_slice())
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.key_expires_at).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.charges.messages_sent.map(|c| c.0))
                    .collect::<Vec<_>>(),
            )
            .bind(
                items
                    .iter()
                    .map(|i| i.charges.messages_sent.map(|c| c.1))
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.api_key_id).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.request_id.as_deref())
                    .collect::<Vec<_>>(),
            )
            .fetch_all(&mut *self)
            .await;
        match rows {
            Ok(rows) => Ok(Some(rows.into_iter().map(|(o, k, _)| (o, k)).collect())),
            // An allowance would be exceeded: the statement undid itself (see above).
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("22012") => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn bind_keys(&mut self, items: &[&Accept]) -> Result<HashSet<(Uuid, String)>> {
        const SQL: &str = concat!(
            "INSERT INTO idempotency_keys (org_id, key, fingerprint, message_id, state, \
             created_at, expires_at) \
             SELECT o, k, f, m, 'completed', c, e \
             FROM UNNEST($1::uuid[], $2::text[], $3::bytea[], $4::uuid[], $5::int8[], $6::int8[]) \
               AS t(o, k, f, m, c, e)",
            key_conflict!()
        );
        let rows = sqlx::query_as::<_, (Uuid, String)>(SQL)
            .bind(items.iter().map(|i| i.message.org_id).collect::<Vec<_>>())
            .bind(items.iter().map(|i| i.key.as_str()).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.fingerprint.as_slice())
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.message.id).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.message.created_at)
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.key_expires_at).collect::<Vec<_>>())
            .fetch_all(&mut *self)
            .await?;
        Ok(rows.into_iter().collect())
    }

    async fn insert_queued(&mut self, items: &[&Accept]) -> Result<()> {
        let sql = concat!(
            "INSERT INTO messages (",
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, idempotency_key, attempts, next_attempt_at, dispatch_state) \
             SELECT *, 0, t.created_at, 'queued' FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], \
               $4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
               $11::text[], $12::uuid[], $13::text[], $14::jsonb[], $15::uuid[], $16::int8[], \
               $17::int8[], $18::int8[], $19::int8[], $20::int8[], $21::text[], $22::jsonb[], \
               $23::int8[], $24::jsonb[], $25::uuid[], $26::text[], $27::text[]) \
               AS t(id, org_id, conversation_id, contact_id, phone_number_id, \
               direction, type, status, template_name, template_language, text, media_id, wamid, \
               request, campaign_id, created_at, sent_at, delivered_at, read_at, failed_at, \
               failure_code, failure, updated_at, reply_to, api_key_id, request_id, \
               idempotency_key)"
        );
        let messages: Vec<&Message> = items.iter().map(|i| &i.message).collect();
        bind_message_arrays!(sqlx::query(sql), &messages)
            .bind(items.iter().map(|i| i.api_key_id).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.request_id.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.key.as_str()).collect::<Vec<_>>())
            .execute(&mut *self)
            .await?;
        Ok(())
    }

    async fn touch_conversations(&mut self, latest: &BTreeMap<Uuid, i64>) -> Result<()> {
        // `id = ANY($1)` lets the planner probe the primary key; the join alone was planned
        // as a scan of the whole table.
        sqlx::query(
            "UPDATE conversations SET last_message_at = v.t \
             FROM UNNEST($1::uuid[], $2::int8[]) AS v(id, t) \
             WHERE conversations.id = ANY($1) AND conversations.id = v.id \
               AND (conversations.last_message_at IS NULL OR conversations.last_message_at < v.t)",
        )
        .bind(latest.keys().copied().collect::<Vec<_>>())
        .bind(latest.values().copied().collect::<Vec<_>>())
        .execute(&mut *self)
        .await?;
        Ok(())
    }
}
