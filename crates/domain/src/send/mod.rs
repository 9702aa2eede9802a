//! POST /messages: the `Idempotency-Key` header, the body fingerprint, the request body
//! (the network's own message shape, checked with every problem reported at once) and the
//! addressing rule (address, consent, a template's need of a phone number) and the 24-hour
//! window.
//!
//! Nothing here looks anything up: whether a `contact_id` exists, which number sends, and
//! whether a template is approved are answered later by the caller. [`parse_send`] only
//! says whether the body is well formed; template values are matched against the approved
//! template with [`crate::template::check_send`].

mod address;
mod content;
mod idempotency;
mod interactive;
mod json;
mod media;
mod template;
mod window;

use address::*;
pub use address::{Addressee, Refusal, To, address, address_template, parse_sender, sender_from};
use content::*;
pub use idempotency::*;
use interactive::*;
pub use json::*;
use media::*;
use template::*;
pub use window::*;

use crate::phone::Phone;
use crate::{ErrorCode, FieldError, Problem};
use serde_json::Value;

pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";
pub const IDEMPOTENCY_KEY_MIN_CHARS: usize = 8;
pub const IDEMPOTENCY_KEY_MAX_CHARS: usize = 128;
pub const MAX_TEXT_CHARS: usize = 4096;
pub const MAX_CAPTION_CHARS: usize = 1024;
pub const MAX_FILENAME_CHARS: usize = 240;
pub const MAX_URL_CHARS: usize = 2000;

/// Contact cards in one `contacts` message. The network documents no figure; this is the
/// WhatsApp app's limit for sharing contacts.
pub const MAX_CONTACTS: usize = 257;

/// Length of `context.message_id` and `reaction.message_id` (a wamid is about 60).
pub const MAX_MESSAGE_ID_CHARS: usize = 256;
pub const MAX_INTERACTIVE_BODY_CHARS: usize = 1024;
pub const MAX_LIST_BODY_CHARS: usize = 4096;
pub const MAX_INTERACTIVE_HEADER_CHARS: usize = 60;
pub const MAX_INTERACTIVE_FOOTER_CHARS: usize = 60;
pub const MAX_REPLY_BUTTONS: usize = 3;
pub const MAX_REPLY_BUTTON_ID_CHARS: usize = 256;
pub const MAX_REPLY_BUTTON_TITLE_CHARS: usize = 20;
pub const MAX_LIST_BUTTON_CHARS: usize = 20;
pub const MAX_LIST_SECTIONS: usize = 10;
pub const MAX_LIST_ROWS: usize = 10;
pub const MAX_LIST_SECTION_TITLE_CHARS: usize = 24;
pub const MAX_LIST_ROW_ID_CHARS: usize = 200;
pub const MAX_LIST_ROW_TITLE_CHARS: usize = 24;
pub const MAX_LIST_ROW_DESCRIPTION_CHARS: usize = 72;
pub const MAX_CTA_DISPLAY_TEXT_CHARS: usize = 20;
pub const MAX_FLOW_CTA_CHARS: usize = 20;

/// The interactive message types of the network.
pub const INTERACTIVE_TYPES: [&str; 9] = [
    "button",
    "list",
    "cta_url",
    "flow",
    "product",
    "product_list",
    "catalog_message",
    "location_request_message",
    "address_message",
];

// ---- Idempotency-Key ---------------------------------------------------------------------------

const KEY_RULE: &str =
    "8 to 128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit";

// ---- request types ---------------------------------------------------------------------------

/// The message types of POST /messages (the network's `type` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Text,
    Image,
    Video,
    Audio,
    Document,
    Sticker,
    Location,
    Contacts,
    Interactive,
    Reaction,
    Template,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Text,
        Kind::Image,
        Kind::Video,
        Kind::Audio,
        Kind::Document,
        Kind::Sticker,
        Kind::Location,
        Kind::Contacts,
        Kind::Interactive,
        Kind::Reaction,
        Kind::Template,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Image => "image",
            Kind::Video => "video",
            Kind::Audio => "audio",
            Kind::Document => "document",
            Kind::Sticker => "sticker",
            Kind::Location => "location",
            Kind::Contacts => "contacts",
            Kind::Interactive => "interactive",
            Kind::Reaction => "reaction",
            Kind::Template => "template",
        }
    }

    /// Exact, lowercase names only (as the network).
    pub fn parse(s: &str) -> Option<Kind> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn is_template(self) -> bool {
        self == Kind::Template
    }

    /// Image, video, audio, document and sticker: messages that carry a file.
    pub fn is_media(self) -> bool {
        matches!(
            self,
            Kind::Image | Kind::Video | Kind::Audio | Kind::Document | Kind::Sticker
        )
    }

    /// Image, video and document take a caption.
    pub fn takes_caption(self) -> bool {
        matches!(self, Kind::Image | Kind::Video | Kind::Document)
    }
}

