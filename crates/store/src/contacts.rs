//! Contacts: the customers an organisation talks to, keyed by their phone (`wa_id`), by
//! their business-scoped user id (`user_id`, BSUID), or both (a username-only customer has
//! no phone: the network withholds it). Matching and merging by identity is in `identity.rs`.
//!
//! Every change sets `updated_at` (strictly increasing, see `bump_updated_at!`), including
//! consent and tag changes, so `list_contacts_updated_since` is a complete change feed.
//! Writes that do not change anything (same name, same fields) leave the row untouched.

use std::collections::HashMap;

use serde_json::{Map, Value};
use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{BeginWrite as _, Db, Tx, with_pool, with_tx};
use crate::error::{Result, StoreError};
use crate::sql::{bump_updated_at, like_contains, lock_for_write, push_id_list, split_after};
use tern_domain::contact::Consent;

/// A contact with its tags.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Contact {
    pub id: Uuid,
    pub org_id: Uuid,
    /// The customer's phone: international number, digits only, no `+`; `None` when the
    /// network withholds it (a customer known by username).
    pub wa_id: Option<String>,
    pub name: Option<String>,
    /// Values of the organisation's custom contact fields, keyed by field key (an object).
    #[sqlx(json)]
    pub custom_fields: Value,
    /// `unknown` | `opted_in` | `opted_out`.
    #[sqlx(try_from = "String")]
    pub consent_status: Consent,
    pub consent_source: Option<String>,
    pub consent_updated_at: Option<i64>,
    /// The network's timestamp of the customer's latest inbound message (never moves back).
    pub last_inbound_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Business-scoped user id (`US.13491208655302741918`), exactly as the network gives it.
    pub user_id: Option<String>,
    /// Parent BSUID shared across a managed business's portfolios (`US.ENT.…`).
    pub parent_user_id: Option<String>,
    /// The customer's WhatsApp username, when they have one.
    pub username: Option<String>,
    /// When the organisation blocked the customer at the network (`None`: not blocked).
    pub blocked_at: Option<i64>,
    /// Sorted bytewise.
    #[sqlx(skip)]
    pub tags: Vec<String>,
}

macro_rules! contact_columns {
    () => {
        "id, org_id, wa_id, name, custom_fields, consent_status, consent_source, \
         consent_updated_at, last_inbound_at, created_at, updated_at, user_id, parent_user_id, \
         username, blocked_at"
    };
}
pub(crate) use contact_columns;

/// One of the network's identifiers of a customer, by which a contact is found or created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContactKey<'a> {
    /// Phone digits without `+`.
    WaId(&'a str),
    /// Business-scoped user id.
    UserId(&'a str),
}

impl ContactKey<'_> {
    pub fn value(&self) -> &str {
        match self {
            ContactKey::WaId(v) | ContactKey::UserId(v) => v,
        }
    }
}

/// A statement per [`ContactKey`]: `$sql!("wa_id")` or `$sql!("user_id")` with the key's
/// column (and, for `user_id`, the partial unique index's predicate as `$where`).
macro_rules! by_key {
    ($key:expr, $sql:ident) => {
        match $key {
            ContactKey::WaId(_) => $sql!("wa_id", ""),
            ContactKey::UserId(_) => $sql!("user_id", " WHERE user_id IS NOT NULL"),
        }
    };
}

/// The query for one contact's tags, sorted; run on a pool or inside a transaction.
macro_rules! tags_of {
    ($contact_id:expr) => {
        sqlx::query_scalar::<_, String>(
            "SELECT tag FROM contact_tags WHERE contact_id = $1 ORDER BY tag",
        )
        .bind($contact_id)
    };
}
pub(crate) use tags_of;

/// The statement that stores a contact's new name and fields (`$1` id, `$2` org, `$3` name,
/// `$4` fields, `$5` at), returning the row.
macro_rules! update_name_and_fields {
    ($contact:expr, $name:expr, $fields:expr, $at:expr) => {
        sqlx::query_as::<_, Contact>(concat!(
            "UPDATE contacts SET name = $3, custom_fields = $4, updated_at = ",
            bump_updated_at!("contacts", "$5"),
            " WHERE id = $1 AND org_id = $2 RETURNING ",
            contact_columns!()
        ))
        .bind($contact.id)
        .bind($contact.org_id)
        .bind($name)
        .bind(Json($fields))
        .bind($at)
    };
}

