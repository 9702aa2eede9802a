//! The dispatcher: sends accepted outbound messages from the durable queue in the database
//! (see `tern_store`'s dispatch module) to the network, paced per business number.
//!
//! One attempt of a claimed message (prepare → send → decide: the lifecycle table of a
//! message) is `tern_core::messages::dispatch`'s; this loop claims, paces, runs the
//! attempts in send slots and records their decisions: a message's status through
//! `tern_core::messages::status` in group commits, a retry or an unknown outcome as a queue
//! write.
//!
//! # Crash safety
//! A claim is written before the request leaves, and a claim is never handed out again:
//! a worker killed mid-send leaves its claims `in_flight`, and they are treated exactly like
//! an unknown outcome (settled by a webhook or failed at `lease + unknown_grace`). So a
//! `kill -9` never loses an accepted message (queued ones stay queued) and never sends one
//! twice. The price is that claims that had not left yet fail as `network_outcome_unknown`;
//! to keep that window small the dispatcher claims only what it can send **at once**: no
//! more than the number's pacing allows right now and no more than free send slots.
//!
//! # Several processes
//! Claims are exclusive across processes (`FOR NO KEY UPDATE SKIP LOCKED` on PostgreSQL),
//! so N `tern serve` processes share the work and each message is sent once. Pacing is per
//! process: N processes sending for one number may together exceed its throughput; the
//! network then answers 130429 and those messages are retried with backoff.
//!
//! # Pacing
//! Each number has a token bucket at its `throughput_mps` (default 80 messages per second,
//! burst = one second's worth, like the network's own limit), rebuilt when the number's
//! throughput changes (numbers are re-read every `number_refresh`). Tokens are taken for
//! the messages actually claimed, after the claim.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_core::Core;
use tern_core::messages::dispatch::{self, Decision, Final, Number, Policy};
use tern_core::messages::failure;
use tern_core::messages::status::{self, Recorded, Report};
use tern_domain::backoff::{Backoff, Jitter};
use tern_domain::time::now_ms;
use tern_store::{DispatchClaim, DispatchItem, DispatchSweep, StoreError};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

mod pacing;
mod record;

use pacing::Bucket;

use record::Waiting;

pub use tern_core::messages::failure::{
    FAILURE_MEDIA_UNAVAILABLE, FAILURE_NUMBER_NOT_CONNECTED, FAILURE_OUTCOME_UNKNOWN,
    FAILURE_PAYLOAD_INVALID, FAILURE_TOKEN_UNREADABLE,
};

/// At most this many numbers are served per round (the rest next round).
const NUMBERS_PER_ROUND: i64 = 500;
/// At most this many expired messages are failed per sweep.
const SWEEP_LIMIT: i64 = 500;
/// Shortest pause when every due message waits for its number's pacing: claims a few
/// messages per round instead of one per token.
const MIN_PACING_PAUSE: Duration = Duration::from_millis(20);
/// After a round that claimed nothing, a wakeup starts the next round no sooner than this
/// after it. Every acceptance wakes the dispatcher; while the only numbers with due messages
/// are paced, each wakeup re-read the due numbers for nothing (640 reads/s under a burst,
/// ~6 % of PostgreSQL's CPU). A wakeup after a quiet spell still starts a round at once.
const EMPTY_ROUND_GAP: Duration = Duration::from_millis(10);

