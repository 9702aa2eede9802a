//! What the statuses of many webhooks show about their customers, learned in one pass
//! (the inbox applies the statuses of the webhooks it claimed together): the same rules as
//! [`Db::observe_identity`] for one, with one read for all.

use uuid::Uuid;

use crate::contacts::Contact;
use crate::db::{Db, Tx, with_tx};
use crate::error::Result;
use crate::identity::{Identity, bind_as_read, holds, learned, push_guard_as_read};
use crate::sql::{ROWS_PER_STATEMENT, bump_updated_at};

impl Db {
    /// [`Db::observe_identity`] of many customers at once (the statuses of the webhooks the
    /// inbox claimed together name one customer each): one read for all; the contacts that
    /// only learn identifiers (exactly one holds the BSUID or phone, nothing to merge) in
    /// one write transaction, each write guarded by what was read (one statement); the
    /// rest, and any contact changed meanwhile,
    /// one by one through [`Db::observe_identity`]. Returns at each index whether its
    /// contact was written.
    pub async fn observe_identities(
        &self,
        org_id: Uuid,
        who: &[Identity<'_>],
        at: i64,
    ) -> Result<Vec<bool>> {
        let mut out = vec![false; who.len()];
        let mut alone = Vec::new();
        for (chunk_no, chunk) in who.chunks(ROWS_PER_STATEMENT / 2).enumerate() {
            let base = chunk_no * (ROWS_PER_STATEMENT / 2);
            let user_ids: Vec<&str> = chunk.iter().filter_map(|w| w.user_id).collect();
            let wa_ids: Vec<&str> = chunk.iter().filter_map(|w| w.wa_id).collect();
            if user_ids.is_empty() && wa_ids.is_empty() {
                continue;
            }
            let found = self.contacts_holding(org_id, &user_ids, &wa_ids).await?;
            // (index, the contact as read, the contact with what it learns)
            let mut writes: Vec<(usize, &Contact, Contact)> = Vec::new();
            for (i, w) in chunk.iter().enumerate() {
                // A customer named by what an earlier one teaches a contact is decided over
                // that write, as one by one would.
                if writes.iter().any(|(_, _, next)| holds(next, w)) {
                    alone.push(base + i);
                    continue;
                }
                let mut matches = found.iter().filter(|c| holds(c, w));
                match (matches.next(), matches.next()) {
                    (None, _) => {}
                    (Some(c), None) => {
                        let next = learned(c, w, None);
                        if next == *c {
                            continue;
                        }
                        // A contact learns once a statement: a second customer naming it
                        // is decided over the first one's write.
                        if writes.iter().any(|(_, _, n)| n.id == c.id) {
                            alone.push(base + i);
                        } else {
                            writes.push((base + i, c, next));
                        }
                    }
                    // Two contacts to merge: locked, one by one.
                    (Some(_), Some(_)) => alone.push(base + i),
                }
            }
            if writes.is_empty() {
                continue;
            }
            // In a write transaction: on SQLite it takes this process's write turn instead
            // of SQLite's busy handler, which sleeps in steps of up to 100 ms.
            let mut tx = self.begin().await?;
            let pairs: Vec<(&Contact, &Contact)> = writes.iter().map(|(_, c, n)| (*c, n)).collect();
            let written = tx.learn_identities(org_id, &pairs, at).await?;
            tx.commit().await?;
            for (i, c, _) in writes {
                if written.contains(&c.id) {
                    out[i] = true;
                } else {
                    alone.push(i);
                }
            }
        }
        alone.sort_unstable();
        for i in alone {
            out[i] = self.observe_identity(org_id, &who[i], at).await?.is_some();
        }
        Ok(out)
    }
}

impl Tx {
    /// Writes each contact's learned identifiers (`(as read, with what it learns)`),
    /// guarded by what was read; returns the ids written. One statement for all, on both
    /// backends (the inbound path's shape, `Db::record_inbound_known`); on SQLite one a
    /// contact was a round trip to the connection's thread per status at the network's
    /// tier (docs/performance.md, issue 33, ninth session).
    async fn learn_identities(
        &mut self,
        org_id: Uuid,
        writes: &[(&Contact, &Contact)],
        at: i64,
    ) -> Result<Vec<Uuid>> {
        Ok(with_tx!(self, conn => {
            let mut q = sqlx::QueryBuilder::new(concat!(
                "UPDATE contacts SET wa_id = v.column2, user_id = v.column3, \
                 parent_user_id = v.column4, username = v.column5, updated_at = ",
                bump_updated_at!("contacts", "v.column10"),
                " FROM ("
            ));
            q.push_values(writes, |mut row, (c, next)| {
                row.push_bind(c.id)
                    .push_bind(next.wa_id.as_deref())
                    .push_bind(next.user_id.as_deref())
                    .push_bind(next.parent_user_id.as_deref())
                    .push_bind(next.username.as_deref());
                bind_as_read(&mut row, c);
                row.push_bind(at);
            });
            push_guard_as_read(&mut q, org_id, 6);
            q.build_query_scalar::<Uuid>()
                .persistent(false)
                .fetch_all(&mut **conn)
                .await
        })?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Pool;

    /// SQLite finds each contact of a batched identity write by its primary key, not by
    /// walking the organisation's contacts (`org_id`'s indexes) for every row.
    #[tokio::test]
    async fn a_batched_contact_write_on_sqlite_searches_by_primary_key() {
        let db = Db::connect("sqlite::memory:").await.unwrap();
        db.migrate().await.unwrap();
        let Pool::Sqlite(pool) = &db.pool else {
            unreachable!("an in-memory SQLite database");
        };
        let mut q = sqlx::QueryBuilder::new(
            "EXPLAIN QUERY PLAN UPDATE contacts SET wa_id = v.column2, user_id = v.column3, \
             parent_user_id = v.column4, username = v.column5 FROM (",
        );
        let none: Option<&str> = None;
        q.push_values(0..3, |mut row, i| {
            row.push_bind(Uuid::now_v7())
                .push_bind(format!("4915{i}"))
                .push_bind(none)
                .push_bind(none)
                .push_bind(none)
                .push_bind(none)
                .push_bind(none)
                .push_bind(none)
                .push_bind(none);
        });
        push_guard_as_read(&mut q, Uuid::now_v7(), 6);
        let plan: Vec<String> = q
            .build_query_as::<(i64, i64, i64, String)>()
            .fetch_all(pool)
            .await
            .unwrap()
            .into_iter()
            .map(|(_, _, _, detail)| detail)
            .collect();
        assert!(
            plan.iter()
                .any(|d| d.starts_with("SEARCH contacts") && d.contains("(id=?)")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|d| d.contains("org_id=?")), "{plan:?}");
    }
}
