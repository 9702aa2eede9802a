//! Batched reads for the hot request path.
//!
//! Every API request looks its key up, and every send also reads its numbers, contact and
//! conversation. On PostgreSQL each of those is a round trip to another process, and on a
//! small machine the cost of a round trip is mostly waking the other side, not the query:
//! measured with `perf`, the kernel's task switching was over half of Tern's CPU time under
//! load, and a primary-key read cost PostgreSQL ~130 µs of CPU. So concurrent requests share
//! one statement per kind of read: a reader task takes whatever lookups have piled up while
//! the previous statement ran and answers them all with one ([`Db::find_auth_by_hashes`];
//! for a send, the key and the send's reads together, [`Db::send_lookups`]). Under light load a batch is one lookup and nothing waits for
//! company. Reads only: no answer depends on another lookup of its batch. On SQLite every
//! lookup runs on its own (no round trips there).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::{Mutex, mpsc, oneshot};

use crate::api_keys::AuthRecord;
use crate::db::{Backend, Db};
use crate::error::{Result, StoreError};
use crate::send_options::{ContactRef, SendContext, SendLookup};

/// Largest batch answered by one statement.
pub const MAX_BATCH: usize = 64;

/// Reader tasks per kind of lookup. One: the next batch gathers while a statement runs.
/// Two readers split the same requests into smaller batches, and on PostgreSQL each
/// statement's fixed cost is what counts: measured, two gave 2,850–3,300 sends/s where one
/// gave 3,000–4,100.
const READERS: usize = 1;

type BatchFuture<A> = Pin<Box<dyn Future<Output = Result<Vec<A>>> + Send>>;
type Reply<A> = oneshot::Sender<Result<A>>;
type Jobs<Q, A> = Arc<Mutex<mpsc::Receiver<(Q, Reply<A>)>>>;

/// Coalesces lookups of one kind: `run` answers a batch, in order.
struct Coalescer<Q, A> {
    db: Db,
    run: fn(Db, Vec<Q>) -> BatchFuture<A>,
    /// `None`: no readers, every lookup runs alone (SQLite).
    tx: Option<mpsc::Sender<(Q, Reply<A>)>>,
}

impl<Q, A> Clone for Coalescer<Q, A> {
    fn clone(&self) -> Self {
        Coalescer {
            db: self.db.clone(),
            run: self.run,
            tx: self.tx.clone(),
        }
    }
}

impl<Q: Clone + Send + 'static, A: Send + 'static> Coalescer<Q, A> {
    fn start(db: Db, run: fn(Db, Vec<Q>) -> BatchFuture<A>) -> Self {
        // SQLite runs in-process: there is no round trip to save, and one reader would only
        // serialise lookups that the pool runs side by side (measured: 3,600 instead of
        // 4,300 sends/s).
        if db.backend() == Backend::Sqlite {
            return Coalescer { db, run, tx: None };
        }
        let (tx, rx) = mpsc::channel(4 * MAX_BATCH);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..READERS {
            tokio::spawn(read_batches(db.clone(), run, rx.clone()));
        }
        Coalescer {
            db,
            run,
            tx: Some(tx),
        }
    }

    async fn get(&self, q: Q) -> Result<A> {
        let Some(tx) = &self.tx else {
            return one(&self.db, self.run, q).await;
        };
        let (reply, answer) = oneshot::channel();
        match tx.send((q, reply)).await {
            Ok(()) => answer
                .await
                .unwrap_or(Err(StoreError::Backend(sqlx::Error::PoolClosed))),
            // No reader (its runtime is gone): read directly.
            Err(mpsc::error::SendError((q, _))) => one(&self.db, self.run, q).await,
        }
    }
}

async fn one<Q, A>(db: &Db, run: fn(Db, Vec<Q>) -> BatchFuture<A>, q: Q) -> Result<A> {
    run(db.clone(), vec![q])
        .await?
        .pop()
        .ok_or(StoreError::NotFound)
}

async fn read_batches<Q: Clone, A>(db: Db, run: fn(Db, Vec<Q>) -> BatchFuture<A>, rx: Jobs<Q, A>) {
    while let Some(jobs) = gather(&rx, MAX_BATCH).await {
        let (qs, replies): (Vec<Q>, Vec<Reply<A>>) = jobs.into_iter().unzip();
        match run(db.clone(), qs.clone()).await {
            Ok(answers) if answers.len() == replies.len() => {
                for (reply, a) in replies.into_iter().zip(answers) {
                    let _ = reply.send(Ok(a));
                }
            }
            // A failed batch (a dropped connection, say): each lookup alone, so each gets
            // its own answer or error.
            _ => {
                for (reply, q) in replies.into_iter().zip(qs) {
                    let _ = reply.send(one(&db, run, q).await);
                }
            }
        }
    }
}

/// The batched reads of the request path; cheap to clone. The reader tasks stop when every
/// handle is dropped.
#[derive(Clone)]
pub struct Lookups {
    auth: Coalescer<Vec<u8>, Option<AuthRecord>>,
    send: Coalescer<SendLookup, Option<SendContext>>,
}

impl std::fmt::Debug for Lookups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lookups").finish_non_exhaustive()
    }
}

/// Connections of the lookups' own pool on PostgreSQL: one statement per kind of lookup
/// runs at a time ([`READERS`]).
const CONNECTIONS: u32 = 2;

impl Lookups {
    /// Starts the reader tasks on the current Tokio runtime. On PostgreSQL they read through
    /// a pool of their own whose statements are planned once
    /// ([`Db::with_own_pool_generic_plans`]): every lookup is by unique keys.
    pub fn start(db: Db) -> Lookups {
        let db = match db.backend() {
            Backend::Postgres => db.with_own_pool_generic_plans(CONNECTIONS),
            Backend::Sqlite => db,
        };
        Lookups {
            auth: Coalescer::start(db.clone(), |db, hashes| {
                Box::pin(async move { db.find_auth_by_hashes(&hashes).await })
            }),
            send: Coalescer::start(db, |db, qs| {
                Box::pin(async move { db.send_lookups(&qs).await })
            }),
        }
    }

    /// [`Db::find_auth_by_hash`], batched with concurrent lookups.
    pub async fn auth(&self, hash: &[u8]) -> Result<Option<AuthRecord>> {
        self.auth.get(hash.to_vec()).await
    }

    /// [`Db::send_lookups`] for one send, batched with concurrent lookups.
    pub async fn send(
        &self,
        hash: &[u8],
        contact: Option<ContactRef<'_>>,
    ) -> Result<Option<SendContext>> {
        self.send.get(SendLookup::new(hash, contact)).await
    }
}

/// How many writer tasks a group-commit queue runs: one on SQLite (it has one write lock
/// anyway), two on PostgreSQL (one batch commits while the next is written).
pub(crate) fn writers(db: &Db) -> usize {
    match db.backend() {
        Backend::Sqlite => 1,
        Backend::Postgres => 2,
    }
}

/// Waits for the first job, then takes whatever else is already queued, up to `max`; `None`
/// once every sender is gone. Tasks sharing `rx` take turns: one gathers while the others
/// run their batches.
pub(crate) async fn gather<T>(rx: &Mutex<mpsc::Receiver<T>>, max: usize) -> Option<Vec<T>> {
    let mut rx = rx.lock().await;
    let mut jobs = vec![rx.recv().await?];
    while jobs.len() < max {
        match rx.try_recv() {
            Ok(job) => jobs.push(job),
            Err(_) => break,
        }
    }
    Some(jobs)
}
