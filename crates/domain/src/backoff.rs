//! Exponential backoff, the one rule of every worker that retries (dispatch, inbound media,
//! the network inbox): the ceiling doubles from `base` with each failed attempt up to
//! `cap`, and the delay is drawn under it as `jitter` says. Event webhooks follow their own
//! published schedule instead (`events::RetrySchedule`).

use std::time::Duration;

/// How a delay is drawn under the ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// The ceiling itself.
    None,
    /// Anywhere from 0 to the ceiling: many senders retrying one peer spread out.
    Full,
    /// From half the ceiling to it: spread, but never bunched near 0.
    Half,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
    pub jitter: Jitter,
}

impl Backoff {
    /// The ceiling after `attempts` failed attempts (1 = the first): `base · 2^(attempts-1)`,
    /// at most `cap`.
    pub fn ceiling(&self, attempts: i64) -> Duration {
        let exp = u32::try_from(attempts.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
        self.base
            .saturating_mul(2u32.saturating_pow(exp))
            .min(self.cap)
    }

    /// The delay after `attempts` failed attempts; `unit` is a uniform draw in [0, 1].
    pub fn delay(&self, attempts: i64, unit: f64) -> Duration {
        let ceiling = self.ceiling(attempts);
        let unit = if unit.is_finite() {
            unit.clamp(0.0, 1.0)
        } else {
            1.0
        };
        match self.jitter {
            Jitter::None => ceiling,
            Jitter::Full => ceiling.mul_f64(unit),
            Jitter::Half => ceiling / 2 + (ceiling - ceiling / 2).mul_f64(unit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn the_ceiling_doubles_up_to_the_cap_and_never_overflows() {
        let b = Backoff {
            base: S,
            cap: 60 * S,
            jitter: Jitter::None,
        };
        let got: Vec<u64> = (0..9).map(|a| b.delay(a, 0.5).as_secs()).collect();
        assert_eq!(got, [1, 1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(b.delay(i64::MAX, 0.5), 60 * S);
        let huge = Backoff {
            base: S,
            cap: Duration::MAX,
            jitter: Jitter::None,
        };
        assert!(huge.delay(i64::MAX, 1.0) >= huge.delay(40, 1.0));
    }

    #[test]
    fn jitter_stays_in_its_band() {
        let full = Backoff {
            base: S,
            cap: 60 * S,
            jitter: Jitter::Full,
        };
        let half = Backoff {
            jitter: Jitter::Half,
            ..full
        };
        for unit in [0.0, 0.25, 1.0, -3.0, 7.0, f64::NAN] {
            assert!(full.delay(4, unit) <= 8 * S, "{unit}");
            let h = half.delay(4, unit);
            assert!((4 * S..=8 * S).contains(&h), "{unit}: {h:?}");
        }
        assert_eq!(full.delay(4, 0.0), Duration::ZERO);
        assert_eq!(half.delay(4, 0.0), 4 * S);
    }
}
