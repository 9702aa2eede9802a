//! Per-number pacing of the dispatcher.

use std::time::{Duration, Instant};

/// Pacing of one number: a token bucket holding one second of throughput (as the network's
/// own limit), refilled continuously at `mps`. Tokens are taken for what was actually
/// claimed, so messages claimed by another process cost this one nothing.
#[derive(Debug, Clone)]
pub(super) struct Bucket {
    pub(super) mps: u32,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub(super) fn new(mps: u32) -> Self {
        Self {
            mps: mps.max(1),
            tokens: f64::from(mps.max(1)),
            last: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        let rate = f64::from(self.mps);
        self.tokens = (self.tokens + elapsed * rate).min(rate);
        self.last = now;
    }

    /// Whole tokens available at `now`.
    pub(super) fn available(&mut self, now: Instant) -> usize {
        self.refill(now);
        // Bounded by mps (a u32), so the cast cannot truncate.
        self.tokens.max(0.0).floor() as usize
    }

    pub(super) fn take(&mut self, n: usize) {
        self.tokens -= n as f64;
    }

    /// Time until one whole token is available.
    pub(super) fn wait_for_one(&mut self, now: Instant) -> Duration {
        self.refill(now);
        if self.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - self.tokens) / f64::from(self.mps))
        }
    }
}
