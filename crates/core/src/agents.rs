//! Conversations for agents (APP.md §6, §7): mark a customer's message read (with a typing
//! indicator), block and unblock a customer.
//!
//! Both ask the network first and record only what it did: when it cannot be reached
//! (`503 unavailable`) nothing is recorded, and the request can simply be repeated (a read
//! mark or a block is harmless to repeat, at the network as here).
//!
//! | use case | checks (first failure wins) | network | recorded |
//! |---|---|---|---|
//! | [`mark_read`] | the message is the organisation's (404); inbound (`not_inbound`); ≤ 30 days old (`too_old`); its number usable | `POST /{pnid}/messages` status read (+ typing) | `read_at` on it and the earlier unread inbound messages of its conversation, a `read_marked` entry each |
//! | [`block`] | the contact is the organisation's (404); blocked already → unchanged; wrote to one of its numbers in the last 24 h (`block_needs_recent_message`) | `POST /{pnid}/block_users` at each such number | `blocked_at` |
//! | [`unblock`] | the contact is the organisation's (404); not blocked → unchanged | `DELETE /{pnid}/block_users` at each number they have a conversation with | `blocked_at` cleared |

use tern_cloudapi::{CloudApiClient, RetryClass, SendError, UserOutcome};
use tern_domain::Problem;
use tern_domain::agents;
use tern_domain::time::now_ms;
use tern_store::{Contact, Message, PhoneNumber};
use uuid::Uuid;

use crate::{Core, Principal, Result, numbers};

/// Marks the organisation's message `message_id` read at the network, with a typing
/// indicator when `typing`, and records it. Returns the message with its `read_at`.
pub async fn mark_read(
    core: &Core,
    principal: &Principal,
    message_id: Uuid,
    typing: bool,
) -> Result<Message> {
    let message = core
        .db
        .get_message(principal.org_id, message_id)
        .await?
        .ok_or_else(Problem::not_found)?;
    let now = now_ms();
    agents::check_read(message.direction, message.created_at, now)?;
    // An inbound message always has the network's id; without it there is nothing to mark.
    let wamid = message.wamid.clone().ok_or_else(Problem::unavailable)?;
    let number = number(core, principal, &message.phone_number_id).await?;
    let (cloud, token) = reach(core, &number)?;
    cloud
        .mark_read(&number.id, &token, &wamid, typing)
        .await
        .map_err(|e| network_problem("mark read", &e))?;
    Ok(core.db.record_read_mark(&message, now).await?)
}

/// Blocks the organisation's contact `contact_id` at every number they wrote to in the last
/// 24 hours. A blocked contact is answered unchanged (the network is not asked again).
pub async fn block(core: &Core, principal: &Principal, contact_id: Uuid) -> Result<Contact> {
    let contact = contact(core, principal, contact_id).await?;
    if contact.blocked_at.is_some() {
        return Ok(contact);
    }
    let now = now_ms();
    let recent: Vec<String> = core
        .db
        .contact_numbers(principal.org_id, contact_id)
        .await?
        .into_iter()
        .filter(|n| agents::can_block_at(n.last_inbound_at, now))
        .map(|n| n.phone_number_id)
        .collect();
    if recent.is_empty() {
        return Err(agents::block_needs_recent_message());
    }
    let user = user(&contact)?;
    let mut blocked = 0;
    let mut refusal = None;
    for id in &recent {
        let number = number(core, principal, id).await?;
        let (cloud, token) = reach(core, &number)?;
        let outcomes = cloud
            .block_users(&number.id, &token, &[user])
            .await
            .map_err(|e| network_problem("block", &e))?;
        match outcome(&outcomes, user) {
            Ok(()) => blocked += 1,
            Err(p) => {
                tracing::warn!(phone_number_id = %number.id, contact_id = %contact_id, "the network did not block the customer at this number");
                refusal.get_or_insert(p);
            }
        }
    }
    // Blocked where the network allowed it; refused only when it allowed it nowhere.
    if blocked == 0 {
        return Err(refusal.unwrap_or_else(Problem::unavailable));
    }
    Ok(core
        .db
        .set_contact_blocked(principal.org_id, contact_id, Some(now), now)
        .await?)
}