/// Applies a custom-fields patch: a key with a JSON `null` is removed, any other value
/// replaces the key's value. Returns whether `fields` changed.
pub(crate) fn merge_patch(fields: &mut Map<String, Value>, patch: &Map<String, Value>) -> bool {
    let mut changed = false;
    for (key, value) in patch {
        if value.is_null() {
            changed |= fields.remove(key).is_some();
        } else if fields.get(key) != Some(value) {
            fields.insert(key.clone(), value.clone());
            changed = true;
        }
    }
    changed
}

/// The contact's new name and fields if `name` / `patch` change anything.
fn edited(
    contact: &Contact,
    name: Option<Option<&str>>,
    patch: Option<&Map<String, Value>>,
) -> Option<(Option<String>, Map<String, Value>)> {
    let mut fields = contact
        .custom_fields
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut changed = patch.is_some_and(|p| merge_patch(&mut fields, p));
    let new_name = match name {
        Some(n) => n.map(str::to_owned),
        None => contact.name.clone(),
    };
    changed |= new_name != contact.name;
    changed.then_some((new_name, fields))
}

/// Digits of a phone-number-like search query (`+44 20-7946 0958` → `442079460958`), or
/// `None` when the query holds anything else.
fn phone_digits(q: &str) -> Option<String> {
    let mut digits = String::new();
    for c in q.chars() {
        match c {
            '0'..='9' => digits.push(c),
            '+' | '-' | '(' | ')' | '.' | ' ' => {}
            _ => return None,
        }
    }
    (!digits.is_empty()).then_some(digits)
}

impl Tx {
    /// [`Db::set_contact_consent`] in this transaction (the `contact.consent` event joins
    /// it); also says whether the decision was recorded (`false`: an older one, ignored).
    pub async fn set_contact_consent(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        status: Consent,
        source: Option<&str>,
        at: i64,
    ) -> Result<(Contact, bool)> {
        const UPDATE: &str = concat!(
            "UPDATE contacts SET consent_status = $3, consent_source = $4, \
             consent_updated_at = $5, updated_at = ",
            bump_updated_at!("contacts", "$5"),
            " WHERE id = $1 AND org_id = $2 \
               AND (consent_updated_at IS NULL OR consent_updated_at <= $5) \
             RETURNING ",
            contact_columns!()
        );
        const GET: &str = concat!(
            "SELECT ",
            contact_columns!(),
            " FROM contacts WHERE id = $1 AND org_id = $2"
        );
        let updated = with_tx!(self, conn => sqlx::query_as::<_, Contact>(UPDATE)
            .bind(id)
            .bind(org_id)
            .bind(status.as_str())
            .bind(source)
            .bind(at)
            .fetch_optional(&mut **conn)
            .await)?;
        let changed = updated.is_some();
        let mut contact = match updated {
            Some(c) => c,
            None => with_tx!(self, conn => sqlx::query_as::<_, Contact>(GET)
                .bind(id)
                .bind(org_id)
                .fetch_optional(&mut **conn)
                .await)?
            .ok_or(StoreError::NotFound)?,
        };
        contact.tags = with_tx!(self, conn => tags_of!(contact.id).fetch_all(&mut **conn).await)?;
        Ok((contact, changed))
    }

