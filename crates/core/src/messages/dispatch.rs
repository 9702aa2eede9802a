//! One attempt of an accepted message, in the shape of an event delivery's
//! (`webhooks::deliver`): the dispatcher (`tern_engine::dispatch`) claims a message, then
//! [`prepare`] readies it or decides at once that it cannot be sent, [`Ready::send`] makes
//! the network call (no database), and [`decide`] says what becomes of it. The dispatcher
//! records the [`Decision`]: a [`Final`] one through the status writer
//! ([`super::status::record_sends`], in group commits), a retry or an unknown outcome as a
//! queue write.
//!
//! # Lifecycle of one message
//! `accepted` (queued at acceptance) → claimed: `sending` → one of:
//!
//! | what the network did | decision |
//! |---|---|
//! | took it (HTTP 200 with a wamid) | `sent` with `wamid` and `sent_at` (the domain's monotonic rule: a status webhook may have moved it further already) |
//! | refused it for now: 130429, 131000, 131016, other 5xx, throttling codes (`RetryClass::RetrySoon` / `RetryLater`) | back to the queue after an exponential backoff with full jitter; after `max_attempts` attempts, `failed` with the network's code |
//! | the request never left (connection refused, DNS or TLS failure) | the same as above (`NotSent` is safe to repeat) |
//! | the request left and no answer came (timeout, connection dropped) | outcome **unknown**: never resent; the network's status webhook, matched by `biz_opaque_callback_data` = the Tern message id, settles it; if none arrives within `unknown_grace`, `failed` with `network_outcome_unknown` |
//! | a permanent error (`RetryClass::Never`, e.g. 131026, 131047, 132001) | `failed` at once, with the network's code, wording and link in `failure` |
//! | nothing: the number is missing or disconnected, its token unreadable, or the stored request unusable | `failed` at once with `phone_number_not_connected`, `phone_number_token_unreadable` or `message_payload_invalid` (a campaign's messages of an unusable number stay queued: the campaign pauses) |
//! | nothing: the message's media expired or were deleted | `failed` at once with `media_unavailable` |
//! | the network no longer knows the media id Tern kept for the number | the id is forgotten and the attempt counts as not sent (retried: the file is uploaded again) |
//!
//! The media upload before a send is repeatable (unlike a send): its unknown outcome is
//! retried like a request that never left.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tern_cloudapi::send::SendPayload;
use tern_cloudapi::{RetryClass, SendAccepted, SendError};
use tern_domain::auth::Mode;
use tern_domain::backoff::Backoff;
use tern_domain::crypto::MasterKey;
use tern_domain::message::{Precision, Status};
use tern_domain::time::now_ms;
use tern_domain::timeline::{self, AttemptOutcome, Detail};
use tern_store::{DispatchItem, PhoneNumber};
use uuid::Uuid;

use super::failure::{
    self, FAILURE_MEDIA_UNAVAILABLE, FAILURE_NUMBER_NOT_CONNECTED, FAILURE_PAYLOAD_INVALID,
    FAILURE_TOKEN_UNREADABLE, Failure,
};
use super::status::Report;
use crate::media::{self, NetworkMediaError};
use crate::{Core, numbers};

/// How the attempts of a message are decided (from the dispatcher's settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The limit on one send call: an answer that comes later is an unknown outcome.
    pub send_timeout: Duration,
    /// How long an unknown outcome waits for the network's status webhook.
    pub unknown_grace: Duration,
    /// Attempts (claims) after which a refusal for now is a failure.
    pub max_attempts: u32,
    /// The delay before the next attempt.
    pub backoff: Backoff,
}

/// What becomes of a claimed message after an attempt (or instead of one).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Its dispatch ends: the status is written (status writer, group commit).
    Final(Final),
    /// The network did not take it for now: queued again, due at `at`.
    Retry { at: i64, error: String },
    /// It may have reached the network: never sent again; it waits until `deadline` for
    /// the network's status, then fails.
    Unknown { deadline: i64, error: String },
}

/// How a claim ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Final {
    Sent {
        wamid: String,
    },
    /// Every failure decided here is one where the network did not take the message, so a
    /// template's wallet debit is refunded with it.
    Failed(Failure),
}

