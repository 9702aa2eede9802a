//! The request log (APP.md §4): every request to the public API — time, method, route and
//! path, status, error code, request id, key, latency, client address, user agent,
//! Idempotency-Key, the error body of a 4xx/5xx answer and the message it accepted — kept
//! `TERN_REQUEST_LOG_DAYS` days (0 = off) and read in the app.
//!
//! Recording never touches the request path's time or outcome: the API's frame hands each
//! entry to [`RequestLog::record`], which only tries to put it in a bounded channel (it never
//! waits). One writer task drains the channel and inserts batches (up to [`MAX_BATCH`] rows,
//! gathered for at most [`BATCH_WINDOW`]). When the channel is full the entry is dropped and
//! counted in [`DROPPED_METRIC`]. Never stored: a request body, a key value, a secret.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tern_store::{Db, RequestLogFilter, RequestLogRow, v7_floor};
use tokio::sync::{mpsc, oneshot, watch};
use uuid::Uuid;

use crate::Result;
pub use crate::audit::Page;

/// Days kept when `TERN_REQUEST_LOG_DAYS` is unset.
pub const DEFAULT_DAYS: u16 = 7;
/// The largest `TERN_REQUEST_LOG_DAYS`.
pub const MAX_DAYS: u16 = 365;
/// Entries waiting for the writer at most; more are dropped. About 3 MiB when full.
pub const CAPACITY: usize = 8192;
/// Rows a batch holds at most.
pub const MAX_BATCH: usize = 500;
/// How long the writer gathers a batch after its first entry.
pub const BATCH_WINDOW: Duration = Duration::from_millis(100);
/// Entries dropped because the channel was full (or the writer gone).
pub const DROPPED_METRIC: &str = "tern_request_log_dropped_total";
/// Entries lost because their batch could not be written.
pub const WRITE_ERRORS_METRIC: &str = "tern_request_log_write_errors_total";
/// Rows one pruning statement deletes at most.
pub const PRUNE_BATCH: i64 = 5_000;
/// Pruning statements of one housekeeping pass at most (the rest waits for the next pass).
pub const PRUNE_BATCHES_PER_PASS: usize = 200;
/// Longest user agent kept (characters).
pub const MAX_USER_AGENT_CHARS: usize = 256;
/// Longest path kept (characters).
pub const MAX_PATH_CHARS: usize = 1024;
/// Longest Idempotency-Key kept (characters; valid ones are at most 128).
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 256;
/// Longest error body kept (bytes; Tern's own bodies are far shorter).
pub const MAX_ERROR_BODY_BYTES: usize = 4096;

const DAY_MS: i64 = 86_400_000;

/// The log's settings (`TERN_REQUEST_LOG_DAYS`; the channel's size for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestLogSettings {
    /// 0 = off: nothing recorded (and housekeeping deletes what an earlier run kept).
    pub days: u16,
    pub capacity: usize,
}

impl Default for RequestLogSettings {
    fn default() -> Self {
        RequestLogSettings {
            days: DEFAULT_DAYS,
            capacity: CAPACITY,
        }
    }
}

// Nearly every message is an entry: boxing it would cost an allocation per request.
#[allow(clippy::large_enum_variant)]
enum Msg {
    Entry(RequestLogRow),
    /// Answered once everything sent before it is written (tests, shutdown).
    Flush(oneshot::Sender<()>),
}

/// The recorder: cheap to clone; the writer task ends when every clone is dropped.
#[derive(Clone)]
pub struct RequestLog(Arc<Shared>);

struct Shared {
    /// `None` when the log is off.
    tx: Option<mpsc::Sender<Msg>>,
    days: u16,
    dropped: AtomicU64,
    /// Flips to true when the writer has written its last batch.
    done: watch::Receiver<bool>,
    /// The API's operations (`POST /messages`), for the app's route filter.
    routes: OnceLock<Vec<String>>,
}

impl RequestLog {
    /// Starts the writer (inside a Tokio runtime) unless `settings.days` is 0.
    pub fn start(db: Db, settings: RequestLogSettings) -> RequestLog {
        if settings.days == 0 {
            return RequestLog::off();
        }
        let (done_tx, done) = watch::channel(false);
        let (tx, rx) = mpsc::channel(settings.capacity.max(1));
        tokio::spawn(async move {
            run(db, rx).await;
            let _ = done_tx.send(true);
        });
        RequestLog::with(Some(tx), settings.days, done)
    }

    /// A log that records nothing.
    pub fn off() -> RequestLog {
        let (_, done) = watch::channel(true);
        RequestLog::with(None, 0, done)
    }