    /// [`Db::upsert_contact`] inside the caller's transaction.
    pub async fn upsert_contact(
        &mut self,
        org_id: Uuid,
        key: ContactKey<'_>,
        name: Option<&str>,
        custom_fields_patch: Option<&Map<String, Value>>,
        new_id: Uuid,
        at: i64,
    ) -> Result<(Contact, bool)> {
        let mut initial = Map::new();
        if let Some(patch) = custom_fields_patch {
            merge_patch(&mut initial, patch);
        }
        macro_rules! insert {
            ($col:literal, $pred:literal) => {
                concat!(
                    "INSERT INTO contacts (id, org_id, ",
                    $col,
                    ", name, custom_fields, \
                     consent_status, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, 'unknown', $6, $6) \
                     ON CONFLICT (org_id, ",
                    $col,
                    ")",
                    $pred,
                    " DO NOTHING RETURNING ",
                    contact_columns!()
                )
            };
        }
        macro_rules! select {
            ($col:literal, $pred:literal) => {
                concat!(
                    "SELECT ",
                    contact_columns!(),
                    " FROM contacts WHERE org_id = $1 AND ",
                    $col,
                    " = $2"
                )
            };
        }
        let insert: &'static str = by_key!(key, insert);
        let lock: &'static str = match key {
            ContactKey::WaId(_) => lock_for_write!(self, select!("wa_id", "")),
            ContactKey::UserId(_) => lock_for_write!(self, select!("user_id", "")),
        };
        with_tx!(self, tx => {
            // Insert-if-absent first: on PostgreSQL a concurrent insert of the same key
            // waits here for the other transaction and then finds the row below.
            let inserted = sqlx::query_as::<_, Contact>(insert)
                .bind(new_id)
                .bind(org_id)
                .bind(key.value())
                .bind(name)
                .bind(Json(&initial))
                .bind(at)
                .fetch_optional(&mut **tx)
                .await?;
            if let Some(contact) = inserted {
                return Ok((contact, true));
            }
            let current = sqlx::query_as::<_, Contact>(lock)
                .bind(org_id)
                .bind(key.value())
                .fetch_one(&mut **tx)
                .await?;
            let mut contact = match edited(&current, name.map(Some), custom_fields_patch) {
                Some((name, fields)) => update_name_and_fields!(current, name, &fields, at)
                    .fetch_one(&mut **tx)
                    .await?,
                None => current,
            };
            contact.tags = tags_of!(contact.id).fetch_all(&mut **tx).await?;
            Ok((contact, false))
        })
    }

    /// Whether the organisation has a contact with this identifier.
    pub async fn contact_exists(&mut self, org_id: Uuid, key: ContactKey<'_>) -> Result<bool> {
        macro_rules! count {
            ($col:literal, $pred:literal) => {
                concat!(
                    "SELECT COUNT(*) FROM contacts WHERE org_id = $1 AND ",
                    $col,
                    " = $2"
                )
            };
        }
        let sql: &'static str = by_key!(key, count);
        let n = with_tx!(self, tx => sqlx::query_scalar::<_, i64>(sql)
            .bind(org_id)
            .bind(key.value())
            .fetch_one(&mut **tx)
            .await)?;
        Ok(n > 0)
    }
}

impl Db {
    /// Creates the organisation's contact for `key` (with id `new_id`, `created_at = at`)
    /// or updates the existing one, and returns it with `created`.
    ///
    /// `name` (when `Some`) replaces the name; `custom_fields_patch` is merged key by key
    /// (a `null` value removes the key). An update that changes nothing leaves `updated_at`
    /// alone. Racing calls for one key (threads or processes) produce one row, and every
    /// caller's patch is applied (they serialise on the row).
    pub async fn upsert_contact(
        &self,
        org_id: Uuid,
        key: ContactKey<'_>,
        name: Option<&str>,
        custom_fields_patch: Option<&Map<String, Value>>,
        new_id: Uuid,
        at: i64,
    ) -> Result<(Contact, bool)> {
        let mut tx = self.begin().await?;
        let r = tx
            .upsert_contact(org_id, key, name, custom_fields_patch, new_id, at)
            .await?;
        tx.commit().await?;
        Ok(r)
    }

