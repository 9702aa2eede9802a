//! What customers write: each inbound message becomes a Message with its `content` (the
//! type's object in the network's shape), `reply_to` and `referral`; an edit or a deletion
//! changes the original message instead of adding one (and, arriving before it, creates
//! the message under the original's wamid); a customer who changed BSUID or phone (the
//! network's notice, read by `tern_cloudapi::InboundMessage::identity_change`) keeps their
//! contact.

use serde_json::Value;
use tern_cloudapi::{Ids, InboundContent, InboundMedia, InboundMessage, MessagesValue};
use tern_domain::message::{Direction, Status};
use tern_domain::timeline::Detail;
use tern_domain::{new_id, time::now_ms};
use tern_store::{
    Db, Identity, InboundChange, Inserted, Message, NewInboundMedia, ReplyTo, StoreError, Touched,
};
use uuid::Uuid;

use super::{Report, identity};
use crate::events;

/// Stores one inbound message (or applies an edit or deletion).
pub(super) async fn store(
    db: &Db,
    org_id: Uuid,
    pnid: &str,
    value: &MessagesValue,
    m: &InboundMessage,
    report: &mut Report,
) -> Result<(), StoreError> {
    let now = now_ms();
    // The window is computed from the network's timestamp, not from arrival time.
    let sent_at = m.timestamp.map(|s| s.saturating_mul(1000)).unwrap_or(now);
    match &m.content {
        InboundContent::Edit {
            original_id: Some(original),
            content,
            ..
        } => {
            let new_content = m.content_object().unwrap_or(Value::Null);
            let text = text_of(content);
            let edited = edit(
                db,
                org_id,
                (original, &m.id),
                text.as_deref(),
                &new_content,
                sent_at,
                now,
            )
            .await?;
            if edited.is_some() {
                report.messages_updated += 1;
                return Ok(());
            }
            // The original has not arrived (webhooks come out of order): the message is
            // created as it reads now, under the original's wamid; the original, when it
            // comes, only fills in its own time and type (`Db::insert_message`).
        }
        InboundContent::Revoke {
            original_id: Some(original),
        } => {
            let revoked = revoke(db, org_id, (original, &m.id), sent_at, now).await?;
            if revoked.is_some() {
                report.messages_updated += 1;
                return Ok(());
            }
            // As for an edit: a deleted message, which its original will not bring back.
        }
        _ => {}
    }

    let mut sender = value.sender(m);
    if let Some(change) = m.identity_change() {
        // A new BSUID or phone: the customer's contact moves to it (merged with a contact
        // that already holds it), and this message is theirs under the new identifiers.
        let changed = db
            .change_identity(org_id, &ids(&change.previous), &ids(&change.current), now)
            .await?;
        report.contacts_updated += usize::from(changed.is_some());
        sender = sender.after(&change);
    }
    let who = identity(&sender);
    if !who.is_known() {
        tracing::warn!(wamid = %m.id, "inbound message without sender dropped");
        return Ok(());
    }
    // The network's notice (a new number, a new BSUID) is not the customer writing: it
    // neither opens the 24-hour window nor moves the contact's last inbound time.
    let notice = matches!(m.content, InboundContent::System { .. });
    let observed = if notice {
        db.record_notice(org_id, &who, new_id(), now).await?
    } else {
        db.record_inbound(
            org_id,
            &who,
            sender.profile_name.as_deref(),
            sent_at,
            new_id(),
            now,
        )
        .await?
    };
    report.contacts_updated += usize::from(observed.merged.is_some());
    let contact = observed.contact;
    let conversation = db
        .get_or_create_conversation(org_id, contact.id, pnid, new_id(), now)
        .await?;
    if notice {
        db.touch_conversation_message(conversation.id, now).await?;
    } else {
        db.touch_conversation_inbound(conversation.id, sent_at, now)
            .await?;
    }

    // An edit or deletion that reaches here names a message Tern does not hold yet.
    let mut parts = Parts::of(m, sent_at);
    if parts.reaction {
        let target = match parts.reacted_wamid() {
            Some(w) => db.message_id_by_wamid(org_id, w).await?,
            None => None,
        };
        parts.set_reacted(target);
    }
    let reply_to = match m.reply_to_wamid() {
        Some(wamid) => Some(ReplyTo {
            message_id: db.message_id_by_wamid(org_id, wamid).await?,
            wamid: wamid.to_string(),
        }),
        None => None,
    };
    let row = parts.into_row(
        (org_id, pnid, m),
        (conversation.id, contact.id),
        reply_to,
        (sent_at, now),
    );
    let mut tx = db.begin().await?;
    let inserted = tx.insert_message(&row).await?;
    if inserted == Inserted::New {
        // An edit or deletion that came before its original made this row: that is an
        // entry of its timeline (the `received` entry is the row itself).
        if row.edited_at.is_some() {
            tx.add_timeline(
                row.id,
                now,
                &Detail::Edited {
                    wamid: m.id.clone(),
                },
            );
        }
        if row.revoked_at.is_some() {
            tx.add_timeline(
                row.id,
                now,
                &Detail::Revoked {
                    wamid: m.id.clone(),
                },
            );
        }
        events::message_received(&mut tx, &row).await?;
    }
    tx.commit().await?;
    // After the message (the finished download links to it), and also when it was stored
    // before: a batch applied again after a crash between the two writes still gets its
    // job (keyed by the wamid, written once).
    if let Some(job) = media_job(org_id, pnid, m)
        && row.edited_at.is_none()
    {
        db.enqueue_inbound_media(&job, now).await?;
    }
    if inserted != Inserted::Duplicate {
        metrics::counter!("tern_network_events_total", "kind" => "inbound").increment(1);
        report.inbound_stored += 1;
        return Ok(());
    }
    // The original was stored meanwhile (another batch, applied concurrently): the edit or
    // deletion applies to it now.
    let applied = match &m.content {
        InboundContent::Edit {
            original_id: Some(original),
            ..
        } => edit(
            db,
            org_id,
            (original, &m.id),
            row.text.as_deref(),
            row.content.as_ref().unwrap_or(&Value::Null),
            sent_at,
            now,
        )
        .await?
        .is_some_and(|t| t.changed || t.message.edited_at == Some(sent_at)),
        InboundContent::Revoke {
            original_id: Some(original),
        } => revoke(db, org_id, (original, &m.id), sent_at, now)
            .await?
            .is_some_and(|t| t.changed || t.message.revoked_at == Some(sent_at)),
        _ => false,
    };
    if applied {
        report.messages_updated += 1;
    } else {
        report.inbound_duplicates += 1;
    }
    Ok(())
}

