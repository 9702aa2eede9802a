//! A message's whole story (APP.md §4): `GET /messages/{id}/timeline` and the app's message
//! page read it here.
//!
//! Entries come from two places, merged in `at` order: the ones the message row itself
//! proves (`accepted` with its key and request, `campaign`, `received`), derived here and
//! never stored twice, and the ones written where the thing happened
//! (`tern_store::Tx::add_timeline`: attempts, uploads, reports, failures, events, webhook
//! attempts, replays, edits, deletions). Within one millisecond, derived entries come
//! first, then written ones in the order they were made (an event right after its cause).
//!
//! A message has a few dozen entries (at most `tern_store::TIMELINE_MAX_ENTRIES` are
//! read), so a page is cut from the whole merged list in memory; the cursor is the last
//! entry's position (signed, bound to the organisation and the message, as every list's).

use tern_domain::cursor;
use tern_domain::message::Direction;
use tern_domain::timeline::{Detail, Entry};
use tern_domain::{FieldError, Problem};
use uuid::Uuid;

use crate::{Core, Result};

/// A page of a message's timeline, oldest first.
#[derive(Debug, Clone)]
pub struct TimelinePage {
    pub entries: Vec<Entry>,
    /// Pass back as `cursor` for the next page; `None` on the last.
    pub next_cursor: Option<String>,
}

/// Where an entry sits: `(at, 0 derived | 1 written, id)`.
type Position = (i64, u8, Uuid);

/// The entries of the organisation's message `message_id` after `cursor`, at most `limit`
/// (at least 1). `404` for another organisation's message or an unknown id; `400` for a
/// cursor not issued for this message's timeline.
pub async fn page(
    core: &Core,
    org_id: Uuid,
    message_id: Uuid,
    cursor: Option<&str>,
    limit: u32,
) -> Result<TimelinePage> {
    let fingerprint = cursor::fingerprint(
        "message_timeline",
        &[("message_id", Some(&message_id.to_string()))],
    );
    let after = match cursor {
        None => None,
        Some(c) => Some(
            cursor::decode(&core.key, c, org_id, &fingerprint)
                .ok()
                .and_then(|p| position(&p))
                .ok_or_else(|| {
                    Problem::validation(vec![FieldError::new(
                        "cursor",
                        "is not valid for this list; pass back next_cursor unchanged",
                    )])
                })?,
        ),
    };
    let mut all = entries(core, org_id, message_id).await?;
    if let Some(after) = after {
        all.retain(|(p, _)| *p > after);
    }
    let limit = usize::try_from(limit.max(1)).unwrap_or(usize::MAX);
    let more = all.len() > limit;
    all.truncate(limit);
    let next_cursor = match all.last() {
        Some(((at, rank, id), _)) if more => Some(cursor::encode(
            &core.key,
            org_id,
            &fingerprint,
            vec![at.to_string(), rank.to_string(), id.to_string()],
        )),
        _ => None,
    };
    Ok(TimelinePage {
        entries: all.into_iter().map(|(_, e)| e).collect(),
        next_cursor,
    })
}

fn position(p: &[String]) -> Option<Position> {
    match p {
        [at, rank, id] => Some((at.parse().ok()?, rank.parse().ok()?, id.parse().ok()?)),
        _ => None,
    }
}

/// Every entry of the message, in order.
async fn entries(core: &Core, org_id: Uuid, message_id: Uuid) -> Result<Vec<(Position, Entry)>> {
    let m = core
        .db
        .get_message(org_id, message_id)
        .await?
        .ok_or_else(Problem::not_found)?;
    let derived = match (m.direction, m.campaign_id) {
        (Direction::Inbound, _) => Detail::Received {
            wamid: m.wamid.clone(),
        },
        (Direction::Outbound, Some(campaign_id)) => Detail::Campaign { campaign_id },
        (Direction::Outbound, None) => {
            let o = core
                .db
                .message_origin(org_id, message_id)
                .await?
                .ok_or_else(Problem::not_found)?;
            Detail::Accepted {
                request_id: o.request_id,
                key_id: o.api_key_id,
                key_name: o.key_name,
                idempotency_key: o.idempotency_key,
            }
        }
    };
    let rows = core.db.timeline_rows(message_id).await?;
    let mut all = Vec::with_capacity(rows.len() + 1);
    all.push((
        (m.created_at, 0, m.id),
        Entry {
            at: m.created_at,
            detail: derived,
        },
    ));
    all.extend(rows.into_iter().map(|r| {
        (
            (r.at, 1, r.id),
            Entry {
                at: r.at,
                detail: r.detail,
            },
        )
    }));
    all.sort_by_key(|e| e.0);
    Ok(all)
}
