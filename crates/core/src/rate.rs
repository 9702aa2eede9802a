//! Request quotas and the burst limiter of the public API.
//!
//! Quotas are fixed windows (`domain::quota`) counted in this process, or in Redis when
//! `TERN_REDIS_URL` is set so that several `tern serve` processes share one count: one round
//! trip per request runs a script that checks every window and counts the request in all of
//! them, or in none. When Redis cannot be reached the process counts on its own rather than
//! refusing requests: the outage is logged when it starts and when it ends (not once per
//! request), each request counted locally adds to `tern_rate_limit_redis_fallback_total`,
//! each outage to `tern_rate_limit_redis_outages_total`, and `tern_rate_limit_redis_reachable`
//! is 1 or 0.
//!
//! The burst limiter (GCRA, `governor`) is per key and per process: it smooths one client's
//! spikes, while the quotas are the shared ceiling.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tern_domain::plan::RateWindow;
use tern_domain::quota::{self, Verdict, WindowState};
use tern_domain::time::now_ms;
use uuid::Uuid;

use crate::Principal;

/// How long a request waits for Redis before counting locally instead.
const REDIS_TIMEOUT: Duration = Duration::from_millis(250);
/// How long after a failure the process counts locally before trying Redis again.
const REDIS_RETRY: Duration = Duration::from_secs(1);

/// The counters of one process, optionally backed by Redis.
#[derive(Default)]
pub struct Limiter {
    /// No quotas and no burst limiter (`TERN_RATE_LIMITS=off`).
    off: bool,
    /// With Redis: what each key's last admission used, so that its next Redis call starts
    /// together with the key lookup instead of after it (see [`Limiter::early`]).
    hints: Mutex<HashMap<Vec<u8>, Hint>>,
    local: Mutex<LocalCounters>,
    bursts: Mutex<HashMap<Uuid, (u64, Arc<DefaultDirectRateLimiter>)>>,
    redis: Option<RedisCounters>,
}

impl Limiter {
    /// Counters in Redis at `url` (`redis://…`), falling back to local ones while it is out
    /// of reach. Fails only on a URL the client cannot parse.
    pub fn with_redis(url: &str) -> Result<Limiter, String> {
        let client = redis::Client::open(url).map_err(|e| format!("TERN_REDIS_URL: {e}"))?;
        Ok(Limiter {
            redis: Some(RedisCounters {
                client,
                conn: Mutex::new(Conn::Idle),
                connecting: tokio::sync::Mutex::new(()),
                reach: Reachability::default(),
            }),
            ..Limiter::default()
        })
    }

    /// No quotas, no burst limiter, no RateLimit headers.
    pub fn off() -> Limiter {
        Limiter {
            off: true,
            ..Limiter::default()
        }
    }

    /// Checks and counts a request of `weight` against the caller's four windows.
    pub async fn take(&self, p: &Principal, weight: u64) -> Verdict {
        if self.off {
            return Verdict::Admitted(Vec::new());
        }
        self.take_for(
            p.quota_org_id(),
            p.key_id,
            &quota::windows(&p.effective()),
            weight,
        )
        .await
    }

    /// The burst check and the Redis call of a key's request, started before the key is
    /// looked up, from what the key's last admission used (`None` without Redis or without
    /// an earlier admission in this process). Redis's round trip then overlaps the lookup's
    /// instead of following it. Admission uses the outcome only when the lookup confirms
    /// the organisation and key; a quota changed since the hint counts this one request
    /// under the old value.
    pub async fn early(&self, hash: &[u8], weight: u64) -> Option<(Hint, Early)> {
        if self.off || self.redis.is_none() {
            return None;
        }
        let hint = self
            .hints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(hash)
            .cloned()?;
        if let Some(n) = hint.burst
            && !self.burst_check(hint.key_id, n)
        {
            return Some((hint, Early::Burst));
        }
        let v = self
            .take_for(hint.org_id, hint.key_id, &hint.windows, weight)
            .await;
        Some((hint, Early::Counted(v)))
    }

    /// Notes what `p`'s admission used, for [`Limiter::early`] (Redis only).
    pub fn remember(&self, hash: &[u8], p: &Principal) {
        if self.off || self.redis.is_none() {
            return;
        }
        let hint = Hint {
            org_id: p.quota_org_id(),
            key_id: p.key_id,
            windows: quota::windows(&p.effective()),
            burst: p.effective().burst(),
        };
        let mut hints = self.hints.lock().unwrap_or_else(|e| e.into_inner());
        if hints.get(hash) != Some(&hint) {
            // Bounded: a flood of keys only costs the overlap until they come back.
            if hints.len() >= 100_000 {
                hints.clear();
            }
            hints.insert(hash.to_vec(), hint);
        }
    }

