//! [`AcceptBatch`] on SQLite: multi-row `VALUES`, not kept prepared; the plain path
//! sends its statements together.

use std::collections::{BTreeMap, HashSet};

use futures::TryStreamExt;
use sqlx::types::Json;
use sqlx::{Either, Executor, QueryBuilder, Row, Sqlite, SqliteConnection};
use uuid::Uuid;

use super::{Accept, AcceptBatch};
use crate::error::Result;

impl AcceptBatch for SqliteConnection {
    // The whole write transaction in one string, run by one call to the connection's
    // thread (sqlx's SQLite driver runs a multi-statement string in order, binding the
    // `?`s across the statements): each call is a round trip through that thread, which was
    // what the acceptance's write turn spent most of its time waiting on (BEGIN, keys,
    // counter, messages, conversations, COMMIT — six; now one). The caller holds the
    // process's write turn. A counter that would pass its allowance stops the string with
    // an error before COMMIT (SQLite has no RAISE outside triggers; `abs` of the smallest
    // integer is its documented "integer overflow"), and the transaction is rolled back.
    async fn accept_plain(&mut self, items: &[&Accept]) -> Result<Option<HashSet<(Uuid, String)>>> {
        let mut q = QueryBuilder::new("BEGIN IMMEDIATE; ");
        // 1. The free (or expired) keys, bound to these messages.
        push_keys_insert(&mut q, items);
        q.push("; INSERT INTO messages (");
        q.push(queued_columns!());
        // 2. The messages whose key was bound to them (a taken key keeps its own message).
        q.push(") SELECT * FROM (");
        push_queued(&mut q, items);
        q.push(
            ") AS v WHERE EXISTS (SELECT 1 FROM idempotency_keys k \
             WHERE k.org_id = v.column2 AND k.key = v.column27 AND k.message_id = v.column1)",
        );
        // 3. Their `messages_sent`, all or nothing (as on PostgreSQL): a counter that would
        //    pass its allowance fails the statement.
        let counted: Vec<(Uuid, i64, i64, Uuid)> = items
            .iter()
            .filter_map(|it| {
                let (period, allowance) = it.charges.messages_sent?;
                Some((it.message.org_id, period, allowance, it.message.id))
            })
            .collect();
        if !counted.is_empty() {
            q.push(
                "; INSERT INTO usage_counters (org_id, meter, period_start, count, last_grant) \
                 SELECT v.column1, 'messages_sent', v.column2, \
                 abs(CASE WHEN count(*) <= min(v.column3) THEN count(*) ELSE ",
            );
            q.push(OVER_ALLOWANCE);
            q.push(" END), min(v.column3) FROM (");
            q.push_values(&counted, |mut b, (org, period, allowance, id)| {
                b.push_bind(*org)
                    .push_bind(*period)
                    .push_bind(*allowance)
                    .push_bind(*id);
            });
            q.push(
                ") AS v JOIN messages m ON m.id = v.column4 WHERE true \
                 GROUP BY v.column1, v.column2 \
                 ON CONFLICT (org_id, meter, period_start) DO UPDATE SET count = abs(CASE \
                 WHEN usage_counters.count + excluded.count <= excluded.last_grant \
                 THEN usage_counters.count + excluded.count ELSE ",
            );
            q.push(OVER_ALLOWANCE);
            q.push(" END)");
        }
        // 4. Each conversation's latest activity, from the messages stored.
        q.push(
            "; UPDATE conversations SET last_message_at = v.t FROM \
             (SELECT conversation_id AS c, max(created_at) AS t FROM messages WHERE id IN (",
        );
        let mut ids = q.separated(", ");
        for it in items {
            ids.push_bind(it.message.id);
        }
        q.push(
            ") GROUP BY conversation_id) AS v WHERE conversations.id = v.c AND \
             (conversations.last_message_at IS NULL OR conversations.last_message_at < v.t); \
             COMMIT",
        );

        // The rows are the keys' insert's: the bound keys.
        let mut bound = HashSet::new();
        let mut steps = self.fetch_many(q.build().persistent(false));
        let run: Result<()> = async {
            while let Some(step) = steps.try_next().await? {
                if let Either::Right(row) = step {
                    bound.insert((row.try_get::<Uuid, _>(0)?, row.try_get::<String, _>(1)?));
                }
            }
            Ok(())
        }
        .await;
        drop(steps);
        match run {
            Ok(()) => Ok(Some(bound)),
            // Only the failed statement was undone: end the transaction here.
            Err(e) if is_over_allowance(&e) => {
                self.execute("ROLLBACK").await?;
                Ok(None)
            }
            // Release SQLite's lock before the caller gives the write turn back (it closes
            // this connection anyway); the rollback's own error ("no transaction is
            // active" when BEGIN was what failed) tells nothing more.
            Err(e) => {
                let _ = self.execute("ROLLBACK").await;
                Err(e)
            }
        }
    }

    async fn bind_keys(&mut self, items: &[&Accept]) -> Result<HashSet<(Uuid, String)>> {
        let mut q = QueryBuilder::new("");
        push_keys_insert(&mut q, items);
        let rows = q
            .build_query_as::<(Uuid, String)>()
            .persistent(false)
            .fetch_all(&mut *self)
            .await?;
        Ok(rows.into_iter().collect())
    }

    async fn insert_queued(&mut self, items: &[&Accept]) -> Result<()> {
        let mut q =
            sqlx::QueryBuilder::new(concat!("INSERT INTO messages (", queued_columns!(), ") "));
        push_queued(&mut q, items);
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

/// The columns [`push_queued`] gives values for: `outbound_columns!` (the message id first,
/// its organisation second) then who sent it and its dispatch state (the key 27th).
macro_rules! queued_columns {
    () => {
        concat!(
            crate::messages::outbound_columns!(),
            ", api_key_id, request_id, idempotency_key, attempts, next_attempt_at, dispatch_state"
        )
    };
}
use queued_columns;

/// What a counter that would pass its allowance evaluates to inside `abs(…)`: SQLite's
/// "integer overflow" error.
const OVER_ALLOWANCE: &str = "-9223372036854775808";

fn is_over_allowance(e: &crate::error::StoreError) -> bool {
    matches!(e, crate::error::StoreError::Backend(sqlx::Error::Database(d))
        if d.message().contains("integer overflow"))
}

/// The keys' insert, taking over only expired ones, returning those bound.
fn push_keys_insert(q: &mut QueryBuilder<Sqlite>, items: &[&Accept]) {
    q.push(
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
}

/// `VALUES (…), …` of the items' messages, queued for dispatch at their `created_at`, in
/// [`queued_columns!`] order.
fn push_queued(q: &mut QueryBuilder<Sqlite>, items: &[&Accept]) {
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
}
