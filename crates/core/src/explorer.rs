//! The app's message explorer (APP.md §4): one search box that takes a message id, a wamid,
//! a phone number, a username or a BSUID, with filters, and one message with what names it
//! (its customer, number and campaign). Reads only; the store's [`ExplorerQuery`] says which
//! index answers each shape.
//!
//! A customer's identifier resolves to their contact(s) and then to their conversations,
//! whose messages are scanned newest first, one page per conversation: never a scan of the
//! organisation's messages filtered by contact.

use tern_domain::Problem;
use tern_domain::contact::is_user_id;
use tern_domain::message::{Direction, Status};
use tern_domain::phone;
use tern_store::{Campaign, Contact, CustomerKey, ExplorerQuery, Message, PhoneNumber, id_at};
use uuid::Uuid;

use crate::{Core, Result};

/// The most messages a page holds.
pub const MAX_PAGE: u32 = 100;

/// What the search box holds, understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    MessageId(Uuid),
    /// The network's message id (`wamid.…`).
    Wamid(String),
    /// Phone digits without `+` (the network's `wa_id`).
    Phone(String),
    /// A username without `@`.
    Username(String),
    /// A business-scoped user id (`US.…`).
    UserId(String),
    /// A parent BSUID (`US.ENT.…`).
    ParentUserId(String),
}

/// What the search box takes, for a refusal and the empty page.
pub const TERM_HELP: &str = "Search by message id, wamid (wamid.…), phone number with its country code (+1 415 555 0123), username (@name) or business-scoped user id (US.1234…).";

/// Reads the search box: `Ok(None)` when blank; `Err` (the words to show) when it is none
/// of the kinds it takes.
pub fn parse_term(raw: &str) -> std::result::Result<Option<Term>, String> {
    let s = raw.trim();
    if s.is_empty() {
        return Ok(None);
    }
    if let Ok(id) = Uuid::parse_str(s) {
        return Ok(Some(Term::MessageId(id)));
    }
    if s.starts_with("wamid.") && !s.contains(char::is_whitespace) {
        return Ok(Some(Term::Wamid(s.to_string())));
    }
    if let Some(name) = s.strip_prefix('@') {
        let name = name.trim();
        if name.is_empty() || name.contains(char::is_whitespace) || name.chars().count() > 64 {
            return Err(format!("\"{s}\" is not a username. {TERM_HELP}"));
        }
        return Ok(Some(Term::Username(name.to_string())));
    }
    if is_user_id(s) {
        return Ok(Some(if s.get(2..7) == Some(".ENT.") {
            Term::ParentUserId(s.to_string())
        } else {
            Term::UserId(s.to_string())
        }));
    }
    let phone_like = s
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '+' | ' ' | '-' | '.' | '(' | ')'))
        && s.chars().any(|c| c.is_ascii_digit());
    if phone_like {
        // The API's rule, with or without the `+` (a `wa_id` is written without it).
        let written = if s.starts_with('+') {
            s.to_string()
        } else {
            format!("+{s}")
        };
        return match phone::parse_international(&written) {
            Ok(p) => Ok(Some(Term::Phone(p.wa_id().to_string()))),
            Err(_) => Err(format!(
                "\"{s}\" is not a phone number: write it with its country code, e.g. +1 415 555 0123."
            )),
        };
    }
    Err(format!(
        "\"{s}\" is not something the explorer can look up. {TERM_HELP}"
    ))
}

/// The filters beside the search box.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filters {
    pub status: Option<Status>,
    pub direction: Option<Direction>,
    /// The network's id of one of the organisation's numbers.
    pub phone_number_id: Option<String>,
    pub campaign_id: Option<Uuid>,
    /// Messages Tern recorded at or after this time (ms).
    pub from: Option<i64>,
    /// Messages Tern recorded before this time (ms).
    pub until: Option<i64>,
}

/// A message of a page with its customer.
#[derive(Debug, Clone)]
pub struct Found {
    pub message: Message,
    pub contact: Option<Contact>,
}

/// One page, newest first.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub rows: Vec<Found>,
    /// The cursor of the next (older) page: the last message's id.
    pub next: Option<Uuid>,
}

/// The conversations of the customer `key` names (empty when the organisation has none).
async fn conversations_of(core: &Core, org_id: Uuid, key: CustomerKey<'_>) -> Result<Vec<Uuid>> {
    let contacts = core.db.customer_contact_ids(org_id, key).await?;
    Ok(core.db.conversations_of_contacts(org_id, &contacts).await?)
}