    /// Forgets a key that no longer authenticates.
    pub fn forget(&self, hash: &[u8]) {
        if self.redis.is_some() {
            self.hints
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(hash);
        }
    }

    async fn take_for(
        &self,
        org: Uuid,
        key: Uuid,
        windows: &[(RateWindow, u64)],
        weight: u64,
    ) -> Verdict {
        if let Some(r) = &self.redis {
            match r.take(org, key, windows, weight).await {
                Ok(v) => {
                    if let Some(change) = r.reach.answered() {
                        change.report("");
                    }
                    return v;
                }
                Err(e) => {
                    metrics::counter!("tern_rate_limit_redis_fallback_total").increment(1);
                    if let Some(change) = r.reach.failed() {
                        change.report(&e);
                    }
                }
            }
        }
        self.take_local(org, key, windows, weight, now_ms())
    }

    fn take_local(
        &self,
        org: Uuid,
        key: Uuid,
        windows: &[(RateWindow, u64)],
        weight: u64,
        now: i64,
    ) -> Verdict {
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        local.prune(now);
        let states = windows
            .iter()
            .map(|&(w, q)| WindowState {
                window: w,
                quota: q,
                used: local.used(owner(org, key, w), w, now),
                reset_ms: quota::reset_ms(now, w),
            })
            .collect();
        let verdict = quota::decide(states, weight);
        if let Verdict::Admitted(states) = &verdict {
            for s in states {
                local.set(owner(org, key, s.window), s.window, now, s.used);
            }
        }
        verdict
    }

    /// Each window of key `key` of `org` as it stands now, nothing counted (the usage
    /// page): from Redis when set (this process's counts while it is out of reach), else
    /// this process's. `None` when quotas are off.
    pub async fn peek(
        &self,
        org: Uuid,
        key: Uuid,
        windows: &[(RateWindow, u64)],
    ) -> Option<Vec<WindowState>> {
        if self.off {
            return None;
        }
        if let Some(r) = &self.redis
            && let Ok(states) = r.peek(org, key, windows).await
        {
            return Some(states);
        }
        let now = now_ms();
        let local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        Some(
            windows
                .iter()
                .map(|&(w, q)| WindowState {
                    window: w,
                    quota: q,
                    used: local.used(owner(org, key, w), w, now),
                    reset_ms: quota::reset_ms(now, w),
                })
                .collect(),
        )
    }

    /// The burst limiter (GCRA, `burst` requests per second per key with a burst of as
    /// many): `false` when this request comes too fast. Always `true` without a setting.
    pub fn burst_ok(&self, p: &Principal) -> bool {
        match p.effective().burst().filter(|_| !self.off) {
            Some(n) => self.burst_check(p.key_id, n),
            None => true,
        }
    }

    fn burst_check(&self, key_id: Uuid, n: u64) -> bool {
        let per_sec =
            NonZeroU32::new(u32::try_from(n).unwrap_or(u32::MAX)).unwrap_or(NonZeroU32::MIN);
        let limiter = {
            let mut map = self.bursts.lock().unwrap_or_else(|e| e.into_inner());
            match map.get(&key_id) {
                Some((set, l)) if *set == n => l.clone(),
                _ => {
                    let l = Arc::new(RateLimiter::direct(Quota::per_second(per_sec)));
                    map.insert(key_id, (n, l.clone()));
                    l
                }
            }
        };
        limiter.check().is_ok()
    }
}

/// What a key's last admission used: its organisation, key and limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    pub org_id: Uuid,
    pub key_id: Uuid,
    windows: Vec<(RateWindow, u64)>,
    burst: Option<u64>,
}

/// What [`Limiter::early`] did.
#[derive(Debug)]
pub enum Early {
    /// The burst limiter refused the request (nothing counted).
    Burst,
    /// The quotas' verdict (counted when admitted).
    Counted(Verdict),
}

fn owner(org: Uuid, key: Uuid, w: RateWindow) -> Uuid {
    match quota::scope(w) {
        "key" => key,
        _ => org,
    }
}

/// This process's counts: (owner, window) → (window index, used).
#[derive(Default)]
struct LocalCounters {
    counts: HashMap<(Uuid, RateWindow), (i64, u64)>,
    pruned_at: i64,
}

impl LocalCounters {
    fn used(&self, owner: Uuid, w: RateWindow, now: i64) -> u64 {
        match self.counts.get(&(owner, w)) {
            Some((idx, n)) if *idx == quota::window_index(now, w) => *n,
            _ => 0,
        }
    }