/// `text, image, …, template`, for messages.
pub fn supported_types() -> String {
    Kind::ALL.map(Kind::as_str).join(", ")
}

/// Whom the message goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipient {
    /// `to: {"contact_id": …}`: an existing contact (404 when unknown).
    ContactId(uuid::Uuid),
    /// `to: {"wa_id": …}`: created as a contact when unknown.
    WaId(Phone),
    /// `to: "+1 415 555 0123"`: created as a contact when unknown.
    Phone(Phone),
    /// `to: {"user_id": …}`: a business-scoped user id (a customer known by username);
    /// created as a contact when unknown.
    UserId(String),
}

/// The sending-number selector. `PhoneNumberId` when `phone_number_id` was given (alone or
/// equal to `from`); `From` holds `from` as given (a phone_number_id or a display number in
/// E.164), to be resolved by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    PhoneNumberId(String),
    From(String),
}

/// A media message's file: `link` (an https URL to import) or `media_id` (a Tern media id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaRef {
    Link(String),
    Id(String),
}

/// The `template` part of a send, as given (checked for shape and value rules only).
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateSend {
    pub name: String,
    /// The language code; `{"code": …}` objects are reduced to their code.
    pub language: String,
    pub variables: Option<Vec<String>>,
    pub components: Option<Value>,
    pub coupon_code: Option<String>,
}

/// A well-formed POST /messages body.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    pub recipient: Recipient,
    pub sender: Option<Sender>,
    pub kind: Kind,
    /// The body for text, the caption for media, otherwise `None`.
    pub text: Option<String>,
    pub media: Option<MediaRef>,
    pub template: Option<TemplateSend>,
    /// `context.message_id`: the message this one replies to.
    pub context: Option<String>,
    /// The network's object for the type, as it will be sent (`{"body": "hi"}`). Media keep
    /// `media_id` (the caller puts the network's `id` in its place); a template is
    /// `{"name", "language": {"code"}}` plus `components` when given typed: with
    /// `variables` the caller adds [`template::network_components`].
    pub content: Value,
}

const TO_HELP: &str = "a phone number in international format such as \"+14155550123\", or an object with contact_id, wa_id or user_id";

/// What a type object contributes to the request.
struct Parsed {
    text: Option<String>,
    media: Option<MediaRef>,
    template: Option<TemplateSend>,
    content: Value,
}

impl Parsed {
    fn content(content: Value) -> Self {
        Parsed {
            text: None,
            media: None,
            template: None,
            content,
        }
    }
}

fn parse_type_object(kind: Kind, v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    match kind {
        Kind::Text => parse_text(v, errors),
        Kind::Image | Kind::Video | Kind::Audio | Kind::Document | Kind::Sticker => {
            parse_media(kind, v, errors)
        }
        Kind::Location => parse_location(v, errors),
        Kind::Contacts => parse_contacts(v, errors),
        Kind::Interactive => parse_interactive(v, errors),
        Kind::Reaction => parse_reaction(v, errors),
        Kind::Template => parse_template(v, errors),
    }
}

/// Top-level members besides the type object.
const TOP_LEVEL: [&str; 7] = [
    "type",
    "to",
    "phone_number_id",
    "from",
    "context",
    "messaging_product",
    "recipient_type",
];

