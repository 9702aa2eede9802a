//! The `Db` facade: one handle over either a SQLite or a PostgreSQL pool.
//!
//! Queries are written once in the common dialect (`$N` placeholders, `ON CONFLICT`,
//! `RETURNING`, epoch-ms integers, UUIDs bound as `Uuid`, JSON via `Json<T>`) and run on
//! whichever pool backs the `Db` through [`with_pool!`]. The macro duplicates the body per
//! backend, so binds and row decoding are type-checked for both.

use std::str::FromStr;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, Postgres, Sqlite, SqlitePool, Transaction};

use crate::error::{Result, StoreError};

static SQLITE_MIGRATOR: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATOR: Migrator = sqlx::migrate!("migrations/postgres");

/// Default pool size for a file-backed SQLite database: WAL allows many readers, and
/// writers queue on the busy timeout. Measured (bench/send.sh, 2 cores): 4 connections
/// accepted 3,800–4,300 sends/s against 4,750 with 8, at about half the peak RSS (110–125
/// against 210 MiB; each connection is a thread with its own page and statement caches).
const SQLITE_MAX_CONNECTIONS: u32 = 4;
/// Default pool size for PostgreSQL (per `tern serve` process). Measured: 6 connections
/// accepted slightly more than 16 on 2 cores (fewer backends contending for the CPU) at
/// half the peak RSS.
const POSTGRES_MAX_CONNECTIONS: u32 = 6;
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a SQLite writer waits for the lock (its turn in this process, then SQLite's).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
/// A pooled PostgreSQL connection idle this long is pinged before use.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(30);

fn pg_pool_options(max_connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        // sqlx pings every connection it hands out by default: a second round trip per
        // statement. Ping only one that sat idle (a server restart shows up there); a
        // connection that broke mid-use fails its statement, is discarded, and the
        // caller's retry gets a fresh one.
        .test_before_acquire(false)
        .after_connect(|_, _| {
            Box::pin(async move {
                crate::nodelay::apply();
                Ok(())
            })
        })
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_IF_IDLE_FOR {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}

/// Which database engine backs a [`Db`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Clone, Debug)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Handle to the database. Cheap to clone (it wraps a connection pool).
#[derive(Clone, Debug)]
pub struct Db {
    pub(crate) pool: Pool,
    /// This process's workers' wake-ups, shared by every handle derived from this one.
    pub(crate) wakeups: std::sync::Arc<Wakeups>,
    /// A file-backed SQLite database's checkpoints run while a handle holds this
    /// ([`crate::checkpoint`]).
    checkpoints: Option<std::sync::Arc<()>>,
}

/// The one home of the workers' wake-ups: the store notifies each after the commit that
/// queued its work, so this process's worker starts at once (work queued by other processes
/// is found by the workers' polling). Every handle made from one [`Db`] ([`Db::with_own_pool`],
/// clones) shares them: the workers' own pools hear the API's commits.
#[derive(Debug, Default)]
pub struct Wakeups {
    /// Messages due for dispatch now: acceptances (one or a group commit, API or campaign
    /// fan-out), a message queued again or a retry due at once.
    pub dispatch: tokio::sync::Notify,
    /// A network webhook batch stored in the inbox.
    pub inbox: tokio::sync::Notify,
    /// Webhook deliveries (or events to fan out into them) queued or due again.
    pub deliveries: tokio::sync::Notify,
    /// Rows queued for event streams (a fan-out gave streams deliveries): every open stream
    /// of the process looks (`notify_waiters`; streams of other processes poll).
    pub streams: tokio::sync::Notify,
}

/// Runs `$body` with `$pool` bound to the concrete pool (`&SqlitePool` or `&PgPool`).
macro_rules! with_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match &$db.pool {
            $crate::db::Pool::Sqlite($pool) => $body,
            $crate::db::Pool::Postgres($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

/// `$call`, a method of [`Tx`] on `$tx`, in a transaction of its own: committed when it
/// succeeds, rolled back (dropped) when it fails.
macro_rules! own_tx {
    ($db:expr, $tx:ident => $call:expr) => {{
        let mut $tx = $db.begin().await?;
        let out = $call.await?;
        $tx.commit().await?;
        Ok(out)
    }};
}
pub(crate) use own_tx;

/// Starting a transaction that will write after reading.
///
/// SQLite must take the write lock up front (`BEGIN IMMEDIATE`): a deferred transaction that
/// upgrades from read to write gets `SQLITE_BUSY` immediately, which the busy timeout does
/// not cover. PostgreSQL uses a plain `BEGIN` plus row locks in the statements.
pub(crate) trait BeginWrite {
    type Database: sqlx::Database;
    async fn begin_write(&self) -> Result<WriteTx<Self::Database>>;
}

impl BeginWrite for SqlitePool {
    type Database = Sqlite;
    async fn begin_write(&self) -> Result<WriteTx<Sqlite>> {
        // This process's writers take turns in order before asking SQLite for its lock:
        // SQLite's busy handler makes a waiting writer sleep 1, 2, 5, 10 … ms between tries,
        // so writers of one process competing through it leave the lock idle while they
        // sleep. Other processes still meet the busy timeout.
        let turn = write_turn(self).await?;
        Ok(WriteTx {
            tx: self.begin_with("BEGIN IMMEDIATE").await?,
            _turn: turn,
        })
    }
}

/// This process's next write turn on the SQLite file of `pool` (`None`: an in-memory
/// database, whose one connection takes writers in turn). Bounded like the busy timeout: a
/// writer that never gets its turn fails as busy.
pub(crate) async fn write_turn(
    pool: &SqlitePool,
) -> Result<Option<tokio::sync::OwnedSemaphorePermit>> {
    let Some(turns) = write_turns(pool) else {
        return Ok(None);
    };
    match tokio::time::timeout(BUSY_TIMEOUT, turns.acquire_owned()).await {
        Ok(Ok(turn)) => Ok(Some(turn)),
        Ok(Err(_)) => Err(StoreError::Backend(sqlx::Error::PoolClosed)),
        Err(_) => Err(StoreError::Backend(sqlx::Error::PoolTimedOut)),
    }
}

impl BeginWrite for PgPool {
    type Database = Postgres;
    async fn begin_write(&self) -> Result<WriteTx<Postgres>> {
        Ok(WriteTx {
            tx: self.begin().await?,
            _turn: None,
        })
    }
}

/// A write transaction: its connection (`&mut *tx` is an executor), and on SQLite this
/// process's write turn, given back when it ends.
pub(crate) struct WriteTx<DB: sqlx::Database> {
    tx: Transaction<'static, DB>,
    _turn: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl<DB: sqlx::Database> WriteTx<DB> {
    pub(crate) async fn commit(self) -> std::result::Result<(), sqlx::Error> {
        self.tx.commit().await
    }

    pub(crate) async fn rollback(self) -> std::result::Result<(), sqlx::Error> {
        self.tx.rollback().await
    }
}

impl<DB: sqlx::Database> std::ops::Deref for WriteTx<DB> {
    type Target = DB::Connection;
    fn deref(&self) -> &DB::Connection {
        &self.tx
    }
}

impl<DB: sqlx::Database> std::ops::DerefMut for WriteTx<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        &mut self.tx
    }
}

/// The write turns of a SQLite database file in this process (one at a time, first come
/// first served). `None` for an in-memory database: its pool has one connection, which
/// already takes writers in turn.
fn write_turns(pool: &SqlitePool) -> Option<std::sync::Arc<tokio::sync::Semaphore>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static TURNS: OnceLock<Mutex<HashMap<std::path::PathBuf, Arc<tokio::sync::Semaphore>>>> =
        OnceLock::new();
    let options = pool.connect_options();
    let file = options.get_filename();
    let name = file.to_string_lossy();
    if name.is_empty() || name == ":memory:" || name.starts_with("file:") {
        return None;
    }
    // Two spellings of one file must share turns.
    let key = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    let mut turns = TURNS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(Arc::clone(
        turns
            .entry(key)
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(1))),
    ))
}

