//! POST /messages: the `Idempotency-Key` header, the body fingerprint, the request body
//! (the network's own message shape, checked with every problem reported at once) and the
//! consent / 24-hour-window rule.
//!
//! Nothing here looks anything up: whether a `contact_id` exists, which number sends, and
//! whether a template is approved are answered later by the caller. [`parse_send`] only
//! says whether the body is well formed; template values are matched against the approved
//! template with [`crate::template::check_send`].

use crate::phone::{Phone, PhoneError, parse_international, parse_wa_id};
use crate::template;
use crate::{ErrorCode, FieldError, Problem};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

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

/// The free-form window: 24 hours after the customer's last message.
pub const WINDOW_MS: i64 = 24 * 60 * 60 * 1000;

fn chars(s: &str) -> usize {
    s.chars().count()
}

// ---- Idempotency-Key ---------------------------------------------------------------------------

const KEY_RULE: &str =
    "8 to 128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit";

fn describe_char(c: char) -> String {
    match c {
        ' ' => "a space".to_string(),
        c if c.is_control() => format!("the control character U+{:04X}", c as u32),
        c => format!("'{c}'"),
    }
}

/// Checks the `Idempotency-Key` header and returns it unchanged. Missing, empty and
/// malformed keys are `400 validation_failed` with `details.fields[0].field =
/// "Idempotency-Key"` and a message saying what is wrong.
pub fn check_idempotency_key(v: Option<&str>) -> Result<&str, Problem> {
    let field = |m: String| Err(Problem::field(IDEMPOTENCY_KEY_HEADER, m));
    let Some(key) = v else {
        return field(format!(
            "is required: send a unique key for each intended message ({KEY_RULE}; a UUID works), and the same key again when retrying"
        ));
    };
    if key.is_empty() {
        return field(format!(
            "is empty: send a unique key for each intended message ({KEY_RULE})"
        ));
    }
    let mut problems = Vec::new();
    if let Some(c) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        problems.push(format!(
            "contains {}; only letters, digits, '.', '_', ':' and '-' are allowed",
            describe_char(c)
        ));
    }
    if key
        .chars()
        .next()
        .is_some_and(|c| !c.is_ascii_alphanumeric())
    {
        problems.push("must start with a letter or a digit".to_string());
    }
    let n = chars(key);
    if n < IDEMPOTENCY_KEY_MIN_CHARS {
        problems.push(format!(
            "is too short ({n} characters); use {IDEMPOTENCY_KEY_MIN_CHARS} to {IDEMPOTENCY_KEY_MAX_CHARS}"
        ));
    } else if n > IDEMPOTENCY_KEY_MAX_CHARS {
        problems.push(format!(
            "is too long ({n} characters); use {IDEMPOTENCY_KEY_MIN_CHARS} to {IDEMPOTENCY_KEY_MAX_CHARS}"
        ));
    }
    if problems.is_empty() {
        Ok(key)
    } else {
        field(problems.join("; "))
    }
}

// ---- fingerprint -----------------------------------------------------------------------------

/// The canonical JSON text of a value: object keys sorted (by their UTF-8 bytes) at every
/// level, no whitespace, strings escaped and numbers printed as serde_json prints them.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_string(s: &str, out: &mut String) {
    // Serialising a string cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(&m[k.as_str()], out);
            }
            out.push('}');
        }
    }
}

/// SHA-256 of [`canonical_json`]: the body fingerprint bound to an `Idempotency-Key`. Key
/// order and whitespace do not change it; any change of a value does.
pub fn fingerprint(body: &Value) -> [u8; 32] {
    Sha256::digest(canonical_json(body).as_bytes()).into()
}

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

// ---- parsing ---------------------------------------------------------------------------------

/// A field's value, with `null` treated as absent.
fn get<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

/// The object without its `null` members.
fn without_nulls(obj: &Map<String, Value>) -> Value {
    Value::Object(
        obj.iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Errors for members of `obj` outside `allowed` (nulls included: a typo is a typo).
fn unknown_keys(
    obj: &Map<String, Value>,
    path: &str,
    allowed: &[&str],
    errors: &mut Vec<FieldError>,
) {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            errors.push(FieldError::new(
                join(path, k),
                format!("is not a field of {path}; allowed: {}", allowed.join(", ")),
            ));
        }
    }
}

/// A required string: `Some` when present and a string (maybe empty), with errors otherwise.
fn req_str<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    key: &str,
    what: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match get(obj, key) {
        None => {
            errors.push(FieldError::new(
                join(path, key),
                format!("is required: {what}"),
            ));
            None
        }
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            errors.push(FieldError::new(join(path, key), "must be a string"));
            None
        }
    }
}

/// An optional string: `Some` when present and a string.
fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    path: &str,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    match get(obj, key) {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            errors.push(FieldError::new(join(path, key), "must be a string"));
            None
        }
    }
}

/// A text with a length limit; blank is refused. Returns it when fine.
fn bounded_text<'a>(
    s: &'a str,
    field: &str,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> Option<&'a str> {
    if s.trim().is_empty() {
        errors.push(FieldError::new(field, "must not be empty"));
        None
    } else if chars(s) > max {
        errors.push(FieldError::new(
            field,
            format!("must be at most {max} characters (got {})", chars(s)),
        ));
        None
    } else {
        Some(s)
    }
}

fn opt_bool(obj: &Map<String, Value>, path: &str, key: &str, errors: &mut Vec<FieldError>) {
    if get(obj, key).is_some_and(|v| !v.is_boolean()) {
        errors.push(FieldError::new(join(path, key), "must be true or false"));
    }
}

