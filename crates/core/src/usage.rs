//! The `api_requests` meter: every authenticated request of the public API counts once in
//! its organisation's billing period. The counter is a database row (`store::usage`),
//! shared by every process; a process never admits a request without a unit of it.
//!
//! Units come in chunks. A process takes a chunk (one upsert that grants at most what is
//! left) and hands its units to requests from memory, so a request waits for the database
//! only when its process's chunk is empty. Chunks are 1/64 of what is left of the allowance
//! as the upsert finds the counter, at most [`MAX_CHUNK`]: near the boundary they shrink to
//! nothing, so the allowance is exact — N units left admit exactly N requests, whichever
//! processes they reach, and no process sits on units another one needs. A chunk is held
//! for the allowance it was taken under: a request that brings a lower allowance (an
//! operator lowered it; every request reads it afresh with its key) gives the chunk back and
//! takes again under the new one, so a lowered allowance holds from the next request. A
//! chunk not used for [`IDLE_GIVE_BACK`] is given back, so at rest the counter holds exactly
//! the requests admitted; a process that dies loses at most its chunk (counted, never
//! admitted).
//! Without an allowance (enterprise) requests never wait: their counts are summed in memory
//! and written every 100 ms (a process that dies loses at most those 100 ms of counts,
//! which no allowance depends on).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tern_domain::Problem;
use tern_domain::plan::{self, Meter, billing_period};
use tern_domain::time::now_ms;
use tern_store::{Db, UsageAdd, UsageTake};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::Principal;

/// Most requests one batch of the counting task handles.
const MAX_BATCH: usize = 1024;
/// Largest chunk a process takes.
const MAX_CHUNK: i64 = 1024;
/// A chunk is at most this fraction of what is left of the allowance.
const CHUNK_SHARE_OF: i64 = 64;
/// How often counts of requests without an allowance are written.
const COUNT_EVERY: Duration = Duration::from_millis(100);
/// A chunk left unused this long goes back to the counter.
const IDLE_GIVE_BACK: Duration = Duration::from_secs(1);

const METER: Meter = Meter::ApiRequests;

type Counter = (Uuid, i64);
type Reply = oneshot::Sender<Result<bool, ()>>;

enum Msg {
    /// Count requests without an allowance.
    Count(Counter, i64),
    /// A request of `Counter` found its process's chunk empty: a unit for it, or `false`
    /// when the allowance has none left.
    Need {
        counter: Counter,
        allowance: i64,
        reply: Reply,
    },
}

/// Units this process holds for one counter.
struct Chunk {
    units: i64,
    /// The allowance the units were taken under: a request under a lower one may not use
    /// them (they may lie past it).
    allowance: i64,
    last_used: Instant,
}

/// This process's `api_requests` counter.
#[derive(Clone)]
pub struct RequestMeter {
    tx: mpsc::UnboundedSender<Msg>,
    chunks: Arc<Mutex<HashMap<Counter, Chunk>>>,
    /// Flips to true when the counting task has written its last counts.
    done: tokio::sync::watch::Receiver<bool>,
}

impl RequestMeter {
    /// Must be called inside a Tokio runtime (it starts the counting task).
    pub fn start(db: Db) -> RequestMeter {
        let (tx, rx) = mpsc::unbounded_channel();
        let chunks = Arc::new(Mutex::new(HashMap::new()));
        let (done_tx, done) = tokio::sync::watch::channel(false);
        let task_chunks = chunks.clone();
        tokio::spawn(async move {
            run(db, rx, task_chunks).await;
            let _ = done_tx.send(true);
        });
        RequestMeter { tx, chunks, done }
    }

    /// Resolves when the counting task has written its last counts and given back the
    /// units it held, which it does once every handle to the meter is dropped. A process
    /// closes its database only after this, or those writes fail on a closed pool.
    pub fn finished(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut done = self.done.clone();
        async move {
            let _ = done.wait_for(|d| *d).await;
        }
    }

