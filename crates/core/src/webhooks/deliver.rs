//! Making deliveries: one claimed delivery attempted and its fate decided (the delivery
//! workers call [`attempt`] and record what it returns in batches), a test send made at once
//! (`POST /webhook-subscriptions/{id}/test`), and a replay of failed deliveries.
//!
//! | answer | the delivery | the subscription |
//! |---|---|---|
//! | 2xx within 15 s | `succeeded` | |
//! | `410 Gone` | `failed` | disabled, `disabled_reason = "gone"` |
//! | anything else, no answer, refused address | due again after the schedule's next delay (a 429/503 `Retry-After` honoured, capped), `failed` once the schedule is spent | |
//! | (subscription disabled before the attempt) | `failed`, not sent | |

use std::time::Duration;

use serde_json::Value;
use tern_domain::events::subscription::DisabledReason;
use tern_domain::events::{EventType, RetrySchedule, event_body};
use tern_domain::time::now_ms;
use tern_domain::{Problem, new_id};
use tern_store::{
    AttemptRecord, DeliveryJob, DeliveryOutcome, NewEvent, Recording, WebhookAttempt,
};
use uuid::Uuid;

use super::samples;
use super::send::{Attempt, Delivery, Outcome, Sender};
use super::subscriptions::signing_keys;
use crate::audit::{self, Entry};
use crate::{Core, Principal, Result};

/// What became of one claimed delivery, to record.
#[derive(Debug, Clone)]
pub struct Made {
    pub delivery_id: Uuid,
    pub attempt: AttemptRecord,
    pub outcome: DeliveryOutcome,
    /// The message the event is about and the receiver's host: the attempt is an entry of
    /// its timeline.
    pub message: Option<(Uuid, String)>,
}

/// The timeline side of a delivery of `job`: its event's message and the receiver's host.
fn about(job: &DeliveryJob) -> Option<(Uuid, String)> {
    job.message_id
        .map(|id| (id, tern_domain::timeline::host_of(&job.url)))
}

impl Made {
    /// The recording of this attempt by the claimer `owner`.
    pub fn recording<'a>(&'a self, owner: &'a str) -> Recording<'a> {
        Recording {
            delivery_id: self.delivery_id,
            owner,
            attempt: &self.attempt,
            outcome: self.outcome,
            message: self.message.as_ref().map(|(id, host)| (*id, host.as_str())),
        }
    }
}

/// A claimed delivery ready to send: its job and signing keys. [`Ready::send`] touches no
/// database, so the workers can run it apart from everything else (at a lower CPU priority).
#[derive(Debug)]
pub struct Ready {
    pub job: DeliveryJob,
    keys: Vec<Vec<u8>>,
    /// When the attempt started (ms); set by [`Ready::send`].
    started: i64,
}

/// Whether a claimed delivery is sent: a disabled subscription's, or one whose secret this
/// service key cannot read, ends `failed` unsent (`Err`, to record).
// `Made` is large since it keeps the answer's start; the `Err` is rare (a disabled
// subscription) and is moved straight into the recorder, so boxing it gains nothing.
#[allow(clippy::result_large_err)]
pub fn prepare(core: &Core, job: DeliveryJob) -> std::result::Result<Ready, Made> {
    let now = now_ms();
    let unsent = |job: &DeliveryJob, why: &str| Made {
        delivery_id: job.delivery_id,
        attempt: AttemptRecord {
            id: Uuid::now_v7(),
            response_status: None,
            latency_ms: 0,
            error: Some(why.to_string()),
            created_at: now,
            response_body: None,
        },
        outcome: DeliveryOutcome::Failed,
        message: about(job),
    };
    if !job.enabled {
        return Err(unsent(&job, "not sent: the subscription is disabled"));
    }
    let keys = signing_keys(
        core,
        &job.secret_enc,
        job.previous_secret_enc
            .as_deref()
            .zip(job.previous_secret_expires_at),
        now,
    );
    if keys.is_empty() {
        return Err(unsent(
            &job,
            "not sent: the signing secret cannot be read with this service key",
        ));
    }
    Ok(Ready {
        job,
        keys,
        started: now,
    })
}

impl Ready {
    /// The attempt: the stored bytes signed and POSTed now.
    pub async fn send(&mut self, sender: &Sender) -> Attempt {
        self.started = now_ms();
        let event_id = self.job.event_id.to_string();
        let delivery = Delivery {
            url: &self.job.url,
            event_id: &event_id,
            body: self.job.payload.as_bytes(),
            keys: self.keys.iter().map(Vec::as_slice).collect(),
        };
        sender.attempt(&delivery, self.started / 1000).await
    }
}

