//! The simulator's shared state and the operations on it used by both the Cloud API
//! handlers and the control API.
//!
//! One `std::sync::Mutex` guards everything; it is never held across an `.await`, so the
//! critical sections are short and deterministic (the seeded RNG is drawn in request order).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};

use crate::config::{NumberSpec, SimArgs};
use crate::customers::Customer;
use crate::media;
use crate::model::{
    DeliveryRecord, ForcedAction, MediaOrigin, MediaRec, MediaSummary, MessageRecord, Number,
    NumberPatch, RequestRecord, TemplateRec, digits,
};

/// A control-API level error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CtlError {
    pub status: u16,
    pub message: String,
}

impl CtlError {
    pub fn bad_request(m: impl Into<String>) -> Self {
        Self {
            status: 400,
            message: m.into(),
        }
    }
    pub fn not_found(m: impl Into<String>) -> Self {
        Self {
            status: 404,
            message: m.into(),
        }
    }
}

/// A webhook event waiting for the dispatcher.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub waba_id: String,
    pub phone_number_id: String,
    pub display_digits: String,
    pub kind: OutKind,
}

#[derive(Debug, Clone)]
pub enum OutKind {
    /// A `statuses[]` item and, except for `failed`, the recipient's `contacts[]` entry.
    Status {
        status: Value,
        contact: Option<Value>,
    },
    /// A `messages[]` item and, except for the network's identity-change notices, the
    /// sender's `contacts[]` entry.
    Inbound {
        contact: Option<Value>,
        message: Value,
    },
    /// A change of its own `field` (template updates), one per event.
    Field { field: &'static str, value: Value },
}

/// Token bucket used for throughput and pair rate limits.
#[derive(Debug, Clone)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn take(&mut self, capacity: f64, per_sec: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_sec).min(capacity);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

pub struct Inner {
    rng: StdRng,
    clock_offset_secs: i64,
    pub callback_url: Option<String>,
    pub numbers: HashMap<String, Number>,
    /// Customers by key (phone digits, or `user:<first BSUID>` when no phone is shown).
    pub customers: BTreeMap<String, Customer>,
    /// (pnid, customer key) → sim time (unix secs) of the customer's last inbound message.
    pub(crate) windows: HashMap<(String, String), i64>,
    pub templates: Vec<TemplateRec>,
    pub media: HashMap<String, MediaRec>,
    pub messages: Vec<MessageRecord>,
    /// Customers' messages (valid reaction targets; read marks).
    pub(crate) inbound: Vec<crate::agents::InboundRecord>,
    /// (pnid, customer key) of each customer a number blocked.
    pub(crate) blocked: std::collections::HashSet<(String, String)>,
    pub requests: Vec<RequestRecord>,
    pub deliveries: Vec<DeliveryRecord>,
    forced: HashMap<String, VecDeque<ForcedAction>>,
    throughput: HashMap<String, Bucket>,
    pair: HashMap<(String, String), Bucket>,
    /// (pnid, message key) → refusals so far, for `refuses_twice` customers.
    refusals: HashMap<(String, String), u32>,
    /// (pnid, customer key) → sim time of the last automatic answer of a `replies` customer.
    auto_replies: HashMap<(String, String), i64>,
    seq: u64,
}

impl Inner {
    fn new(seed: Option<u64>, callback_url: Option<String>) -> Self {
        let rng = match seed {
            Some(s) => StdRng::seed_from_u64(s),
            None => StdRng::from_os_rng(),
        };
        Self {
            rng,
            clock_offset_secs: 0,
            callback_url,
            numbers: HashMap::new(),
            customers: BTreeMap::new(),
            windows: HashMap::new(),
            templates: Vec::new(),
            media: HashMap::new(),
            messages: Vec::new(),
            inbound: Vec::new(),
            blocked: std::collections::HashSet::new(),
            requests: Vec::new(),
            deliveries: Vec::new(),
            forced: HashMap::new(),
            throughput: HashMap::new(),
            pair: HashMap::new(),
            refusals: HashMap::new(),
            auto_replies: HashMap::new(),
            seq: 0,
        }
    }

    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    pub fn now_secs(&self) -> i64 {
        unix_now_ms() / 1000 + self.clock_offset_secs
    }

    pub fn random_bool(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.random_bool(p.clamp(0.0, 1.0))
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        items.shuffle(&mut self.rng);
    }

    pub(crate) fn random_digits(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n);
        s.push(char::from(b'1' + self.rng.random_range(0..9u8)));
        while s.len() < n {
            s.push(char::from(b'0' + self.rng.random_range(0..10u8)));
        }
        s
    }

    pub(crate) fn random_hex_upper(&mut self, bytes: usize) -> String {
        let buf: Vec<u8> = (0..bytes).map(|_| self.rng.random()).collect();
        hex::encode_upper(buf)
    }

