//! The event-webhook delivery workers: claim due deliveries (leased, so any number of
//! processes can run them), attempt each in its own task, record what happened in batches.
//!
//! ```text
//!  wake: a commit stored events (this process) · a batch recorded (leases ended) · a task
//!        finished while every slot was taken · the next due time · the poll interval
//!        (events stored and leases ended by other processes)
//!    └─► claim ≤ free slots, ≤ per_subscription in flight per subscription (leases count)
//!          └─► slots left: fan out the next events into deliveries (about `max_in_flight`
//!              deliveries' worth, at least `fanout_batch` events), claim again
//!          └─► one task per delivery, on the send runtime: sign and POST
//!                └─► decided here (retry, failed, 410 disables), then recorded together,
//!                    in one transaction, by a recorder task (claiming and recording overlap)
//! ```
//!
//! While this process's API is busy (on average `busy_at` or more requests in flight over
//! the last quarter second), each database step of the workers (claim with fan-out, record)
//! is followed by a rest of `busy_rest` times its length: deliveries then take at most
//! 1/(1 + `busy_rest`) of the time of each of the two connections they use, and the API keeps
//! the database (PostgreSQL's CPU, SQLite's single writer). The give-way is a budget, not a
//! yield without end: while the backlog is older than `lag_budget` (the deliveries last
//! claimed waited that long, or, when a claim found none it could take, the earliest due
//! one has), the workers do not rest, and no rest lasts past the budget, so a busy API
//! slows deliveries down to that age but never lets the backlog grow older. A recording
//! ends leases and wakes the claimer: a subscription at its ceiling is served again at once.
//!
//! The sends run on a runtime of their own whose threads have a lower CPU priority
//! (`send_nice`): on a machine busy with API requests, deliveries take the CPU the API
//! leaves (they wait, durably, in the database) instead of slowing sends and reads; on an
//! idle one they run at full speed. Database work stays on the main runtime, so a
//! deprioritised thread never holds a transaction (SQLite's single writer) while waiting for
//! CPU.
//!
//! One subscription holds `per_subscription` of the `max_in_flight` slots at first, and
//! more — up to `per_subscription_max` — while its receiver answers well with all of them
//! in use; an answer that shows it overloaded (a timeout, `429`, `5xx`, a slow answer)
//! halves its share (`tern_domain::events::concurrency`). A receiver that hangs for its
//! whole 15 s timeout delays only its own deliveries, and soon holds few slots.
//! A worker that dies leaves its deliveries leased; they are due again when the lease ends
//! (attempted again under the same `webhook-id`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use tern_core::Core;
use tern_core::webhooks::deliver::{self, Made, Ready};
use tern_core::webhooks::send::Attempt;
use tern_domain::events::RetrySchedule;
use tern_domain::events::concurrency::{EndpointLimits, Signal};
use tern_domain::time::now_ms;
use tern_store::StoreError;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Settings of the delivery workers.
#[derive(Debug, Clone)]
pub struct WebhookWorkerConfig {
    /// When failed deliveries are tried again (`TERN_WEBHOOK_RETRY_SCHEDULE`).
    pub schedule: RetrySchedule,
    /// Attempts in flight per process.
    pub max_in_flight: usize,
    /// Attempts in flight per subscription at first (across processes, about)…
    pub per_subscription: usize,
    /// …and at most, as its receiver's answers allow
    /// (`tern_domain::events::concurrency`).
    pub per_subscription_max: usize,
    /// How long a claimed delivery is this worker's: longer than an attempt can take.
    pub lease: Duration,
    /// How often to look for deliveries other processes queued.
    pub poll_interval: Duration,
    /// Events fanned out into deliveries per transaction when slots are free, at least (more
    /// when each event has few subscribers: see [`fan_out_size`]).
    pub fanout_batch: i64,
    /// The nice value (0–19, higher yields more) of the threads that make the sends.
    pub send_nice: i32,
    /// The API's average requests in flight from which deliveries give way to it.
    pub busy_at: f64,
    /// While the API is busy, each database step rests this many times its length (0: never).
    pub busy_rest: u32,
    /// The backlog's age from which deliveries stop giving way (see the module's text).
    pub lag_budget: Duration,
}

