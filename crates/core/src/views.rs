//! How Tern shows its resources: the JSON of a Message, a Contact and a Template, the same
//! in API answers and in event webhook bodies (`data`), so the two can never drift apart.
//! The HTTP adapter documents them (utoipa schemas) and renders them; the events module
//! serialises them into the stored event body.

use serde::Serialize;
use serde_json::Value;
use tern_domain::time::format_ms;
use tern_domain::{failure, template};
use utoipa::ToSchema;

/// Why a message failed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Failure {
    /// Tern's failure code (same as the message's `failure_code`).
    #[schema(example = "recipient_not_on_whatsapp")]
    pub code: String,
    /// A plain explanation.
    pub message: String,
    /// The network's error code, when the network gave one.
    #[schema(example = "131026")]
    pub provider_code: Option<String>,
    /// The network's own wording.
    pub provider_message: Option<String>,
    /// A link to fix the cause; present only when the network offers one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_href: Option<String>,
}

/// A message, outbound (sent through Tern) or inbound (from a customer).
#[derive(Debug, Serialize, ToSchema)]
pub struct Message {
    #[schema(format = Uuid)]
    pub id: String,
    #[schema(format = Uuid)]
    pub conversation_id: String,
    #[schema(format = Uuid)]
    pub contact_id: String,
    /// The business number that sent or received it.
    pub phone_number_id: String,
    /// `outbound` or `inbound`.
    #[schema(example = "outbound")]
    pub direction: String,
    #[serde(rename = "type")]
    #[schema(example = "text")]
    pub r#type: String,
    /// `accepted`, `sending`, `sent`, `delivered`, `read` or `failed` (outbound);
    /// `received` (inbound).
    #[schema(example = "accepted")]
    pub status: String,
    pub template_name: Option<String>,
    /// The body of a text message, the caption of a media message, else null.
    pub text: Option<String>,
    pub media_id: Option<String>,
    /// The network's message id; null until the message has reached the network.
    pub wamid: Option<String>,
    /// Set when a campaign sent the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Uuid)]
    pub campaign_id: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub sent_at: Option<String>,
    #[schema(format = DateTime)]
    pub delivered_at: Option<String>,
    /// Outbound: when the customer read it. Inbound: when the business marked it read
    /// (`POST /messages/{message_id}/read`, or a later message's read mark).
    #[schema(format = DateTime)]
    pub read_at: Option<String>,
    #[schema(format = DateTime)]
    pub failed_at: Option<String>,
    pub failure_code: Option<String>,
    pub failure: Option<Failure>,
    /// The type's object in the network's shape: as accepted (outbound), as received or
    /// last edited (inbound), e.g. location `{latitude, longitude, name, address}`,
    /// interactive `{type, button_reply|list_reply|nfm_reply}`, reaction `{message_id,
    /// wamid, emoji}`; null once the customer deleted the message.
    #[schema(value_type = Option<Object>)]
    pub content: Option<Value>,
    /// The message this one answers; `message_id` is null when Tern does not hold it.
    pub reply_to: Option<ReplyTo>,
    /// The click-to-WhatsApp ad the customer came from (inbound only), as the network
    /// sends it (`source_url`, `source_id`, `source_type`, `headline`, `body`, `ctwa_clid`, …).
    #[schema(value_type = Option<Object>)]
    pub referral: Option<Value>,
    /// When the customer last edited the message.
    #[schema(format = DateTime)]
    pub edited_at: Option<String>,
    /// When the customer deleted the message (`text` and `content` are then null).
    #[schema(format = DateTime)]
    pub revoked_at: Option<String>,
    /// What the network said the message costs, from its latest status report that carried
    /// a price (outbound; null until one arrives).
    pub pricing: Option<Pricing>,
}