/// Checks a POST /messages body and reads it. Every problem is reported at once in
/// `details.fields` (paths like `to`, `text.body`, `template.variables[1]`,
/// `template.components[0].parameters[2].text`):
/// - `400 validation_failed`; with `details.reason` = `to_needs_country_code` or
///   `to_placeholder` when `to` (or `to.wa_id`) is refused for that reason, whatever else
///   is wrong;
/// - `400 unsupported_message_type` when `type` is a string outside the eleven types (its
///   `details.fields` starts with `type` and also lists the other problems).
///
/// The network's envelope members `messaging_product` (`"whatsapp"`) and `recipient_type`
/// (`"individual"`) are tolerated so bodies copied from the network's docs work; any other
/// unknown member is refused.
pub fn parse_send(body: &Value) -> Result<SendRequest, Problem> {
    let Some(obj) = body.as_object() else {
        return Err(Problem::field(
            "body",
            "must be a JSON object: the message to send",
        ));
    };
    let mut errors = Vec::new();
    let mut reason: Option<&'static str> = None;
    let mut unsupported: Option<FieldError> = None;
    let kind = match get(obj, "type") {
        None => {
            errors.push(FieldError::new(
                "type",
                format!("is required: one of {}", supported_types()),
            ));
            None
        }
        Some(Value::String(s)) => {
            let k = Kind::parse(s);
            if k.is_none() {
                unsupported = Some(FieldError::new(
                    "type",
                    format!(
                        "\"{s}\" is not a supported message type; use one of {}",
                        supported_types()
                    ),
                ));
            }
            k
        }
        Some(_) => {
            errors.push(FieldError::new(
                "type",
                format!("must be a string: one of {}", supported_types()),
            ));
            None
        }
    };
    let type_name = obj.get("type").and_then(Value::as_str);
    let recipient = parse_to(get(obj, "to"), &mut errors, &mut reason);
    let sender = parse_sender(obj, &mut errors);
    let context = parse_context(get(obj, "context"), &mut errors);
    if let Some(v) = get(obj, "messaging_product")
        && v.as_str() != Some("whatsapp")
    {
        errors.push(FieldError::new(
            "messaging_product",
            "must be \"whatsapp\" (or left out)",
        ));
    }
    if let Some(v) = get(obj, "recipient_type")
        && v.as_str() != Some("individual")
    {
        errors.push(FieldError::new(
            "recipient_type",
            "must be \"individual\" (or left out): only messages to one person are supported",
        ));
    }
    for (k, v) in obj {
        if TOP_LEVEL.contains(&k.as_str()) || Some(k.as_str()) == type_name {
            continue;
        }
        if Kind::parse(k).is_some() {
            // Another type's object: refused only when the type is known (and not null).
            if let Some(kind) = kind
                && !v.is_null()
            {
                errors.push(FieldError::new(
                    k.clone(),
                    format!(
                        "is not allowed with type \"{}\": send only the object named like the type",
                        kind.as_str()
                    ),
                ));
            }
            continue;
        }
        errors.push(FieldError::new(
            k.clone(),
            format!(
                "is not a field of a message; allowed: type, to, phone_number_id, from, context and the object named like the type ({})",
                supported_types()
            ),
        ));
    }
    let parsed = kind.and_then(|k| match get(obj, k.as_str()) {
        None => {
            let what = if k == Kind::Contacts {
                "an array of contact cards"
            } else {
                "an object"
            };
            errors.push(FieldError::new(
                k.as_str(),
                format!("is required with type \"{}\": {what}", k.as_str()),
            ));
            None
        }
        Some(v) => parse_type_object(k, v, &mut errors),
    });
    if let Some(t) = unsupported {
        errors.insert(0, t);
        let message = format!(
            "This message type is not supported; use one of {}.",
            supported_types()
        );
        let mut p = Problem::new(ErrorCode::UnsupportedMessageType)
            .with_message(message)
            .with_detail(
                "fields",
                serde_json::to_value(&errors).unwrap_or(Value::Null),
            );
        if let Some(r) = reason {
            p = p.with_detail("reason", r);
        }
        return Err(p);
    }
    if !errors.is_empty() {
        let mut p = Problem::validation(errors);
        if let Some(r) = reason {
            p = p.with_detail("reason", r);
        }
        return Err(p);
    }
    match (recipient, kind, parsed) {
        (Some(recipient), Some(kind), Some(parsed)) => Ok(SendRequest {
            recipient,
            sender,
            kind,
            text: parsed.text,
            media: parsed.media,
            template: parsed.template,
            context,
            content: parsed.content,
        }),
        // Every `None` above comes with an error; this is a safety net.
        _ => Err(Problem::field("body", "is not a valid message")),
    }
}

#[cfg(test)]
mod tests;
