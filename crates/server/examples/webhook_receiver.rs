//! A loopback HTTPS receiver for the event-webhook benchmark (bench/webhooks.sh,
//! bench/send.sh with BENCH_WEBHOOK_SUBS): answers `204` to every POST, whatever its path,
//! and records per request the `webhook-id` header, the body's `type` and `created_at`, the
//! time it arrived (ms) and the URL path.
//!
//! ```text
//! webhook_receiver --https 127.0.0.1:PORT --http 127.0.0.1:PORT --ca-out FILE [--threads N] [--h2]
//! ```
//!
//! * `--https`: where deliveries arrive. A CA and a leaf certificate (for 127.0.0.1 and
//!   localhost) are generated with rcgen at start; the CA's PEM is written to `--ca-out`
//!   (give it to tern as `TERN_EXTRA_CA_FILE`) before either port listens.
//!   Only HTTP/1.1 is offered (ALPN), connections are kept alive; `--h2` offers HTTP/2 too.
//! * `--http` (plain HTTP, for the script): `GET /stats` → JSON (below), `GET /count` →
//!   requests recorded (cheap, to poll), `POST /reset` forgets everything recorded.
//! * `--threads`: worker threads of the runtime (default 2).
//!
//! `/stats`: `count` requests; `distinct_ids` webhook-ids; `distinct_deliveries` distinct
//! (webhook-id, path) pairs; `duplicates` = count − distinct_deliveries; `paths` distinct
//! paths, `per_path_min`/`per_path_max` requests per path; `bad` requests without a
//! webhook-id/-timestamp/-signature or whose body has no RFC 3339 `created_at`;
//! `latency_ms` {p50, p95, p99, max, min} of arrival − created_at (nearest rank);
//! `first_created_ms` (earliest created_at), `first_recv_ms`, `last_recv_ms`;
//! `per_s` = count / (last_recv − first_created); `types` requests per event type.
//!
//! Loopback addresses only: anything else is refused at start.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Json};
use axum::routing::{get, post};
use axum_server::tls_rustls::RustlsConfig;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde::Deserialize;

struct Record {
    id: Box<str>,
    path: u32,
    kind: u16,
    created_ms: Option<i64>,
    recv_ms: i64,
    signed: bool,
}

#[derive(Default)]
struct Log {
    records: Vec<Record>,
    paths: HashMap<Box<str>, u32>,
    kinds: HashMap<Box<str>, u16>,
}

type Shared = Arc<Mutex<Log>>;

#[derive(Deserialize)]
struct Body<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    created_at: Option<std::borrow::Cow<'a, str>>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn rfc3339_ms(s: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

async fn hook(
    State(log): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let recv_ms = now_ms();
    if method != Method::POST {
        return StatusCode::METHOD_NOT_ALLOWED;
    }
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok());
    let id = h("webhook-id").unwrap_or("");
    let signed = !id.is_empty()
        && h("webhook-timestamp").is_some()
        && h("webhook-signature").is_some_and(|s| s.starts_with("v1,"));
    let parsed: Option<Body<'_>> = serde_json::from_slice(&body).ok();
    let created_ms = parsed
        .as_ref()
        .and_then(|b| b.created_at.as_deref())
        .and_then(rfc3339_ms);
    let kind = parsed
        .as_ref()
        .and_then(|b| b.kind.as_deref())
        .unwrap_or("?");
    let mut g = log
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let next = u32::try_from(g.paths.len()).unwrap_or(u32::MAX);
    let path = *g.paths.entry(uri.path().into()).or_insert(next);
    let next = u16::try_from(g.kinds.len()).unwrap_or(u16::MAX);
    let kind = *g.kinds.entry(kind.into()).or_insert(next);
    g.records.push(Record {
        id: id.into(),
        path,
        kind,
        created_ms,
        recv_ms,
        signed,
    });
    StatusCode::NO_CONTENT
}

