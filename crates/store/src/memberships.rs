//! Memberships seen from people: a person's organisations, an organisation's members with
//! their people, role changes and removals that keep an owner.
//!
//! A removed member keeps its row with `removed_at` set: the API keys it created reference
//! it (and keep their history), so deleting it would break them. Removal revokes those keys
//! in the same transaction (and so disables their webhook subscriptions, as any revocation
//! does), and the key lookup gives a removed member's key no role, so it is refused even if
//! one slipped through. Adding the same email again revives the row with the new role; the
//! old keys stay revoked.

use tern_domain::auth::Role;
use tern_domain::events::subscription::DisabledReason;
use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::Result;
use crate::orgs::Member;
use crate::sql::{bump_updated_at, lock_for_write};

/// A person's membership with its organisation's name and two-factor setting.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Membership {
    #[sqlx(flatten)]
    pub member: Member,
    pub org_name: String,
    pub two_factor_required: bool,
}

/// A member of an organisation with what the members page shows of their person.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct MemberPerson {
    #[sqlx(flatten)]
    pub member: Member,
    pub person_id: Option<Uuid>,
    pub person_name: Option<String>,
    pub has_password: bool,
    pub two_factor: bool,
}

impl Tx {
    /// The ids of the organisation's current owners, locked until the transaction ends:
    /// two concurrent demotions cannot both see another owner left.
    pub async fn lock_owners(&mut self, org_id: Uuid) -> Result<Vec<Uuid>> {
        let sql = lock_for_write!(
            self,
            "SELECT id FROM members WHERE org_id = $1 AND role = 'owner' AND removed_at IS NULL"
        );
        let ids = with_tx!(self, conn => sqlx::query_scalar::<_, Uuid>(sql)
            .bind(org_id)
            .fetch_all(&mut **conn)
            .await)?;
        Ok(ids)
    }

    /// A current member of the organisation, locked until the transaction ends.
    pub async fn lock_member(&mut self, org_id: Uuid, member_id: Uuid) -> Result<Option<Member>> {
        let sql = lock_for_write!(
            self,
            "SELECT id, org_id, email, role, created_at FROM members \
             WHERE id = $1 AND org_id = $2 AND removed_at IS NULL"
        );
        let m = with_tx!(self, conn => sqlx::query_as::<_, Member>(sql)
            .bind(member_id)
            .bind(org_id)
            .fetch_optional(&mut **conn)
            .await)?;
        Ok(m)
    }

    pub async fn set_member_role(&mut self, member_id: Uuid, role: Role) -> Result<()> {
        with_tx!(self, conn => sqlx::query(
                "UPDATE members SET role = $2 WHERE id = $1 AND removed_at IS NULL")
            .bind(member_id)
            .bind(role.as_str())
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// Marks the member removed at `at`, revokes its keys and disables their subscriptions.
    pub async fn remove_member(&mut self, member_id: Uuid, at: i64) -> Result<()> {
        with_tx!(self, conn => {
            sqlx::query("UPDATE members SET removed_at = $2 WHERE id = $1 AND removed_at IS NULL")
                .bind(member_id)
                .bind(at)
                .execute(&mut **conn)
                .await?;
            sqlx::query(concat!(
                    "UPDATE webhook_subscriptions SET enabled = FALSE, disabled_reason = $2, \
                     updated_at = ", bump_updated_at!("webhook_subscriptions", "$3"),
                    " WHERE enabled AND api_key_id IN \
                       (SELECT id FROM api_keys WHERE member_id = $1 AND revoked_at IS NULL)"))
                .bind(member_id)
                .bind(DisabledReason::KeyRevoked.as_str())
                .bind(at)
                .execute(&mut **conn)
                .await?;
            sqlx::query("UPDATE api_keys SET revoked_at = $2 WHERE member_id = $1 AND revoked_at IS NULL")
                .bind(member_id)
                .bind(at)
                .execute(&mut **conn)
                .await
                .map(|r| r.rows_affected())
        })?;
        Ok(())
    }

    /// How many organisations the person of `email` still belongs to.
    pub async fn count_memberships(&mut self, email: &str) -> Result<i64> {
        let n = with_tx!(self, conn => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM members WHERE email = $1 AND removed_at IS NULL")
            .bind(email.trim().to_lowercase())
            .fetch_one(&mut **conn)
            .await)?;
        Ok(n)
    }
}

impl Db {
    /// Makes a removed member of `org_id` with `email` a member again with `role` (its row
    /// and id are kept; its old keys stay revoked). `None` when there is no removed member
    /// with that email.
    pub async fn revive_member(
        &self,
        org_id: Uuid,
        email: &str,
        role: Role,
        at: i64,
    ) -> Result<Option<Member>> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let m = with_pool!(self, pool => sqlx::query_as::<_, Member>(
                "UPDATE members SET removed_at = NULL, role = $3, created_at = $4 \
                 WHERE org_id = $1 AND email = $2 AND removed_at IS NOT NULL \
                 RETURNING id, org_id, email, role, created_at")
            .bind(org_id)
            .bind(email.trim().to_lowercase())
            .bind(role.as_str())
            .bind(at)
            .fetch_optional(pool)
            .await)?;
        Ok(m)
    }

    /// The current memberships of the person with `email`, by organisation name.
    pub async fn memberships_of(&self, email: &str) -> Result<Vec<Membership>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, Membership>(
                "SELECT m.id, m.org_id, m.email, m.role, m.created_at, o.name AS org_name, \
                        o.two_factor_required \
                 FROM members m JOIN organisations o ON o.id = m.org_id \
                 WHERE m.email = $1 AND m.removed_at IS NULL \
                 ORDER BY o.name, m.org_id")
            .bind(email.trim().to_lowercase())
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// The organisation's current members with their people, oldest first.
    pub async fn members_with_people(&self, org_id: Uuid) -> Result<Vec<MemberPerson>> {
        let rows = with_pool!(self, pool => sqlx::query_as::<_, MemberPerson>(
                "SELECT m.id, m.org_id, m.email, m.role, m.created_at, p.id AS person_id, \
                        p.name AS person_name, \
                        COALESCE(p.password_hash IS NOT NULL, FALSE) AS has_password, \
                        COALESCE(p.totp_secret_enc IS NOT NULL, FALSE) AS two_factor \
                 FROM members m LEFT JOIN people p ON p.email = m.email \
                 WHERE m.org_id = $1 AND m.removed_at IS NULL \
                 ORDER BY m.created_at, m.id")
            .bind(org_id)
            .fetch_all(pool)
            .await)?;
        Ok(rows)
    }

    /// The organisation's "members must use two-factor" setting.
    pub async fn set_two_factor_required(
        &self,
        org_id: Uuid,
        required: bool,
        at: i64,
    ) -> Result<bool> {
        // SQLite: in this process's write turn, not SQLite's busy handler.
        let _turn = self.write_turn().await?;
        let n = with_pool!(self, pool => sqlx::query(concat!(
                "UPDATE organisations SET two_factor_required = $2, updated_at = ",
                bump_updated_at!("organisations", "$3"), " WHERE id = $1"))
            .bind(org_id)
            .bind(required)
            .bind(at)
            .execute(pool)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }
}
