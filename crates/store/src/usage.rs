//! Usage counters of the plan allowances (`api_requests`, `messages_sent`), one row per
//! organisation, meter and billing period.
//!
//! An add is one upsert that grants what fits under the allowance and reports the grant
//! (`last_grant`), so counting is exact across processes without a transaction holding the
//! row: the row is locked only for that statement, and concurrent adds queue on it rather
//! than on each other's whole transactions.

use uuid::Uuid;

use crate::db::{Backend, Db, with_pool};
use crate::error::Result;

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

/// The add: grants `min(units, allowance - count)` (never below 0) and returns the count
/// and the grant. `SET` expressions read the row as it was, so both use the old count.
macro_rules! add_sql {
    ($min:literal, $max:literal) => {
        concat!(
            "INSERT INTO usage_counters (org_id, meter, period_start, count, last_grant) \
             VALUES ($1, $2, $3, ",
            $max,
            "(",
            $min,
            "($4, $5), 0), ",
            $max,
            "(",
            $min,
            "($4, $5), 0)) \
             ON CONFLICT (org_id, meter, period_start) DO UPDATE SET \
             last_grant = ",
            $max,
            "(",
            $min,
            "($4, $5 - usage_counters.count), 0), \
             count = usage_counters.count + ",
            $max,
            "(",
            $min,
            "($4, $5 - usage_counters.count), 0) \
             RETURNING count, last_grant"
        )
    };
}

pub(crate) fn add_sql(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => add_sql!("MIN", "MAX"),
        Backend::Postgres => add_sql!("LEAST", "GREATEST"),
    }
}

/// A take of units to hand out later: what the takers need now, plus a share of what is
/// left after that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageTake {
    pub org_id: Uuid,
    pub meter: &'static str,
    pub period_start: i64,
    /// Units wanted now.
    pub need: i64,
    pub allowance: i64,
    /// Also take `(allowance - count - need) / share_of` (at least 0, at most `share_max`),
    /// reckoned from the counter as the statement finds it: never more than is left.
    pub share_of: i64,
    pub share_max: i64,
}

/// The take's grant for a counter now at `$c`: `need + min(max((allowance - c - need) /
/// share_of, 0), share_max)`, within `allowance - c`, never below 0.
macro_rules! take_grant {
    ($min:literal, $max:literal, $c:literal) => {
        concat!(
            $max,
            "(",
            $min,
            "($4 + ",
            $min,
            "(",
            $max,
            "(($5 - ",
            $c,
            " - $4) / $6, 0), $7), $5 - ",
            $c,
            "), 0)"
        )
    };
}

macro_rules! take_sql {
    ($min:literal, $max:literal) => {
        concat!(
            "INSERT INTO usage_counters (org_id, meter, period_start, count, last_grant) \
             VALUES ($1, $2, $3, ",
            take_grant!($min, $max, "0"),
            ", ",
            take_grant!($min, $max, "0"),
            ") ON CONFLICT (org_id, meter, period_start) DO UPDATE SET last_grant = ",
            take_grant!($min, $max, "usage_counters.count"),
            ", count = usage_counters.count + ",
            take_grant!($min, $max, "usage_counters.count"),
            " RETURNING count, last_grant"
        )
    };
}

fn take_sql(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => take_sql!("MIN", "MAX"),
        Backend::Postgres => take_sql!("LEAST", "GREATEST"),
    }
}

/// Takes back `$4` units granted earlier (an item refused after its unit was taken).
pub(crate) const GIVE_BACK_SQL: &str = "UPDATE usage_counters SET count = count - $4 \
     WHERE org_id = $1 AND meter = $2 AND period_start = $3";

/// Runs one add on `$conn` (a pool or a transaction's connection).
macro_rules! add_usage_on {
    ($backend:expr, $conn:expr, $a:expr) => {{
        let a: &$crate::usage::UsageAdd = $a;
        sqlx::query_as::<_, (i64, i64)>($crate::usage::add_sql($backend))
            .bind(a.org_id)
            .bind(a.meter)
            .bind(a.period_start)
            .bind(a.units)
            .bind(a.allowance.unwrap_or(i64::MAX))
            .fetch_one($conn)
            .await
            .map(|(count, granted)| $crate::usage::UsageGrant { granted, count })
    }};
}
pub(crate) use add_usage_on;

/// Runs one give-back on `$conn`.
macro_rules! give_back_on {
    ($conn:expr, $org:expr, $meter:expr, $period:expr, $units:expr) => {
        sqlx::query($crate::usage::GIVE_BACK_SQL)
            .bind($org)
            .bind($meter)
            .bind($period)
            .bind($units)
            .execute($conn)
            .await
            .map(|_| ())
    };
}
pub(crate) use give_back_on;

impl Db {
    /// Adds every item, each in its own statement; outcomes in `adds` order.
    pub async fn add_usage(&self, adds: &[UsageAdd]) -> Result<Vec<UsageGrant>> {
        let mut out = Vec::with_capacity(adds.len());
        let _turn = self.write_turn().await?;
        for a in adds {
            let g = with_pool!(self, pool => add_usage_on!(self.backend(), pool, a))?;
            out.push(g);
        }
        Ok(out)
    }

    /// One take of units (one statement): the share is reckoned from the counter as it is
    /// when the statement runs, so a taker never holds more than 1/`share_of` of what is
    /// left, whatever other processes took since it last looked.
    pub async fn take_usage(&self, t: &UsageTake) -> Result<UsageGrant> {
        let sql = take_sql(self.backend());
        let _turn = self.write_turn().await?;
        let (count, granted) = with_pool!(self, pool => sqlx::query_as::<_, (i64, i64)>(sql)
            .bind(t.org_id)
            .bind(t.meter)
            .bind(t.period_start)
            .bind(t.need)
            .bind(t.allowance)
            .bind(t.share_of.max(1))
            .bind(t.share_max)
            .fetch_one(pool)
            .await)?;
        Ok(UsageGrant { granted, count })
    }

    /// Takes back `units` granted earlier.
    pub async fn give_back_usage(
        &self,
        org_id: Uuid,
        meter: &str,
        period_start: i64,
        units: i64,
    ) -> Result<()> {
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => give_back_on!(pool, org_id, meter, period_start, units))?;
        Ok(())
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