/// One delivery as copied out for the stats: id, path, kind, created_at, received, signed.
type Row = (Box<str>, u32, u16, Option<i64>, i64, bool);

async fn stats(State(log): State<Shared>) -> impl IntoResponse {
    // Copy out what is needed, so deliveries are not held up while sorting.
    let (rows, kinds): (Vec<Row>, Vec<(Box<str>, u16)>) = {
        let g = log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (
            g.records
                .iter()
                .map(|r| {
                    (
                        r.id.clone(),
                        r.path,
                        r.kind,
                        r.created_ms,
                        r.recv_ms,
                        r.signed,
                    )
                })
                .collect(),
            g.kinds.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        )
    };
    let count = rows.len();
    let mut ids: HashSet<&str> = HashSet::with_capacity(count);
    let mut pairs: HashSet<(&str, u32)> = HashSet::with_capacity(count);
    let mut per_path: HashMap<u32, u64> = HashMap::new();
    let mut per_kind: HashMap<u16, u64> = HashMap::new();
    let mut lat: Vec<i64> = Vec::with_capacity(count);
    let mut bad = 0u64;
    let (mut first_created, mut first_recv, mut last_recv) = (i64::MAX, i64::MAX, i64::MIN);
    for (id, path, kind, created, recv, signed) in &rows {
        ids.insert(id);
        pairs.insert((id, *path));
        *per_path.entry(*path).or_default() += 1;
        *per_kind.entry(*kind).or_default() += 1;
        first_recv = first_recv.min(*recv);
        last_recv = last_recv.max(*recv);
        match created {
            Some(c) if *signed => {
                first_created = first_created.min(*c);
                lat.push(recv - c);
            }
            _ => bad += 1,
        }
    }
    lat.sort_unstable();
    let rank = |p: f64| -> Option<i64> {
        if lat.is_empty() {
            return None;
        }
        let i = ((p / 100.0 * lat.len() as f64).ceil() as usize).max(1) - 1;
        Some(lat[i.min(lat.len() - 1)])
    };
    let span_ms = last_recv.saturating_sub(first_created);
    let per_s = (count > 0 && first_created != i64::MAX && span_ms > 0)
        .then(|| (count as f64) * 1000.0 / (span_ms as f64));
    let types: serde_json::Map<String, serde_json::Value> = kinds
        .iter()
        .filter_map(|(k, v)| per_kind.get(v).map(|n| (k.to_string(), (*n).into())))
        .collect();
    let opt = |v: i64, none: i64| (v != none).then_some(v);
    Json(serde_json::json!({
        "count": count,
        "distinct_ids": ids.len(),
        "distinct_deliveries": pairs.len(),
        "duplicates": count - pairs.len(),
        "paths": per_path.len(),
        "per_path_min": per_path.values().min(),
        "per_path_max": per_path.values().max(),
        "bad": bad,
        "latency_ms": {
            "p50": rank(50.0), "p95": rank(95.0), "p99": rank(99.0),
            "max": lat.last(), "min": lat.first(),
        },
        "first_created_ms": opt(first_created, i64::MAX),
        "first_recv_ms": opt(first_recv, i64::MAX),
        "last_recv_ms": opt(last_recv, i64::MIN),
        "per_s": per_s,
        "types": types,
    }))
}

async fn count(State(log): State<Shared>) -> String {
    let g = log
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    g.records.len().to_string()
}

async fn reset(State(log): State<Shared>) -> StatusCode {
    let mut g = log
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    g.records = Vec::new();
    StatusCode::NO_CONTENT
}

struct Args {
    https: SocketAddr,
    http: SocketAddr,
    ca_out: std::path::PathBuf,
    threads: usize,
    h2: bool,
}