impl Default for WebhookWorkerConfig {
    fn default() -> Self {
        Self {
            schedule: RetrySchedule::default(),
            max_in_flight: 256,
            per_subscription: 16,
            // Half the slots: one subscription never starves the others.
            per_subscription_max: 128,
            lease: Duration::from_secs(60),
            poll_interval: Duration::from_millis(250),
            fanout_batch: 32,
            send_nice: 10,
            // As many requests as cores: the API alone could keep the machine busy.
            busy_at: std::thread::available_parallelism().map_or(2, usize::from) as f64,
            busy_rest: 19,
            lag_budget: Duration::from_millis(500),
        }
    }
}

/// Runs until `cancel`; attempts in flight are finished and recorded first.
pub async fn run(core: Core, config: WebhookWorkerConfig, cancel: CancellationToken) {
    let owner = format!("webhooks-{}", Uuid::new_v4());
    let wakeups = core.db.wakeups();
    let send_rt = send_runtime(config.send_nice);
    let sends = send_rt
        .as_ref()
        .map_or_else(tokio::runtime::Handle::current, |rt| rt.handle().clone());
    let mut tasks: JoinSet<(Ready, Attempt)> = JoinSet::new();
    let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(60_000);
    let mut limits = EndpointLimits::new(
        i64::try_from(config.per_subscription).unwrap_or(1),
        i64::try_from(config.per_subscription_max).unwrap_or(1),
    );
    // This worker's deliveries claimed and not yet recorded, per subscription: what the
    // claim counts against a subscription's ceiling (a lease ends when its attempt is
    // recorded, not when the answer comes).
    let held: Held = Held::default();
    let mut backoff = Duration::ZERO;
    let mut fanout_events = config.fanout_batch;
    // Finished attempts go to the recorder; a full channel holds the claimer back.
    let (done_tx, done_rx) =
        tokio::sync::mpsc::channel::<(Option<Uuid>, Made)>(4 * config.max_in_flight.max(1));
    // How old the deliveries last claimed were (ms): the claimer writes, both give-ways read.
    let lag = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(0));
    let recorder = tokio::spawn(recorder(
        core.clone(),
        owner.clone(),
        done_rx,
        GiveWay::new(&core, &config, lag.clone()),
        held.clone(),
    ));
    let mut give_way = GiveWay::new(&core, &config, lag.clone());
    let mut pace = FanOutPace::new(config.max_in_flight, config.poll_interval);
    // Whether a claim may find something new: after a wake-up, a recording (leases ended),
    // or a claim that filled every free slot (a finished attempt frees one). A finished
    // attempt alone does not: its lease lasts until it is recorded, so claiming on every
    // answer found nothing most times and cost the database a transaction each.
    let mut claim_next = true;
    let mut seen_recordings = held.recordings();
    let mut idle_for = config.poll_interval;
    loop {
        // Claim what is due, as far as slots allow.
        let free = config.max_in_flight.saturating_sub(tasks.len());
        let recordings = held.recordings();
        if free > 0 && !cancel.is_cancelled() && (claim_next || recordings != seen_recordings) {
            seen_recordings = recordings;
            idle_for = config.poll_interval;
            claim_next = false;
            give_way.rest().await;
            let step = Instant::now();
            let now = now_ms();
            let limit = i64::try_from(free).unwrap_or(0);
            match core
                .db
                .claim_webhook_deliveries_capped(
                    &owner,
                    now,
                    lease_ms,
                    limit,
                    limits.start(),
                    &limits.moved(),
                )
                .await
            {
                Ok(jobs) => {
                    backoff = Duration::ZERO;
                    if !jobs.is_empty() {
                        lag.store(
                            backlog_age(&jobs, now),
                            std::sync::atomic::Ordering::Relaxed,
                        );
                    }
                    let room = (jobs.len() as i64) < limit;
                    let fanned = if pace.wants(jobs.len(), room, tasks.is_empty(), Instant::now()) {
                        match core.db.fan_out_events(fanout_events).await {
                            Ok((events, deliveries)) => {
                                pace.fanned(deliveries, Instant::now());
                                fanout_events = fan_out_size(&config, events, deliveries);
                                events > 0
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "webhook event fan-out failed");
                                false
                            }
                        }
                    } else {
                        false
                    };
                    if fanned {
                        idle_for = Duration::ZERO;
                    } else if jobs.is_empty() {
                        // Due but not claimed means held back by a per-subscription cap
                        // (freed when an attempt here is recorded, or at the poll for
                        // others'). The backlog is then as old as its earliest due time:
                        // an empty claim must not read as no backlog, or the workers would
                        // rest while it ages.
                        let due = core.db.next_webhook_delivery_due().await.ok().flatten();
                        let late = due.map_or(0, |due| now_ms().saturating_sub(due));
                        lag.store(late.max(0), std::sync::atomic::Ordering::Relaxed);
                        if late < 0 {
                            let wait = u64::try_from(-late).unwrap_or(0);
                            idle_for = idle_for.min(Duration::from_millis(wait));
                        }
                    }
                    give_way.took(step.elapsed());
                    if jobs.len() as i64 == limit {
                        // More may be due right away: come back without waiting.
                        idle_for = Duration::ZERO;
                        claim_next = true;
                    }
                    for job in jobs {
                        match deliver::prepare(&core, job) {
                            Ok(mut ready) => {
                                held.add(ready.job.subscription_id, 1);
                                let sender = core.webhooks.clone();
                                tasks.spawn_on(
                                    async move {
                                        let a = ready.send(&sender).await;
                                        (ready, a)
                                    },
                                    &sends,
                                );
                            }
                            // Closed unsent: recorded at once.
                            Err(unsent) => {
                                let _ = done_tx.send((None, unsent)).await;
                            }
                        }
                    }
                }
                Err(e) => {
                    backoff =
                        (backoff * 2).clamp(Duration::from_millis(100), Duration::from_secs(5));
                    tracing::warn!(error = %e, "webhook delivery claim failed");
                    idle_for = backoff;
                    claim_next = true;
                }
            }
        }
        if cancel.is_cancelled() && tasks.is_empty() {
            break;
        }
        // Wait for a finished attempt, a wake-up or the next due time.
        let (first, woken) = tokio::select! {
            biased;
            done = tasks.join_next(), if !tasks.is_empty() => (done, false),
            () = wakeups.deliveries.notified(), if !cancel.is_cancelled() => (None, true),
            () = held.recorded.notified(), if !cancel.is_cancelled() => (None, true),
            () = tokio::time::sleep(idle_for), if !cancel.is_cancelled() => (None, true),
            () = cancel.cancelled(), if tasks.is_empty() => break,
        };
        claim_next |= woken;
        // A task that panicked made no attempt worth recording: its lease brings it back.
        for (ready, a) in first
            .into_iter()
            .chain(std::iter::from_fn(|| tasks.try_join_next()))
            .flatten()
        {
            let sub = ready.job.subscription_id;
            let signal = Signal::of(a.response_status, a.latency_ms);
            limits.observe(sub, signal, held.get(sub));
            let made = deliver::decide(&core, &ready, a, &config.schedule).await;
            // The recorder ends only when this sender is dropped.
            let _ = done_tx.send((Some(sub), made)).await;
        }
    }
    // Everything finished is recorded before the worker ends.
    drop(done_tx);
    let _ = recorder.await;
    if let Some(rt) = send_rt {
        // Nothing is left on it; dropping a runtime inside another would block.
        rt.shutdown_background();
    }
}