/// A write transaction on either backend (`BEGIN IMMEDIATE` on SQLite). The unit that a
/// use case's writes share: a status change and, later, the event that reports it commit
/// together or not at all. Dropped without [`Tx::commit`], it rolls back.
pub struct Tx {
    pub(crate) inner: TxInner,
    /// Notified at commit when this transaction queued webhook deliveries.
    pub(crate) wakeups: std::sync::Arc<Wakeups>,
    pub(crate) queued_deliveries: bool,
    /// Events stored at commit, all in one statement ([`Tx::insert_event`]).
    pub(crate) pending_events: Vec<crate::events::PendingEvent>,
    /// Timeline entries stored at commit, all in one statement ([`Tx::add_timeline`]).
    pub(crate) pending_timeline: Vec<crate::timeline::NewRow>,
}

pub(crate) enum TxInner {
    Sqlite(WriteTx<Sqlite>),
    Postgres(WriteTx<Postgres>),
}

/// Runs `$body` with `$conn` bound to the transaction's connection (`&mut *$conn` is an
/// executor), once per backend like [`with_pool!`].
macro_rules! with_tx {
    ($tx:expr, $conn:ident => $body:expr) => {
        match &mut $tx.inner {
            $crate::db::TxInner::Sqlite($conn) => $body,
            $crate::db::TxInner::Postgres($conn) => $body,
        }
    };
}
pub(crate) use with_tx;

