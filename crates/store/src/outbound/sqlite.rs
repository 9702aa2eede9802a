//! [`AcceptBatch`] on SQLite: multi-row `VALUES`, not kept prepared.

use std::collections::{BTreeMap, HashSet};

use sqlx::SqliteConnection;
use sqlx::types::Json;
use uuid::Uuid;

use super::{Accept, AcceptBatch};
use crate::error::Result;

impl AcceptBatch for SqliteConnection {
    // SQLite has no data-modifying CTEs; its transactions are cheap anyway (no round trips).
    async fn accept_plain(
        &mut self,
        _items: &[&Accept],
    ) -> Result<Option<HashSet<(Uuid, String)>>> {
        Ok(None)
    }

    async fn bind_keys(&mut self, items: &[&Accept]) -> Result<HashSet<(Uuid, String)>> {
        let mut q = sqlx::QueryBuilder::new(
            "INSERT INTO idempotency_keys (org_id, key, fingerprint, message_id, state, \
             created_at, expires_at) ",
        );
        q.push_values(items, |mut b, it| {
            b.push_bind(it.message.org_id)
                .push_bind(it.key.as_str())
                .push_bind(it.fingerprint.as_slice())
                .push_bind(it.message.id)
                .push_bind("completed")
                .push_bind(it.message.created_at)
                .push_bind(it.key_expires_at);
        });
        q.push(key_conflict!());
        let rows = q
            .build_query_as::<(Uuid, String)>()
            .persistent(false)
            .fetch_all(&mut *self)
            .await?;
        Ok(rows.into_iter().collect())
    }

    async fn insert_queued(&mut self, items: &[&Accept]) -> Result<()> {
        let mut q = sqlx::QueryBuilder::new(concat!(
            "INSERT INTO messages (",
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, idempotency_key, attempts, next_attempt_at, dispatch_state) "
        ));
        q.push_values(items, |mut b, it| {
            let m = &it.message;
            b.push_bind(m.id)
                .push_bind(m.org_id)
                .push_bind(m.conversation_id)
                .push_bind(m.contact_id)
                .push_bind(m.phone_number_id.as_str())
                .push_bind(m.direction.as_str())
                .push_bind(m.r#type.as_str())
                .push_bind(m.status.as_str())
                .push_bind(m.template_name.as_deref())
                .push_bind(m.template_language.as_deref())
                .push_bind(m.text.as_deref())
                .push_bind(m.media_id)
                .push_bind(m.wamid.as_deref())
                .push_bind(Json(&m.request))
                .push_bind(m.campaign_id)
                .push_bind(m.created_at)
                .push_bind(m.sent_at)
                .push_bind(m.delivered_at)
                .push_bind(m.read_at)
                .push_bind(m.failed_at)
                .push_bind(m.failure_code.as_deref())
                .push_bind(m.failure.as_ref().map(Json))
                .push_bind(m.updated_at)
                .push_bind(m.reply_to.as_ref().map(Json))
                .push_bind(it.api_key_id)
                .push_bind(it.request_id.as_deref())
                .push_bind(it.key.as_str())
                .push_bind(0_i64)
                .push_bind(m.created_at)
                .push_bind(crate::dispatch::DISPATCH_QUEUED);
        });
        q.build().persistent(false).execute(&mut *self).await?;
        Ok(())
    }

    async fn touch_conversations(&mut self, latest: &BTreeMap<Uuid, i64>) -> Result<()> {
        let mut q =
            sqlx::QueryBuilder::new("UPDATE conversations SET last_message_at = v.column2 FROM (");
        q.push_values(latest, |mut b, (id, t)| {
            b.push_bind(*id).push_bind(*t);
        });
        q.push(
            ") AS v WHERE conversations.id = v.column1 AND \
             (conversations.last_message_at IS NULL OR conversations.last_message_at < v.column2)",
        );
        q.build().persistent(false).execute(&mut *self).await?;
        Ok(())
    }
}
