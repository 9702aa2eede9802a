//! Outbound send payloads (`POST /{version}/{phone-number-id}/messages`).
//!
//! The envelope is fully typed so the wire shape cannot drift:
//!
//! ```json
//! {"messaging_product":"whatsapp","recipient_type":"individual","to":"+16505551234",
//!  "type":"text","text":{"body":"hi"},
//!  "context":{"message_id":"wamid.…"},"biz_opaque_callback_data":"<tern message id>"}
//! ```
//!
//! Since 2026 a user may also be addressed by business-scoped user id (BSUID) or parent
//! BSUID: `"recipient": "US.13491208655302741918"` instead of `"to"` ([`Address::UserId`]).
//! When both are given the network uses `to`.
//!
//! The type object's key always equals the `type` value; this is guaranteed by
//! [`MessageContent`] being an internally tagged enum whose variants carry exactly one
//! field named after the type. Objects whose shape is "the network's own" and which Tern
//! passes through from its API users (contacts, interactive, template components) are
//! carried as [`serde_json::Value`].
//!
//! Content rules (caption only on image/video/document, filename only on document, length
//! limits) are enforced by Tern's domain layer, not here; these types only make sure the
//! fields that exist are spelled and nested correctly.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Always `"whatsapp"`.
pub const MESSAGING_PRODUCT: &str = "whatsapp";

/// A complete send request body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendPayload {
    pub messaging_product: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient_type: Option<RecipientType>,
    /// Phone number (or group id). At least one of `to` / `recipient` is set; `to` wins
    /// when both are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Business-scoped user id or parent BSUID (2026+), instead of `to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
    #[serde(flatten)]
    pub content: MessageContent,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ReplyContext>,
    /// Echoed back on every status webhook for this message. Tern puts its own message id
    /// here so a status can be matched even when the send answer (and the wamid) was lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub biz_opaque_callback_data: Option<String>,
}

impl SendPayload {
    /// A payload to an individual recipient's phone number (`to`), without context or
    /// callback data.
    pub fn new(to: impl Into<String>, content: MessageContent) -> Self {
        Self {
            messaging_product: MESSAGING_PRODUCT.to_owned(),
            recipient_type: Some(RecipientType::Individual),
            to: Some(to.into()),
            recipient: None,
            content,
            context: None,
            biz_opaque_callback_data: None,
        }
    }

    /// A payload to an individual recipient by phone or business-scoped user id. The
    /// address is used as given (no `+` is added).
    pub fn to_address(address: Address<'_>, content: MessageContent) -> Self {
        let (to, recipient) = match address {
            Address::Phone(phone) => (Some(phone.to_owned()), None),
            Address::UserId(user_id) => (None, Some(user_id.to_owned())),
        };
        Self {
            to,
            recipient,
            ..Self::new(String::new(), content)
        }
    }

    /// Quote an earlier message (contextual reply).
    #[must_use]
    pub fn reply_to(mut self, wamid: impl Into<String>) -> Self {
        self.context = Some(ReplyContext {
            message_id: wamid.into(),
        });
        self
    }

    /// Set `biz_opaque_callback_data` (Tern: its own message id).
    #[must_use]
    pub fn callback_data(mut self, data: impl Into<String>) -> Self {
        self.biz_opaque_callback_data = Some(data.into());
        self
    }

    /// The wire `type` value of this payload.
    pub fn message_type(&self) -> &'static str {
        self.content.type_name()
    }

    /// Serialise to the exact JSON the network expects.
    pub fn to_json(&self) -> Value {
        // Serialising plain structs/strings/Values cannot fail; fall back to Null rather
        // than panicking just in case.
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecipientType {
    Individual,
    Group,
}

/// `context` of a contextual reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyContext {
    pub message_id: String,
}

/// The `type` discriminator plus the matching type object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum MessageContent {
    Text {
        text: Text,
    },
    Image {
        image: CaptionedMedia,
    },
    Video {
        video: CaptionedMedia,
    },
    Audio {
        audio: AudioMedia,
    },
    Document {
        document: DocumentMedia,
    },
    Sticker {
        sticker: StickerMedia,
    },
    Location {
        location: Location,
    },
    /// Array of contact cards in the network's own format.
    Contacts {
        contacts: Vec<Value>,
    },
    /// Interactive object (`button`, `list`, `cta_url`, `flow`, …) in the network's format.
    Interactive {
        interactive: Value,
    },
    Reaction {
        reaction: Reaction,
    },
    Template {
        template: Template,
    },
}

