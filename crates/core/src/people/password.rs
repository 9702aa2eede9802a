//! Password hashing: argon2id (19 MiB, 2 passes, 1 lane; APP.md §2) on Tokio's blocking
//! threads, at most two at a time in the process, so a burst of sign-ins neither starves the
//! API's async threads nor takes all the memory (each hash holds 19 MiB while it runs).

use std::sync::OnceLock;

use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _};
use argon2::{Algorithm, Argon2, Params, Version};
use tern_domain::Problem;
use tokio::sync::Semaphore;

static HASHING: Semaphore = Semaphore::const_new(2);

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

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Problem> {
    let _permit = HASHING
        .acquire()
        .await
        .map_err(|_| Problem::unavailable())?;
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        tracing::error!(error = %e, "password hashing task failed");
        Problem::unavailable()
    })
}

/// The PHC string of `password`.
pub(crate) async fn hash(password: &str) -> Result<String, Problem> {
    let password = password.to_owned();
    blocking(move || hash_now(&password)).await?.ok_or_else(|| {
        tracing::error!("password hashing failed");
        Problem::unavailable()
    })
}

/// Whether `password` matches `phc`; with `None`, a dummy hash is checked (always `false`).
pub(crate) async fn verify(password: &str, phc: Option<&str>) -> Result<bool, Problem> {
    let password = password.to_owned();
    let phc = phc.map(str::to_owned);
    blocking(move || {
        let real = phc.is_some();
        let stored = phc.unwrap_or_else(|| dummy_hash().to_owned());
        let ok = PasswordHash::new(&stored)
            .ok()
            .is_some_and(|h| argon2().verify_password(password.as_bytes(), &h).is_ok());
        real && ok
    })
    .await
}
