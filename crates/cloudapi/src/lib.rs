//! Typed adapter for the WhatsApp Cloud API (Meta Graph API) and its wire formats.
//!
//! Pure protocol code, no database:
//! * [`agents`]: read marks with a typing indicator, and the block list;
//! * [`send`]: outbound message payloads (all 11 types) in the network's exact JSON;
//! * [`error`]: Graph error parsing, [`RetryClass`] and Tern failure codes;
//! * [`client`]: [`CloudApiClient`] (reqwest/rustls) for send, media, templates and numbers,
//!   with [`SendError`] separating "never sent" from "outcome unknown";
//! * [`signature`]: `X-Hub-Signature-256` signing and constant-time verification, and the
//!   subscription handshake (`hub.*`);
//! * [`notification`]: a tolerant parser for the network's webhook notifications.

pub mod agents;
pub mod client;
pub mod error;
pub mod notification;
pub mod send;
pub mod signature;
pub mod template_words;

pub use agents::{MarkReadPayload, TypingIndicator, UserOutcome};
pub use client::{
    ClientConfig, CloudApiClient, CreatedTemplate, MediaDownload, MediaInfo, PhoneNumberInfo,
    SendAccepted, SendError, TemplateInfo, TemplatePage, parse_send_accepted,
};
pub use error::{
    CodeInfo, FailureInfo, GraphError, RetryClass, WebhookError, code_info, failure_info,
    outcome_unknown_failure, retry_class,
};
pub use notification::{
    Change, Contact, Conversation, DeliveryStatus, Entry, IdentityChange, Ids, InboundContent,
    InboundContext, InboundLocation, InboundMedia, InboundMessage, InteractiveReply, MessagesValue,
    Metadata, Notification, ParseError, Pricing, Sender, StatusUpdate, TemplateCategoryUpdate,
    TemplateEvent, TemplateStatusUpdate, parse_notification, parse_notification_value,
};
pub use send::{
    Address, AudioMedia, CaptionedMedia, DocumentMedia, Location, MediaSource, MessageContent,
    Reaction, RecipientType, ReplyContext, SendPayload, StickerMedia, Template, TemplateLanguage,
    Text,
};
pub use signature::{SIGNATURE_HEADER, sign, subscription_challenge, verify_signature};
