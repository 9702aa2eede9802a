//! A file server for import tests (and a webhook receiver for delivery tests): HTTPS on loopback with a certificate from a test CA
//! (written to a PEM file the app trusts through `TERN_EXTRA_CA_FILE`). Every address it
//! listens on or redirects to is loopback: tests never connect anywhere else.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum_server::tls_rustls::RustlsConfig;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::sync::Semaphore;

/// A JPEG's first bytes (enough for the type check), padded to `len` bytes.
pub fn jpeg(len: usize) -> Vec<u8> {
    let mut v = vec![
        0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10, b'J', b'F', b'I', b'F', 0x00,
    ];
    v.resize(len, 0x5A);
    v
}

pub fn png(len: usize) -> Vec<u8> {
    let mut v = vec![
        0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D,
    ];
    v.resize(len, 0);
    v
}

pub fn pdf(len: usize) -> Vec<u8> {
    let mut v = b"%PDF-1.7\n".to_vec();
    v.resize(len, b' ');
    v
}

/// An MP4 (`ftyp isom`), also fine as audio/mp4.
pub fn mp4(len: usize) -> Vec<u8> {
    let mut v = vec![0, 0, 0, 0x18];
    v.extend_from_slice(b"ftypisom");
    v.resize(len, 0);
    v
}

pub fn ogg(len: usize) -> Vec<u8> {
    let mut v = b"OggS\x00\x02".to_vec();
    v.resize(len, 0);
    v
}

pub fn webp(len: usize) -> Vec<u8> {
    let mut v = b"RIFF\x00\x01\x00\x00WEBPVP8 ".to_vec();
    v.resize(len, 0);
    v
}

/// Deliveries a receiver got: headers and body of each.
pub type Received = Arc<Mutex<Vec<(HeaderMap, Vec<u8>)>>>;

pub struct FileServer {
    pub addr: SocketAddr,
    /// PEM of the CA that signed the server's certificate.
    pub ca_file: tempfile::NamedTempFile,
    /// Requests to `/hold` wait for a permit (tests release them).
    pub hold: Arc<Semaphore>,
    /// Requests to `/hold` that arrived.
    pub held: Arc<AtomicUsize>,
    /// What `/hook/{status}` received: headers and body of each request.
    pub hooks: Received,
    /// Requests to `/paced-hook` in progress, and the most at once so far.
    pub paced: Arc<(AtomicUsize, AtomicUsize)>,
    handle: axum_server::Handle<SocketAddr>,
}

#[derive(Clone)]
struct St {
    port: u16,
    hold: Arc<Semaphore>,
    held: Arc<AtomicUsize>,
    hooks: Received,
    paced: Arc<(AtomicUsize, AtomicUsize)>,
    /// Requests so far per `/flaky/{name}`.
    flaky: Arc<Mutex<std::collections::HashMap<String, u32>>>,
}

impl FileServer {
    pub async fn start() -> FileServer {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Tern test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "127.0.0.2".to_string(),
            "::1".to_string(),
        ])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
        let ca_file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(ca_file.path(), ca_cert.pem()).unwrap();
        let tls = RustlsConfig::from_pem(
            leaf.pem().into_bytes(),
            leaf_key.serialize_pem().into_bytes(),
        )
        .await
        .unwrap();
        // 0.0.0.0 is not used: 127.0.0.1 serves, and 127.0.0.2 (also loopback) is reached
        // only through a second listener on the same port when a test wants it.
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        std_listener.set_nonblocking(true).unwrap();
        let addr = std_listener.local_addr().unwrap();
        let hold = Arc::new(Semaphore::new(0));
        let held = Arc::new(AtomicUsize::new(0));
        let hooks: Received = Arc::new(Mutex::new(Vec::new()));
        let paced = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let st = St {
            port: addr.port(),
            hold: Arc::clone(&hold),
            held: Arc::clone(&held),
            hooks: Arc::clone(&hooks),
            paced: Arc::clone(&paced),
            flaky: Arc::default(),
        };
        let app = Router::new()
            .route("/file/{len}", get(file))
            .route("/pdf/{len}", get(pdf_file))
            .route("/untyped/{len}", get(untyped))
            .route("/redirect/{n}", get(redirect))
            .route("/redirect-to/{host}", get(redirect_to))
            .route("/status/{code}", get(status))
            .route("/slow", get(slow).post(slow))
            .route("/hold", get(held_file))
            .route("/lying", get(lying))
            .route("/hook/{status}", axum::routing::post(hook))
            .route("/answer/{status}", axum::routing::post(answer))
            .route("/flaky/{name}/{n}", axum::routing::post(flaky))
            .route("/hold-hook", axum::routing::post(hold_hook))
            .route("/paced-hook", axum::routing::post(paced_hook))
            .with_state(st);
        let handle = axum_server::Handle::new();
        let h = handle.clone();
        tokio::spawn(async move {
            axum_server::from_tcp_rustls(std_listener, tls)
                .unwrap()
                .handle(h)
                .serve(app.into_make_service_with_connect_info::<SocketAddr>())
                .await
                .unwrap();
        });
        handle.listening().await.unwrap();
        FileServer {
            addr,
            ca_file,
            hold,
            held,
            hooks,
            paced,
            handle,
        }
    }

    /// `https://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    pub fn stop(&self) {
        self.handle.shutdown();
    }
}

