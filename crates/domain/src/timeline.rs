//! A message's whole story (APP.md §4, §7): the entries of `GET /messages/{id}/timeline`.
//!
//! An [`Entry`] is `at` (when Tern recorded it; the network's own time is
//! `network_timestamp`) plus a [`Detail`] whose `kind` names the fields that follow. The
//! same [`Detail`] JSON is what the store keeps in `message_timeline.data`, so what is
//! written is exactly what is read back (times inside a detail are RFC 3339 strings, as
//! every timestamp of the API). Entries that the message row itself proves (`accepted`,
//! `received`, `campaign`) are not stored: `tern_core::timeline` derives them.

use serde::{Deserialize, Serialize, Serializer};
use uuid::Uuid;

use crate::message::Status;
use crate::time::format_ms;

/// One entry of a message's timeline: `{"at": …, "kind": …, …fields}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    /// When Tern recorded it (epoch ms; RFC 3339 in JSON).
    #[serde(serialize_with = "rfc3339")]
    pub at: i64,
    #[serde(flatten)]
    pub detail: Detail,
}

fn rfc3339<S: Serializer>(ms: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_ms(*ms))
}

/// A timestamp field inside a detail (RFC 3339, like every time of the API).
pub fn time(ms: i64) -> String {
    format_ms(ms)
}

/// What happened, by kind. Every field is always present (null when unknown).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Detail {
    /// The send was accepted (`POST /messages`).
    Accepted {
        request_id: Option<String>,
        key_id: Option<Uuid>,
        /// The key's current name (a renamed key shows its new name).
        key_name: Option<String>,
        idempotency_key: Option<String>,
    },
    /// The same Idempotency-Key with the same body was sent again: answered with this
    /// message, nothing sent again.
    Replayed { request_id: Option<String> },
    /// One claim of the message by the dispatcher and what came of it.
    DispatchAttempt {
        /// From 1.
        attempt: i64,
        outcome: AttemptOutcome,
        /// The network's HTTP status; null when no answer came (or no call was made).
        http_status: Option<i64>,
        /// The network's error code, or null.
        error_code: Option<String>,
        /// The network's error message; when no answer came, what happened instead.
        error_message: Option<String>,
        /// The send call's duration; null when no answer came.
        latency_ms: Option<i64>,
        /// For `retry`: when the next attempt is due.
        next_attempt_at: Option<String>,
    },
    /// The message's file was uploaded to the network for its sending number.
    MediaUpload {
        media_id: Uuid,
        outcome: UploadOutcome,
        network_media_id: Option<String>,
    },
    /// A status report from the network (or the dispatcher's own `sent`/`failed`).
    Status {
        status: Status,
        /// The network's time of the step.
        network_timestamp: Option<String>,
        /// When the report reached Tern.
        received_at: Option<String>,
        /// The network's pricing object, or null.
        pricing: Option<serde_json::Value>,
        /// Whether the report changed the message (its status or one of its `*_at`).
        applied: bool,
        reason: Option<NotApplied>,
    },
    /// The message failed: Tern's code, the network's words, and what to do.
    Failed {
        failure_code: String,
        provider_code: Option<String>,
        provider_message: Option<String>,
        explanation: String,
        fix: Option<String>,
    },
    /// An event about the message was written (a subscription or a stream wanted it).
    Event { event_id: Uuid, event_type: String },
    /// One attempt to deliver such an event to a subscription.
    WebhookAttempt {
        subscription_id: Uuid,
        event_id: Uuid,
        /// The receiver's host name only.
        host: String,
        attempt: i64,
        response_status: Option<i64>,
        latency_ms: Option<i64>,
        outcome: WebhookOutcome,
        next_attempt_at: Option<String>,
    },
    /// A customer's message arrived.
    Received { wamid: Option<String> },
    /// The customer edited it: the wamid of their edit notice.
    Edited { wamid: String },
    /// The customer deleted it: the wamid of their deletion notice.
    Revoked { wamid: String },
    /// The business marked it read.
    ReadMarked { wamid: Option<String> },
    /// The message was sent by a campaign.
    Campaign { campaign_id: Uuid },
}