impl Final {
    /// The status report of this outcome, at `at` (Tern's clock: milliseconds).
    pub fn report(&self, at: i64) -> Report<'_> {
        match self {
            Final::Sent { wamid } => Report {
                status: Status::Sent,
                at,
                precision: Precision::Millis,
                wamid: Some(wamid),
                failure: None,
                seen: None,
                attempt: None,
            },
            Final::Failed(f) => Report {
                status: Status::Failed,
                at,
                precision: Precision::Millis,
                wamid: None,
                failure: Some(f),
                seen: None,
                attempt: None,
            },
        }
    }
}

/// What the network answered to one send call (the fields of a `dispatch_attempt` entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    pub http_status: Option<i64>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// `None` when no answer came.
    pub latency_ms: Option<i64>,
}

impl Answer {
    /// The answer of a send call that took `latency_ms`: the network's status, code and
    /// words; when no answer came (never sent, timed out), what happened instead.
    pub fn of(result: &Result<SendAccepted, SendError>, latency_ms: i64) -> Answer {
        match result {
            Ok(_) => Answer {
                http_status: Some(200),
                latency_ms: Some(latency_ms),
                ..Answer::default()
            },
            Err(SendError::Graph(g)) => Answer {
                http_status: Some(i64::from(g.http_status)),
                error_code: g.code.map(|c| c.to_string()),
                error_message: Some(g.message.clone()),
                latency_ms: Some(latency_ms),
            },
            Err(SendError::UnexpectedResponse {
                http_status,
                reason,
            }) => Answer {
                http_status: Some(i64::from(*http_status)),
                error_code: None,
                error_message: Some(reason.clone()),
                latency_ms: Some(latency_ms),
            },
            Err(e) => Answer {
                error_message: Some(e.to_string()),
                ..Answer::default()
            },
        }
    }
}

/// The `dispatch_attempt` entry of claim `item` that ended in `decision`, with the send
/// call's `answer` (`None`: no call was made — an unusable number, media gone, a failed
/// upload — and the entry says why instead).
pub fn attempt_entry(item: &DispatchItem, decision: &Decision, answer: Option<Answer>) -> Detail {
    let (outcome, next_attempt_at, why) = match decision {
        Decision::Final(Final::Sent { .. }) => (AttemptOutcome::Sent, None, None),
        Decision::Final(Final::Failed(f)) => {
            (AttemptOutcome::Failed, None, Some(f.message.clone()))
        }
        Decision::Retry { at, error } => (
            AttemptOutcome::Retry,
            Some(timeline::time(*at)),
            Some(error.clone()),
        ),
        Decision::Unknown { error, .. } => (AttemptOutcome::Unknown, None, Some(error.clone())),
    };
    let a = answer.unwrap_or(Answer {
        error_message: why,
        ..Answer::default()
    });
    Detail::DispatchAttempt {
        attempt: item.attempts,
        outcome,
        http_status: a.http_status,
        error_code: a.error_code,
        error_message: a.error_message,
        latency_ms: a.latency_ms,
        next_attempt_at,
    }
}

/// A sending number as the dispatcher sees it (read again every little while).
#[derive(Debug, Clone)]
pub enum Number {
    /// It can send: its organisation, access token and mode (a test number is answered by
    /// the test network).
    Usable {
        org_id: Uuid,
        token: Arc<str>,
        mode: Mode,
    },
    /// Its messages cannot be sent: the failure they get.
    Unusable(Failure),
}

/// What `number` as read (`None`: not in the database) means for its messages.
pub fn number(key: &MasterKey, number: Option<&PhoneNumber>) -> Number {
    let n = match number {
        None => {
            return Number::Unusable(Failure::tern(
                FAILURE_NUMBER_NOT_CONNECTED,
                "The sending number is not connected to Tern any more.",
            ));
        }
        Some(n) => n,
    };
    if !numbers::can_send(n) {
        return Number::Unusable(Failure::tern(
            FAILURE_NUMBER_NOT_CONNECTED,
            format!(
                "The sending number {} is {}, so it cannot send.",
                n.display_phone_number, n.status
            ),
        ));
    }
    match numbers::access_token(key, n) {
        Some(token) => Number::Usable {
            org_id: n.org_id,
            token: token.into(),
            mode: n.mode,
        },
        None => Number::Unusable(Failure::tern(
            FAILURE_TOKEN_UNREADABLE,
            format!(
                "The network access token of the sending number {} cannot be read with the \
                 service's current secret key; an operator must store it again.",
                n.display_phone_number
            ),
        )),
    }
}