/// The network's `pricing` of a status report, as it reported it.
#[derive(Debug, Serialize, ToSchema)]
pub struct Pricing {
    /// Whether the network charges for the message (deprecated by the network: `type` says
    /// the same).
    pub billable: Option<bool>,
    /// `PMP`: priced per message.
    #[schema(example = "PMP")]
    pub pricing_model: Option<String>,
    /// `marketing`, `utility`, `authentication`, `service`, … (a template's category, or
    /// `service` for a reply in the customer service window).
    #[schema(example = "marketing")]
    pub category: Option<String>,
    /// `regular` (charged), `free_customer_service` or `free_entry_point`.
    #[serde(rename = "type")]
    #[schema(example = "regular")]
    pub r#type: Option<String>,
}

impl From<tern_domain::message::Pricing> for Pricing {
    fn from(p: tern_domain::message::Pricing) -> Self {
        Pricing {
            billable: p.billable,
            pricing_model: p.pricing_model,
            category: p.category,
            r#type: p.r#type,
        }
    }
}

/// The message another one answers.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplyTo {
    /// Tern's id of that message; null when Tern does not hold it.
    #[schema(format = Uuid)]
    pub message_id: Option<String>,
    /// The network's id of that message.
    pub wamid: String,
}

impl From<failure::Failure> for Failure {
    fn from(f: failure::Failure) -> Self {
        Failure {
            code: f.code,
            message: f.message,
            provider_code: f.provider_code,
            provider_message: f.provider_message,
            provider_href: f.provider_href,
        }
    }
}

impl From<tern_store::Message> for Message {
    fn from(m: tern_store::Message) -> Self {
        let content = crate::messages::content(&m);
        Message {
            id: m.id.to_string(),
            conversation_id: m.conversation_id.to_string(),
            contact_id: m.contact_id.to_string(),
            phone_number_id: m.phone_number_id,
            direction: m.direction.as_str().to_string(),
            r#type: tern_domain::message::MessageType::shown(&m.r#type)
                .as_str()
                .to_string(),
            status: m.status.as_str().to_string(),
            template_name: m.template_name,
            text: m.text,
            media_id: m.media_id.map(|id| id.to_string()),
            wamid: m.wamid,
            campaign_id: m.campaign_id.map(|id| id.to_string()),
            created_at: format_ms(m.created_at),
            sent_at: m.sent_at.map(format_ms),
            delivered_at: m.delivered_at.map(format_ms),
            read_at: m.read_at.map(format_ms),
            failed_at: m.failed_at.map(format_ms),
            failure_code: m.failure_code,
            failure: m.failure.map(Failure::from),
            content,
            reply_to: m.reply_to.map(|r| ReplyTo {
                message_id: r.message_id.map(|id| id.to_string()),
                wamid: r.wamid,
            }),
            referral: m.referral,
            edited_at: m.edited_at.map(format_ms),
            revoked_at: m.revoked_at.map(format_ms),
            pricing: m.pricing.map(Pricing::from),
        }
    }
}

/// A contact's consent to business-initiated messages.
#[derive(Debug, Serialize, ToSchema)]
pub struct Consent {
    /// `opted_in`, `opted_out` or `unknown`.
    #[schema(example = "opted_in")]
    pub status: String,
    #[schema(format = DateTime)]
    pub updated_at: Option<String>,
    /// Where the decision was collected, as given when it was recorded.
    pub source: Option<String>,
}