impl Tx {
    pub async fn commit(mut self) -> Result<()> {
        self.flush_events().await?;
        self.flush_timeline().await?;
        match self.inner {
            TxInner::Sqlite(tx) => tx.commit().await?,
            TxInner::Postgres(tx) => tx.commit().await?,
        }
        if self.queued_deliveries {
            self.wakeups.deliveries.notify_one();
        }
        Ok(())
    }

    /// Ends the transaction writing nothing (dropping it does too, a little later).
    pub async fn rollback(self) -> Result<()> {
        match self.inner {
            TxInner::Sqlite(tx) => tx.rollback().await?,
            TxInner::Postgres(tx) => tx.rollback().await?,
        }
        Ok(())
    }

    pub fn backend(&self) -> Backend {
        match self.inner {
            TxInner::Sqlite(_) => Backend::Sqlite,
            TxInner::Postgres(_) => Backend::Postgres,
        }
    }
}

impl Db {
    /// Connects to `sqlite://PATH` / `sqlite:PATH` (created if missing) or
    /// `postgres://…` / `postgresql://…`. Does not run migrations.
    pub async fn connect(url: &str) -> Result<Db> {
        Self::connect_with(url, None).await
    }

    /// Like [`Db::connect`] with an explicit pool size (`None` = the backend's default).
    pub async fn connect_with(url: &str, max_connections: Option<u32>) -> Result<Db> {
        if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(|e| StoreError::InvalidUrl(format!("{url}: {e}")))?;
            let in_memory = url.contains(":memory:") || url.contains("mode=memory");
            Self::connect_sqlite(options, in_memory, max_connections).await
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let options = PgConnectOptions::from_str(url)
                .map_err(|e| StoreError::InvalidUrl(format!("{}: {e}", redact(url))))?;
            Self::connect_postgres(options, max_connections).await
        } else {
            Err(StoreError::InvalidUrl(format!(
                "{}: expected sqlite:PATH, sqlite://PATH, postgres://… or postgresql://…",
                redact(url)
            )))
        }
    }

    /// Connects to PostgreSQL with every pooled connection's `search_path` set to `schema`
    /// (used by the test kit to isolate each test in its own schema).
    pub async fn connect_postgres_in_schema(
        url: &str,
        schema: &str,
        max_connections: Option<u32>,
    ) -> Result<Db> {
        if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
            return Err(StoreError::InvalidUrl(redact(url)));
        }
        if schema.is_empty()
            || !schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(StoreError::InvalidUrl(format!(
                "invalid schema name {schema:?}"
            )));
        }
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::InvalidUrl(format!("{}: {e}", redact(url))))?
            .options([("search_path", schema)]);
        Self::connect_postgres(options, max_connections).await
    }

    async fn connect_sqlite(
        options: SqliteConnectOptions,
        in_memory: bool,
        max_connections: Option<u32>,
    ) -> Result<Db> {
        let mut options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        if !in_memory {
            options = crate::checkpoint::without_auto(options);
        }
        // No ping before each use (sqlx's default): a SQLite connection does not go away, and
        // the ping is a round trip to the connection's worker thread.
        let mut pool = SqlitePoolOptions::new()
            .max_connections(max_connections.unwrap_or(SQLITE_MAX_CONNECTIONS))
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .test_before_acquire(false);
        if in_memory {
            // An in-memory database lives only while a connection is open, and shared-cache
            // table locks (SQLITE_LOCKED) ignore the busy timeout: use one long-lived connection.
            pool = pool
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None);
        }
        let pool = pool.connect_with(options.clone()).await?;
        Ok(Db {
            pool: Pool::Sqlite(pool),
            wakeups: Default::default(),
            checkpoints: (!in_memory).then(|| crate::checkpoint::start(options)),
        })
    }

    async fn connect_postgres(
        options: PgConnectOptions,
        max_connections: Option<u32>,
    ) -> Result<Db> {
        crate::nodelay::watch_port(options.get_port());
        let pool = pg_pool_options(max_connections.unwrap_or(POSTGRES_MAX_CONNECTIONS))
            .connect_with(options)
            .await?;
        Ok(Db {
            pool: Pool::Postgres(pool),
            wakeups: Default::default(),
            checkpoints: None,
        })
    }

    /// A handle on the same database with a pool of its own (`max_connections`, opened on
    /// first use): background work (dispatch, status webhooks) gets connections the API's
    /// request bursts cannot take. An in-memory SQLite database has one connection only, so
    /// it gets this handle back. Shares the wake-ups ([`Wakeups`]).
    pub fn with_own_pool(&self, max_connections: u32) -> Db {
        self.own_pool(max_connections, &[])
    }

    /// Like [`Db::with_own_pool`], with PostgreSQL planning each prepared statement once
    /// (`plan_cache_mode = force_generic_plan`) instead of choosing per execution. Only for
    /// statements whose best plan does not depend on their parameters' values (key and id
    /// lookups by unique indexes, whatever the size of their arrays): PostgreSQL kept
    /// planning the batched send lookup afresh on every call, and the planning cost more
    /// than the execution (3.45 s against 1.0 s of 4,294 calls).
    pub fn with_own_pool_generic_plans(&self, max_connections: u32) -> Db {
        self.own_pool(
            max_connections,
            &[("plan_cache_mode", "force_generic_plan")],
        )
    }

    /// Like [`Db::with_own_pool`], with PostgreSQL commits that do not wait for the WAL to
    /// reach the disk (`synchronous_commit = off`): a crash may lose the last few hundred
    /// milliseconds of them, never half of one. Only for work that is derived from a durable
    /// record and redone from it until a later synchronous commit marks it done (that commit
    /// flushes the WAL up to itself, so every earlier deferred commit is on disk with it):
    /// applying a stored network webhook batch, whose `processed_at` is then written through
    /// an ordinary handle. SQLite commits in WAL mode do not wait for the disk anyway.
    pub fn with_own_pool_deferred_commits(&self, max_connections: u32) -> Db {
        self.own_pool(max_connections, &[("synchronous_commit", "off")])
    }

    /// A pool of its own; on PostgreSQL its connections get `settings` too.
    fn own_pool(&self, max_connections: u32, settings: &[(&str, &str)]) -> Db {
        let pool = match &self.pool {
            Pool::Postgres(p) => {
                let mut options = p.connect_options().as_ref().clone();
                if !settings.is_empty() {
                    options = options.options(settings.iter().copied());
                }
                Pool::Postgres(pg_pool_options(max_connections).connect_lazy_with(options))
            }
            Pool::Sqlite(p) if p.options().get_max_connections() > 1 => Pool::Sqlite(
                SqlitePoolOptions::new()
                    .max_connections(max_connections)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .test_before_acquire(false)
                    .connect_lazy_with(p.connect_options().as_ref().clone()),
            ),
            Pool::Sqlite(_) => return self.clone(),
        };
        Db {
            pool,
            wakeups: std::sync::Arc::clone(&self.wakeups),
            checkpoints: self.checkpoints.clone(),
        }
    }

    /// Applies pending migrations (idempotent; safe to run from several processes at once
    /// on PostgreSQL, where sqlx takes an advisory lock).
    pub async fn migrate(&self) -> Result<()> {
        match &self.pool {
            Pool::Sqlite(pool) => SQLITE_MIGRATOR.run(pool).await?,
            Pool::Postgres(pool) => POSTGRES_MIGRATOR.run(pool).await?,
        }
        Ok(())
    }

    /// Starts a write transaction (see [`Tx`]).
    pub async fn begin(&self) -> Result<Tx> {
        Ok(Tx {
            inner: match &self.pool {
                Pool::Sqlite(pool) => TxInner::Sqlite(pool.begin_write().await?),
                Pool::Postgres(pool) => TxInner::Postgres(pool.begin_write().await?),
            },
            wakeups: std::sync::Arc::clone(&self.wakeups),
            queued_deliveries: false,
            pending_events: Vec::new(),
            pending_timeline: Vec::new(),
        })
    }

    /// On SQLite, this process's write turn, for a write that is one statement outside a
    /// transaction (hold it until the statement is done); `None` on PostgreSQL. Without it
    /// such a statement meets the other writers of the process in SQLite's busy handler,
    /// which sleeps 1, 2, 5, 10 … ms between tries: a request waiting on it waited tens of
    /// milliseconds for a lock that was free after one.
    pub(crate) async fn write_turn(&self) -> Result<Option<tokio::sync::OwnedSemaphorePermit>> {
        match &self.pool {
            Pool::Sqlite(pool) => write_turn(pool).await,
            Pool::Postgres(_) => Ok(None),
        }
    }

    /// The workers' wake-ups, notified after the commits of this handle and of every
    /// handle sharing them (see [`Wakeups`]).
    pub fn wakeups(&self) -> std::sync::Arc<Wakeups> {
        std::sync::Arc::clone(&self.wakeups)
    }

    /// Which engine this handle talks to.
    pub fn backend(&self) -> Backend {
        match self.pool {
            Pool::Sqlite(_) => Backend::Sqlite,
            Pool::Postgres(_) => Backend::Postgres,
        }
    }

    /// Round-trips a trivial query (readiness checks).
    pub async fn ping(&self) -> Result<()> {
        with_pool!(self, pool => sqlx::query("SELECT 1").execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Closes the pool, waiting for checked-out connections to be returned.
    pub async fn close(&self) {
        with_pool!(self, pool => pool.close().await)
    }
}

/// Drops the password from a URL before it goes into an error message.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}{user}:***{}", &url[..scheme_end + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_password() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("sqlite://a.db"), "sqlite://a.db");
    }

    /// The lookups' pool plans once; the others keep PostgreSQL's default.
    #[tokio::test]
    async fn a_generic_plan_pool_sets_its_connections_and_no_others() {
        let db = Db::connect(&crate::testkit::test_pg_url()).await.unwrap();
        let own = db.with_own_pool_generic_plans(1);
        for (handle, want) in [(&own, "force_generic_plan"), (&db, "auto")] {
            let Pool::Postgres(pool) = &handle.pool else {
                unreachable!("a PostgreSQL handle");
            };
            let mode: String = sqlx::query_scalar("SELECT current_setting('plan_cache_mode')")
                .fetch_one(pool)
                .await
                .unwrap();
            assert_eq!(mode, want);
        }
    }

    #[tokio::test]
    async fn rejects_unknown_scheme() {
        let err = Db::connect("mysql://x").await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidUrl(_)), "{err:?}");
    }
}
