//! Message templates, created in Tern (drafts submitted for review) or synced from the
//! network, with the statuses the network reports.

use serde_json::Value;
use sqlx::types::Json;
use uuid::Uuid;

use crate::db::{Db, Tx, with_pool, with_tx};
use crate::error::{Result, StoreError};
use crate::sql::{lock_for_write, split_after};
use tern_domain::template::{Category, TemplateStatus};

/// A template of one WhatsApp Business Account, per (name, language).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Template {
    pub id: Uuid,
    pub org_id: Uuid,
    pub waba_id: String,
    pub name: String,
    pub language: String,
    #[sqlx(try_from = "String")]
    pub category: Category,
    #[sqlx(try_from = "String")]
    pub status: TemplateStatus,
    /// The network's component format.
    #[sqlx(json)]
    pub components: Value,
    pub rejection_reason: Option<String>,
    /// The network's template id, once submitted or synced.
    pub network_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

macro_rules! template_columns {
    () => {
        "id, org_id, waba_id, name, language, category, status, components, rejection_reason, \
         network_id, created_at, updated_at"
    };
}

macro_rules! insert_template {
    ($t:expr) => {{
        let t = $t;
        sqlx::query(concat!(
            "INSERT INTO templates (",
            template_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        ))
        .bind(t.id)
        .bind(t.org_id)
        .bind(&t.waba_id)
        .bind(&t.name)
        .bind(&t.language)
        .bind(t.category.as_str())
        .bind(t.status.as_str())
        .bind(Json(&t.components))
        .bind(&t.rejection_reason)
        .bind(&t.network_id)
        .bind(t.created_at)
        .bind(t.updated_at)
    }};
}

impl Tx {
    /// [`Db::insert_template`] inside a transaction (a create checked against a limit).
    pub async fn insert_template(&mut self, template: &Template) -> Result<()> {
        with_tx!(self, conn => insert_template!(template).execute(&mut **conn).await.map(|r| r.rows_affected()))?;
        Ok(())
    }
}

impl Db {
    /// Inserts a template. `Conflict { "templates_org_id_waba_id_name_language_key" }` if the
    /// organisation already has one with this WABA, name and language;
    /// `Conflict { "templates_pkey" }` on a duplicate id.
    pub async fn insert_template(&self, template: &Template) -> Result<()> {
        with_pool!(self, pool => insert_template!(template).execute(pool).await.map(|r| r.rows_affected()))?;
        Ok(())
    }

    /// The organisation's template `id` (`None` if missing or another organisation's).
    pub async fn get_template(&self, org_id: Uuid, id: Uuid) -> Result<Option<Template>> {
        let template = with_pool!(self, pool => sqlx::query_as::<_, Template>(concat!(
                "SELECT ", template_columns!(), " FROM templates WHERE id = $1 AND org_id = $2"))
            .bind(id)
            .bind(org_id)
            .fetch_optional(pool)
            .await)?;
        Ok(template)
    }