/// An absolute `https://host[:port][/path][?query][#fragment]` URL with a plausible host
/// and no spaces, control characters, backslashes or credentials. Where the link may point
/// (private addresses, …) is checked when it is fetched.
pub fn is_https_url(s: &str) -> bool {
    let Some(scheme) = s.get(..8) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("https://") {
        return false;
    }
    let rest = &s[8..];
    if rest
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
    {
        return false;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if authority.contains('@') {
        return false;
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((inside, after)) = v6.split_once(']') else {
            return false;
        };
        if inside.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        match after {
            "" => (inside, None),
            p => match p.strip_prefix(':') {
                Some(p) => (inside, Some(p)),
                None => return false,
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if let Some(p) = port
        && !(!p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| (1..=65535).contains(&n)))
    {
        return false;
    }
    if authority.starts_with('[') {
        return true;
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && chars(label) <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}

fn check_url(s: &str, field: &str, errors: &mut Vec<FieldError>) -> bool {
    if chars(s) > MAX_URL_CHARS {
        errors.push(FieldError::new(
            field,
            format!("must be at most {MAX_URL_CHARS} characters"),
        ));
        false
    } else if !is_https_url(s) {
        errors.push(FieldError::new(
            field,
            "must be an absolute https URL, such as https://example.com/file.jpg",
        ));
        false
    } else {
        true
    }
}

/// A message id (`context.message_id`, `reaction.message_id`): non-empty, no whitespace.
fn check_message_id(s: &str, field: &str, errors: &mut Vec<FieldError>) -> bool {
    if s.is_empty() {
        errors.push(FieldError::new(
            field,
            "must not be empty: the id of the message (wamid.…)",
        ));
        false
    } else if chars(s) > MAX_MESSAGE_ID_CHARS
        || s.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        errors.push(FieldError::new(
            field,
            format!(
                "must be a message id (wamid.…) of at most {MAX_MESSAGE_ID_CHARS} characters without spaces"
            ),
        ));
        false
    } else {
        true
    }
}

const TO_HELP: &str = "a phone number in international format such as \"+14155550123\", or an object with contact_id or wa_id";

/// `to`: reports problems and, for the string / wa_id forms, the contract's `details.reason`.
fn parse_to(
    v: Option<&Value>,
    errors: &mut Vec<FieldError>,
    reason: &mut Option<&'static str>,
) -> Option<Recipient> {
    let phone_error = |e: PhoneError, field: &str, errors: &mut Vec<FieldError>| {
        let message = match e {
            PhoneError::NeedsCountryCode => {
                "must start with + and the country code, such as \"+14155550123\"".to_string()
            }
            PhoneError::Placeholder => {
                "is a placeholder; put the recipient's phone number here, such as \"+14155550123\""
                    .to_string()
            }
            PhoneError::Invalid => e.to_string(),
        };
        errors.push(FieldError::new(field, message));
    };
    match v {
        None => {
            errors.push(FieldError::new("to", format!("is required: {TO_HELP}")));
            None
        }
        Some(Value::String(s)) => match parse_international(s) {
            Ok(p) => Some(Recipient::Phone(p)),
            Err(e) => {
                *reason = e.reason();
                phone_error(e, "to", errors);
                None
            }
        },
        Some(Value::Object(o)) => {
            unknown_keys(o, "to", &["contact_id", "wa_id"], errors);
            let contact = get(o, "contact_id");
            let wa = get(o, "wa_id");
            match (contact, wa) {
                (Some(_), Some(_)) => {
                    errors.push(FieldError::new(
                        "to",
                        "give exactly one of contact_id or wa_id, not both",
                    ));
                    None
                }
                (None, None) => {
                    errors.push(FieldError::new(
                        "to",
                        "must hold exactly one of contact_id (an existing contact's id) or wa_id (digits with the country code, no +)",
                    ));
                    None
                }
                (Some(c), None) => {
                    let id = c
                        .as_str()
                        .and_then(|s| uuid::Uuid::parse_str(s).ok().filter(|_| s.len() == 36));
                    if id.is_none() {
                        errors.push(FieldError::new(
                            "to.contact_id",
                            "must be a contact id (a UUID such as 0190f5a2-7c3e-7b1a-9f00-2b6c1d4e5f60)",
                        ));
                    }
                    id.map(Recipient::ContactId)
                }
                (None, Some(w)) => {
                    let Some(s) = w.as_str() else {
                        errors.push(FieldError::new(
                            "to.wa_id",
                            "must be a string of digits with the country code, such as \"14155550123\"",
                        ));
                        return None;
                    };
                    if s.chars()
                        .any(|c| c.is_alphabetic() || matches!(c, '<' | '>' | '{' | '}'))
                    {
                        *reason = PhoneError::Placeholder.reason();
                        phone_error(PhoneError::Placeholder, "to.wa_id", errors);
                        return None;
                    }
                    match parse_wa_id(s) {
                        Ok(p) => Some(Recipient::WaId(p)),
                        Err(_) => {
                            errors.push(FieldError::new(
                                "to.wa_id",
                                "must be a valid phone number written as digits only, with the country code and without +, such as \"14155550123\"",
                            ));
                            None
                        }
                    }
                }
            }
        }
        Some(_) => {
            errors.push(FieldError::new("to", format!("must be {TO_HELP}")));
            None
        }
    }
}

fn parse_sender(obj: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<Sender> {
    let mut read = |key: &str| match get(obj, key) {
        None => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(Value::String(_)) => {
            errors.push(FieldError::new(
                key,
                "must not be empty; leave it out to use the organisation's only number",
            ));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(key, "must be a string"));
            None
        }
    };
    let id = read("phone_number_id");
    let from = read("from");
    match (id, from) {
        (Some(id), Some(from)) if id != from => {
            errors.push(FieldError::new(
                "from",
                "names a different number than phone_number_id; give only one of them",
            ));
            None
        }
        (Some(id), _) => Some(Sender::PhoneNumberId(id)),
        (None, Some(from)) => Some(Sender::From(from)),
        (None, None) => None,
    }
}

fn parse_context(v: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    let v = v?;
    let Some(o) = v.as_object() else {
        errors.push(FieldError::new(
            "context",
            "must be an object such as {\"message_id\": \"wamid.…\"}",
        ));
        return None;
    };
    unknown_keys(o, "context", &["message_id"], errors);
    let id = req_str(
        o,
        "context",
        "message_id",
        "the id (wamid.…) of the message this one replies to",
        errors,
    )?;
    check_message_id(id, "context.message_id", errors).then(|| id.to_string())
}

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

fn object<'a>(
    v: &'a Value,
    path: &str,
    example: &str,
    errors: &mut Vec<FieldError>,
) -> Option<&'a Map<String, Value>> {
    let o = v.as_object();
    if o.is_none() {
        errors.push(FieldError::new(
            path,
            format!("must be an object such as {example}"),
        ));
    }
    o
}

fn parse_text(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(v, "text", "{\"body\": \"Hello\"}", errors)?;
    let before = errors.len();
    unknown_keys(o, "text", &["body", "preview_url"], errors);
    opt_bool(o, "text", "preview_url", errors);
    let body = req_str(
        o,
        "text",
        "body",
        "the message text, 1 to 4096 characters",
        errors,
    )
    .and_then(|b| bounded_text(b, "text.body", MAX_TEXT_CHARS, errors));
    let body = body.filter(|_| errors.len() == before)?;
    Some(Parsed {
        text: Some(body.to_string()),
        media: None,
        template: None,
        content: without_nulls(o),
    })
}

fn parse_media(kind: Kind, v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let k = kind.as_str();
    let o = object(
        v,
        k,
        "{\"link\": \"https://…\"} or {\"media_id\": \"…\"}",
        errors,
    )?;
    let before = errors.len();
    let mut allowed = vec!["link", "media_id"];
    if kind.takes_caption() {
        allowed.push("caption");
    }
    if kind == Kind::Document {
        allowed.push("filename");
    }
    if kind == Kind::Audio {
        allowed.push("voice");
    }
    for key in o.keys() {
        if allowed.contains(&key.as_str()) {
            continue;
        }
        let message = match key.as_str() {
            "caption" => format!(
                "is not allowed on {k} messages; only image, video and document take a caption"
            ),
            "filename" => "is allowed on document messages only".to_string(),
            "voice" => "is allowed on audio messages only".to_string(),
            "id" => "is not accepted: give media_id (the id returned by POST /media) or link (an https URL)".to_string(),
            _ => format!("is not a field of {k}; allowed: {}", allowed.join(", ")),
        };
        errors.push(FieldError::new(format!("{k}.{key}"), message));
    }
    let link = opt_str(o, k, "link", errors);
    let media_id = opt_str(o, k, "media_id", errors);
    let media = match (get(o, "link"), get(o, "media_id")) {
        (Some(_), Some(_)) => {
            errors.push(FieldError::new(
                k,
                "give exactly one of link or media_id, not both",
            ));
            None
        }
        (None, None) => {
            errors.push(FieldError::new(
                k,
                "must hold link (an https URL) or media_id (the id returned by POST /media)",
            ));
            None
        }
        _ => match (link, media_id) {
            (Some(l), _) => {
                check_url(l, &format!("{k}.link"), errors).then(|| MediaRef::Link(l.to_string()))
            }
            (_, Some(id)) if id.trim().is_empty() => {
                errors.push(FieldError::new(
                    format!("{k}.media_id"),
                    "must not be empty",
                ));
                None
            }
            (_, Some(id)) => Some(MediaRef::Id(id.to_string())),
            _ => None,
        },
    };
    let mut caption = None;
    if kind.takes_caption()
        && let Some(c) = opt_str(o, k, "caption", errors)
    {
        if c.trim().is_empty() {
            errors.push(FieldError::new(
                format!("{k}.caption"),
                "must not be empty; leave caption out for no caption",
            ));
        } else if chars(c) > MAX_CAPTION_CHARS {
            errors.push(FieldError::new(
                format!("{k}.caption"),
                format!(
                    "must be at most {MAX_CAPTION_CHARS} characters (got {})",
                    chars(c)
                ),
            ));
        } else {
            caption = Some(c.to_string());
        }
    }
    if kind == Kind::Document
        && let Some(f) = opt_str(o, k, "filename", errors)
    {
        let p = format!("{k}.filename");
        if f.trim().is_empty() {
            errors.push(FieldError::new(p, "must not be empty"));
        } else if chars(f) > MAX_FILENAME_CHARS {
            errors.push(FieldError::new(
                p,
                format!("must be at most {MAX_FILENAME_CHARS} characters"),
            ));
        } else if f.chars().any(|c| matches!(c, '/' | '\\') || c.is_control()) {
            errors.push(FieldError::new(
                p,
                "must be a file name without '/', '\\' or control characters",
            ));
        }
    }
    if kind == Kind::Audio {
        opt_bool(o, k, "voice", errors);
    }
    if errors.len() != before {
        return None;
    }
    Some(Parsed {
        text: caption,
        media,
        template: None,
        content: without_nulls(o),
    })
}

fn parse_location(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(
        v,
        "location",
        "{\"latitude\": 51.5, \"longitude\": -0.12}",
        errors,
    )?;
    let before = errors.len();
    unknown_keys(
        o,
        "location",
        &["latitude", "longitude", "name", "address"],
        errors,
    );
    for (key, max) in [("latitude", 90.0), ("longitude", 180.0)] {
        let p = format!("location.{key}");
        match get(o, key) {
            None => errors.push(FieldError::new(
                p,
                format!("is required: a number between -{max} and {max}"),
            )),
            Some(n) => {
                if !n.as_f64().is_some_and(|x| (-max..=max).contains(&x)) {
                    errors.push(FieldError::new(
                        p,
                        format!("must be a number between -{max} and {max}"),
                    ));
                }
            }
        }
    }
    opt_str(o, "location", "name", errors);
    opt_str(o, "location", "address", errors);
    (errors.len() == before).then(|| Parsed::content(without_nulls(o)))
}

fn parse_contacts(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let Some(list) = v.as_array() else {
        errors.push(FieldError::new(
            "contacts",
            "must be an array of contact cards such as [{\"name\": {\"formatted_name\": \"Ada Lovelace\"}, \"phones\": [{\"phone\": \"+14155550123\"}]}]",
        ));
        return None;
    };
    let before = errors.len();
    if list.is_empty() {
        errors.push(FieldError::new(
            "contacts",
            "must hold at least one contact card",
        ));
    } else if list.len() > MAX_CONTACTS {
        errors.push(FieldError::new(
            "contacts",
            format!("may hold at most {MAX_CONTACTS} contact cards"),
        ));
    }
    for (i, c) in list.iter().enumerate() {
        let p = format!("contacts[{i}]");
        let Some(c) = c.as_object() else {
            errors.push(FieldError::new(
                p,
                "must be an object with name.formatted_name",
            ));
            continue;
        };
        match get(c, "name") {
            None => errors.push(FieldError::new(
                format!("{p}.name"),
                "is required: an object with formatted_name, the name shown for the contact",
            )),
            Some(Value::Object(name)) => {
                let np = format!("{p}.name");
                if let Some(f) = req_str(
                    name,
                    &np,
                    "formatted_name",
                    "the name shown for the contact",
                    errors,
                ) && f.trim().is_empty()
                {
                    errors.push(FieldError::new(
                        format!("{np}.formatted_name"),
                        "must not be empty",
                    ));
                }
            }
            Some(_) => errors.push(FieldError::new(
                format!("{p}.name"),
                "must be an object with formatted_name",
            )),
        }
        for key in ["phones", "emails", "addresses", "urls"] {
            if get(c, key).is_some_and(|v| !v.is_array()) {
                errors.push(FieldError::new(format!("{p}.{key}"), "must be an array"));
            }
        }
        if get(c, "org").is_some_and(|v| !v.is_object()) {
            errors.push(FieldError::new(format!("{p}.org"), "must be an object"));
        }
        opt_str(c, &p, "birthday", errors);
    }
    (errors.len() == before).then(|| Parsed::content(v.clone()))
}

fn parse_reaction(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(
        v,
        "reaction",
        "{\"message_id\": \"wamid.…\", \"emoji\": \"👍\"}",
        errors,
    )?;
    let before = errors.len();
    unknown_keys(o, "reaction", &["message_id", "emoji"], errors);
    if let Some(id) = req_str(
        o,
        "reaction",
        "message_id",
        "the id (wamid.…) of the message to react to",
        errors,
    ) {
        check_message_id(id, "reaction.message_id", errors);
    }
    req_str(
        o,
        "reaction",
        "emoji",
        "an emoji, or \"\" to remove the reaction",
        errors,
    );
    (errors.len() == before).then(|| Parsed::content(without_nulls(o)))
}

/// `path.text` of an object member (`header`, `body`, `footer`) when present.
fn part_text(
    o: &Map<String, Value>,
    key: &str,
    required: bool,
    max: usize,
    errors: &mut Vec<FieldError>,
) {
    let p = format!("interactive.{key}");
    match get(o, key) {
        None if required => errors.push(FieldError::new(
            p,
            "is required: an object such as {\"text\": \"…\"}",
        )),
        None => {}
        Some(Value::Object(part)) => {
            if let Some(t) = req_str(part, &p, "text", "the text", errors) {
                bounded_text(t, &format!("{p}.text"), max, errors);
            }
        }
        Some(_) => errors.push(FieldError::new(
            p,
            "must be an object such as {\"text\": \"…\"}",
        )),
    }
}

fn parse_interactive(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(
        v,
        "interactive",
        "{\"type\": \"button\", \"body\": {\"text\": \"…\"}, \"action\": {…}}",
        errors,
    )?;
    let before = errors.len();
    let t = match get(o, "type") {
        Some(Value::String(s)) if INTERACTIVE_TYPES.contains(&s.as_str()) => Some(s.as_str()),
        _ => {
            errors.push(FieldError::new(
                "interactive.type",
                format!("must be one of {}", INTERACTIVE_TYPES.join(", ")),
            ));
            None
        }
    };
    let needs_body = matches!(t, Some("button" | "list" | "cta_url"));
    let body_max = if t == Some("list") {
        MAX_LIST_BODY_CHARS
    } else {
        MAX_INTERACTIVE_BODY_CHARS
    };
    part_text(o, "body", needs_body, body_max, errors);
    part_text(o, "footer", false, MAX_INTERACTIVE_FOOTER_CHARS, errors);
    // Header: text everywhere; media only on button and cta_url.
    if let Some(h) = get(o, "header") {
        let allowed: &[&str] = match t {
            Some("button" | "cta_url") => &["text", "image", "video", "document"],
            Some("list" | "flow") => &["text"],
            _ => &[],
        };
        match h.as_object() {
            None => errors.push(FieldError::new("interactive.header", "must be an object")),
            Some(h) if !allowed.is_empty() => {
                let ht = h.get("type").and_then(Value::as_str).unwrap_or("");
                if !allowed.contains(&ht) {
                    errors.push(FieldError::new(
                        "interactive.header.type",
                        format!(
                            "must be one of {} for a {} message",
                            allowed.join(", "),
                            t.unwrap_or("")
                        ),
                    ));
                } else if ht == "text" {
                    if let Some(text) =
                        req_str(h, "interactive.header", "text", "the header text", errors)
                    {
                        bounded_text(
                            text,
                            "interactive.header.text",
                            MAX_INTERACTIVE_HEADER_CHARS,
                            errors,
                        );
                    }
                } else if !get(h, ht).is_some_and(Value::is_object) {
                    errors.push(FieldError::new(
                        format!("interactive.header.{ht}"),
                        "is required: an object with link (an https URL) or id",
                    ));
                }
            }
            Some(_) => {}
        }
    }
    let action = match get(o, "action") {
        Some(Value::Object(a)) => Some(a),
        None => {
            errors.push(FieldError::new(
                "interactive.action",
                "is required: an object",
            ));
            None
        }
        Some(_) => {
            errors.push(FieldError::new("interactive.action", "must be an object"));
            None
        }
    };
    if let (Some(t), Some(a)) = (t, action) {
        match t {
            "button" => check_reply_buttons(a, errors),
            "list" => check_list(a, errors),
            "cta_url" => check_cta_url(a, errors),
            "flow" => check_flow(a, errors),
            _ => {}
        }
    }
    (errors.len() == before).then(|| Parsed::content(without_nulls(o)))
}

fn check_reply_buttons(a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    let p = "interactive.action.buttons";
    let Some(buttons) = get(a, "buttons").and_then(Value::as_array) else {
        errors.push(FieldError::new(
            p,
            "is required: an array of 1 to 3 buttons such as {\"type\": \"reply\", \"reply\": {\"id\": \"yes\", \"title\": \"Yes\"}}",
        ));
        return;
    };
    if buttons.is_empty() || buttons.len() > MAX_REPLY_BUTTONS {
        errors.push(FieldError::new(
            p,
            format!(
                "must hold 1 to {MAX_REPLY_BUTTONS} buttons (got {})",
                buttons.len()
            ),
        ));
    }
    let mut ids: Vec<&str> = Vec::new();
    let mut titles: Vec<&str> = Vec::new();
    for (i, b) in buttons.iter().enumerate() {
        let bp = format!("{p}[{i}]");
        let Some(b) = b.as_object() else {
            errors.push(FieldError::new(bp, "must be an object"));
            continue;
        };
        if b.get("type").and_then(Value::as_str) != Some("reply") {
            errors.push(FieldError::new(format!("{bp}.type"), "must be \"reply\""));
        }
        let Some(reply) = get(b, "reply").and_then(Value::as_object) else {
            errors.push(FieldError::new(
                format!("{bp}.reply"),
                "is required: an object with id and title",
            ));
            continue;
        };
        let rp = format!("{bp}.reply");
        if let Some(id) = req_str(reply, &rp, "id", "the button's id", errors)
            && bounded_text(id, &format!("{rp}.id"), MAX_REPLY_BUTTON_ID_CHARS, errors).is_some()
        {
            if ids.contains(&id) {
                errors.push(FieldError::new(
                    format!("{rp}.id"),
                    "must be unique among the buttons",
                ));
            }
            ids.push(id);
        }
        if let Some(title) = req_str(reply, &rp, "title", "the button's label", errors)
            && bounded_text(
                title,
                &format!("{rp}.title"),
                MAX_REPLY_BUTTON_TITLE_CHARS,
                errors,
            )
            .is_some()
        {
            if titles.contains(&title) {
                errors.push(FieldError::new(
                    format!("{rp}.title"),
                    "must be unique among the buttons",
                ));
            }
            titles.push(title);
        }
    }
}

fn check_list(a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    let ap = "interactive.action";
    if let Some(b) = req_str(a, ap, "button", "the label of the list's button", errors) {
        bounded_text(
            b,
            "interactive.action.button",
            MAX_LIST_BUTTON_CHARS,
            errors,
        );
    }
    let p = "interactive.action.sections";
    let Some(sections) = get(a, "sections").and_then(Value::as_array) else {
        errors.push(FieldError::new(
            p,
            "is required: an array of 1 to 10 sections, each with rows",
        ));
        return;
    };
    if sections.is_empty() || sections.len() > MAX_LIST_SECTIONS {
        errors.push(FieldError::new(
            p,
            format!(
                "must hold 1 to {MAX_LIST_SECTIONS} sections (got {})",
                sections.len()
            ),
        ));
    }
    let mut total_rows = 0;
    let mut ids: Vec<&str> = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        let sp = format!("{p}[{i}]");
        let Some(s) = s.as_object() else {
            errors.push(FieldError::new(sp, "must be an object with rows"));
            continue;
        };
        match get(s, "title") {
            None if sections.len() > 1 => errors.push(FieldError::new(
                format!("{sp}.title"),
                "is required when the list has more than one section",
            )),
            None => {}
            Some(Value::String(t)) => {
                bounded_text(
                    t,
                    &format!("{sp}.title"),
                    MAX_LIST_SECTION_TITLE_CHARS,
                    errors,
                );
            }
            Some(_) => errors.push(FieldError::new(format!("{sp}.title"), "must be a string")),
        }
        let Some(rows) = get(s, "rows").and_then(Value::as_array) else {
            errors.push(FieldError::new(
                format!("{sp}.rows"),
                "is required: an array of rows such as {\"id\": \"r1\", \"title\": \"…\"}",
            ));
            continue;
        };
        if rows.is_empty() {
            errors.push(FieldError::new(
                format!("{sp}.rows"),
                "must hold at least one row",
            ));
        }
        total_rows += rows.len();
        for (j, r) in rows.iter().enumerate() {
            let rp = format!("{sp}.rows[{j}]");
            let Some(r) = r.as_object() else {
                errors.push(FieldError::new(rp, "must be an object with id and title"));
                continue;
            };
            if let Some(id) = req_str(r, &rp, "id", "the row's id", errors)
                && bounded_text(id, &format!("{rp}.id"), MAX_LIST_ROW_ID_CHARS, errors).is_some()
            {
                if ids.contains(&id) {
                    errors.push(FieldError::new(
                        format!("{rp}.id"),
                        "must be unique among all rows",
                    ));
                }
                ids.push(id);
            }
            if let Some(t) = req_str(r, &rp, "title", "the row's title", errors) {
                bounded_text(t, &format!("{rp}.title"), MAX_LIST_ROW_TITLE_CHARS, errors);
            }
            if let Some(d) = opt_str(r, &rp, "description", errors)
                && chars(d) > MAX_LIST_ROW_DESCRIPTION_CHARS
            {
                errors.push(FieldError::new(
                    format!("{rp}.description"),
                    format!("must be at most {MAX_LIST_ROW_DESCRIPTION_CHARS} characters"),
                ));
            }
        }
    }
    if total_rows > MAX_LIST_ROWS {
        errors.push(FieldError::new(
            p,
            format!("may hold at most {MAX_LIST_ROWS} rows in total (got {total_rows})"),
        ));
    }
}

