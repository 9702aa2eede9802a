//! The bound on connections served at once (`tern::connections`). It sits below the router
//! and touches no database, so it runs once, on a router of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::routing::get;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[derive(Clone)]
struct Held {
    inside: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    release: watch::Receiver<bool>,
}

/// Holds each request until released, counting those inside at once.
async fn hold(State(h): State<Held>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> String {
    let now = h.inside.fetch_add(1, Ordering::SeqCst) + 1;
    h.most.fetch_max(now, Ordering::SeqCst);
    let mut release = h.release.clone();
    let _ = release.wait_for(|r| *r).await;
    h.inside.fetch_sub(1, Ordering::SeqCst);
    peer.to_string()
}

/// A router whose `GET /hold` waits until `true` is sent, counting the requests inside.
fn holding_router() -> (Router, Held, watch::Sender<bool>) {
    let (release_tx, release) = watch::channel(false);
    let held = Held {
        inside: Arc::default(),
        most: Arc::default(),
        release,
    };
    let router = Router::new()
        .route("/hold", get(hold))
        .with_state(held.clone());
    (router, held, release_tx)
}

/// `n` clients, connected one after another, each with its `GET /hold` sent.
async fn holders(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut clients = Vec::new();
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /hold HTTP/1.1\r\nhost: tern\r\n\r\n")
            .await
            .unwrap();
        clients.push(s);
    }
    clients
}

/// One HTTP/1.1 response read off `stream`: its head (lower-cased) and body.
async fn response(stream: &mut TcpStream) -> (String, String) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed before a whole response: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let head = text[..end].to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            if text.len() >= end + 4 + len {
                return (head, text[end + 4..end + 4 + len].to_string());
            }
        }
    }
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_their_turn_and_are_all_answered() {
    const MAX: usize = 16;
    const CLIENTS: usize = 40;
    let (router, held, release_tx) = holding_router();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(tern::connections::serve(
        listener,
        router,
        MAX,
        async move {
            let _ = stop_rx.await;
        },
    ));

    // Every client connects and sends its request at once; the kernel completes each
    // handshake, so all 40 requests are on their way.
    let mut clients = holders(addr, CLIENTS).await;
    // The first MAX are taken in and held; the rest wait unread.
    for _ in 0..500 {
        if held.inside.load(Ordering::SeqCst) == MAX {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(held.inside.load(Ordering::SeqCst), MAX);
    // Room for a wrong implementation to take in more before the count is read again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(held.most.load(Ordering::SeqCst), MAX);

    // Released: every client is answered, the peer address reaches the handler, and the
    // responses given while others waited close their connections, which lets the waiting
    // ones in.
    release_tx.send(true).unwrap();
    let mut closed = 0;
    for s in &mut clients {
        let (head, body) = response(s).await;
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert_eq!(body, s.local_addr().unwrap().to_string());
        if head.contains("connection: close") {
            closed += 1;
        }
    }
    assert!(held.most.load(Ordering::SeqCst) <= MAX);
    assert!(closed >= MAX, "{closed} responses closed their connection");

    // Once the crowd has gone, connections are kept alive again.
    drop(clients);
    let mut kept = false;
    for _ in 0..200 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /hold HTTP/1.1\r\nhost: tern\r\n\r\n")
            .await
            .unwrap();
        let (head, _) = response(&mut s).await;
        if !head.contains("connection: close") {
            kept = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(kept, "a lone connection was closed after its response");

    let _ = stop_tx.send(());
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_crowd_beyond_the_kernels_accept_queue_is_taken_off_it_and_waits_in_order() {
    const MAX: usize = 4;
    // As many as may wait: the served ones and a full queue of Tern's own.
    const CLIENTS: usize = MAX + MAX * tern::connections::WAITING_PER_SLOT;
    let (router, held, release_tx) = holding_router();
    // A kernel accept queue of two: without Tern's own queue the fourth client or so would
    // not even complete its handshake while the first MAX are held.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(2).unwrap();
    let addr = listener.local_addr().unwrap();
    let counts = Arc::new(tern::connections::Counts::default());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(tern::connections::serve_counted(
        listener,
        router,
        MAX,
        Arc::clone(&counts),
        async move {
            let _ = stop_rx.await;
        },
    ));

    // One after another, each waiting for its handshake: all of them get through although
    // the first MAX hold their slots. (Bounded: a server that leaves them to the kernel
    // would keep this waiting for the handshakes' retries, minutes in all.)
    let clients = tokio::time::timeout(Duration::from_secs(60), holders(addr, CLIENTS))
        .await
        .expect("every client completes its handshake");
    let counted = || {
        (
            counts.served.load(Ordering::SeqCst),
            counts.waiting.load(Ordering::SeqCst),
        )
    };
    for _ in 0..500 {
        if counted() == (MAX, CLIENTS - MAX) && held.inside.load(Ordering::SeqCst) == MAX {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(counted(), (MAX, CLIENTS - MAX));
    assert_eq!(held.inside.load(Ordering::SeqCst), MAX);

    // Released: every client is answered, with its own address; nothing waits any more.
    release_tx.send(true).unwrap();
    let mut clients = clients;
    for s in &mut clients {
        let (head, body) = response(s).await;
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert_eq!(body, s.local_addr().unwrap().to_string());
    }
    assert_eq!(held.most.load(Ordering::SeqCst), MAX);
    assert_eq!(counts.waiting.load(Ordering::SeqCst), 0);
    drop(clients);
    let _ = stop_tx.send(());
    server.await.unwrap().unwrap();
    assert_eq!(counted(), (0, 0));
}