    /// One page of the organisation's templates, newest first by `(created_at, id)`, starting
    /// after the keyset position `after = (created_at, id)`, optionally filtered by exact
    /// `status` and `language`.
    pub async fn list_templates(
        &self,
        org_id: Uuid,
        status: Option<TemplateStatus>,
        language: Option<&str>,
        after: Option<(i64, Uuid)>,
        limit: i64,
    ) -> Result<Vec<Template>> {
        let (after_ts, after_id) = split_after(after);
        let templates = with_pool!(self, pool => sqlx::query_as::<_, Template>(concat!(
                "SELECT ", template_columns!(), " FROM templates \
                 WHERE org_id = $1 AND ($2 IS NULL OR status = $2) \
                   AND ($3 IS NULL OR language = $3) \
                   AND ($4 IS NULL OR (created_at, id) < ($4, $5)) \
                 ORDER BY created_at DESC, id DESC LIMIT $6"))
            .bind(org_id)
            .bind(status.map(TemplateStatus::as_str))
            .bind(language)
            .bind(after_ts)
            .bind(after_id)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(templates)
    }

    pub async fn count_templates(&self, org_id: Uuid) -> Result<i64> {
        let n = with_pool!(self, pool => sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM templates WHERE org_id = $1")
            .bind(org_id)
            .fetch_one(pool)
            .await)?;
        Ok(n)
    }

    /// Records the network's answer to a submission: sets `network_id`, clears
    /// `rejection_reason` and sets `status`, and returns the row. `NotFound` if missing or
    /// another organisation's.
    ///
    /// The status is only written over a pre-review status (`draft`, `rejected`): if the
    /// network's status webhook already moved the template on (it can arrive before the
    /// submit call returns), that newer status is kept.
    pub async fn set_template_submitted(
        &self,
        org_id: Uuid,
        id: Uuid,
        network_id: &str,
        status: TemplateStatus,
        at: i64,
    ) -> Result<Template> {
        let mut tx = self.begin().await?;
        let r = tx
            .set_template_submitted(org_id, id, network_id, status, at)
            .await?;
        tx.commit().await?;
        Ok(r)
    }

    /// Applies a status reported by the network (`message_template_status_update`) and
    /// returns the templates it changed (possibly none; several organisations may share a
    /// WABA). Sets `status` and `rejection_reason = reason`.
    ///
    /// With `network_id`, matches the WABA's templates with that id, and also those of that
    /// `name` (and `language`, if given) whose id is not recorded yet (the webhook can beat
    /// the submit call's answer); those get the id. Without it, matches by WABA, name and
    /// (if given) language. Rows already in that state are left alone.
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the network's webhook fields"
    )]
    pub async fn apply_template_status(
        &self,
        waba_id: &str,
        network_id: Option<&str>,
        name: &str,
        language: Option<&str>,
        status: TemplateStatus,
        reason: Option<&str>,
        at: i64,
    ) -> Result<Vec<Template>> {
        let mut tx = self.begin().await?;
        let r = tx
            .apply_template_status(waba_id, network_id, name, language, status, reason, at)
            .await?;
        tx.commit().await?;
        Ok(r)
    }

    /// The network changed a template's category (`template_category_update`): the WABA's
    /// templates with `network_id`, or (no id recorded yet) of that `name` and `language`,
    /// take `category`. Rows already in it are left alone. Returns the changed rows.
    pub async fn apply_template_category(
        &self,
        waba_id: &str,
        network_id: Option<&str>,
        name: Option<&str>,
        language: Option<&str>,
        category: Category,
        at: i64,
    ) -> Result<Vec<Template>> {
        let templates = with_pool!(self, pool => sqlx::query_as::<_, Template>(concat!(
                "UPDATE templates SET category = $5, \
                 updated_at = CASE WHEN $6 > updated_at THEN $6 ELSE updated_at + 1 END \
                 WHERE waba_id = $1 \
                   AND (network_id = $2 \
                        OR ((network_id IS NULL OR $2 IS NULL) AND name = $3 \
                            AND ($4 IS NULL OR language = $4))) \
                   AND category <> $5 \
                 RETURNING ", template_columns!()))
            .bind(waba_id)
            .bind(network_id)
            .bind(name)
            .bind(language)
            .bind(category.as_str())
            .bind(at)
            .fetch_all(pool)
            .await)?;
        Ok(templates)
    }

    /// Creates or refreshes a template found on the network (e.g. created in the network's
    /// own tools), keyed by (organisation, WABA, name, language); returns it with `created`.
    /// An existing row gets the network's category, status, components, id and rejection
    /// reason; if nothing differs it is left alone (`updated_at` unchanged).
    #[expect(clippy::too_many_arguments, reason = "one value per synced field")]
    pub async fn upsert_synced_template(
        &self,
        org_id: Uuid,
        waba_id: &str,
        name: &str,
        language: &str,
        category: Category,
        status: TemplateStatus,
        components: &Value,
        network_id: Option<&str>,
        rejection_reason: Option<&str>,
        new_id: Uuid,
        at: i64,
    ) -> Result<(Template, bool)> {
        let mut tx = self.begin().await?;
        let r = tx
            .upsert_synced_template(
                org_id,
                waba_id,
                name,
                language,
                category,
                status,
                components,
                network_id,
                rejection_reason,
                new_id,
                at,
            )
            .await?;
        tx.commit().await?;
        Ok(r)
    }

    /// Organisations with at least one phone number (whose WABAs may hold templates to
    /// sync), ordered by id, starting after `after`.
    pub async fn template_sync_org_ids(
        &self,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Uuid>> {
        let ids = with_pool!(self, pool => sqlx::query_scalar::<_, Uuid>(
                "SELECT DISTINCT org_id FROM phone_numbers \
                 WHERE ($1 IS NULL OR org_id > $1) ORDER BY org_id LIMIT $2")
            .bind(after)
            .bind(limit)
            .fetch_all(pool)
            .await)?;
        Ok(ids)
    }

    /// The organisation's approved template of this WABA, name and language, if any.
    pub async fn find_approved_template(
        &self,
        org_id: Uuid,
        waba_id: &str,
        name: &str,
        language: &str,
    ) -> Result<Option<Template>> {
        let template = with_pool!(self, pool => sqlx::query_as::<_, Template>(concat!(
                "SELECT ", template_columns!(), " FROM templates \
                 WHERE org_id = $1 AND waba_id = $2 AND name = $3 AND language = $4 \
                   AND status = 'approved'"))
            .bind(org_id)
            .bind(waba_id)
            .bind(name)
            .bind(language)
            .fetch_optional(pool)
            .await)?;
        Ok(template)
    }
}

