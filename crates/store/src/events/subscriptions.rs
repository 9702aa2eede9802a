//! A key's subscription changed inside a transaction (so its audit entry commits with it),
//! and the organisation-wide reads of the app (every key's subscriptions, with the key).

use sqlx::types::Json;
use uuid::Uuid;

use super::{Subscription, SubscriptionPatch};
use crate::api_keys::KeySummary;
use crate::db::{Db, Tx, own_tx, with_pool, with_tx};
use crate::error::Result;
use crate::sql::bump_updated_at;

impl Tx {
    /// Applies `patch` to the key's subscription at `now`; `None` when it is not the key's.
    /// Enabling clears `disabled_reason`.
    pub async fn update_webhook_subscription(
        &mut self,
        org_id: Uuid,
        api_key_id: Uuid,
        id: Uuid,
        patch: &SubscriptionPatch,
        now: i64,
    ) -> Result<Option<Subscription>> {
        const SQL: &str = concat!(
            "UPDATE webhook_subscriptions SET url = COALESCE($4, url), \
             event_types = COALESCE($5, event_types), enabled = COALESCE($6, enabled), \
             disabled_reason = CASE WHEN $6 THEN NULL ELSE disabled_reason END, \
             description = CASE WHEN $7 THEN $8 ELSE description END, updated_at = ",
            bump_updated_at!("webhook_subscriptions", "$9"),
            " WHERE id = $1 AND org_id = $2 AND api_key_id = $3 AND kind = 'webhook' RETURNING ",
            subscription_columns!()
        );
        let row = with_tx!(self, conn => sqlx::query_as::<_, Subscription>(SQL)
            .bind(id)
            .bind(org_id)
            .bind(api_key_id)
            .bind(&patch.url)
            .bind(patch.event_types.as_ref().map(Json))
            .bind(patch.enabled)
            .bind(patch.description.is_some())
            .bind(patch.description.clone().flatten())
            .bind(now)
            .fetch_optional(&mut **conn)
            .await)?;
        Ok(row)
    }

    /// Deletes the key's subscription with its deliveries and attempts (cascade). `false`
    /// when it is not the key's.
    pub async fn delete_webhook_subscription(
        &mut self,
        org_id: Uuid,
        api_key_id: Uuid,
        id: Uuid,
    ) -> Result<bool> {
        let n = with_tx!(self, conn => sqlx::query(
                "DELETE FROM webhook_subscriptions WHERE id = $1 AND org_id = $2 AND api_key_id = $3 \
                 AND kind = 'webhook'")
            .bind(id)
            .bind(org_id)
            .bind(api_key_id)
            .execute(&mut **conn)
            .await
            .map(|r| r.rows_affected()))?;
        Ok(n == 1)
    }

    /// Rotates the key's subscription's secret: the current one becomes the previous one,
    /// which still signs until `previous_expires_at`. `None` when it is not the key's.
    pub async fn rotate_webhook_secret(
        &mut self,
        org_id: Uuid,
        api_key_id: Uuid,
        id: Uuid,
        new_secret_enc: &[u8],
        previous_expires_at: i64,
        now: i64,
    ) -> Result<Option<Subscription>> {
        const SQL: &str = concat!(
            "UPDATE webhook_subscriptions SET previous_secret_enc = secret_enc, \
             previous_secret_expires_at = $5, secret_enc = $4, updated_at = ",
            bump_updated_at!("webhook_subscriptions", "$6"),
            " WHERE id = $1 AND org_id = $2 AND api_key_id = $3 AND kind = 'webhook' RETURNING ",
            subscription_columns!()
        );
        let row = with_tx!(self, conn => sqlx::query_as::<_, Subscription>(SQL)
            .bind(id)
            .bind(org_id)
            .bind(api_key_id)
            .bind(new_secret_enc)
            .bind(previous_expires_at)
            .bind(now)
            .fetch_optional(&mut **conn)
            .await)?;
        Ok(row)
    }
}

