//! Who a customer is. The network names a customer by phone (`wa_id`), by business-scoped
//! user id (`user_id`, BSUID), or both; since 2026 it may withhold the phone of a customer
//! who uses a username. A contact is found by `user_id` first, then by `wa_id`; identifiers
//! the network reveals later are learned; when one notification shows that two contacts are
//! the same customer (its BSUID is on one, its phone on the other) they are merged into the
//! older one, whose id survives; a customer's change of BSUID or phone moves their contact
//! to the new identifiers.
//!
//! Every change runs in one write transaction with the contacts involved locked, so two
//! notifications about one customer cannot create two contacts or merge twice.

use serde_json::{Map, Value};
use sqlx::types::Json;
use uuid::Uuid;

use crate::contacts::{Contact, contact_columns, tags_of};
use crate::db::{Backend, Db, Tx, with_tx};
use crate::error::Result;
use crate::sql::{ROWS_PER_STATEMENT, bump_updated_at};

/// The identifiers of a customer that one notification shows (any may be missing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Identity<'a> {
    pub wa_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub parent_user_id: Option<&'a str>,
    pub username: Option<&'a str>,
}

impl<'a> Identity<'a> {
    /// A customer known by phone only.
    pub fn phone(wa_id: &'a str) -> Self {
        Identity {
            wa_id: Some(wa_id),
            ..Identity::default()
        }
    }

    /// Names the customer at all (a phone or a BSUID).
    pub fn is_known(&self) -> bool {
        self.wa_id.is_some() || self.user_id.is_some()
    }
}

/// What [`Db::record_inbound`] / [`Db::observe_identity`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub contact: Contact,
    pub created: bool,
    /// The id of a contact merged into `contact` (it no longer exists).
    pub merged: Option<Uuid>,
}

/// An inbound message's effect on its sender's contact.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inbound<'a> {
    profile_name: Option<&'a str>,
    /// The network's time of the customer's message; `None` for the network's own notice
    /// (a new BSUID or number), which is not the customer writing.
    network_ts: Option<i64>,
    new_contact_id: Uuid,
}

impl Db {
    /// Records an inbound message from the customer `who`, sent at the network's time
    /// `network_ts`: finds the contact (BSUID first, then phone), merging two contacts the
    /// notification shows to be one customer, or creates it (id `new_contact_id`, name
    /// `profile_name`); learns the identifiers shown; sets `last_inbound_at =
    /// max(last_inbound_at, network_ts)` (a late webhook never moves it back) and fills the
    /// name only if none is set. `updated_at` moves only if something changed.
    pub async fn record_inbound(
        &self,
        org_id: Uuid,
        who: &Identity<'_>,
        profile_name: Option<&str>,
        network_ts: i64,
        new_contact_id: Uuid,
        at: i64,
    ) -> Result<Observed> {
        let inbound = Inbound {
            profile_name: profile_name.filter(|n| !n.trim().is_empty()),
            network_ts: Some(network_ts),
            new_contact_id,
        };
        self.observe_sender(org_id, who, inbound, at).await
    }

    /// As [`Db::record_inbound`] for a notice of the network's about the customer `who` (a
    /// new BSUID or number): the contact is found or created, but its `last_inbound_at`
    /// stays, since the customer did not write.
    pub async fn record_notice(
        &self,
        org_id: Uuid,
        who: &Identity<'_>,
        new_contact_id: Uuid,
        at: i64,
    ) -> Result<Observed> {
        let inbound = Inbound {
            profile_name: None,
            network_ts: None,
            new_contact_id,
        };
        self.observe_sender(org_id, who, inbound, at).await
    }

    async fn observe_sender(
        &self,
        org_id: Uuid,
        who: &Identity<'_>,
        inbound: Inbound<'_>,
        at: i64,
    ) -> Result<Observed> {
        let mut tx = self.begin().await?;
        let observed = tx.resolve(org_id, who, Some(inbound), at).await?;
        tx.commit().await?;
        observed.ok_or(crate::StoreError::NotFound)
    }

