//! Usage counters of the plan allowances (`api_requests`, `messages_sent`), one row per
//! organisation, meter and billing period. Counting is exact across processes: each add
//! locks its row for the transaction, so two processes never grant the same unit.

use uuid::Uuid;

use crate::db::{BeginWrite as _, Db, with_pool};
use crate::error::Result;
use crate::sql::lock_for_write;

/// Units to add to one counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageAdd {
    pub org_id: Uuid,
    pub meter: &'static str,
    pub period_start: i64,
    pub units: i64,
    /// Grant only what stays within this; `None` grants everything.
    pub allowance: Option<i64>,
}

/// What an add did: `granted` of its units were counted, and the counter now holds `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageGrant {
    pub granted: i64,
    pub count: i64,
}

impl Db {
    /// Adds every item in one transaction (in a fixed order of rows, so processes adding to
    /// the same counters cannot deadlock); outcomes in `adds` order.
    pub async fn add_usage(&self, adds: &[UsageAdd]) -> Result<Vec<UsageGrant>> {
        let mut order: Vec<usize> = (0..adds.len()).collect();
        order.sort_by_key(|&i| (adds[i].org_id, adds[i].meter, adds[i].period_start));
        let mut out = vec![
            UsageGrant {
                granted: 0,
                count: 0
            };
            adds.len()
        ];
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            for i in order {
                let a = &adds[i];
                let Some(allowance) = a.allowance else {
                    let count: i64 = sqlx::query_scalar(
                            "INSERT INTO usage_counters (org_id, meter, period_start, count) \
                             VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, meter, period_start) \
                             DO UPDATE SET count = usage_counters.count + $4 RETURNING count")
                        .bind(a.org_id)
                        .bind(a.meter)
                        .bind(a.period_start)
                        .bind(a.units)
                        .fetch_one(&mut *tx)
                        .await?;
                    out[i] = UsageGrant { granted: a.units, count };
                    continue;
                };
                sqlx::query(
                        "INSERT INTO usage_counters (org_id, meter, period_start, count) \
                         VALUES ($1, $2, $3, 0) ON CONFLICT (org_id, meter, period_start) DO NOTHING")
                    .bind(a.org_id)
                    .bind(a.meter)
                    .bind(a.period_start)
                    .execute(&mut *tx)
                    .await?;
                let count: i64 = sqlx::query_scalar(lock_for_write!(self,
                        "SELECT count FROM usage_counters \
                         WHERE org_id = $1 AND meter = $2 AND period_start = $3"))
                    .bind(a.org_id)
                    .bind(a.meter)
                    .bind(a.period_start)
                    .fetch_one(&mut *tx)
                    .await?;
                let granted = a.units.min(allowance - count).max(0);
                if granted > 0 {
                    sqlx::query(
                            "UPDATE usage_counters SET count = count + $4 \
                             WHERE org_id = $1 AND meter = $2 AND period_start = $3")
                        .bind(a.org_id)
                        .bind(a.meter)
                        .bind(a.period_start)
                        .bind(granted)
                        .execute(&mut *tx)
                        .await?;
                }
                out[i] = UsageGrant { granted, count: count + granted };
            }
            tx.commit().await?;
            Ok::<_, crate::StoreError>(())
        })?;
        Ok(out)
    }

    /// A meter's count in the period starting at `period_start` (0 when nothing counted).
    pub async fn usage_in_period(
        &self,
        org_id: Uuid,
        meter: &str,
        period_start: i64,
    ) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT count FROM usage_counters \
                 WHERE org_id = $1 AND meter = $2 AND period_start = $3")
            .bind(org_id)
            .bind(meter)
            .bind(period_start)
            .fetch_optional(pool)
            .await)?;
        Ok(n.unwrap_or(0))
    }
}
