//! Group commit for message acceptance.
//!
//! Every accepted send writes an idempotency key, a message and its conversation's
//! activity, durably, before the client hears 202. Doing that in one transaction per
//! request makes the database's commit (and, on SQLite, its single write lock) the limit.
//! The queue instead hands concurrent acceptances to a writer task that commits whatever
//! has piled up while the previous batch was being written, in one transaction
//! ([`Db::accept_messages`]). Each request still waits for its own durable commit; under
//! light load a batch is one item and nothing waits for company.

use std::sync::Arc;

use tokio::sync::{Mutex, mpsc, oneshot};

use crate::db::Db;
use crate::error::{Result, StoreError};
use crate::held::HeldWriter;
use crate::outbound::{Accept, Acceptance};

/// Largest batch written in one transaction (bounds the statement size and how long one
/// transaction holds its locks).
pub const MAX_BATCH: usize = 64;

type Reply = oneshot::Sender<(Accept, Result<Acceptance>)>;

/// Handle to the writer tasks; cheap to clone. The tasks stop when every handle is dropped.
#[derive(Clone, Debug)]
pub struct AcceptQueue {
    db: Db,
    tx: mpsc::Sender<(Accept, Reply)>,
}

impl AcceptQueue {
    /// Starts the writer tasks on the current Tokio runtime: one on SQLite (it has one
    /// write lock anyway), two on PostgreSQL (one batch commits while the next is written).
    pub fn start(db: Db) -> AcceptQueue {
        let (tx, rx) = mpsc::channel(4 * MAX_BATCH);
        let rx = Arc::new(Mutex::new(rx));
        let writers = crate::lookups::writers(&db);
        // The writers keep a connection each between batches, so they get a pool of their
        // own (and one spare for a batch that goes item by item): kept in the API's pool,
        // they left a test's pool of four two connections, and requests waited on each
        // other until they timed out.
        let own = db.with_own_pool(writers as u32 + 1);
        for _ in 0..writers {
            tokio::spawn(write_batches(own.clone(), rx.clone()));
        }
        AcceptQueue { db, tx }
    }

    /// Accepts one message as [`Db::accept_messages`] would, committed together with
    /// whatever other acceptances are waiting. Returns the item (with the contact and
    /// conversation ids actually used) and its outcome.
    pub async fn accept(&self, item: Accept) -> Result<(Accept, Acceptance)> {
        let (reply, answer) = oneshot::channel();
        match self.tx.send((item, reply)).await {
            Ok(()) => match answer.await {
                Ok((item, outcome)) => outcome.map(|o| (item, o)),
                // The writer went away with the item (its runtime shut down): whether it was
                // committed is unknown, so do not write it again here; the client's retry
                // with the same key finds out.
                Err(_) => Err(StoreError::Backend(sqlx::Error::PoolClosed)),
            },
            // No writer (stopped): write it directly.
            Err(mpsc::error::SendError((item, _))) => {
                let mut items = [item];
                let outcome = self.db.accept_messages(&mut items).await.pop();
                let [item] = items;
                outcome
                    .unwrap_or(Err(StoreError::NotFound))
                    .map(|o| (item, o))
            }
        }
    }
}

async fn write_batches(db: Db, rx: Arc<Mutex<mpsc::Receiver<(Accept, Reply)>>>) {
    // The writer's connection, kept between batches.
    let mut held = HeldWriter::kept();
    // One writer gathers at a time; the other writes meanwhile.
    while let Some(jobs) = crate::lookups::gather(&rx, MAX_BATCH).await {
        let (mut items, replies): (Vec<Accept>, Vec<Reply>) = jobs.into_iter().unzip();
        let results = db.accept_messages_on(&mut items, &mut held).await;
        for ((item, reply), result) in items.into_iter().zip(replies).zip(results) {
            // A requester that went away (client disconnected) still had its message
            // accepted; a retry with the same key replays it.
            let _ = reply.send((item, result));
        }
    }
}