    fn set(&mut self, owner: Uuid, w: RateWindow, now: i64, used: u64) {
        self.counts
            .insert((owner, w), (quota::window_index(now, w), used));
    }

    /// Forgets windows that ended, once a minute, so idle keys do not accumulate.
    fn prune(&mut self, now: i64) {
        if now - self.pruned_at < 60_000 {
            return;
        }
        self.pruned_at = now;
        self.counts
            .retain(|(_, w), (idx, _)| *idx == quota::window_index(now, *w));
    }
}

/// Whether Redis answered the last request, so that an outage is told once when it starts
/// and once when it ends, however many requests it affects (every one of them warned before:
/// thousands of identical lines a second under load).
#[derive(Default)]
struct Reachability {
    /// [`UNTRIED`], [`UP`] or [`DOWN`]; swapped, so exactly one request sees each change.
    state: AtomicU8,
    /// Requests counted in this process during the current outage.
    local: AtomicU64,
}

const UNTRIED: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// A change of [`Reachability`].
#[derive(Debug, PartialEq, Eq)]
enum Change {
    /// Redis answered for the first time.
    Reached,
    /// An outage started (or Redis was out of reach from the start).
    Lost,
    /// Redis answers again after an outage that counted this many requests locally.
    Back { counted_locally: u64 },
}

impl Reachability {
    /// Redis answered a request.
    fn answered(&self) -> Option<Change> {
        match self.state.swap(UP, Ordering::AcqRel) {
            UP => None,
            UNTRIED => Some(Change::Reached),
            _ => Some(Change::Back {
                counted_locally: self.local.swap(0, Ordering::AcqRel),
            }),
        }
    }

    /// A request was counted locally because Redis did not answer.
    fn failed(&self) -> Option<Change> {
        self.local.fetch_add(1, Ordering::AcqRel);
        match self.state.swap(DOWN, Ordering::AcqRel) {
            DOWN => None,
            _ => Some(Change::Lost),
        }
    }
}

impl Change {
    /// Logs the change and keeps the metrics: `error` is the failure that started an outage.
    fn report(self, error: &str) {
        match self {
            Change::Reached => {
                metrics::gauge!("tern_rate_limit_redis_reachable").set(1.0);
            }
            Change::Lost => {
                metrics::gauge!("tern_rate_limit_redis_reachable").set(0.0);
                metrics::counter!("tern_rate_limit_redis_outages_total").increment(1);
                tracing::warn!(
                    error,
                    "rate limits: Redis unreachable, counting in this process until it answers \
                     again (retried every second)"
                );
            }
            Change::Back { counted_locally } => {
                metrics::gauge!("tern_rate_limit_redis_reachable").set(1.0);
                tracing::info!(
                    counted_locally,
                    "rate limits: Redis reachable again, counting there"
                );
            }
        }
    }
}

enum Conn {
    Idle,
    Up(redis::aio::MultiplexedConnection),
    /// Failed at this instant: local counting until [`REDIS_RETRY`] has passed.
    Down(Instant),
}

struct RedisCounters {
    client: redis::Client,
    conn: Mutex<Conn>,
    connecting: tokio::sync::Mutex<()>,
    reach: Reachability,
}

/// Checks every window and counts the request in all of them, or in none, atomically.
/// KEYS: one counter per window (its index appended here, from Redis's clock, so every
/// process agrees on the window). ARGV: weight, then each window's quota, then its length
/// in seconds. Returns, per window, the count (after the request when admitted, before it
/// when refused) and the milliseconds to its reset, then 1 when admitted.
const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = #KEYS
local w = tonumber(ARGV[1])
local keys, used, resets = {}, {}, {}
local fits = 1
for i = 1, n do
  local len = tonumber(ARGV[1 + n + i]) * 1000
  local idx = math.floor(now / len)
  keys[i] = KEYS[i] .. ':' .. idx
  used[i] = tonumber(redis.call('GET', keys[i]) or '0')
  resets[i] = (idx + 1) * len - now
  if used[i] + w > tonumber(ARGV[1 + i]) then fits = 0 end
