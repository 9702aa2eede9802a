//! Campaigns, their recipients and progress counters (migration `0013_campaigns`).
//!
//! A recipient row is written once per contact at resolve (set-based: one read of the
//! audience, multi-row inserts) and moves `pending` → `messaged` (its one message's id) /
//! `skipped` / `expired`. Progress lives in `campaign_counters`, sharded so the status
//! writers of one campaign's messages do not queue on one row, and `campaign_reasons`
//! (skip reasons, failure codes); reading progress never scans the campaign's messages.

use serde_json::Value;
use sqlx::types::Json;
use tern_domain::campaign::{
    Audience, AudienceSpec, Bucket, PauseReason, ReasonKind, RecipientState, SkipReason, Status,
};
use tern_domain::contact::Consent;
use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::Result;
use crate::sql::{ROWS_PER_STATEMENT, lock_for_write, push_id_list, split_after};

/// Counter rows per campaign. Each status change of a campaign message updates one of them
/// and holds its lock until it commits (a WAL flush on PostgreSQL): with 8 rows, 1,000
/// sends a second queued on them (measured: record_send waiting on `Lock`); 64 rows cost
/// nothing to sum.
pub const COUNTER_SHARDS: i64 = 64;

/// The shard of a message's counter row.
pub fn counter_shard(message_id: Uuid) -> i64 {
    i64::from(message_id.as_bytes()[15]) % COUNTER_SHARDS
}

/// A stored campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct Campaign {
    pub id: Uuid,
    pub org_id: Uuid,
    pub name: String,
    pub status: Status,
    pub template_name: String,
    pub template_language: String,
    pub phone_number_id: String,
    /// `AudienceSpec::to_json`.
    pub audience: Json<Value>,
    /// The template's parameters (`Params::to_json`).
    pub params: Json<Value>,
    pub scheduled_at: Option<i64>,
    pub expires_at: Option<i64>,
    pub recipient_count: Option<i64>,
    pub pause_reason: Option<PauseReason>,
    pub resolved_at: Option<i64>,
    pub launched_at: Option<i64>,
    pub paused_at: Option<i64>,
    pub completed_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    /// What the recipients not skipped cost at resolve (minor units; `None` before).
    pub estimated_cost_minor: Option<i64>,
}

/// A campaign as stored (names as text), read back into a [`Campaign`].
#[derive(sqlx::FromRow)]
struct CampaignRow {
    id: Uuid,
    org_id: Uuid,
    name: String,
    #[sqlx(try_from = "String")]
    status: Status,
    template_name: String,
    template_language: String,
    phone_number_id: String,
    audience: Json<Value>,
    variables: Json<Value>,
    scheduled_at: Option<i64>,
    expires_at: Option<i64>,
    recipient_count: Option<i64>,
    pause_reason: Option<String>,
    resolved_at: Option<i64>,
    launched_at: Option<i64>,
    paused_at: Option<i64>,
    completed_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
    estimated_cost_minor: Option<i64>,
}

impl CampaignRow {
    fn into_campaign(self) -> Result<Campaign> {
        Ok(Campaign {
            id: self.id,
            org_id: self.org_id,
            name: self.name,
            status: self.status,
            template_name: self.template_name,
            template_language: self.template_language,
            phone_number_id: self.phone_number_id,
            audience: self.audience,
            params: self.variables,
            scheduled_at: self.scheduled_at,
            expires_at: self.expires_at,
            recipient_count: self.recipient_count,
            pause_reason: self.pause_reason.map(decode).transpose()?,
            resolved_at: self.resolved_at,
            launched_at: self.launched_at,
            paused_at: self.paused_at,
            completed_at: self.completed_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
            estimated_cost_minor: self.estimated_cost_minor,
        })
    }
}

macro_rules! campaign_columns {
    () => {
        "id, org_id, name, status, template_name, template_language, phone_number_id, \
         audience, variables, scheduled_at, expires_at, recipient_count, pause_reason, \
         resolved_at, launched_at, paused_at, completed_at, created_at, updated_at, \
         estimated_cost_minor"
    };
}

/// A campaign's recipients per bucket (summed over the counter shards).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct CampaignCounts {
    pub pending: i64,
    pub queued: i64,
    pub sent: i64,
    pub delivered: i64,
    pub read: i64,
    pub failed: i64,
    pub skipped: i64,
    pub expired: i64,
}

