//! A campaign's recipients moving out of `pending`: messaged (their one message), skipped
//! (with a reason) or expired; each move counted in the campaign's counters in the same
//! transaction.

use tern_domain::campaign::{Bucket, ReasonKind, RecipientState, SkipReason};
use uuid::Uuid;

use crate::db::{Tx, with_tx};
use crate::error::Result;
use crate::sql::{ROWS_PER_STATEMENT, push_id_list};

impl Tx {
    /// Records the messages of pending recipients (`(contact_id, message_id)`): they leave
    /// `pending` for `queued`. Returns how many were still pending.
    pub async fn mark_recipients_messaged(
        &mut self,
        campaign_id: Uuid,
        sent: &[(Uuid, Uuid)],
        now: i64,
    ) -> Result<i64> {
        let n = match &mut self.inner {
            // One statement for the whole batch.
            crate::db::TxInner::Postgres(conn) => {
                let contacts: Vec<Uuid> = sent.iter().map(|s| s.0).collect();
                let messages: Vec<Uuid> = sent.iter().map(|s| s.1).collect();
                sqlx::query(
                    "UPDATE campaign_recipients r SET status = $3, message_id = u.m, updated_at = $5 \
                     FROM UNNEST($2::uuid[], $4::uuid[]) AS u(c, m) \
                     WHERE r.campaign_id = $1 AND r.contact_id = u.c AND r.status = 'pending'",
                )
                .bind(campaign_id)
                .bind(&contacts)
                .bind(RecipientState::Messaged.as_str())
                .bind(&messages)
                .bind(now)
                .execute(&mut **conn)
                .await?
                .rows_affected() as i64
            }
            // One statement a chunk: a statement a recipient was a round trip to the
            // connection's thread each (issue 33, ninth session).
            crate::db::TxInner::Sqlite(conn) => {
                let mut n = 0;
                for chunk in sent.chunks(ROWS_PER_STATEMENT) {
                    let mut q = sqlx::QueryBuilder::new("UPDATE campaign_recipients SET status = ");
                    q.push_bind(RecipientState::Messaged.as_str());
                    q.push(", message_id = v.column2, updated_at = ");
                    q.push_bind(now);
                    q.push(" FROM (");
                    q.push_values(chunk, |mut b, (contact_id, message_id)| {
                        b.push_bind(*contact_id).push_bind(*message_id);
                    });
                    q.push(") AS v WHERE campaign_recipients.campaign_id = ");
                    q.push_bind(campaign_id);
                    q.push(
                        " AND campaign_recipients.contact_id = v.column1 \
                         AND campaign_recipients.status = 'pending'",
                    );
                    n += q
                        .build()
                        .persistent(false)
                        .execute(&mut **conn)
                        .await?
                        .rows_affected() as i64;
                }
                n
            }
        };
        self.move_campaign_count(campaign_id, 0, Bucket::Pending, Bucket::Queued, n)
            .await?;
        Ok(n)
    }

    /// Skips pending recipients with `reason`. Returns how many were still pending.
    pub async fn skip_recipients(
        &mut self,
        campaign_id: Uuid,
        contacts: &[Uuid],
        reason: SkipReason,
        now: i64,
    ) -> Result<i64> {
        let mut n = 0;
        for chunk in contacts.chunks(ROWS_PER_STATEMENT) {
            n += with_tx!(self, conn => {
                let mut q = sqlx::QueryBuilder::new(
                    "UPDATE campaign_recipients SET status = 'skipped', reason = ");
                q.push_bind(reason.as_str());
                q.push(", updated_at = ");
                q.push_bind(now);
                q.push(" WHERE status = 'pending' AND campaign_id = ");
                q.push_bind(campaign_id);
                q.push(" AND contact_id IN ");
                push_id_list(&mut q, chunk.iter().copied());
                q.build().persistent(false).execute(&mut **conn).await.map(|r| r.rows_affected() as i64)
            })?;
        }
        self.move_campaign_count(campaign_id, 0, Bucket::Pending, Bucket::Skipped, n)
            .await?;
        if n > 0 {
            self.add_campaign_reason(campaign_id, ReasonKind::Skipped, reason.as_str(), n)
                .await?;
        }
        Ok(n)
    }

    /// Messaged recipients (`contacts`) whose message left the queue unsent at the
    /// campaign's expiry end `expired` (keeping their message). Returns how many.
    pub async fn expire_messaged_recipients(
        &mut self,
        campaign_id: Uuid,
        contacts: &[Uuid],
        now: i64,
    ) -> Result<i64> {
        let mut n = 0;
        for chunk in contacts.chunks(ROWS_PER_STATEMENT) {
            n += with_tx!(self, conn => {
                let mut q = sqlx::QueryBuilder::new("UPDATE campaign_recipients SET status = ");
                q.push_bind(RecipientState::Expired.as_str());
                q.push(", updated_at = ");
                q.push_bind(now);
                q.push(" WHERE status = ");
                q.push_bind(RecipientState::Messaged.as_str());
                q.push(" AND campaign_id = ");
                q.push_bind(campaign_id);
                q.push(" AND contact_id IN ");
                push_id_list(&mut q, chunk.iter().copied());
                q.build().persistent(false).execute(&mut **conn).await.map(|r| r.rows_affected() as i64)
            })?;
        }
        Ok(n)
    }

    /// Every still-pending recipient ends `expired`. Returns how many.
    pub async fn expire_recipients(&mut self, campaign_id: Uuid, now: i64) -> Result<i64> {
        let n = with_tx!(self, conn => sqlx::query(
                "UPDATE campaign_recipients SET status = $2, updated_at = $3 \
                 WHERE campaign_id = $1 AND status = 'pending'")
            .bind(campaign_id)
            .bind(RecipientState::Expired.as_str())
            .bind(now)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected() as i64))?;
        self.move_campaign_count(campaign_id, 0, Bucket::Pending, Bucket::Expired, n)
            .await?;
        Ok(n)
    }
}