end
local out = {}
for i = 1, n do
  if fits == 1 then
    used[i] = redis.call('INCRBY', keys[i], w)
    if used[i] == w then redis.call('PEXPIRE', keys[i], resets[i] + 5000) end
  end
  out[#out + 1] = used[i]
  out[#out + 1] = resets[i]
end
out[#out + 1] = fits
return out
";

impl RedisCounters {
    async fn take(
        &self,
        org: Uuid,
        key: Uuid,
        windows: &[(RateWindow, u64)],
        weight: u64,
    ) -> Result<Verdict, String> {
        let mut conn = self.connection().await?;
        let mut inv = redis_script().prepare_invoke();
        for &(w, _) in windows {
            inv.key(counter_key(org, key, w));
        }
        inv.arg(weight);
        for &(_, q) in windows {
            inv.arg(q);
        }
        for &(w, _) in windows {
            inv.arg(w.seconds());
        }
        let res =
            tokio::time::timeout(REDIS_TIMEOUT, inv.invoke_async::<Vec<i64>>(&mut conn)).await;
        let out = match res {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(self.failed(e.to_string())),
            Err(_) => return Err(self.failed("no answer within 250 ms".into())),
        };
        if out.len() != windows.len() * 2 + 1 {
            return Err(format!("unexpected script answer of {} values", out.len()));
        }
        let states = windows
            .iter()
            .enumerate()
            .map(|(i, &(w, q))| WindowState {
                window: w,
                quota: q,
                used: u64::try_from(out[i * 2]).unwrap_or(0),
                reset_ms: out[i * 2 + 1],
            })
            .collect::<Vec<_>>();
        Ok(if out[windows.len() * 2] == 1 {
            Verdict::Admitted(states)
        } else {
            // Counted nowhere: decide again from the counts to name the window.
            match quota::decide(states, weight) {
                v @ Verdict::Exceeded { .. } => v,
                // A quota raised between the script and here: refuse with the last window.
                Verdict::Admitted(states) => Verdict::Exceeded {
                    window: windows.last().map_or(RateWindow::TenantDay, |w| w.0),
                    states,
                },
            }
        })
    }

    /// The shared connection; a new one is made (by one request at a time, the others
    /// waiting for it) when there is none and the last failure is over [`REDIS_RETRY`] old.
    async fn connection(&self) -> Result<redis::aio::MultiplexedConnection, String> {
        if let Some(ready) = self.current() {
            return ready;
        }
        let _one = self.connecting.lock().await;
        if let Some(ready) = self.current() {
            return ready;
        }
        let made = tokio::time::timeout(
            REDIS_TIMEOUT,
            self.client.get_multiplexed_async_connection(),
        )
        .await;
        let (state, out) = match made {
            Ok(Ok(c)) => (Conn::Up(c.clone()), Ok(c)),
            Ok(Err(e)) => (Conn::Down(Instant::now()), Err(e.to_string())),
            Err(_) => (
                Conn::Down(Instant::now()),
                Err("no connection within 250 ms".into()),
            ),
        };
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = state;
        out
    }

    /// The connection, or the recent failure; `None` when a new connection is due.
    fn current(&self) -> Option<Result<redis::aio::MultiplexedConnection, String>> {
        match &*self.conn.lock().unwrap_or_else(|e| e.into_inner()) {
            Conn::Up(c) => Some(Ok(c.clone())),
            Conn::Down(at) if at.elapsed() < REDIS_RETRY => {
                Some(Err("Redis was unreachable less than 1 s ago".into()))
            }
            _ => None,
        }
    }

    /// Drops the connection after a failure so the next attempt (after [`REDIS_RETRY`])
    /// connects afresh.
    fn failed(&self, e: String) -> String {
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = Conn::Down(Instant::now());
        e
    }
}

/// The counts of [`SCRIPT`]'s counters without counting: KEYS one counter per window,
/// ARGV each window's length in seconds; returns, per window, the count and the
/// milliseconds to its reset.
const PEEK_SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i = 1, #KEYS do
  local len = tonumber(ARGV[i]) * 1000
  local idx = math.floor(now / len)
  out[#out + 1] = tonumber(redis.call('GET', KEYS[i] .. ':' .. idx) or '0')
  out[#out + 1] = (idx + 1) * len - now
end
return out
";

impl RedisCounters {
    async fn peek(
        &self,
        org: Uuid,
        key: Uuid,
        windows: &[(RateWindow, u64)],
    ) -> Result<Vec<WindowState>, String> {
        static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
        let mut conn = self.connection().await?;
        let mut inv = S
            .get_or_init(|| redis::Script::new(PEEK_SCRIPT))
            .prepare_invoke();
        for &(w, _) in windows {
            inv.key(counter_key(org, key, w));
        }
        for &(w, _) in windows {
            inv.arg(w.seconds());
        }
        let out = match tokio::time::timeout(REDIS_TIMEOUT, inv.invoke_async::<Vec<i64>>(&mut conn))
            .await
        {
            Ok(Ok(out)) if out.len() == windows.len() * 2 => out,
            Ok(Ok(out)) => return Err(format!("unexpected script answer of {} values", out.len())),
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no answer within 250 ms".into()),
        };
        Ok(windows
            .iter()
            .enumerate()
            .map(|(i, &(w, q))| WindowState {
                window: w,
                quota: q,
                used: u64::try_from(out[i * 2]).unwrap_or(0),
                reset_ms: out[i * 2 + 1],
            })
            .collect())
    }
}

/// The Redis counter of window `w` of key `key` of `org` (its window index appended by the
/// scripts). The hash tag keeps an organisation's counters in one cluster slot.
fn counter_key(org: Uuid, key: Uuid, w: RateWindow) -> String {
    format!("tern:rl:{{{org}}}:{}:{}", owner(org, key, w), w.as_str())
}

fn redis_script() -> &'static redis::Script {
    static S: std::sync::OnceLock<redis::Script> = std::sync::OnceLock::new();
    S.get_or_init(|| redis::Script::new(SCRIPT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_counts_reset_with_the_window_and_refuse_without_counting() {
        let l = Limiter::default();
        let (org, key) = (Uuid::new_v4(), Uuid::new_v4());
        let w = [(RateWindow::KeyMinute, 3), (RateWindow::TenantMinute, 100)];
        let t = 60_000 * 1000;
        for used in 1..=3 {
            match l.take_local(org, key, &w, 1, t) {
                Verdict::Admitted(s) => assert_eq!(s[0].used, used),
                v => panic!("{v:?}"),
            }
        }
        assert!(matches!(
            l.take_local(org, key, &w, 1, t + 10),
            Verdict::Exceeded {
                window: RateWindow::KeyMinute,
                ..
            }
        ));
        // The refused request was not counted in the tenant window.
        let Verdict::Admitted(s) = l.take_local(org, Uuid::new_v4(), &w, 1, t + 20) else {
            panic!("another key has room")
        };
        assert_eq!(s[1].used, 4);
        // The next minute starts from zero.
        let Verdict::Admitted(s) = l.take_local(org, key, &w, 1, t + 60_000) else {
            panic!("a new window")
        };
        assert_eq!(s[0].used, 1);
    }

    #[test]
    fn an_outage_is_told_when_it_starts_and_when_it_ends() {
        let r = Reachability::default();
        assert_eq!(r.answered(), Some(Change::Reached));
        assert_eq!(r.answered(), None);
        assert_eq!(r.failed(), Some(Change::Lost));
        for _ in 0..199 {
            assert_eq!(r.failed(), None);
        }
        assert_eq!(
            r.answered(),
            Some(Change::Back {
                counted_locally: 200
            })
        );
        assert_eq!(r.answered(), None);
        // The next outage counts from zero.
        assert_eq!(r.failed(), Some(Change::Lost));
        assert_eq!(r.answered(), Some(Change::Back { counted_locally: 1 }));
        // Out of reach from the start.
        let r = Reachability::default();
        assert_eq!(r.failed(), Some(Change::Lost));
        assert_eq!(r.failed(), None);
    }

    /// A writer of log lines into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Against a closed local port: every request is admitted (counted here), over several
    /// reconnection attempts, and the outage is logged once.
    #[tokio::test(flavor = "current_thread")]
    async fn an_unreachable_redis_is_logged_once() {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        // This thread runs the whole test (current-thread runtime), so it sees every event.
        let _guard = tracing::subscriber::set_default(subscriber);
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().expect("its address").port()
        };
        let limiter = Limiter::with_redis(&format!("redis://127.0.0.1:{port}")).expect("url");
        let redis = limiter.redis.as_ref().expect("redis");
        let down_at = || match &*redis.conn.lock().unwrap_or_else(|e| e.into_inner()) {
            Conn::Down(at) => Some(*at),
            _ => None,
        };
        let (org, key) = (Uuid::new_v4(), Uuid::new_v4());
        let w = [(RateWindow::KeyMinute, 1_000_000)];
        let (mut attempts, mut last, mut requests) = (0, None, 0);
        // Requests until three connection attempts have failed (one per second at most).
        while attempts < 3 {
            assert!(matches!(
                limiter.take_for(org, key, &w, 1).await,
                Verdict::Admitted(_)
            ));
            requests += 1;
            let at = down_at();
            if at.is_some() && at != last {
                attempts += 1;
                last = at;
            }
            assert!(requests < 100_000, "no reconnection attempts");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let text = String::from_utf8(logs.0.lock().expect("logs").clone()).expect("utf-8");
        assert_eq!(
            text.matches("Redis unreachable").count(),
            1,
            "{requests} requests:\n{text}"
        );
        assert!(requests > 3, "{requests}");
    }
}