impl CampaignCounts {
    pub fn total(&self) -> i64 {
        self.pending
            + self.queued
            + self.sent
            + self.delivered
            + self.read
            + self.failed
            + self.skipped
            + self.expired
    }

    /// Recipients with an outcome still to come: not yet messaged, or messaged and not yet
    /// taken by the network.
    pub fn open(&self) -> i64 {
        self.pending + self.queued
    }
}

macro_rules! sum_counts {
    () => {
        "CAST(COALESCE(SUM(pending), 0) AS BIGINT) AS pending, CAST(COALESCE(SUM(queued), 0) AS BIGINT) AS queued, \
     CAST(COALESCE(SUM(sent), 0) AS BIGINT) AS sent, CAST(COALESCE(SUM(delivered), 0) AS BIGINT) AS delivered, \
     CAST(COALESCE(SUM(read), 0) AS BIGINT) AS read, CAST(COALESCE(SUM(failed), 0) AS BIGINT) AS failed, \
     CAST(COALESCE(SUM(skipped), 0) AS BIGINT) AS skipped, CAST(COALESCE(SUM(expired), 0) AS BIGINT) AS expired"
    };
}

/// A contact of the audience, as resolve reads it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct AudienceContact {
    pub id: Uuid,
    pub name: Option<String>,
    pub wa_id: Option<String>,
    pub user_id: Option<String>,
    pub custom_fields: Json<Value>,
    #[sqlx(try_from = "String")]
    pub consent_status: Consent,
    /// When the organisation blocked the contact (skipped as `blocked`).
    pub blocked_at: Option<i64>,
}

/// A recipient to write at resolve.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecipient {
    pub contact_id: Uuid,
    /// `None`: pending; `Some(reason)`: skipped.
    pub skipped: Option<SkipReason>,
    /// The filled-in template variables.
    pub variables: Option<Vec<String>>,
}

impl NewRecipient {
    /// The row's stored state.
    fn state(&self) -> RecipientState {
        match self.skipped {
            Some(_) => RecipientState::Skipped,
            None => RecipientState::Pending,
        }
    }
}

/// A stored name read back as its enum (a name no enum holds is a decoding error, as with
/// `try_from = "String"` in a row).
fn decode<T: TryFrom<String, Error = tern_domain::UnknownName>>(s: String) -> Result<T> {
    T::try_from(s).map_err(|e| crate::error::StoreError::Backend(sqlx::Error::Decode(Box::new(e))))
}

/// A pending recipient with what its send needs.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PendingRecipient {
    pub contact_id: Uuid,
    pub variables: Option<Json<Vec<String>>>,
    pub wa_id: Option<String>,
    pub user_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub consent_status: Consent,
    /// When the organisation blocked the contact (skipped as `blocked`).
    pub blocked_at: Option<i64>,
    /// The contact's conversation on the campaign's number, if any.
    pub conversation_id: Option<Uuid>,
}

/// A recipient as `GET /campaigns/{id}/recipients` shows it.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct RecipientRow {
    pub contact_id: Uuid,
    #[sqlx(try_from = "String")]
    pub status: Bucket,
    pub message_id: Option<Uuid>,
    /// The skip reason, or the message's failure code.
    pub reason: Option<String>,
    pub updated_at: i64,
}

/// The bucket of a recipient row joined to its message (`r`, `m`).
macro_rules! recipient_bucket {
    () => {
        "CASE WHEN r.message_id IS NULL OR r.status = 'expired' THEN r.status \
              WHEN m.status IN ('accepted', 'sending') THEN 'queued' \
              WHEN m.status IS NULL THEN 'queued' ELSE m.status END"
    };
}

impl Db {
    /// [`Tx::insert_campaign`] in a transaction of its own.
    pub async fn insert_campaign(&self, c: &Campaign) -> Result<()> {
        let mut tx = self.begin().await?;
        tx.insert_campaign(c).await?;
        tx.commit().await
    }

