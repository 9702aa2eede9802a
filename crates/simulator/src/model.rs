//! Data the simulator keeps: numbers, recipients, templates, media, and the logs tests read.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A registered business number.
#[derive(Clone, Debug, Serialize)]
pub struct Number {
    pub id: String,
    pub display_phone_number: String,
    pub waba_id: String,
    pub access_token: String,
    pub throughput_mps: u32,
    pub verified_name: String,
    /// GREEN / YELLOW / RED / UNKNOWN.
    pub quality_rating: String,
    /// CONNECTED, FLAGGED, RESTRICTED, …
    pub status: String,
    pub pair_burst: u32,
    pub pair_period_ms: u64,
}

impl Number {
    /// Digits only, as in webhook `metadata.display_phone_number`.
    pub fn display_digits(&self) -> String {
        digits(&self.display_phone_number)
    }
}

/// `PATCH /_sim/numbers/{id}` body.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NumberPatch {
    pub throughput_mps: Option<u32>,
    pub quality_rating: Option<String>,
    pub status: Option<String>,
    pub access_token: Option<String>,
    pub verified_name: Option<String>,
    pub pair_burst: Option<u32>,
    pub pair_period_ms: Option<u64>,
}

/// How a simulated WhatsApp user reacts to messages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behaviour {
    /// sent → delivered → read.
    #[default]
    Normal,
    /// accepted, then `failed` 131026.
    NotOnWhatsapp,
    /// accepted, then `failed` with `fail_code`.
    Fail,
    /// only `sent`.
    NeverDelivers,
    /// sent → delivered, never read.
    NeverReads,
    /// sent → delivered → read, then the customer answers "Thanks!" (an inbound text).
    Replies,
    /// The send is refused twice with `fail_code` (default 131056) in the network's error
    /// answer, per message, then accepted on the third attempt and read.
    RefusesTwice,
}

/// `POST /_sim/recipients` body (a phone customer; see `CustomerSpec` for usernames/BSUIDs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RecipientSpec {
    /// Digits only (a leading `+` and separators are stripped).
    pub wa_id: String,
    #[serde(default, alias = "behavior")]
    pub behaviour: Behaviour,
    /// For `fail`: the error code of the `failed` status (default 131000); for
    /// `refuses_twice`: the code of the refusals (default 131056).
    #[serde(default)]
    pub fail_code: Option<i64>,
    #[serde(default)]
    pub profile_name: Option<String>,
}

/// A forced reaction of the next send(s) on a number.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ForcedAction {
    /// Answer with this Graph error.
    Error {
        code: i64,
        #[serde(default)]
        subcode: Option<i64>,
        #[serde(default)]
        http_status: Option<u16>,
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        details: Option<String>,
    },
    /// Answer with a non-JSON proxy page (default 502).
    Html {
        #[serde(default = "default_html_status")]
        http_status: u16,
    },
    /// Hold the answer for `ms` (default 30 s). With `accept` (default true) the message is
    /// processed anyway, as when the network got it but the client gave up.
    Hang {
        #[serde(default)]
        ms: Option<u64>,
        #[serde(default = "yes")]
        accept: bool,
    },
    /// Read the request, then break the connection mid-answer. `accept` as for `hang`.
    Drop {
        #[serde(default = "yes")]
        accept: bool,
    },
    /// Answer 200, then send a `failed` status with `code`.
    FailAsync {
        code: i64,
        #[serde(default)]
        details: Option<String>,
    },
}

impl ForcedAction {
    pub fn label(&self) -> &'static str {
        match self {
            Self::Error { .. } => "error",
            Self::Html { .. } => "html",
            Self::Hang { .. } => "hang",
            Self::Drop { .. } => "drop",
            Self::FailAsync { .. } => "fail_async",
        }
    }
}

fn default_html_status() -> u16 {
    502
}

fn yes() -> bool {
    true
}

/// `POST /_sim/numbers/{id}/force` body: an action plus how many sends it applies to.
#[derive(Clone, Debug, Deserialize)]
pub struct ForceRequest {
    #[serde(flatten)]
    pub action: ForcedAction,
    #[serde(default)]
    pub times: Option<u32>,
}

/// A message template as stored per WABA.
#[derive(Clone, Debug, Serialize)]
pub struct TemplateRec {
    pub id: String,
    pub waba_id: String,
    pub name: String,
    pub language: String,
    /// MARKETING / UTILITY / AUTHENTICATION.
    pub category: String,
    /// The category before the last `template_category_update`.
    pub previous_category: Option<String>,
    /// PENDING, APPROVED, REJECTED, PAUSED, DISABLED, …
    pub status: String,
    /// `positional` or `named`.
    pub parameter_format: String,
    pub components: Vec<Value>,
    pub rejected_reason: Option<String>,
}

/// `POST /_sim/templates` body: seed a template directly (no review).
#[derive(Clone, Debug, Deserialize)]
pub struct TemplateSeed {
    pub waba_id: String,
    pub name: String,
    pub language: String,
    #[serde(default = "default_category")]
    pub category: String,
    #[serde(default = "default_approved")]
    pub status: String,
    #[serde(default)]
    pub parameter_format: Option<String>,
    #[serde(default)]
    pub components: Vec<Value>,
}

fn default_category() -> String {
    "UTILITY".into()
}

fn default_approved() -> String {
    "APPROVED".into()
}