    fn with(tx: Option<mpsc::Sender<Msg>>, days: u16, done: watch::Receiver<bool>) -> Self {
        RequestLog(Arc::new(Shared {
            tx,
            days,
            dropped: AtomicU64::new(0),
            done,
            routes: OnceLock::new(),
        }))
    }

    /// Whether requests are recorded (the API builds no entry otherwise).
    pub fn enabled(&self) -> bool {
        self.0.tx.is_some()
    }

    /// Days an entry is kept (0: the log is off).
    pub fn days(&self) -> u16 {
        self.0.days
    }

    /// Hands `row` to the writer without waiting; when the channel is full it is dropped
    /// and counted.
    pub fn record(&self, row: RequestLogRow) {
        let Some(tx) = &self.0.tx else { return };
        if tx.try_send(Msg::Entry(row)).is_err() {
            self.0.dropped.fetch_add(1, Ordering::Relaxed);
            metrics::counter!(DROPPED_METRIC).increment(1);
        }
    }

    /// Entries this recorder dropped (also in `/metrics`).
    pub fn dropped(&self) -> u64 {
        self.0.dropped.load(Ordering::Relaxed)
    }

    /// Waits until every entry recorded before the call is written (or dropped).
    pub async fn flush(&self) {
        let Some(tx) = &self.0.tx else { return };
        let (reply, written) = oneshot::channel();
        if tx.send(Msg::Flush(reply)).await.is_ok() {
            let _ = written.await;
        }
    }

    /// Resolves when the writer has written its last batch, which it does once every clone
    /// of the recorder is dropped. A process closes its database only after this.
    pub fn finished(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut done = self.0.done.clone();
        async move {
            let _ = done.wait_for(|d| *d).await;
        }
    }

    /// Sets the API's operations (`METHOD /template`, once; later calls change nothing).
    pub fn set_routes(&self, routes: Vec<String>) {
        let _ = self.0.routes.set(routes);
    }

    /// The API's operations, for a route filter (empty before the API is built).
    pub fn routes(&self) -> &[String] {
        self.0.routes.get().map(Vec::as_slice).unwrap_or_default()
    }
}

/// Makes the dropped-entries counter show in `/metrics` before the first drop. Call once
/// the metrics recorder is installed.
pub fn describe_metrics() {
    metrics::describe_counter!(
        DROPPED_METRIC,
        "Request log entries dropped because the writer's buffer was full"
    );
    metrics::describe_counter!(
        WRITE_ERRORS_METRIC,
        "Request log entries lost because their batch could not be written"
    );
    metrics::counter!(DROPPED_METRIC).increment(0);
    metrics::counter!(WRITE_ERRORS_METRIC).increment(0);
}

/// The writer: a batch is what arrives within [`BATCH_WINDOW`] of its first entry, at most
/// [`MAX_BATCH`] rows; a flush request ends the batch at once.
async fn run(db: Db, mut rx: mpsc::Receiver<Msg>) {
    let mut incoming = Vec::with_capacity(MAX_BATCH);
    let mut rows = Vec::with_capacity(MAX_BATCH);
    let mut flushes = Vec::new();
    loop {
        if rx.recv_many(&mut incoming, MAX_BATCH).await == 0 {
            return;
        }
        let deadline = tokio::time::Instant::now() + BATCH_WINDOW;
        let mut closed = false;
        loop {
            for m in incoming.drain(..) {
                match m {
                    Msg::Entry(r) => rows.push(r),
                    Msg::Flush(f) => flushes.push(f),
                }
            }
            let room = MAX_BATCH.saturating_sub(rows.len());
            if room == 0 || !flushes.is_empty() {
                break;
            }
            match tokio::time::timeout_at(deadline, rx.recv_many(&mut incoming, room)).await {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        write(&db, &rows).await;
        rows.clear();
        for f in flushes.drain(..) {
            let _ = f.send(());
        }
        if closed {
            return;
        }
    }
}

async fn write(db: &Db, rows: &[RequestLogRow]) {
    if rows.is_empty() {
        return;
    }
    if let Err(e) = db.insert_request_log(rows).await {
        tracing::warn!(error = %e, rows = rows.len(), "could not write the request log");
        metrics::counter!(WRITE_ERRORS_METRIC).increment(rows.len() as u64);
    }
}

/// Deletes the entries older than `days` days at `now` (all of them when `days` is 0: the
/// log is off), in bounded statements; answers how many went.
pub async fn prune(db: &Db, days: u16, now: i64) -> Result<u64> {
    let cutoff = v7_floor(now - i64::from(days) * DAY_MS);
    let mut total = 0;
    for _ in 0..PRUNE_BATCHES_PER_PASS {
        let n = db.prune_request_log(cutoff, PRUNE_BATCH).await?;
        total += n;
        if n < PRUNE_BATCH as u64 {
            break;
        }
        // Other writers get the database between two statements.
        tokio::task::yield_now().await;
    }
    Ok(total)
}

/// A status class of the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusClass {
    /// 2xx
    Success,
    /// 4xx
    ClientError,
    /// 5xx
    ServerError,
}

impl StatusClass {
    pub const ALL: [StatusClass; 3] = [
        StatusClass::Success,
        StatusClass::ClientError,
        StatusClass::ServerError,
    ];

    /// `2xx`, `4xx`, `5xx`.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusClass::Success => "2xx",
            StatusClass::ClientError => "4xx",
            StatusClass::ServerError => "5xx",
        }
    }

    pub fn parse(s: &str) -> Option<StatusClass> {
        StatusClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The statuses of the class: from, up to but not including.
    fn range(self) -> (i64, i64) {
        match self {
            StatusClass::Success => (200, 300),
            StatusClass::ClientError => (400, 500),
            StatusClass::ServerError => (500, 600),
        }
    }
}