fn check_cta_url(a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    if a.get("name").and_then(Value::as_str) != Some("cta_url") {
        errors.push(FieldError::new(
            "interactive.action.name",
            "must be \"cta_url\"",
        ));
    }
    let pp = "interactive.action.parameters";
    let Some(ps) = get(a, "parameters").and_then(Value::as_object) else {
        errors.push(FieldError::new(
            pp,
            "is required: an object with display_text and url",
        ));
        return;
    };
    if let Some(d) = req_str(ps, pp, "display_text", "the button's label", errors) {
        bounded_text(
            d,
            "interactive.action.parameters.display_text",
            MAX_CTA_DISPLAY_TEXT_CHARS,
            errors,
        );
    }
    if let Some(u) = req_str(ps, pp, "url", "an https URL", errors) {
        check_url(u, "interactive.action.parameters.url", errors);
    }
}

fn check_flow(a: &Map<String, Value>, errors: &mut Vec<FieldError>) {
    if a.get("name").and_then(Value::as_str) != Some("flow") {
        errors.push(FieldError::new(
            "interactive.action.name",
            "must be \"flow\"",
        ));
    }
    let pp = "interactive.action.parameters";
    let Some(ps) = get(a, "parameters").and_then(Value::as_object) else {
        errors.push(FieldError::new(
            pp,
            "is required: an object with flow_message_version, flow_id or flow_name, and flow_cta",
        ));
        return;
    };
    if ps.get("flow_message_version").and_then(Value::as_str) != Some("3") {
        errors.push(FieldError::new(
            format!("{pp}.flow_message_version"),
            "must be \"3\"",
        ));
    }
    let id = get(ps, "flow_id");
    let name = get(ps, "flow_name");
    if id.is_some() == name.is_some() {
        errors.push(FieldError::new(
            pp,
            "must hold exactly one of flow_id or flow_name",
        ));
    }
    for (key, v) in [("flow_id", id), ("flow_name", name)] {
        if let Some(v) = v
            && v.as_str().is_none_or(|s| s.trim().is_empty())
        {
            errors.push(FieldError::new(
                format!("{pp}.{key}"),
                "must be a non-empty string",
            ));
        }
    }
    if let Some(c) = req_str(ps, pp, "flow_cta", "the button's label", errors) {
        bounded_text(c, &format!("{pp}.flow_cta"), MAX_FLOW_CTA_CHARS, errors);
    }
    if let Some(fa) = opt_str(ps, pp, "flow_action", errors)
        && !matches!(fa, "navigate" | "data_exchange")
    {
        errors.push(FieldError::new(
            format!("{pp}.flow_action"),
            "must be navigate or data_exchange",
        ));
    }
}

