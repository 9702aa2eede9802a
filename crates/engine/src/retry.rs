//! The one way a loop retries a store write that it must not lose: a few attempts while the
//! failure is transient (the database unavailable, a PostgreSQL deadlock or serialization
//! failure), the pause doubling from 50 ms (the domain's `Backoff`, no jitter: one writer per
//! loop, nobody to spread out from). Any other error is answered at once: repeating a
//! refused statement changes nothing.

use std::time::Duration;

use tern_domain::backoff::{Backoff, Jitter};
use tern_store::StoreError;

/// Attempts after the first.
const RETRIES: i64 = 4;

const PAUSE: Backoff = Backoff {
    base: Duration::from_millis(50),
    cap: Duration::from_secs(1),
    jitter: Jitter::None,
};

/// Runs `f`, again after a pause while it fails transiently, at most
/// [`RETRIES`] more times; returns its last result.
pub async fn store_write<T, F, Fut>(mut f: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    for attempt in 1..=RETRIES {
        match f().await {
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, attempt, "store write failed for now; tried again");
                tokio::time::sleep(PAUSE.delay(attempt, 1.0)).await;
            }
            other => return other,
        }
    }
    f().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    async fn calls_until_answered(error: fn() -> StoreError) -> (usize, bool) {
        let calls = AtomicUsize::new(0);
        let r: Result<(), StoreError> = store_write(|| {
            calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err(error()))
        })
        .await;
        (calls.load(Ordering::SeqCst), r.is_err())
    }

    #[tokio::test]
    async fn an_unavailable_database_is_tried_again_then_the_error_answered() {
        let unavailable = || StoreError::Backend(sqlx_pool_timed_out());
        assert_eq!(calls_until_answered(unavailable).await, (5, true));
    }

    #[tokio::test]
    async fn any_other_error_is_answered_at_once() {
        assert_eq!(
            calls_until_answered(|| StoreError::NotFound).await,
            (1, true)
        );
    }

    #[tokio::test]
    async fn a_success_after_a_failure_is_the_answer() {
        let calls = AtomicUsize::new(0);
        let r = store_write(|| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            std::future::ready(if n == 0 {
                Err(StoreError::Backend(sqlx_pool_timed_out()))
            } else {
                Ok(n)
            })
        })
        .await;
        assert_eq!(r.unwrap(), 1);
    }

    fn sqlx_pool_timed_out() -> sqlx::Error {
        sqlx::Error::PoolTimedOut
    }
}
