//! How many deliveries one subscription may have in flight: as many as its receiver's
//! answers allow. A receiver that answers quickly and well while it has its whole ceiling
//! in flight gets one more slot per such answer, up to a ceiling (additive increase: from the start to the ceiling within a
//! few hundred deliveries); an answer that says it is overloaded — a timeout, a refused or
//! broken connection, `429`, a `5xx`, or an answer slower than [`SLOW_ANSWER_MS`] — halves
//! it (multiplicative decrease), down to one. Other answers (a `4xx` about the event
//! itself) neither add nor take a slot. One busy endpoint then gets the concurrency its
//! answers allow (more connections, or more streams of one HTTP/2 connection), and a
//! receiver that hangs quickly holds few slots.

use std::collections::HashMap;
use uuid::Uuid;

/// An answer at least this slow counts as the receiver being overloaded.
pub const SLOW_ANSWER_MS: i64 = 2_000;

/// What one attempt's answer says about its receiver's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// A `2xx` in good time: room for one more in flight.
    Healthy,
    /// Overloaded (see the module's text): half as many in flight.
    Overloaded,
    /// Nothing about capacity (a `4xx` about the event, say).
    Neutral,
}

impl Signal {
    /// The signal of an attempt answered `status` (`None`: no answer: timeout, connection)
    /// after `latency_ms`.
    pub fn of(status: Option<u16>, latency_ms: i64) -> Signal {
        match status {
            None => Signal::Overloaded,
            Some(_) if latency_ms >= SLOW_ANSWER_MS => Signal::Overloaded,
            Some(429) | Some(500..=599) => Signal::Overloaded,
            Some(200..=299) => Signal::Healthy,
            Some(_) => Signal::Neutral,
        }
    }
}

/// The in-flight ceiling of each subscription, kept by one delivery worker.
#[derive(Debug, Clone)]
pub struct EndpointLimits {
    start: i64,
    max: i64,
    /// Only subscriptions whose ceiling moved from `start` (bounded by the subscriptions
    /// that had deliveries; an entry back at `start` is removed).
    caps: HashMap<Uuid, i64>,
}

impl EndpointLimits {
    /// Every subscription starts at `start` in flight and grows to `max` at most
    /// (`max` ≥ `start` ≥ 1 enforced).
    pub fn new(start: i64, max: i64) -> EndpointLimits {
        let start = start.max(1);
        EndpointLimits {
            start,
            max: max.max(start),
            caps: HashMap::new(),
        }
    }

    /// The ceiling of a subscription with no entry.
    pub fn start(&self) -> i64 {
        self.start
    }

    /// The ceiling of `subscription`.
    pub fn cap(&self, subscription: Uuid) -> i64 {
        self.caps.get(&subscription).copied().unwrap_or(self.start)
    }

    /// Applies an attempt's signal to its subscription's ceiling; `held`: the subscription's
    /// deliveries held against the ceiling when the answer came (claimed and not yet
    /// recorded), this one included. A healthy answer raises only a ceiling that was in
    /// use: a receiver that sees one event a minute has not shown it can take a hundred at
    /// once.
    pub fn observe(&mut self, subscription: Uuid, signal: Signal, held: i64) {
        let cap = self.cap(subscription);
        let next = match signal {
            Signal::Healthy if held >= cap => (cap + 1).min(self.max),
            Signal::Healthy => cap,
            Signal::Overloaded => (cap / 2).max(1),
            Signal::Neutral => cap,
        };
        if next == self.start {
            self.caps.remove(&subscription);
        } else {
            self.caps.insert(subscription, next);
        }
    }

    /// The subscriptions whose ceiling is not `start`, with their ceilings (what a claim
    /// needs besides `start`).
    pub fn moved(&self) -> Vec<(Uuid, i64)> {
        self.caps.iter().map(|(s, c)| (*s, *c)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_as_capacity_signals() {
        assert_eq!(Signal::of(Some(204), 5), Signal::Healthy);
        assert_eq!(Signal::of(Some(200), SLOW_ANSWER_MS), Signal::Overloaded);
        assert_eq!(Signal::of(None, 15_000), Signal::Overloaded);
        assert_eq!(Signal::of(Some(429), 3), Signal::Overloaded);
        assert_eq!(Signal::of(Some(503), 3), Signal::Overloaded);
        assert_eq!(Signal::of(Some(400), 3), Signal::Neutral);
        assert_eq!(Signal::of(Some(410), 3), Signal::Neutral);
    }

    #[test]
    fn healthy_answers_add_one_up_to_the_ceiling_and_overload_halves() {
        let s = Uuid::from_u128(1);
        let other = Uuid::from_u128(2);
        let mut l = EndpointLimits::new(16, 20);
        for _ in 0..10 {
            l.observe(s, Signal::Healthy, l.cap(s));
        }
        assert_eq!(l.cap(s), 20);
        assert_eq!(l.cap(other), 16, "others keep the start");
        l.observe(s, Signal::Overloaded, 20);
        assert_eq!(l.cap(s), 10);
        l.observe(s, Signal::Neutral, 10);
        assert_eq!(l.cap(s), 10);
        for _ in 0..10 {
            l.observe(s, Signal::Overloaded, 1);
        }
        assert_eq!(l.cap(s), 1, "never below one");
        assert_eq!(l.moved(), vec![(s, 1)]);
    }

    #[test]
    fn a_ceiling_back_at_the_start_is_forgotten() {
        let s = Uuid::from_u128(1);
        let mut l = EndpointLimits::new(4, 8);
        l.observe(s, Signal::Overloaded, 4);
        assert_eq!(l.cap(s), 2);
        l.observe(s, Signal::Healthy, 2);
        l.observe(s, Signal::Healthy, 3);
        assert_eq!(l.cap(s), 4);
        assert!(l.moved().is_empty());
    }

    #[test]
    fn an_unused_ceiling_does_not_grow() {
        let s = Uuid::from_u128(1);
        let mut l = EndpointLimits::new(16, 128);
        for _ in 0..100 {
            l.observe(s, Signal::Healthy, 1);
        }
        assert_eq!(l.cap(s), 16);
        l.observe(s, Signal::Healthy, 16);
        assert_eq!(l.cap(s), 17);
    }

    #[test]
    fn bounds_are_kept_sane() {
        let l = EndpointLimits::new(0, 0);
        assert_eq!((l.start(), l.cap(Uuid::nil())), (1, 1));
    }
}