fn parse_template(v: &Value, errors: &mut Vec<FieldError>) -> Option<Parsed> {
    let o = object(
        v,
        "template",
        "{\"name\": \"order_update\", \"language\": \"en_US\", \"variables\": [\"Ada\"]}",
        errors,
    )?;
    let before = errors.len();
    unknown_keys(
        o,
        "template",
        &["name", "language", "variables", "components", "coupon_code"],
        errors,
    );
    let name = req_str(
        o,
        "template",
        "name",
        "the approved template's name",
        errors,
    );
    if name.is_some_and(|n| n.trim().is_empty()) {
        errors.push(FieldError::new("template.name", "must not be empty"));
    }
    let language = match get(o, "language") {
        None => {
            errors.push(FieldError::new(
                "template.language",
                "is required: the template's language code, such as en_US",
            ));
            None
        }
        Some(Value::String(s)) => {
            template::check_language("template.language", s, errors);
            Some(s.as_str())
        }
        Some(Value::Object(l)) => {
            unknown_keys(l, "template.language", &["code", "policy"], errors);
            if get(l, "policy").is_some_and(|p| p.as_str() != Some("deterministic")) {
                errors.push(FieldError::new(
                    "template.language.policy",
                    "must be \"deterministic\"",
                ));
            }
            let code = req_str(
                l,
                "template.language",
                "code",
                "the template's language code, such as en_US",
                errors,
            );
            if let Some(c) = code {
                template::check_language("template.language.code", c, errors);
            }
            code
        }
        Some(_) => {
            errors.push(FieldError::new(
                "template.language",
                "must be a language code such as en_US (or {\"code\": \"en_US\"})",
            ));
            None
        }
    };
    // Variables: non-strings are reported here and stood in for by a valid value, so the
    // shape rules below keep their indexes.
    let variables: Option<Vec<String>> = match get(o, "variables") {
        None => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .enumerate()
                .map(|(i, v)| match v.as_str() {
                    Some(s) => s.to_string(),
                    None => {
                        errors.push(FieldError::new(
                            format!("template.variables[{i}]"),
                            "must be a string",
                        ));
                        "x".to_string()
                    }
                })
                .collect(),
        ),
        Some(_) => {
            errors.push(FieldError::new(
                "template.variables",
                "must be an array of strings, one per numbered variable {{1}}, {{2}}, …",
            ));
            Some(Vec::new())
        }
    };
    let components = get(o, "components");
    let coupon = match get(o, "coupon_code") {
        None => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => {
            errors.push(FieldError::new("template.coupon_code", "must be a string"));
            None
        }
    };
    errors.extend(template::send_shape_problems(
        variables.as_deref(),
        components,
        coupon,
    ));
    if errors.len() != before {
        return None;
    }
    let (name, language) = (name?, language?);
    let mut content = json!({"name": name, "language": {"code": language}});
    if let Some(c) = components {
        content["components"] = c.clone();
    }
    Some(Parsed {
        text: None,
        media: None,
        template: Some(TemplateSend {
            name: name.to_string(),
            language: language.to_string(),
            variables,
            components: components.cloned(),
            coupon_code: coupon.map(str::to_string),
        }),
        content,
    })
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

// ---- consent and the 24-hour window ------------------------------------------------------------

/// The customer service window of a (contact, business number) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// The customer has never written to the number.
    NeverWritten,
    /// Within 24 hours of the customer's last message.
    Open,
    /// The customer wrote, but more than 24 hours ago.
    Closed,
}

impl WindowState {
    /// The window at `now_ms` given the network's timestamp of the customer's last inbound
    /// message (epoch ms). Open while `now < last + 24 h`.
    pub fn at(last_inbound_ms: Option<i64>, now_ms: i64) -> WindowState {
        match WindowState::expires_at(last_inbound_ms) {
            None => WindowState::NeverWritten,
            Some(end) if now_ms < end => WindowState::Open,
            Some(_) => WindowState::Closed,
        }
    }

    /// When the window opened by the customer's last message (epoch ms) closes; `None`
    /// when they never wrote.
    pub fn expires_at(last_inbound_ms: Option<i64>) -> Option<i64> {
        last_inbound_ms.map(|t| t.saturating_add(WINDOW_MS))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WindowState::NeverWritten => "never_written",
            WindowState::Open => "open",
            WindowState::Closed => "closed",
        }
    }
}