    /// Learns the identifiers a status notification shows about an existing contact (a
    /// BSUID, a username), merging two contacts it shows to be one customer. Never creates
    /// a contact; `None` when none matches. Writes only when something changes (one read
    /// otherwise).
    pub async fn observe_identity(
        &self,
        org_id: Uuid,
        who: &Identity<'_>,
        at: i64,
    ) -> Result<Option<Observed>> {
        if !who.is_known() {
            return Ok(None);
        }
        let current = self.contacts_matching(org_id, who).await?;
        if !needs_write(&current, who) {
            return Ok(None);
        }
        let mut tx = self.begin().await?;
        let observed = tx.resolve(org_id, who, None, at).await?;
        tx.commit().await?;
        Ok(observed)
    }

    /// A customer's identifiers changed (a new BSUID, a new phone): the contact holding
    /// `previous`'s BSUID or phone (two such contacts are first merged) takes every
    /// identifier `current` gives; a contact already holding one of those is merged with
    /// it (the older one survives). `None` when no contact holds `previous`.
    pub async fn change_identity(
        &self,
        org_id: Uuid,
        previous: &Identity<'_>,
        current: &Identity<'_>,
        at: i64,
    ) -> Result<Option<Observed>> {
        let mut tx = self.begin().await?;
        let Some(found) = tx.resolve(org_id, previous, None, at).await? else {
            return Ok(None);
        };
        let mut contact = found.contact;
        let mut merged = found.merged;
        if current.is_known() {
            for other in tx.lock_matching(org_id, current).await? {
                if other.id == contact.id {
                    continue;
                }
                let (survivor, loser) = older_first(contact, other);
                merged = Some(loser.id);
                contact = tx.merge(survivor, loser, at).await?;
            }
        }
        let next = learned(&contact, current, None);
        let mut contact = if next == contact {
            contact
        } else {
            tx.store_identity(&next, at).await?
        };
        contact.tags = with_tx!(tx, c => tags_of!(contact.id).fetch_all(&mut **c).await)?;
        tx.commit().await?;
        Ok(Some(Observed {
            contact,
            created: false,
            merged,
        }))
    }

    /// The organisation's contacts holding `who`'s BSUID or phone (at most two), oldest first.
    async fn contacts_matching(&self, org_id: Uuid, who: &Identity<'_>) -> Result<Vec<Contact>> {
        let rows = crate::db::with_pool!(self, pool => sqlx::query_as::<_, Contact>(MATCHING)
            .bind(org_id)
            .bind(who.user_id)
            .bind(who.wa_id)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }
}

/// A customer's inbound messages of one batch, for [`Db::record_inbound_known`]: who they
/// are, the first profile name the batch gives and the network's time of the latest one.
#[derive(Debug, Clone, Copy)]
pub struct InboundSeen<'a> {
    pub who: Identity<'a>,
    pub profile_name: Option<&'a str>,
    pub network_ts: i64,
}