    /// Counts one request of `p`: `402 usage_limit_reached` when the plan's `api_requests`
    /// allowance for this period is used up (the request is then not counted).
    pub async fn count(&self, p: &Principal) -> Result<(), Problem> {
        let now = now_ms();
        let (start, end) = billing_period(p.org.billing_period_start, now);
        let counter = (p.org_id, start);
        let Some(allowance) = p
            .effective()
            .allowance(METER)
            .map(|a| i64::try_from(a).unwrap_or(i64::MAX))
        else {
            let _ = self.tx.send(Msg::Count(counter, 1));
            return Ok(());
        };
        if self.take_held(counter, allowance) {
            return Ok(());
        }
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Msg::Need {
                counter,
                allowance,
                reply,
            })
            .map_err(|_| Problem::unavailable())?;
        match answer.await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => Err(plan::usage_limit_reached(METER, allowance, allowance, end)),
            _ => Err(Problem::unavailable()),
        }
    }

    /// A unit from this process's chunk, if it holds one taken under an allowance no higher
    /// than the request's.
    fn take_held(&self, counter: Counter, allowance: i64) -> bool {
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        match chunks.get_mut(&counter) {
            Some(c) if c.units > 0 && c.allowance <= allowance => {
                c.units -= 1;
                c.last_used = Instant::now();
                true
            }
            _ => false,
        }
    }
}

async fn run(
    db: Db,
    mut rx: mpsc::UnboundedReceiver<Msg>,
    chunks: Arc<Mutex<HashMap<Counter, Chunk>>>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // Requests without an allowance wait for nothing: their counts are summed here and
    // written every tick (or with the next take), one upsert per counter, instead of one
    // write per batch of requests on the send path.
    let mut plain: HashMap<Counter, i64> = HashMap::new();
    let mut tick = tokio::time::interval(COUNT_EVERY);
    let mut last_give_back = Instant::now();
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, MAX_BATCH) => {
                if n == 0 {
                    count_batch(&db, &chunks, drain(&mut plain)).await;
                    give_back_idle(&db, &chunks, Duration::ZERO).await;
                    return;
                }
                let mut needs = Vec::new();
                for m in batch.drain(..) {
                    match m {
                        Msg::Count(c, n) => *plain.entry(c).or_default() += n,
                        need @ Msg::Need { .. } => needs.push(need),
                    }
                }
                if !needs.is_empty() {
                    needs.extend(drain(&mut plain));
                    count_batch(&db, &chunks, needs).await;
                }
            }
            _ = tick.tick() => {
                if !plain.is_empty() {
                    count_batch(&db, &chunks, drain(&mut plain)).await;
                }
                if last_give_back.elapsed() >= IDLE_GIVE_BACK / 2 {
                    last_give_back = Instant::now();
                    give_back_idle(&db, &chunks, IDLE_GIVE_BACK).await;
                }
            }
        }
    }
}

fn drain(plain: &mut HashMap<Counter, i64>) -> Vec<Msg> {
    plain.drain().map(|(c, n)| Msg::Count(c, n)).collect()
}