/// How many events the next fan-out takes, after one that made `deliveries` rows of
/// `events`: about `max_in_flight` deliveries' worth, between `fanout_batch` and 1,024
/// events. With one subscriber per event, 32 events per transaction held one busy endpoint
/// to about 1,000 deliveries a second (a fan-out per claim, each a round trip for the
/// single writer); with fifty, 32 events are already 1,600 deliveries.
fn fan_out_size(config: &WebhookWorkerConfig, events: usize, deliveries: usize) -> i64 {
    if events == 0 {
        return config.fanout_batch;
    }
    let per_event = (deliveries / events).max(1);
    let wanted = i64::try_from(config.max_in_flight / per_event).unwrap_or(i64::MAX);
    wanted.clamp(config.fanout_batch, 1_024.max(config.fanout_batch))
}

/// One pass without the loop (tests, `tern::app::settle`): fans out the stored events and
/// attempts every delivery due now (at most `config.max_in_flight` at once, on this
/// runtime), recording each round, until none is left; returns how many events were fanned
/// out plus attempts made. Deliveries retried later are left for a later pass.
pub async fn drain_once(
    core: &Core,
    config: &WebhookWorkerConfig,
    owner: &str,
) -> Result<usize, StoreError> {
    let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(60_000);
    let limit = i64::try_from(config.max_in_flight.max(1)).unwrap_or(256);
    let per_subscription = i64::try_from(config.per_subscription).unwrap_or(1);
    let mut moved = 0;
    loop {
        let (events, _) = core.db.fan_out_events(config.fanout_batch).await?;
        let jobs = core
            .db
            .claim_webhook_deliveries(owner, now_ms(), lease_ms, limit, per_subscription)
            .await?;
        if events == 0 && jobs.is_empty() {
            return Ok(moved);
        }
        moved += events + jobs.len();
        let made: Vec<Made> = futures::stream::iter(jobs)
            .map(|job| async move { deliver::attempt(core, &job, &config.schedule).await })
            .buffer_unordered(config.max_in_flight.max(1))
            .collect()
            .await;
        record(core, owner, &made).await;
    }
}

