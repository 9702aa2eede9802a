//! Request quotas: fixed windows per minute and per day, per key and per organisation, and
//! the RateLimit headers that report them. Pure rules; the counters live in `core::rate`
//! (in-process or Redis), which both decide with [`decide`].

use crate::plan::{Effective, RateWindow};
use crate::{ErrorCode, Problem};

/// Weight of `POST /media` (an upload counts as 5 requests); every other request weighs 1.
pub const UPLOAD_WEIGHT: u64 = 5;

/// Whose counter a window is: the key's or the organisation's.
pub fn scope(w: RateWindow) -> &'static str {
    match w {
        RateWindow::KeyMinute | RateWindow::KeyDay => "key",
        RateWindow::TenantMinute | RateWindow::TenantDay => "tenant",
    }
}

/// The four windows of an organisation with their quotas, in the order counters take them.
pub fn windows(eff: &Effective<'_>) -> Vec<(RateWindow, u64)> {
    RateWindow::ALL
        .iter()
        .map(|&w| (w, eff.rate_limit(w)))
        .collect()
}

/// The index of the fixed window holding `now_ms` (windows are aligned to the Unix epoch,
/// so a day window resets at 00:00 UTC).
pub fn window_index(now_ms: i64, w: RateWindow) -> i64 {
    now_ms.div_euclid(w.seconds() as i64 * 1000)
}

/// Milliseconds until the window holding `now_ms` ends (at least 1).
pub fn reset_ms(now_ms: i64, w: RateWindow) -> i64 {
    let len = w.seconds() as i64 * 1000;
    (len - now_ms.rem_euclid(len)).max(1)
}

/// Whole seconds until a reset `ms` away, rounded up so a client waiting that long finds the
/// new window (at least 1).
pub fn ceil_secs(ms: i64) -> u64 {
    (ms.max(1) as u64).div_ceil(1000)
}

/// One window's state after a request: `used` counts this request when it was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowState {
    pub window: RateWindow,
    pub quota: u64,
    pub used: u64,
    pub reset_ms: i64,
}

impl WindowState {
    pub fn remaining(&self) -> u64 {
        self.quota.saturating_sub(self.used)
    }
}

/// What the counters did with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Counted in every window.
    Admitted(Vec<WindowState>),
    /// Not counted anywhere: `window` (the exceeded one that resets last) is used up.
    Exceeded {
        window: RateWindow,
        states: Vec<WindowState>,
    },
}

/// Decides a request of `weight` against windows whose counts before it are `states[].used`:
/// admitted when it fits in every window (then each `used` grows by `weight`), else refused
/// by the exceeded window that resets last — waiting for that one is what helps.
pub fn decide(mut states: Vec<WindowState>, weight: u64) -> Verdict {
    let exceeded = states
        .iter()
        .filter(|s| s.used.saturating_add(weight) > s.quota)
        .max_by_key(|s| s.reset_ms)
        .map(|s| s.window);
    match exceeded {
        Some(window) => Verdict::Exceeded { window, states },
        None => {
            for s in &mut states {
                s.used += weight;
            }
            Verdict::Admitted(states)
        }
    }
}

/// The RateLimit header values of one answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateHeaders {
    pub limit: u64,
    pub remaining: u64,
    pub reset_secs: u64,
    /// `key-minute;q=600;w=60, key-day;q=…` — every window.
    pub policy: String,
}

impl Verdict {
    pub fn states(&self) -> &[WindowState] {
        match self {
            Verdict::Admitted(s) | Verdict::Exceeded { states: s, .. } => s,
        }
    }

