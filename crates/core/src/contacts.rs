//! Contact writes: create or update by phone number or business-scoped user id (within the
//! plan's contact limit, checked atomically), update, consent, tags.

use serde_json::{Map, Value};
use tern_domain::contact::Consent;
use tern_domain::plan::Entitlement;
use tern_domain::{ErrorCode, new_id, time::now_ms};
use tern_store::{Contact, ContactKey};
use uuid::Uuid;

use crate::{Core, Principal, Result, limits};

/// A validated create-or-update of the contact with this phone (`ContactKey::WaId`) or
/// BSUID (`ContactKey::UserId`).
pub struct Upsert<'a> {
    pub key: ContactKey<'a>,
    pub name: Option<&'a str>,
    pub custom_fields: Option<&'a Map<String, Value>>,
    /// Normalised tags to add.
    pub tags: &'a [String],
}

/// Creates the contact (refused at the plan's contact limit) or updates the existing one
/// with this phone number or BSUID; `true` when it was created.
pub async fn upsert(core: &Core, principal: &Principal, u: Upsert<'_>) -> Result<(Contact, bool)> {
    let now = now_ms();
    let mut tx = core.db.begin().await?;
    // An existing contact is updated whatever the count.
    match limits::check_one_more(
        &mut tx,
        principal.org_id,
        &principal.effective(),
        Entitlement::Contacts,
    )
    .await
    {
        Ok(()) => {}
        Err(p)
            if p.code == ErrorCode::PlanLimitReached
                && tx.contact_exists(principal.org_id, u.key).await? => {}
        Err(p) => return Err(p),
    }
    let (mut contact, created) = tx
        .upsert_contact(
            principal.org_id,
            u.key,
            u.name,
            u.custom_fields,
            new_id(),
            now,
        )
        .await?;
    tx.commit().await?;
    if !u.tags.is_empty() {
        contact = core
            .db
            .add_contact_tags(principal.org_id, contact.id, u.tags, now)
            .await?;
    }
    Ok((contact, created))
}

/// Updates a contact's name (`Some(None)` clears it) and custom fields.
pub async fn update(
    core: &Core,
    principal: &Principal,
    id: Uuid,
    name: Option<Option<&str>>,
    custom_fields: Option<&Map<String, Value>>,
) -> Result<Contact> {
    Ok(core
        .db
        .update_contact(principal.org_id, id, name, custom_fields, now_ms())
        .await?)
}

/// Records an opt-in or opt-out decided at `at` (an older decision than the stored one does
/// not replace it).
pub async fn record_consent(
    core: &Core,
    principal: &Principal,
    id: Uuid,
    status: Consent,
    source: Option<&str>,
    at: i64,
) -> Result<Contact> {
    let mut tx = core.db.begin().await?;
    let (contact, changed) = tx
        .set_contact_consent(principal.org_id, id, status, source, at)
        .await?;
    if changed {
        crate::events::contact_consent(&mut tx, &contact).await?;
    }
    tx.commit().await?;
    Ok(contact)
}

/// Adds normalised tags (idempotent).
pub async fn add_tags(
    core: &Core,
    principal: &Principal,
    id: Uuid,
    tags: &[String],
) -> Result<Contact> {
    Ok(core
        .db
        .add_contact_tags(principal.org_id, id, tags, now_ms())
        .await?)
}

/// Removes a normalised tag (removing an absent tag succeeds).
pub async fn remove_tag(
    core: &Core,
    principal: &Principal,
    id: Uuid,
    tag: &str,
) -> Result<Contact> {
    Ok(core
        .db
        .remove_contact_tag(principal.org_id, id, tag, now_ms())
        .await?)
}
