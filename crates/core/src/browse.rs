//! The app's read-only pages over conversations, contacts and templates: the same store
//! reads (and filters) as the public API's lists, one organisation at a time. Another
//! organisation's id is `404`, like an unknown one.

use std::collections::HashMap;

use tern_domain::Problem;
use tern_domain::template::TemplateStatus;
use tern_store::{Contact, ContactField, Conversation, ConversationContact, Message, Template};
use uuid::Uuid;

use crate::{Core, Result};

/// Most contacts a contact page lists conversations of (one per number of the organisation).
const CONTACT_CONVERSATIONS: i64 = 100;
/// Custom fields read for their labels (an organisation defines a handful).
const FIELDS: i64 = 1000;

/// A conversation with who it is with (`None`: the contact vanished meanwhile).
#[derive(Debug, Clone)]
pub struct ConversationLine {
    pub conversation: Conversation,
    pub contact: Option<ConversationContact>,
}

/// A page of conversations, latest activity first, as `GET /conversations` filters them:
/// `contact_id`, and `open` (the window open at `now`, or closed), after `(sort_ts, id)`.
pub async fn conversations(
    core: &Core,
    org_id: Uuid,
    contact_id: Option<Uuid>,
    open: Option<bool>,
    now: i64,
    after: Option<(i64, Uuid)>,
    limit: i64,
) -> Result<Vec<ConversationLine>> {
    let rows = core
        .db
        .list_conversations(org_id, contact_id, open.map(|o| (o, now)), after, limit)
        .await?;
    let ids: Vec<Uuid> = rows.iter().map(|c| c.contact_id).collect();
    let mut people: HashMap<Uuid, ConversationContact> = core
        .db
        .conversation_contacts(org_id, &ids)
        .await?
        .into_iter()
        .map(|c| (c.id, c))
        .collect();
    Ok(rows
        .into_iter()
        .map(|conversation| ConversationLine {
            contact: people.remove(&conversation.contact_id),
            conversation,
        })
        .collect())
}

/// A conversation's thread: its contact and a page of its messages, newest first, before
/// message `before` (ids are UUID v7, so by time).
#[derive(Debug, Clone)]
pub struct Thread {
    pub conversation: Conversation,
    pub contact: Option<Contact>,
    pub messages: Vec<Message>,
}

pub async fn thread(
    core: &Core,
    org_id: Uuid,
    id: Uuid,
    before: Option<Uuid>,
    limit: i64,
) -> Result<Thread> {
    let conversation = core
        .db
        .get_conversation(org_id, id)
        .await?
        .ok_or_else(Problem::not_found)?;
    let contact = core.db.get_contact(org_id, conversation.contact_id).await?;
    let messages = core
        .db
        .list_conversation_messages(org_id, id, None, before, limit)
        .await?;
    Ok(Thread {
        conversation,
        contact,
        messages,
    })
}

/// A page of contacts, newest first, after `(created_at, id)`; with `q`, those matching it
/// as `GET /contacts?q=` matches (name, username, user id or phone digits).
pub async fn contacts(
    core: &Core,
    org_id: Uuid,
    q: Option<&str>,
    after: Option<(i64, Uuid)>,
    limit: i64,
) -> Result<Vec<Contact>> {
    Ok(match q {
        Some(q) => core.db.search_contacts(org_id, q, after, limit).await?,
        None => core.db.list_contacts(org_id, after, limit).await?,
    })
}

/// The organisation's custom contact fields (their labels), by key.
pub async fn contact_fields(core: &Core, org_id: Uuid) -> Result<Vec<ContactField>> {
    Ok(core.db.list_contact_fields(org_id, None, FIELDS).await?)
}

/// A contact with the organisation's field definitions and its conversations.
#[derive(Debug, Clone)]
pub struct ContactPage {
    pub contact: Contact,
    pub fields: Vec<ContactField>,
    pub conversations: Vec<Conversation>,
}

pub async fn contact(core: &Core, org_id: Uuid, id: Uuid) -> Result<ContactPage> {
    let contact = core
        .db
        .get_contact(org_id, id)
        .await?
        .ok_or_else(Problem::not_found)?;
    let conversations = core
        .db
        .list_conversations(org_id, Some(id), None, None, CONTACT_CONVERSATIONS)
        .await?;
    Ok(ContactPage {
        contact,
        fields: contact_fields(core, org_id).await?,
        conversations,
    })
}

/// A page of templates, newest first, after `(created_at, id)`, filtered as
/// `GET /templates` filters them (exact `status` and `language`).
pub async fn templates(
    core: &Core,
    org_id: Uuid,
    status: Option<TemplateStatus>,
    language: Option<&str>,
    after: Option<(i64, Uuid)>,
    limit: i64,
) -> Result<Vec<Template>> {
    Ok(core
        .db
        .list_templates(org_id, status, language, after, limit)
        .await?)
}

pub async fn template(core: &Core, org_id: Uuid, id: Uuid) -> Result<Template> {
    core.db
        .get_template(org_id, id)
        .await?
        .ok_or_else(Problem::not_found)
}
