//! The typed [`Failure`] of a message, from each way a message can fail: the network's
//! status webhook, a send error, an unknown outcome past its grace period, or a message Tern
//! cannot send at all.

use std::time::Duration;

pub use tern_cloudapi::error::FAILURE_OUTCOME_UNKNOWN;
use tern_cloudapi::{SendError, WebhookError};
pub use tern_domain::failure::Failure;

/// Tern failure code: the sending number is missing or not connected.
pub const FAILURE_NUMBER_NOT_CONNECTED: &str = "phone_number_not_connected";
/// Tern failure code: the number's stored access token cannot be decrypted with the
/// service's current secret key (the key was changed).
pub const FAILURE_TOKEN_UNREADABLE: &str = "phone_number_token_unreadable";
/// Tern failure code: the stored request cannot be turned into a network payload.
pub const FAILURE_PAYLOAD_INVALID: &str = "message_payload_invalid";
/// Tern failure code: the message's media expired or were deleted before it was sent.
pub const FAILURE_MEDIA_UNAVAILABLE: &str = "media_unavailable";

/// Tern failure code: the message's campaign expired before the message left the queue.
pub const FAILURE_CAMPAIGN_EXPIRED: &str = "campaign_expired";

/// The failure of a campaign message still queued when its campaign's `expires_at` passed.
pub fn campaign_expired() -> Failure {
    Failure::tern(
        FAILURE_CAMPAIGN_EXPIRED,
        "The campaign's expiry time passed before this message was handed to the network, so \
         it was not sent (its recipient counts as expired).",
    )
}

/// The failure a network `failed` status reports (its first error, if any).
pub fn from_webhook(err: Option<&WebhookError>) -> Failure {
    let default = WebhookError::default();
    let err = err.unwrap_or(&default);
    let info = err.failure();
    let provider_message = err.message.clone().or_else(|| err.title.clone());
    Failure::tern(info.code, info.explanation).with_provider(
        err.code.map(|c| c.to_string()),
        provider_message,
        err.href.as_deref(),
    )
}

/// The failure of a send error; `gave_up_after` when retries ran out.
pub fn from_send_error(e: &SendError, gave_up_after: Option<i64>) -> Failure {
    let info = e.failure();
    let mut explanation = info.explanation;
    if let Some(n) = gave_up_after {
        explanation = explanation.replace("; it will be retried", "");
        explanation = format!("{explanation} Tern gave up after {n} attempts.");
    }
    let (provider_code, provider_message, href) = match e.graph() {
        Some(g) if g.is_graph_body() => {
            let mut wording = g.message.clone();
            if let Some(d) = g.details.as_deref().filter(|d| !d.is_empty())
                && !wording.contains(d)
            {
                wording = if wording.is_empty() {
                    d.to_string()
                } else {
                    format!("{wording} ({d})")
                };
            }
            (
                g.code.map(|c| c.to_string()),
                Some(wording).filter(|w| !w.is_empty()),
                g.href.as_deref(),
            )
        }
        _ => (None, None, None),
    };
    Failure::tern(info.code, explanation).with_provider(provider_code, provider_message, href)
}

/// The failure of a message whose send outcome stayed unknown for `grace`.
pub fn outcome_unknown(grace: Duration) -> Failure {
    let minutes = grace.as_secs().div_ceil(60);
    Failure::tern(
        FAILURE_OUTCOME_UNKNOWN,
        format!(
            "Tern could not confirm that the network received this message: the send was \
             interrupted (no answer from the network, or a restart) and no status from the network \
             arrived within {minutes} minute(s). It was not sent again, to avoid a duplicate; it may \
             or may not have reached the recipient."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_outcome_names_the_grace_in_minutes() {
        let f = outcome_unknown(Duration::from_secs(90));
        assert_eq!(f.code, FAILURE_OUTCOME_UNKNOWN);
        assert!(f.message.contains("2 minute(s)"), "{}", f.message);
        assert!(f.provider_code.is_none());
    }

    #[test]
    fn graph_failures_carry_the_network_code_wording_and_link() {
        let g = tern_cloudapi::GraphError::from_response(
            400,
            br#"{"error":{"message":"(#131026) Message undeliverable","type":"OAuthException","code":131026,"error_data":{"details":"Not on WhatsApp"},"href":"https://example.test/fix"}}"#,
        );
        let f = from_send_error(&SendError::Graph(Box::new(g)), None);
        assert_eq!(f.code, "recipient_not_on_whatsapp");
        assert_eq!(f.provider_code.as_deref(), Some("131026"));
        assert_eq!(
            f.provider_message.as_deref(),
            Some("(#131026) Message undeliverable (Not on WhatsApp)")
        );
        assert_eq!(f.provider_href.as_deref(), Some("https://example.test/fix"));
        assert!(f.message.contains("not on WhatsApp"));

        let g = tern_cloudapi::GraphError::from_response(
            400,
            br#"{"error":{"message":"(#130429) Rate limit hit","code":130429}}"#,
        );
        let f = from_send_error(&SendError::Graph(Box::new(g)), Some(10));
        assert_eq!(f.code, "network_rate_limited");
        assert!(f.provider_href.is_none());
        let m = &f.message;
        assert!(m.ends_with("Tern gave up after 10 attempts."), "{m}");
        assert!(!m.contains("will be retried"), "{m}");

        let f = from_send_error(
            &SendError::NotSent {
                reason: "connection refused".into(),
            },
            Some(3),
        );
        assert_eq!(f.code, "network_error");
        assert_eq!(f.provider_code, None);
    }
}
