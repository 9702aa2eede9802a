//! Campaign progress counters moved for many messages at once: a batch of status changes
//! (the dispatcher's sends, the inbox's statuses) touches up to [`COUNTER_SHARDS`] rows
//! of a campaign, which were a statement each (on SQLite about one round trip to the
//! connection's thread per message at the network's tier; docs/performance.md, issue 33,
//! ninth session).
//!
//! [`COUNTER_SHARDS`]: crate::campaigns::COUNTER_SHARDS

use std::collections::BTreeMap;

use tern_domain::campaign::Bucket;
use uuid::Uuid;

use crate::db::{Tx, TxInner};
use crate::error::Result;
use crate::sql::ROWS_PER_STATEMENT;

/// `n` recipients of a campaign's counter row `shard` moving from one bucket to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountMove {
    pub campaign_id: Uuid,
    pub shard: i64,
    pub from: Bucket,
    pub to: Bucket,
    pub n: i64,
}

impl Tx {
    /// One move ([`Tx::move_campaign_counts`]).
    pub(crate) async fn move_campaign_count(
        &mut self,
        campaign_id: Uuid,
        shard: i64,
        from: Bucket,
        to: Bucket,
        n: i64,
    ) -> Result<()> {
        self.move_campaign_counts(&[CountMove {
            campaign_id,
            shard,
            from,
            to,
            n,
        }])
        .await
    }

    /// Applies `moves` (netted per row): one statement a [`ROWS_PER_STATEMENT`] rows. On
    /// PostgreSQL several rows are locked in (campaign, shard) order first, the order every
    /// counter writer takes them in.
    pub async fn move_campaign_counts(&mut self, moves: &[CountMove]) -> Result<()> {
        let mut net: BTreeMap<(Uuid, i64), Vec<i64>> = BTreeMap::new();
        for m in moves.iter().filter(|m| m.from != m.to && m.n != 0) {
            let row = net
                .entry((m.campaign_id, m.shard))
                .or_insert_with(|| vec![0; Bucket::ALL.len()]);
            row[column(m.from)] -= m.n;
            row[column(m.to)] += m.n;
        }
        let rows: Vec<((Uuid, i64), Vec<i64>)> = net.into_iter().collect();
        for chunk in rows.chunks(ROWS_PER_STATEMENT) {
            match &mut self.inner {
                TxInner::Sqlite(conn) => {
                    let mut q = sqlx::QueryBuilder::new("UPDATE campaign_counters SET ");
                    push_sets(&mut q, |i| format!("v.column{}", i + 3));
                    q.push(" FROM (");
                    q.push_values(chunk, |mut b, ((campaign, shard), d)| {
                        b.push_bind(*campaign).push_bind(*shard);
                        for x in d {
                            b.push_bind(*x);
                        }
                    });
                    q.push(
                        ") AS v WHERE campaign_counters.campaign_id = v.column1 \
                         AND campaign_counters.shard = v.column2",
                    );
                    q.build().persistent(false).execute(&mut **conn).await?;
                }
                TxInner::Postgres(conn) => {
                    let campaigns: Vec<Uuid> = chunk.iter().map(|((c, _), _)| *c).collect();
                    let shards: Vec<i64> = chunk.iter().map(|((_, s), _)| *s).collect();
                    // One row needs no order.
                    if chunk.len() > 1 {
                        sqlx::query(
                            "SELECT 1 FROM campaign_counters c \
                             JOIN UNNEST($1::uuid[], $2::int8[]) AS v (campaign_id, shard) \
                             ON c.campaign_id = v.campaign_id AND c.shard = v.shard \
                             ORDER BY c.campaign_id, c.shard FOR UPDATE OF c",
                        )
                        .bind(&campaigns)
                        .bind(&shards)
                        .execute(&mut **conn)
                        .await?;
                    }
                    let mut q = sqlx::QueryBuilder::new("UPDATE campaign_counters SET ");
                    push_sets(&mut q, |i| format!("v.d{i}"));
                    q.push(" FROM UNNEST(");
                    q.push_bind(campaigns);
                    q.push("::uuid[], ");
                    q.push_bind(shards);
                    q.push("::int8[]");
                    for i in 0..Bucket::ALL.len() {
                        let deltas: Vec<i64> = chunk.iter().map(|(_, d)| d[i]).collect();
                        q.push(", ");
                        q.push_bind(deltas);
                        q.push("::int8[]");
                    }
                    q.push(") AS v (campaign_id, shard");
                    for i in 0..Bucket::ALL.len() {
                        q.push(format!(", d{i}"));
                    }
                    q.push(
                        ") WHERE campaign_counters.campaign_id = v.campaign_id \
                         AND campaign_counters.shard = v.shard",
                    );
                    // One text whatever the batch: kept prepared.
                    q.build().execute(&mut **conn).await?;
                }
            }
        }
        Ok(())
    }
}

/// `pending = pending + <delta 0>, queued = queued + <delta 1>, …`: the column names come
/// from the closed [`Bucket`] enum, nothing from outside reaches the text.
fn push_sets<DB: sqlx::Database>(q: &mut sqlx::QueryBuilder<DB>, delta: impl Fn(usize) -> String) {
    for (i, b) in Bucket::ALL.iter().enumerate() {
        if i > 0 {
            q.push(", ");
        }
        let c = b.as_str();
        q.push(format!("{c} = {c} + {}", delta(i)));
    }
}

/// The index of `b`'s column in [`Bucket::ALL`].
fn column(b: Bucket) -> usize {
    Bucket::ALL.iter().position(|x| *x == b).unwrap_or(0)
}