/// What becomes of a sent delivery after its attempt `a` (nothing is recorded here; a `410`
/// disables the subscription at once).
pub async fn decide(core: &Core, ready: &Ready, a: Attempt, schedule: &RetrySchedule) -> Made {
    let job = &ready.job;
    let outcome = match a.outcome {
        Outcome::Succeeded => DeliveryOutcome::Succeeded,
        Outcome::Gone => {
            if let Err(e) = core
                .db
                .disable_webhook_subscription(job.subscription_id, DisabledReason::Gone, now_ms())
                .await
            {
                tracing::warn!(error = %e, subscription_id = %job.subscription_id,
                    "could not disable a subscription whose receiver answered 410");
            }
            DeliveryOutcome::Failed
        }
        Outcome::Failed => {
            let attempt = usize::try_from(job.attempt).unwrap_or(usize::MAX);
            match schedule.delay_after(attempt, rand::random::<f64>(), a.retry_after) {
                Some(delay) => DeliveryOutcome::Retry {
                    next_attempt_at: now_ms().saturating_add(millis(delay)),
                },
                None => DeliveryOutcome::Failed,
            }
        }
    };
    metrics::counter!("tern_webhook_attempts_total", "outcome" => match outcome {
        DeliveryOutcome::Succeeded => "succeeded",
        DeliveryOutcome::Retry { .. } => "retry",
        DeliveryOutcome::Failed => "failed",
    })
    .increment(1);
    Made {
        delivery_id: job.delivery_id,
        attempt: AttemptRecord {
            id: Uuid::now_v7(),
            response_status: a.response_status.map(i64::from),
            latency_ms: a.latency_ms,
            error: a.error,
            created_at: ready.started,
            response_body: a.response_body,
        },
        outcome,
        message: about(job),
    }
}

/// Attempts a claimed delivery now and decides what becomes of it ([`prepare`],
/// [`Ready::send`], [`decide`] in one go).
pub async fn attempt(core: &Core, job: &DeliveryJob, schedule: &RetrySchedule) -> Made {
    match prepare(core, job.clone()) {
        Err(unsent) => unsent,
        Ok(mut ready) => {
            let a = ready.send(&core.webhooks).await;
            decide(core, &ready, a, schedule).await
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// How long a test send holds its delivery before a worker may take it (should the
/// process die mid-send): longer than any attempt.
const TEST_LEASE_MS: i64 = 60_000;

/// `POST /webhook-subscriptions/{id}/test`: one event of `kind` (`webhook.test`, or a
/// sample of another type) delivered to the key's subscription now, whether it is enabled
/// or not, and its attempt returned. A test is attempted once, never retried; a `410`
/// disables the subscription as any delivery's would.
pub async fn test(core: &Core, p: &Principal, id: Uuid, kind: EventType) -> Result<WebhookAttempt> {
    let sub = core
        .db
        .get_webhook_subscription(p.org_id, p.key_id, id)
        .await?
        .ok_or_else(Problem::not_found)?;
    let event_id = new_id();
    let created_at = now_ms();
    let data: Value = samples::data(kind, sub.id, created_at);
    let payload = event_body(&event_id.to_string(), kind, created_at, p.mode, &data);
    let event = NewEvent {
        id: event_id,
        org_id: p.org_id,
        event_type: kind.as_str().to_string(),
        payload: String::from_utf8(payload).unwrap_or_default(),
        created_at,
        message_id: None,
    };
    let owner = format!("test-{}", Uuid::new_v4());
    let delivery_id = core
        .db
        .insert_leased_event_for_subscription(&event, sub.id, &owner, created_at + TEST_LEASE_MS)
        .await?;
    let job = DeliveryJob {
        delivery_id,
        subscription_id: sub.id,
        org_id: p.org_id,
        event_id,
        event_type: event.event_type.clone(),
        payload: event.payload,
        event_created_at: created_at,
        attempt: 1,
        lease_owner: owner.clone(),
        locked_until: created_at + TEST_LEASE_MS,
        url: sub.url,
        secret_enc: sub.secret_enc,
        previous_secret_enc: sub.previous_secret_enc,
        previous_secret_expires_at: sub.previous_secret_expires_at,
        // A test is sent even to a disabled subscription: that is how one checks a fix.
        enabled: true,
        message_id: None,
    };
    // An empty schedule: the first failure is final.
    let mut made = attempt(core, &job, &RetrySchedule::none()).await;
    if let DeliveryOutcome::Retry { .. } = made.outcome {
        made.outcome = DeliveryOutcome::Failed;
    }
    core.db
        .record_webhook_attempts(&[made.recording(&owner)])
        .await?;
    Ok(WebhookAttempt {
        id: made.attempt.id,
        delivery_id,
        subscription_id: sub.id,
        event_id,
        event_type: event.event_type,
        attempt: 1,
        status: match made.outcome {
            DeliveryOutcome::Succeeded => tern_store::AttemptStatus::Succeeded,
            _ => tern_store::AttemptStatus::Failed,
        },
        response_status: made.attempt.response_status,
        latency_ms: made.attempt.latency_ms,
        error: made.attempt.error,
        created_at: made.attempt.created_at,
        response_body: made.attempt.response_body,
    })
}

/// `POST /webhook-subscriptions/{id}/replay`: the key's subscription's failed deliveries of
/// events created since `since` are due again now, with the whole retry schedule. Returns
/// how many.
pub async fn replay(core: &Core, p: &Principal, id: Uuid, since: i64) -> Result<u64> {
    let sub = core
        .db
        .get_webhook_subscription(p.org_id, p.key_id, id)
        .await?
        .ok_or_else(Problem::not_found)?;
    let n = core
        .db
        .replay_failed_deliveries(sub.id, since, now_ms())
        .await?;
    // The store wakes the delivery workers when it queued some. The replay is one
    // statement of the store's; its entry follows it (a replay is repeatable, harmless).
    let entry = Entry::new(Some(p.org_id), audit::SUBSCRIPTION_REPLAYED)
        .target(audit::TARGET_SUBSCRIPTION, sub.id)
        .detail(serde_json::json!({"since": since, "replayed": n}));
    audit::record(&core.db, &p.context(), entry).await?;
    Ok(n)
}