    /// The organisation's contact `id` with its tags (`None` if missing or another
    /// organisation's).
    pub async fn get_contact(&self, org_id: Uuid, id: Uuid) -> Result<Option<Contact>> {
        let contact = with_pool!(self, pool => sqlx::query_as::<_, Contact>(concat!(
                "SELECT ", contact_columns!(), " FROM contacts WHERE id = $1 AND org_id = $2"))
            .bind(id)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        self.with_tags(contact).await
    }

    /// [`Db::upsert_contact`] by phone.
    pub async fn upsert_contact_by_wa_id(
        &self,
        org_id: Uuid,
        wa_id: &str,
        name: Option<&str>,
        custom_fields_patch: Option<&Map<String, Value>>,
        new_id: Uuid,
        at: i64,
    ) -> Result<(Contact, bool)> {
        let key = ContactKey::WaId(wa_id);
        self.upsert_contact(org_id, key, name, custom_fields_patch, new_id, at)
            .await
    }

    /// [`Db::get_contact_by_key`] by phone.
    pub async fn get_contact_by_wa_id(&self, org_id: Uuid, wa_id: &str) -> Result<Option<Contact>> {
        self.get_contact_by_key(org_id, ContactKey::WaId(wa_id))
            .await
    }

    /// The organisation's contact with this identifier, with its tags.
    pub async fn get_contact_by_key(
        &self,
        org_id: Uuid,
        key: ContactKey<'_>,
    ) -> Result<Option<Contact>> {
        macro_rules! select {
            ($col:literal, $pred:literal) => {
                concat!(
                    "SELECT ",
                    contact_columns!(),
                    " FROM contacts WHERE org_id = $1 AND ",
                    $col,
                    " = $2"
                )
            };
        }
        let sql: &'static str = by_key!(key, select);
        let contact = with_pool!(self, pool => sqlx::query_as::<_, Contact>(sql)
            .bind(org_id)
            .bind(key.value())
            .fetch_optional(pool)
            .await)?;
        self.with_tags(contact).await
    }

    /// Updates a contact: `name` `Some(Some(n))` sets, `Some(None)` clears, `None` keeps it;
    /// `custom_fields_patch` merges as in [`Db::upsert_contact_by_wa_id`]. `updated_at`
    /// moves only if something changed. `NotFound` if missing or another organisation's.
    pub async fn update_contact(
        &self,
        org_id: Uuid,
        id: Uuid,
        name: Option<Option<&str>>,
        custom_fields_patch: Option<&Map<String, Value>>,
        at: i64,
    ) -> Result<Contact> {
        let lock = lock_for_write!(
            self,
            "SELECT ",
            contact_columns!(),
            " FROM contacts WHERE id = $1 AND org_id = $2"
        );
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let current = sqlx::query_as::<_, Contact>(lock)
                .bind(id)
                .bind(org_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or(StoreError::NotFound)?;
            let mut contact = match edited(&current, name, custom_fields_patch) {
                Some((name, fields)) => update_name_and_fields!(current, name, &fields, at)
                    .fetch_one(&mut *tx)
                    .await?,
                None => current,
            };
            contact.tags = tags_of!(contact.id).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            Ok(contact)
        })
    }

    /// Records a consent decision (`status`: `unknown` | `opted_in` | `opted_out`) made at
    /// `at`, and returns the contact. A decision older than the stored one
    /// (`at < consent_updated_at`, e.g. a late webhook) is ignored and the contact is returned
    /// unchanged. `NotFound` if missing or another organisation's.
    pub async fn set_contact_consent(
        &self,
        org_id: Uuid,
        id: Uuid,
        status: Consent,
        source: Option<&str>,
        at: i64,
    ) -> Result<Contact> {
        let mut tx = self.begin().await?;
        let r = tx
            .set_contact_consent(org_id, id, status, source, at)
            .await?;
        tx.commit().await?;
        Ok(r.0)
    }

    pub async fn count_contacts(&self, org_id: Uuid) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM contacts WHERE org_id = $1")
            .bind(org_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }

    /// One page of the organisation's contacts, newest first by `(created_at, id)`,
    /// starting after the keyset position `after = (created_at, id)`.
    pub async fn list_contacts(
        &self,
        org_id: Uuid,
        after: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<Contact>> {
        let (after_ts, after_id) = split_after(after);
        let contacts = with_pool!(self, pool => sqlx::query_as::<_, Contact>(concat!(
                "SELECT ", contact_columns!(), " FROM contacts \
                 WHERE org_id = $1 AND ($2 IS NULL OR (created_at, id) < ($2, $3)) \
                 ORDER BY created_at DESC, id DESC LIMIT $4"))
            .bind(org_id)
            .bind(after_ts)
            .bind(after_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        self.with_tags_all(contacts).await
    }

    /// Like [`Db::list_contacts`], restricted to contacts whose name or username contains `q`
    /// (case-insensitive; ASCII case folding only on SQLite; a leading `@` of a username
    /// search is ignored), whose `user_id` is `q`, or, when `q` looks like a phone number
    /// (digits, `+`, spaces, `-`, `.`, parentheses), whose `wa_id` contains its digits.
    /// `%` and `_` in `q` are literal. A blank `q` matches every contact.
    pub async fn search_contacts(
        &self,
        org_id: Uuid,
        q: &str,
        after: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<Contact>> {
        let q = q.trim();
        if q.is_empty() {
            return self.list_contacts(org_id, after, limit).await;
        }
        let name_pattern = like_contains(q);
        let username_pattern = like_contains(q.strip_prefix('@').unwrap_or(q));
        let digits_pattern = phone_digits(q).map(|d| like_contains(&d));
        let (after_ts, after_id) = split_after(after);
        let contacts = with_pool!(self, pool => sqlx::query_as::<_, Contact>(concat!(
                "SELECT ", contact_columns!(), " FROM contacts \
                 WHERE org_id = $1 \
                   AND (LOWER(name) LIKE LOWER($2) ESCAPE '!' OR wa_id LIKE $3 ESCAPE '!' \
                     OR LOWER(username) LIKE LOWER($7) ESCAPE '!' OR user_id = $8) \
                   AND ($4 IS NULL OR (created_at, id) < ($4, $5)) \
                 ORDER BY created_at DESC, id DESC LIMIT $6"))
            .bind(org_id)
            .bind(name_pattern)
            .bind(digits_pattern)
            .bind(after_ts)
            .bind(after_id)
            .bind(limit)
            .bind(username_pattern)
            .bind(q)
            .fetch_all(pool)
            .await)?;
        self.with_tags_all(contacts).await
    }

    /// Contacts changed strictly after `since_ms`, oldest change first by
    /// `(updated_at, id)`, starting after the keyset position `after = (updated_at, id)`.
    /// Paging with the last row's `(updated_at, id)` never skips or repeats a row that did not
    /// change meanwhile, even when many rows share one `updated_at`; a row changed meanwhile
    /// moves to the end of the feed.
    pub async fn list_contacts_updated_since(
        &self,
        org_id: Uuid,
        since_ms: i64,
        after: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<Contact>> {
        let (after_ts, after_id) = split_after(after);
        let contacts = with_pool!(self, pool => sqlx::query_as::<_, Contact>(concat!(
                "SELECT ", contact_columns!(), " FROM contacts \
                 WHERE org_id = $1 AND updated_at > $2 \
                   AND ($3 IS NULL OR (updated_at, id) > ($3, $4)) \
                 ORDER BY updated_at, id LIMIT $5"))
            .bind(org_id)
            .bind(since_ms)
            .bind(after_ts)
            .bind(after_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        self.with_tags_all(contacts).await
    }

    /// Loads the tags of one contact.
    pub(crate) async fn load_tags(&self, mut contact: Contact) -> Result<Contact> {
        contact.tags = with_pool!(self, pool => tags_of!(contact.id).fetch_all(pool).await)?;
        Ok(contact)
    }

    async fn with_tags(&self, contact: Option<Contact>) -> Result<Option<Contact>> {
        match contact {
            Some(contact) => Ok(Some(self.load_tags(contact).await?)),
            None => Ok(None),
        }
    }

    /// Loads the tags of a page of contacts in one query.
    async fn with_tags_all(&self, mut contacts: Vec<Contact>) -> Result<Vec<Contact>> {
        if contacts.is_empty() {
            return Ok(contacts);
        }
        let rows: Vec<(Uuid, String)> = with_pool!(self, pool => {
            let mut query = sqlx::QueryBuilder::new(
                "SELECT contact_id, tag FROM contact_tags WHERE contact_id IN ");
            push_id_list(&mut query, contacts.iter().map(|c| c.id));
            query.push(" ORDER BY tag");
            query.build_query_as::<(Uuid, String)>().fetch_all(pool).await
        })?;
        let mut by_contact: HashMap<Uuid, Vec<String>> = HashMap::new();
        for (contact_id, tag) in rows {
            by_contact.entry(contact_id).or_default().push(tag);
        }
        for contact in &mut contacts {
            contact.tags = by_contact.remove(&contact.id).unwrap_or_default();
        }
        Ok(contacts)
    }
}

#[cfg(test)]
mod tests {
    use super::{merge_patch, phone_digits};
    use serde_json::json;

    #[test]
    fn patches_merge_and_null_removes() {
        let mut fields = json!({"a": 1, "b": "x"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let patch = json!({"a": 1, "b": null, "c": [1]})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(merge_patch(&mut fields, &patch));
        assert_eq!(
            serde_json::Value::Object(fields.clone()),
            json!({"a": 1, "c": [1]})
        );
        assert!(!merge_patch(&mut fields, &patch));
        let absent = json!({"zzz": null})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert!(!merge_patch(&mut fields, &absent));
    }

    #[test]
    fn phone_like_queries_yield_digits() {
        assert_eq!(
            phone_digits("+44 20-7946 (0958)").as_deref(),
            Some("442079460958")
        );
        assert_eq!(phone_digits("555"), Some("555".into()));
        assert_eq!(phone_digits("ann 5"), None);
        assert_eq!(phone_digits("+ -"), None);
    }
}