/// The runtime the sends run on: one thread (sends are I/O; one core serves thousands a
/// second) at nice `nice`. `None` (sends stay on the caller's runtime) if it cannot start.
fn send_runtime(nice: i32) -> Option<tokio::runtime::Runtime> {
    let built = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .max_blocking_threads(4)
        .thread_name("tern-webhook-send")
        .on_thread_start(move || tern_core::load::lower_thread_priority(nice))
        .enable_all()
        .build();
    match built {
        Ok(rt) => Some(rt),
        Err(e) => {
            tracing::warn!(error = %e, "no separate runtime for webhook sends; they share the main one");
            None
        }
    }
}

/// Records finished attempts as they come, all that are waiting in one transaction.
async fn recorder(
    core: Core,
    owner: String,
    mut done: tokio::sync::mpsc::Receiver<(Option<Uuid>, Made)>,
    mut give_way: GiveWay,
    held: Held,
) {
    let mut batch = Vec::new();
    loop {
        give_way.rest().await;
        if done.recv_many(&mut batch, 512).await == 0 {
            break;
        }
        let step = Instant::now();
        record(&core, &owner, batch.iter().map(|(_, m)| m)).await;
        give_way.took(step.elapsed());
        for sub in batch.iter().filter_map(|(s, _)| *s) {
            held.add(sub, -1);
        }
        held.recorded();
        batch.clear();
    }
}

/// Deliveries a worker has claimed and not yet recorded, per subscription (shared by the
/// claimer, which adds, and the recorder, which takes away and wakes the claimer: a
/// recording ends leases, and a claim held back by a subscription's ceiling may then take
/// more at once rather than at the next poll).
#[derive(Clone, Default)]
struct Held {
    counts: std::sync::Arc<std::sync::Mutex<HashMap<Uuid, i64>>>,
    recorded: std::sync::Arc<tokio::sync::Notify>,
    /// Recordings made so far (the claimer claims again when this moved).
    recordings: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Held {
    fn add(&self, sub: Uuid, n: i64) {
        let mut map = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let v = map.entry(sub).or_default();
        *v += n;
        if *v <= 0 {
            map.remove(&sub);
        }
    }

    /// The recorder recorded a batch: leases ended.
    fn recorded(&self) {
        self.recordings
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        self.recorded.notify_one();
    }

    fn recordings(&self) -> u64 {
        self.recordings.load(std::sync::atomic::Ordering::Acquire)
    }

    fn get(&self, sub: Uuid) -> i64 {
        let map = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(&sub).copied().unwrap_or(0)
    }
}

/// When the claimer fans out more events: after a claim that left slots free, while fewer
/// than `max_ahead` deliveries it fanned out wait unclaimed (lazily: a backlog stays one row
/// per event, and a subscription at its cap does not make every turn fan out more). The
/// count is about (another process may claim them, a capped subscription's wait), so it is
/// forgotten when nothing was claimable and nothing is in flight here, and when no fan-out
/// happened for `every`: deliveries held back by one dead receiver never keep new events
/// from the other subscriptions for longer than that.
struct FanOutPace {
    ahead: usize,
    max_ahead: usize,
    every: Duration,
    last: Instant,
}

impl FanOutPace {
    fn new(max_ahead: usize, every: Duration) -> FanOutPace {
        FanOutPace {
            ahead: 0,
            max_ahead,
            every,
            last: Instant::now(),
        }
    }