/// A claimed message ready to send: its number's token and the network payload.
/// [`Ready::send`] touches no database.
#[derive(Debug)]
pub struct Ready {
    token: Arc<str>,
    payload: SendPayload,
    mode: Mode,
}

/// Readies the claimed `item` sent from `from`: the network's id of its media (uploaded now
/// when the network has no valid copy) and the payload. `Err`: the decision to record
/// instead of a send (an unusable number, media gone, a request that cannot be built, an
/// upload that failed).
pub async fn prepare(
    core: &Core,
    item: &DispatchItem,
    from: &Number,
    policy: &Policy,
) -> Result<Ready, Decision> {
    let token = match from {
        Number::Unusable(f) => {
            tracing::warn!(message_id = %item.id, phone_number_id = %item.phone_number_id,
                code = %f.code, "message cannot be sent from its number");
            return Err(Decision::Final(Final::Failed(f.clone())));
        }
        Number::Usable { org_id, .. } if *org_id != item.org_id => {
            tracing::warn!(message_id = %item.id, phone_number_id = %item.phone_number_id,
                "message cannot be sent from its number: it moved to another organisation");
            return Err(Decision::Final(Final::Failed(Failure::tern(
                FAILURE_NUMBER_NOT_CONNECTED,
                "The sending number is no longer connected to this organisation.",
            ))));
        }
        Number::Usable { token, mode, .. } => (token, *mode),
    };
    let (token, mode) = token;
    let request = match item.media_id {
        None => std::borrow::Cow::Borrowed(&item.request),
        Some(media_id) => {
            let id = network_media(core, item, media_id, token, mode, policy).await?;
            std::borrow::Cow::Owned(tern_cloudapi::send::with_network_media(&item.request, &id))
        }
    };
    match tern_cloudapi::send::build_payload(&item.id.to_string(), &request) {
        Ok(payload) => Ok(Ready {
            token: token.clone(),
            payload,
            mode,
        }),
        Err(e) => {
            tracing::error!(message_id = %item.id, error = %e, "stored request cannot be sent");
            let explanation = format!("Tern could not build the network request ({e}).");
            Err(Decision::Final(Final::Failed(Failure::tern(
                FAILURE_PAYLOAD_INVALID,
                explanation,
            ))))
        }
    }
}

/// The network's id of a media message's file for its number.
async fn network_media(
    core: &Core,
    item: &DispatchItem,
    media_id: Uuid,
    token: &str,
    mode: Mode,
    policy: &Policy,
) -> Result<String, Decision> {
    let Some(cloud) = core.network(mode) else {
        return Err(logged(
            item,
            decide_at(
                Err(no_test_network()),
                item.attempts,
                policy,
                now_ms(),
                rand::random(),
            ),
        ));
    };
    let got = media::network_media_id(
        &core.db,
        cloud,
        &core.media,
        media_id,
        &item.phone_number_id,
        token,
        now_ms(),
        item.id,
    )
    .await;
    let e = match got {
        Ok(id) => return Ok(id),
        Err(NetworkMediaError::Gone) => {
            return Err(Decision::Final(Final::Failed(Failure::tern(
                FAILURE_MEDIA_UNAVAILABLE,
                "The message's media expired or were deleted before it was sent.",
            ))));
        }
        // An upload repeated is harmless (unlike a send): an unknown outcome is retried.
        Err(NetworkMediaError::Network(SendError::OutcomeUnknown { reason })) => {
            SendError::NotSent { reason }
        }
        Err(NetworkMediaError::Network(e)) => e,
        Err(NetworkMediaError::Store(e)) => SendError::NotSent {
            reason: format!("database: {e}"),
        },
        Err(NetworkMediaError::Blob(e)) => SendError::NotSent {
            reason: format!("media store: {e}"),
        },
    };
    tracing::info!(message_id = %item.id, error = %e, "media upload to the network failed");
    Err(logged(
        item,
        decide_at(Err(e), item.attempts, policy, now_ms(), rand::random()),
    ))
}