/// A subscription row joined with a summary of its key (`k_` columns).
#[derive(sqlx::FromRow)]
struct WithKeyRow {
    #[sqlx(flatten)]
    subscription: Subscription,
    k_id: Uuid,
    k_name: String,
    k_prefix: String,
    k_member_id: Uuid,
    k_revoked_at: Option<i64>,
}

impl From<WithKeyRow> for (Subscription, KeySummary) {
    fn from(r: WithKeyRow) -> Self {
        let key = KeySummary {
            id: r.k_id,
            name: r.k_name,
            prefix: r.k_prefix,
            member_id: r.k_member_id,
            revoked_at: r.k_revoked_at,
        };
        (r.subscription, key)
    }
}

macro_rules! with_key_select {
    () => {
        "SELECT s.id, s.org_id, s.api_key_id, s.url, s.event_types, s.secret_enc, \
         s.previous_secret_enc, s.previous_secret_expires_at, s.enabled, s.description, \
         s.disabled_reason, s.created_at, s.updated_at, k.id AS k_id, k.name AS k_name, \
         k.prefix AS k_prefix, k.member_id AS k_member_id, k.revoked_at AS k_revoked_at \
         FROM webhook_subscriptions s JOIN api_keys k ON k.id = s.api_key_id"
    };
}

impl Db {
    /// [`Tx::update_webhook_subscription`] in a transaction of its own.
    pub async fn update_webhook_subscription(
        &self,
        org_id: Uuid,
        api_key_id: Uuid,
        id: Uuid,
        patch: &SubscriptionPatch,
        now: i64,
    ) -> Result<Option<Subscription>> {
        own_tx!(self, tx => tx.update_webhook_subscription(org_id, api_key_id, id, patch, now))
    }

    /// [`Tx::delete_webhook_subscription`] in a transaction of its own.
    pub async fn delete_webhook_subscription(
        &self,
        org_id: Uuid,
        api_key_id: Uuid,
        id: Uuid,
    ) -> Result<bool> {
        own_tx!(self, tx => tx.delete_webhook_subscription(org_id, api_key_id, id))
    }

    /// [`Tx::rotate_webhook_secret`] in a transaction of its own.
    pub async fn rotate_webhook_secret(
        &self,
        org_id: Uuid,
        api_key_id: Uuid,
        id: Uuid,
        new_secret_enc: &[u8],
        previous_expires_at: i64,
        now: i64,
    ) -> Result<Option<Subscription>> {
        own_tx!(self, tx => tx.rotate_webhook_secret(
            org_id,
            api_key_id,
            id,
            new_secret_enc,
            previous_expires_at,
            now,
        ))
    }

    /// Every subscription of the organisation with its key, grouped by key (oldest key
    /// first), each key's by creation.
    pub async fn list_org_webhook_subscriptions(
        &self,
        org_id: Uuid,
    ) -> Result<Vec<(Subscription, KeySummary)>> {
        const SQL: &str = concat!(
            with_key_select!(),
            " WHERE s.org_id = $1 AND s.kind = 'webhook' ORDER BY k.created_at, k.id, s.created_at, s.id"
        );
        let rows = with_pool!(self, pool => sqlx::query_as::<_, WithKeyRow>(SQL)
            .bind(org_id)
            .fetch_all(pool)
            .await)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// One subscription of the organisation (whichever key owns it) with its key; another
    /// organisation's is `None`.
    pub async fn get_org_webhook_subscription(
        &self,
        org_id: Uuid,
        id: Uuid,
    ) -> Result<Option<(Subscription, KeySummary)>> {
        const SQL: &str = concat!(
            with_key_select!(),
            " WHERE s.id = $1 AND s.org_id = $2 AND s.kind = 'webhook'"
        );
        let row = with_pool!(self, pool => sqlx::query_as::<_, WithKeyRow>(SQL)
            .bind(id)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(row.map(Into::into))
    }
}