impl Db {
    /// [`Db::record_inbound`] of many customers at once, for those whose contact needs no
    /// lock: exactly one contact holds their BSUID or phone and already holds every
    /// identifier shown (nothing to create, merge or learn). One read for all; the
    /// `last_inbound_at` and name of those that move in one statement, guarded by the
    /// identifiers read (a contact merged or changed meanwhile is left out), with the same
    /// rules as [`Db::record_inbound`]. Returns each one's contact id at its index; `None`:
    /// the caller records it with [`Db::record_inbound`] (locked).
    pub async fn record_inbound_known(
        &self,
        org_id: Uuid,
        seen: &[InboundSeen<'_>],
        at: i64,
    ) -> Result<Vec<Option<Uuid>>> {
        let mut out = vec![None; seen.len()];
        for (chunk_no, chunk) in seen.chunks(ROWS_PER_STATEMENT / 2).enumerate() {
            let base = chunk_no * (ROWS_PER_STATEMENT / 2);
            let user_ids: Vec<&str> = chunk.iter().filter_map(|s| s.who.user_id).collect();
            let wa_ids: Vec<&str> = chunk.iter().filter_map(|s| s.who.wa_id).collect();
            let found = self.contacts_holding(org_id, &user_ids, &wa_ids).await?;
            let mut writes: Vec<(Vec<usize>, &Contact, Inbound<'_>)> = Vec::new();
            for (i, s) in chunk.iter().enumerate() {
                let mut matches = found.iter().filter(|c| holds(c, &s.who));
                let (Some(c), None) = (matches.next(), matches.next()) else {
                    continue;
                };
                let inbound = Inbound {
                    profile_name: s.profile_name.filter(|n| !n.trim().is_empty()),
                    network_ts: Some(s.network_ts),
                    new_contact_id: c.id,
                };
                let next = learned(c, &s.who, Some(&inbound));
                let same_ids = (
                    &next.wa_id,
                    &next.user_id,
                    &next.parent_user_id,
                    &next.username,
                ) == (&c.wa_id, &c.user_id, &c.parent_user_id, &c.username);
                if !same_ids {
                    continue;
                }
                if next == *c {
                    out[base + i] = Some(c.id);
                    continue;
                }
                // One row per contact (an UPDATE … FROM applies one of several at random):
                // the latest time, the first name.
                match writes.iter_mut().find(|(_, w, _)| w.id == c.id) {
                    Some((slots, _, w)) => {
                        slots.push(base + i);
                        w.network_ts = w.network_ts.max(inbound.network_ts);
                        w.profile_name = w.profile_name.or(inbound.profile_name);
                    }
                    None => writes.push((vec![base + i], c, inbound)),
                }
            }
            if writes.is_empty() {
                continue;
            }
            // In a write transaction: on SQLite it takes this process's write turn.
            let mut tx = self.begin().await?;
            let written: Vec<Uuid> = with_tx!(tx, conn => {
                let mut q = sqlx::QueryBuilder::new(concat!(
                    "UPDATE contacts SET \
                     last_inbound_at = CASE WHEN contacts.last_inbound_at IS NULL \
                       OR contacts.last_inbound_at < v.column2 THEN v.column2 \
                       ELSE contacts.last_inbound_at END, \
                     name = COALESCE(contacts.name, v.column3), \
                     updated_at = CASE WHEN contacts.last_inbound_at IS NULL \
                       OR contacts.last_inbound_at < v.column2 \
                       OR (contacts.name IS NULL AND v.column3 IS NOT NULL) THEN ",
                    bump_updated_at!("contacts", "v.column8"),
                    " ELSE contacts.updated_at END FROM ("));
                q.push_values(&writes, |mut row, (_, c, inbound)| {
                    row.push_bind(c.id)
                        .push_bind(inbound.network_ts)
                        .push_bind(inbound.profile_name);
                    bind_as_read(&mut row, c);
                    row.push_bind(at);
                });
                push_guard_as_read(&mut q, org_id, 4);
                q.build_query_scalar::<Uuid>().persistent(false).fetch_all(&mut **conn).await
            })?;
            tx.commit().await?;
            for (slots, c, _) in writes {
                if written.contains(&c.id) {
                    for i in slots {
                        out[i] = Some(c.id);
                    }
                }
            }
        }
        Ok(out)
    }

    /// The organisation's contacts holding one of these BSUIDs or phones.
    pub(crate) async fn contacts_holding(
        &self,
        org_id: Uuid,
        user_ids: &[&str],
        wa_ids: &[&str],
    ) -> Result<Vec<Contact>> {
        // One indexed search a column, joined by UNION ALL: with `user_id IN (…) OR wa_id
        // IN (…)` SQLite reads every contact of the organisation (its OR optimisation does
        // not reach inside the `org_id = ? AND (…)`), which with 100,000 contacts made each
        // pass of the inbox a full scan.
        let rows = crate::db::with_pool!(self, pool => {
            let mut q = sqlx::QueryBuilder::new("");
            let mut any = false;
            for (column, values) in [("user_id", user_ids), ("wa_id", wa_ids)] {
                if values.is_empty() {
                    continue;
                }
                if any {
                    q.push(" UNION ALL ");
                }
                any = true;
                q.push(concat!("SELECT ", contact_columns!(), " FROM contacts WHERE org_id = "));
                q.push_bind(org_id);
                q.push(" AND ").push(column).push(" IN (");
                let mut list = q.separated(", ");
                for v in values {
                    list.push_bind(*v);
                }
                q.push(")");
            }
            if !any {
                return Ok(Vec::new());
            }
            q.build_query_as::<Contact>().persistent(false).fetch_all(pool).await
        })?;
        // A contact holding both a listed BSUID and a listed phone comes twice.
        let mut seen = std::collections::HashSet::new();
        Ok(rows.into_iter().filter(|c| seen.insert(c.id)).collect())
    }
}

macro_rules! matching {
    () => {
        concat!(
            "SELECT ",
            contact_columns!(),
            " FROM contacts WHERE org_id = $1 AND (user_id = $2 OR wa_id = $3) \
             ORDER BY created_at, id"
        )
    };
}
const MATCHING: &str = matching!();

/// Whether `c` holds `who`'s BSUID or phone (as [`MATCHING`] finds it).
/// Binds the identifiers of `c` as they were read (phone, BSUID, parent BSUID, username)
/// into a row of a batched contact write, for [`push_guard_as_read`] to compare.
pub(crate) fn bind_as_read<DB, Sep>(
    row: &mut sqlx::query_builder::Separated<'_, DB, Sep>,
    c: &Contact,
) where
    DB: sqlx::Database,
    Sep: std::fmt::Display,
    for<'t> Option<&'t str>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    row.push_bind(c.wa_id.as_deref())
        .push_bind(c.user_id.as_deref())
        .push_bind(c.parent_user_id.as_deref())
        .push_bind(c.username.as_deref());
}

/// Ends a batched `UPDATE contacts … FROM (VALUES …) AS v` (`v.column1` the contact's id)
/// whose rows hold the identifiers as read from column `first` on ([`bind_as_read`]): only
/// contacts of `org_id` that still hold them are written, and their ids returned. A
/// contact merged or given other identifiers since is left to the locked path.
pub(crate) fn push_guard_as_read<DB>(q: &mut sqlx::QueryBuilder<DB>, org_id: Uuid, first: usize)
where
    DB: sqlx::Database,
    for<'t> Uuid: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    // SQLite (3.51) otherwise walks every contact of the organisation by an `org_id` index
    // and probes the VALUES for each: 144 ms for 130 rows of an organisation of 100,000,
    // against 1.5 ms by the primary key with the `+` that keeps `org_id` off the index.
    let org = if DB::NAME == "SQLite" {
        "+contacts.org_id"
    } else {
        "contacts.org_id"
    };
    q.push(format!(") AS v WHERE contacts.id = v.column1 AND {org} = "));
    q.push_bind(org_id);
    q.push(format!(
        " AND contacts.wa_id IS NOT DISTINCT FROM v.column{} \
         AND contacts.user_id IS NOT DISTINCT FROM v.column{} \
         AND contacts.parent_user_id IS NOT DISTINCT FROM v.column{} \
         AND contacts.username IS NOT DISTINCT FROM v.column{} RETURNING contacts.id",
        first,
        first + 1,
        first + 2,
        first + 3
    ));
}

