//! `GET /events/stream`: the organisation's events as they happen, built on the outbox that
//! feeds subscriptions (a stream is a subscription of kind `stream`, see the store's
//! `events::streams`: the fan-out numbers the events streams want, and a stream is a
//! position in that order). One stream per (key, normalised `types`); a connection takes it
//! over from any earlier one and resumes it by `Last-Event-ID`:
//!
//! | the connection brings | where it starts |
//! |---|---|
//! | no `Last-Event-ID` | the organisation's head now: it starts from now |
//! | the id of an event of this stream (its types, since it was registered) | right after that event |
//! | another id (unknown, another stream's, pruned) | as without one, said in a first comment |
//!
//! Then events are sent as the fan-out numbers them: woken by this process's fan-outs,
//! polling every [`POLL`] for other processes', a keep-alive comment every [`KEEP_ALIVE`]
//! (which renews the lease). Before each batch the connection checks that it still holds the
//! lease, so a connection taken over writes nothing more.

use std::future::Future;
use std::time::Duration;

use tern_domain::events::EventType;
use tern_domain::time::now_ms;
use tokio::sync::mpsc;
use uuid::Uuid;

use crate::{Core, Principal, Result};

/// How often an open stream looks for rows other processes' fan-outs gave it.
pub const POLL: Duration = Duration::from_millis(750);
/// How often an idle stream sends a comment (and renews its lease).
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Rows recorded and written per round.
const BATCH: i64 = 100;

/// What the adapter writes: an SSE comment or an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Comment(String),
    Event {
        /// The event id (SSE `id`).
        id: String,
        /// The event type (SSE `event`).
        event_type: String,
        /// The body exactly as a subscription receives it: one line of JSON.
        data: String,
    },
}

/// A stream taken by one connection; [`Stream::run`] serves it.
pub struct Stream {
    core: Core,
    id: Uuid,
    org_id: Uuid,
    types: Vec<String>,
    owner: String,
    /// The number of the last event sent (or the start).
    position: i64,
    /// Comments written before any event.
    first: Vec<String>,
}

/// Opens the stream of the caller's key for `types` (from
/// [`tern_domain::events::stream::parse_types`]), resuming after `last_event_id`.
pub async fn open(
    core: &Core,
    p: &Principal,
    types: &[EventType],
    last_event_id: Option<&str>,
) -> Result<Stream> {
    let owner = format!("stream-{}", Uuid::new_v4());
    let names: Vec<String> = types.iter().map(|t| t.as_str().to_string()).collect();
    let now = now_ms();
    let opened = core
        .db
        .open_event_stream(p.org_id, p.key_id, &names, &owner, now)
        .await?;
    let mut first = Vec::new();
    let mut resumed = None;
    if let Some(raw) = last_event_id.map(str::trim).filter(|s| !s.is_empty()) {
        if let Ok(event_id) = raw.parse::<Uuid>() {
            resumed = core
                .db
                .stream_position_of(p.org_id, &names, opened.start_seq, event_id)
                .await?;
        }
        match resumed {
            Some(_) => first.push(format!("resuming after {raw}")),
            None => {
                // Kept short and printable: the id is the client's text.
                let shown: String = raw.chars().filter(|c| !c.is_control()).take(64).collect();
                first.push(format!(
                    "Last-Event-ID {shown} is unknown or expired: starting from now"
                ));
            }
        }
    }
    let position = match resumed {
        Some(seq) => seq,
        None => {
            first.push("starting from now".to_string());
            core.db.stream_head(p.org_id).await?
        }
    };
    metrics::counter!("tern_event_streams_opened_total").increment(1);
    Ok(Stream {
        core: core.clone(),
        id: opened.id,
        org_id: p.org_id,
        types: names,
        owner,
        position,
        first,
    })
}

/// Why a stream stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The client went away.
    Closed,
    /// Another connection took the stream over.
    TakenOver,
    /// The server is shutting down (`stop` finished).
    Stopped,
    /// The database failed; the client reconnects and resumes.
    Failed,
}

impl Stream {
    /// The stream's subscription id.
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// Writes the stream's rows to `out` until the client goes away (`out` closed), another
    /// connection takes the stream over, or `stop` finishes.
    pub async fn run(mut self, out: mpsc::Sender<Frame>, stop: impl Future<Output = ()>) -> Ended {
        tokio::pin!(stop);
        let ended = self.serve(&out, stop).await;
        let last = match ended {
            Ended::TakenOver => Some("another connection took this stream over"),
            Ended::Stopped => Some("the server is shutting down: reconnect with Last-Event-ID"),
            Ended::Failed => Some("the stream failed: reconnect with Last-Event-ID"),
            Ended::Closed => None,
        };
        if let Some(last) = last {
            let _ = out.send(Frame::Comment(last.to_string())).await;
        }
        if ended != Ended::TakenOver
            && let Err(e) = self
                .core
                .db
                .release_event_stream(self.id, &self.owner, now_ms())
                .await
        {
            tracing::warn!(error = %e, stream = %self.id, "could not release an event stream");
        }
        ended
    }

    async fn serve(
        &mut self,
        out: &mpsc::Sender<Frame>,
        mut stop: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Ended {
        for c in &self.first {
            if out.send(Frame::Comment(c.clone())).await.is_err() {
                return Ended::Closed;
            }
        }
        let wakeups = self.core.db.wakeups();
        let mut quiet_since = tokio::time::Instant::now();
        loop {
            // Listening before looking: a fan-out between the look and the wait still wakes.
            let woken = wakeups.streams.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            match self.send_pending(out).await {
                Ok(Some(ended)) => return ended,
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, stream = %self.id, "event stream read failed");
                    return Ended::Failed;
                }
            }
            let beat = quiet_since + KEEP_ALIVE;
            tokio::select! {
                () = &mut woken => {}
                () = tokio::time::sleep(POLL) => {}
                () = tokio::time::sleep_until(beat) => {
                    match self.core.db.renew_stream_lease(self.id, &self.owner, now_ms()).await {
                        Ok(true) => {}
                        Ok(false) => return Ended::TakenOver,
                        Err(e) => {
                            tracing::warn!(error = %e, stream = %self.id, "event stream renewal failed");
                            return Ended::Failed;
                        }
                    }
                    if out.send(Frame::Comment("keep-alive".into())).await.is_err() {
                        return Ended::Closed;
                    }
                    quiet_since = tokio::time::Instant::now();
                }
                () = out.closed() => return Ended::Closed,
                () = &mut stop => return Ended::Stopped,
            }
        }
    }

    /// Sends every event after the position now; `Some` when the stream must end.
    async fn send_pending(&mut self, out: &mpsc::Sender<Frame>) -> Result<Option<Ended>> {
        loop {
            let rows = self
                .core
                .db
                .stream_events_after(self.org_id, &self.types, self.position, BATCH)
                .await?;
            let Some(last) = rows.last().map(|r| r.stream_seq) else {
                return Ok(None);
            };
            if !self.core.db.holds_stream(self.id, &self.owner).await? {
                return Ok(Some(Ended::TakenOver));
            }
            metrics::counter!("tern_event_stream_sends_total").increment(rows.len() as u64);
            for r in rows {
                let frame = Frame::Event {
                    id: r.event_id.to_string(),
                    event_type: r.event_type,
                    data: r.payload,
                };
                if out.send(frame).await.is_err() {
                    return Ok(Some(Ended::Closed));
                }
            }
            self.position = last;
        }
    }
}
