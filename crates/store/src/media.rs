//! Media: files organisations upload or import and files customers send (migration
//! `0008_media`).
//!
//! * `media`: one row per Tern media id. The bytes live in blob storage under `object_key`;
//!   the same bytes uploaded twice by one organisation are stored once, so several rows may
//!   name one key and a blob may go only when the last row naming it does
//!   ([`Db::delete_expired_media`]).
//! * `media_network`: the network's id of a media for one sending number, so a media is
//!   uploaded to the network once per number while the network keeps it.
//! * `media_import_slots`: at most N URL imports per organisation at once, across every
//!   process sharing the database ([`Db::claim_import_slot`]).
//! * `inbound_media`: downloads of media that customers sent, a job queue with leases like
//!   the dispatch queue's:
//!
//! ```text
//!  enqueue (due now) ──► open ── claim (attempts+1, lease) ──► leased
//!                         ▲                                      │
//!                         ├── retry (due at next_attempt_at) ◄───┤
//!                         └── lease ends (the worker died) ◄─────┤
//!                              finish (media_id, message too) ◄──┼──► done
//!                              fail (for good) ◄─────────────────┴──► failed
//! ```
//!
//! A claim moves `next_attempt_at` to the end of its lease: an open job is due exactly when
//! `next_attempt_at <= now`, so the earliest due time ([`Db::next_inbound_media_due`]) is
//! also right for leased jobs (a worker sleeping until then does not spin on a job another
//! worker holds), and one index serves claims and that read.

use std::collections::BTreeSet;

use uuid::Uuid;

use crate::db::{Backend, BeginWrite as _, Db, Pool, Tx, own_tx, with_pool, with_tx};
use crate::error::{Result, StoreError};
use crate::sql::bump_updated_at;

/// Where a media's bytes came from, stored as its name in `media.source` (the shape of
/// `tern_domain`'s stored names: `as_str`, `parse`, `TryFrom<String>` for rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MediaSource {
    /// Uploaded by the organisation (`POST /media`).
    Upload,
    /// Fetched from a URL the organisation gave.
    Import,
    /// Sent by a customer and downloaded from the network.
    Inbound,
}

impl MediaSource {
    pub const ALL: &'static [MediaSource] = &[
        MediaSource::Upload,
        MediaSource::Import,
        MediaSource::Inbound,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MediaSource::Upload => "upload",
            MediaSource::Import => "import",
            MediaSource::Inbound => "inbound",
        }
    }

    pub fn parse(s: &str) -> Option<MediaSource> {
        Self::ALL.iter().copied().find(|v| v.as_str() == s)
    }
}

impl std::fmt::Display for MediaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for MediaSource {
    type Error = tern_domain::UnknownName;
    fn try_from(s: String) -> std::result::Result<Self, Self::Error> {
        MediaSource::parse(&s).ok_or(tern_domain::UnknownName {
            kind: "MediaSource",
            value: s,
        })
    }
}

/// A media row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Media {
    pub id: Uuid,
    pub org_id: Uuid,
    /// Lowercase hex SHA-256 of the bytes.
    pub sha256: String,
    pub mime_type: String,
    pub size_bytes: i64,
    pub filename: Option<String>,
    /// Where the bytes are in blob storage (possibly shared with other rows of the org).
    pub object_key: String,
    /// An animated WebP sticker.
    pub animated: bool,
    #[sqlx(try_from = "String")]
    pub source: MediaSource,
    pub created_at: i64,
    pub expires_at: i64,
}

/// A customer's media to download ([`Db::enqueue_inbound_media`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInboundMedia {
    pub org_id: Uuid,
    /// The inbound message's network id.
    pub wamid: String,
    /// The number that received it (whose token downloads it).
    pub phone_number_id: String,
    pub network_media_id: String,
    pub mime_type: Option<String>,
    /// As the network gave it (may be base64).
    pub sha256: Option<String>,
    pub filename: Option<String>,
}

/// A claimed download job: what the worker needs to fetch the media.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InboundMediaJob {
    pub org_id: Uuid,
    pub wamid: String,
    pub phone_number_id: String,
    pub network_media_id: String,
    pub mime_type: Option<String>,
    pub sha256: Option<String>,
    pub filename: Option<String>,
    /// Claims so far, including this one.
    pub attempts: i64,
    /// The claiming worker; the outcome writes must name it.
    pub lease_owner: String,
    pub created_at: i64,
}