/// Tuning of the dispatcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchConfig {
    /// Time a worker has to send a claimed message and record the outcome. The send call is
    /// cut off shortly before it ends (an answer that comes too late is an unknown outcome).
    /// Must exceed the Cloud API client's request timeout (default 30 s). Default 60 s.
    pub lease: Duration,
    /// How long a message whose send outcome is unknown (the request left, no answer; or
    /// its worker died mid-send) waits for the network's status webhook before it fails
    /// with `network_outcome_unknown`. Default 15 minutes: the network's `sent` status
    /// normally follows within seconds, but its webhook retries, and Tern's own inbox
    /// backlog after a restart, can delay it by minutes; 15 minutes covers those while the
    /// sender learns within a quarter of an hour that the message is in doubt (it is never
    /// sent again blindly: that could deliver it twice). A status that arrives later cannot
    /// un-fail the message (`failed` is terminal) but still fills its `*_at` times.
    pub unknown_grace: Duration,
    /// Attempts (claims) per message when the network keeps refusing it for now; then the
    /// message fails with the network's last code. Default 10.
    pub max_attempts: u32,
    /// Backoff before retry n is a random delay in `[0, min(cap, base · 2^(n-1))]` (full
    /// jitter). Defaults 1 s and 5 minutes.
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// At most this many messages per claim. Default 100.
    pub batch_size: usize,
    /// At most this many send calls at once (per process). Default 256: a number at the
    /// 1,000 mps tier with the network answering in about 250 ms needs that many in flight
    /// (64 capped such a number near 250 mps), and during an API burst each send also waits
    /// longer for its turn to be recorded.
    pub max_in_flight: usize,
    /// Look for due messages at least this often without a wakeup (retries coming due,
    /// messages accepted by other processes). Default 250 ms.
    pub poll_interval: Duration,
    /// Run the queue's housekeeping (expired unknown outcomes, gauges) this often. Default 1 s.
    pub sweep_interval: Duration,
    /// Re-read a number's status, token and throughput this often. Default 5 s.
    pub number_refresh: Duration,
    /// Throughput of a number whose `throughput_mps` is not positive. Default 80.
    pub default_mps: u32,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            unknown_grace: Duration::from_secs(15 * 60),
            max_attempts: 10,
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(5 * 60),
            batch_size: 100,
            max_in_flight: 256,
            poll_interval: Duration::from_millis(250),
            sweep_interval: Duration::from_secs(1),
            number_refresh: Duration::from_secs(5),
            default_mps: 80,
        }
    }
}

impl DispatchConfig {
    /// The limit on one send call: the lease less a margin to record the outcome.
    fn send_timeout(&self) -> Duration {
        let margin = (self.lease / 4).min(Duration::from_secs(5));
        self.lease
            .saturating_sub(margin)
            .max(Duration::from_millis(1))
    }

    /// How the attempts are decided (`tern_core::messages::dispatch`).
    pub fn policy(&self) -> Policy {
        Policy {
            send_timeout: self.send_timeout(),
            unknown_grace: self.unknown_grace,
            max_attempts: self.max_attempts,
            backoff: Backoff {
                base: self.backoff_base,
                cap: self.backoff_cap,
                jitter: Jitter::Full,
            },
        }
    }

    /// Full-jitter exponential backoff before the next attempt of a message that has had
    /// `attempts` attempts.
    pub fn backoff(&self, attempts: i64) -> Duration {
        self.policy().backoff.delay(attempts, rand::random())
    }
}

/// What the dispatcher did (for tests and logs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchReport {
    /// Accepted by the network.
    pub sent: usize,
    /// Put back in the queue for a later attempt.
    pub retried: usize,
    /// Send outcome unknown (waiting for a webhook or the grace deadline).
    pub unknown: usize,
    /// Failed for good (network refusal, retries exhausted, unusable number or request).
    pub failed: usize,
    /// Failed by the sweep as `network_outcome_unknown`.
    pub expired: usize,
    /// Outcomes dropped because the claim was no longer this worker's.
    pub stale: usize,
    /// Outcomes that could not be recorded (database trouble); the message stays claimed
    /// and is settled by a webhook or the grace deadline.
    pub errors: usize,
}

impl DispatchReport {
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &DispatchReport) {
        self.sent += o.sent;
        self.retried += o.retried;
        self.unknown += o.unknown;
        self.failed += o.failed;
        self.expired += o.expired;
        self.stale += o.stale;
        self.errors += o.errors;
    }

    fn count(&mut self, o: Outcome) {
        match o {
            Outcome::Sent => self.sent += 1,
            Outcome::Retried => self.retried += 1,
            Outcome::Unknown => self.unknown += 1,
            Outcome::Failed => self.failed += 1,
            Outcome::Stale => self.stale += 1,
            Outcome::Error => self.errors += 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Sent,
    Retried,
    Unknown,
    Failed,
    Stale,
    Error,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Sent => "sent",
            Outcome::Retried => "retry",
            Outcome::Unknown => "unknown",
            Outcome::Failed => "failed",
            Outcome::Stale => "stale",
            Outcome::Error => "error",
        }
    }
}