/// What a stored inbound message is made of, besides whose it is: under which wamid, its
/// type, text and content, and when it was edited or deleted (an edit or deletion whose
/// original Tern does not hold is stored as the original's row).
pub(super) struct Parts {
    wamid: String,
    kind: String,
    text: Option<String>,
    content: Option<Value>,
    edited_at: Option<i64>,
    revoked_at: Option<i64>,
    /// A reaction: its content names the message's id too ([`Parts::set_reacted`]).
    pub(super) reaction: bool,
}

impl Parts {
    pub(super) fn of(m: &InboundMessage, sent_at: i64) -> Parts {
        let (wamid, kind, text, content, edited_at, revoked_at) = match &m.content {
            InboundContent::Edit {
                original_id: Some(original),
                type_name,
                content,
                ..
            } => (
                original.clone(),
                type_name.clone(),
                text_of(content),
                m.content_object(),
                Some(sent_at),
                None,
            ),
            InboundContent::Revoke {
                original_id: Some(original),
            } => (
                original.clone(),
                "unknown".to_string(),
                None,
                None,
                None,
                Some(sent_at),
            ),
            other => (
                m.id.clone(),
                m.type_name.clone(),
                text_of(other),
                m.content_object(),
                None,
                None,
            ),
        };
        Parts {
            wamid,
            kind,
            text,
            content,
            edited_at,
            revoked_at,
            reaction: matches!(m.content, InboundContent::Reaction { .. }),
        }
    }

    /// The wamid a reaction is to, when its content names one.
    pub(super) fn reacted_wamid(&self) -> Option<&str> {
        match &self.content {
            Some(Value::Object(o)) if self.reaction => o.get("wamid").and_then(Value::as_str),
            _ => None,
        }
    }

    /// The id of the message a reaction is to (`None`: Tern does not hold it).
    pub(super) fn set_reacted(&mut self, target: Option<Uuid>) {
        if let (true, Some(Value::Object(o))) = (self.reaction, &mut self.content) {
            o.insert(
                "message_id".into(),
                target.map_or(Value::Null, |id| Value::String(id.to_string())),
            );
        }
    }

    /// The row of `m`, received on the organisation's number, in the conversation with
    /// its contact.
    pub(super) fn into_row(
        self,
        (org_id, pnid, m): (Uuid, &str, &InboundMessage),
        (conversation_id, contact_id): (Uuid, Uuid),
        reply_to: Option<ReplyTo>,
        (sent_at, now): (i64, i64),
    ) -> Message {
        Message {
            id: new_id(),
            org_id,
            conversation_id,
            contact_id,
            phone_number_id: pnid.to_string(),
            direction: Direction::Inbound,
            r#type: self.kind,
            status: Status::Received,
            template_name: None,
            template_language: None,
            text: self.text,
            media_id: None,
            wamid: Some(self.wamid),
            request: m.raw.clone(),
            campaign_id: None,
            created_at: sent_at,
            sent_at: None,
            delivered_at: None,
            read_at: None,
            failed_at: None,
            failure_code: None,
            failure: None,
            updated_at: now,
            content: self.content,
            reply_to,
            referral: m.referral.clone(),
            edited_at: self.edited_at,
            revoked_at: self.revoked_at,
            pricing: None,
        }
    }
}