/// The queue columns of one download job (operators, tests).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct InboundMediaState {
    pub attempts: i64,
    /// When the job is due (while leased: the end of the lease).
    pub next_attempt_at: i64,
    pub locked_until: Option<i64>,
    pub lease_owner: Option<String>,
    pub last_error: Option<String>,
    /// The Tern media the download became.
    pub media_id: Option<Uuid>,
    pub done_at: Option<i64>,
    pub failed_at: Option<i64>,
}

macro_rules! media_columns {
    () => {
        "id, org_id, sha256, mime_type, size_bytes, filename, object_key, animated, source, \
         created_at, expires_at"
    };
}

/// Claims due download jobs: `$1` limit, `$2` now, `$3` owner, `$4` lease end.
macro_rules! claim_sql {
    ($($lock:literal)?) => {
        concat!(
            "UPDATE inbound_media SET attempts = attempts + 1, lease_owner = $3, \
             locked_until = $4, next_attempt_at = $4 \
             WHERE (org_id, wamid) IN (SELECT org_id, wamid FROM inbound_media \
                 WHERE done_at IS NULL AND failed_at IS NULL AND next_attempt_at <= $2 \
                   AND (locked_until IS NULL OR locked_until <= $2) \
                 ORDER BY next_attempt_at, org_id, wamid LIMIT $1", $(" ", $lock,)? ") \
             RETURNING org_id, wamid, phone_number_id, network_media_id, mime_type, sha256, \
             filename, attempts, lease_owner, created_at"
        )
    };
}

/// Deletes up to `$2` media rows expired at `$1`, earliest first, returning their blob keys.
const DELETE_EXPIRED: &str = "DELETE FROM media WHERE id IN (SELECT id FROM media \
     WHERE expires_at <= $1 ORDER BY expires_at, id LIMIT $2) RETURNING object_key";

/// The transaction-scoped advisory lock that serialises [`Db::delete_expired_media`] on
/// PostgreSQL (the bytes of "tern-med"). Two sweepers deleting the last two rows of one blob
/// at once would each still see the other's row and neither would report the blob.
const SWEEP_LOCK: i64 = 0x7465_726E_2D6D_6564;

