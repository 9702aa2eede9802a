//! How busy this process's API is, for background work that should give way to it (the
//! event-webhook deliveries, password hashing). The API adds each request's time when it answers; by Little's
//! law, request time served per unit of wall time is the average number of requests in
//! flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Request time served by the API so far.
#[derive(Debug, Default)]
pub struct ApiLoad {
    served_us: AtomicU64,
}

impl ApiLoad {
    /// A request was answered after `took`.
    pub fn served(&self, took: Duration) {
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.served_us.fetch_add(us, Ordering::Relaxed);
    }

    fn served_us(&self) -> u64 {
        self.served_us.load(Ordering::Relaxed)
    }
}

/// One reader's view of an [`ApiLoad`]: the average requests in flight over the last
/// `window` or so.
#[derive(Debug)]
pub struct LoadWatch {
    load: Arc<ApiLoad>,
    window: Duration,
    since: Instant,
    served_then: u64,
    in_flight: f64,
}

impl LoadWatch {
    pub fn new(load: Arc<ApiLoad>, window: Duration) -> LoadWatch {
        let served_then = load.served_us();
        LoadWatch {
            load,
            window,
            since: Instant::now(),
            served_then,
            in_flight: 0.0,
        }
    }

    /// The average number of requests in flight over the last complete window.
    pub fn in_flight(&mut self) -> f64 {
        self.in_flight_at(Instant::now())
    }

    fn in_flight_at(&mut self, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= self.window {
            let served = self.load.served_us();
            let us = served.saturating_sub(self.served_then) as f64;
            self.in_flight = us / elapsed.as_micros().max(1) as f64;
            self.since = now;
            self.served_then = served;
        }
        self.in_flight
    }
}

/// Gives the calling thread nice value `nice` (0–19, higher yields more; Linux: per thread),
/// so the API's threads win the CPU when both want it. Elsewhere, or for `nice <= 0`, a no-op.
pub fn lower_thread_priority(nice: i32) {
    if nice <= 0 {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::process::setpriority_process(None, nice.min(19)) {
        tracing::debug!(error = %e, "could not lower a thread's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_is_request_time_over_wall_time_per_window() {
        let load = Arc::new(ApiLoad::default());
        let mut w = LoadWatch::new(Arc::clone(&load), Duration::from_millis(100));
        let t0 = w.since;
        // 3 requests of 100 ms each answered within 100 ms: 3 in flight on average.
        for _ in 0..3 {
            load.served(Duration::from_millis(100));
        }
        // Not a whole window yet: the last figure (none) stands.
        assert_eq!(w.in_flight_at(t0 + Duration::from_millis(50)), 0.0);
        assert!((w.in_flight_at(t0 + Duration::from_millis(100)) - 3.0).abs() < 1e-9);
        // Quiet for the next window.
        assert_eq!(w.in_flight_at(t0 + Duration::from_millis(250)), 0.0);
    }
}