    pub async fn get_campaign(&self, org_id: Uuid, id: Uuid) -> Result<Option<Campaign>> {
        let c = with_pool!(self, pool => sqlx::query_as::<_, CampaignRow>(concat!(
                "SELECT ", campaign_columns!(), " FROM campaigns WHERE org_id = $1 AND id = $2"))
            .bind(org_id)
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        c.map(CampaignRow::into_campaign).transpose()
    }

    /// The organisation's campaigns, newest first, after `after` (created_at, id).
    pub async fn list_campaigns(
        &self,
        org_id: Uuid,
        status: Option<Status>,
        after: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<Campaign>> {
        let (after_ts, after_id) = split_after(after);
        let rows = with_pool!(self, pool => sqlx::query_as::<_, CampaignRow>(concat!(
                "SELECT ", campaign_columns!(), " FROM campaigns \
                 WHERE org_id = $1 AND ($2 IS NULL OR status = $2) \
                   AND ($3 IS NULL OR (created_at, id) < ($3, $4)) \
                 ORDER BY created_at DESC, id DESC LIMIT $5"))
            .bind(org_id)
            .bind(status.map(Status::as_str))
            .bind(after_ts)
            .bind(after_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        rows.into_iter().map(CampaignRow::into_campaign).collect()
    }

    pub async fn count_campaigns(&self, org_id: Uuid) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM campaigns WHERE org_id = $1")
            .bind(org_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }

    /// Scheduled campaigns due at `now`, running ones and paused ones past their expiry (their
    /// queued messages end): the campaign worker's list.
    pub async fn active_campaigns(&self, now: i64, limit: i64) -> Result<Vec<(Uuid, Uuid)>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, (Uuid, Uuid)>(
                "SELECT org_id, id FROM campaigns \
                 WHERE status = 'running' OR (status = 'scheduled' AND scheduled_at <= $1) \
                    OR (status = 'paused' AND expires_at <= $1) \
                 ORDER BY id LIMIT $2")
            .bind(now)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// Takes (or extends) the lease on working a campaign for `owner` until `until`: `false`
    /// when another worker holds it.
    pub async fn lease_campaign(
        &self,
        id: Uuid,
        owner: &str,
        now: i64,
        until: i64,
    ) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE campaigns SET lease_owner = $2, locked_until = $4 WHERE id = $1 \
                 AND (locked_until IS NULL OR locked_until <= $3 OR lease_owner = $2)")
            .bind(id)
            .bind(owner)
            .bind(now)
            .bind(until)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// The contacts of an audience (ids ascending), with what resolve needs of each.
    pub async fn audience_contacts(
        &self,
        org_id: Uuid,
        spec: &AudienceSpec,
    ) -> Result<Vec<AudienceContact>> {
        const SELECT: &str = "SELECT c.id, c.name, c.wa_id, c.user_id, c.custom_fields, \
             c.consent_status, c.blocked_at FROM contacts c WHERE c.org_id = ";
        let mut out = Vec::new();
        // contact_ids: one statement per ROWS_PER_STATEMENT ids; the rest: one statement.
        let chunks: Vec<Option<&[Uuid]>> = match &spec.audience {
            Audience::ContactIds(ids) => ids.chunks(ROWS_PER_STATEMENT).map(Some).collect(),
            _ => vec![None],
        };
        for chunk in chunks {
            let rows = with_pool!(self, pool => {
                let mut q = sqlx::QueryBuilder::new(SELECT);
                q.push_bind(org_id);
                match (&spec.audience, chunk) {
                    (Audience::ContactIds(_), Some(ids)) => {
                        q.push(" AND c.id IN ");
                        push_id_list(&mut q, ids.iter().copied());
                    }
                    (Audience::Tags { tags, all }, _) => {
                        q.push(" AND c.id IN (SELECT contact_id FROM contact_tags WHERE org_id = ");
                        q.push_bind(org_id);
                        q.push(" AND tag IN (");
                        let mut list = q.separated(", ");
                        for t in tags {
                            list.push_bind(t.as_str());
                        }
                        q.push(")");
                        if *all {
                            q.push(" GROUP BY contact_id HAVING COUNT(*) = ");
                            q.push_bind(i64::try_from(tags.len()).unwrap_or(i64::MAX));
                        }
                        q.push(")");
                    }
                    _ => {}
                }
                if !spec.exclude_tags.is_empty() {
                    q.push(" AND c.id NOT IN (SELECT contact_id FROM contact_tags WHERE org_id = ");
                    q.push_bind(org_id);
                    q.push(" AND tag IN (");
                    let mut list = q.separated(", ");
                    for t in &spec.exclude_tags {
                        list.push_bind(t.as_str());
                    }
                    q.push("))");
                }
                q.push(" ORDER BY c.id");
                q.build_query_as::<AudienceContact>()
                    .persistent(false)
                    .fetch_all(pool)
                    .await
            })?;
            out.extend(rows);
        }
        if chunk_count(spec) > 1 {
            out.sort_by_key(|c| c.id);
        }
        Ok(out)
    }

    /// Up to `limit` pending recipients (contact order), with their contact's address,
    /// consent and conversation on `phone_number_id`.
    pub async fn pending_recipients(
        &self,
        campaign_id: Uuid,
        phone_number_id: &str,
        limit: i64,
    ) -> Result<Vec<PendingRecipient>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, PendingRecipient>(
                "SELECT r.contact_id, r.variables, c.wa_id, c.user_id, c.consent_status, \
                 c.blocked_at, v.id AS conversation_id \
                 FROM campaign_recipients r JOIN contacts c ON c.id = r.contact_id \
                 LEFT JOIN conversations v ON v.contact_id = r.contact_id AND v.phone_number_id = $2 \
                 WHERE r.campaign_id = $1 AND r.status = 'pending' \
                 ORDER BY r.contact_id LIMIT $3")
            .bind(campaign_id)
            .bind(phone_number_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// The campaign's counts (summed over its shards).
    pub async fn campaign_counts(&self, campaign_id: Uuid) -> Result<CampaignCounts> {
        let c = with_pool!(self, pool => sqlx::query_as::<_, CampaignCounts>(concat!(
                "SELECT ", sum_counts!(), " FROM campaign_counters WHERE campaign_id = $1"))
            .bind(campaign_id)
            .fetch_one(pool)
            .await)?;
        Ok(c)
    }

    /// Counts of skip reasons and failure codes.
    pub async fn campaign_reasons(
        &self,
        campaign_id: Uuid,
    ) -> Result<Vec<(ReasonKind, String, i64)>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, (String, String, i64)>(
                "SELECT kind, reason, n FROM campaign_reasons WHERE campaign_id = $1 AND n > 0 \
                 ORDER BY kind, reason")
            .bind(campaign_id)
            .fetch_all(pool)
            .await)?;
        rows.into_iter()
            .map(|(kind, reason, n)| Ok((decode(kind)?, reason, n)))
            .collect()
    }

    /// Whether each of the campaign's newest outcomes (sent or later, or failed) failed,
    /// newest first, at most `limit`.
    pub async fn campaign_last_outcomes(&self, campaign_id: Uuid, limit: i64) -> Result<Vec<bool>> {
        let rows = with_pool!(self, pool => sqlx::query_scalar::<_, String>(
                "SELECT status FROM messages WHERE campaign_id = $1 \
                 AND status IN ('sent', 'delivered', 'read', 'failed') \
                 ORDER BY id DESC LIMIT $2")
            .bind(campaign_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows.into_iter().map(|s| s == "failed").collect())
    }

    /// A page of recipients in contact order after `after`, optionally of one bucket.
    pub async fn list_campaign_recipients(
        &self,
        campaign_id: Uuid,
        bucket: Option<Bucket>,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<RecipientRow>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, RecipientRow>(concat!(
                "SELECT r.contact_id, ", recipient_bucket!(), " AS status, r.message_id, \
                 CASE WHEN r.message_id IS NULL OR r.status = 'expired' THEN r.reason \
                      ELSE m.failure_code END AS reason, \
                 CASE WHEN m.updated_at IS NOT NULL AND m.updated_at > r.updated_at \
                      THEN m.updated_at ELSE r.updated_at END AS updated_at \
                 FROM campaign_recipients r LEFT JOIN messages m ON m.id = r.message_id \
                 WHERE r.campaign_id = $1 AND ($2 IS NULL OR r.contact_id > $2) \
                   AND ($3 IS NULL OR ", recipient_bucket!(), " = $3) \
                 ORDER BY r.contact_id LIMIT $4"))
            .bind(campaign_id)
            .bind(after)
            .bind(bucket.map(Bucket::as_str))
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }
}

fn chunk_count(spec: &AudienceSpec) -> usize {
    match &spec.audience {
        Audience::ContactIds(ids) => ids.len().div_ceil(ROWS_PER_STATEMENT),
        _ => 1,
    }
}

impl Tx {
    /// Stores a new campaign (in the transaction that checked the plan's campaign limit).
    pub async fn insert_campaign(&mut self, c: &Campaign) -> Result<()> {
        with_tx!(self, conn => sqlx::query(concat!(
                "INSERT INTO campaigns (", campaign_columns!(), ") VALUES \
                 ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)"))
            .bind(c.id)
            .bind(c.org_id)
            .bind(&c.name)
            .bind(c.status.as_str())
            .bind(&c.template_name)
            .bind(&c.template_language)
            .bind(&c.phone_number_id)
            .bind(&c.audience)
            .bind(&c.params)
            .bind(c.scheduled_at)
            .bind(c.expires_at)
            .bind(c.recipient_count)
            .bind(c.pause_reason.map(PauseReason::as_str))
            .bind(c.resolved_at)
            .bind(c.launched_at)
            .bind(c.paused_at)
            .bind(c.completed_at)
            .bind(c.created_at)
            .bind(c.updated_at)
            .bind(c.estimated_cost_minor)
            .execute(&mut **conn)
            .await
            .map(drop))?;
        Ok(())
    }

    /// The campaign, locked until the transaction ends (its status has one writer at a time).
    pub async fn lock_campaign(&mut self, org_id: Uuid, id: Uuid) -> Result<Option<Campaign>> {
        let sql = lock_for_write!(
            self,
            "SELECT ",
            campaign_columns!(),
            " FROM campaigns WHERE org_id = $1 AND id = $2"
        );
        let c = with_tx!(self, conn => sqlx::query_as::<_, CampaignRow>(sql)
            .bind(org_id)
            .bind(id)
            .fetch_optional(&mut **conn)
            .await)?;
        c.map(CampaignRow::into_campaign).transpose()
    }

    /// [`Db::campaign_counts`] inside this transaction (no second connection while it is
    /// open: a pool whose connections all wait for another one stalls until its timeout).
    pub async fn campaign_counts(&mut self, campaign_id: Uuid) -> Result<CampaignCounts> {
        let c = with_tx!(self, conn => sqlx::query_as::<_, CampaignCounts>(concat!(
                "SELECT ", sum_counts!(), " FROM campaign_counters WHERE campaign_id = $1"))
            .bind(campaign_id)
            .fetch_one(&mut **conn)
            .await)?;
        Ok(c)
    }

    /// Writes the campaign's mutable fields.
    pub async fn save_campaign(&mut self, c: &Campaign) -> Result<()> {
        with_tx!(self, conn => sqlx::query(
                "UPDATE campaigns SET status = $2, scheduled_at = $3, expires_at = $4, \
                 recipient_count = $5, pause_reason = $6, resolved_at = $7, launched_at = $8, \
                 paused_at = $9, completed_at = $10, updated_at = $11, \
                 estimated_cost_minor = $12 WHERE id = $1")
            .bind(c.id)
            .bind(c.status.as_str())
            .bind(c.scheduled_at)
            .bind(c.expires_at)
            .bind(c.recipient_count)
            .bind(c.pause_reason.map(PauseReason::as_str))
            .bind(c.resolved_at)
            .bind(c.launched_at)
            .bind(c.paused_at)
            .bind(c.completed_at)
            .bind(c.updated_at)
            .bind(c.estimated_cost_minor)
            .execute(&mut **conn)
            .await
            .map(drop))?;
        Ok(())
    }

    /// Replaces the campaign's recipients and resets its counters: `pending` and `skipped`
    /// (with their reasons) from `recipients`, every other bucket 0.
    pub async fn replace_recipients(
        &mut self,
        campaign_id: Uuid,
        recipients: &[NewRecipient],
        now: i64,
    ) -> Result<()> {
        for sql in [
            "DELETE FROM campaign_recipients WHERE campaign_id = $1",
            "DELETE FROM campaign_counters WHERE campaign_id = $1",
            "DELETE FROM campaign_reasons WHERE campaign_id = $1",
        ] {
            with_tx!(self, conn => sqlx::query(sql)
                .bind(campaign_id)
                .execute(&mut **conn)
                .await
                .map(drop))?;
        }
        match &mut self.inner {
            crate::db::TxInner::Postgres(conn) => {
                // Arrays and UNNEST: one statement per 10,000 rows instead of a bind per value.
                for chunk in recipients.chunks(10 * ROWS_PER_STATEMENT) {
                    let ids: Vec<Uuid> = chunk.iter().map(|r| r.contact_id).collect();
                    let status: Vec<&str> = chunk.iter().map(|r| r.state().as_str()).collect();
                    let reason: Vec<Option<&str>> = chunk
                        .iter()
                        .map(|r| r.skipped.map(SkipReason::as_str))
                        .collect();
                    let vars: Vec<Option<String>> = chunk
                        .iter()
                        .map(|r| {
                            r.variables
                                .as_ref()
                                .map(|v| Value::from(v.clone()).to_string())
                        })
                        .collect();
                    sqlx::query(
                        "INSERT INTO campaign_recipients (campaign_id, contact_id, status, reason, \
                         variables, created_at, updated_at) \
                         SELECT $1, u.c, u.s, u.r, u.v::jsonb, $5, $5 \
                         FROM UNNEST($2::uuid[], $3::text[], $4::text[], $6::text[]) AS u(c, s, r, v)",
                    )
                    .bind(campaign_id)
                    .bind(&ids)
                    .bind(&status)
                    .bind(&reason)
                    .bind(now)
                    .bind(&vars)
                    .execute(&mut **conn)
                    .await?;
                }
            }
            crate::db::TxInner::Sqlite(conn) => {
                for chunk in recipients.chunks(ROWS_PER_STATEMENT) {
                    let mut q = sqlx::QueryBuilder::new(
                        "INSERT INTO campaign_recipients (campaign_id, contact_id, status, reason, \
                         variables, created_at, updated_at) ",
                    );
                    q.push_values(chunk, |mut b, r| {
                        b.push_bind(campaign_id)
                            .push_bind(r.contact_id)
                            .push_bind(r.state().as_str())
                            .push_bind(r.skipped.map(SkipReason::as_str))
                            .push_bind(r.variables.as_ref().map(|v| Json(v.clone())))
                            .push_bind(now)
                            .push_bind(now);
                    });
                    q.build().persistent(false).execute(&mut **conn).await?;
                }
            }
        }
        let skipped = recipients.iter().filter(|r| r.skipped.is_some()).count();
        let pending = recipients.len() - skipped;
        let (pending, skipped) = (pending as i64, skipped as i64);
        with_tx!(self, conn => {
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO campaign_counters (campaign_id, shard, pending, skipped) ");
            q.push_values(0..COUNTER_SHARDS, |mut b, shard| {
                let (p, s) = if shard == 0 { (pending, skipped) } else { (0, 0) };
                b.push_bind(campaign_id).push_bind(shard).push_bind(p).push_bind(s);
            });
            q.build().persistent(false).execute(&mut **conn).await.map(drop)
        })?;
        let mut reasons: Vec<SkipReason> = recipients.iter().filter_map(|r| r.skipped).collect();
        reasons.sort_unstable();
        for group in reasons.chunk_by(|a, b| a == b) {
            let n = group.len() as i64;
            self.add_campaign_reason(campaign_id, ReasonKind::Skipped, group[0].as_str(), n)
                .await?;
        }
        Ok(())
    }

    /// Adds `n` to a reason's count.
    pub async fn add_campaign_reason(
        &mut self,
        campaign_id: Uuid,
        kind: ReasonKind,
        reason: &str,
        n: i64,
    ) -> Result<()> {
        with_tx!(self, conn => sqlx::query(
                "INSERT INTO campaign_reasons (campaign_id, kind, reason, n) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (campaign_id, kind, reason) DO UPDATE SET n = campaign_reasons.n + excluded.n")
            .bind(campaign_id)
            .bind(kind.as_str())
            .bind(reason)
            .bind(n)
            .execute(&mut **conn)
            .await
            .map(drop))?;
        Ok(())
    }
}