    /// A claim took `claimed` deliveries, leaving slots free (`room`) or not; `idle_here`:
    /// nothing of this worker's is in flight. Whether to fan out now.
    fn wants(&mut self, claimed: usize, room: bool, idle_here: bool, now: Instant) -> bool {
        self.ahead = if (claimed == 0 && idle_here) || now.duration_since(self.last) >= self.every {
            0
        } else {
            self.ahead.saturating_sub(claimed)
        };
        room && self.ahead < self.max_ahead
    }

    /// A fan-out queued `deliveries`.
    fn fanned(&mut self, deliveries: usize, now: Instant) {
        self.ahead += deliveries;
        self.last = now;
    }
}

/// How long the oldest first attempt of `jobs` waited for its claim at `now` (ms; 0 for
/// none): the age of the backlog the workers are at. Retries are due when their schedule
/// says, not when their event was made, so they do not count.
fn backlog_age(jobs: &[tern_store::DeliveryJob], now: i64) -> i64 {
    jobs.iter()
        .filter(|j| j.attempt == 1)
        .map(|j| now.saturating_sub(j.event_created_at))
        .max()
        .unwrap_or(0)
}

/// The rest owed after a database step of `took` (see the module's text): `busy_rest` times
/// it while the API is `busy` and the backlog is younger than `budget`, but never longer
/// than what the backlog has left of the budget (a rest must not carry it past), nor a
/// second (one slow step must not park the worker); nothing otherwise.
fn rest_after(
    took: Duration,
    busy: bool,
    busy_rest: u32,
    lag: Duration,
    budget: Duration,
) -> Duration {
    if busy_rest == 0 || !busy || lag >= budget {
        return Duration::ZERO;
    }
    (took * busy_rest)
        .min(Duration::from_secs(1))
        .min(budget - lag)
}

/// The rests of one worker task while the API is busy (see the module's text).
struct GiveWay {
    watch: tern_core::load::LoadWatch,
    busy_at: f64,
    busy_rest: u32,
    budget: Duration,
    lag_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
    owed: Duration,
}

impl GiveWay {
    fn new(
        core: &Core,
        config: &WebhookWorkerConfig,
        lag_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
    ) -> GiveWay {
        GiveWay {
            watch: tern_core::load::LoadWatch::new(
                std::sync::Arc::clone(&core.api_load),
                Duration::from_millis(250),
            ),
            busy_at: config.busy_at,
            busy_rest: config.busy_rest,
            budget: config.lag_budget,
            lag_ms,
            owed: Duration::ZERO,
        }
    }

    /// A database step took `took`: a rest is owed if the API is busy and the backlog young.
    fn took(&mut self, took: Duration) {
        let lag = self.lag_ms.load(std::sync::atomic::Ordering::Relaxed);
        let lag = Duration::from_millis(u64::try_from(lag).unwrap_or(0));
        let busy = self.busy_rest > 0 && self.watch.in_flight() >= self.busy_at;
        self.owed = rest_after(took, busy, self.busy_rest, lag, self.budget);
    }