/// Consent and window rules of a send (DESIGN "Sending rules"): a free-form message (any
/// non-template type) inside a window the customer opened is always allowed, even when
/// they opted out; otherwise the message is business-initiated, and an opt-out refuses it
/// (`409 contact_opted_out`). Templates go in every window state; free-form messages need
/// an open window (`409 template_required` when the customer never wrote,
/// `409 window_expired` when the window closed).
pub fn check_window_and_consent(
    kind: Kind,
    window: WindowState,
    opted_out: bool,
) -> Result<(), Problem> {
    let free_form_in_window = !kind.is_template() && window == WindowState::Open;
    if free_form_in_window {
        return Ok(());
    }
    if opted_out {
        let message = if kind.is_template() {
            "The customer has opted out of business-initiated messages, so templates cannot be sent to them. Only replies inside a 24-hour window they open are allowed."
        } else {
            "The customer has opted out, and free-form messages outside a window they opened are business-initiated. You can reply within 24 hours after they write to you."
        };
        return Err(Problem::new(ErrorCode::ContactOptedOut).with_message(message));
    }
    match (kind.is_template(), window) {
        (true, _) | (false, WindowState::Open) => Ok(()),
        (false, WindowState::NeverWritten) => Err(Problem::new(ErrorCode::TemplateRequired)
            .with_message(
                "The customer has never written to this number. Start the conversation with an approved template message (type \"template\").",
            )),
        (false, WindowState::Closed) => Err(Problem::new(ErrorCode::WindowExpired).with_message(
            "The customer's 24-hour window is closed: free-form messages can be sent only within 24 hours of their last message. Send an approved template message (type \"template\") instead.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PHONE: &str = "+14155550123";

    fn field_names(p: &Problem) -> Vec<String> {
        p.details["fields"]
            .as_array()
            .expect("fields")
            .iter()
            .map(|f| f["field"].as_str().expect("field").to_string())
            .collect()
    }

    fn message_of(p: &Problem, field: &str) -> String {
        p.details["fields"]
            .as_array()
            .expect("fields")
            .iter()
            .find(|f| f["field"] == field)
            .and_then(|f| f["message"].as_str())
            .unwrap_or_else(|| panic!("no {field} in {:?}", p.details))
            .to_string()
    }

    fn ok(body: Value) -> SendRequest {
        match parse_send(&body) {
            Ok(r) => r,
            Err(p) => panic!("{body} refused: {:?}", p.details),
        }
    }

    fn bad(body: Value) -> Problem {
        parse_send(&body).expect_err("refused")
    }

    /// The fields of a refused body, which must be a 400 validation_failed.
    fn invalid(body: Value) -> Vec<String> {
        let p = bad(body);
        assert_eq!(p.code, ErrorCode::ValidationFailed, "{:?}", p.details);
        assert_eq!(p.status(), 400);
        field_names(&p)
    }

    fn with(kind: &str, obj: Value) -> Value {
        let mut b = json!({"type": kind, "to": PHONE});
        b[kind] = obj;
        b
    }

    // ---- Idempotency-Key ----

    #[test]
    fn idempotency_keys_accepted() {
        for k in [
            "abcd1234",
            "0190f5a2-7c3e-7b1a-9f00-2b6c1d4e5f60",
            "order:42.retry_1",
            "A-b.c_d:e",
            &"k".repeat(128),
        ] {
            assert_eq!(check_idempotency_key(Some(k)), Ok(k));
        }
    }

    #[test]
    fn idempotency_keys_refused() {
        let missing = check_idempotency_key(None).expect_err("missing");
        assert_eq!(missing.code, ErrorCode::ValidationFailed);
        assert_eq!(field_names(&missing), vec!["Idempotency-Key"]);
        let m = message_of(&missing, "Idempotency-Key");
        assert!(m.starts_with("is required"), "{m}");
        let cases = [
            ("", "is empty"),
            ("abc1234", "too short (7"),
            (&"k".repeat(129), "too long (129"),
            ("abcd 1234", "a space"),
            ("abcd/1234", "'/'"),
            ("abcdé1234", "'é'"),
            ("abcd\u{1}1234", "U+0001"),
            ("-abcd1234", "start with a letter or a digit"),
            (".abcd1234", "start with a letter or a digit"),
        ];
        for (k, needle) in cases {
            let p = check_idempotency_key(Some(k)).expect_err(k);
            assert_eq!(p.status(), 400);
            assert_eq!(field_names(&p), vec!["Idempotency-Key"]);
            let m = message_of(&p, "Idempotency-Key");
            assert!(m.contains(needle), "{k:?}: {m}");
            assert!(!m.starts_with("is required"), "{k:?}: {m}");
        }
        // Several problems are explained together.
        let p = check_idempotency_key(Some("_a b")).expect_err("bad");
        let m = message_of(&p, "Idempotency-Key");
        assert!(
            m.contains("a space") && m.contains("start") && m.contains("short"),
            "{m}"
        );
    }

    // ---- fingerprint ----

    #[test]
    fn fingerprint_ignores_key_order_and_whitespace() {
        let a: Value = serde_json::from_str(
            r#"{"type":"text","to":"+14155550123","text":{"body":"hi","preview_url":false}}"#,
        )
        .unwrap();
        let b: Value = serde_json::from_str(
            "{ \"text\" : { \"preview_url\" : false , \"body\" : \"hi\" },\n  \"to\": \"+14155550123\",\n \"type\": \"text\" }",
        )
        .unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(
            canonical_json(&b),
            r#"{"text":{"body":"hi","preview_url":false},"to":"+14155550123","type":"text"}"#
        );
        let c = json!({"type": "text", "to": PHONE, "text": {"body": "hi!", "preview_url": false}});
        assert_ne!(fingerprint(&a), fingerprint(&c));
        // Array order matters; nested objects are sorted too.
        let x = json!({"a": [{"z": 1, "y": [true, null]}, "é\n\"q\""], "b": 1.5, "c": -2});
        assert_eq!(
            canonical_json(&x),
            r#"{"a":[{"y":[true,null],"z":1},"é\n\"q\""],"b":1.5,"c":-2}"#
        );
        assert_ne!(fingerprint(&json!([1, 2])), fingerprint(&json!([2, 1])));
        // The escape form of the input does not matter once parsed.
        let e1: Value = serde_json::from_str(r#"{"e":"\u00e9"}"#).unwrap();
        let e2: Value = serde_json::from_str(r#"{"e":"é"}"#).unwrap();
        assert_eq!(fingerprint(&e1), fingerprint(&e2));
        // It is SHA-256 of the canonical text.
        let expect: [u8; 32] = Sha256::digest(b"{\"a\":1}").into();
        assert_eq!(fingerprint(&json!({"a": 1})), expect);
    }

    // ---- kinds ----

    #[test]
    fn kinds() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
        }
        assert_eq!(Kind::parse("TEXT"), None);
        assert!(Kind::Template.is_template());
        assert!(!Kind::Text.is_template());
        let media: Vec<Kind> = Kind::ALL.into_iter().filter(|k| k.is_media()).collect();
        assert_eq!(
            media,
            vec![
                Kind::Image,
                Kind::Video,
                Kind::Audio,
                Kind::Document,
                Kind::Sticker
            ]
        );
        assert!(Kind::Document.takes_caption() && !Kind::Audio.takes_caption());
        assert_eq!(
            supported_types(),
            "text, image, video, audio, document, sticker, location, contacts, interactive, reaction, template"
        );
    }

    // ---- the envelope ----

    #[test]
    fn a_text_message() {
        let r = ok(
            json!({"type": "text", "to": "+1 415-555-0123", "text": {"body": "Hello", "preview_url": true}}),
        );
        assert_eq!(r.kind, Kind::Text);
        assert_eq!(
            r.recipient,
            Recipient::Phone(Phone {
                e164: PHONE.to_string()
            })
        );
        assert_eq!(r.sender, None);
        assert_eq!(r.text.as_deref(), Some("Hello"));
        assert_eq!(r.media, None);
        assert_eq!(r.template, None);
        assert_eq!(r.context, None);
        assert_eq!(r.content, json!({"body": "Hello", "preview_url": true}));
    }

    #[test]
    fn recipients() {
        let r = ok(json!({"type": "text", "to": {"wa_id": "14155550123"}, "text": {"body": "x"}}));
        assert_eq!(r.recipient, Recipient::WaId(Phone { e164: PHONE.into() }));
        let id = "0190f5a2-7c3e-7b1a-9f00-2b6c1d4e5f60";
        let r = ok(json!({"type": "text", "to": {"contact_id": id}, "text": {"body": "x"}}));
        assert_eq!(
            r.recipient,
            Recipient::ContactId(uuid::Uuid::parse_str(id).unwrap())
        );
        let text = json!({"body": "x"});
        let cases = [
            (json!(null), "to"),
            (json!(14155550123u64), "to"),
            (json!("+999123"), "to"),
            (json!({}), "to"),
            (json!({"contact_id": id, "wa_id": "14155550123"}), "to"),
            (json!({"contact_id": "nope"}), "to.contact_id"),
            (json!({"contact_id": 7}), "to.contact_id"),
            (json!({"wa_id": "+14155550123"}), "to.wa_id"),
            (json!({"wa_id": 14155550123u64}), "to.wa_id"),
            (json!({"wa_id": "999123"}), "to.wa_id"),
            (json!({"wa_id": "14155550123", "phone": "x"}), "to.phone"),
        ];
        for (to, field) in cases {
            let p = bad(json!({"type": "text", "to": to, "text": text}));
            assert_eq!(p.code, ErrorCode::ValidationFailed, "{to}");
            assert_eq!(field_names(&p), vec![field], "{to}");
            assert!(p.details.get("reason").is_none(), "{to}");
        }
    }

    #[test]
    fn recipient_reasons() {
        let p = bad(json!({"type": "text", "to": "14155550123", "text": {"body": "x"}}));
        assert_eq!(p.details["reason"], "to_needs_country_code");
        assert_eq!(field_names(&p), vec!["to"]);
        assert!(message_of(&p, "to").contains("country code"));
        let p = bad(json!({"type": "text", "to": "+<RECIPIENT_PHONE>", "text": {"body": "x"}}));
        assert_eq!(p.details["reason"], "to_placeholder");
        let p = bad(json!({"type": "text", "to": {"wa_id": "<WA_ID>"}, "text": {"body": "x"}}));
        assert_eq!(p.details["reason"], "to_placeholder");
        assert_eq!(field_names(&p), vec!["to.wa_id"]);
        // The reason stays when other fields are wrong too.
        let p = bad(json!({"type": "text", "to": "+<RECIPIENT_PHONE>", "text": {"body": ""}}));
        assert_eq!(p.code, ErrorCode::ValidationFailed);
        assert_eq!(p.details["reason"], "to_placeholder");
        assert_eq!(field_names(&p), vec!["to", "text.body"]);
    }

    #[test]
    fn senders() {
        let b = |extra: Value| {
            let mut v = json!({"type": "text", "to": PHONE, "text": {"body": "x"}});
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        assert_eq!(
            ok(b(json!({"phone_number_id": "1234567890"}))).sender,
            Some(Sender::PhoneNumberId("1234567890".into()))
        );
        assert_eq!(
            ok(b(json!({"from": "+14155550100"}))).sender,
            Some(Sender::From("+14155550100".into()))
        );
        assert_eq!(
            ok(b(json!({"from": "123", "phone_number_id": "123"}))).sender,
            Some(Sender::PhoneNumberId("123".into()))
        );
        assert_eq!(ok(b(json!({"from": null}))).sender, None);
        assert_eq!(
            invalid(b(json!({"from": "123", "phone_number_id": "456"}))),
            vec!["from"]
        );
        assert_eq!(
            invalid(b(json!({"from": "", "phone_number_id": 5}))),
            vec!["phone_number_id", "from"]
        );
    }

    #[test]
    fn context_and_envelope_members() {
        let r = ok(json!({"type": "text", "to": PHONE, "text": {"body": "x"},
            "context": {"message_id": "wamid.HBgLMTY0NjcwNDM1OTUVAgARGBI4MjZGRDA0OUE2OTQ3RkEyMzcA"},
            "messaging_product": "whatsapp", "recipient_type": "individual"}));
        assert_eq!(
            r.context.as_deref(),
            Some("wamid.HBgLMTY0NjcwNDM1OTUVAgARGBI4MjZGRDA0OUE2OTQ3RkEyMzcA")
        );
        let f = invalid(json!({"type": "text", "to": PHONE, "text": {"body": "x"},
            "context": {"message_id": "", "id": "x"},
            "messaging_product": "sms", "recipient_type": "group"}));
        assert_eq!(
            f,
            vec![
                "context.id",
                "context.message_id",
                "messaging_product",
                "recipient_type"
            ]
        );
        assert_eq!(
            invalid(
                json!({"type": "text", "to": PHONE, "text": {"body": "x"}, "context": "wamid.x"})
            ),
            vec!["context"]
        );
    }

    #[test]
    fn types() {
        // Missing or not a string: validation_failed.
        assert_eq!(
            invalid(json!({"to": PHONE, "text": {"body": "x"}})),
            vec!["type"]
        );
        assert_eq!(
            invalid(json!({"type": 1, "to": PHONE, "text": {"body": "x"}})),
            vec!["type"]
        );
        // Unknown type: unsupported_message_type naming type and listing the types.
        let p = bad(json!({"type": "button", "to": PHONE, "button": {"text": "x"}}));
        assert_eq!(p.code, ErrorCode::UnsupportedMessageType);
        assert_eq!(p.status(), 400);
        assert_eq!(field_names(&p), vec!["type"]);
        let m = message_of(&p, "type");
        assert!(
            m.contains("\"button\"") && m.contains(&supported_types()),
            "{m}"
        );
        // ... and still every other problem, and the to reason.
        let p = bad(json!({"type": "Text", "to": "14155550123", "bogus": 1}));
        assert_eq!(p.code, ErrorCode::UnsupportedMessageType);
        assert_eq!(field_names(&p), vec!["type", "to", "bogus"]);
        assert_eq!(p.details["reason"], "to_needs_country_code");
        // The object named like the type is required.
        assert_eq!(invalid(json!({"type": "text", "to": PHONE})), vec!["text"]);
        assert_eq!(
            invalid(json!({"type": "contacts", "to": PHONE, "contacts": null})),
            vec!["contacts"]
        );
        // Other types' objects and unknown members are refused.
        let f = invalid(json!({"type": "text", "to": PHONE, "text": {"body": "x"},
            "image": {"link": "https://example.com/a.jpg"}, "txt": {}, "biz_opaque_callback_data": "x"}));
        assert_eq!(f, vec!["biz_opaque_callback_data", "image", "txt"]);
        // A null foreign object is ignored.
        ok(json!({"type": "text", "to": PHONE, "text": {"body": "x"}, "image": null}));
        // Not an object at all.
        assert_eq!(field_names(&bad(json!([1]))), vec!["body"]);
    }

    // ---- text ----

    #[test]
    fn text_rules() {
        let t = |text: Value| with("text", text);
        ok(t(json!({"body": "é".repeat(4096)})));
        assert_eq!(
            invalid(t(json!({"body": "x".repeat(4097)}))),
            vec!["text.body"]
        );
        assert!(
            message_of(&bad(t(json!({"body": "x".repeat(4097)}))), "text.body").contains("4096")
        );
        assert_eq!(invalid(t(json!({"body": ""}))), vec!["text.body"]);
        assert_eq!(invalid(t(json!({"body": "  \n "}))), vec!["text.body"]);
        assert_eq!(invalid(t(json!({}))), vec!["text.body"]);
        assert_eq!(invalid(t(json!({"body": 5}))), vec!["text.body"]);
        assert_eq!(invalid(t(json!("hello"))), vec!["text"]);
        assert_eq!(
            invalid(t(json!({"body": "x", "preview_url": "yes", "bdy": "x"}))),
            vec!["text.bdy", "text.preview_url"]
        );
    }

    // ---- media ----

    #[test]
    fn media_messages() {
        let r = ok(with(
            "image",
            json!({"link": "https://example.com/a.jpg", "caption": "Look"}),
        ));
        assert_eq!(r.kind, Kind::Image);
        assert_eq!(
            r.media,
            Some(MediaRef::Link("https://example.com/a.jpg".into()))
        );
        assert_eq!(r.text.as_deref(), Some("Look"));
        assert_eq!(
            r.content,
            json!({"link": "https://example.com/a.jpg", "caption": "Look"})
        );
        let r = ok(with(
            "document",
            json!({"media_id": "m-1", "filename": "report.pdf", "caption": "Q3"}),
        ));
        assert_eq!(r.media, Some(MediaRef::Id("m-1".into())));
        assert_eq!(
            r.content,
            json!({"media_id": "m-1", "filename": "report.pdf", "caption": "Q3"})
        );
        let r = ok(with("audio", json!({"media_id": "m-2", "voice": true})));
        assert_eq!(r.text, None);
        ok(with("video", json!({"media_id": "m-3", "caption": "c"})));
        ok(with("sticker", json!({"media_id": "m-4"})));
        ok(with(
            "image",
            json!({"link": "https://example.com:8443/a.jpg?x=1#y"}),
        ));
    }

    #[test]
    fn media_rules() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("image", json!({}), vec!["image"]),
            (
                "image",
                json!({"link": "https://e.com/a", "media_id": "m"}),
                vec!["image"],
            ),
            (
                "image",
                json!({"link": "http://example.com/a.jpg"}),
                vec!["image.link"],
            ),
            (
                "image",
                json!({"link": "example.com/a.jpg"}),
                vec!["image.link"],
            ),
            ("image", json!({"link": 5}), vec!["image.link"]),
            ("image", json!({"media_id": ""}), vec!["image.media_id"]),
            ("image", json!({"id": "123"}), vec!["image", "image.id"]),
            (
                "image",
                json!({"media_id": "m", "caption": "x".repeat(1025)}),
                vec!["image.caption"],
            ),
            (
                "image",
                json!({"media_id": "m", "caption": ""}),
                vec!["image.caption"],
            ),
            (
                "image",
                json!({"media_id": "m", "filename": "a.jpg"}),
                vec!["image.filename"],
            ),
            (
                "audio",
                json!({"media_id": "m", "caption": "x"}),
                vec!["audio.caption"],
            ),
            (
                "sticker",
                json!({"media_id": "m", "caption": "x"}),
                vec!["sticker.caption"],
            ),
            (
                "video",
                json!({"media_id": "m", "voice": true}),
                vec!["video.voice"],
            ),
            (
                "audio",
                json!({"media_id": "m", "voice": "yes"}),
                vec!["audio.voice"],
            ),
            (
                "document",
                json!({"media_id": "m", "filename": "a/b.pdf"}),
                vec!["document.filename"],
            ),
            (
                "document",
                json!({"media_id": "m", "filename": "a\\b.pdf"}),
                vec!["document.filename"],
            ),
            (
                "document",
                json!({"media_id": "m", "filename": ""}),
                vec!["document.filename"],
            ),
            (
                "document",
                json!({"media_id": "m", "filename": "x".repeat(241)}),
                vec!["document.filename"],
            ),
            (
                "document",
                json!("https://example.com/a.pdf"),
                vec!["document"],
            ),
        ];
        for (kind, obj, want) in cases {
            let f = invalid(with(kind, obj.clone()));
            let mut f_sorted = f.clone();
            f_sorted.sort();
            let mut want: Vec<String> = want.into_iter().map(String::from).collect();
            want.sort();
            assert_eq!(f_sorted, want, "{kind} {obj}");
        }
        ok(with(
            "document",
            json!({"media_id": "m", "filename": "x".repeat(240)}),
        ));
        ok(with(
            "image",
            json!({"media_id": "m", "caption": "x".repeat(1024)}),
        ));
        let m = message_of(
            &bad(with("audio", json!({"media_id": "m", "caption": "x"}))),
            "audio.caption",
        );
        assert!(m.contains("image, video and document"), "{m}");
    }

    #[test]
    fn https_urls() {
        for u in [
            "https://example.com",
            "https://example.com/",
            "HTTPS://Example.COM/a b".replace(' ', "%20").as_str(),
            "https://sub.example.co.uk:443/p?q=1&r=2#f",
            "https://[2001:db8::1]:8443/x",
            "https://例え.jp/ファイル.jpg",
            "https://10.0.0.1/a",
        ] {
            assert!(is_https_url(u), "{u}");
        }
        for u in [
            "http://example.com/a",
            "https://",
            "https:///path",
            "https://exa mple.com/",
            "https://user:pw@example.com/",
            "https://example..com/",
            "https://-example.com/",
            "https://example.com:0/",
            "https://example.com:99999/",
            "https://example.com:/",
            "https://[::1/",
            "https://[zz]/",
            "https://example.com\\@evil.com/",
            "ftp://example.com/",
            "https:/example.com",
        ] {
            assert!(!is_https_url(u), "{u}");
        }
    }

    // ---- location, contacts, reaction ----

    #[test]
    fn location_rules() {
        let r = ok(with(
            "location",
            json!({"latitude": 51.5, "longitude": -0.12, "name": "HQ", "address": "1 Road"}),
        ));
        assert_eq!(r.content["name"], "HQ");
        ok(with("location", json!({"latitude": -90, "longitude": 180})));
        assert_eq!(
            invalid(with("location", json!({"latitude": 91, "longitude": "10"}))),
            vec!["location.latitude", "location.longitude"]
        );
        assert_eq!(
            invalid(with("location", json!({"name": 1, "zoom": 3}))),
            vec![
                "location.zoom",
                "location.latitude",
                "location.longitude",
                "location.name"
            ]
        );
    }

    #[test]
    fn contacts_rules() {
        let card = json!({"name": {"formatted_name": "Ada Lovelace", "first_name": "Ada"},
            "phones": [{"phone": "+14155550123", "type": "WORK", "wa_id": "14155550123"}],
            "emails": [{"email": "ada@example.com"}], "org": {"company": "X"}, "birthday": "1815-12-10"});
        let r = ok(with("contacts", json!([card])));
        assert_eq!(r.content, json!([card]));
        assert_eq!(invalid(with("contacts", json!([]))), vec!["contacts"]);
        assert_eq!(
            invalid(with("contacts", json!({"name": {}}))),
            vec!["contacts"]
        );
        let many: Vec<Value> = (0..=MAX_CONTACTS).map(|_| card.clone()).collect();
        assert_eq!(
            invalid(with("contacts", Value::Array(many))),
            vec!["contacts"]
        );
        assert_eq!(
            invalid(with(
                "contacts",
                json!([
                    {"name": {"formatted_name": ""}},
                    {"name": {}},
                    {},
                    "x",
                    {"name": {"formatted_name": "A"}, "phones": {"phone": "1"}, "org": "X"}
                ])
            )),
            vec![
                "contacts[0].name.formatted_name",
                "contacts[1].name.formatted_name",
                "contacts[2].name",
                "contacts[3]",
                "contacts[4].phones",
                "contacts[4].org"
            ]
        );
    }

    #[test]
    fn reaction_rules() {
        let r = ok(with(
            "reaction",
            json!({"message_id": "wamid.abc", "emoji": "👍"}),
        ));
        assert_eq!(r.content, json!({"message_id": "wamid.abc", "emoji": "👍"}));
        assert_eq!(r.text, None);
        ok(with(
            "reaction",
            json!({"message_id": "wamid.abc", "emoji": ""}),
        ));
        assert_eq!(
            invalid(with("reaction", json!({"emoji": 1}))),
            vec!["reaction.message_id", "reaction.emoji"]
        );
        assert_eq!(
            invalid(with(
                "reaction",
                json!({"message_id": "", "emoji": "x", "x": 1})
            )),
            vec!["reaction.x", "reaction.message_id"]
        );
    }

    // ---- interactive ----

    fn reply(id: &str, title: &str) -> Value {
        json!({"type": "reply", "reply": {"id": id, "title": title}})
    }

    #[test]
    fn interactive_buttons() {
        let good = json!({"type": "button", "header": {"type": "text", "text": "Order"},
            "body": {"text": "Confirm?"}, "footer": {"text": "Thanks"},
            "action": {"buttons": [reply("yes", "Yes"), reply("no", "No")]}});
        let r = ok(with("interactive", good.clone()));
        assert_eq!(r.content, good);
        ok(with(
            "interactive",
            json!({"type": "button", "header": {"type": "image", "image": {"link": "https://e.com/a.jpg"}},
            "body": {"text": "x"}, "action": {"buttons": [reply("a", "A")]}}),
        ));
        let f = invalid(with(
            "interactive",
            json!({"type": "button",
            "header": {"type": "location"},
            "body": {"text": "x".repeat(1025)},
            "footer": {"text": "x".repeat(61)},
            "action": {"buttons": [reply("a", "A"), reply("a", &"t".repeat(21)), {"type": "url"}, reply("c", "A")]}}),
        ));
        assert_eq!(
            f,
            vec![
                "interactive.body.text",
                "interactive.footer.text",
                "interactive.header.type",
                "interactive.action.buttons",
                "interactive.action.buttons[1].reply.id",
                "interactive.action.buttons[1].reply.title",
                "interactive.action.buttons[2].type",
                "interactive.action.buttons[2].reply",
                "interactive.action.buttons[3].reply.title"
            ]
        );
        assert_eq!(
            invalid(with(
                "interactive",
                json!({"type": "button", "action": {"buttons": []}})
            )),
            vec!["interactive.body", "interactive.action.buttons"]
        );
        assert_eq!(
            invalid(with(
                "interactive",
                json!({"type": "buttons", "body": {"text": "x"}, "action": {}})
            )),
            vec!["interactive.type"]
        );
        assert_eq!(
            invalid(with(
                "interactive",
                json!({"type": "button", "body": {"text": "x"}})
            )),
            vec!["interactive.action"]
        );
    }

    #[test]
    fn interactive_lists() {
        let row = |id: &str| json!({"id": id, "title": "Row", "description": "d"});
        let good = json!({"type": "list", "body": {"text": "x".repeat(4096)},
        "action": {"button": "Choose", "sections": [
            {"title": "A", "rows": [row("1"), row("2")]},
            {"title": "B", "rows": [row("3")]}
        ]}});
        ok(with("interactive", good));
        let rows: Vec<Value> = (0..6).map(|i| row(&format!("r{i}"))).collect();
        let rows2: Vec<Value> = (6..11).map(|i| row(&format!("r{i}"))).collect();
        let f = invalid(with(
            "interactive",
            json!({"type": "list",
            "header": {"type": "image", "image": {"link": "https://e.com/a.jpg"}},
            "body": {"text": "x"},
            "action": {"button": "x".repeat(21), "sections": [
                {"title": "A", "rows": rows},
                {"rows": rows2},
                {"title": "C", "rows": [{"id": "r1", "title": "x".repeat(25), "description": "d".repeat(73)}]}
            ]}}),
        ));
        assert_eq!(
            f,
            vec![
                "interactive.header.type",
                "interactive.action.button",
                "interactive.action.sections[1].title",
                "interactive.action.sections[2].rows[0].id",
                "interactive.action.sections[2].rows[0].title",
                "interactive.action.sections[2].rows[0].description",
                "interactive.action.sections"
            ]
        );
        let eleven: Vec<Value> = (0..11)
            .map(|i| json!({"title": "s", "rows": [row(&format!("r{i}"))]}))
            .collect();
        let f = invalid(with(
            "interactive",
            json!({"type": "list", "body": {"text": "x"},
            "action": {"button": "Go", "sections": eleven}}),
        ));
        assert_eq!(
            f,
            vec!["interactive.action.sections", "interactive.action.sections"]
        );
    }

    #[test]
    fn interactive_cta_flow_and_others() {
        ok(with(
            "interactive",
            json!({"type": "cta_url", "body": {"text": "See"},
            "action": {"name": "cta_url", "parameters": {"display_text": "Open", "url": "https://example.com/x"}}}),
        ));
        assert_eq!(
            invalid(with(
                "interactive",
                json!({"type": "cta_url", "body": {"text": "See"},
                "action": {"name": "url", "parameters": {"display_text": "x".repeat(21), "url": "http://example.com"}}})
            )),
            vec![
                "interactive.action.name",
                "interactive.action.parameters.display_text",
                "interactive.action.parameters.url"
            ]
        );
        ok(with(
            "interactive",
            json!({"type": "flow", "body": {"text": "Book"},
            "action": {"name": "flow", "parameters": {"flow_message_version": "3", "flow_id": "123",
                "flow_cta": "Book now", "flow_action": "navigate",
                "flow_action_payload": {"screen": "A"}}}}),
        ));
        assert_eq!(
            invalid(with(
                "interactive",
                json!({"type": "flow",
                "action": {"name": "flow", "parameters": {"flow_message_version": 3, "flow_id": "1",
                    "flow_name": "n", "flow_cta": "", "flow_action": "go"}}})
            )),
            vec![
                "interactive.action.parameters.flow_message_version",
                "interactive.action.parameters",
                "interactive.action.parameters.flow_cta",
                "interactive.action.parameters.flow_action"
            ]
        );
        // Other network types pass through.
        ok(with(
            "interactive",
            json!({"type": "location_request_message", "body": {"text": "Where?"},
            "action": {"name": "send_location"}}),
        ));
        ok(with(
            "interactive",
            json!({"type": "product", "action": {"catalog_id": "1", "product_retailer_id": "x"}}),
        ));
    }

    // ---- template ----

    #[test]
    fn template_sends() {
        let r = ok(with(
            "template",
            json!({"name": "order_update", "language": "en_US", "variables": ["Ada", "A-1"]}),
        ));
        assert!(r.kind.is_template());
        let t = r.template.expect("template");
        assert_eq!(t.name, "order_update");
        assert_eq!(t.language, "en_US");
        assert_eq!(
            t.variables,
            Some(vec!["Ada".to_string(), "A-1".to_string()])
        );
        assert_eq!(t.components, None);
        assert_eq!(r.text, None);
        assert_eq!(
            r.content,
            json!({"name": "order_update", "language": {"code": "en_US"}})
        );
        // The network's language object and typed components.
        let comps = json!([{"type": "body", "parameters": [{"type": "text", "text": "Ada"}]}]);
        let r = ok(with(
            "template",
            json!({"name": "t", "language": {"code": "pt_BR", "policy": "deterministic"}, "components": comps}),
        ));
        let t = r.template.expect("template");
        assert_eq!(t.language, "pt_BR");
        assert_eq!(t.components, Some(comps.clone()));
        assert_eq!(
            r.content,
            json!({"name": "t", "language": {"code": "pt_BR"}, "components": comps})
        );
        // Neither variables nor components: checked later against the template.
        let r = ok(with("template", json!({"name": "hello", "language": "en"})));
        assert_eq!(r.template.expect("t").variables, None);
        // Coupon code with variables.
        let r = ok(with(
            "template",
            json!({"name": "t", "language": "en", "variables": ["a"], "coupon_code": "SAVE10"}),
        ));
        assert_eq!(
            r.template.expect("t").coupon_code.as_deref(),
            Some("SAVE10")
        );
    }

    #[test]
    fn template_rules() {
        let t = |obj: Value| invalid(with("template", obj));
        assert_eq!(
            t(json!({"name": "t", "language": "en", "variables": ["a"], "components": []})),
            vec!["template"]
        );
        assert_eq!(
            t(
                json!({"language": "english", "variables": ["ok", "", "a\nb", "a\tb", "a     b", 5]})
            ),
            vec![
                "template.name",
                "template.language",
                "template.variables[5]",
                "template.variables[1]",
                "template.variables[2]",
                "template.variables[3]",
                "template.variables[4]"
            ]
        );
        assert_eq!(
            t(json!({"name": "", "language": {"code": "en", "policy": "fallback", "x": 1}})),
            vec![
                "template.name",
                "template.language.x",
                "template.language.policy"
            ]
        );
        assert_eq!(
            t(json!({"name": "t", "language": {"policy": "deterministic"}})),
            vec!["template.language.code"]
        );
        assert_eq!(t(json!({"name": "t"})), vec!["template.language"]);
        assert_eq!(
            t(
                json!({"name": "t", "language": 1, "variables": "a", "coupon_code": 5, "namespace": "x"})
            ),
            vec![
                "template.namespace",
                "template.language",
                "template.variables",
                "template.coupon_code"
            ]
        );
        assert_eq!(
            t(
                json!({"name": "t", "language": "en", "variables": ["a"], "coupon_code": "x".repeat(21)})
            ),
            vec!["template.coupon_code"]
        );
        assert_eq!(
            t(json!({"name": "t", "language": "en", "components": [], "coupon_code": "C"})),
            vec!["template.coupon_code"]
        );
        assert_eq!(
            t(json!({"name": "t", "language": "en", "components": {}})),
            vec!["template.components"]
        );
        assert_eq!(
            t(json!({"name": "t", "language": "en", "components": [
                {"type": "body", "parameters": [
                    {"type": "text", "text": "a"}, {"type": "text", "text": "b"}, {"type": "text", "text": "c\td"}
                ]},
                {"type": "button", "sub_type": "quick_reply", "index": "0", "parameters": [{"type": "payload", "payload": ""}]}
            ]})),
            vec![
                "template.components[0].parameters[2].text",
                "template.components[1].parameters[0].payload"
            ]
        );
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let p = bad(json!({
            "type": "template",
            "to": {"contact_id": "not-a-uuid"},
            "phone_number_id": "1",
            "from": "2",
            "text": {"body": "x"},
            "extra": true,
            "context": {"message_id": ""},
            "template": {"name": "", "language": "en_US", "variables": ["a", "b\nc"]}
        }));
        assert_eq!(p.code, ErrorCode::ValidationFailed);
        let f = field_names(&p);
        for want in [
            "to.contact_id",
            "from",
            "context.message_id",
            "extra",
            "text",
            "template.name",
            "template.variables[1]",
        ] {
            assert!(f.contains(&want.to_string()), "{want} missing from {f:?}");
        }
        assert_eq!(f.len(), 7, "{f:?}");
        assert_eq!(p.message, "7 fields are not valid.");
        assert!(p.details.get("reason").is_none());
    }

    #[test]
    fn template_examples_are_sendable() {
        let fixtures = [
            json!([{"type": "BODY", "text": "Hello"}]),
            json!([{"type": "BODY", "text": "Hi {{1}}, order {{2}} ok.", "example": {"body_text": [["Ada", "A-12"]]}}]),
            json!([
                {"type": "HEADER", "format": "TEXT", "text": "Hello {{1}}", "example": {"header_text": ["Ada"]}},
                {"type": "BODY", "text": "Hi {{1}}, your order {{2}} has shipped.", "example": {"body_text": [["Ada", "A-12"]]}},
                {"type": "FOOTER", "text": "Reply STOP to opt out"},
                {"type": "BUTTONS", "buttons": [
                    {"type": "QUICK_REPLY", "text": "Thanks"},
                    {"type": "URL", "text": "Track", "url": "https://example.com/track/{{1}}", "example": ["https://example.com/track/A-12"]},
                    {"type": "PHONE_NUMBER", "text": "Call us", "phone_number": "+14155550100"}
                ]}
            ]),
            json!([
                {"type": "HEADER", "format": "IMAGE", "example": {"header_handle": ["4::abc"]}},
                {"type": "BODY", "text": "Hi {{1}} ok", "example": {"body_text": [["Ada"]]}}
            ]),
            json!([
                {"type": "HEADER", "format": "LOCATION"},
                {"type": "BODY", "text": "Meet here."}
            ]),
            json!([
                {"type": "BODY", "text": "Use {{1}} now.", "example": {"body_text": [["x"]]}},
                {"type": "BUTTONS", "buttons": [{"type": "COPY_CODE", "example": "SAVE10"}]}
            ]),
        ];
        for components in fixtures {
            let mut ex = template::example_message("order_update", "en_US", &components);
            // As served, the placeholder is refused with its reason.
            let p = bad(ex.clone());
            assert_eq!(p.details["reason"], "to_placeholder", "{ex}");
            assert_eq!(field_names(&p), vec!["to"]);
            ex["to"] = json!(PHONE);
            let r = ok(ex.clone());
            let t = r.template.expect("template");
            assert_eq!(
                template::check_send(
                    &components,
                    t.variables.as_deref(),
                    t.components.as_ref(),
                    t.coupon_code.as_deref()
                ),
                Ok(()),
                "{ex}"
            );
        }
    }

    // ---- window and consent ----

    #[test]
    fn window_states() {
        let now = 1_000_000_000_000;
        assert_eq!(WindowState::at(None, now), WindowState::NeverWritten);
        assert_eq!(WindowState::at(Some(now - 1000), now), WindowState::Open);
        assert_eq!(
            WindowState::at(Some(now - WINDOW_MS + 1), now),
            WindowState::Open
        );
        assert_eq!(
            WindowState::at(Some(now - WINDOW_MS), now),
            WindowState::Closed
        );
        assert_eq!(WindowState::at(Some(i64::MAX), now), WindowState::Open);
        assert_eq!(WindowState::Open.as_str(), "open");
    }

    #[test]
    fn window_and_consent() {
        use WindowState::*;
        let code = |kind, w, o| check_window_and_consent(kind, w, o).err().map(|p| p.code);
        // Templates: every window, unless opted out.
        for w in [NeverWritten, Open, Closed] {
            assert_eq!(code(Kind::Template, w, false), None);
            assert_eq!(
                code(Kind::Template, w, true),
                Some(ErrorCode::ContactOptedOut)
            );
        }
        for kind in Kind::ALL.into_iter().filter(|k| !k.is_template()) {
            // A reply inside the customer's window, even after an opt-out.
            assert_eq!(code(kind, Open, false), None);
            assert_eq!(code(kind, Open, true), None);
            assert_eq!(
                code(kind, NeverWritten, false),
                Some(ErrorCode::TemplateRequired)
            );
            assert_eq!(code(kind, Closed, false), Some(ErrorCode::WindowExpired));
            assert_eq!(
                code(kind, NeverWritten, true),
                Some(ErrorCode::ContactOptedOut)
            );
            assert_eq!(code(kind, Closed, true), Some(ErrorCode::ContactOptedOut));
        }
        let p = check_window_and_consent(Kind::Text, Closed, false).expect_err("closed");
        assert_eq!(p.status(), 409);
        assert!(p.message.contains("template"), "{}", p.message);
        let p = check_window_and_consent(Kind::Image, NeverWritten, false).expect_err("new");
        assert!(p.message.contains("template"), "{}", p.message);
    }
}
