//! The per-address limit: one client address may fail to sign in at most
//! [`MAX_ADDRESS_FAILURES`] times a minute (APP.md §2), whatever accounts it tries. Kept in
//! the process (a sliding log per address, pruned as it goes): several `tern serve`
//! processes each allow that many, which still bounds guessing.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::{ADDRESS_WINDOW_MS, MAX_ADDRESS_FAILURES};

/// Above this many tracked addresses, addresses without a recent failure are forgotten.
const PRUNE_ABOVE: usize = 10_000;

#[derive(Debug, Default)]
pub struct AddressThrottle {
    failures: Mutex<HashMap<String, VecDeque<i64>>>,
}

impl AddressThrottle {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, VecDeque<i64>>) -> T) -> T {
        let mut map = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut map)
    }

    /// Whether `address` used up its failures of the last minute at `now`.
    pub fn is_throttled(&self, address: Option<&str>, now: i64) -> bool {
        let Some(address) = address else {
            return false;
        };
        self.with(|map| {
            map.get_mut(address).is_some_and(|log| {
                while log.front().is_some_and(|t| *t <= now - ADDRESS_WINDOW_MS) {
                    log.pop_front();
                }
                log.len() >= MAX_ADDRESS_FAILURES
            })
        })
    }

    /// Records a failure of `address` at `now`.
    pub fn record_failure(&self, address: Option<&str>, now: i64) {
        let Some(address) = address else {
            return;
        };
        self.with(|map| {
            if map.len() > PRUNE_ABOVE {
                map.retain(|_, log| log.back().is_some_and(|t| *t > now - ADDRESS_WINDOW_MS));
            }
            let log = map.entry(address.to_owned()).or_default();
            while log.front().is_some_and(|t| *t <= now - ADDRESS_WINDOW_MS) {
                log.pop_front();
            }
            // Bounded: failures past the limit are refused before they are checked.
            if log.len() < MAX_ADDRESS_FAILURES {
                log.push_back(now);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thirty_failures_a_minute_per_address() {
        let t = AddressThrottle::default();
        for i in 0..30 {
            assert!(!t.is_throttled(Some("a"), 1000 + i));
            t.record_failure(Some("a"), 1000 + i);
        }
        assert!(t.is_throttled(Some("a"), 1030));
        assert!(!t.is_throttled(Some("b"), 1030));
        assert!(!t.is_throttled(None, 1030));
        // A minute after the first failure, one is free again.
        assert!(!t.is_throttled(Some("a"), 1000 + 60_000));
    }
}