    /// `wamid.` + base64 of the layout seen in Meta's examples (reference §9).
    pub fn wamid(&mut self, wa_id: &str, outbound: bool) -> String {
        let (dir, hex_len) = if outbound { (0x11u8, 9) } else { (0x12u8, 10) };
        let id = self.random_hex_upper(hex_len);
        let mut b = vec![0x1c, 0x18, u8::try_from(wa_id.len()).unwrap_or(0)];
        b.extend_from_slice(wa_id.as_bytes());
        b.extend_from_slice(&[
            0x15,
            0x02,
            0x00,
            dir,
            0x18,
            u8::try_from(id.len()).unwrap_or(0),
        ]);
        b.extend_from_slice(id.as_bytes());
        b.push(0x00);
        format!(
            "wamid.{}",
            base64::engine::general_purpose::STANDARD.encode(b)
        )
    }

    pub fn fbtrace_id(&mut self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        (0..23)
            .map(|_| char::from(ALPHABET[self.rng.random_range(0..ALPHABET.len())]))
            .collect()
    }

    /// Find the number owning `token`.
    pub fn number_by_token(&self, token: &str) -> Option<&Number> {
        self.numbers.values().find(|n| n.access_token == token)
    }

    pub fn pop_forced(&mut self, pnid: &str) -> Option<ForcedAction> {
        self.forced.get_mut(pnid).and_then(VecDeque::pop_front)
    }

    /// Throughput check (token bucket, capacity = mps).
    pub fn take_throughput(&mut self, number: &Number) -> bool {
        let mps = f64::from(number.throughput_mps.max(1));
        let now = Instant::now();
        self.throughput
            .entry(number.id.clone())
            .or_insert(Bucket {
                tokens: mps,
                last: now,
            })
            .take(mps, mps, now)
    }

    /// Pair rate check: `pair_burst` messages, refilled one per `pair_period_ms`. `key` is
    /// the customer's key, so a phone and its BSUID share one bucket.
    pub fn take_pair(&mut self, number: &Number, key: &str) -> bool {
        let cap = f64::from(number.pair_burst.max(1));
        let per_sec = 1000.0 / number.pair_period_ms.max(1) as f64;
        let now = Instant::now();
        self.pair
            .entry((number.id.clone(), key.to_owned()))
            .or_insert(Bucket {
                tokens: cap,
                last: now,
            })
            .take(cap, per_sec, now)
    }

    /// Whether to refuse this attempt of a message to a `refuses_twice` customer: the first
    /// two attempts are refused, the third goes through and the count starts again (so the
    /// same text sent later as a new message is refused twice too).
    pub fn refuse_attempt(&mut self, pnid: &str, message_key: String) -> bool {
        let key = (pnid.to_owned(), message_key);
        let n = self.refusals.entry(key.clone()).or_insert(0);
        if *n < 2 {
            *n += 1;
            true
        } else {
            self.refusals.remove(&key);
            false
        }
    }

    /// Whether a `replies` customer answers now: at most once a minute (simulator clock) per
    /// number, so a bot that answers every message (an echo bot) does not talk with it forever.
    pub fn take_auto_reply(&mut self, pnid: &str, key: &str) -> bool {
        let now = self.now_secs();
        let k = (pnid.to_owned(), key.to_owned());
        if self.auto_replies.get(&k).is_some_and(|t| now - t < 60) {
            return false;
        }
        self.auto_replies.insert(k, now);
        true
    }

    /// Whether the customer (by key) wrote to `pnid` in the last 24 h.
    pub fn window_open(&self, pnid: &str, key: &str) -> bool {
        self.windows
            .get(&(pnid.to_owned(), key.to_owned()))
            .is_some_and(|t| self.now_secs() - t < 24 * 3600)
    }

    pub fn wamid_known(&self, wamid: &str) -> bool {
        self.inbound.iter().any(|m| m.wamid == wamid)
            || self.messages.iter().any(|m| m.wamid == wamid)
    }

    /// Store a file under a new media id (30 days for uploads, 7 for inbound media).
    pub(crate) fn store_media(
        &mut self,
        pnid: Option<&str>,
        mime: &str,
        bytes: Bytes,
        origin: MediaOrigin,
    ) -> String {
        let id = self.random_digits(16);
        let sha256_hex = hex::encode(Sha256::digest(&bytes));
        let now = self.now_secs();
        let ttl = match origin {
            MediaOrigin::Upload => media::UPLOAD_TTL_SECS,
            MediaOrigin::Inbound => media::INBOUND_TTL_SECS,
        };
        self.media.insert(
            id.clone(),
            MediaRec {
                id: id.clone(),
                phone_number_id: pnid.map(str::to_owned),
                mime_type: mime.to_owned(),
                bytes,
                sha256_hex,
                origin,
                uploaded_at: now,
                expires_at: now.saturating_add(ttl),
                url_token: None,
            },
        );
        id
    }

