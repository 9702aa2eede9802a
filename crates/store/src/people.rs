//! People (the app's accounts), their one-time links and recovery codes. Sessions are in
//! `app_sessions.rs`, memberships seen from a person in `memberships.rs`.
//!
//! A person is keyed by a lower-cased email, unique across the installation; their
//! memberships are the `members` rows with that email. Every write that must happen once (a
//! link used, a recovery code used, a TOTP step accepted) is a single conditional statement.

use tern_domain::people::LinkPurpose;
use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::Result;
use crate::sql::{bump_updated_at, lock_for_write};

/// A person. Secrets stay sealed or hashed here; [`std::fmt::Debug`] leaves them out.
#[derive(Clone, PartialEq, sqlx::FromRow)]
pub struct Person {
    pub id: Uuid,
    /// Lower-cased.
    pub email: String,
    pub name: String,
    /// argon2id PHC string; `None` until set through an invite or reset link.
    pub password_hash: Option<String>,
    /// The TOTP secret sealed with the master key; `Some` when two-factor is on.
    pub totp_secret_enc: Option<Vec<u8>>,
    /// An enrolment's secret until its first code confirms it.
    pub totp_pending_enc: Option<Vec<u8>>,
    pub totp_enabled_at: Option<i64>,
    /// The last accepted TOTP step: only a later one is accepted (no replay).
    pub totp_last_step: Option<i64>,
    /// Sign-in failures since `first_failure_at` (the lock-out window).
    pub failures: i64,
    pub first_failure_at: Option<i64>,
    pub locked_until: Option<i64>,
    /// How many times the account was locked since its last successful sign-in.
    pub lockouts: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Person {
    pub fn has_password(&self) -> bool {
        self.password_hash.is_some()
    }

    pub fn has_two_factor(&self) -> bool {
        self.totp_secret_enc.is_some()
    }
}

impl std::fmt::Debug for Person {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Person")
            .field("id", &self.id)
            .field("email", &self.email)
            .field("name", &self.name)
            .field("has_password", &self.has_password())
            .field("two_factor", &self.has_two_factor())
            .field("enrolling", &self.totp_pending_enc.is_some())
            .field("failures", &self.failures)
            .field("locked_until", &self.locked_until)
            .field("lockouts", &self.lockouts)
            .finish_non_exhaustive()
    }
}

/// A one-time link (its token is never stored, only its hash).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct PersonLink {
    pub token_hash: Vec<u8>,
    pub person_id: Uuid,
    #[sqlx(try_from = "String")]
    pub purpose: LinkPurpose,
    /// The organisation that invited (invites only).
    pub org_id: Option<Uuid>,
    pub created_at: i64,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

/// The sign-in throttle's state of a person, written back as a whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Failures {
    pub failures: i64,
    pub first_failure_at: Option<i64>,
    pub locked_until: Option<i64>,
    pub lockouts: i64,
}

macro_rules! person_columns {
    () => {
        "id, email, name, password_hash, totp_secret_enc, totp_pending_enc, totp_enabled_at, \
         totp_last_step, failures, first_failure_at, locked_until, lockouts, created_at, updated_at"
    };
}

macro_rules! link_columns {
    () => {
        "token_hash, person_id, purpose, org_id, created_at, expires_at, used_at"
    };
}

/// Creates the person of `$1` (email) unless one exists: `$2` id, `$3` now.
const INSERT_PERSON_IF_ABSENT: &str = "INSERT INTO people (id, email, created_at, updated_at) \
     VALUES ($2, $1, $3, $3) ON CONFLICT (email) DO NOTHING";

impl Tx {
    /// [`Db::ensure_person`] inside a transaction.
    pub async fn ensure_person(&mut self, email: &str, at: i64) -> Result<Person> {
        let email = email.trim().to_lowercase();
        with_tx!(self, conn => {
            sqlx::query(INSERT_PERSON_IF_ABSENT)
                .bind(&email)
                .bind(Uuid::now_v7())
                .bind(at)
                .execute(&mut **conn)
                .await?;
            let person = sqlx::query_as::<_, Person>(concat!(
                    "SELECT ", person_columns!(), " FROM people WHERE email = $1"))
                .bind(&email)
                .fetch_one(&mut **conn)
                .await?;
            Ok(person)
        })
    }

    /// The person, locked until the transaction ends (read-then-write of the throttle).
    pub async fn lock_person(&mut self, id: Uuid) -> Result<Option<Person>> {
        let sql = lock_for_write!(
            self,
            "SELECT ",
            person_columns!(),
            " FROM people WHERE id = $1"
        );
        let person = with_tx!(self, conn => sqlx::query_as::<_, Person>(sql)
            .bind(id)
            .fetch_optional(&mut **conn)
            .await)?;
        Ok(person)
    }