pub(crate) fn holds(c: &Contact, who: &Identity<'_>) -> bool {
    (who.user_id.is_some() && c.user_id.as_deref() == who.user_id)
        || (who.wa_id.is_some() && c.wa_id.as_deref() == who.wa_id)
}

/// Whether `who` tells anything new about the contacts that match it.
fn needs_write(current: &[Contact], who: &Identity<'_>) -> bool {
    match current {
        [] => false,
        [c] => learned(c, who, None) != *c,
        _ => true,
    }
}

/// `c` with what `who` (and an inbound message) shows: identifiers shown replace stored
/// ones; the name is filled only when missing; `last_inbound_at` only moves forward.
pub(crate) fn learned(c: &Contact, who: &Identity<'_>, inbound: Option<&Inbound<'_>>) -> Contact {
    let mut next = c.clone();
    let set = |slot: &mut Option<String>, v: Option<&str>| {
        if let Some(v) = v {
            *slot = Some(v.to_string());
        }
    };
    set(&mut next.wa_id, who.wa_id);
    set(&mut next.user_id, who.user_id);
    set(&mut next.parent_user_id, who.parent_user_id);
    set(&mut next.username, who.username);
    if let Some(i) = inbound {
        if next.name.is_none() {
            next.name = i.profile_name.map(str::to_string);
        }
        next.last_inbound_at = match (next.last_inbound_at, i.network_ts) {
            (Some(t), Some(n)) => Some(t.max(n)),
            (t, n) => t.or(n),
        };
    }
    next
}