    /// A media id the network still knows (stored and not expired).
    pub fn live_media(&self, id: &str) -> Option<&MediaRec> {
        let now = self.now_secs();
        self.media.get(id).filter(|m| m.is_live(now))
    }
}

/// Everything shared by handlers and background tasks.
pub struct Sim {
    pub args: SimArgs,
    inner: Mutex<Inner>,
    pub events: mpsc::UnboundedSender<Outgoing>,
    pub public_url: String,
    pub http: reqwest::Client,
    pub shutdown: watch::Receiver<bool>,
}

impl Sim {
    pub fn new(
        args: SimArgs,
        public_url: String,
        events: mpsc::UnboundedSender<Outgoing>,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Arc<Self>, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(args.webhook_timeout_ms.max(1)))
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let inner = Inner::new(args.seed, args.callback_url.clone());
        Ok(Arc::new(Self {
            args,
            inner: Mutex::new(inner),
            events,
            public_url,
            http,
            shutdown,
        }))
    }

    /// Lock the state; a poisoned lock (a panic elsewhere) is recovered, not propagated.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Spawn a task that stops at shutdown.
    pub fn spawn<F>(self: &Arc<Self>, fut: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let mut stop = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = fut => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        });
    }

    // ---- numbers, recipients, clock ------------------------------------------------------

    pub fn register_number(&self, spec: NumberSpec) -> Result<Number, CtlError> {
        if [&spec.id, &spec.waba_id, &spec.access_token]
            .iter()
            .any(|s| s.is_empty())
            || digits(&spec.display_phone_number).is_empty()
        {
            return Err(CtlError::bad_request(
                "id, display_phone_number, waba_id and access_token are required",
            ));
        }
        let n = Number {
            verified_name: spec
                .verified_name
                .unwrap_or_else(|| "Tern Simulator".into()),
            id: spec.id,
            display_phone_number: spec.display_phone_number,
            waba_id: spec.waba_id,
            access_token: spec.access_token,
            throughput_mps: spec.throughput_mps.unwrap_or(self.args.default_mps),
            quality_rating: "GREEN".into(),
            status: "CONNECTED".into(),
            pair_burst: self.args.pair_burst,
            pair_period_ms: self.args.pair_period_ms,
        };
        let mut st = self.lock();
        st.throughput.remove(&n.id);
        st.numbers.insert(n.id.clone(), n.clone());
        Ok(n)
    }

    pub fn patch_number(&self, pnid: &str, p: NumberPatch) -> Result<Number, CtlError> {
        let mut st = self.lock();
        let n = st
            .numbers
            .get_mut(pnid)
            .ok_or_else(|| CtlError::not_found(format!("unknown number {pnid}")))?;
        if let Some(v) = p.throughput_mps {
            n.throughput_mps = v;
        }
        if let Some(v) = p.quality_rating {
            n.quality_rating = v;
        }
        if let Some(v) = p.status {
            n.status = v;
        }
        if let Some(v) = p.access_token {
            n.access_token = v;
        }
        if let Some(v) = p.verified_name {
            n.verified_name = v;
        }
        if let Some(v) = p.pair_burst {
            n.pair_burst = v;
        }
        if let Some(v) = p.pair_period_ms {
            n.pair_period_ms = v;
        }
        let n = n.clone();
        // new limits apply from a full bucket
        st.throughput.remove(pnid);
        st.pair.retain(|(p, _), _| p != pnid);
        Ok(n)
    }

    pub fn force(&self, pnid: &str, action: ForcedAction, times: u32) -> Result<usize, CtlError> {
        let mut st = self.lock();
        if !st.numbers.contains_key(pnid) {
            return Err(CtlError::not_found(format!("unknown number {pnid}")));
        }
        let q = st.forced.entry(pnid.to_owned()).or_default();
        for _ in 0..times.max(1) {
            q.push_back(action.clone());
        }
        Ok(q.len())
    }

    pub fn clear_forced(&self, pnid: &str) {
        self.lock().forced.remove(pnid);
    }

    /// Set (or with `None` close) a customer service window.
    pub fn set_window(&self, pnid: &str, wa_id: &str, last_inbound_at: Option<i64>) {
        self.set_window_key(pnid, &digits(wa_id), last_inbound_at);
    }

    /// Same, for a customer named by BSUID (phone-less customers).
    pub fn set_window_for_user_id(&self, pnid: &str, user_id: &str, last_inbound_at: Option<i64>) {
        let key = self.lock().key_for_user_id(user_id);
        self.set_window_key(pnid, &key, last_inbound_at);
    }

    fn set_window_key(&self, pnid: &str, key: &str, last_inbound_at: Option<i64>) {
        let key = (pnid.to_owned(), key.to_owned());
        let mut st = self.lock();
        match last_inbound_at {
            Some(t) => st.windows.insert(key, t),
            None => st.windows.remove(&key),
        };
    }

    pub fn advance_clock(&self, secs: i64) -> i64 {
        let mut st = self.lock();
        st.clock_offset_secs = st.clock_offset_secs.saturating_add(secs);
        st.now_secs()
    }

    pub fn now_secs(&self) -> i64 {
        self.lock().now_secs()
    }

    pub fn set_callback(&self, url: Option<String>) {
        self.lock().callback_url = url;
    }

    pub fn callback(&self) -> Option<String> {
        self.lock().callback_url.clone()
    }

    /// Forget everything (numbers too unless `keep_numbers`); the RNG keeps its position.
    pub fn reset(&self, keep_numbers: bool) {
        let mut st = self.lock();
        let numbers = std::mem::take(&mut st.numbers);
        let callback = st.callback_url.take();
        let rng = st.rng.clone();
        *st = Inner::new(None, callback);
        st.rng = rng;
        if keep_numbers {
            st.numbers = numbers;
        }
        drop(st);
        if self.args.magic_recipients
            && let Err(e) = self.seed_magic_customers()
        {
            // cannot happen on an empty customer list; logged rather than lost
            tracing::error!(error = %e, "cannot re-create the magic customers");
        }
    }

    pub(crate) fn queue(&self, number: &Number, kind: OutKind) {
        // The receiver only disappears at shutdown; losing events then is fine.
        let _ = self.events.send(Outgoing {
            waba_id: number.waba_id.clone(),
            phone_number_id: number.id.clone(),
            display_digits: number.display_digits(),
            kind,
        });
    }

    // ---- media -------------------------------------------------------------------------

    pub fn store_media(
        &self,
        pnid: Option<&str>,
        mime: &str,
        bytes: Bytes,
        origin: MediaOrigin,
    ) -> String {
        self.lock().store_media(pnid, mime, bytes, origin)
    }

    /// Issue a fresh 5-minute download URL (simulator clock) for a live media id.
    pub fn media_url(&self, media_id: &str) -> Option<(String, MediaRec)> {
        let mut st = self.lock();
        st.live_media(media_id)?;
        let token = st.random_hex_upper(12).to_lowercase();
        let now = st.now_secs();
        let m = st.media.get_mut(media_id)?;
        m.url_token = Some((token.clone(), now));
        let url = format!("{}/_media/{media_id}?token={token}", self.public_url);
        Some((url, m.clone()))
    }

    /// Every stored media id (expired ones too), oldest first.
    pub fn media_summaries(&self) -> Vec<MediaSummary> {
        let st = self.lock();
        let now = st.now_secs();
        let mut v: Vec<MediaSummary> = st.media.values().map(|m| m.summary(now)).collect();
        v.sort_by(|a, b| (a.uploaded_at, &a.id).cmp(&(b.uploaded_at, &b.id)));
        v
    }

    /// Make a media id expire now: it becomes unknown to `GET /{media-id}`, its URLs answer
    /// 404 and sends using it fail with 131053.
    pub fn expire_media(&self, id: &str) -> Result<MediaSummary, CtlError> {
        let mut st = self.lock();
        let now = st.now_secs();
        let m = st
            .media
            .get_mut(id)
            .ok_or_else(|| CtlError::not_found(format!("unknown media {id}")))?;
        m.expires_at = m.expires_at.min(now);
        Ok(m.summary(now))
    }
}

pub fn unix_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn automatic_answers_are_one_a_minute_per_number_and_customer() {
        let mut st = Inner::new(Some(1), None);
        assert!(st.take_auto_reply("n1", "c1"));
        assert!(!st.take_auto_reply("n1", "c1"));
        assert!(st.take_auto_reply("n2", "c1"), "another number");
        assert!(st.take_auto_reply("n1", "c2"), "another customer");
        st.clock_offset_secs += 59;
        assert!(!st.take_auto_reply("n1", "c1"));
        st.clock_offset_secs += 1;
        assert!(st.take_auto_reply("n1", "c1"));
        assert!(!st.take_auto_reply("n1", "c1"));
    }

    #[test]
    fn a_message_is_refused_twice_then_counted_again() {
        let mut st = Inner::new(Some(1), None);
        let k = || "biz:c:m1".to_owned();
        assert!(st.refuse_attempt("n1", k()));
        assert!(st.refuse_attempt("n1", k()));
        assert!(!st.refuse_attempt("n1", k()), "third attempt accepted");
        assert!(st.refuse_attempt("n1", k()), "a new message");
        assert!(st.refuse_attempt("n2", k()), "counted per number");
    }
}