/// `POST /_sim/templates/{id}/category` body.
#[derive(Clone, Debug, Deserialize)]
pub struct TemplateCategoryChange {
    /// MARKETING, UTILITY or AUTHENTICATION.
    #[serde(alias = "category")]
    pub new_category: String,
}

/// `POST /_sim/templates/{id}/status` body.
#[derive(Clone, Debug, Deserialize)]
pub struct TemplateStatusChange {
    /// APPROVED, REJECTED, PAUSED, DISABLED, REINSTATED, FLAGGED, PENDING_DELETION, …
    pub event: String,
    #[serde(default)]
    pub reason: Option<String>,
}

/// How a media id came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaOrigin {
    /// `POST /{pnid}/media` (id lives 30 days).
    Upload,
    /// Created for an injected inbound message (id lives 7 days).
    Inbound,
}

/// Stored media (uploaded, or created for injected inbound messages).
#[derive(Clone, Debug)]
pub struct MediaRec {
    pub id: String,
    /// The uploading number, or the number an inbound message was sent to.
    pub phone_number_id: Option<String>,
    pub mime_type: String,
    pub bytes: Bytes,
    pub sha256_hex: String,
    pub origin: MediaOrigin,
    /// Simulator time (unix seconds) of the upload / inbound message.
    pub uploaded_at: i64,
    /// Simulator time from which the id is unknown to the network.
    pub expires_at: i64,
    /// Current download URL token and when it was issued, in simulator time (URLs live
    /// 5 minutes).
    pub url_token: Option<(String, i64)>,
}

impl MediaRec {
    pub fn is_live(&self, now: i64) -> bool {
        now < self.expires_at
    }

    pub fn summary(&self, now: i64) -> MediaSummary {
        MediaSummary {
            id: self.id.clone(),
            phone_number_id: self.phone_number_id.clone(),
            mime_type: self.mime_type.clone(),
            size: self.bytes.len() as u64,
            sha256: self.sha256_hex.clone(),
            origin: self.origin,
            uploaded_at: self.uploaded_at,
            expires_at: self.expires_at,
            expired: !self.is_live(now),
        }
    }
}

/// What tests see of a stored media id (`SimHandle::media`, `GET /_sim/media`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaSummary {
    pub id: String,
    pub phone_number_id: Option<String>,
    pub mime_type: String,
    /// Bytes.
    pub size: u64,
    /// Hex SHA-256 of the bytes (as `GET /{media-id}` answers it).
    pub sha256: String,
    pub origin: MediaOrigin,
    /// Simulator time (unix seconds) of the upload or inbound message.
    pub uploaded_at: i64,
    /// Simulator time from which the id is unknown (`uploaded_at` + 30 days / 7 days, or
    /// earlier after `expire_media`).
    pub expires_at: i64,
    /// Whether `expires_at` has passed on the simulator clock.
    pub expired: bool,
}

/// One request received on the Cloud API surface.
#[derive(Clone, Debug, Serialize)]
pub struct RequestRecord {
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Unix milliseconds (real time).
    pub received_at_ms: i64,
    /// JSON body, or `{"_raw": "..."}` / `{"_multipart_bytes": n}` when not JSON.
    pub body: Value,
    pub response_status: Option<u16>,
    pub phone_number_id: Option<String>,
    pub wamid: Option<String>,
    pub biz_opaque_callback_data: Option<String>,
    /// Forced action applied (`error`, `hang`, `drop`, …).
    pub forced: Option<String>,
    /// The media id created by an upload (`POST /{pnid}/media` answered 200).
    pub media_id: Option<String>,
}

/// A message the simulated network accepted.
#[derive(Clone, Debug, Serialize)]
pub struct MessageRecord {
    pub wamid: String,
    pub phone_number_id: String,
    /// `to` (or `recipient`) as sent.
    pub to: String,
    /// Phone digits of the recipient; empty when sent to a BSUID of a customer without a
    /// known phone.
    pub wa_id: String,
    /// The BSUID given as `recipient`, for BSUID sends.
    pub recipient: Option<String>,
    /// The recipient's BSUID as the statuses carry it.
    pub user_id: Option<String>,
    #[serde(rename = "type")]
    pub message_type: String,
    pub biz_opaque_callback_data: Option<String>,
    pub accepted_at: i64,
    /// Planned outcome: `read`, `delivered`, `sent`, or `failed:<code>`.
    pub outcome: String,
    /// Statuses handed to the webhook dispatcher so far, in emission order.
    pub statuses: Vec<String>,
    /// When each of `statuses` was handed over (Unix ms, the real clock): the webhook's own
    /// `timestamp` is whole seconds, too coarse to measure how soon a receiver applies it.
    pub status_at_ms: Vec<i64>,
    pub payload: Value,
}

/// One webhook POST attempt.
#[derive(Clone, Debug, Serialize)]
pub struct DeliveryRecord {
    pub seq: u64,
    /// Same for retries and duplicates of one POST.
    pub post_id: u64,
    pub attempt: u32,
    pub duplicate: bool,
    pub url: Option<String>,
    pub at_ms: i64,
    pub body: Value,
    pub signature: String,
    pub response_status: Option<u16>,
    pub error: Option<String>,
}

/// Strip everything but ASCII digits.
pub fn digits(s: &str) -> String {
    s.chars().filter(char::is_ascii_digit).collect()
}