fn older_first(a: Contact, b: Contact) -> (Contact, Contact) {
    if (a.created_at, a.id) <= (b.created_at, b.id) {
        (a, b)
    } else {
        (b, a)
    }
}

impl Tx {
    /// Finds, merges, creates (when `inbound` is given) and updates the contact `who` names.
    async fn resolve(
        &mut self,
        org_id: Uuid,
        who: &Identity<'_>,
        inbound: Option<Inbound<'_>>,
        at: i64,
    ) -> Result<Option<Observed>> {
        if !who.is_known() {
            return Ok(None);
        }
        let mut matches = self.lock_matching(org_id, who).await?;
        let mut created = false;
        if matches.is_empty() {
            let Some(i) = inbound else { return Ok(None) };
            match self.insert_contact(org_id, who, &i, at).await? {
                Some(c) => {
                    created = true;
                    matches.push(c);
                }
                // A concurrent notification created it first: use theirs.
                None => matches = self.lock_matching(org_id, who).await?,
            }
        }
        let mut iter = matches.into_iter();
        let Some(first) = iter.next() else {
            return Ok(None);
        };
        let mut merged = None;
        let mut contact = first;
        if let Some(second) = iter.next() {
            let (survivor, loser) = older_first(contact, second);
            merged = Some(loser.id);
            contact = self.merge(survivor, loser, at).await?;
        }
        let next = learned(&contact, who, inbound.as_ref());
        let mut contact = if next == contact {
            contact
        } else {
            self.store_identity(&next, at).await?
        };
        contact.tags = with_tx!(self, c => tags_of!(contact.id).fetch_all(&mut **c).await)?;
        Ok(Some(Observed {
            contact,
            created,
            merged,
        }))
    }

    /// The contacts holding `who`'s BSUID or phone, locked for this transaction, oldest first.
    async fn lock_matching(&mut self, org_id: Uuid, who: &Identity<'_>) -> Result<Vec<Contact>> {
        // FOR UPDATE (not NO KEY UPDATE): a merge deletes one of them.
        let sql = match self.backend() {
            Backend::Sqlite => MATCHING,
            Backend::Postgres => concat!(matching!(), " FOR UPDATE"),
        };
        let rows = with_tx!(self, c => sqlx::query_as::<_, Contact>(sql)
            .bind(org_id)
            .bind(who.user_id)
            .bind(who.wa_id)
            .fetch_all(&mut **c)
            .await)?;
        Ok(rows)
    }