impl Ready {
    /// The send call for `item` (the message [`prepare`] readied), cut off at
    /// `policy.send_timeout` (then the outcome is unknown).
    pub async fn send(
        &self,
        core: &Core,
        item: &DispatchItem,
        policy: &Policy,
    ) -> Result<SendAccepted, SendError> {
        let Some(cloud) = core.network(self.mode) else {
            return Err(no_test_network());
        };
        let send = cloud.send_message(&item.phone_number_id, &self.token, &self.payload);
        let started = Instant::now();
        match tokio::time::timeout(policy.send_timeout, send).await {
            Ok(r) => {
                // The network's answer time as this process sees it (scheduling included).
                metrics::histogram!("tern_dispatch_send_seconds")
                    .record(started.elapsed().as_secs_f64());
                r
            }
            Err(_) => Err(SendError::OutcomeUnknown {
                reason: "no answer before the dispatch lease ran out".into(),
            }),
        }
    }
}

/// A test number's message in a process that runs no test network: not sent, retried
/// (another process, or this one restarted as `tern serve`, sends it).
fn no_test_network() -> SendError {
    SendError::NotSent {
        reason: "this process runs no test network for test numbers".into(),
    }
}

/// What becomes of `item` after its send call answered `result` (nothing is recorded here;
/// a media id the network no longer knows is forgotten at once, so the retry uploads the
/// file again).
pub async fn decide(
    core: &Core,
    item: &DispatchItem,
    result: Result<SendAccepted, SendError>,
    policy: &Policy,
) -> Decision {
    let result = match (result, item.media_id) {
        (Err(e), Some(media_id)) if e.is_unknown_media() => {
            if let Err(fe) =
                media::forget_network_media_id(&core.db, media_id, &item.phone_number_id).await
            {
                tracing::warn!(error = %fe, "cannot forget a network media id");
            }
            // The network did not take this send.
            Err(SendError::NotSent {
                reason: format!("the network's media id was unknown ({e}); uploading again"),
            })
        }
        (r, _) => r,
    };
    logged(
        item,
        decide_at(result, item.attempts, policy, now_ms(), rand::random()),
    )
}

/// The lifecycle table (see the module's text): what `result` decides at `now` for a
/// message that has had `attempts` attempts; `unit` is the backoff's uniform draw in [0, 1].
pub fn decide_at(
    result: Result<SendAccepted, SendError>,
    attempts: i64,
    policy: &Policy,
    now: i64,
    unit: f64,
) -> Decision {
    let e = match result {
        Ok(accepted) => {
            return Decision::Final(Final::Sent {
                wamid: accepted.wamid,
            });
        }
        Err(e) => e,
    };
    match e.retry_class() {
        RetryClass::OutcomeUnknown => Decision::Unknown {
            deadline: now.saturating_add(millis(policy.unknown_grace)),
            error: e.to_string(),
        },
        RetryClass::RetrySoon | RetryClass::RetryLater
            if attempts < i64::from(policy.max_attempts) =>
        {
            Decision::Retry {
                at: now.saturating_add(millis(policy.backoff.delay(attempts, unit))),
                error: e.to_string(),
            }
        }
        class => {
            let gave_up = (class != RetryClass::Never).then_some(attempts);
            Decision::Final(Final::Failed(failure::from_send_error(&e, gave_up)))
        }
    }
}