/// Counts a batch: one add per counter of requests without an allowance; for waiting
/// requests, one take per counter of their number plus a new chunk. Units held under a
/// higher allowance than the waiting requests bring are given back first.
async fn count_batch(db: &Db, chunks: &Mutex<HashMap<Counter, Chunk>>, batch: Vec<Msg>) {
    let mut plain: HashMap<Counter, i64> = HashMap::new();
    let mut waiting: HashMap<Counter, (i64, Vec<Reply>)> = HashMap::new();
    for m in batch {
        match m {
            Msg::Count(c, n) => *plain.entry(c).or_default() += n,
            Msg::Need {
                counter,
                allowance,
                reply,
            } => {
                let e = waiting.entry(counter).or_insert((allowance, Vec::new()));
                // A changed allowance within one batch: the smaller one holds.
                e.0 = e.0.min(allowance);
                e.1.push(reply);
            }
        }
    }
    if !plain.is_empty() {
        let adds: Vec<UsageAdd> = plain
            .iter()
            .map(|(&(org_id, period_start), &units)| add(org_id, period_start, units, None))
            .collect();
        if let Err(e) = db.add_usage(&adds).await {
            tracing::warn!(error = %e, "could not count api_requests");
            metrics::counter!("tern_usage_count_errors_total").increment(1);
        }
    }
    for (counter, (allowance, replies)) in waiting {
        let granted = take(db, chunks, counter, allowance, replies.len() as i64).await;
        let mut held = chunks.lock().unwrap_or_else(|e| e.into_inner());
        let c = held.entry(counter).or_insert(Chunk {
            units: 0,
            allowance,
            last_used: Instant::now(),
        });
        match granted {
            Ok(g) => {
                c.units += g;
                c.allowance = allowance;
                c.last_used = Instant::now();
                for r in replies {
                    let ok = c.units > 0;
                    if ok {
                        c.units -= 1;
                    }
                    let _ = r.send(Ok(ok));
                }
            }
            Err(()) => {
                for r in replies {
                    let _ = r.send(Err(()));
                }
            }
        }
    }
}

/// Takes `need` units (and a new chunk) of `counter` under `allowance`: the units granted,
/// on top of those the process still holds. Held units of a higher allowance go back first.
async fn take(
    db: &Db,
    chunks: &Mutex<HashMap<Counter, Chunk>>,
    counter: Counter,
    allowance: i64,
    need: i64,
) -> Result<i64, ()> {
    let (give_back, held_units) = {
        let mut held = chunks.lock().unwrap_or_else(|e| e.into_inner());
        match held.get_mut(&counter) {
            Some(c) if c.allowance > allowance => (std::mem::take(&mut c.units), 0),
            Some(c) => (0, c.units),
            None => (0, 0),
        }
    };
    if give_back > 0
        && let Err(e) = db
            .give_back_usage(counter.0, METER.as_str(), counter.1, give_back)
            .await
    {
        // Counted, never admitted: errs toward the allowance being used, never past it.
        tracing::warn!(error = %e, units = give_back, "could not give back api_requests units");
    }
    // Units the process already holds (handed out since the requests looked) go first.
    let t = UsageTake {
        org_id: counter.0,
        meter: METER.as_str(),
        period_start: counter.1,
        need: (need - held_units).max(0),
        allowance,
        share_of: CHUNK_SHARE_OF,
        share_max: MAX_CHUNK,
    };
    match db.take_usage(&t).await {
        Ok(g) => Ok(g.granted),
        Err(e) => {
            tracing::warn!(error = %e, "could not count api_requests");
            metrics::counter!("tern_usage_count_errors_total").increment(1);
            Err(())
        }
    }
}

fn add(org_id: Uuid, period_start: i64, units: i64, allowance: Option<i64>) -> UsageAdd {
    UsageAdd {
        org_id,
        meter: METER.as_str(),
        period_start,
        units,
        allowance,
    }
}

/// Gives back the units of chunks unused for `idle`, so the counter holds exactly the
/// requests admitted.
async fn give_back_idle(db: &Db, chunks: &Mutex<HashMap<Counter, Chunk>>, idle: Duration) {
    let back: Vec<(Counter, i64)> = {
        let mut held = chunks.lock().unwrap_or_else(|e| e.into_inner());
        let back = held
            .iter_mut()
            .filter(|(_, c)| c.units > 0 && c.last_used.elapsed() >= idle)
            .map(|(k, c)| (*k, std::mem::take(&mut c.units)))
            .collect();
        held.retain(|_, c| c.units > 0 || c.last_used.elapsed() < idle * 10);
        back
    };
    for ((org, period), units) in back {
        if let Err(e) = db.give_back_usage(org, METER.as_str(), period, units).await {
            tracing::warn!(error = %e, units, "could not give back api_requests units");
        }
    }
}