    /// Creates the contact of a first inbound message; `None` when a concurrent one won.
    async fn insert_contact(
        &mut self,
        org_id: Uuid,
        who: &Identity<'_>,
        i: &Inbound<'_>,
        at: i64,
    ) -> Result<Option<Contact>> {
        let row = with_tx!(self, c => sqlx::query_as::<_, Contact>(concat!(
                "INSERT INTO contacts (id, org_id, wa_id, user_id, parent_user_id, username, name, \
                 custom_fields, consent_status, last_inbound_at, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'unknown', $9, $10, $10) \
                 ON CONFLICT DO NOTHING RETURNING ", contact_columns!()))
            .bind(i.new_contact_id)
            .bind(org_id)
            .bind(who.wa_id)
            .bind(who.user_id)
            .bind(who.parent_user_id)
            .bind(who.username)
            .bind(i.profile_name)
            .bind(Json(Map::new()))
            .bind(i.network_ts)
            .bind(at)
            .fetch_optional(&mut **c)
            .await)?;
        Ok(row)
    }

    /// Writes a contact's identifiers, name and `last_inbound_at` (`updated_at` bumped).
    async fn store_identity(&mut self, next: &Contact, at: i64) -> Result<Contact> {
        let row = with_tx!(self, c => sqlx::query_as::<_, Contact>(concat!(
                "UPDATE contacts SET wa_id = $2, user_id = $3, parent_user_id = $4, username = $5, \
                 name = $6, last_inbound_at = $7, updated_at = ",
                bump_updated_at!("contacts", "$8"),
                " WHERE id = $1 RETURNING ", contact_columns!()))
            .bind(next.id)
            .bind(&next.wa_id)
            .bind(&next.user_id)
            .bind(&next.parent_user_id)
            .bind(&next.username)
            .bind(&next.name)
            .bind(next.last_inbound_at)
            .bind(at)
            .fetch_one(&mut **c)
            .await)?;
        Ok(row)
    }

