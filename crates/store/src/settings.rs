//! Process-wide settings (e.g. generated secrets shared by every `tern serve` process).

use crate::db::{Db, with_pool};
use crate::error::Result;

impl Db {
    /// Stores `candidate` under `name` unless a value already exists, and returns the stored
    /// value. Racing callers (threads or processes) all get the same, first-written value.
    pub async fn secret_get_or_insert(&self, name: &str, candidate: &[u8]) -> Result<Vec<u8>> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        // Insert-if-absent, then read: the insert either wins or waits for / sees the winner,
        // and the stored value never changes afterwards.
        with_pool!(self, pool => {
            sqlx::query("INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING")
                .bind(name)
                .bind(candidate)
                .execute(pool)
                .await?;
            let value: Vec<u8> = sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
                .bind(name)
                .fetch_one(pool)
                .await?;
            Ok(value)
        })
    }
}