impl Tx {
    /// [`Db::apply_template_status`] in this transaction (the `template.status` events join it).
    #[expect(
        clippy::too_many_arguments,
        reason = "mirrors the network's webhook fields"
    )]
    pub async fn apply_template_status(
        &mut self,
        waba_id: &str,
        network_id: Option<&str>,
        name: &str,
        language: Option<&str>,
        status: TemplateStatus,
        reason: Option<&str>,
        at: i64,
    ) -> Result<Vec<Template>> {
        let templates = with_tx!(self, conn => sqlx::query_as::<_, Template>(concat!(
                "UPDATE templates SET status = $5, rejection_reason = $6, \
                 network_id = COALESCE(network_id, $2), updated_at = $7 \
                 WHERE waba_id = $1 \
                   AND (network_id = $2 \
                        OR ((network_id IS NULL OR $2 IS NULL) AND name = $3 \
                            AND ($4 IS NULL OR language = $4))) \
                   AND (status <> $5 OR COALESCE(rejection_reason, '') <> COALESCE($6, '') \
                        OR network_id IS NULL AND $2 IS NOT NULL) \
                 RETURNING ", template_columns!()))
            .bind(waba_id)
            .bind(network_id)
            .bind(name)
            .bind(language)
            .bind(status.as_str())
            .bind(reason)
            .bind(at)
            .fetch_all(&mut **conn)
            .await)?;
        Ok(templates)
    }

    /// [`Db::set_template_submitted`] in this transaction (the `template.status` event joins it).
    pub async fn set_template_submitted(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        network_id: &str,
        status: TemplateStatus,
        at: i64,
    ) -> Result<Template> {
        let template = with_tx!(self, conn => sqlx::query_as::<_, Template>(concat!(
                "UPDATE templates SET network_id = $3, \
                 status = CASE WHEN status IN ('draft', 'rejected') THEN $4 ELSE status END, \
                 rejection_reason = CASE WHEN status IN ('draft', 'rejected') THEN NULL \
                   ELSE rejection_reason END, \
                 updated_at = $5 \
                 WHERE id = $1 AND org_id = $2 RETURNING ", template_columns!()))
            .bind(id)
            .bind(org_id)
            .bind(network_id)
            .bind(status.as_str())
            .bind(at)
            .fetch_optional(&mut **conn)
            .await)?;
        template.ok_or(StoreError::NotFound)
    }

    /// [`Db::upsert_synced_template`] in this transaction (the `template.status` event joins it).
    #[expect(clippy::too_many_arguments, reason = "one row's columns")]
    pub async fn upsert_synced_template(
        &mut self,
        org_id: Uuid,
        waba_id: &str,
        name: &str,
        language: &str,
        category: Category,
        status: TemplateStatus,
        components: &Value,
        network_id: Option<&str>,
        rejection_reason: Option<&str>,
        new_id: Uuid,
        at: i64,
    ) -> Result<(Template, bool)> {
        let upserted = with_tx!(self, conn => sqlx::query_as::<_, Template>(concat!(
                "INSERT INTO templates (", template_columns!(), ") \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) \
                 ON CONFLICT (org_id, waba_id, name, language) DO UPDATE SET \
                 category = excluded.category, status = excluded.status, \
                 components = excluded.components, \
                 rejection_reason = excluded.rejection_reason, \
                 network_id = COALESCE(excluded.network_id, templates.network_id), \
                 updated_at = excluded.updated_at \
                 WHERE templates.category <> excluded.category \
                    OR templates.status <> excluded.status \
                    OR templates.components <> excluded.components \
                    OR COALESCE(templates.rejection_reason, '') \
                       <> COALESCE(excluded.rejection_reason, '') \
                    OR COALESCE(templates.network_id, '') \
                       <> COALESCE(excluded.network_id, templates.network_id, '') \
                 RETURNING ", template_columns!()))
            .bind(new_id)
            .bind(org_id)
            .bind(waba_id)
            .bind(name)
            .bind(language)
            .bind(category.as_str())
            .bind(status.as_str())
            .bind(Json(components))
            .bind(rejection_reason)
            .bind(network_id)
            .bind(at)
            .fetch_optional(&mut **conn)
            .await)?;
        if let Some(template) = upserted {
            let created = template.id == new_id;
            return Ok((template, created));
        }
        // Unchanged: read the row as it is.
        let template = with_tx!(self, conn => sqlx::query_as::<_, Template>(concat!(
                "SELECT ", template_columns!(), " FROM templates \
                 WHERE org_id = $1 AND waba_id = $2 AND name = $3 AND language = $4"))
            .bind(org_id)
            .bind(waba_id)
            .bind(name)
            .bind(language)
            .fetch_optional(&mut **conn)
            .await)?;
        Ok((template.ok_or(StoreError::NotFound)?, false))
    }

    /// The status of the organisation's template `name`/`language` of the WABA, locked
    /// until the transaction ends (PostgreSQL), or `None` when there is none: what a sync's
    /// upsert changes it from.
    pub async fn template_status_of(
        &mut self,
        org_id: Uuid,
        waba_id: &str,
        name: &str,
        language: &str,
    ) -> Result<Option<TemplateStatus>> {
        let sql = lock_for_write!(
            self,
            "SELECT status FROM templates \
             WHERE org_id = $1 AND waba_id = $2 AND name = $3 AND language = $4"
        );
        let status = with_tx!(self, conn => sqlx::query_scalar::<_, String>(sql)
            .bind(org_id)
            .bind(waba_id)
            .bind(name)
            .bind(language)
            .fetch_optional(&mut **conn)
            .await)?;
        Ok(status.and_then(|s| TemplateStatus::parse(&s)))
    }
}