fn args() -> Result<Args, String> {
    let usage = "usage: webhook_receiver --https 127.0.0.1:PORT --http 127.0.0.1:PORT --ca-out FILE [--threads N] [--h2]";
    let (mut https, mut http, mut ca_out, mut threads, mut h2) = (None, None, None, 2, false);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{a} needs a value\n{usage}"))
        };
        match a.as_str() {
            "--https" => https = Some(value()?),
            "--http" => http = Some(value()?),
            "--ca-out" => ca_out = Some(std::path::PathBuf::from(value()?)),
            "--threads" => {
                threads = value()?
                    .parse()
                    .map_err(|_| "--threads must be a number".to_string())?;
            }
            "--h2" => h2 = true,
            _ => return Err(format!("unknown argument {a:?}\n{usage}")),
        }
    }
    let addr = |s: Option<String>, what: &str| -> Result<SocketAddr, String> {
        let s = s.ok_or_else(|| format!("{what} is required\n{usage}"))?;
        let a: SocketAddr = s
            .parse()
            .map_err(|_| format!("{what}: {s:?} is not an address"))?;
        if !a.ip().is_loopback() {
            return Err(format!("{what}: {a} is not a loopback address"));
        }
        Ok(a)
    };
    Ok(Args {
        https: addr(https, "--https")?,
        http: addr(http, "--http")?,
        ca_out: ca_out.ok_or_else(|| format!("--ca-out is required\n{usage}"))?,
        threads: threads.max(1),
        h2,
    })
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(serve(args)) {
        eprintln!("webhook_receiver: {e}");
        std::process::exit(1);
    }
}

async fn serve(args: Args) -> Result<(), String> {
    let e = |what: &'static str| move |err: &dyn std::fmt::Display| format!("{what}: {err}");
    let ca_key = KeyPair::generate().map_err(|x| e("CA key")(&x))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|x| e("CA")(&x))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Tern bench receiver CA");
    let ca_cert = ca_params.self_signed(&ca_key).map_err(|x| e("CA")(&x))?;
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().map_err(|x| e("leaf key")(&x))?;
    let leaf = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "::1".to_string(),
    ])
    .map_err(|x| e("leaf")(&x))?
    .signed_by(&leaf_key, &issuer)
    .map_err(|x| e("leaf")(&x))?;
    let tls = RustlsConfig::from_pem(
        leaf.pem().into_bytes(),
        leaf_key.serialize_pem().into_bytes(),
    )
    .await
    .map_err(|x| e("TLS config")(&x))?;
    if !args.h2 {
        // HTTP/1.1 only (ALPN), as many receivers are.
        let mut cfg = (*tls.get_inner()).clone();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        tls.reload_from_config(Arc::new(cfg));
    }
    let tmp = args.ca_out.with_extension("tmp");
    std::fs::write(&tmp, ca_cert.pem()).map_err(|x| e("writing the CA")(&x))?;
    std::fs::rename(&tmp, &args.ca_out).map_err(|x| e("writing the CA")(&x))?;

    let log: Shared = Arc::default();
    let hooks = Router::new().fallback(hook).with_state(Arc::clone(&log));
    let control = Router::new()
        .route("/stats", get(stats))
        .route("/count", get(count))
        .route("/reset", post(reset))
        .with_state(log);
    let listener = std::net::TcpListener::bind(args.https).map_err(|x| e("--https")(&x))?;
    listener
        .set_nonblocking(true)
        .map_err(|x| e("--https")(&x))?;
    let https = axum_server::from_tcp_rustls(listener, tls).map_err(|x| e("--https")(&x))?;
    let plain = tokio::net::TcpListener::bind(args.http)
        .await
        .map_err(|x| e("--http")(&x))?;
    let deliveries = tokio::spawn(https.serve(hooks.into_make_service()));
    let stats = tokio::spawn(async move { axum::serve(plain, control).await });
    tokio::select! {
        r = deliveries => r.map_err(|x| e("https")(&x))?.map_err(|x| e("https")(&x)),
        r = stats => r.map_err(|x| e("http")(&x))?.map_err(|x| e("http")(&x)),
    }
}
