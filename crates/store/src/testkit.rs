//! The test kit of every crate: fresh, migrated databases and one way to run a test on
//! both backends.
//!
//! * [`fresh_sqlite`]: a SQLite file in a new temp dir (not `sqlite::memory:`, which is
//!   per-connection). Keep the returned `TempDir` alive as long as the `Db`.
//! * [`fresh_postgres`]: a new schema `t_<uuid>` in the database named by `TERN_TEST_PG_URL`
//!   (default [`DEFAULT_TEST_PG_URL`]), with every pooled connection's `search_path` set to
//!   it. Panics if PostgreSQL is unreachable: PG tests are never silently skipped.
//!   Call [`Db::drop_test_schema`] when done.
//! * [`both_backends!`](crate::both_backends): each test once on SQLite and once on
//!   PostgreSQL (`sqlite::name`, `postgres::name`), given a [`Fixture`] started on that
//!   backend and stopped afterwards, even when the test panics. [`TestDb`] is the fixture
//!   of the store's and core's tests; the server's tests have a running app as theirs.
//!
//! Seeding (organisations, members, keys…) is not here: core's admin writes are the real
//! provisioning path and this crate cannot depend on core (a dev-dependency cycle would give
//! the tests a second copy of this crate's types), so the seed builder is `tern_core::testkit`.
//! The store's own conformance tests seed rows through `Db` methods.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

use crate::db::{Db, Pool};
use crate::error::{Result, StoreError};

/// Used when `TERN_TEST_PG_URL` is not set.
pub const DEFAULT_TEST_PG_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Pool size of a test database: tests run in parallel against one server.
const TEST_PG_MAX_CONNECTIONS: u32 = 4;

/// The PostgreSQL URL tests use: `TERN_TEST_PG_URL` or [`DEFAULT_TEST_PG_URL`].
///
/// For a loopback server without an explicit `sslmode`, `sslmode=disable` is added: a TLS
/// handshake costs ~90 ms per connection in a debug build and protects nothing on loopback.
pub fn test_pg_url() -> String {
    let url = std::env::var("TERN_TEST_PG_URL").unwrap_or_else(|_| DEFAULT_TEST_PG_URL.to_owned());
    let loopback = [
        "@127.0.0.1",
        "@localhost",
        "@[::1]",
        "://127.0.0.1",
        "://localhost",
    ]
    .iter()
    .any(|h| url.contains(h));
    if loopback && !url.contains("sslmode=") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}sslmode=disable")
    } else {
        url
    }
}

/// A migrated SQLite database in a fresh temp directory.
///
/// # Panics
/// If the temp dir cannot be created or the database cannot be opened or migrated.
pub async fn fresh_sqlite() -> (Db, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("create temp dir");
    let url = format!("sqlite://{}", dir.path().join("tern.db").display());
    let db = Db::connect(&url).await.expect("open sqlite test db");
    db.migrate().await.expect("migrate sqlite test db");
    (db, dir)
}

/// A migrated PostgreSQL database in a fresh schema; see the module docs.
///
/// # Panics
/// If PostgreSQL is unreachable or the schema cannot be created or migrated.
pub async fn fresh_postgres() -> Db {
    match try_fresh_postgres().await {
        Ok(db) => db,
        Err(e) => panic!(
            "PostgreSQL test database unavailable at {} (set TERN_TEST_PG_URL): {e}",
            test_pg_url()
        ),
    }
}

async fn try_fresh_postgres() -> Result<Db> {
    let url = test_pg_url();
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&url).await?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    let db = Db::connect_postgres_in_schema(&url, &schema, Some(TEST_PG_MAX_CONNECTIONS)).await?;
    db.migrate().await?;
    Ok(db)
}

impl Db {
    /// Runs `sql` (one or more statements, as written for this backend) on a test database:
    /// tests provoke failures with it (e.g. a trigger that makes the database refuse a row).
    pub async fn execute_test_sql(&self, sql: &str) -> Result<()> {
        crate::db::with_pool!(self, pool => sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(pool)
            .await
            .map(|_| ()))?;
        Ok(())
    }

    /// Closes a [`fresh_postgres`] database and drops its schema. Refuses (with
    /// `InvalidUrl`) anything that is not a PostgreSQL test schema (`t_…`).
    pub async fn drop_test_schema(self) -> Result<()> {
        let Pool::Postgres(pool) = &self.pool else {
            return Err(StoreError::InvalidUrl(
                "not a PostgreSQL test database".into(),
            ));
        };
        let schema: String = sqlx::query_scalar("SELECT current_schema()")
            .fetch_one(pool)
            .await?;
        let valid = schema
            .strip_prefix("t_")
            .is_some_and(|rest| rest.len() == 32 && rest.chars().all(|c| c.is_ascii_hexdigit()));
        if !valid {
            return Err(StoreError::InvalidUrl(format!(
                "refusing to drop schema {schema:?}"
            )));
        }
        let options = pool.connect_options();
        pool.close().await;
        let mut conn = PgConnection::connect_with(&options).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
            .execute(&mut conn)
            .await?;
        conn.close().await?;
        Ok(())
    }
}

/// Tables (excluding `_sqlx_migrations` and SQLite internals) and their column names, for
/// the schema-parity test.
pub async fn schema_columns(db: &Db) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let rows: Vec<(String, String)> = match &db.pool {
        Pool::Sqlite(pool) => {
            sqlx::query_as(
                "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p \
                 WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' \
                   AND m.name <> '_sqlx_migrations'",
            )
            .fetch_all(pool)
            .await?
        }
        Pool::Postgres(pool) => {
            sqlx::query_as(
                "SELECT table_name::text, column_name::text FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name <> '_sqlx_migrations'",
            )
            .fetch_all(pool)
            .await?
        }
    };
    let mut tables: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (table, column) in rows {
        tables.entry(table).or_default().insert(column);
    }
    Ok(tables)
}