impl Db {
    /// Stores a media row. `Conflict { "media_pkey" }` on a duplicate id.
    pub async fn insert_media(&self, m: &Media) -> Result<()> {
        const SQL: &str = concat!(
            "INSERT INTO media (",
            media_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        );
        with_pool!(self, pool => sqlx::query(SQL)
            .bind(m.id)
            .bind(m.org_id)
            .bind(&m.sha256)
            .bind(&m.mime_type)
            .bind(m.size_bytes)
            .bind(&m.filename)
            .bind(&m.object_key)
            .bind(m.animated)
            .bind(m.source.as_str())
            .bind(m.created_at)
            .bind(m.expires_at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// One media of the organisation, expired or not (the caller decides what expiry means
    /// for its use); another organisation's is `None`.
    pub async fn get_media(&self, org_id: Uuid, id: Uuid) -> Result<Option<Media>> {
        const SQL: &str = concat!(
            "SELECT ",
            media_columns!(),
            " FROM media WHERE id = $1 AND org_id = $2"
        );
        let m = with_pool!(self, pool => sqlx::query_as::<_, Media>(SQL)
            .bind(id)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(m)
    }

    /// One media of any organisation: for signed download links, whose signature already
    /// proves which organisation (and media) the link was made for.
    pub async fn get_media_by_id(&self, id: Uuid) -> Result<Option<Media>> {
        const SQL: &str = concat!("SELECT ", media_columns!(), " FROM media WHERE id = $1");
        let m = with_pool!(self, pool => sqlx::query_as::<_, Media>(SQL)
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(m)
    }

    /// A media of the organisation with these bytes (`sha256`, lowercase hex) that lives past
    /// `now`, the one living longest: an upload of the same bytes reuses its `object_key`
    /// instead of storing them again.
    ///
    /// Pass `now` plus a margin longer than storing the new row takes: the sweeper deletes a
    /// row (and may report its blob unreferenced) as soon as it expires, so a row found just
    /// before its expiry could lose its blob before the new row naming it is stored.
    pub async fn live_media_by_sha256(
        &self,
        org_id: Uuid,
        sha256: &str,
        now: i64,
    ) -> Result<Option<Media>> {
        const SQL: &str = concat!(
            "SELECT ",
            media_columns!(),
            " FROM media WHERE org_id = $1 AND sha256 = $2 AND expires_at > $3 \
             ORDER BY expires_at DESC, id DESC LIMIT 1"
        );
        let m = with_pool!(self, pool => sqlx::query_as::<_, Media>(SQL)
            .bind(org_id)
            .bind(sha256)
            .bind(now)
            .fetch_optional(pool)
            .await)?;
        Ok(m)
    }

    /// Deletes up to `limit` media rows expired at `now` (`expires_at <= now`), earliest
    /// first, with their network ids (cascade), in one transaction. Returns the distinct
    /// `object_key`s of the deleted rows that no remaining row names, sorted: the blobs the
    /// caller may now delete. Sweepers in several processes take turns (PostgreSQL: an
    /// advisory lock; SQLite: `BEGIN IMMEDIATE`), so a blob whose last rows two sweepers
    /// delete at once is still reported.
    pub async fn delete_expired_media(&self, now: i64, limit: i64) -> Result<Vec<String>> {
        if limit <= 0 {
            return Ok(Vec::new());
        }
        const STILL_NAMED: &str = "SELECT 1 FROM media WHERE object_key = $1 LIMIT 1";
        let orphans = match &self.pool {
            Pool::Sqlite(pool) => {
                let mut tx = pool.begin_write().await?;
                let gone: BTreeSet<String> = sqlx::query_scalar::<_, String>(DELETE_EXPIRED)
                    .bind(now)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .collect();
                let mut orphans = Vec::with_capacity(gone.len());
                for key in gone {
                    let named = sqlx::query_scalar::<_, i32>(STILL_NAMED)
                        .bind(&key)
                        .fetch_optional(&mut *tx)
                        .await?;
                    if named.is_none() {
                        orphans.push(key);
                    }
                }
                tx.commit().await?;
                orphans
            }
            Pool::Postgres(pool) => {
                let mut tx = pool.begin_write().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(SWEEP_LOCK)
                    .execute(&mut *tx)
                    .await?;
                let gone: BTreeSet<String> = sqlx::query_scalar::<_, String>(DELETE_EXPIRED)
                    .bind(now)
                    .bind(limit)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .collect();
                let keys: Vec<&str> = gone.iter().map(String::as_str).collect();
                let named: BTreeSet<String> = sqlx::query_scalar::<_, String>(
                    "SELECT DISTINCT object_key FROM media WHERE object_key = ANY($1)",
                )
                .bind(&keys)
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .collect();
                tx.commit().await?;
                gone.into_iter().filter(|k| !named.contains(k)).collect()
            }
        };
        Ok(orphans)
    }

    /// The network's id of media `media_id` for number `phone_number_id`, if the network
    /// still keeps it at `now` (`expires_at > now`).
    pub async fn network_media_id(
        &self,
        media_id: Uuid,
        phone_number_id: &str,
        now: i64,
    ) -> Result<Option<String>> {
        let id = with_pool!(self, pool => sqlx::query_scalar::<_, String>(
                "SELECT network_media_id FROM media_network \
                 WHERE media_id = $1 AND phone_number_id = $2 AND expires_at > $3")
            .bind(media_id)
            .bind(phone_number_id)
            .bind(now)
            .fetch_optional(pool)
            .await)?;
        Ok(id)
    }

    /// Records (or replaces) the network's id of media `media_id` for number
    /// `phone_number_id`, valid until `expires_at`. `NotFound` when the media row is gone
    /// (it expired and was swept while it was being uploaded).
    pub async fn save_network_media_id(
        &self,
        media_id: Uuid,
        phone_number_id: &str,
        network_media_id: &str,
        expires_at: i64,
    ) -> Result<()> {
        own_tx!(self, tx => tx.save_network_media_id(media_id, phone_number_id, network_media_id, expires_at))
    }

    /// Forgets the network's id of media `media_id` for number `phone_number_id` (the
    /// network refused it as unknown or expired). Nothing to forget is not an error.
    pub async fn forget_network_media_id(
        &self,
        media_id: Uuid,
        phone_number_id: &str,
    ) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => sqlx::query(
                "DELETE FROM media_network WHERE media_id = $1 AND phone_number_id = $2")
            .bind(media_id)
            .bind(phone_number_id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Takes one of the organisation's import slots `0..slots` for `holder` until
    /// `lease_until`: the lowest slot that is free (never taken, released, or whose lease
    /// ended: `lease_until <= now`). `None` when every slot is held. Each attempt is one
    /// upsert that takes the slot only if it is free, so concurrent claimers in any number of
    /// processes never share a slot: at most `slots` imports of an organisation run at once.
    /// An import longer than its lease may be joined by another one; choose the lease
    /// accordingly.
    pub async fn claim_import_slot(
        &self,
        org_id: Uuid,
        slots: i64,
        holder: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<Option<i64>> {
        const SQL: &str = "INSERT INTO media_import_slots (org_id, slot, holder, lease_until) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (org_id, slot) DO UPDATE SET \
               holder = excluded.holder, lease_until = excluded.lease_until \
             WHERE media_import_slots.lease_until <= $5 \
             RETURNING slot";
        for slot in 0..slots {
            let taken = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(SQL)
                .bind(org_id)
                .bind(slot)
                .bind(holder)
                .bind(lease_until)
                .bind(now)
                .fetch_optional(pool)
                .await)?;
            if taken.is_some() {
                return Ok(taken);
            }
        }
        Ok(None)
    }

    /// Gives back a slot taken by [`Db::claim_import_slot`]; it is claimable at once. Only
    /// `holder`'s: a holder whose lease ended and whose slot was taken by another import
    /// releases nothing.
    pub async fn release_import_slot(&self, org_id: Uuid, slot: i64, holder: &str) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => sqlx::query(
                "DELETE FROM media_import_slots WHERE org_id = $1 AND slot = $2 AND holder = $3")
            .bind(org_id)
            .bind(slot)
            .bind(holder)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Queues the download of a customer's media, due at `now`. `true` if queued now;
    /// `false` (nothing changed) when the message's media is queued or was handled already
    /// (the network delivered the message twice). Enqueue once the message is stored:
    /// [`Db::finish_inbound_media`] gives the media to the message only if it is there.
    pub async fn enqueue_inbound_media(&self, job: &NewInboundMedia, now: i64) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "INSERT INTO inbound_media (org_id, wamid, phone_number_id, network_media_id, \
                 mime_type, sha256, filename, created_at, next_attempt_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) \
                 ON CONFLICT (org_id, wamid) DO NOTHING")
            .bind(job.org_id)
            .bind(&job.wamid)
            .bind(&job.phone_number_id)
            .bind(&job.network_media_id)
            .bind(&job.mime_type)
            .bind(&job.sha256)
            .bind(&job.filename)
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Claims up to `limit` due download jobs for `owner`, earliest due first: `attempts +
    /// 1`, leased until `now + lease_ms` (and due again then, should the worker die). Safe
    /// with any number of workers and processes: a job is never claimed by two at once
    /// (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: `BEGIN IMMEDIATE`).
    pub async fn claim_inbound_media(
        &self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        limit: i64,
    ) -> Result<Vec<InboundMediaJob>> {
        if limit <= 0 {
            return Ok(Vec::new());
        }
        let sql = match self.backend() {
            Backend::Sqlite => claim_sql!(),
            Backend::Postgres => claim_sql!("FOR UPDATE SKIP LOCKED"),
        };
        let lease_end = now.saturating_add(lease_ms.max(0));
        let mut jobs = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let jobs = sqlx::query_as::<_, InboundMediaJob>(sql)
                .bind(limit)
                .bind(now)
                .bind(owner)
                .bind(lease_end)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            jobs
        });
        // RETURNING does not keep the sub-select's order.
        jobs.sort_by(|a, b| {
            (a.created_at, a.org_id, &a.wamid).cmp(&(b.created_at, b.org_id, &b.wamid))
        });
        Ok(jobs)
    }

    /// The download of `wamid`'s media succeeded and became media `media_id`: the job is
    /// done, and the inbound message (if stored, and not deleted by the customer) gets
    /// `media_id`, in one transaction. `false` (nothing written) when `owner` no longer holds
    /// the job (its lease ended and another worker claimed it) or the job is closed.
    pub async fn finish_inbound_media(
        &self,
        org_id: Uuid,
        wamid: &str,
        owner: &str,
        media_id: Uuid,
        now: i64,
    ) -> Result<bool> {
        const MESSAGE: &str = concat!(
            "UPDATE messages SET media_id = $3, updated_at = ",
            bump_updated_at!("messages", "$4"),
            " WHERE org_id = $1 AND wamid = $2 AND direction = 'inbound' AND revoked_at IS NULL \
               AND (media_id IS NULL OR media_id <> $3)"
        );
        let done = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let n = sqlx::query(
                    "UPDATE inbound_media SET done_at = $5, media_id = $4, locked_until = NULL, \
                     lease_owner = NULL \
                     WHERE org_id = $1 AND wamid = $2 AND lease_owner = $3 \
                       AND done_at IS NULL AND failed_at IS NULL")
                .bind(org_id)
                .bind(wamid)
                .bind(owner)
                .bind(media_id)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if n == 1 {
                sqlx::query(MESSAGE)
                    .bind(org_id)
                    .bind(wamid)
                    .bind(media_id)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            n == 1
        });
        Ok(done)
    }

    /// The download failed but may work later: the job is due again at `next_attempt_at`,
    /// keeping `error` in `last_error`. `false` (nothing written) when `owner` no longer
    /// holds the job or it is closed.
    pub async fn retry_inbound_media(
        &self,
        org_id: Uuid,
        wamid: &str,
        owner: &str,
        next_attempt_at: i64,
        error: &str,
    ) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE inbound_media SET next_attempt_at = $4, last_error = $5, \
                 locked_until = NULL, lease_owner = NULL \
                 WHERE org_id = $1 AND wamid = $2 AND lease_owner = $3 \
                   AND done_at IS NULL AND failed_at IS NULL")
            .bind(org_id)
            .bind(wamid)
            .bind(owner)
            .bind(next_attempt_at)
            .bind(error)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// The download failed for good (the network no longer has the media, or attempts ran
    /// out): the job is closed at `now` with `error`. `false` (nothing written) when `owner`
    /// no longer holds the job or it is closed.
    pub async fn fail_inbound_media(
        &self,
        org_id: Uuid,
        wamid: &str,
        owner: &str,
        error: &str,
        now: i64,
    ) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE inbound_media SET failed_at = $5, last_error = $4, \
                 locked_until = NULL, lease_owner = NULL \
                 WHERE org_id = $1 AND wamid = $2 AND lease_owner = $3 \
                   AND done_at IS NULL AND failed_at IS NULL")
            .bind(org_id)
            .bind(wamid)
            .bind(owner)
            .bind(error)
            .bind(now)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// When the next download job is due (possibly in the past), or `None` when none is open:
    /// how long a worker may sleep. A leased job counts at the end of its lease.
    pub async fn next_inbound_media_due(&self) -> Result<Option<i64>> {
        let due = with_pool!(self, pool => sqlx::query_scalar::<_, Option<i64>>(
                "SELECT MIN(next_attempt_at) FROM inbound_media \
                 WHERE done_at IS NULL AND failed_at IS NULL")
            .fetch_one(pool)
            .await)?;
        Ok(due)
    }

    /// The queue columns of the download job of the organisation's message `wamid`.
    pub async fn get_inbound_media(
        &self,
        org_id: Uuid,
        wamid: &str,
    ) -> Result<Option<InboundMediaState>> {
        let state = with_pool!(self, pool => sqlx::query_as::<_, InboundMediaState>(
                "SELECT attempts, next_attempt_at, locked_until, lease_owner, last_error, \
                 media_id, done_at, failed_at FROM inbound_media WHERE org_id = $1 AND wamid = $2")
            .bind(org_id)
            .bind(wamid)
            .fetch_optional(pool)
            .await)?;
        Ok(state)
    }

    /// Deletes download jobs closed (done or failed) before `older_than`; returns how many.
    /// Open jobs stay whatever their age.
    pub async fn prune_inbound_media(&self, older_than: i64) -> Result<u64> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "DELETE FROM inbound_media WHERE done_at < $1 OR failed_at < $1")
            .bind(older_than)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }
}

impl Tx {
    /// [`Db::save_network_media_id`] in this transaction (the upload's timeline entry joins
    /// it).
    pub async fn save_network_media_id(
        &mut self,
        media_id: Uuid,
        phone_number_id: &str,
        network_media_id: &str,
        expires_at: i64,
    ) -> Result<()> {
        // `WHERE EXISTS` rather than the foreign key's error, which differs per backend.
        let n = with_tx!(self, conn => sqlx::query(
                "INSERT INTO media_network (media_id, phone_number_id, network_media_id, expires_at) \
                 SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM media WHERE id = $1) \
                 ON CONFLICT (media_id, phone_number_id) DO UPDATE SET \
                   network_media_id = excluded.network_media_id, expires_at = excluded.expires_at")
            .bind(media_id)
            .bind(phone_number_id)
            .bind(network_media_id)
            .bind(expires_at)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        if n == 0 {
            return Err(StoreError::NotFound);
        }
        Ok(())
    }
}
