//! The `api_requests` meter: every authenticated request of the public API counts once in
//! its organisation's billing period, exactly across processes (the counter is a database
//! row, see `store::usage`).
//!
//! Requests are counted in groups (group commit): one task per process takes whatever
//! requests arrived while its previous transaction ran and adds them in one transaction, so
//! counting costs one small write per batch, not per request. A request of an organisation
//! with an allowance waits for its grant (the boundary is exact); without an allowance it is
//! counted in the background and never waits.

use std::collections::HashMap;

use tern_domain::Problem;
use tern_domain::plan::{self, Meter, billing_period};
use tern_domain::time::now_ms;
use tern_store::{Db, UsageAdd};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::Principal;

/// Most requests one transaction counts.
const MAX_BATCH: usize = 1024;

struct Pending {
    org_id: Uuid,
    period_start: i64,
    allowance: Option<i64>,
    /// `Some` when the request waits: answered with the count after it, or `None` when
    /// the allowance had no unit left for it.
    reply: Option<oneshot::Sender<Result<Option<i64>, ()>>>,
}

/// This process's counter of `api_requests`.
#[derive(Clone)]
pub struct RequestMeter {
    tx: mpsc::UnboundedSender<Pending>,
}

impl RequestMeter {
    /// Must be called inside a Tokio runtime (it starts the counting task).
    pub fn start(db: Db) -> RequestMeter {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(db, rx));
        RequestMeter { tx }
    }

    /// Counts one request of `p`: `402 usage_limit_reached` when the plan's `api_requests`
    /// allowance for this period is used up (the request is then not counted).
    pub async fn count(&self, p: &Principal) -> Result<(), Problem> {
        let now = now_ms();
        let (start, end) = billing_period(p.org.billing_period_start, now);
        let allowance = p
            .effective()
            .allowance(Meter::ApiRequests)
            .map(|a| i64::try_from(a).unwrap_or(i64::MAX));
        let mut item = Pending {
            org_id: p.org_id,
            period_start: start,
            allowance,
            reply: None,
        };
        let Some(allowance) = allowance else {
            // Nothing to refuse: counted in the background.
            let _ = self.tx.send(item);
            return Ok(());
        };
        let (reply, answer) = oneshot::channel();
        item.reply = Some(reply);
        self.tx.send(item).map_err(|_| Problem::unavailable())?;
        match answer.await {
            Ok(Ok(Some(_))) => Ok(()),
            Ok(Ok(None)) => Err(plan::usage_limit_reached(
                Meter::ApiRequests,
                allowance,
                allowance,
                end,
            )),
            _ => Err(Problem::unavailable()),
        }
    }
}

async fn run(db: Db, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        count_batch(&db, std::mem::take(&mut batch)).await;
    }
}

/// Adds a batch: one row add per (organisation, period), each waiting request granted in
/// arrival order while units remain.
async fn count_batch(db: &Db, batch: Vec<Pending>) {
    let mut groups: HashMap<(Uuid, i64), usize> = HashMap::new();
    let mut adds: Vec<UsageAdd> = Vec::new();
    for p in &batch {
        let g = *groups.entry((p.org_id, p.period_start)).or_insert_with(|| {
            adds.push(UsageAdd {
                org_id: p.org_id,
                meter: Meter::ApiRequests.as_str(),
                period_start: p.period_start,
                units: 0,
                allowance: p.allowance,
            });
            adds.len() - 1
        });
        adds[g].units += 1;
        // A changed allowance within one batch: the smaller one holds for the group.
        adds[g].allowance = match (adds[g].allowance, p.allowance) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let grants = match db.add_usage(&adds).await {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(error = %e, requests = batch.len(), "could not count api_requests");
            metrics::counter!("tern_usage_count_errors_total").increment(1);
            for p in batch {
                if let Some(r) = p.reply {
                    let _ = r.send(Err(()));
                }
            }
            return;
        }
    };
    // Units are handed out in arrival order; the counter already holds only granted ones.
    let mut left: Vec<i64> = grants.iter().map(|g| g.granted).collect();
    for p in batch {
        let g = groups[&(p.org_id, p.period_start)];
        let ok = left[g] > 0;
        if ok {
            left[g] -= 1;
        }
        if let Some(r) = p.reply {
            let _ = r.send(Ok(ok.then_some(grants[g].count)));
        }
    }
}
