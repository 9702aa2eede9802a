//! The `api_requests` meter: every authenticated request of the public API counts once in
//! its organisation's billing period. The counter is a database row (`store::usage`),
//! shared by every process; a process never admits a request without a unit of it.
//!
//! Units come in chunks. A process takes a chunk (one upsert that grants at most what is
//! left) and hands its units to requests from memory, so a request waits for the database
//! only when its process's chunk is empty. Chunks are 1/64 of what is left of the allowance,
//! at most [`MAX_CHUNK`]: near the boundary they shrink to single units, so the allowance is
//! exact — N units left admit exactly N requests, whichever processes they reach. A chunk
//! not used for [`IDLE_GIVE_BACK`] is given back, so at rest the counter holds exactly the
//! requests admitted; a process that dies loses at most its chunk (counted, never admitted).
//! Without an allowance (enterprise) requests never wait: their counts are summed in memory
//! and written every 100 ms (a process that dies loses at most those 100 ms of counts,
//! which no allowance depends on).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tern_domain::Problem;
use tern_domain::plan::{self, Meter, billing_period};
use tern_domain::time::now_ms;
use tern_store::{Db, UsageAdd};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use crate::Principal;

/// Most requests one batch of the counting task handles.
const MAX_BATCH: usize = 1024;
/// Largest chunk a process takes.
const MAX_CHUNK: i64 = 1024;
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
    /// The counter's value after this process's last take: what is left is
    /// `allowance - count` (other processes may have taken more since).
    count: i64,
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
        if self.take_held(counter) {
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

    /// A unit from this process's chunk, if it holds one.
    fn take_held(&self, counter: Counter) -> bool {
        let mut chunks = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        match chunks.get_mut(&counter) {
            Some(c) if c.units > 0 => {
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

/// Counts a batch: one add per counter. Requests without an allowance are added as they
/// are; waiting requests get the units of one take of (their number + a new chunk).
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
    let mut adds = Vec::with_capacity(plain.len() + waiting.len());
    for (&(org_id, period_start), &units) in &plain {
        adds.push(add(org_id, period_start, units, None));
    }
    let mut order = Vec::with_capacity(waiting.len());
    {
        let held = chunks.lock().unwrap_or_else(|e| e.into_inner());
        for (&counter, (allowance, replies)) in &waiting {
            // Units the process already holds (handed out since the request looked) go first.
            let held_units = held.get(&counter).map_or(0, |c| c.units);
            let need = (replies.len() as i64 - held_units).max(0);
            let count = held.get(&counter).map_or(0, |c| c.count);
            let chunk = ((allowance - count) / 64).clamp(0, MAX_CHUNK);
            order.push(counter);
            adds.push(add(counter.0, counter.1, need + chunk, Some(*allowance)));
        }
    }
    let grants = match db.add_usage(&adds).await {
        Ok(g) => g,
        Err(e) => {
            tracing::warn!(error = %e, "could not count api_requests");
            metrics::counter!("tern_usage_count_errors_total").increment(1);
            for (_, (_, replies)) in waiting {
                for r in replies {
                    let _ = r.send(Err(()));
                }
            }
            return;
        }
    };
    let mut held = chunks.lock().unwrap_or_else(|e| e.into_inner());
    for (i, counter) in order.into_iter().enumerate() {
        let g = grants[plain.len() + i];
        let c = held.entry(counter).or_insert(Chunk {
            units: 0,
            count: 0,
            last_used: Instant::now(),
        });
        c.units += g.granted;
        c.count = g.count;
        c.last_used = Instant::now();
        let Some((_, replies)) = waiting.remove(&counter) else {
            continue;
        };
        for r in replies {
            let ok = c.units > 0;
            if ok {
                c.units -= 1;
            }
            let _ = r.send(Ok(ok));
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