    /// The headers: the window closest to running out (fewest remaining; of equals, the one
    /// that resets last), and every window in the policy.
    pub fn headers(&self) -> Option<RateHeaders> {
        let states = self.states();
        let closest = match self {
            Verdict::Exceeded { window, .. } => states.iter().find(|s| s.window == *window),
            Verdict::Admitted(_) => states
                .iter()
                .min_by_key(|s| (s.remaining(), std::cmp::Reverse(s.reset_ms))),
        }?;
        let remaining = match self {
            Verdict::Exceeded { .. } => 0,
            Verdict::Admitted(_) => closest.remaining(),
        };
        let policy = states
            .iter()
            .map(|s| {
                format!(
                    "{};q={};w={}",
                    s.window.as_str(),
                    s.quota,
                    s.window.seconds()
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        Some(RateHeaders {
            limit: closest.quota,
            remaining,
            reset_secs: ceil_secs(closest.reset_ms),
            policy,
        })
    }

    /// `429 quota_exceeded` for a refused request; `None` when it was admitted.
    pub fn problem(&self) -> Option<Problem> {
        let Verdict::Exceeded { window, states } = self else {
            return None;
        };
        let s = states.iter().find(|s| s.window == *window)?;
        let secs = ceil_secs(s.reset_ms);
        Some(
            Problem::new(ErrorCode::QuotaExceeded)
                .with_message(format!(
                    "The {} quota of {} requests is used up; it resets in {secs} s.",
                    window.as_str(),
                    s.quota
                ))
                .with_detail("scope", scope(*window))
                .with_detail("window", window.as_str())
                .with_detail("limit", s.quota)
                .with_retry_after(secs),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RateWindow::*;

    fn st(window: RateWindow, quota: u64, used: u64, reset_ms: i64) -> WindowState {
        WindowState {
            window,
            quota,
            used,
            reset_ms,
        }
    }

    #[test]
    fn admits_when_every_window_has_room_and_counts_the_weight() {
        let v = decide(
            vec![
                st(KeyMinute, 10, 4, 30_000),
                st(TenantDay, 100, 50, 9_000_000),
            ],
            5,
        );
        let Verdict::Admitted(s) = &v else {
            panic!("{v:?}")
        };
        assert_eq!((s[0].used, s[1].used), (9, 55));
        let h = v.headers().unwrap();
        assert_eq!((h.limit, h.remaining, h.reset_secs), (10, 1, 30));
        assert_eq!(h.policy, "key-minute;q=10;w=60, tenant-day;q=100;w=86400");
        assert!(v.problem().is_none());
    }

    #[test]
    fn refuses_by_the_exceeded_window_that_resets_last_and_counts_nothing() {
        let states = vec![
            st(KeyMinute, 10, 10, 1_500),
            st(KeyDay, 1000, 10, 80_000_000),
            st(TenantMinute, 20, 20, 1_500),
            st(TenantDay, 30, 30, 80_000_000),
        ];
        let v = decide(states.clone(), 1);
        assert_eq!(
            v,
            Verdict::Exceeded {
                window: TenantDay,
                states
            }
        );
        let p = v.problem().unwrap();
        assert_eq!(p.code, ErrorCode::QuotaExceeded);
        assert_eq!(p.details["scope"], "tenant");
        assert_eq!(p.retry_after, Some(80_000));
        let h = v.headers().unwrap();
        assert_eq!((h.limit, h.remaining, h.reset_secs), (30, 0, 80_000));
    }

    #[test]
    fn a_heavy_request_may_not_fit_where_a_light_one_does() {
        let s = vec![st(KeyMinute, 10, 6, 1)];
        assert!(matches!(decide(s.clone(), 5), Verdict::Exceeded { .. }));
        assert!(matches!(decide(s, 4), Verdict::Admitted(_)));
    }

    #[test]
    fn fewest_remaining_wins_the_headers_and_ties_go_to_the_later_reset() {
        let v = decide(
            vec![st(KeyMinute, 10, 0, 5_000), st(KeyDay, 10, 0, 50_000)],
            1,
        );
        let h = v.headers().unwrap();
        assert_eq!((h.remaining, h.reset_secs), (9, 50));
    }

    #[test]
    fn windows_align_to_the_epoch_and_resets_round_up() {
        assert_eq!(window_index(119_999, KeyMinute), 1);
        assert_eq!(reset_ms(119_999, KeyMinute), 1);
        assert_eq!(reset_ms(120_000, KeyMinute), 60_000);
        assert_eq!(ceil_secs(1), 1);
        assert_eq!(ceil_secs(59_001), 60);
        assert_eq!(scope(KeyDay), "key");
    }
}