/// Unblocks the organisation's contact `contact_id` at every number they have a
/// conversation with (a block reaches no other). An unblocked contact is answered
/// unchanged.
pub async fn unblock(core: &Core, principal: &Principal, contact_id: Uuid) -> Result<Contact> {
    let contact = contact(core, principal, contact_id).await?;
    if contact.blocked_at.is_none() {
        return Ok(contact);
    }
    let user = user(&contact)?;
    for n in core
        .db
        .contact_numbers(principal.org_id, contact_id)
        .await?
    {
        let number = number(core, principal, &n.phone_number_id).await?;
        let (cloud, token) = reach(core, &number)?;
        let outcomes = cloud
            .unblock_users(&number.id, &token, &[user])
            .await
            .map_err(|e| network_problem("unblock", &e))?;
        // Not blocked at this number (the block failed there): nothing to undo.
        if let Err(p) = outcome(&outcomes, user) {
            tracing::info!(phone_number_id = %number.id, contact_id = %contact_id, problem = %p.message, "unblock refused at this number");
        }
    }
    Ok(core
        .db
        .set_contact_blocked(principal.org_id, contact_id, None, now_ms())
        .await?)
}

async fn contact(core: &Core, principal: &Principal, id: Uuid) -> Result<Contact> {
    core.db
        .get_contact(principal.org_id, id)
        .await?
        .ok_or_else(Problem::not_found)
}

/// How the network names the customer: the phone (wa_id) when known, else the BSUID (as a
/// send addresses them).
fn user(contact: &Contact) -> Result<&str> {
    contact
        .wa_id
        .as_deref()
        .or(contact.user_id.as_deref())
        .ok_or_else(|| {
            Problem::not_found()
                .with_message("The contact has neither a phone number nor a user_id to block.")
        })
}

/// The organisation's number `id` (a message's or a conversation's), able to reach the
/// network.
async fn number(core: &Core, principal: &Principal, id: &str) -> Result<PhoneNumber> {
    match core.db.get_phone_number(id).await? {
        Some(n) if n.org_id == principal.org_id && numbers::can_send(&n) => Ok(n),
        _ => Err(crate::messages::send::not_connected(id)),
    }
}

/// The network that answers `number`, and the number's token.
fn reach<'a>(core: &'a Core, number: &PhoneNumber) -> Result<(&'a CloudApiClient, String)> {
    let token = numbers::access_token(&core.key, number)
        .ok_or_else(|| crate::messages::send::not_connected(&number.id))?;
    let cloud = core.network_for(number).ok_or_else(|| {
        Problem::unavailable().with_message("The test network is not running in this process.")
    })?;
    Ok((cloud, token))
}

/// The outcome for `user` in a block list answer: done, or the network's refusal.
fn outcome(outcomes: &[UserOutcome], user: &str) -> Result<()> {
    match outcomes.iter().find(|o| o.input() == user) {
        Some(UserOutcome::Done { .. }) => Ok(()),
        Some(UserOutcome::Failed { code, message, .. }) => {
            Err(agents::network_rejected(*code, message))
        }
        // The answer does not name the user: treat it as not done.
        None => Err(agents::network_rejected(
            None,
            "The network's answer does not name the customer.",
        )),
    }
}

/// A network call that did not succeed: refused for good → `409 network_rejected` with the
/// network's code and words; otherwise (unreachable, down, no answer) → `503 unavailable`.
fn network_problem(what: &str, e: &SendError) -> Problem {
    match e {
        SendError::Graph(g) if g.is_graph_body() && g.retry_class() == RetryClass::Never => {
            agents::network_rejected(g.code, g.details.as_deref().unwrap_or(&g.message))
        }
        other => {
            tracing::warn!(error = %other, "{what}: network unavailable");
            Problem::unavailable()
                .with_message("The messaging network could not be reached; nothing was recorded. Retry later.")
                .with_detail("reason", "network_unavailable")
        }
    }
}