fn jpeg_response(len: usize) -> Response {
    ([(header::CONTENT_TYPE, "image/jpeg")], jpeg(len)).into_response()
}

async fn file(Path(len): Path<usize>) -> Response {
    jpeg_response(len)
}

async fn pdf_file(Path(len): Path<usize>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/pdf"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"menu.pdf\"",
            ),
        ],
        pdf(len),
    )
        .into_response()
}

async fn untyped(Path(len): Path<usize>) -> Response {
    jpeg(len).into_response()
}

/// `n` more redirects, then a 1 KiB JPEG.
async fn redirect(State(st): State<St>, Path(n): Path<u32>) -> Response {
    let next = if n <= 1 {
        format!("https://127.0.0.1:{}/file/1024", st.port)
    } else {
        format!("/redirect/{}", n - 1)
    };
    (StatusCode::FOUND, [(header::LOCATION, next)]).into_response()
}

/// A redirect to another loopback host on the same port.
async fn redirect_to(State(st): State<St>, Path(host): Path<String>) -> Response {
    let next = format!("https://{host}:{}/file/1024", st.port);
    (StatusCode::FOUND, [(header::LOCATION, next)]).into_response()
}

async fn status(Path(code): Path<u16>) -> Response {
    StatusCode::from_u16(code)
        .unwrap_or(StatusCode::IM_A_TEAPOT)
        .into_response()
}

async fn slow() -> Response {
    tokio::time::sleep(Duration::from_secs(10)).await;
    jpeg_response(1024)
}

async fn held_file(State(st): State<St>) -> Response {
    st.held.fetch_add(1, Ordering::SeqCst);
    let permit = st.hold.acquire().await.unwrap();
    permit.forget();
    jpeg_response(1024)
}

/// Records the delivery and answers `status` (a 503 with `Retry-After: 7`, a 302 to `/`).
async fn hook(
    State(st): State<St>,
    Path(status): Path<u16>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<SocketAddr>,
    mut headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    headers.insert("x-test-path", format!("/hook/{status}").parse().unwrap());
    // Which connection it came on (keep-alive checks).
    headers.insert("x-test-peer", peer.to_string().parse().unwrap());
    st.hooks.lock().unwrap().push((headers, body.to_vec()));
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT);
    match status {
        503 => (code, [(header::RETRY_AFTER, "7")]).into_response(),
        302 => (code, [(header::LOCATION, "/hook/200")]).into_response(),
        _ => code.into_response(),
    }
}

/// A webhook receiver that answers `status` with a 2 KiB body starting with markup (the
/// delivery log keeps its first 1 KiB, escaped on the page).
async fn answer(Path(status): Path<u16>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT);
    let body = format!("<b>refused</b>{}", "x".repeat(2048));
    (code, body).into_response()
}

/// A webhook receiver that fails: the first `n` requests to `/flaky/{name}/{n}` are
/// answered 500, the rest 204. Each is recorded, with its path in `x-test-path`.
async fn flaky(
    State(st): State<St>,
    Path((name, n)): Path<(String, u32)>,
    mut headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let seen = {
        let mut m = st.flaky.lock().unwrap();
        let c = m.entry(name.clone()).or_insert(0);
        *c += 1;
        *c
    };
    headers.insert("x-test-path", format!("/flaky/{name}/{n}").parse().unwrap());
    st.hooks.lock().unwrap().push((headers, body.to_vec()));
    if seen <= n {
        StatusCode::INTERNAL_SERVER_ERROR.into_response()
    } else {
        StatusCode::NO_CONTENT.into_response()
    }
}

/// A webhook receiver that hangs: each request counts in `held` and waits for a permit of
/// `hold` (tests release them), then is recorded and answered 204.
async fn hold_hook(
    State(st): State<St>,
    mut headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    st.held.fetch_add(1, Ordering::SeqCst);
    let permit = st.hold.acquire().await.unwrap();
    permit.forget();
    headers.insert("x-test-path", "/hold-hook".parse().unwrap());
    st.hooks.lock().unwrap().push((headers, body.to_vec()));
    StatusCode::NO_CONTENT.into_response()
}

/// A webhook receiver that takes a little while over each request (`204` after 20 ms) and
/// counts how many it has at once (`FileServer::paced`).
async fn paced_hook(
    State(st): State<St>,
    mut headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let (now, peak) = &*st.paced;
    let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
    peak.fetch_max(at_once, Ordering::SeqCst);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    headers.insert("x-test-path", "/paced-hook".parse().unwrap());
    st.hooks.lock().unwrap().push((headers, body.to_vec()));
    now.fetch_sub(1, Ordering::SeqCst);
    StatusCode::NO_CONTENT.into_response()
}

/// Says JPEG, sends a PDF.
async fn lying() -> Response {
    ([(header::CONTENT_TYPE, "image/jpeg")], pdf(2048)).into_response()
}

pub fn gif(len: usize) -> Vec<u8> {
    let mut v = b"GIF89a\x01\x00\x01\x00".to_vec();
    v.resize(len, 0);
    v
}
