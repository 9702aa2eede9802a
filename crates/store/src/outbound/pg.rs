//! [`AcceptBatch`] on PostgreSQL: fixed statements over arrays (`UNNEST`), prepared once
//! per connection.

use std::collections::{BTreeMap, HashSet};

use sqlx::PgConnection;
use sqlx::types::Json;
use uuid::Uuid;

use super::{Accept, AcceptBatch};
use crate::error::Result;
use crate::messages::Message;

/// Binds the columns of `$ms` (`&[&Message]`) as arrays, `$1`…`$24` in
/// `outbound_columns!` order, for the PostgreSQL `UNNEST` statements.
macro_rules! bind_message_arrays {
    ($q:expr, $ms:expr) => {{
        let ms: &[&Message] = $ms;
        $q.bind(ms.iter().map(|m| m.id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.org_id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.conversation_id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.contact_id).collect::<Vec<_>>())
            .bind(
                ms.iter()
                    .map(|m| m.phone_number_id.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(ms.iter().map(|m| m.direction.as_str()).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.r#type.as_str()).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.status.as_str()).collect::<Vec<_>>())
            .bind(
                ms.iter()
                    .map(|m| m.template_name.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(
                ms.iter()
                    .map(|m| m.template_language.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(ms.iter().map(|m| m.text.as_deref()).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.media_id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.wamid.as_deref()).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| Json(&m.request)).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.campaign_id).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.created_at).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.sent_at).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.delivered_at).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.read_at).collect::<Vec<_>>())
            .bind(ms.iter().map(|m| m.failed_at).collect::<Vec<_>>())
            .bind(
                ms.iter()
                    .map(|m| m.failure_code.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(
                ms.iter()
                    .map(|m| m.failure.as_ref().map(Json))
                    .collect::<Vec<_>>(),
            )
            .bind(ms.iter().map(|m| m.updated_at).collect::<Vec<_>>())
            .bind(
                ms.iter()
                    .map(|m| m.reply_to.as_ref().map(Json))
                    .collect::<Vec<_>>(),
            )
    }};
}

impl AcceptBatch for PgConnection {
    // One round trip instead of five (BEGIN, keys, messages, conversations, COMMIT): the
    // per-statement cost, not the rows, is what PostgreSQL spends most on here.
    // The conversations are touched by an upsert on their primary key, which always probes
    // that index. An UPDATE … FROM got a cached generic plan that scanned the whole table
    // (cheapest while it was small), and every touch leaves a dead row version there (its
    // activity index keeps the update from being HOT), so each batch scanned more and more
    // dead rows until a vacuum: the same build measured 3,100 or 4,800 sends/s depending on
    // which plan it happened to cache. The conversation exists (the send read it, and
    // conversations are never deleted); were it missing, the insert half would create it
    // from the message's own ids, and the unique (contact, number) key forbids a second.
    // Rows are locked in id order, so two batches touching the same conversations cannot
    // deadlock (a deadlock is only detected after a second: it showed as p99 ≈ 900 ms).
    async fn accept_plain(&mut self, items: &[&Accept]) -> Result<Option<HashSet<(Uuid, String)>>> {
        const SQL: &str = concat!(
            "WITH t AS (SELECT * FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], \
               $4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
               $11::text[], $12::uuid[], $13::text[], $14::jsonb[], $15::uuid[], $16::int8[], \
               $17::int8[], $18::int8[], $19::int8[], $20::int8[], $21::text[], $22::jsonb[], \
               $23::int8[], $24::jsonb[], $25::text[], $26::bytea[], $27::int8[], $28::int8[], \
               $29::int8[], $30::uuid[], $31::text[]) AS t(id, org_id, \
               conversation_id, contact_id, phone_number_id, direction, type, status, \
               template_name, template_language, text, media_id, wamid, request, campaign_id, \
               created_at, sent_at, delivered_at, read_at, failed_at, failure_code, failure, \
               updated_at, reply_to, key, fingerprint, key_expires_at, period, allowance, \
               api_key_id, request_id)), \
             k AS (INSERT INTO idempotency_keys (org_id, key, fingerprint, message_id, state, \
               created_at, expires_at) \
               SELECT org_id, key, fingerprint, id, 'completed', created_at, key_expires_at FROM t",
            key_conflict!(),
            ", message_id), \
             m AS (INSERT INTO messages (",
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, idempotency_key, attempts, next_attempt_at, \
               dispatch_state) SELECT ",
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, key, 0, created_at, 'queued' FROM t \
               WHERE id IN (SELECT message_id FROM k) \
               RETURNING id, conversation_id, org_id, contact_id, phone_number_id, created_at), \
             c AS (INSERT INTO conversations (id, org_id, contact_id, phone_number_id, created_at, \
                 last_message_at) \
               SELECT conversation_id, org_id, contact_id, phone_number_id, max(created_at), \
                 max(created_at) FROM m GROUP BY conversation_id, org_id, contact_id, phone_number_id \
               ORDER BY conversation_id \
               ON CONFLICT (id) DO UPDATE SET last_message_at = excluded.last_message_at \
               WHERE conversations.last_message_at IS NULL \
                 OR conversations.last_message_at < excluded.last_message_at), \
             g AS (SELECT t.org_id, t.period, count(*) AS n, min(t.allowance) AS allowance \
               FROM m JOIN t ON t.id = m.id WHERE t.period IS NOT NULL GROUP BY t.org_id, t.period), \
             u AS (INSERT INTO usage_counters (org_id, meter, period_start, count, last_grant) \
               SELECT org_id, 'messages_sent', period, n, allowance FROM g WHERE n <= allowance \
               ORDER BY org_id, period \
               ON CONFLICT (org_id, meter, period_start) DO UPDATE \
               SET count = usage_counters.count + excluded.count \
               WHERE usage_counters.count + excluded.count <= excluded.last_grant RETURNING 1) \
             SELECT org_id, key, 1 / (CASE WHEN (SELECT count(*) FROM u) = (SELECT count(*) FROM g) \
               THEN 1 ELSE 0 END) FROM k"
        );
        let ms: Vec<&Message> = items.iter().map(|i| &i.message).collect();
        let rows = bind_message_arrays!(sqlx::query_as::<_, (Uuid, String, i32)>(SQL), &ms)
            .bind(items.iter().map(|i| i.key.as_str()).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.fingerprint.as_slice())
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.key_expires_at).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.charges.messages_sent.map(|c| c.0))
                    .collect::<Vec<_>>(),
            )
            .bind(
                items
                    .iter()
                    .map(|i| i.charges.messages_sent.map(|c| c.1))
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.api_key_id).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.request_id.as_deref())
                    .collect::<Vec<_>>(),
            )
            .fetch_all(&mut *self)
            .await;
        match rows {
            Ok(rows) => Ok(Some(rows.into_iter().map(|(o, k, _)| (o, k)).collect())),
            // An allowance would be exceeded: the statement undid itself (see above).
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("22012") => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    async fn bind_keys(&mut self, items: &[&Accept]) -> Result<HashSet<(Uuid, String)>> {
        const SQL: &str = concat!(
            "INSERT INTO idempotency_keys (org_id, key, fingerprint, message_id, state, \
             created_at, expires_at) \
             SELECT o, k, f, m, 'completed', c, e \
             FROM UNNEST($1::uuid[], $2::text[], $3::bytea[], $4::uuid[], $5::int8[], $6::int8[]) \
               AS t(o, k, f, m, c, e)",
            key_conflict!()
        );
        let rows = sqlx::query_as::<_, (Uuid, String)>(SQL)
            .bind(items.iter().map(|i| i.message.org_id).collect::<Vec<_>>())
            .bind(items.iter().map(|i| i.key.as_str()).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.fingerprint.as_slice())
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.message.id).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.message.created_at)
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.key_expires_at).collect::<Vec<_>>())
            .fetch_all(&mut *self)
            .await?;
        Ok(rows.into_iter().collect())
    }

    async fn insert_queued(&mut self, items: &[&Accept]) -> Result<()> {
        let sql = concat!(
            "INSERT INTO messages (",
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, idempotency_key, attempts, next_attempt_at, dispatch_state) \
             SELECT *, 0, t.created_at, 'queued' FROM UNNEST($1::uuid[], $2::uuid[], $3::uuid[], \
               $4::uuid[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], \
               $11::text[], $12::uuid[], $13::text[], $14::jsonb[], $15::uuid[], $16::int8[], \
               $17::int8[], $18::int8[], $19::int8[], $20::int8[], $21::text[], $22::jsonb[], \
               $23::int8[], $24::jsonb[], $25::uuid[], $26::text[], $27::text[]) \
               AS t(id, org_id, conversation_id, contact_id, phone_number_id, \
               direction, type, status, template_name, template_language, text, media_id, wamid, \
               request, campaign_id, created_at, sent_at, delivered_at, read_at, failed_at, \
               failure_code, failure, updated_at, reply_to, api_key_id, request_id, \
               idempotency_key)"
        );
        let messages: Vec<&Message> = items.iter().map(|i| &i.message).collect();
        bind_message_arrays!(sqlx::query(sql), &messages)
            .bind(items.iter().map(|i| i.api_key_id).collect::<Vec<_>>())
            .bind(
                items
                    .iter()
                    .map(|i| i.request_id.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(items.iter().map(|i| i.key.as_str()).collect::<Vec<_>>())
            .execute(&mut *self)
            .await?;
        Ok(())
    }

    async fn touch_conversations(&mut self, latest: &BTreeMap<Uuid, i64>) -> Result<()> {
        // `id = ANY($1)` lets the planner probe the primary key; the join alone was planned
        // as a scan of the whole table.
        sqlx::query(
            "UPDATE conversations SET last_message_at = v.t \
             FROM UNNEST($1::uuid[], $2::int8[]) AS v(id, t) \
             WHERE conversations.id = ANY($1) AND conversations.id = v.id \
               AND (conversations.last_message_at IS NULL OR conversations.last_message_at < v.t)",
        )
        .bind(latest.keys().copied().collect::<Vec<_>>())
        .bind(latest.values().copied().collect::<Vec<_>>())
        .execute(&mut *self)
        .await?;
        Ok(())
    }
}
