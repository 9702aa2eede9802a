//! App sessions: a person signed in to the app. The cookie's token is never stored, only
//! its SHA-256; a session ends (never deleted, the sessions page lists it) at sign-out, by
//! "sign out everywhere", when the password changes, and when its time runs out (the core
//! checks the idle and absolute limits on every request).

use tern_domain::people::EndReason;
use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::Result;

/// How often `last_seen_at` is written at most: a busy page does not write on every request.
pub const SEEN_GRANULARITY_MS: i64 = 60_000;

/// A session. `token_hash` is not secret on its own but stays out of [`std::fmt::Debug`].
#[derive(Clone, PartialEq, sqlx::FromRow)]
pub struct AppSession {
    pub id: Uuid,
    pub token_hash: Vec<u8>,
    pub person_id: Uuid,
    /// The organisation the person is looking at.
    pub org_id: Option<Uuid>,
    pub created_at: i64,
    pub last_seen_at: i64,
    /// When the person last confirmed their identity (TOTP code or password).
    pub confirmed_at: Option<i64>,
    pub address: Option<String>,
    pub user_agent: Option<String>,
    pub ended_at: Option<i64>,
    pub end_reason: Option<String>,
}

impl std::fmt::Debug for AppSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppSession")
            .field("id", &self.id)
            .field("person_id", &self.person_id)
            .field("org_id", &self.org_id)
            .field("created_at", &self.created_at)
            .field("last_seen_at", &self.last_seen_at)
            .field("confirmed_at", &self.confirmed_at)
            .field("address", &self.address)
            .field("user_agent", &self.user_agent)
            .field("ended_at", &self.ended_at)
            .field("end_reason", &self.end_reason)
            .finish_non_exhaustive()
    }
}

macro_rules! session_columns {
    () => {
        "id, token_hash, person_id, org_id, created_at, last_seen_at, confirmed_at, address, \
         user_agent, ended_at, end_reason"
    };
}

macro_rules! insert_session {
    ($s:expr) => {{
        let s: &AppSession = $s;
        sqlx::query(concat!(
            "INSERT INTO app_sessions (",
            session_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
        ))
        .bind(s.id)
        .bind(&s.token_hash)
        .bind(s.person_id)
        .bind(s.org_id)
        .bind(s.created_at)
        .bind(s.last_seen_at)
        .bind(s.confirmed_at)
        .bind(&s.address)
        .bind(&s.user_agent)
        .bind(s.ended_at)
        .bind(&s.end_reason)
    }};
}

/// Ends the person `$1`'s open sessions at `$2` for reason `$3`, except the session `$4`
/// (NULL: all of them).
const END_PERSON_SESSIONS: &str = "UPDATE app_sessions SET ended_at = $2, end_reason = $3 \
     WHERE person_id = $1 AND ended_at IS NULL AND ($4 IS NULL OR id <> $4)";

impl Tx {
    /// [`Db::insert_app_session`] inside a transaction (a link used and its session).
    pub async fn insert_app_session(&mut self, s: &AppSession) -> Result<()> {
        with_tx!(self, conn => insert_session!(s).execute(&mut **conn).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// [`Db::end_person_sessions`] inside a transaction.
    pub async fn end_person_sessions(
        &mut self,
        person_id: Uuid,
        except: Option<Uuid>,
        reason: EndReason,
        at: i64,
    ) -> Result<u64> {
        let n = with_tx!(self, conn => sqlx::query(END_PERSON_SESSIONS)
            .bind(person_id)
            .bind(at)
            .bind(reason.as_str())
            .bind(except)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n)
    }
}

impl Db {
    /// Stores a new session. `Conflict { "app_sessions_token_hash_key" }` on a duplicate
    /// token (never, with 256-bit tokens).
    pub async fn insert_app_session(&self, s: &AppSession) -> Result<()> {
        with_pool!(self, pool => insert_session!(s).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// The session of a cookie's token hash, ended or not (the caller checks).
    pub async fn find_app_session(&self, token_hash: &[u8]) -> Result<Option<AppSession>> {
        let s = with_pool!(self, pool => sqlx::query_as::<_, AppSession>(concat!(
                "SELECT ", session_columns!(), " FROM app_sessions WHERE token_hash = $1"))
            .bind(token_hash)
            .fetch_optional(pool)
            .await)?;
        Ok(s)
    }

    pub async fn get_app_session(&self, id: Uuid) -> Result<Option<AppSession>> {
        let s = with_pool!(self, pool => sqlx::query_as::<_, AppSession>(concat!(
                "SELECT ", session_columns!(), " FROM app_sessions WHERE id = $1"))
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(s)
    }

    /// The person's sessions, newest first: the open ones and those ended since `since`.
    pub async fn list_app_sessions(&self, person_id: Uuid, since: i64) -> Result<Vec<AppSession>> {
        let s = with_pool!(self, pool => sqlx::query_as::<_, AppSession>(concat!(
                "SELECT ", session_columns!(), " FROM app_sessions \
                 WHERE person_id = $1 AND (ended_at IS NULL OR ended_at >= $2) \
                 ORDER BY created_at DESC, id DESC"))
            .bind(person_id)
            .bind(since)
            .fetch_all(pool)
            .await)?;
        Ok(s)
    }

    /// Records activity at `at`, at most once per [`SEEN_GRANULARITY_MS`]; `true` if written.
    pub async fn touch_app_session(&self, id: Uuid, at: i64) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE app_sessions SET last_seen_at = $2 \
                 WHERE id = $1 AND ended_at IS NULL AND last_seen_at <= $2 - $3")
            .bind(id)
            .bind(at)
            .bind(SEEN_GRANULARITY_MS)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Ends one open session; `false` when it was already ended (or is unknown).
    pub async fn end_app_session(&self, id: Uuid, reason: EndReason, at: i64) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE app_sessions SET ended_at = $2, end_reason = $3 \
                 WHERE id = $1 AND ended_at IS NULL")
            .bind(id)
            .bind(at)
            .bind(reason.as_str())
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Ends every open session of the person (but `except`); returns how many.
    pub async fn end_person_sessions(
        &self,
        person_id: Uuid,
        except: Option<Uuid>,
        reason: EndReason,
        at: i64,
    ) -> Result<u64> {
        let mut tx = self.begin().await?;
        let n = tx
            .end_person_sessions(person_id, except, reason, at)
            .await?;
        tx.commit().await?;
        Ok(n)
    }

    /// Points an open session at another organisation.
    pub async fn set_app_session_org(&self, id: Uuid, org_id: Uuid) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE app_sessions SET org_id = $2 WHERE id = $1 AND ended_at IS NULL")
            .bind(id)
            .bind(org_id)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Records an identity confirmation at `at` on an open session.
    pub async fn confirm_app_session(&self, id: Uuid, at: i64) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE app_sessions SET confirmed_at = $2 WHERE id = $1 AND ended_at IS NULL")
            .bind(id)
            .bind(at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }
}