/// Runs until cancelled: claims and sends due messages, woken by the store's dispatch
/// wake-up (`tern_store::Wakeups::dispatch`, notified at the commit of an acceptance) and
/// polling every `config.poll_interval` otherwise. On cancellation it stops claiming and
/// waits (at most the lease) for the sends under way to be recorded. `core.db` is the pool
/// it works on (the server gives it one of its own: `Core::with_db`).
pub async fn run(core: Core, config: DispatchConfig, cancel: CancellationToken) {
    let wakeups = core.db.wakeups();
    let mut d = Dispatcher::new(core, config);
    tracing::info!(worker = %d.owner, "dispatcher started");
    'outer: loop {
        let started = tokio::time::Instant::now();
        let round = match d.round(true).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "dispatch round failed; will retry");
                Round::default()
            }
        };
        if round.more_due && !round.slot_limited {
            if cancel.is_cancelled() {
                break;
            }
            continue;
        }
        let poll = d.shared.config.poll_interval;
        let pause = round
            .pacing_wait
            .map_or(poll, |w| w.max(MIN_PACING_PAUSE).min(poll));
        let until = tokio::time::Instant::now() + pause;
        loop {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => break 'outer,
                // New messages wait while every slot is taken: under an API burst the
                // wakeups never stop, and answering them left finished sends unreaped, so
                // their slots looked taken (rounds of nothing; 170 sends/s instead of the tier).
                _ = wakeups.dispatch.notified(), if !round.slot_limited => {
                    if round.claimed == 0 {
                        tokio::select! {
                            biased;
                            _ = cancel.cancelled() => break 'outer,
                            _ = tokio::time::sleep_until(started + EMPTY_ROUND_GAP) => {}
                        }
                    }
                    break;
                }
                Some(done) = d.tasks.join_next(), if !d.tasks.is_empty() => {
                    d.reap(done);
                    // Send slots came free: claim more if slots were what held us back, once
                    // half of them are, so claims stay batches (one claim per finished send
                    // cost a due-numbers query and a transaction per message).
                    if round.slot_limited
                        && d.tasks.len() <= d.shared.config.max_in_flight / 2
                    {
                        break;
                    }
                }
                _ = tokio::time::sleep_until(until) => break,
            }
        }
    }
    d.finish_in_flight().await;
    tracing::info!(worker = %d.owner, "dispatcher stopped");
}

/// Everything a send task needs.
struct Shared {
    core: Core,
    config: DispatchConfig,
    policy: Policy,
    /// Send outcomes waiting to be recorded, and the turn to record them (see
    /// [`Shared::record_final`]).
    outcomes: std::sync::Mutex<Vec<Waiting>>,
    recording: tokio::sync::Mutex<()>,
}

/// What the dispatcher knows about one number.
struct NumberSlot {
    fetched: Instant,
    number: Number,
    /// Its pacing (only a usable number's is used).
    bucket: Bucket,
}

/// What one round did.
#[derive(Debug, Default, Clone, Copy)]
struct Round {
    claimed: usize,
    /// Some due messages wait for their number's pacing: the earliest a token frees up.
    pacing_wait: Option<Duration>,
    /// Some due messages wait for a free send slot.
    slot_limited: bool,
    /// More messages were due than one claim takes: go again at once.
    more_due: bool,
}

/// One dispatcher instance (one per process): its claims carry a unique owner id.
pub struct Dispatcher {
    shared: Arc<Shared>,
    owner: String,
    numbers: HashMap<String, NumberSlot>,
    /// Where the next round's list of numbers with due messages starts.
    due_cursor: Option<String>,
    tasks: JoinSet<Outcome>,
    last_sweep: Option<Instant>,
    report: DispatchReport,
}