impl MessageContent {
    /// The wire `type` value.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Text { .. } => "text",
            Self::Image { .. } => "image",
            Self::Video { .. } => "video",
            Self::Audio { .. } => "audio",
            Self::Document { .. } => "document",
            Self::Sticker { .. } => "sticker",
            Self::Location { .. } => "location",
            Self::Contacts { .. } => "contacts",
            Self::Interactive { .. } => "interactive",
            Self::Reaction { .. } => "reaction",
            Self::Template { .. } => "template",
        }
    }

    /// Templates are the only messages allowed outside the 24 h customer service window.
    pub fn is_template(&self) -> bool {
        matches!(self, Self::Template { .. })
    }

    pub fn text(body: impl Into<String>) -> Self {
        Self::Text {
            text: Text {
                body: body.into(),
                preview_url: None,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Text {
    pub body: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview_url: Option<bool>,
}

/// Uploaded media id or a public link the network fetches itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaSource {
    Id(String),
    Link(String),
}

/// Image or video.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptionedMedia {
    #[serde(flatten)]
    pub source: MediaSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AudioMedia {
    #[serde(flatten)]
    pub source: MediaSource,
    /// `true` = voice note (may later get a `played` status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voice: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentMedia {
    #[serde(flatten)]
    pub source: MediaSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StickerMedia {
    #[serde(flatten)]
    pub source: MediaSource,
}

/// Numbers on send (inbound webhooks carry strings; see the notification module).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    pub latitude: f64,
    pub longitude: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// An empty `emoji` removes an earlier reaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reaction {
    pub message_id: String,
    pub emoji: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Template {
    pub name: String,
    pub language: TemplateLanguage,
    /// header/body/button components with their parameters, in the network's format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<Value>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateLanguage {
    pub code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl TemplateLanguage {
    pub fn new(code: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            policy: None,
        }
    }
}

/// The network's template object of a send: `{"name", "language": {"code"}, "components"}`
/// (components left out when there are none).
pub fn template_object(name: &str, language: &str, components: Value) -> Value {
    let mut obj = serde_json::json!({"name": name, "language": {"code": language}});
    if components.as_array().is_some_and(|a| !a.is_empty()) {
        obj["components"] = components;
    }
    obj
}

/// Who a message goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Address<'a> {
    /// A phone number's wa_id (digits); sent as `"to"`.
    Phone(&'a str),
    /// A business-scoped user id or parent BSUID; sent as `"recipient"`.
    UserId(&'a str),
}

impl Address<'_> {
    /// The request field that carries this address: `to` or `recipient`.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Phone(_) => "to",
            Self::UserId(_) => "recipient",
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            Self::Phone(s) | Self::UserId(s) => s,
        }
    }
}

/// The network fields of a message as Tern stores them for dispatch: `{"to" | "recipient",
/// "type", "<type>": content[, "context": {"message_id"}]}` (the envelope is added at send
/// time by [`build_payload`]).
pub fn message_request(
    to: Address<'_>,
    kind: &str,
    content: Value,
    reply_to: Option<&str>,
) -> Value {
    let mut request = serde_json::json!({"type": kind});
    request[to.field()] = Value::from(to.as_str());
    request[kind] = content;
    if let Some(wamid) = reply_to {
        request["context"] = serde_json::json!({"message_id": wamid});
    }
    request
}

/// The type's object of a stored request (what [`message_request`] put under `kind`).
pub fn request_content<'a>(request: &'a Value, kind: &str) -> Option<&'a Value> {
    request.get(kind)
}

/// A stored media request with the network's media `id` in place of the Tern `media_id`
/// or the customer's `link` (Tern uploads every file itself and never hands the network a
/// customer's URL).
pub fn with_network_media(request: &Value, network_media_id: &str) -> Value {
    let mut out = request.clone();
    let kind = request.get("type").and_then(Value::as_str).unwrap_or("");
    if let Some(Value::Object(obj)) = out.get_mut(kind) {
        obj.remove("link");
        obj.remove("media_id");
        obj.insert("id".into(), Value::from(network_media_id));
    }
    out
}

