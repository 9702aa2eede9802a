//! SQLite checkpoints off the writers' path.
//!
//! In WAL mode SQLite copies the log back into the database file (a checkpoint) from within
//! the commit that grows the log past 1,000 pages, and syncs both files there: that commit
//! is usually the acceptance's group commit, which every waiting send is queued behind.
//! Measured on the acceptance's statements (15 messages a transaction): the commit took
//! 0.7–1.1 ms with those checkpoints and 0.34–0.45 ms without. So every connection of a
//! file-backed database runs with `wal_autocheckpoint = 0`, and one task per [`Db`]
//! (shared by every handle made from it) runs a PASSIVE checkpoint — which waits for no
//! reader or writer — on a connection of its own every [`INTERVAL`]. Fewer, larger
//! checkpoints also write a page changed many times once. The task ends when the last
//! handle is dropped; SQLite checkpoints what is left when the last connection closes.

use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, SqliteConnection};

/// How often the log is copied back. The log grows by what is written meanwhile (at the
/// acceptance's peak, tens of MB).
pub(crate) const INTERVAL: Duration = Duration::from_millis(250);

/// The connection option every connection of a checkpointed database gets.
pub(crate) fn without_auto(options: SqliteConnectOptions) -> SqliteConnectOptions {
    options.pragma("wal_autocheckpoint", "0")
}

/// Starts the checkpoints of the database `options` opens; they run while the returned
/// handle (or a clone) lives.
pub(crate) fn start(options: SqliteConnectOptions) -> Arc<()> {
    let alive = Arc::new(());
    tokio::spawn(run(options, Arc::downgrade(&alive)));
    alive
}

async fn run(options: SqliteConnectOptions, alive: Weak<()>) {
    let mut conn: Option<SqliteConnection> = None;
    // Logged when checkpoints start failing, not every time.
    let mut failing = false;
    loop {
        tokio::time::sleep(INTERVAL).await;
        if alive.strong_count() == 0 {
            break;
        }
        if conn.is_none() {
            match options.connect().await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(error = %e, "SQLite checkpoints: cannot connect");
                    }
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        // (busy, frames in the log, frames copied back): busy while another connection
        // checkpoints, which is as good.
        match sqlx::query_as::<_, (i64, i64, i64)>("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&mut *c)
            .await
        {
            Ok(_) => failing = false,
            Err(e) => {
                if !std::mem::replace(&mut failing, true) {
                    tracing::warn!(error = %e, "SQLite checkpoint failed");
                }
            }
        }
    }
    if let Some(c) = conn {
        let _ = c.close().await;
    }
}

#[cfg(test)]
mod tests {
    use crate::db::Pool;

    /// The pool's connections never copy the log back themselves; the task does, on its
    /// own connection, soon after a write.
    #[tokio::test]
    async fn the_log_is_copied_back_by_the_checkpoints_not_by_the_writers() {
        let (db, dir) = crate::testkit::fresh_sqlite().await;
        let Pool::Sqlite(pool) = &db.pool else {
            unreachable!("a SQLite handle");
        };
        let auto: i64 = sqlx::query_scalar("PRAGMA wal_autocheckpoint")
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(auto, 0);
        let file = dir.path().join("tern.db");
        let size = || std::fs::metadata(&file).unwrap().len();
        sqlx::query("CREATE TABLE filler (b BLOB)")
            .execute(pool)
            .await
            .unwrap();
        // Let a checkpoint take everything so far, then write 8 MB (2,000 pages) at once.
        tokio::time::sleep(super::INTERVAL * 3).await;
        let before = size();
        let mut tx = pool.begin().await.unwrap();
        for _ in 0..256 {
            sqlx::query("INSERT INTO filler (b) VALUES (zeroblob(32768))")
                .execute(&mut *tx)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
        let mut waited = 0;
        while size() < before + 8_000_000 {
            assert!(waited < 200, "no checkpoint within 20 s");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            waited += 1;
        }
    }
}