impl Dispatcher {
    /// A dispatcher working on `core.db` (see [`run`]).
    pub fn new(core: Core, config: DispatchConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                core,
                policy: config.policy(),
                config,
                outcomes: std::sync::Mutex::new(Vec::new()),
                recording: tokio::sync::Mutex::new(()),
            }),
            owner: format!("dispatch-{}", Uuid::new_v4()),
            due_cursor: None,
            numbers: HashMap::new(),
            tasks: JoinSet::new(),
            last_sweep: None,
            report: DispatchReport::default(),
        }
    }

    /// The `lease_owner` this dispatcher's claims carry.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Sends everything that is due now (waiting for pacing where needed), waits until
    /// every outcome is recorded, sweeps, and returns what was done. Retries that come due
    /// later are left for a later call.
    pub async fn drain_once(&mut self) -> Result<DispatchReport, StoreError> {
        self.sweep().await?;
        loop {
            let round = self.round(false).await?;
            if round.claimed == 0 && self.tasks.is_empty() && !round.more_due {
                match round.pacing_wait {
                    Some(wait) => tokio::time::sleep(wait.max(Duration::from_millis(1))).await,
                    None => break,
                }
                continue;
            }
            while let Some(done) = self.tasks.join_next().await {
                self.reap(done);
            }
        }
        self.sweep().await?;
        Ok(std::mem::take(&mut self.report))
    }

    /// The queue's housekeeping (as `tern_store::testkit::sweep_dispatch` runs it): messages whose send outcome
    /// stayed unknown past their deadline fail with `network_outcome_unknown`. Also
    /// updates the queue gauges.
    pub async fn sweep(&mut self) -> Result<DispatchSweep, StoreError> {
        let started = Instant::now();
        self.last_sweep = Some(started);
        let failure = failure::outcome_unknown(self.shared.config.unknown_grace);
        let db = &self.shared.core.db;
        let sweep = status::expire_unknown(db, now_ms(), &failure, SWEEP_LIMIT).await?;
        if sweep.abandoned > 0 {
            tracing::warn!(
                count = sweep.abandoned,
                "claims past their lease (a worker died or hung); their outcome is unknown"
            );
        }
        for e in &sweep.expired {
            tracing::warn!(message_id = %e.id, org_id = %e.org_id,
                "no answer and no status from the network within the grace period; message failed");
        }
        self.report.expired += sweep.expired.len();
        metrics::counter!("tern_dispatch_expired_total").increment(sweep.expired.len() as u64);
        let counts = db.count_dispatch_queue().await?;
        metrics::gauge!("tern_dispatch_queue", "state" => "queued").set(counts.queued as f64);
        metrics::gauge!("tern_dispatch_queue", "state" => "in_flight").set(counts.in_flight as f64);
        metrics::gauge!("tern_dispatch_queue", "state" => "unknown").set(counts.unknown as f64);
        metrics::histogram!("tern_dispatch_sweep_seconds").record(started.elapsed().as_secs_f64());
        Ok(sweep)
    }

    fn reap(&mut self, done: Result<Outcome, tokio::task::JoinError>) {
        match done {
            Ok(o) => self.report.count(o),
            Err(e) => {
                tracing::error!(error = %e, "send task failed");
                self.report.count(Outcome::Error);
            }
        }
    }

    /// Waits for the sends under way (at most the lease), then abandons the rest: their
    /// claims become unknown outcomes.
    async fn finish_in_flight(&mut self) {
        let limit = tokio::time::sleep(self.shared.config.lease);
        tokio::pin!(limit);
        while !self.tasks.is_empty() {
            tokio::select! {
                Some(done) = self.tasks.join_next() => self.reap(done),
                _ = &mut limit => {
                    tracing::warn!(count = self.tasks.len(), "sends still under way at shutdown abandoned");
                    self.tasks.abort_all();
                    break;
                }
            }
        }
    }

    /// One round: for each number with due messages claim what it may send now and start
    /// the sends; then sweep when due (after the claims, to keep the wakeup path short).
    async fn round(&mut self, sweep_when_due: bool) -> Result<Round, StoreError> {
        let started = Instant::now();
        let round = self.claim_round().await?;
        metrics::histogram!("tern_dispatch_round_seconds").record(started.elapsed().as_secs_f64());
        if sweep_when_due
            && self
                .last_sweep
                .is_none_or(|t| t.elapsed() >= self.shared.config.sweep_interval)
        {
            self.sweep().await?;
        }
        Ok(round)
    }

    async fn claim_round(&mut self) -> Result<Round, StoreError> {
        // Finished sends free their slots before the free ones are counted.
        while let Some(done) = self.tasks.try_join_next() {
            self.reap(done);
        }
        let mut round = Round::default();
        let batch = self.shared.config.batch_size.max(1);
        let due = self
            .shared
            .core
            .db
            .due_dispatch_numbers(now_ms(), self.due_cursor.as_deref(), NUMBERS_PER_ROUND)
            .await?;
        // More numbers than one page: continue after the last one next round.
        self.due_cursor = (due.len() as i64 >= NUMBERS_PER_ROUND)
            .then(|| due.last().cloned())
            .flatten();
        round.more_due |= self.due_cursor.is_some();
        for pnid in due {
            let free = self
                .shared
                .config
                .max_in_flight
                .saturating_sub(self.tasks.len());
            if free == 0 {
                round.slot_limited = true;
                break;
            }
            self.refresh_number(&pnid).await?;
            let Some(slot) = self.numbers.get_mut(&pnid) else {
                continue;
            };
            if let Number::Unusable(_) = slot.number {
                let number = slot.number.clone();
                // A campaign's messages wait: the campaign pauses on the number and sends
                // them after resume.
                let items = self.claim(&pnid, batch, true).await?;
                round.claimed += items.len();
                round.more_due |= items.len() == batch;
                for item in items {
                    let o = self.shared.attempt(&item, &number).await;
                    self.report.count(o);
                }
                continue;
            }
            let now = Instant::now();
            let available = slot.bucket.available(now);
            if available == 0 {
                let w = slot.bucket.wait_for_one(now);
                round.pacing_wait = Some(round.pacing_wait.map_or(w, |p| p.min(w)));
                continue;
            }
            let number = slot.number.clone();
            let ask = available.min(batch).min(free);
            let items = self.claim(&pnid, ask, false).await?;
            let mut bucket = self.numbers.get_mut(&pnid).map(|s| &mut s.bucket);
            if let Some(b) = bucket.as_deref_mut() {
                b.take(items.len());
            }
            round.claimed += items.len();
            if items.len() == ask {
                // Maybe more due: what held this claim back?
                if ask == batch {
                    round.more_due = true;
                } else if ask == free {
                    round.slot_limited = true;
                } else if let Some(b) = bucket {
                    let w = b.wait_for_one(Instant::now());
                    round.pacing_wait = Some(round.pacing_wait.map_or(w, |p| p.min(w)));
                }
            }
            for item in items {
                let shared = self.shared.clone();
                let number = number.clone();
                self.tasks
                    .spawn(async move { shared.attempt(&item, &number).await });
            }
        }
        Ok(round)
    }

    /// `api_only`: leave campaign messages queued (see [`DispatchClaim::api_only`]).
    async fn claim(
        &self,
        pnid: &str,
        limit: usize,
        api_only: bool,
    ) -> Result<Vec<DispatchItem>, StoreError> {
        let c = &self.shared.config;
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let started = Instant::now();
        let claimed = status::claim(
            &self.shared.core.db,
            &DispatchClaim {
                phone_number_id: Some(pnid),
                api_only,
                limit: i64::try_from(limit).unwrap_or(i64::MAX),
                owner: &self.owner,
                now: now_ms(),
                lease_ms: ms(c.lease),
                grace_ms: ms(c.unknown_grace),
            },
        )
        .await;
        metrics::histogram!("tern_dispatch_claim_seconds").record(started.elapsed().as_secs_f64());
        claimed
    }

    /// Reads the number (again) when unknown or older than `number_refresh`.
    async fn refresh_number(&mut self, pnid: &str) -> Result<(), StoreError> {
        let refresh = self.shared.config.number_refresh;
        if self
            .numbers
            .get(pnid)
            .is_some_and(|s| s.fetched.elapsed() < refresh)
        {
            return Ok(());
        }
        let read = self.shared.core.db.get_phone_number(pnid).await?;
        let number = dispatch::number(&self.shared.core.key, read.as_ref());
        // This process's test network learns the test numbers it sends from.
        if let Some(n) = read
            .as_ref()
            .filter(|n| n.mode == tern_domain::auth::Mode::Test)
        {
            tern_core::test_space::learn(&self.shared.core, n);
        }
        let mps = read
            .and_then(|n| u32::try_from(n.throughput_mps).ok())
            .filter(|m| *m > 0)
            .unwrap_or(self.shared.config.default_mps)
            .max(1);
        // Keep the bucket (and its state) unless the throughput changed.
        let bucket = match self.numbers.remove(pnid) {
            Some(old) if old.bucket.mps == mps => old.bucket,
            _ => Bucket::new(mps),
        };
        self.numbers.insert(
            pnid.to_string(),
            NumberSlot {
                fetched: Instant::now(),
                number,
                bucket,
            },
        );
        Ok(())
    }
}

impl Shared {
    /// One attempt of a claimed message (`tern_core::messages::dispatch`: prepare → send →
    /// decide), its decision recorded.
    async fn attempt(&self, item: &DispatchItem, number: &Number) -> Outcome {
        let core = &self.core;
        let (decision, answer) = match dispatch::prepare(core, item, number, &self.policy).await {
            Err(decided) => (decided, None),
            Ok(ready) => {
                let started = Instant::now();
                let result = ready.send(core, item, &self.policy).await;
                let latency = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
                let answer = dispatch::Answer::of(&result, latency);
                (
                    dispatch::decide(core, item, result, &self.policy).await,
                    Some(answer),
                )
            }
        };
        let entry = dispatch::attempt_entry(item, &decision, answer);
        self.record(item, decision, entry).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_full_jitter() {
        let c = DispatchConfig {
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_millis(1_000),
            ..Default::default()
        };
        for attempts in [0, 1, 2, 3, 10, 1_000] {
            for _ in 0..50 {
                let d = c.backoff(attempts);
                let ceiling = (100u64 << attempts.clamp(1, 30).saturating_sub(1)).min(1_000);
                assert!(d.as_millis() as u64 <= ceiling, "{attempts}: {d:?}");
            }
        }
    }
}