/// Every kind, in the order entries of one instant are listed (what exists first first).
pub const KINDS: &[&str] = &[
    "accepted",
    "received",
    "campaign",
    "replayed",
    "media_upload",
    "dispatch_attempt",
    "status",
    "failed",
    "edited",
    "revoked",
    "read_marked",
    "event",
    "webhook_attempt",
];

impl Detail {
    /// The `kind` of this detail.
    pub fn kind(&self) -> &'static str {
        match self {
            Detail::Accepted { .. } => "accepted",
            Detail::Replayed { .. } => "replayed",
            Detail::DispatchAttempt { .. } => "dispatch_attempt",
            Detail::MediaUpload { .. } => "media_upload",
            Detail::Status { .. } => "status",
            Detail::Failed { .. } => "failed",
            Detail::Event { .. } => "event",
            Detail::WebhookAttempt { .. } => "webhook_attempt",
            Detail::Received { .. } => "received",
            Detail::Edited { .. } => "edited",
            Detail::Revoked { .. } => "revoked",
            Detail::ReadMarked { .. } => "read_marked",
            Detail::Campaign { .. } => "campaign",
        }
    }

    /// The `failed` entry of a message's failure.
    pub fn failed(f: &crate::failure::Failure) -> Detail {
        Detail::Failed {
            failure_code: f.code.clone(),
            provider_code: f.provider_code.clone(),
            provider_message: f.provider_message.clone(),
            explanation: f.message.clone(),
            fix: fix(&f.code).map(str::to_string),
        }
    }
}

/// What came of one dispatch attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The network took it.
    Sent,
    /// Refused for now (or never left): tried again at `next_attempt_at`.
    Retry,
    /// Failed for good.
    Failed,
    /// The request may have reached the network but no answer came: never sent again.
    Unknown,
}

/// What came of a media upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadOutcome {
    Uploaded,
    Failed,
}

/// What came of one webhook delivery attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WebhookOutcome {
    Succeeded,
    Failed,
}

/// Why a status report changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotApplied {
    /// The message already has this status.
    Duplicate,
    /// An earlier step the message has passed, whose time it already has.
    OutOfOrder,
    /// The message had already reached a final state (`read` or `failed`).
    AfterFinal,
}

/// Why a report of `incoming` about a message in `current` changed nothing (`None`: it
/// changed the message). A report is applied when it changed the status or any `*_at`.
/// Same status first (`duplicate`), then a final state (`after_final`: `read` or
/// `failed`), else `out_of_order`.
pub fn not_applied(current: Status, incoming: Status, changed: bool) -> Option<NotApplied> {
    if changed {
        None
    } else if current == incoming {
        Some(NotApplied::Duplicate)
    } else if matches!(current, Status::Read | Status::Failed) {
        Some(NotApplied::AfterFinal)
    } else {
        Some(NotApplied::OutOfOrder)
    }
}

/// The host name of a receiver's URL (never its path, query or credentials).
pub fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        return v6.split(']').next().unwrap_or_default().to_string();
    }
    host_port.split(':').next().unwrap_or_default().to_string()
}