    /// Writes the sign-in throttle's state.
    pub async fn set_failures(&mut self, id: Uuid, f: Failures, at: i64) -> Result<()> {
        with_tx!(self, conn => sqlx::query(concat!(
                "UPDATE people SET failures = $2, first_failure_at = $3, locked_until = $4, \
                 lockouts = $5, updated_at = ", bump_updated_at!("people", "$6"), " WHERE id = $1"))
            .bind(id)
            .bind(f.failures)
            .bind(f.first_failure_at)
            .bind(f.locked_until)
            .bind(f.lockouts)
            .bind(at)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Uses a link: marks it used if it is unused and unexpired at `at`, and returns it.
    /// `None` when it is unknown, used or expired. Of two concurrent uses one gets it.
    pub async fn use_link(&mut self, token_hash: &[u8], at: i64) -> Result<Option<PersonLink>> {
        let link = with_tx!(self, conn => sqlx::query_as::<_, PersonLink>(concat!(
                "UPDATE person_links SET used_at = $2 \
                 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 \
                 RETURNING ", link_columns!()))
            .bind(token_hash)
            .bind(at)
            .fetch_optional(&mut **conn)
            .await)?;
        Ok(link)
    }

    /// Sets the name (when given) and the password hash, and clears the throttle (a person
    /// who proved they hold the link may sign in at once).
    pub async fn set_password(
        &mut self,
        id: Uuid,
        name: Option<&str>,
        password_hash: &str,
        at: i64,
    ) -> Result<()> {
        with_tx!(self, conn => sqlx::query(concat!(
                "UPDATE people SET name = COALESCE($2, name), password_hash = $3, failures = 0, \
                 first_failure_at = NULL, locked_until = NULL, lockouts = 0, updated_at = ",
                 bump_updated_at!("people", "$4"), " WHERE id = $1"))
            .bind(id)
            .bind(name)
            .bind(password_hash)
            .bind(at)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Turns two-factor off: secret, pending secret, last step and recovery codes cleared.
    pub async fn clear_two_factor(&mut self, id: Uuid, at: i64) -> Result<()> {
        with_tx!(self, conn => {
            sqlx::query(concat!(
                    "UPDATE people SET totp_secret_enc = NULL, totp_pending_enc = NULL, \
                     totp_enabled_at = NULL, totp_last_step = NULL, updated_at = ",
                     bump_updated_at!("people", "$2"), " WHERE id = $1"))
                .bind(id)
                .bind(at)
                .execute(&mut **conn)
                .await?;
            sqlx::query("DELETE FROM recovery_codes WHERE person_id = $1")
                .bind(id)
                .execute(&mut **conn)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    /// Issues a link, voiding the person's earlier unused links (of every purpose: only the
    /// newest link a person was given works).
    pub async fn insert_link(&mut self, link: &PersonLink) -> Result<()> {
        with_tx!(self, conn => {
            sqlx::query("DELETE FROM person_links WHERE person_id = $1 AND used_at IS NULL")
                .bind(link.person_id)
                .execute(&mut **conn)
                .await?;
            sqlx::query(concat!("INSERT INTO person_links (", link_columns!(), ") \
                     VALUES ($1, $2, $3, $4, $5, $6, $7)"))
                .bind(&link.token_hash)
                .bind(link.person_id)
                .bind(link.purpose.as_str())
                .bind(link.org_id)
                .bind(link.created_at)
                .bind(link.expires_at)
                .bind(link.used_at)
                .execute(&mut **conn)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(())
    }
}

impl Db {
    /// The person with `email` (any case), created without a password if missing.
    pub async fn ensure_person(&self, email: &str, at: i64) -> Result<Person> {
        let mut tx = self.begin().await?;
        let person = tx.ensure_person(email, at).await?;
        tx.commit().await?;
        Ok(person)
    }

    pub async fn get_person(&self, id: Uuid) -> Result<Option<Person>> {
        let p = with_pool!(self, pool => sqlx::query_as::<_, Person>(concat!(
                "SELECT ", person_columns!(), " FROM people WHERE id = $1"))
            .bind(id)
            .fetch_optional(pool)
            .await)?;
        Ok(p)
    }

    /// The person with `email`, compared case-insensitively.
    pub async fn find_person_by_email(&self, email: &str) -> Result<Option<Person>> {
        let p = with_pool!(self, pool => sqlx::query_as::<_, Person>(concat!(
                "SELECT ", person_columns!(), " FROM people WHERE email = $1"))
            .bind(email.trim().to_lowercase())
            .fetch_optional(pool)
            .await)?;
        Ok(p)
    }

    /// Sets the display name.
    pub async fn set_person_name(&self, id: Uuid, name: &str, at: i64) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => sqlx::query(concat!(
                "UPDATE people SET name = $2, updated_at = ", bump_updated_at!("people", "$3"),
                " WHERE id = $1"))
            .bind(id)
            .bind(name)
            .bind(at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Issues a link (see [`Tx::insert_link`]).
    pub async fn insert_link(&self, link: &PersonLink) -> Result<()> {
        let mut tx = self.begin().await?;
        tx.insert_link(link).await?;
        tx.commit().await
    }

    /// A link that is unused and unexpired at `at`.
    pub async fn find_valid_link(&self, token_hash: &[u8], at: i64) -> Result<Option<PersonLink>> {
        let l = with_pool!(self, pool => sqlx::query_as::<_, PersonLink>(concat!(
                "SELECT ", link_columns!(), " FROM person_links \
                 WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2"))
            .bind(token_hash)
            .bind(at)
            .fetch_optional(pool)
            .await)?;
        Ok(l)
    }

    /// Stores an enrolment's sealed secret (replacing an unfinished one).
    pub async fn set_totp_pending(&self, id: Uuid, sealed: &[u8], at: i64) -> Result<()> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        with_pool!(self, pool => sqlx::query(concat!(
                "UPDATE people SET totp_pending_enc = $2, updated_at = ",
                bump_updated_at!("people", "$3"), " WHERE id = $1"))
            .bind(id)
            .bind(sealed)
            .bind(at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Completes an enrolment: the pending secret `pending` (as read) becomes the secret,
    /// `step` the last accepted step, and `code_hashes` replace the recovery codes, in one
    /// transaction. `false` (nothing written) when the pending secret changed meanwhile.
    pub async fn enable_two_factor(
        &self,
        id: Uuid,
        pending: &[u8],
        step: i64,
        code_hashes: &[Vec<u8>],
        at: i64,
    ) -> Result<bool> {
        let mut tx = self.begin().await?;
        let done = with_tx!(tx, conn => {
            let done = sqlx::query(concat!(
                    "UPDATE people SET totp_secret_enc = totp_pending_enc, totp_pending_enc = NULL, \
                     totp_enabled_at = $3, totp_last_step = $4, updated_at = ",
                     bump_updated_at!("people", "$3"),
                     " WHERE id = $1 AND totp_pending_enc = $2"))
                .bind(id)
                .bind(pending)
                .bind(at)
                .bind(step)
                .execute(&mut **conn)
                .await?
                .rows_affected();
            if done == 1 {
                sqlx::query("DELETE FROM recovery_codes WHERE person_id = $1")
                    .bind(id)
                    .execute(&mut **conn)
                    .await?;
                for hash in code_hashes {
                    sqlx::query("INSERT INTO recovery_codes (person_id, code_hash) VALUES ($1, $2)")
                        .bind(id)
                        .bind(hash)
                        .execute(&mut **conn)
                        .await?;
                }
            }
            Ok::<_, crate::StoreError>(done == 1)
        })?;
        if done {
            tx.commit().await?;
        }
        Ok(done)
    }

    /// Turns two-factor off (see [`Tx::clear_two_factor`]).
    pub async fn disable_two_factor(&self, id: Uuid, at: i64) -> Result<()> {
        let mut tx = self.begin().await?;
        tx.clear_two_factor(id, at).await?;
        tx.commit().await
    }

    /// Records that TOTP step `step` was accepted, if it is later than the last one.
    /// `false` when it is not: the code was already used (here or by a concurrent request).
    pub async fn accept_totp_step(&self, id: Uuid, step: i64) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE people SET totp_last_step = $2 \
                 WHERE id = $1 AND totp_secret_enc IS NOT NULL \
                   AND (totp_last_step IS NULL OR totp_last_step < $2)")
            .bind(id)
            .bind(step)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Uses a recovery code once: `false` when it is unknown or already used.
    pub async fn use_recovery_code(
        &self,
        person_id: Uuid,
        code_hash: &[u8],
        at: i64,
    ) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(
                "UPDATE recovery_codes SET used_at = $3 \
                 WHERE person_id = $1 AND code_hash = $2 AND used_at IS NULL")
            .bind(person_id)
            .bind(code_hash)
            .bind(at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// How many unused recovery codes the person has left.
    pub async fn count_recovery_codes(&self, person_id: Uuid) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM recovery_codes WHERE person_id = $1 AND used_at IS NULL")
            .bind(person_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }
}