/// The download job of a media message's file (keyed by the message's wamid).
pub(super) fn media_job(org_id: Uuid, pnid: &str, m: &InboundMessage) -> Option<NewInboundMedia> {
    let file = media_of(&m.content)?;
    Some(NewInboundMedia {
        org_id,
        wamid: m.id.clone(),
        phone_number_id: pnid.to_string(),
        network_media_id: file.id.clone()?,
        mime_type: file.mime_type.clone(),
        sha256: file.sha256.clone(),
        filename: file.filename.clone(),
    })
}

/// An edit or deletion as [`Tx::change_inbound_messages`] applies it (owned), with the
/// timeline entry it makes when it changes the message.
pub(super) struct Change {
    pub(super) original: String,
    text: Option<String>,
    content: Value,
    at: i64,
    revoke: bool,
    pub(super) detail: Detail,
}

impl Change {
    /// `m`'s change, if it is an edit or deletion of a named message.
    pub(super) fn of(m: &InboundMessage, now: i64) -> Option<Change> {
        let at = m.timestamp.map(|s| s.saturating_mul(1000)).unwrap_or(now);
        match &m.content {
            InboundContent::Edit {
                original_id: Some(original),
                content,
                ..
            } => Some(Change {
                original: original.clone(),
                text: text_of(content),
                content: m.content_object().unwrap_or(Value::Null),
                at,
                revoke: false,
                detail: Detail::Edited {
                    wamid: m.id.clone(),
                },
            }),
            InboundContent::Revoke {
                original_id: Some(original),
            } => Some(Change {
                original: original.clone(),
                text: None,
                content: Value::Null,
                at,
                revoke: true,
                detail: Detail::Revoked {
                    wamid: m.id.clone(),
                },
            }),
            _ => None,
        }
    }

    pub(super) fn as_store(&self) -> InboundChange<'_> {
        if self.revoke {
            InboundChange::Revoke {
                wamid: &self.original,
                at: self.at,
            }
        } else {
            InboundChange::Edit {
                wamid: &self.original,
                text: self.text.as_deref(),
                content: &self.content,
                at: self.at,
            }
        }
    }
}

/// Applies a customer's edit (notice `notice`) of `wamid` with the `message.updated` event
/// and the `edited` timeline entry in one transaction. `None`: Tern does not hold the
/// message.
async fn edit(
    db: &Db,
    org_id: Uuid,
    (wamid, notice): (&str, &str),
    text: Option<&str>,
    content: &Value,
    at: i64,
    now: i64,
) -> Result<Option<Touched>, StoreError> {
    let mut tx = db.begin().await?;
    let t = tx
        .edit_inbound_message(org_id, wamid, text, content, at, now)
        .await?;
    if let Some(t) = &t
        && t.changed
    {
        let edited = Detail::Edited {
            wamid: notice.to_string(),
        };
        tx.add_timeline(t.message.id, now, &edited);
        events::message_updated(&mut tx, &t.message).await?;
    }
    tx.commit().await?;
    Ok(t)
}

/// Applies a customer's deletion (notice `notice`) of `wamid` with the `message.updated`
/// event and the `revoked` timeline entry in one transaction. `None`: Tern does not hold
/// the message.
async fn revoke(
    db: &Db,
    org_id: Uuid,
    (wamid, notice): (&str, &str),
    at: i64,
    now: i64,
) -> Result<Option<Touched>, StoreError> {
    let mut tx = db.begin().await?;
    let t = tx.revoke_inbound_message(org_id, wamid, at, now).await?;
    if let Some(t) = &t
        && t.changed
    {
        let revoked = Detail::Revoked {
            wamid: notice.to_string(),
        };
        tx.add_timeline(t.message.id, now, &revoked);
        events::message_updated(&mut tx, &t.message).await?;
    }
    tx.commit().await?;
    Ok(t)
}

/// The file of a media message (downloaded by the inbound-media job).
fn media_of(c: &InboundContent) -> Option<&InboundMedia> {
    match c {
        InboundContent::Image(f)
        | InboundContent::Video(f)
        | InboundContent::Audio(f)
        | InboundContent::Document(f)
        | InboundContent::Sticker(f) => Some(f),
        _ => None,
    }
}

/// The Message's `text`: the body for text, the caption for media, otherwise `None`
/// (DESIGN.md); everything else a customer sent is in `content`.
fn text_of(c: &InboundContent) -> Option<String> {
    match c {
        InboundContent::Text { body } => Some(body.clone()),
        InboundContent::Image(m) | InboundContent::Video(m) | InboundContent::Document(m) => {
            m.caption.clone()
        }
        _ => None,
    }
}

/// Identifiers as the store matches them.
fn ids(i: &Ids) -> Identity<'_> {
    Identity {
        wa_id: i.wa_id.as_deref(),
        user_id: i.user_id.as_deref(),
        parent_user_id: i.parent_user_id.as_deref(),
        username: None,
    }
}