/// `d`, logged.
fn logged(item: &DispatchItem, d: Decision) -> Decision {
    match &d {
        Decision::Unknown { error, .. } => tracing::warn!(message_id = %item.id, %error,
            "send outcome unknown; waiting for the network's status"),
        Decision::Retry { at, error } => tracing::info!(message_id = %item.id,
            attempts = item.attempts, %error, retry_in_ms = at.saturating_sub(now_ms()),
            "network did not take the message; will retry"),
        Decision::Final(Final::Failed(f)) => tracing::info!(message_id = %item.id,
            attempts = item.attempts, code = %f.code, "message failed"),
        Decision::Final(Final::Sent { .. }) => {}
    }
    d
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use tern_cloudapi::GraphError;
    use tern_domain::backoff::Jitter;

    const NOW: i64 = 1_000_000;

    fn policy() -> Policy {
        Policy {
            send_timeout: Duration::from_secs(45),
            unknown_grace: Duration::from_secs(900),
            max_attempts: 3,
            backoff: Backoff {
                base: Duration::from_secs(1),
                cap: Duration::from_secs(300),
                jitter: Jitter::Full,
            },
        }
    }

    fn graph(code: u32, status: u16) -> SendError {
        let body = format!(r#"{{"error":{{"message":"(#{code}) words","code":{code}}}}}"#);
        SendError::Graph(Box::new(GraphError::from_response(status, body.as_bytes())))
    }

    fn decided(r: Result<SendAccepted, SendError>, attempts: i64) -> Decision {
        decide_at(r, attempts, &policy(), NOW, 1.0)
    }

    fn failed(d: Decision) -> Failure {
        match d {
            Decision::Final(Final::Failed(f)) => f,
            other => panic!("not failed: {other:?}"),
        }
    }

    #[test]
    fn taken_is_sent_with_the_wamid() {
        let accepted = SendAccepted {
            wamid: "wamid.X".into(),
            wa_id: None,
            user_id: None,
            input: None,
            message_status: None,
        };
        assert_eq!(
            decided(Ok(accepted), 1),
            Decision::Final(Final::Sent {
                wamid: "wamid.X".into()
            })
        );
    }

    #[test]
    fn refused_for_now_is_retried_after_the_backoff_until_the_attempts_are_spent() {
        for e in [graph(130429, 400), graph(131000, 500), graph(131016, 503)] {
            // Attempt 2: a ceiling of 2 s (drawn at its top here).
            assert!(matches!(decided(Err(e), 2), Decision::Retry { at, .. } if at == NOW + 2_000));
        }
        let f = failed(decided(Err(graph(131000, 500)), 3));
        assert_eq!(f.provider_code.as_deref(), Some("131000"));
        assert!(
            f.message.contains("gave up after 3 attempts"),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_request_that_never_left_is_retried_like_a_refusal() {
        let e = || SendError::NotSent {
            reason: "connection refused".into(),
        };
        let d = decide_at(Err(e()), 1, &policy(), NOW, 0.5);
        assert!(
            matches!(d, Decision::Retry { at, ref error } if at == NOW + 500 && error.contains("connection refused"))
        );
        assert_eq!(failed(decided(Err(e()), 3)).code, "network_error");
    }

    #[test]
    fn no_answer_is_unknown_until_the_grace_ends_never_retried() {
        let e = SendError::OutcomeUnknown {
            reason: "timeout".into(),
        };
        // Whatever the attempts: an unknown outcome is never sent again.
        assert!(
            matches!(decided(Err(e), 3), Decision::Unknown { deadline, .. } if deadline == NOW + 900_000)
        );
    }

    #[test]
    fn a_permanent_error_fails_at_once_with_the_networks_code() {
        for code in [131026, 131047, 132001] {
            let f = failed(decided(Err(graph(code, 400)), 1));
            assert_eq!(f.provider_code, Some(code.to_string()));
            assert!(!f.message.contains("gave up"), "{}", f.message);
        }
    }

    fn phone(status: &str, token_enc: Vec<u8>) -> PhoneNumber {
        PhoneNumber {
            id: "1065".into(),
            org_id: Uuid::nil(),
            display_phone_number: "+15550001".into(),
            waba_id: "w".into(),
            access_token_enc: token_enc,
            status: status.parse().unwrap(),
            throughput_mps: 80,
            created_at: 0,
            updated_at: 0,
            mode: Mode::Live,
        }
    }

    #[test]
    fn an_unusable_number_gives_its_messages_failure() {
        let key = MasterKey::from_bytes([3; 32]);
        let code = |n: Number| match n {
            Number::Unusable(f) => f.code,
            Number::Usable { .. } => "usable".into(),
        };
        assert_eq!(code(number(&key, None)), FAILURE_NUMBER_NOT_CONNECTED);
        let sealed = numbers::seal_token(&key, "t");
        assert_eq!(
            code(number(&key, Some(&phone("disconnected", sealed.clone())))),
            FAILURE_NUMBER_NOT_CONNECTED
        );
        assert_eq!(
            code(number(&key, Some(&phone("connected", vec![1, 2, 3])))),
            FAILURE_TOKEN_UNREADABLE
        );
        assert!(matches!(
            number(&key, Some(&phone("connected", sealed))),
            Number::Usable { token, .. } if &*token == "t"
        ));
    }
}