/// The network payload of a stored request: the envelope (`messaging_product`,
/// `recipient_type`), the request's fields, and `biz_opaque_callback_data` = `callback`
/// (Tern's message id, so a status can be matched when the send's answer was lost). A `to`
/// of digits only (a wa_id) gets its `+`: without it the network would prepend the business
/// number's country code. A `recipient` (BSUID) is passed through unchanged. A request with
/// neither a `to` nor a `recipient` is refused.
pub fn build_payload(callback: &str, request: &Value) -> Result<SendPayload, String> {
    let Value::Object(fields) = request else {
        return Err("the stored request is not a JSON object".into());
    };
    let mut obj = serde_json::Map::new();
    obj.insert("messaging_product".into(), Value::from(MESSAGING_PRODUCT));
    obj.insert("recipient_type".into(), Value::from("individual"));
    for (k, v) in fields {
        if k != "messaging_product" && k != "biz_opaque_callback_data" {
            obj.insert(k.clone(), v.clone());
        }
    }
    if let Some(Value::String(to)) = obj.get_mut("to")
        && !to.is_empty()
        && to.bytes().all(|b| b.is_ascii_digit())
    {
        *to = format!("+{to}");
    }
    obj.insert("biz_opaque_callback_data".into(), Value::from(callback));
    let payload: SendPayload =
        serde_json::from_value(Value::Object(obj)).map_err(|e| e.to_string())?;
    let present = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
    if !present(&payload.to) && !present(&payload.recipient) {
        return Err("the stored request has neither `to` nor `recipient`".into());
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_has_envelope_callback_and_plus() {
        let id = "0190a0b0-0000-7000-8000-000000000001";
        let p = build_payload(
            id,
            &serde_json::json!({"to": "16505551234", "type": "text", "text": {"body": "hi"},
                    "context": {"message_id": "wamid.X"}, "biz_opaque_callback_data": "evil"}),
        )
        .unwrap();
        assert_eq!(
            p.to_json(),
            serde_json::json!({"messaging_product": "whatsapp", "recipient_type": "individual",
                   "to": "+16505551234", "type": "text", "text": {"body": "hi"},
                   "context": {"message_id": "wamid.X"},
                   "biz_opaque_callback_data": id})
        );
        assert!(build_payload(id, &serde_json::json!({"to": "1", "type": "bogus"})).is_err());
        assert!(build_payload(id, &serde_json::json!([1])).is_err());
        assert!(build_payload(id, &Value::Null).is_err());
        // no address at all
        let text = serde_json::json!({"type": "text", "text": {"body": "hi"}});
        assert!(build_payload(id, &text).is_err());
        let mut empty = text.clone();
        empty["to"] = Value::from("");
        assert!(build_payload(id, &empty).is_err());
    }

    #[test]
    fn payload_to_a_bsuid() {
        let id = "0190a0b0-0000-7000-8000-000000000002";
        let request = message_request(
            Address::UserId("US.13491208655302741918"),
            "text",
            serde_json::json!({"body": "hi"}),
            None,
        );
        assert_eq!(
            request,
            serde_json::json!({"recipient": "US.13491208655302741918", "type": "text",
                               "text": {"body": "hi"}})
        );
        let p = build_payload(id, &request).unwrap();
        assert_eq!(p.to, None);
        assert_eq!(
            p.to_json(),
            serde_json::json!({"messaging_product": "whatsapp", "recipient_type": "individual",
                   "recipient": "US.13491208655302741918", "type": "text",
                   "text": {"body": "hi"}, "biz_opaque_callback_data": id})
        );
        // a digits-only BSUID-like value in `recipient` gets no `+`
        let p = build_payload(
            id,
            &message_request(
                Address::UserId("12345"),
                "text",
                serde_json::json!({"body": "x"}),
                None,
            ),
        )
        .unwrap();
        assert_eq!(p.recipient.as_deref(), Some("12345"));
        // both given: both kept (the network uses `to`), `to` gets its `+`
        let mut both = message_request(
            Address::Phone("16505551234"),
            "text",
            serde_json::json!({"body": "x"}),
            None,
        );
        both["recipient"] = Value::from("US.1");
        let p = build_payload(id, &both).unwrap();
        assert_eq!(p.to.as_deref(), Some("+16505551234"));
        assert_eq!(p.recipient.as_deref(), Some("US.1"));
        // the typed constructor
        let v =
            SendPayload::to_address(Address::UserId("US.9"), MessageContent::text("t")).to_json();
        assert_eq!(v["recipient"], "US.9");
        assert!(v.get("to").is_none());
        let v =
            SendPayload::to_address(Address::Phone("+1555"), MessageContent::text("t")).to_json();
        assert_eq!(v["to"], "+1555");
        assert!(v.get("recipient").is_none());
    }

    #[test]
    fn stored_request_and_template_object() {
        let t = template_object("hi", "en_US", serde_json::json!([]));
        assert_eq!(
            t,
            serde_json::json!({"name": "hi", "language": {"code": "en_US"}})
        );
        let r = message_request(Address::Phone("1415"), "template", t, Some("wamid.A"));
        assert_eq!(r["to"], "1415");
        assert!(r.get("recipient").is_none());
        assert_eq!(r["context"]["message_id"], "wamid.A");
        assert_eq!(r["template"]["name"], "hi");
    }
    use serde_json::json;

    #[test]
    fn text_envelope_is_exact() {
        let p = SendPayload::new("+16505551234", MessageContent::text("hello"))
            .reply_to("wamid.ABC")
            .callback_data("msg_1");
        assert_eq!(
            p.to_json(),
            json!({
                "messaging_product": "whatsapp",
                "recipient_type": "individual",
                "to": "+16505551234",
                "type": "text",
                "text": {"body": "hello"},
                "context": {"message_id": "wamid.ABC"},
                "biz_opaque_callback_data": "msg_1"
            })
        );
        assert_eq!(p.message_type(), "text");
    }

    #[test]
    fn media_by_id_and_link() {
        let img = SendPayload::new(
            "1555",
            MessageContent::Image {
                image: CaptionedMedia {
                    source: MediaSource::Id("123".into()),
                    caption: Some("cap".into()),
                },
            },
        );
        assert_eq!(
            img.to_json()["image"],
            json!({"id": "123", "caption": "cap"})
        );
        let doc = SendPayload::new(
            "1555",
            MessageContent::Document {
                document: DocumentMedia {
                    source: MediaSource::Link("https://x/y.pdf".into()),
                    caption: None,
                    filename: Some("y.pdf".into()),
                },
            },
        );
        let v = doc.to_json();
        assert_eq!(v["type"], "document");
        assert_eq!(
            v["document"],
            json!({"link": "https://x/y.pdf", "filename": "y.pdf"})
        );
        let audio = MessageContent::Audio {
            audio: AudioMedia {
                source: MediaSource::Id("9".into()),
                voice: Some(true),
            },
        };
        let v = SendPayload::new("1", audio).to_json();
        assert_eq!(v["audio"], json!({"id": "9", "voice": true}));
        let sticker = MessageContent::Sticker {
            sticker: StickerMedia {
                source: MediaSource::Id("7".into()),
            },
        };
        assert_eq!(
            SendPayload::new("1", sticker).to_json()["sticker"],
            json!({"id": "7"})
        );
    }

    #[test]
    fn every_type_key_matches_type_value() {
        let contents = vec![
            MessageContent::text("x"),
            MessageContent::Image {
                image: CaptionedMedia {
                    source: MediaSource::Id("1".into()),
                    caption: None,
                },
            },
            MessageContent::Video {
                video: CaptionedMedia {
                    source: MediaSource::Id("1".into()),
                    caption: None,
                },
            },
            MessageContent::Audio {
                audio: AudioMedia {
                    source: MediaSource::Id("1".into()),
                    voice: None,
                },
            },
            MessageContent::Document {
                document: DocumentMedia {
                    source: MediaSource::Id("1".into()),
                    caption: None,
                    filename: None,
                },
            },
            MessageContent::Sticker {
                sticker: StickerMedia {
                    source: MediaSource::Id("1".into()),
                },
            },
            MessageContent::Location {
                location: Location {
                    latitude: 1.5,
                    longitude: -2.0,
                    name: None,
                    address: None,
                },
            },
            MessageContent::Contacts {
                contacts: vec![json!({"name": {"formatted_name": "A"}})],
            },
            MessageContent::Interactive {
                interactive: json!({"type": "button"}),
            },
            MessageContent::Reaction {
                reaction: Reaction {
                    message_id: "wamid.X".into(),
                    emoji: "\u{1F600}".into(),
                },
            },
            MessageContent::Template {
                template: Template {
                    name: "hello_world".into(),
                    language: TemplateLanguage::new("en_US"),
                    components: None,
                },
            },
        ];
        assert_eq!(contents.len(), 11);
        for c in contents {
            let name = c.type_name();
            let v = SendPayload::new("1", c.clone()).to_json();
            assert_eq!(v["type"], name);
            assert!(v.get(name).is_some(), "missing object for {name}");
            // and it round-trips
            let back: SendPayload = serde_json::from_value(v).unwrap();
            assert_eq!(back.content, c);
        }
    }

    #[test]
    fn template_shape() {
        let t = MessageContent::Template {
            template: Template {
                name: "order_update".into(),
                language: TemplateLanguage::new("en_US"),
                components: Some(vec![
                    json!({"type":"body","parameters":[{"type":"text","text":"A1"}]}),
                ]),
            },
        };
        let v = SendPayload::new("1", t).to_json();
        assert_eq!(
            v["template"],
            json!({"name":"order_update","language":{"code":"en_US"},
                   "components":[{"type":"body","parameters":[{"type":"text","text":"A1"}]}]})
        );
    }
}
