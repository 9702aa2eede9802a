//! The checks every authenticated request of the public API passes, in the contract's order
//! (DESIGN "Order of checks"): permission (403) → plan feature (402) → burst (429
//! `rate_limited`) → quotas (429 `quota_exceeded`) → `api_requests` allowance (402).
//!
//! Every authenticated request counts against the quotas and the meter, refused ones too,
//! except a `429`. The answer carries the RateLimit headers of the quota windows, except the
//! burst `429` (the contract says it has none).

use tern_domain::auth::Permission;
use tern_domain::quota::RateHeaders;
use tern_domain::{ErrorCode, Problem};

use crate::rate::{Early, Hint};
use crate::{Core, Principal};

/// The outcome of the checks: the headers to send whatever the answer, and the refusal.
#[derive(Debug)]
pub struct Admission {
    pub headers: Option<RateHeaders>,
    pub result: Result<(), Problem>,
}

/// Admits `p`'s request of `weight` needing `perm`; `early` is what [`Limiter::early`] did
/// for the key while it was looked up.
///
/// [`Limiter::early`]: crate::rate::Limiter::early
pub async fn admit(
    core: &Core,
    p: &Principal,
    perm: Permission,
    weight: u64,
    early: Option<(Hint, Early)>,
) -> Admission {
    let authorized = p.authorize(perm);
    let early = early
        .filter(|(h, _)| h.org_id == p.quota_org_id() && h.key_id == p.key_id)
        .map(|(_, e)| e);
    let verdict = match early {
        Some(Early::Burst) => {
            return Admission {
                headers: None,
                result: authorized.and(Err(burst_limited())),
            };
        }
        Some(Early::Counted(v)) => v,
        None => {
            if authorized.is_ok() && !core.limiter.burst_ok(p) {
                return Admission {
                    headers: None,
                    result: Err(burst_limited()),
                };
            }
            core.limiter.take(p, weight).await
        }
    };
    let headers = verdict.headers();
    if let Some(problem) = verdict.problem() {
        // Refused by a quota: counted nowhere. A missing permission still answers first.
        return Admission {
            headers,
            result: authorized.and(Err(problem)),
        };
    }
    // Test requests count in the rate-limit windows, not against `api_requests` (APP.md §7).
    let counted = match p.mode {
        tern_domain::auth::Mode::Live => core.requests.count(p).await,
        tern_domain::auth::Mode::Test => Ok(()),
    };
    Admission {
        headers,
        result: authorized.and(counted),
    }
}

fn burst_limited() -> Problem {
    Problem::new(ErrorCode::RateLimited)
        .with_message(
            "Requests arrive faster than this key's burst limit; pause briefly and retry.",
        )
        .with_detail("reason", "burst")
        .with_retry_after(1)
}
