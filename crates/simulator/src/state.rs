//! The simulator's shared state and the operations on it used by both the Cloud API
//! handlers and the control API.
//!
//! One `std::sync::Mutex` guards everything; it is never held across an `.await`, so the
//! critical sections are short and deterministic (the seeded RNG is drawn in request order).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};

use crate::config::{NumberSpec, ReviewMode, SimArgs};
use crate::graph::webhook_error;
use crate::model::{
    Behaviour, DeliveryRecord, ForcedAction, MediaRec, MessageRecord, Number, NumberPatch,
    RecipientSpec, RequestRecord, TemplateRec, TemplateSeed, digits,
};
use crate::validate::ValidSend;

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
    Status(Value),
    Inbound { contact: Value, message: Value },
    Template(Value),
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
    pub recipients: HashMap<String, RecipientSpec>,
    /// (pnid, wa_id) → sim time (unix secs) of the customer's last inbound message.
    windows: HashMap<(String, String), i64>,
    pub templates: Vec<TemplateRec>,
    pub media: HashMap<String, MediaRec>,
    pub messages: Vec<MessageRecord>,
    /// Inbound wamids (valid reaction targets).
    inbound_wamids: Vec<String>,
    pub requests: Vec<RequestRecord>,
    pub deliveries: Vec<DeliveryRecord>,
    forced: HashMap<String, VecDeque<ForcedAction>>,
    throughput: HashMap<String, Bucket>,
    pair: HashMap<(String, String), Bucket>,
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
            recipients: HashMap::new(),
            windows: HashMap::new(),
            templates: Vec::new(),
            media: HashMap::new(),
            messages: Vec::new(),
            inbound_wamids: Vec::new(),
            requests: Vec::new(),
            deliveries: Vec::new(),
            forced: HashMap::new(),
            throughput: HashMap::new(),
            pair: HashMap::new(),
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

    fn random_digits(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n);
        s.push(char::from(b'1' + self.rng.random_range(0..9u8)));
        while s.len() < n {
            s.push(char::from(b'0' + self.rng.random_range(0..10u8)));
        }
        s
    }

    fn random_hex_upper(&mut self, bytes: usize) -> String {
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

    /// Pair rate check: `pair_burst` messages, refilled one per `pair_period_ms`.
    pub fn take_pair(&mut self, number: &Number, wa_id: &str) -> bool {
        let cap = f64::from(number.pair_burst.max(1));
        let per_sec = 1000.0 / number.pair_period_ms.max(1) as f64;
        let now = Instant::now();
        self.pair
            .entry((number.id.clone(), wa_id.to_owned()))
            .or_insert(Bucket {
                tokens: cap,
                last: now,
            })
            .take(cap, per_sec, now)
    }

    pub fn window_open(&self, pnid: &str, wa_id: &str) -> bool {
        self.windows
            .get(&(pnid.to_owned(), wa_id.to_owned()))
            .is_some_and(|t| self.now_secs() - t < 24 * 3600)
    }

    pub fn wamid_known(&self, wamid: &str) -> bool {
        self.inbound_wamids.iter().any(|w| w == wamid)
            || self.messages.iter().any(|m| m.wamid == wamid)
    }

    fn store_media(&mut self, pnid: Option<&str>, mime: &str, bytes: Bytes) -> String {
        let id = self.random_digits(16);
        let sha256_hex = hex::encode(Sha256::digest(&bytes));
        self.media.insert(
            id.clone(),
            MediaRec {
                id: id.clone(),
                phone_number_id: pnid.map(str::to_owned),
                mime_type: mime.to_owned(),
                bytes,
                sha256_hex,
                url_token: None,
            },
        );
        id
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

    pub fn register_recipient(&self, mut spec: RecipientSpec) -> Result<RecipientSpec, CtlError> {
        spec.wa_id = digits(&spec.wa_id);
        if spec.wa_id.is_empty() {
            return Err(CtlError::bad_request("wa_id is required"));
        }
        self.lock()
            .recipients
            .insert(spec.wa_id.clone(), spec.clone());
        Ok(spec)
    }

    /// Set (or with `None` close) a customer service window.
    pub fn set_window(&self, pnid: &str, wa_id: &str, last_inbound_at: Option<i64>) {
        let key = (pnid.to_owned(), digits(wa_id));
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
    }

    // ---- sends -----------------------------------------------------------------------------

    /// Record an accepted message and schedule its status webhooks. Returns the wamid.
    pub fn accept_message(
        self: &Arc<Self>,
        number: &Number,
        send: &ValidSend,
        payload: Value,
        forced_failure: Option<(i64, Option<String>)>,
    ) -> String {
        let mut st = self.lock();
        let wamid = st.wamid(&send.wa_id, true);
        let now = st.now_secs();
        let recipient = st.recipients.get(&send.wa_id).cloned();
        let behaviour = recipient.as_ref().map(|r| r.behaviour).unwrap_or_default();
        let window_open = st.window_open(&number.id, &send.wa_id);

        // Decide the async outcome, most specific first.
        let failure: Option<(i64, Option<String>)> = if let Some(f) = forced_failure {
            Some(f)
        } else if behaviour == Behaviour::NotOnWhatsapp {
            Some((131026, Some("Message Undeliverable.".into())))
        } else if behaviour == Behaviour::Fail {
            Some((recipient.and_then(|r| r.fail_code).unwrap_or(131000), None))
        } else if !send.is_template() && !window_open && !self.args.no_window {
            Some((
                131047,
                Some(
                    "Message failed to send because more than 24 hours have passed since the \
                     customer last replied to this number."
                        .into(),
                ),
            ))
        } else if send
            .reaction_target
            .as_deref()
            .is_some_and(|t| !st.wamid_known(t))
        {
            Some((
                131009,
                Some("The message you are reacting to does not exist.".into()),
            ))
        } else if send
            .media_id
            .as_deref()
            .is_some_and(|m| !st.media.contains_key(m))
        {
            Some((131053, Some("Media id not found.".into())))
        } else {
            None
        };

        let mut plan: Vec<&'static str> = match (&failure, behaviour) {
            (Some(_), _) => vec!["failed"],
            _ if send.message_type == "reaction" => vec!["sent"],
            (None, Behaviour::NeverDelivers) => vec!["sent"],
            (None, Behaviour::NeverReads) => vec!["sent", "delivered"],
            _ if send.voice => vec!["sent", "delivered", "read", "played"],
            _ => vec!["sent", "delivered", "read"],
        };
        let outcome = match &failure {
            Some((code, _)) => format!("failed:{code}"),
            None => plan.last().copied().unwrap_or("sent").to_owned(),
        };
        if plan.len() > 1 && st.random_bool(self.args.out_of_order) {
            st.shuffle(&mut plan);
        }
        let conversation_id = st.random_hex_upper(16).to_lowercase();
        st.messages.push(MessageRecord {
            wamid: wamid.clone(),
            phone_number_id: number.id.clone(),
            to: send.to.clone(),
            wa_id: send.wa_id.clone(),
            message_type: send.message_type.clone(),
            biz_opaque_callback_data: send.biz_opaque_callback_data.clone(),
            accepted_at: now,
            outcome,
            statuses: Vec::new(),
            payload,
        });
        drop(st);

        let ctx = StatusCtx {
            wamid: wamid.clone(),
            wa_id: send.wa_id.clone(),
            biz: send.biz_opaque_callback_data.clone(),
            category: send.category.clone(),
            free: send.category == "service" && window_open,
            conversation_id,
            failure,
            number: number.clone(),
        };
        let delays = [
            self.args.sent_delay_ms,
            self.args.delivered_delay_ms,
            self.args.read_delay_ms,
            self.args.read_delay_ms,
        ];
        let sim = Arc::clone(self);
        self.spawn(async move {
            let mut priced = false;
            for (i, status) in plan.into_iter().enumerate() {
                let d = delays.get(i).copied().unwrap_or(0);
                if d > 0 {
                    tokio::time::sleep(Duration::from_millis(d)).await;
                }
                // pricing on `sent` (or `failed`) and on the first of delivered/read
                let with_pricing = match status {
                    "sent" | "failed" => true,
                    "delivered" | "read" if !priced => {
                        priced = true;
                        true
                    }
                    _ => false,
                };
                sim.emit_status(&ctx, status, with_pricing);
            }
        });
        wamid
    }

    fn emit_status(&self, ctx: &StatusCtx, status: &str, with_pricing: bool) {
        let mut st = self.lock();
        let now = st.now_secs();
        let mut v = json!({
            "id": ctx.wamid,
            "status": status,
            "timestamp": now.to_string(),
            "recipient_id": ctx.wa_id,
        });
        if let Some(b) = &ctx.biz {
            v["biz_opaque_callback_data"] = json!(b);
        }
        if status == "failed" {
            let (code, details) = ctx.failure.clone().unwrap_or((131000, None));
            v["errors"] = json!([webhook_error(code, details.as_deref())]);
        } else {
            let mut conv = json!({
                "id": ctx.conversation_id,
                "origin": {"type": ctx.category},
            });
            if status == "sent" {
                conv["expiration_timestamp"] = json!((now + 24 * 3600).to_string());
            }
            v["conversation"] = conv;
        }
        if with_pricing && status != "failed" {
            v["pricing"] = json!({
                "billable": !ctx.free,
                "pricing_model": "PMP",
                "type": if ctx.free { "free_customer_service" } else { "regular" },
                "category": ctx.category,
            });
        }
        if let Some(m) = st.messages.iter_mut().rev().find(|m| m.wamid == ctx.wamid) {
            m.statuses.push(status.to_owned());
        }
        drop(st);
        self.queue(&ctx.number, OutKind::Status(v));
    }

    fn queue(&self, number: &Number, kind: OutKind) {
        // The receiver only disappears at shutdown; losing events then is fine.
        let _ = self.events.send(Outgoing {
            waba_id: number.waba_id.clone(),
            phone_number_id: number.id.clone(),
            display_digits: number.display_digits(),
            kind,
        });
    }

    // ---- media -------------------------------------------------------------------------

    pub fn store_media(&self, pnid: Option<&str>, mime: &str, bytes: Bytes) -> String {
        self.lock().store_media(pnid, mime, bytes)
    }

    /// Issue a fresh 5-minute download URL for a media id.
    pub fn media_url(&self, media_id: &str) -> Option<(String, MediaRec)> {
        let mut st = self.lock();
        let token = st.random_hex_upper(12).to_lowercase();
        let m = st.media.get_mut(media_id)?;
        m.url_token = Some((token.clone(), Instant::now()));
        let url = format!("{}/_media/{media_id}?token={token}", self.public_url);
        Some((url, m.clone()))
    }

    // ---- inbound -----------------------------------------------------------------------

    /// Inject a customer message (control API). `body` is a message object in the network's
    /// shape plus `phone_number_id`, `from`, optional `profile_name`, `timestamp`,
    /// `media_base64`. Returns `{wamid, timestamp}`.
    pub fn inject_inbound(&self, mut body: Value) -> Result<Value, CtlError> {
        let obj = body
            .as_object_mut()
            .ok_or_else(|| CtlError::bad_request("body must be a JSON object"))?;
        let take_str = |o: &mut serde_json::Map<String, Value>, k: &str| {
            o.remove(k).and_then(|v| v.as_str().map(str::to_owned))
        };
        let pnid = take_str(obj, "phone_number_id")
            .ok_or_else(|| CtlError::bad_request("phone_number_id is required"))?;
        let from = digits(
            &obj.get("from")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| CtlError::bad_request("from is required"))?,
        );
        let profile_name = take_str(obj, "profile_name");
        let media_b64 = take_str(obj, "media_base64");
        let ts_override = obj.remove("timestamp").and_then(|t| match t {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        });
        let msg_type = obj
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| CtlError::bad_request("type is required"))?
            .to_owned();
        let media_bytes = match media_b64 {
            Some(b) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_err(|_| CtlError::bad_request("media_base64 is not valid base64"))?,
            ),
            None => None,
        };

        let mut st = self.lock();
        let number = st
            .numbers
            .get(&pnid)
            .cloned()
            .ok_or_else(|| CtlError::not_found(format!("unknown number {pnid}")))?;
        let wamid = st.wamid(&from, false);
        let ts = ts_override.unwrap_or_else(|| st.now_secs());
        obj.insert("from".into(), json!(from));
        obj.insert("id".into(), json!(wamid));
        obj.insert("timestamp".into(), json!(ts.to_string()));

        if matches!(
            msg_type.as_str(),
            "image" | "video" | "audio" | "document" | "sticker"
        ) {
            let default_mime = match msg_type.as_str() {
                "image" => "image/jpeg",
                "video" => "video/mp4",
                "audio" => "audio/ogg",
                "document" => "application/pdf",
                _ => "image/webp",
            };
            let media = obj.entry(msg_type.clone()).or_insert_with(|| json!({}));
            if !media.is_object() {
                return Err(CtlError::bad_request(format!(
                    "{msg_type} must be an object"
                )));
            }
            let mime = media
                .get("mime_type")
                .and_then(Value::as_str)
                .unwrap_or(default_mime)
                .to_owned();
            if media.get("id").is_none() {
                let bytes = media_bytes.map(Bytes::from).unwrap_or_else(|| {
                    Bytes::from(format!("simulated {msg_type} {wamid}").into_bytes())
                });
                let sha_b64 =
                    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(&bytes));
                let id = st.store_media(None, &mime, bytes);
                media["id"] = json!(id);
                media["sha256"] = json!(sha_b64);
                media["url"] = json!(format!("{}/_media/{id}", self.public_url));
            }
            media["mime_type"] = json!(mime);
        }
        if msg_type == "unsupported" && obj.get("errors").is_none() {
            obj.insert(
                "errors".into(),
                json!([webhook_error(
                    131051,
                    Some("Message type is currently not supported.")
                )]),
            );
        }
        if msg_type != "system" {
            st.windows.insert((pnid.clone(), from.clone()), ts);
        }
        st.inbound_wamids.push(wamid.clone());
        let name = profile_name
            .or_else(|| {
                st.recipients
                    .get(&from)
                    .and_then(|r| r.profile_name.clone())
            })
            .unwrap_or_else(|| format!("Customer {}", &from[from.len().saturating_sub(4)..]));
        st.recipients
            .entry(from.clone())
            .or_insert_with(|| RecipientSpec {
                wa_id: from.clone(),
                behaviour: Behaviour::Normal,
                fail_code: None,
                profile_name: Some(name.clone()),
            });
        drop(st);
        let contact = json!({"profile": {"name": name}, "wa_id": from});
        self.queue(
            &number,
            OutKind::Inbound {
                contact,
                message: body,
            },
        );
        Ok(json!({"wamid": wamid, "timestamp": ts.to_string()}))
    }

    // ---- templates -----------------------------------------------------------------------

    /// Store a template (from the Graph endpoint or the control API).
    pub fn insert_template(&self, seed: TemplateSeed) -> TemplateRec {
        let mut st = self.lock();
        let id = st.random_digits(15);
        let format = seed.parameter_format.unwrap_or_else(|| {
            // named if any {{name}} placeholder is not a number
            let named = seed.components.iter().any(|c| {
                c.get("text")
                    .and_then(Value::as_str)
                    .map(crate::validate::placeholders)
                    .is_some_and(|p| p.iter().any(|n| n.parse::<u32>().is_err()))
            });
            if named { "named" } else { "positional" }.to_owned()
        });
        let rec = TemplateRec {
            id,
            waba_id: seed.waba_id,
            name: seed.name,
            language: seed.language,
            category: seed.category.to_uppercase(),
            status: seed.status.to_uppercase(),
            parameter_format: format.to_lowercase(),
            components: seed.components,
            rejected_reason: None,
        };
        st.templates.push(rec.clone());
        rec
    }

    /// Schedule the automatic review of a freshly created template.
    pub fn schedule_review(self: &Arc<Self>, template_id: String) {
        let event = match self.args.template_review {
            ReviewMode::Approve => ("APPROVED", "NONE"),
            ReviewMode::Reject => ("REJECTED", "INVALID_FORMAT"),
            ReviewMode::Manual => return,
        };
        let delay = Duration::from_millis(self.args.template_review_delay_ms);
        let sim = Arc::clone(self);
        self.spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = sim.set_template_status(&template_id, event.0, Some(event.1.to_owned()));
        });
    }

    /// Change a template's status and send `message_template_status_update`.
    pub fn set_template_status(
        &self,
        id: &str,
        event: &str,
        reason: Option<String>,
    ) -> Result<TemplateRec, CtlError> {
        let event = event.to_uppercase();
        let new_status = match event.as_str() {
            "REINSTATED" | "UNARCHIVED" => "APPROVED",
            "FLAGGED" => "APPROVED", // flagged templates stay sendable until paused
            other => other,
        }
        .to_owned();
        let mut st = self.lock();
        let t = st
            .templates
            .iter_mut()
            .find(|t| t.id == id)
            .ok_or_else(|| CtlError::not_found(format!("unknown template {id}")))?;
        t.status = new_status;
        t.rejected_reason = (event == "REJECTED")
            .then(|| reason.clone().unwrap_or_else(|| "INVALID_FORMAT".into()));
        let rec = t.clone();
        let number = st
            .numbers
            .values()
            .find(|n| n.waba_id == rec.waba_id)
            .cloned();
        drop(st);
        let reason_value = match (&reason, event.as_str()) {
            (_, "PENDING_DELETION") => Value::Null,
            (Some(r), _) => json!(r),
            (None, _) => json!("NONE"),
        };
        let value = json!({
            "event": event,
            "message_template_id": rec.id.parse::<u64>().map(Value::from).unwrap_or(json!(rec.id)),
            "message_template_name": rec.name,
            "message_template_language": rec.language,
            "message_template_category": rec.category,
            "reason": reason_value,
        });
        // Template webhooks are per WABA; without a number the metadata is just unused.
        let number = number.unwrap_or_else(|| Number {
            id: String::new(),
            display_phone_number: String::new(),
            waba_id: rec.waba_id.clone(),
            access_token: String::new(),
            throughput_mps: 0,
            verified_name: String::new(),
            quality_rating: String::new(),
            status: String::new(),
            pair_burst: 0,
            pair_period_ms: 0,
        });
        self.queue(&number, OutKind::Template(value));
        Ok(rec)
    }
}

/// What a status webhook needs about its message.
struct StatusCtx {
    wamid: String,
    wa_id: String,
    biz: Option<String>,
    category: String,
    free: bool,
    conversation_id: String,
    failure: Option<(i64, Option<String>)>,
    number: Number,
}

pub fn unix_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}