/// A customer of the organisation.
#[derive(Debug, Serialize, ToSchema)]
pub struct Contact {
    #[schema(format = Uuid)]
    pub id: String,
    /// The phone number's digits without `+`; null for a customer known only by
    /// `user_id` (the network withholds the phone of some username users).
    #[schema(example = "447700900123")]
    pub wa_id: Option<String>,
    /// E.164; null like `wa_id`.
    #[schema(example = "+447700900123")]
    pub phone: Option<String>,
    /// The business-scoped user id the network gives the customer (stable for this
    /// business; replaced when the customer changes number).
    #[schema(example = "US.13491208655302741918")]
    pub user_id: Option<String>,
    /// The parent business-scoped user id, shared across a managed business's portfolios.
    pub parent_user_id: Option<String>,
    /// The customer's WhatsApp username, when they have one.
    pub username: Option<String>,
    pub name: Option<String>,
    /// Values of the organisation's custom contact fields, by key.
    #[schema(value_type = Object)]
    pub custom_fields: Value,
    pub tags: Vec<String>,
    pub consent: Consent,
    /// When the customer last wrote (the network's time); the 24-hour window runs from it.
    #[schema(format = DateTime)]
    pub last_inbound_at: Option<String>,
    /// When the organisation blocked the customer (`POST /contacts/{contact_id}/block`);
    /// null when not blocked. Nothing is sent to a blocked customer.
    #[schema(format = DateTime)]
    pub blocked_at: Option<String>,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<tern_store::Contact> for Contact {
    fn from(c: tern_store::Contact) -> Self {
        Contact {
            id: c.id.to_string(),
            phone: c.wa_id.as_ref().map(|w| format!("+{w}")),
            wa_id: c.wa_id,
            user_id: c.user_id,
            parent_user_id: c.parent_user_id,
            username: c.username,
            name: c.name,
            custom_fields: c.custom_fields,
            tags: c.tags,
            consent: Consent {
                status: c.consent_status.as_str().to_string(),
                updated_at: c.consent_updated_at.map(format_ms),
                source: c.consent_source,
            },
            last_inbound_at: c.last_inbound_at.map(format_ms),
            blocked_at: c.blocked_at.map(format_ms),
            created_at: format_ms(c.created_at),
            updated_at: format_ms(c.updated_at),
        }
    }
}

/// `draft` (created in Tern, not yet submitted) → `pending` (in review) → `approved` or
/// `rejected`; an approved template may later be `paused` or `disabled` by the network.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum TemplateStatus {
    Draft,
    Pending,
    Approved,
    Rejected,
    Paused,
    Disabled,
}

/// The template's category; the network prices template messages by it.
#[derive(Debug, ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum TemplateCategory {
    Marketing,
    Utility,
    Authentication,
}

/// A message template of one of the organisation's WhatsApp Business Accounts.
#[derive(Debug, Serialize, ToSchema)]
pub struct Template {
    #[schema(format = Uuid)]
    pub id: String,
    /// Lowercase letters, digits and underscores; unique per language and WABA.
    #[schema(example = "order_shipped")]
    pub name: String,
    #[schema(example = "en_US")]
    pub language: String,
    #[schema(value_type = TemplateCategory)]
    pub category: String,
    #[schema(value_type = TemplateStatus)]
    pub status: String,
    /// The network's components (`HEADER`, `BODY`, `FOOTER`, `BUTTONS`).
    #[schema(value_type = Vec<Object>)]
    pub components: Value,
    /// The network's reason when the template was rejected (e.g. `INVALID_FORMAT`).
    pub rejection_reason: Option<String>,
    /// The WhatsApp Business Account the template belongs to.
    pub waba_id: String,
    /// A ready-to-send `POST /messages` body filled from the template's examples; replace
    /// its `to` (`"+<RECIPIENT_PHONE>"`) and the values.
    #[schema(value_type = Object)]
    pub example: Value,
    #[schema(format = DateTime)]
    pub created_at: String,
    #[schema(format = DateTime)]
    pub updated_at: String,
}

impl From<tern_store::Template> for Template {
    fn from(t: tern_store::Template) -> Self {
        let example = template::example_message(&t.name, &t.language, &t.components);
        Template {
            id: t.id.to_string(),
            name: t.name,
            language: t.language,
            category: t.category.as_str().to_string(),
            status: t.status.as_str().to_string(),
            components: t.components,
            rejection_reason: t.rejection_reason,
            waba_id: t.waba_id,
            example,
            created_at: format_ms(t.created_at),
            updated_at: format_ms(t.updated_at),
        }
    }
}
