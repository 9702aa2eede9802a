//! Tolerant parser for network → Tern webhook notifications.
//!
//! The network batches up to ~1000 updates per POST and adds fields and enum values over
//! time, so the parser is deliberately lenient, item by item:
//!
//! * only a body that is not JSON, or whose root is not an object, is an error
//!   ([`ParseError`]); every other oddity degrades locally;
//! * an unknown `field` becomes [`Change::Other`] with the raw value;
//! * an unknown message `type` becomes [`InboundContent::Unknown`]; an unknown status becomes
//!   [`DeliveryStatus::Unknown`]; an unknown template event becomes [`TemplateEvent::Unknown`];
//! * a message or status without its `id` is not dropped silently but kept in
//!   [`MessagesValue::malformed`] so the caller can log it;
//! * numbers given as strings (timestamps, coordinates, ids) and vice versa are accepted;
//! * every parsed item keeps its `raw` JSON for storage and debugging.
//!
//! Nothing in here indexes or unwraps, so arbitrary input cannot panic (checked by proptest).
//!
//! # Identities (2026, business-scoped user ids)
//! A user may be known by a phone-number `wa_id`, a business-scoped user id (BSUID,
//! `US.13491208655302741918`), a parent BSUID (`US.ENT.…`) and a username; since 2026 the
//! phone number may be absent. Messages carry `from` / `from_user_id` /
//! `from_parent_user_id`, statuses `recipient_id` / `recipient_user_id` /
//! `recipient_parent_user_id`, and `value.contacts[]` carries `wa_id`, `user_id`,
//! `parent_user_id`, `profile.name`, `profile.username`. [`MessagesValue::sender`] and
//! [`MessagesValue::recipient`] merge them into one [`Sender`]. Empty strings count as absent.
//!
//! # Other fields
//! * `template_category_update` → [`Change::TemplateCategory`] (`message_template_id`,
//!   `message_template_name`, `message_template_language`, `previous_category`,
//!   `new_category`, `correct_category`);
//!
//! # Identity changes
//! The network reports that a customer changed identifiers as a `system` message on the
//! `messages` field (there is no field of its own): `user_changed_user_id` (new BSUID in
//! `system.user_id`, the old one in `system.previous_user_id`, no `from` and no `contacts`)
//! and `user_changed_number` (old phone in `from`, new one in `system.wa_id`, formerly
//! `new_wa_id`). [`InboundMessage::identity_change`] reads either as an [`IdentityChange`].

use serde::Serialize;
use serde_json::Value;

use crate::error::{WebhookError, value_as_i64, value_as_string};

mod content;
mod identity;

use content::content_object_of;
pub use identity::{IdentityChange, Ids, Sender};

/// Deepest `edit` nesting parsed (an edit's message is never itself an edit on the network;
/// the bound only keeps hostile input from recursing).
const MAX_EDIT_DEPTH: u8 = 2;

/// The body was not a JSON object at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("notification body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("notification body is not a JSON object")]
    NotAnObject,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notification {
    /// `whatsapp_business_account` for everything Tern subscribes to.
    pub object: Option<String>,
    pub entries: Vec<Entry>,
}

impl Notification {
    /// All `messages`-field values across entries, with their WABA id.
    pub fn messages_values(&self) -> impl Iterator<Item = (&str, &MessagesValue)> {
        self.entries.iter().flat_map(|e| {
            e.changes.iter().filter_map(move |c| match c {
                Change::Messages(v) => Some((e.id.as_str(), v)),
                _ => None,
            })
        })
    }

    /// All template status updates across entries, with their WABA id.
    pub fn template_updates(&self) -> impl Iterator<Item = (&str, &TemplateStatusUpdate)> {
        self.entries.iter().flat_map(|e| {
            e.changes.iter().filter_map(move |c| match c {
                Change::TemplateStatus(v) => Some((e.id.as_str(), v)),
                _ => None,
            })
        })
    }