/// What to do about a failure with Tern's `code` (the `fix` of a `failed` entry).
pub fn fix(code: &str) -> Option<&'static str> {
    Some(match code {
        "recipient_not_on_whatsapp" => {
            "Check the number with the customer; it must have WhatsApp installed and its terms accepted."
        }
        "window_expired" => {
            "The customer last wrote more than 24 hours ago: send an approved template instead."
        }
        "network_rate_limited" | "pair_rate_limited" => {
            "Send more slowly (or to this customer less often) and try again later."
        }
        "quality_restricted" => {
            "Improve the number's quality (fewer blocks and reports) before sending more."
        }
        "ecosystem_limited" => {
            "The network limits marketing messages per customer: try again in a day or send a utility template."
        }
        "marketing_opted_out" => {
            "The customer stopped marketing messages: send only utility or authentication templates."
        }
        "marketing_restricted" => {
            "Marketing templates are restricted for this customer or region: use another category."
        }
        "recipient_blocked" => "Unblock the customer on the network before writing to them.",
        "recipient_in_experiment" => "Nothing to fix: the network withheld it; try again later.",
        "recipient_not_allowed" => "Add the recipient to the test number's allowed list.",
        "recipient_is_sender" => "Send to another number than the sending one.",
        "phone_number_required" => {
            "Address this template to the customer's phone number, not their user id."
        }
        "country_restricted" => "The business account may not write to this country.",
        "network_auth_failed" => "Store a new access token for the sending number.",
        "network_permission_denied" => {
            "Grant the business account the permission on the network, then send again."
        }
        "account_restricted" => "Resolve the restriction of the business account on the network.",
        "network_billing_issue" => "Fix the business account's payment method on the network.",
        "sender_number_unavailable" | "phone_number_not_connected" => {
            "Connect the sending number again (or send from another one)."
        }
        "phone_number_token_unreadable" => {
            "An operator must store the number's access token again."
        }
        "invalid_request" | "message_payload_invalid" => {
            "Correct the message's content (see provider_message) and send a new message."
        }
        "unsupported_message_type" => "Send another message type.",
        "media_error" => "Check the file (type, size, link) and send it again.",
        "media_unavailable" => "Upload the file again and send a new message.",
        "template_mismatch" => "Make the variables and components match the approved template.",
        "template_not_found" => "Check the template's name and language, or submit it.",
        "template_policy_violation" => "Edit the template to follow the network's policy.",
        "template_paused" | "template_disabled" => {
            "Improve or replace the template; it was paused for low quality."
        }
        "flow_error" => "Check the flow's id and state on the network.",
        "network_error" => "The network failed; send a new message later.",
        "network_outcome_unknown" => {
            "Tern could not learn whether the network took it: check with the customer before sending again."
        }
        "campaign_expired" => "Extend or relaunch the campaign to reach this recipient.",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_entry_is_flat_with_its_kind() {
        let e = Entry {
            at: 0,
            detail: Detail::Replayed {
                request_id: Some("r".into()),
            },
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"at": "1970-01-01T00:00:00.000Z", "kind": "replayed", "request_id": "r"})
        );
        let d = Detail::Status {
            status: Status::Read,
            network_timestamp: None,
            received_at: None,
            pricing: None,
            applied: false,
            reason: Some(NotApplied::OutOfOrder),
        };
        let text = serde_json::to_string(&d).unwrap();
        assert!(text.contains(r#""reason":"out_of_order""#), "{text}");
        assert_eq!(serde_json::from_str::<Detail>(&text).unwrap(), d);
        for k in KINDS {
            assert!(KINDS.iter().filter(|x| *x == k).count() == 1);
        }
    }

    #[test]
    fn reasons_follow_the_rule() {
        use Status::*;
        assert_eq!(not_applied(Sent, Delivered, true), None);
        assert_eq!(
            not_applied(Delivered, Delivered, false),
            Some(NotApplied::Duplicate)
        );
        assert_eq!(
            not_applied(Read, Delivered, false),
            Some(NotApplied::AfterFinal)
        );
        assert_eq!(
            not_applied(Failed, Sent, false),
            Some(NotApplied::AfterFinal)
        );
        assert_eq!(
            not_applied(Delivered, Sent, false),
            Some(NotApplied::OutOfOrder)
        );
    }

    #[test]
    fn only_the_host_of_a_receiver() {
        assert_eq!(
            host_of("https://u:p@hooks.example.com:8443/a?b#c"),
            "hooks.example.com"
        );
        assert_eq!(host_of("http://[::1]:80/x"), "::1");
        assert_eq!(host_of("https://example.test"), "example.test");
    }

    #[test]
    fn common_failures_have_a_fix() {
        for code in [
            "recipient_not_on_whatsapp",
            "window_expired",
            "ecosystem_limited",
        ] {
            assert!(fix(code).is_some(), "{code}");
        }
        assert_eq!(fix("nothing_known"), None);
    }
}