    /// Merges `loser` into `survivor` (the older one): tags, conversations (two on one
    /// number become one, keeping the survivor's id), messages and campaign recipients move;
    /// the survivor keeps its own name, fields and identifiers and takes the loser's where
    /// it has none; the later consent decision wins; `loser` is deleted.
    async fn merge(&mut self, survivor: Contact, loser: Contact, at: i64) -> Result<Contact> {
        let (s, l) = (survivor.id, loser.id);
        with_tx!(self, c => {
            sqlx::query(
                    "INSERT INTO contact_tags (org_id, contact_id, tag, created_at) \
                     SELECT org_id, $1, tag, created_at FROM contact_tags WHERE contact_id = $2 \
                     ON CONFLICT (contact_id, tag) DO NOTHING")
                .bind(s)
                .bind(l)
                .execute(&mut **c)
                .await?;
            sqlx::query("DELETE FROM contact_tags WHERE contact_id = $1")
                .bind(l)
                .execute(&mut **c)
                .await?;
            let convs: Vec<ConvRow> = sqlx::query_as(
                    "SELECT id, contact_id, phone_number_id, last_inbound_at, last_message_at \
                     FROM conversations WHERE contact_id = $1 OR contact_id = $2")
                .bind(s)
                .bind(l)
                .fetch_all(&mut **c)
                .await?;
            for lc in convs.iter().filter(|v| v.contact_id == l) {
                let keep = convs
                    .iter()
                    .find(|v| v.contact_id == s && v.phone_number_id == lc.phone_number_id);
                let target = keep.map_or(lc.id, |k| k.id);
                // Messages are reached through their conversation (indexed), not contact_id.
                sqlx::query("UPDATE messages SET contact_id = $1, conversation_id = $2 \
                             WHERE conversation_id = $3")
                    .bind(s)
                    .bind(target)
                    .bind(lc.id)
                    .execute(&mut **c)
                    .await?;
                match keep {
                    Some(k) => {
                        sqlx::query("DELETE FROM conversations WHERE id = $1")
                            .bind(lc.id)
                            .execute(&mut **c)
                            .await?;
                        sqlx::query("UPDATE conversations SET last_inbound_at = $2, \
                                     last_message_at = $3 WHERE id = $1")
                            .bind(k.id)
                            .bind(later(k.last_inbound_at, lc.last_inbound_at))
                            .bind(later(k.last_message_at, lc.last_message_at))
                            .execute(&mut **c)
                            .await?;
                    }
                    None => {
                        sqlx::query("UPDATE conversations SET contact_id = $1 WHERE id = $2")
                            .bind(s)
                            .bind(lc.id)
                            .execute(&mut **c)
                            .await?;
                    }
                }
            }
            sqlx::query(
                    "DELETE FROM campaign_recipients WHERE contact_id = $2 AND campaign_id IN \
                     (SELECT campaign_id FROM campaign_recipients WHERE contact_id = $1)")
                .bind(s)
                .bind(l)
                .execute(&mut **c)
                .await?;
            sqlx::query("UPDATE campaign_recipients SET contact_id = $1 WHERE contact_id = $2")
                .bind(s)
                .bind(l)
                .execute(&mut **c)
                .await?;
            sqlx::query("DELETE FROM contacts WHERE id = $1")
                .bind(l)
                .execute(&mut **c)
                .await?;
            Ok::<(), crate::StoreError>(())
        })?;
        let merged = merged_contact(survivor, loser);
        let row = with_tx!(self, c => sqlx::query_as::<_, Contact>(concat!(
                "UPDATE contacts SET wa_id = $2, user_id = $3, parent_user_id = $4, username = $5, \
                 name = $6, custom_fields = $7, consent_status = $8, consent_source = $9, \
                 consent_updated_at = $10, last_inbound_at = $11, blocked_at = $13, updated_at = ",
                bump_updated_at!("contacts", "$12"),
                " WHERE id = $1 RETURNING ", contact_columns!()))
            .bind(merged.id)
            .bind(&merged.wa_id)
            .bind(&merged.user_id)
            .bind(&merged.parent_user_id)
            .bind(&merged.username)
            .bind(&merged.name)
            .bind(Json(&merged.custom_fields))
            .bind(merged.consent_status.as_str())
            .bind(&merged.consent_source)
            .bind(merged.consent_updated_at)
            .bind(merged.last_inbound_at)
            .bind(at)
            .bind(merged.blocked_at)
            .fetch_one(&mut **c)
            .await)?;
        Ok(row)
    }
}

/// A conversation of one of the two contacts being merged.
#[derive(sqlx::FromRow)]
struct ConvRow {
    id: Uuid,
    contact_id: Uuid,
    phone_number_id: String,
    last_inbound_at: Option<i64>,
    last_message_at: Option<i64>,
}

fn later(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    a.max(b)
}

/// The survivor's values, completed by the loser's (see [`Tx::merge`]).
fn merged_contact(s: Contact, l: Contact) -> Contact {
    let mut fields: Map<String, Value> = l.custom_fields.as_object().cloned().unwrap_or_default();
    if let Some(own) = s.custom_fields.as_object() {
        for (k, v) in own {
            fields.insert(k.clone(), v.clone());
        }
    }
    let loser_consent_later = l.consent_updated_at > s.consent_updated_at;
    Contact {
        wa_id: s.wa_id.or(l.wa_id),
        user_id: s.user_id.or(l.user_id),
        parent_user_id: s.parent_user_id.or(l.parent_user_id),
        username: s.username.or(l.username),
        name: s.name.or(l.name),
        custom_fields: Value::Object(fields),
        consent_status: if loser_consent_later {
            l.consent_status
        } else {
            s.consent_status
        },
        consent_source: if loser_consent_later {
            l.consent_source
        } else {
            s.consent_source
        },
        consent_updated_at: s.consent_updated_at.max(l.consent_updated_at),
        last_inbound_at: later(s.last_inbound_at, l.last_inbound_at),
        // One customer: blocked when either contact was.
        blocked_at: s.blocked_at.or(l.blocked_at),
        ..s
    }
}