/// One page of the organisation's messages that `term` and `filters` find, newest first,
/// older than the message `before` (the previous page's cursor).
pub async fn search(
    core: &Core,
    org_id: Uuid,
    term: Option<&Term>,
    filters: &Filters,
    before: Option<Uuid>,
    limit: u32,
) -> Result<Page> {
    let limit = limit.clamp(1, MAX_PAGE);
    let until = filters.until.map(id_at);
    let mut q = ExplorerQuery {
        org_id,
        status: filters.status,
        direction: filters.direction,
        phone_number_id: filters.phone_number_id.clone(),
        campaign_id: filters.campaign_id,
        since: filters.from.map(id_at),
        before: match (before, until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
        // One more than shown: whether an older page exists.
        limit: i64::from(limit) + 1,
        ..ExplorerQuery::default()
    };
    match term {
        None => {}
        Some(Term::MessageId(id)) => q.message_id = Some(*id),
        Some(Term::Wamid(w)) => match core.db.message_id_by_wamid(org_id, w).await? {
            Some(id) => q.message_id = Some(id),
            None => return Ok(Page::default()),
        },
        Some(Term::Phone(wa_id)) => {
            q.conversations = Some(conversations_of(core, org_id, CustomerKey::WaId(wa_id)).await?)
        }
        Some(Term::Username(u)) => {
            q.conversations = Some(conversations_of(core, org_id, CustomerKey::Username(u)).await?)
        }
        Some(Term::UserId(u)) => {
            q.conversations = Some(conversations_of(core, org_id, CustomerKey::UserId(u)).await?)
        }
        Some(Term::ParentUserId(u)) => {
            q.conversations =
                Some(conversations_of(core, org_id, CustomerKey::ParentUserId(u)).await?)
        }
    }
    let mut messages = core.db.explore_messages(&q).await?;
    let next = if messages.len() > limit as usize {
        messages.truncate(limit as usize);
        messages.last().map(|m| m.id)
    } else {
        None
    };
    let mut ids: Vec<Uuid> = messages.iter().map(|m| m.contact_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let contacts = core.db.contacts_by_ids(org_id, &ids).await?;
    let rows = messages
        .into_iter()
        .map(|message| Found {
            contact: contacts
                .iter()
                .find(|c| c.id == message.contact_id)
                .cloned(),
            message,
        })
        .collect();
    Ok(Page { rows, next })
}

/// One message with what names it.
#[derive(Debug, Clone)]
pub struct Detail {
    pub message: Message,
    pub contact: Option<Contact>,
    pub number: Option<PhoneNumber>,
    pub campaign: Option<Campaign>,
}

/// The organisation's message `id` with its customer, number and campaign; `404` for
/// another organisation's or an unknown one.
pub async fn message(core: &Core, org_id: Uuid, id: Uuid) -> Result<Detail> {
    let message = core.db.get_message(org_id, id).await?.ok_or_else(|| {
        Problem::not_found().with_message("No message with this id in the organisation.")
    })?;
    let contact = core.db.get_contact(org_id, message.contact_id).await?;
    let number = core
        .db
        .get_phone_number(&message.phone_number_id)
        .await?
        .filter(|n| n.org_id == org_id);
    let campaign = match message.campaign_id {
        Some(c) => core.db.get_campaign(org_id, c).await?,
        None => None,
    };
    Ok(Detail {
        message,
        contact,
        number,
        campaign,
    })
}

/// The organisation's numbers (the explorer's number filter).
pub async fn numbers(core: &Core, org_id: Uuid) -> Result<Vec<PhoneNumber>> {
    Ok(core.db.list_phone_numbers(org_id, None, 100).await?)
}

/// The organisation's latest campaigns (the explorer's campaign filter).
pub async fn campaigns(core: &Core, org_id: Uuid) -> Result<Vec<Campaign>> {
    Ok(core.db.list_campaigns(org_id, None, None, 100).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_term_is_understood() {
        let id = Uuid::now_v7();
        assert_eq!(parse_term(&id.to_string()), Ok(Some(Term::MessageId(id))));
        assert_eq!(parse_term("  "), Ok(None));
        assert_eq!(
            parse_term("wamid.HBgLMTQxNTU1NTAxMjMVAgARGBI="),
            Ok(Some(Term::Wamid(
                "wamid.HBgLMTQxNTU1NTAxMjMVAgARGBI=".into()
            )))
        );
        for phone in ["+1 415-555-2671", "14155552671", "+1 (415) 555.2671"] {
            assert_eq!(
                parse_term(phone),
                Ok(Some(Term::Phone("14155552671".into()))),
                "{phone}"
            );
        }
        assert_eq!(
            parse_term("@jane.doe"),
            Ok(Some(Term::Username("jane.doe".into())))
        );
        assert_eq!(
            parse_term("US.13491208655302741918"),
            Ok(Some(Term::UserId("US.13491208655302741918".into())))
        );
        assert_eq!(
            parse_term("US.ENT.11815799212886844830"),
            Ok(Some(Term::ParentUserId(
                "US.ENT.11815799212886844830".into()
            )))
        );
    }

    #[test]
    fn other_terms_are_refused_in_words() {
        for bad in ["hello world", "+99 12", "@", "123"] {
            let e = parse_term(bad).unwrap_err();
            assert!(e.contains(bad.trim()), "{e}");
        }
    }
}