    /// All template category updates across entries, with their WABA id.
    pub fn template_category_updates(
        &self,
    ) -> impl Iterator<Item = (&str, &TemplateCategoryUpdate)> {
        self.entries.iter().flat_map(|e| {
            e.changes.iter().filter_map(move |c| match c {
                Change::TemplateCategory(v) => Some((e.id.as_str(), v)),
                _ => None,
            })
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// WABA id (empty when missing).
    pub id: String,
    pub time: Option<i64>,
    pub changes: Vec<Change>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "field", rename_all = "snake_case")]
pub enum Change {
    Messages(MessagesValue),
    #[serde(rename = "message_template_status_update")]
    TemplateStatus(TemplateStatusUpdate),
    #[serde(rename = "template_category_update")]
    TemplateCategory(TemplateCategoryUpdate),
    /// Any other field (quality updates, account updates, …), kept raw.
    Other {
        name: String,
        value: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Metadata {
    pub phone_number_id: Option<String>,
    pub display_phone_number: Option<String>,
}

/// `value` of a `messages` change.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct MessagesValue {
    pub messaging_product: Option<String>,
    pub metadata: Metadata,
    pub contacts: Vec<Contact>,
    pub messages: Vec<InboundMessage>,
    pub statuses: Vec<StatusUpdate>,
    /// System-level errors (`value.errors[]`).
    pub errors: Vec<WebhookError>,
    /// Message/status items that could not be used (e.g. no `id`), kept raw.
    pub malformed: Vec<Value>,
}

/// One entry of `value.contacts[]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Contact {
    /// Phone digits; absent when the user hides the number behind a username.
    pub wa_id: Option<String>,
    /// Business-scoped user id (2026+).
    pub user_id: Option<String>,
    /// Parent BSUID shared across managed portfolios (`US.ENT.…`), where enabled.
    pub parent_user_id: Option<String>,
    /// `profile.name`.
    pub profile_name: Option<String>,
    /// `profile.username` (when the user has one).
    pub username: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboundMessage {
    /// wamid.
    pub id: String,
    /// Sender wa_id (may be absent with BSUIDs).
    pub from: Option<String>,
    /// Sender's business-scoped user id (`from_user_id`, 2026+).
    pub from_user_id: Option<String>,
    /// Sender's parent BSUID (`from_parent_user_id`), where enabled.
    pub from_parent_user_id: Option<String>,
    /// Seconds since epoch, when the network received the message.
    pub timestamp: Option<i64>,
    /// Raw `type` value.
    pub type_name: String,
    pub content: InboundContent,
    pub context: Option<InboundContext>,
    /// Click-to-WhatsApp ad referral, raw.
    pub referral: Option<Value>,
    pub errors: Vec<WebhookError>,
    pub raw: Value,
}

impl InboundMessage {
    /// wamid of the message this one quotes or answers (`context.id`).
    pub fn reply_to_wamid(&self) -> Option<&str> {
        self.context.as_ref().and_then(|c| c.id.as_deref())
    }

    /// The message's type object in the network's shape, for storing as the content of
    /// Tern's Message: `raw[type]`, except that
    /// * media (image, video, audio, document, sticker) lose the network-internal `id` and
    ///   `url` (usable only with the business token) and keep everything else;
    /// * `reaction` is `{"wamid": <reacted message's wamid>, "emoji": <emoji or null>}`
    ///   (null = reaction removed);
    /// * `location` coordinates sent as strings become numbers;
    /// * `request_welcome` without an object is `{}`;
    /// * `edit` is the new message's object (with the same rules);
    /// * an unknown or unsupported kind is its raw object if there is one, else the whole
    ///   message without `from`, `from_user_id`, `from_parent_user_id`, `id`, `timestamp`
    ///   and `type`, so unknown content is never dropped.
    ///
    /// `None` only when there is nothing at all to keep.
    pub fn content_object(&self) -> Option<Value> {
        content_object_of(&self.content, &self.type_name, &self.raw)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct InboundContext {
    /// Sender of the quoted message (the business number for replies to us).
    pub from: Option<String>,
    /// wamid of the quoted message (e.g. the template whose button was tapped).
    pub id: Option<String>,
    pub forwarded: bool,
    pub frequently_forwarded: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InboundContent {
    Text {
        body: String,
    },
    Image(InboundMedia),
    Video(InboundMedia),
    Audio(InboundMedia),
    Document(InboundMedia),
    Sticker(InboundMedia),
    Location(InboundLocation),
    /// Contact cards in the network's format.
    Contacts {
        contacts: Vec<Value>,
    },
    Interactive(InteractiveReply),
    /// Template quick-reply button tap.
    Button {
        text: Option<String>,
        payload: Option<String>,
    },
    Reaction {
        message_id: Option<String>,
        /// `None` = reaction removed.
        emoji: Option<String>,
    },
    Order {
        catalog_id: Option<String>,
        text: Option<String>,
        product_items: Vec<Value>,
    },
    System {
        body: Option<String>,
        system_type: Option<String>,
        /// The NEW phone (`user_changed_number`: `wa_id`, formerly `new_wa_id`).
        new_wa_id: Option<String>,
        /// The NEW business-scoped user id (`user_changed_user_id`).
        user_id: Option<String>,
        /// The new parent BSUID, where enabled.
        parent_user_id: Option<String>,
        /// The OLD business-scoped user id (`user_changed_user_id`).
        previous_user_id: Option<String>,
        /// The old parent BSUID, where enabled.
        previous_parent_user_id: Option<String>,
    },
    /// The user edited an earlier message: `edit.original_message_id` and the new message
    /// (`edit.message`), parsed like any message.
    Edit {
        /// wamid of the message that was edited.
        original_id: Option<String>,
        /// `type` of the new message.
        type_name: String,
        content: Box<InboundContent>,
        /// The new message's own type object (e.g. `{"body": "…"}`), raw.
        object: Option<Value>,
    },
    /// The user deleted an earlier message.
    Revoke {
        /// wamid of the message that was deleted.
        original_id: Option<String>,
    },
    RequestWelcome,
    /// `unsupported`: the network could not represent it (see `errors`, usually 131051).
    Unsupported,
    /// A type this parser does not know (or a known type with an unusable object).
    Unknown {
        type_name: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct InboundMedia {
    pub id: Option<String>,
    pub mime_type: Option<String>,
    /// base64 SHA-256 as sent by the network.
    pub sha256: Option<String>,
    pub caption: Option<String>,
    pub filename: Option<String>,
    pub url: Option<String>,
    pub voice: Option<bool>,
    pub animated: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct InboundLocation {
    pub latitude: Option<f64>,
    pub longitude: Option<f64>,
    pub name: Option<String>,
    pub address: Option<String>,
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reply_type", rename_all = "snake_case")]
pub enum InteractiveReply {
    ButtonReply {
        id: Option<String>,
        title: Option<String>,
    },
    ListReply {
        id: Option<String>,
        title: Option<String>,
        description: Option<String>,
    },
    /// Flow / address message reply; `response_json` is a JSON-encoded string.
    NfmReply {
        name: Option<String>,
        body: Option<String>,
        response_json: Option<String>,
    },
    Unknown {
        reply_type_name: String,
        raw: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    Sent,
    Delivered,
    Read,
    Failed,
    Played,
    Unknown(String),
}

impl DeliveryStatus {
    pub fn parse(s: &str) -> Self {
        match s {
            "sent" => Self::Sent,
            "delivered" => Self::Delivered,
            "read" => Self::Read,
            "failed" => Self::Failed,
            "played" => Self::Played,
            other => Self::Unknown(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Sent => "sent",
            Self::Delivered => "delivered",
            Self::Read => "read",
            Self::Failed => "failed",
            Self::Played => "played",
            Self::Unknown(s) => s,
        }
    }

    /// The message status this report means in Tern; `None` for one Tern does not know.
    /// `played` (voice) comes after `read` and implies it.
    pub fn message_status(&self) -> Option<tern_domain::message::Status> {
        use tern_domain::message::Status;
        match self {
            Self::Sent => Some(Status::Sent),
            Self::Delivered => Some(Status::Delivered),
            Self::Read | Self::Played => Some(Status::Read),
            Self::Failed => Some(Status::Failed),
            Self::Unknown(_) => None,
        }
    }
}

impl Serialize for DeliveryStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusUpdate {
    /// wamid of the message this status is about.
    pub id: String,
    pub status: DeliveryStatus,
    pub timestamp: Option<i64>,
    /// Phone wa_id (when the message was sent to a phone) or group id.
    pub recipient_id: Option<String>,
    /// Recipient's business-scoped user id (2026+).
    pub recipient_user_id: Option<String>,
    pub recipient_parent_user_id: Option<String>,
    pub recipient_type: Option<String>,
    /// Tern's message id, echoed.
    pub biz_opaque_callback_data: Option<String>,
    pub conversation: Option<Conversation>,
    pub pricing: Option<Pricing>,
    pub errors: Vec<WebhookError>,
    pub raw: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Conversation {
    pub id: Option<String>,
    pub expiration_timestamp: Option<i64>,
    pub origin_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Pricing {
    pub billable: Option<bool>,
    pub pricing_model: Option<String>,
    /// `regular` / `free_customer_service` / `free_entry_point`.
    pub pricing_type: Option<String>,
    pub category: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TemplateEvent {
    Approved,
    Rejected,
    Pending,
    Paused,
    Disabled,
    Flagged,
    Reinstated,
    InAppeal,
    LimitExceeded,
    Locked,
    Archived,
    Unarchived,
    Deleted,
    PendingDeletion,
    Unknown(String),
}

impl TemplateEvent {
    pub fn parse(s: &str) -> Self {
        match s {
            "APPROVED" => Self::Approved,
            "REJECTED" => Self::Rejected,
            "PENDING" => Self::Pending,
            "PAUSED" => Self::Paused,
            "DISABLED" => Self::Disabled,
            "FLAGGED" => Self::Flagged,
            "REINSTATED" => Self::Reinstated,
            "IN_APPEAL" => Self::InAppeal,
            "LIMIT_EXCEEDED" => Self::LimitExceeded,
            "LOCKED" => Self::Locked,
            "ARCHIVED" => Self::Archived,
            "UNARCHIVED" => Self::Unarchived,
            "DELETED" => Self::Deleted,
            "PENDING_DELETION" => Self::PendingDeletion,
            other => Self::Unknown(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Approved => "APPROVED",
            Self::Rejected => "REJECTED",
            Self::Pending => "PENDING",
            Self::Paused => "PAUSED",
            Self::Disabled => "DISABLED",
            Self::Flagged => "FLAGGED",
            Self::Reinstated => "REINSTATED",
            Self::InAppeal => "IN_APPEAL",
            Self::LimitExceeded => "LIMIT_EXCEEDED",
            Self::Locked => "LOCKED",
            Self::Archived => "ARCHIVED",
            Self::Unarchived => "UNARCHIVED",
            Self::Deleted => "DELETED",
            Self::PendingDeletion => "PENDING_DELETION",
            Self::Unknown(s) => s,
        }
    }
}

impl Serialize for TemplateEvent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// `value` of a `message_template_status_update` change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateStatusUpdate {
    pub event: TemplateEvent,
    /// Template id (sent as a number; kept as a string like the management API's ids).
    pub message_template_id: Option<String>,
    pub name: Option<String>,
    pub language: Option<String>,
    /// `NONE`, `INVALID_FORMAT`, …; `None` when null.
    pub reason: Option<String>,
    pub category: Option<String>,
    pub raw: Value,
}

/// `value` of a `template_category_update` change: the network changed (or announces it
/// will change) a template's category.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TemplateCategoryUpdate {
    /// Template id (sent as a number; kept as a string).
    pub message_template_id: Option<String>,
    pub name: Option<String>,
    pub language: Option<String>,
    /// The category before the change (present when the change has happened).
    pub previous_category: Option<String>,
    /// The category in force: after the change, or (with `correct_category`) still the
    /// current one.
    pub new_category: Option<String>,
    /// The category the template will be moved to later (announced ~24 h ahead).
    pub correct_category: Option<String>,
    pub raw: Value,
}

/// Parse a raw webhook body. Fails only when the body is not a JSON object.
pub fn parse_notification(raw: &[u8]) -> Result<Notification, ParseError> {
    let root: Value =
        serde_json::from_slice(raw).map_err(|e| ParseError::InvalidJson(e.to_string()))?;
    parse_notification_value(&root)
}

/// Same as [`parse_notification`] for an already-decoded value.
pub fn parse_notification_value(root: &Value) -> Result<Notification, ParseError> {
    if !root.is_object() {
        return Err(ParseError::NotAnObject);
    }
    let entries = array(root, "entry").iter().map(parse_entry).collect();
    Ok(Notification {
        object: string(root, "object"),
        entries,
    })
}

fn parse_entry(e: &Value) -> Entry {
    Entry {
        id: string(e, "id").unwrap_or_default(),
        time: int(e, "time"),
        changes: array(e, "changes").iter().map(parse_change).collect(),
    }
}

fn parse_change(c: &Value) -> Change {
    let field = string(c, "field").unwrap_or_default();
    let value = c.get("value").cloned().unwrap_or(Value::Null);
    match field.as_str() {
        "messages" if value.is_object() => Change::Messages(parse_messages_value(&value)),
        "message_template_status_update" if value.is_object() => {
            Change::TemplateStatus(parse_template_update(value))
        }
        "template_category_update" if value.is_object() => {
            Change::TemplateCategory(parse_template_category_update(value))
        }
        _ => Change::Other { name: field, value },
    }
}

fn parse_metadata(v: &Value) -> Metadata {
    v.get("metadata")
        .map(|m| Metadata {
            phone_number_id: string(m, "phone_number_id"),
            display_phone_number: string(m, "display_phone_number"),
        })
        .unwrap_or_default()
}

fn parse_messages_value(v: &Value) -> MessagesValue {
    let mut out = MessagesValue {
        messaging_product: string(v, "messaging_product"),
        metadata: parse_metadata(v),
        contacts: array(v, "contacts")
            .iter()
            .map(|c| {
                let profile = c.get("profile");
                Contact {
                    wa_id: ident(c, "wa_id"),
                    user_id: ident(c, "user_id"),
                    parent_user_id: ident(c, "parent_user_id"),
                    profile_name: profile.and_then(|p| string(p, "name")),
                    username: profile.and_then(|p| ident(p, "username")),
                }
            })
            .collect(),
        errors: errors(v),
        ..Default::default()
    };
    for m in array(v, "messages") {
        match parse_message(m) {
            Some(msg) => out.messages.push(msg),
            None => out.malformed.push(m.clone()),
        }
    }
    for s in array(v, "statuses") {
        match parse_status(s) {
            Some(st) => out.statuses.push(st),
            None => out.malformed.push(s.clone()),
        }
    }
    out
}

fn parse_message(m: &Value) -> Option<InboundMessage> {
    let id = string(m, "id").filter(|s| !s.is_empty())?;
    let type_name = string(m, "type").unwrap_or_default();
    let content = parse_content(&type_name, m, 0);
    let context = m
        .get("context")
        .filter(|c| c.is_object())
        .map(|c| InboundContext {
            from: string(c, "from"),
            id: string(c, "id"),
            forwarded: boolean(c, "forwarded").unwrap_or(false),
            frequently_forwarded: boolean(c, "frequently_forwarded").unwrap_or(false),
        });
    Some(InboundMessage {
        id,
        from: ident(m, "from"),
        from_user_id: ident(m, "from_user_id"),
        from_parent_user_id: ident(m, "from_parent_user_id"),
        timestamp: int(m, "timestamp"),
        type_name,
        content,
        context,
        referral: m.get("referral").filter(|r| !r.is_null()).cloned(),
        errors: errors(m),
        raw: m.clone(),
    })
}

fn parse_content(type_name: &str, m: &Value, depth: u8) -> InboundContent {
    let unknown = || InboundContent::Unknown {
        type_name: type_name.to_owned(),
    };
    let obj = m.get(type_name);
    match type_name {
        "text" => match obj.and_then(|t| string(t, "body")) {
            Some(body) => InboundContent::Text { body },
            None => unknown(),
        },
        "image" | "video" | "audio" | "document" | "sticker" => {
            let Some(o) = obj.filter(|o| o.is_object()) else {
                return unknown();
            };
            let media = InboundMedia {
                id: string(o, "id"),
                mime_type: string(o, "mime_type"),
                sha256: string(o, "sha256"),
                caption: string(o, "caption"),
                filename: string(o, "filename"),
                url: string(o, "url"),
                voice: boolean(o, "voice"),
                animated: boolean(o, "animated"),
            };
            match type_name {
                "image" => InboundContent::Image(media),
                "video" => InboundContent::Video(media),
                "audio" => InboundContent::Audio(media),
                "document" => InboundContent::Document(media),
                _ => InboundContent::Sticker(media),
            }
        }
        "location" => match obj.filter(|o| o.is_object()) {
            Some(o) => InboundContent::Location(InboundLocation {
                latitude: float(o, "latitude"),
                longitude: float(o, "longitude"),
                name: string(o, "name"),
                address: string(o, "address"),
                url: string(o, "url"),
            }),
            None => unknown(),
        },
        "contacts" => match obj.and_then(Value::as_array) {
            Some(a) => InboundContent::Contacts {
                contacts: a.clone(),
            },
            None => unknown(),
        },
        "interactive" => match obj.filter(|o| o.is_object()) {
            Some(o) => InboundContent::Interactive(parse_interactive(o)),
            None => unknown(),
        },
        "button" => match obj.filter(|o| o.is_object()) {
            Some(o) => InboundContent::Button {
                text: string(o, "text"),
                payload: string(o, "payload"),
            },
            None => unknown(),
        },
        "reaction" => match obj.filter(|o| o.is_object()) {
            Some(o) => InboundContent::Reaction {
                message_id: string(o, "message_id"),
                emoji: string(o, "emoji").filter(|e| !e.is_empty()),
            },
            None => unknown(),
        },
        "order" => match obj.filter(|o| o.is_object()) {
            Some(o) => InboundContent::Order {
                catalog_id: string(o, "catalog_id"),
                text: string(o, "text"),
                product_items: array(o, "product_items").to_vec(),
            },
            None => unknown(),
        },
        "system" => match obj.filter(|o| o.is_object()) {
            Some(o) => InboundContent::System {
                body: string(o, "body"),
                system_type: string(o, "type"),
                new_wa_id: ident(o, "new_wa_id").or_else(|| ident(o, "wa_id")),
                user_id: ident(o, "user_id"),
                parent_user_id: ident(o, "parent_user_id"),
                previous_user_id: ident(o, "previous_user_id"),
                previous_parent_user_id: ident(o, "previous_parent_user_id"),
            },
            None => unknown(),
        },
        "edit" if depth < MAX_EDIT_DEPTH => match obj.filter(|o| o.is_object()) {
            Some(o) => {
                let inner = o.get("message").filter(|i| i.is_object());
                let inner_type = inner.and_then(|i| string(i, "type")).unwrap_or_default();
                let content = match inner {
                    Some(i) => parse_content(&inner_type, i, depth + 1),
                    None => InboundContent::Unknown {
                        type_name: inner_type.clone(),
                    },
                };
                InboundContent::Edit {
                    original_id: ident(o, "original_message_id"),
                    object: inner
                        .and_then(|i| i.get(&inner_type))
                        .filter(|x| !x.is_null())
                        .cloned(),
                    type_name: inner_type,
                    content: Box::new(content),
                }
            }
            None => unknown(),
        },
        "revoke" => match obj.filter(|o| o.is_object()) {
            Some(o) => InboundContent::Revoke {
                original_id: ident(o, "original_message_id"),
            },
            None => unknown(),
        },
        "request_welcome" => InboundContent::RequestWelcome,
        "unsupported" => InboundContent::Unsupported,
        _ => unknown(),
    }
}

fn parse_interactive(o: &Value) -> InteractiveReply {
    let kind = string(o, "type").unwrap_or_default();
    let inner = o.get(&kind);
    match (kind.as_str(), inner) {
        ("button_reply", Some(r)) => InteractiveReply::ButtonReply {
            id: string(r, "id"),
            title: string(r, "title"),
        },
        ("list_reply", Some(r)) => InteractiveReply::ListReply {
            id: string(r, "id"),
            title: string(r, "title"),
            description: string(r, "description"),
        },
        ("nfm_reply", Some(r)) => InteractiveReply::NfmReply {
            name: string(r, "name"),
            body: string(r, "body"),
            response_json: r.get("response_json").and_then(|j| match j {
                Value::String(s) => Some(s.clone()),
                Value::Null => None,
                other => Some(other.to_string()),
            }),
        },
        _ => InteractiveReply::Unknown {
            reply_type_name: kind,
            raw: o.clone(),
        },
    }
}

fn parse_status(s: &Value) -> Option<StatusUpdate> {
    let id = string(s, "id").filter(|i| !i.is_empty())?;
    let status = DeliveryStatus::parse(&string(s, "status").unwrap_or_default());
    let conversation = s
        .get("conversation")
        .filter(|c| c.is_object())
        .map(|c| Conversation {
            id: string(c, "id"),
            expiration_timestamp: int(c, "expiration_timestamp"),
            origin_type: c.get("origin").and_then(|o| string(o, "type")),
        });
    let pricing = s.get("pricing").filter(|p| p.is_object()).map(|p| Pricing {
        billable: boolean(p, "billable"),
        pricing_model: string(p, "pricing_model"),
        pricing_type: string(p, "type"),
        category: string(p, "category"),
    });
    Some(StatusUpdate {
        id,
        status,
        timestamp: int(s, "timestamp"),
        recipient_id: ident(s, "recipient_id"),
        recipient_user_id: ident(s, "recipient_user_id"),
        recipient_parent_user_id: ident(s, "recipient_parent_user_id"),
        recipient_type: string(s, "recipient_type"),
        biz_opaque_callback_data: string(s, "biz_opaque_callback_data"),
        conversation,
        pricing,
        errors: errors(s),
        raw: s.clone(),
    })
}

fn parse_template_update(v: Value) -> TemplateStatusUpdate {
    TemplateStatusUpdate {
        event: TemplateEvent::parse(&string(&v, "event").unwrap_or_default()),
        message_template_id: string(&v, "message_template_id"),
        name: string(&v, "message_template_name"),
        language: string(&v, "message_template_language"),
        reason: string(&v, "reason"),
        category: string(&v, "message_template_category"),
        raw: v,
    }
}

fn parse_template_category_update(v: Value) -> TemplateCategoryUpdate {
    TemplateCategoryUpdate {
        message_template_id: string(&v, "message_template_id"),
        name: string(&v, "message_template_name"),
        language: string(&v, "message_template_language"),
        previous_category: ident(&v, "previous_category"),
        new_category: ident(&v, "new_category"),
        correct_category: ident(&v, "correct_category"),
        raw: v,
    }
}

// ---- lenient accessors -------------------------------------------------------------------

pub(super) fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(value_as_string)
}

/// An identifier: a string or number, with the empty string meaning absent.
pub(super) fn ident(v: &Value, key: &str) -> Option<String> {
    string(v, key).filter(|s| !s.is_empty())
}

pub(super) fn int(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(value_as_i64)
}

pub(super) fn float(v: &Value, key: &str) -> Option<f64> {
    match v.get(key)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

pub(super) fn boolean(v: &Value, key: &str) -> Option<bool> {
    match v.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

pub(super) fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn errors(v: &Value) -> Vec<WebhookError> {
    array(v, "errors")
        .iter()
        .map(WebhookError::from_value)
        .collect()
}
