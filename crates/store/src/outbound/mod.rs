//! Accepting an outbound message: the idempotency key, the billing effects and the queued
//! message are written in one transaction, so a message exists exactly when its key is bound
//! (and its debit and usage were recorded), whatever crashes or races happen.

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{BeginWrite as _, Db, Pool, with_pool, write_turn};
use crate::error::{Result, StoreError};
use crate::held::HeldWriter;
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
        self.accept_messages_on(items, &mut HeldWriter::per_use())
            .await
    }

    /// [`Db::accept_messages`] with the connection `held` keeps between calls (the
    /// acceptance writer's).
    pub(crate) async fn accept_messages_on(
        &self,
        items: &mut [Accept],
        held: &mut HeldWriter,
    ) -> Vec<Result<Acceptance>> {
        let mut out: Vec<Option<Result<Acceptance>>> = items.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..items.len()).collect();
        while !pending.is_empty() {
            let mut seen = HashSet::new();
            let (round, later): (Vec<usize>, Vec<usize>) = pending
                .into_iter()
                .partition(|&i| seen.insert((items[i].message.org_id, items[i].key.clone())));
            match self.accept_round(items, &round, held).await {
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
                            self.accept_round(items, &[i], held)
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

    /// One round over `items[idx]` (distinct keys); outcomes in `idx` order. A round of
    /// plain items (no debit, no new contact or conversation) is one call that also counts
    /// their `messages_sent` ([`AcceptBatch::accept_plain`]: one statement on PostgreSQL,
    /// one multi-statement call holding its own transaction on SQLite), on the connection
    /// `held` keeps ([`crate::held`]); any other round, or one that would pass an
    /// allowance, is a transaction item by item.
    async fn accept_round(
        &self,
        items: &mut [Accept],
        idx: &[usize],
        held: &mut HeldWriter,
    ) -> Result<Vec<Acceptance>> {
        if !idx.iter().all(|&i| items[i].is_plain()) {
            return self.accept_in_tx(items, idx).await;
        }
        let batch: Vec<&Accept> = idx.iter().map(|&i| &items[i]).collect();
        let bound = match &self.pool {
            Pool::Postgres(pool) => {
                let conn = held.postgres.get(pool).await?;
                let bound = AcceptBatch::accept_plain(conn, &batch).await;
                held.postgres.done(bound.is_ok());
                bound?
            }
            // SQLite's transaction is part of the call; the write turn is taken first.
            Pool::Sqlite(pool) => {
                let _turn = write_turn(pool).await?;
                let conn = held.sqlite.get(pool).await?;
                let bound = AcceptBatch::accept_plain(conn, &batch).await;
                held.sqlite.done(bound.is_ok());
                bound?
            }
        };
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
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
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
    /// Plain items ([`Accept::is_plain`]) in one call: binds the free keys, stores those
    /// items' messages queued, touches their conversations and counts their
    /// `messages_sent`. Returns the keys bound, or `None` when a counter would pass its
    /// allowance (then nothing may stay written and the transaction path decides item by
    /// item). The call is its own transaction on both backends (on SQLite the caller holds
    /// the write turn); after an error the connection's state is unknown.
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

// The backends' statements (after `key_conflict!`, which they use).
mod pg;
mod sqlite;
