//! Group commit for the network's webhooks (the intake of the network inbox).
//!
//! The network sends mostly one status per POST: at a number's top tier that is up to three
//! thousand small POSTs a second, each of which must be stored durably before it is answered
//! 200. One transaction per POST makes the commit (and SQLite's single write lock) the limit,
//! and the POSTs waiting for it pile up. As for message acceptance (`accept_queue`), a writer
//! task commits whatever arrived while the previous batch was written, in one statement and
//! one transaction; each request still waits for its own commit.
//!
//! The queue is bounded ([`QUEUE`]): when it is full, a request waits to enter it, so the
//! bodies held in memory between the intake and the table are at most [`QUEUE`] plus the
//! batches being written, whatever the network's rate.

use std::sync::Arc;

use tokio::sync::{Mutex, mpsc, oneshot};
use uuid::Uuid;

use crate::db::{BeginWrite as _, Db, with_pool};
use crate::error::{Result, StoreError};

/// Largest batch written in one transaction.
pub const MAX_BATCH: usize = 128;
/// Bodies waiting for a writer, at most.
pub const QUEUE: usize = 2 * MAX_BATCH;

/// A verified notification to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInboxItem {
    pub id: Uuid,
    /// The raw request body, exactly as received.
    pub body: Vec<u8>,
    pub signature: String,
    pub received_at: i64,
}

type Reply = oneshot::Sender<Result<()>>;

/// Handle to the intake's writer tasks; cheap to clone. They stop when every handle is
/// dropped.
#[derive(Clone, Debug)]
pub struct InboxQueue {
    db: Db,
    tx: mpsc::Sender<(NewInboxItem, Reply)>,
}

impl InboxQueue {
    /// Starts the writers on the current Tokio runtime: one on SQLite (one write lock), two
    /// on PostgreSQL (one batch commits while the next is written).
    pub fn start(db: Db) -> InboxQueue {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..crate::lookups::writers(&db) {
            tokio::spawn(write_batches(db.clone(), rx.clone()));
        }
        InboxQueue { db, tx }
    }

    /// Stores `item` durably, committed with whatever else arrived meanwhile, and wakes this
    /// process's inbox worker.
    pub async fn insert(&self, item: NewInboxItem) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        match self.tx.send((item, reply)).await {
            // A writer that went away with the item (its runtime shut down): not known to be
            // stored, so the request fails and the network sends it again.
            Ok(()) => answer
                .await
                .unwrap_or(Err(StoreError::Backend(sqlx::Error::PoolClosed))),
            // No writer (stopped): write it directly.
            Err(mpsc::error::SendError((item, _))) => {
                self.db.insert_inbox_many(std::slice::from_ref(&item)).await
            }
        }
    }

    /// Items waiting for a writer now (at most [`QUEUE`]).
    pub fn queued(&self) -> usize {
        QUEUE - self.tx.capacity()
    }
}

async fn write_batches(db: Db, rx: Arc<Mutex<mpsc::Receiver<(NewInboxItem, Reply)>>>) {
    while let Some(jobs) = crate::lookups::gather(&rx, MAX_BATCH).await {
        let (items, replies): (Vec<NewInboxItem>, Vec<Reply>) = jobs.into_iter().unzip();
        match db.insert_inbox_many(&items).await {
            Ok(()) => {
                for reply in replies {
                    let _ = reply.send(Ok(()));
                }
            }
            Err(e) if items.len() == 1 => {
                if let Some(reply) = replies.into_iter().next() {
                    let _ = reply.send(Err(e));
                }
            }
            // One bad item must not fail its neighbours: each alone, for its own answer.
            Err(_) => {
                for (item, reply) in items.iter().zip(replies) {
                    let _ = reply.send(db.insert_inbox_many(std::slice::from_ref(item)).await);
                }
            }
        }
    }
}

impl Db {
    /// Stores received notifications in one transaction and wakes this process's inbox
    /// worker. `Conflict { "network_inbox_pkey" }` when an id is taken (nothing stored).
    pub async fn insert_inbox_many(&self, items: &[NewInboxItem]) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let mut q = sqlx::QueryBuilder::new(
                "INSERT INTO network_inbox (id, received_at, signature, body) ",
            );
            q.push_values(items, |mut row, i| {
                row.push_bind(i.id)
                    .push_bind(i.received_at)
                    .push_bind(i.signature.as_str())
                    .push_bind(i.body.as_slice());
            });
            // Each batch size would be another statement cached per connection.
            q.build().persistent(false).execute(&mut *tx).await?;
            tx.commit().await?;
        });
        self.wakeups.inbox.notify_one();
        Ok(())
    }
}