/// The dispatch queue's housekeeping at `now` in one call, as the status writer runs it
/// (`tern_core::messages::status`): claims past their lease become `unknown`, claimed
/// messages whose status moved on leave the queue, and up to `limit` `in_flight` /
/// `unknown` messages past their deadline and still `sending` fail with `failure`.
pub async fn sweep_dispatch(
    db: &crate::Db,
    now: i64,
    failure_code: &str,
    failure: &tern_domain::failure::Failure,
    limit: i64,
) -> crate::Result<crate::DispatchSweep> {
    let (abandoned, released) = db.release_dispatch(now).await?;
    let mut tx = db.begin().await?;
    let expired = tx
        .status_writes()
        .expire_dispatch(now, failure_code, failure, limit)
        .await?;
    tx.commit().await?;
    Ok(crate::DispatchSweep {
        abandoned,
        released,
        expired,
    })
}

/// The database a test runs on (the store's own [`crate::Backend`]).
pub use crate::db::Backend;

/// What a test of [`both_backends!`](crate::both_backends) is run with: started on one
/// backend before the test, stopped after it (a PostgreSQL fixture drops its schema there).
pub trait Fixture: Sized {
    /// What the test body is given: a handle (a `Db`) or a borrow of the fixture.
    type Arg<'a>
    where
        Self: 'a;
    fn start(backend: Backend) -> impl Future<Output = Self>;
    fn arg(&self) -> Self::Arg<'_>;
    fn stop(self) -> impl Future<Output = ()>;
}

/// A fresh migrated database ([`fresh_sqlite`] or [`fresh_postgres`]); tests get its `Db`.
pub struct TestDb {
    pub db: Db,
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// A fresh database of `backend`; [`Fixture::stop`] it when done.
    pub async fn start(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let (db, dir) = fresh_sqlite().await;
                Self {
                    db,
                    backend,
                    _dir: Some(dir),
                }
            }
            Backend::Postgres => Self {
                db: fresh_postgres().await,
                backend,
                _dir: None,
            },
        }
    }
}

impl Fixture for TestDb {
    type Arg<'a> = Db;
    fn start(backend: Backend) -> impl Future<Output = Self> {
        TestDb::start(backend)
    }
    fn arg(&self) -> Db {
        self.db.clone()
    }
    async fn stop(self) {
        match self.backend {
            Backend::Sqlite => self.db.close().await,
            Backend::Postgres => self.db.drop_test_schema().await.expect("drop test schema"),
        }
    }
}

/// The backend alone, for tests that start (and stop) what they need themselves.
impl Fixture for Backend {
    type Arg<'a> = Backend;
    async fn start(backend: Backend) -> Self {
        backend
    }
    fn arg(&self) -> Backend {
        *self
    }
    async fn stop(self) {}
}

/// Runs `body` with a fixture `F` started on `backend`, stops the fixture, then resumes the
/// body's panic if it had one (so a failed PostgreSQL test still drops its schema). Called
/// by [`both_backends!`](crate::both_backends).
pub async fn run<F, B>(backend: Backend, body: B)
where
    F: Fixture,
    B: for<'a> AsyncFnOnce(F::Arg<'a>),
{
    let fixture = F::start(backend).await;
    let outcome = CatchUnwind(Box::pin(body(fixture.arg()))).await;
    fixture.stop().await;
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// A future's panic as an `Err` (what `futures::FutureExt::catch_unwind` does).
struct CatchUnwind<'a>(Pin<Box<dyn Future<Output = ()> + 'a>>);

impl Future for CatchUnwind<'_> {
    type Output = std::thread::Result<()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.0.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(())) => Poll::Ready(Ok(())),
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}

/// Runs each test on SQLite and on PostgreSQL, as `sqlite::name` and `postgres::name`
/// (multi-threaded runtime, two workers), with a [`Fixture`](crate::testkit::Fixture)
/// started on that backend and stopped afterwards, even when the test panics:
///
/// ```text
/// tern_store::both_backends! { TestDb;
///     // An async function of the enclosing module, given the fixture's argument.
///     a_test_function,
///     // Another name for one, or a body of its own.
///     an_alias => a_test_function,
///     inline => async |db| assert!(db.get_org(id).await.unwrap().is_none()),
/// }
/// ```
///
/// One invocation per module (it defines the modules `sqlite` and `postgres`). PostgreSQL
/// tests fail, never skip, when the server is unreachable.
#[macro_export]
macro_rules! both_backends {
    // A test's body: its own, or the enclosing module's function of the same name.
    (@body $name:ident) => { super::$name };
    (@body $name:ident $body:expr) => { $body };
    ($fixture:ty; $($name:ident $(=> $body:expr)?),* $(,)?) => {
        mod sqlite {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    $crate::testkit::run::<$fixture, _>(
                        $crate::testkit::Backend::Sqlite,
                        $crate::both_backends!(@body $name $($body)?),
                    )
                    .await;
                }
            )*
        }
        mod postgres {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    $crate::testkit::run::<$fixture, _>(
                        $crate::testkit::Backend::Postgres,
                        $crate::both_backends!(@body $name $($body)?),
                    )
                    .await;
                }
            )*
        }
    };
}