/// What narrows the log; `None` is "any".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub key_id: Option<Uuid>,
    pub class: Option<StatusClass>,
    pub error_code: Option<String>,
    /// An operation: the method and the route template (`POST`, `/messages`).
    pub operation: Option<(String, String)>,
    /// From this instant (epoch ms, inclusive).
    pub since: Option<i64>,
    /// Before this instant (epoch ms, exclusive).
    pub until: Option<i64>,
}

/// Which page of the log to read.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageRequest {
    /// 1..=200 (clamped; 0 means 50).
    pub limit: u32,
    /// The `next` of the previous page.
    pub before: Option<(i64, Uuid)>,
}

/// The organisation's requests matching `filter`, newest first.
pub async fn list(
    db: &Db,
    org_id: Uuid,
    filter: &Filter,
    page: PageRequest,
) -> Result<Page<RequestLogRow>> {
    let limit = match page.limit {
        0 => 50,
        n => n.min(200),
    };
    let (method, route) = match &filter.operation {
        Some((m, r)) => (Some(m.clone()), Some(r.clone())),
        None => (None, None),
    };
    let store_filter = RequestLogFilter {
        key_id: filter.key_id,
        status: filter.class.map(StatusClass::range),
        error_code: filter.error_code.clone(),
        method,
        route,
        since: filter.since,
        until: filter.until,
    };
    // One more than asked tells whether a next page exists.
    let mut rows = db
        .list_request_log(org_id, &store_filter, page.before, i64::from(limit) + 1)
        .await?;
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next = if more {
        rows.last().map(|r| (r.at, r.id))
    } else {
        None
    };
    Ok(Page { items: rows, next })
}

/// The organisation's request with this request id; `None` for an unknown id or another
/// organisation's request (or one made without a valid key).
pub async fn by_request_id(db: &Db, org_id: Uuid, id: Uuid) -> Result<Option<RequestLogRow>> {
    Ok(db
        .get_request_log(id)
        .await?
        .filter(|r| r.org_id == Some(org_id)))
}

/// A request id as a person pastes it (surrounding spaces, any case), or `None` when it
/// cannot be one.
pub fn parse_request_id(text: &str) -> Option<Uuid> {
    Uuid::parse_str(text.trim()).ok()
}

/// The first `max` characters of `s`.
pub fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_string(),
        None => s.to_string(),
    }
}

/// `body` cut to at most `max` bytes, at a character boundary.
pub fn cut_bytes(body: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(body);
    if text.len() <= max {
        return text.into_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_keep_whole_characters() {
        assert_eq!(cut("héllo", 2), "hé");
        assert_eq!(cut("ab", 5), "ab");
        assert_eq!(cut_bytes("héllo".as_bytes(), 2), "h");
        assert_eq!(cut_bytes(b"abc", 3), "abc");
    }

    #[test]
    fn classes_and_ids_parse() {
        assert_eq!(StatusClass::parse("4xx"), Some(StatusClass::ClientError));
        assert_eq!(StatusClass::parse("3xx"), None);
        let id = Uuid::now_v7();
        assert_eq!(parse_request_id(&format!(" {id} ")), Some(id));
        assert_eq!(parse_request_id(&id.to_string().to_uppercase()), Some(id));
        assert_eq!(parse_request_id("0190-nope"), None);
    }
}
