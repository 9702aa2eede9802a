//! Connections a group-commit writer keeps between its batches.
//!
//! Taking a connection from a pool and giving it back costs a round trip each time: sqlx
//! pings every connection as it returns to the pool (on SQLite a hop to the connection's
//! thread, on PostgreSQL a message to the server), in a task of its own. A writer that
//! commits a batch every few milliseconds keeps its connection instead.

use sqlx::pool::PoolConnection;
use sqlx::{Database, Postgres, Sqlite};

use crate::error::Result;

/// One kept connection. A use that did not end cleanly (an error, or a future dropped
/// halfway) may have left a transaction or a reply open, so such a connection is closed
/// rather than kept or given back.
pub(crate) struct Held<DB: Database> {
    conn: Option<PoolConnection<DB>>,
    in_use: bool,
    /// Kept between uses (a writer's); otherwise given back after each use, so that a
    /// caller which needs another connection next does not hold one while it waits.
    wanted: bool,
    keep: bool,
}

impl<DB: Database> Held<DB> {
    fn new(wanted: bool) -> Self {
        Held {
            conn: None,
            in_use: false,
            wanted,
            keep: false,
        }
    }

    /// The kept connection, or one from `pool`; the use ends with [`Held::done`].
    pub(crate) async fn get(&mut self, pool: &sqlx::Pool<DB>) -> Result<&mut DB::Connection> {
        if self.in_use {
            self.discard();
        }
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => pool.acquire().await?,
        };
        // A pool of one connection (in-memory SQLite) needs it back between uses: the
        // writer's other statements run on that same connection.
        self.keep = self.wanted && pool.options().get_max_connections() > 1;
        self.in_use = true;
        Ok(&mut **self.conn.insert(conn))
    }

    /// Ends the use begun by [`Held::get`]: `clean` when no transaction is left open.
    pub(crate) fn done(&mut self, clean: bool) {
        if !clean {
            self.discard();
        } else if !self.keep {
            self.conn = None;
        }
        self.in_use = false;
    }

    fn discard(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            conn.close_on_drop();
        }
        self.in_use = false;
    }
}

impl<DB: Database> Drop for Held<DB> {
    fn drop(&mut self) {
        if self.in_use {
            self.discard();
        }
    }
}

/// The connection the acceptance writer keeps, for whichever backend it writes to.
pub(crate) struct HeldWriter {
    pub(crate) sqlite: Held<Sqlite>,
    pub(crate) postgres: Held<Postgres>,
}

impl HeldWriter {
    /// Kept between the writer's batches.
    pub(crate) fn kept() -> Self {
        HeldWriter {
            sqlite: Held::new(true),
            postgres: Held::new(true),
        }
    }

    /// Taken for each use and given back after it.
    pub(crate) fn per_use() -> Self {
        HeldWriter {
            sqlite: Held::new(false),
            postgres: Held::new(false),
        }
    }
}