    /// Rests what is owed.
    async fn rest(&mut self) {
        let owed = std::mem::take(&mut self.owed);
        if !owed.is_zero() {
            tokio::time::sleep(owed).await;
        }
    }
}

/// Records finished attempts in one transaction (retried a few times: an attempt left
/// unrecorded is made again when its lease ends, under the same `webhook-id`).
async fn record<'a>(core: &Core, owner: &str, made: impl IntoIterator<Item = &'a Made>) {
    let recordings: Vec<_> = made.into_iter().map(|m| m.recording(owner)).collect();
    if recordings.is_empty() {
        return;
    }
    if let Err(e) = crate::retry::store_write(|| core.db.record_webhook_attempts(&recordings)).await
    {
        tracing::warn!(error = %e, n = recordings.len(), "recording webhook attempts failed");
    }
}

#[cfg(test)]
mod pace_tests {
    use super::*;

    #[test]
    fn giving_way_stops_at_the_lag_budget() {
        let ms = Duration::from_millis;
        let budget = ms(500);
        // Busy, backlog young: 19 times the step.
        assert_eq!(rest_after(ms(2), true, 19, ms(100), budget), ms(38));
        // At most a second, however slow the step.
        let long = Duration::from_secs(5);
        assert_eq!(rest_after(ms(200), true, 19, ms(0), long), ms(1000));
        // Never past the budget: a rest ends when the backlog reaches it.
        assert_eq!(rest_after(ms(200), true, 19, ms(0), budget), ms(500));
        assert_eq!(rest_after(ms(2), true, 19, ms(480), budget), ms(20));
        // The backlog reached the budget, the API is quiet, or resting is off: no rest.
        assert_eq!(rest_after(ms(2), true, 19, ms(500), budget), Duration::ZERO);
        assert_eq!(rest_after(ms(2), false, 19, ms(0), budget), Duration::ZERO);
        assert_eq!(rest_after(ms(2), true, 0, ms(0), budget), Duration::ZERO);
    }

    #[test]
    fn fan_out_waits_for_claims_but_not_longer_than_every() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut pace = FanOutPace::new(256, ms(250));
        pace.last = t0;
        assert!(pace.wants(0, true, true, t0));
        pace.fanned(300, t0);
        // 300 fanned out, none claimed yet: no more for now, nor with no room left.
        assert!(!pace.wants(10, true, false, t0 + ms(1)));
        assert!(!pace.wants(0, false, false, t0 + ms(2)));
        // Claims bring it under the bound.
        assert!(pace.wants(40, true, false, t0 + ms(3)));
        pace.fanned(100, t0 + ms(3));
        // A capped subscription's deliveries stay unclaimed while its attempts hang …
        assert!(!pace.wants(0, true, false, t0 + ms(200)));
        // … for one interval at most: then the others' new events are fanned out again.
        assert!(pace.wants(0, true, false, t0 + ms(253)));
        // Nothing claimable and nothing in flight here: the count is forgotten at once.
        pace.fanned(1_000, t0 + ms(254));
        assert!(pace.wants(0, true, true, t0 + ms(255)));
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn sends_run_on_threads_of_lower_priority() {
        let rt = super::send_runtime(10).unwrap();
        let here = rustix::process::getpriority_process(None).unwrap();
        let there = rt
            .block_on(rt.spawn(async { rustix::process::getpriority_process(None).unwrap() }))
            .unwrap();
        // Raising a priority needs privileges: a test run already above 10 stays there.
        assert_eq!(there, here.max(10));
        assert_eq!(
            rustix::process::getpriority_process(None).unwrap(),
            here,
            "only the send threads"
        );
        rt.shutdown_background();
    }

    #[test]
    fn a_fan_out_takes_about_the_slots_worth_of_deliveries() {
        let c = super::WebhookWorkerConfig::default();
        assert_eq!(super::fan_out_size(&c, 0, 0), 32, "nothing seen: the floor");
        assert_eq!(
            super::fan_out_size(&c, 32, 32),
            256,
            "one subscriber per event"
        );
        assert_eq!(super::fan_out_size(&c, 32, 0), 256, "streams only");
        assert_eq!(
            super::fan_out_size(&c, 32, 1_600),
            32,
            "fifty subscribers: the floor"
        );
        let wide = super::WebhookWorkerConfig {
            max_in_flight: 100_000,
            ..c
        };
        assert_eq!(super::fan_out_size(&wide, 1, 1), 1_024, "the ceiling");
    }
}
