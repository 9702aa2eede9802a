//! Password hashing: argon2id (19 MiB, 2 passes, 1 lane; APP.md §2) on one thread of its
//! own at a low priority (nice 15), one hash at a time, and giving way to the API: while this
//! process's API is busy (on average one request or more in flight), each hash is followed
//! by a rest of [`BUSY_REST`] times its length, so hashing takes at most a tenth of one core
//! from a busy API. A burst of sign-ins then waits for its turn (sign-ins get slower) instead
//! of slowing the API. Measured with `bench/send.sh` (`BENCH_SIGNINS=20`): two hashes at a
//! time on Tokio's blocking threads cost POST /messages a fifth to a third of its throughput
//! on 2 cores; see docs/performance.md.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::load::{ApiLoad, LoadWatch};

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _};
use argon2::{Algorithm, Argon2, Params, Version};
use tern_domain::Problem;
use tokio::sync::Semaphore;

/// One hash at a time: the waiting ones queue here (fairly), not in the thread's channel.
static HASHING: Semaphore = Semaphore::const_new(1);

/// While the API is busy, a hash of `t` is followed by a rest of `BUSY_REST × t`.
pub const BUSY_REST: u32 = 9;
/// Requests in flight (on average over the last quarter second) that make the API busy.
const BUSY_AT: f64 = 1.0;

/// The API's load as the hasher sees it (one watch per process; a new `ApiLoad`, as in
/// tests with several cores, starts a new watch).
fn api_busy(load: &Arc<ApiLoad>) -> bool {
    static WATCH: Mutex<Option<(usize, LoadWatch)>> = Mutex::new(None);
    let key = Arc::as_ptr(load) as usize;
    let mut w = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    if w.as_ref().is_none_or(|(k, _)| *k != key) {
        *w = Some((
            key,
            LoadWatch::new(Arc::clone(load), Duration::from_millis(250)),
        ));
    }
    w.as_mut()
        .is_some_and(|(_, watch)| watch.in_flight() >= BUSY_AT)
}

/// The nice value of the hashing thread.
const HASHING_NICE: i32 = 15;

type Job = Box<dyn FnOnce() + Send>;

/// The hashing thread's queue (started on first use).
fn hasher() -> Option<&'static mpsc::Sender<Job>> {
    static HASHER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    HASHER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("tern-password".into())
                .spawn(move || {
                    crate::load::lower_thread_priority(HASHING_NICE);
                    for job in rx {
                        // A panicking hash must not stop the thread every sign-in needs.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                });
            match started {
                Ok(_) => Some(tx),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the password hashing thread");
                    None
                }
            }
        })
        .as_ref()
}

fn argon2() -> Argon2<'static> {
    // The parameters are constants within argon2's limits.
    #[allow(clippy::expect_used)]
    let params = Params::new(19_456, 2, 1, None).expect("argon2 parameters");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// A hash of a password nobody has: verified instead when the account is unknown (or has
/// no password), so that answer takes about as long as a wrong password.
fn dummy_hash() -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| hash_now("tern dummy password, never accepted").unwrap_or_default())
}

fn hash_now(password: &str) -> Option<String> {
    argon2()
        .hash_password(password.as_bytes())
        .ok()
        .map(|h| h.to_string())
}

async fn blocking<T: Send + 'static>(
    load: &Arc<ApiLoad>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Problem> {
    let _permit = HASHING
        .acquire()
        .await
        .map_err(|_| Problem::unavailable())?;
    let started = Instant::now();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    hasher()
        .ok_or_else(Problem::unavailable)?
        .send(job)
        .map_err(|_| Problem::unavailable())?;
    let out = rx.await.map_err(|_| {
        tracing::error!("password hashing thread stopped");
        Problem::unavailable()
    })?;
    if api_busy(load) {
        // The rest holds the permit: the next hash waits too. Bounded, as one slow hash must
        // not park every sign-in for long.
        let rest = (started.elapsed() * BUSY_REST).min(Duration::from_secs(1));
        tokio::time::sleep(rest).await;
    }
    Ok(out)
}

/// The PHC string of `password`.
pub(crate) async fn hash(load: &Arc<ApiLoad>, password: &str) -> Result<String, Problem> {
    let password = password.to_owned();
    blocking(load, move || hash_now(&password))
        .await?
        .ok_or_else(|| {
            tracing::error!("password hashing failed");
            Problem::unavailable()
        })
}

/// Whether `password` matches `phc`; with `None`, a dummy hash is checked (always `false`).
pub(crate) async fn verify(
    load: &Arc<ApiLoad>,
    password: &str,
    phc: Option<&str>,
) -> Result<bool, Problem> {
    let password = password.to_owned();
    let phc = phc.map(str::to_owned);
    blocking(load, move || {
        let real = phc.is_some();
        let stored = phc.unwrap_or_else(|| dummy_hash().to_owned());
        let ok = PasswordHash::new(&stored)
            .ok()
            .is_some_and(|h| argon2().verify_password(password.as_bytes(), &h).is_ok());
        real && ok
    })
    .await
}
