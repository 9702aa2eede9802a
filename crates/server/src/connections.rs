//! Serving HTTP connections: axum's router over hyper, with the connections bounded.
//!
//! Each open connection costs memory whether or not it carries a request (hyper's read and
//! write buffers, its task; about 27 KB kept alive, 34 KB with a webhook POST in flight,
//! measured in docs/performance.md), and the network opens one per POST in flight: a burst
//! of status webhooks at the top tier left 1,300–2,500 connections open for the rest of a
//! campaign. So the number served at once is bounded, as nginx's `worker_connections` is:
//! - at most `max` connections are served; the next ones are still accepted at once and
//!   wait here, unread, in arrival order (a socket and its place in the queue: a few hundred
//!   bytes, not a connection's buffers) until one closes. Leaving them in the kernel's accept
//!   queue instead overflowed it in a burst (tens of thousands of handshakes dropped a
//!   minute), and a dropped handshake costs its client a second or more before it tries
//!   again: the network's webhooks arrived late and the API's own clients timed out.
//!   At most [`WAITING_PER_SLOT`] × `max` wait (fewer if the process's limit on open files
//!   would not leave [`FD_RESERVE`] for the rest); beyond that the kernel's queue holds them;
//! - while connections wait, every HTTP/1 response says `Connection: close`, so connections
//!   turn over and those waiting get their turn instead of waiting for a kept-alive one to
//!   go idle. Only then: a closed connection costs its client a new handshake, and closing
//!   from three quarters of `max` on (the first version) turned a busy minute into a storm
//!   of handshakes that took the CPU the intake needed;
//! - a connection that sends no request for [`IDLE`] is closed (hyper's header-read timeout,
//!   which also covers a slow first request).
//!
//! Shutdown is graceful, as with `axum::serve`: no new connections (those still waiting are
//! closed unread, as the kernel's queue would be), each open one finishes its request in
//! flight, then the server returns.

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt as _;

/// Connections served at once unless configured (`TERN_MAX_CONNECTIONS`).
pub const DEFAULT_MAX: usize = 512;
/// A connection without a request for this long is closed (hyper's default header-read
/// timeout, which applies to the wait between requests too).
pub const IDLE: Duration = Duration::from_secs(30);
/// Accepted connections that may wait for a slot, per slot.
pub const WAITING_PER_SLOT: usize = 8;
/// Open files kept for everything but waiting connections (the database, sends, media).
pub const FD_RESERVE: usize = 512;
/// The kernel's accept queue asked for on the API's port (Linux caps it at
/// `net.core.somaxconn`, 4096 by default): what waits beyond Tern's own queue.
pub const BACKLOG: u32 = 4096;

/// Connections served and waiting right now (`tern_http_connections{state}` in /metrics).
#[derive(Debug, Default)]
pub struct Counts {
    pub served: AtomicUsize,
    pub waiting: AtomicUsize,
}

impl Counts {
    fn publish(&self) {
        let (served, waiting) = (
            self.served.load(Ordering::Relaxed),
            self.waiting.load(Ordering::Relaxed),
        );
        metrics::gauge!("tern_http_connections", "state" => "served").set(served as f64);
        metrics::gauge!("tern_http_connections", "state" => "waiting").set(waiting as f64);
    }
}

/// Serves `router` on `listener` until `shutdown` completes, then drains the open
/// connections.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    max: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_counted(listener, router, max, Arc::default(), shutdown).await
}

/// [`serve`], keeping `counts` up to date.
pub async fn serve_counted(
    listener: TcpListener,
    router: Router,
    max: usize,
    counts: Arc<Counts>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max = max.max(1);
    let most_waiting = most_waiting(max);
    let slots = Arc::new(Semaphore::new(max));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE);
    let server = Server {
        router,
        builder,
        graceful: GracefulShutdown::new(),
        counts,
    };
    let mut waiting: VecDeque<(TcpStream, SocketAddr)> = VecDeque::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            // A slot is free and a connection waits for one: the oldest goes in.
            slot = Arc::clone(&slots).acquire_owned(), if !waiting.is_empty() => {
                let Ok(slot) = slot else { break };
                if let Some((stream, peer)) = waiting.pop_front() {
                    server.counts.waiting.fetch_sub(1, Ordering::Relaxed);
                    server.serve(slot, stream, peer);
                }
            }
            accepted = listener.accept(), if waiting.len() < most_waiting => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        accept_failed(e).await;
                        continue;
                    }
                };
                // Responses go out as soon as they are written; Nagle's algorithm would
                // hold the tail of a streamed response for the peer's delayed ACK.
                let _ = stream.set_nodelay(true);
                match Arc::clone(&slots).try_acquire_owned() {
                    Ok(slot) if waiting.is_empty() => server.serve(slot, stream, peer),
                    _ => {
                        waiting.push_back((stream, peer));
                        server.counts.waiting.fetch_add(1, Ordering::Relaxed);
                        server.counts.publish();
                    }
                }
            }
        }
    }
    drop(listener);
    server
        .counts
        .waiting
        .fetch_sub(waiting.len(), Ordering::Relaxed);
    drop(waiting);
    server.counts.publish();
    server.graceful.shutdown().await;
    Ok(())
}

/// How many accepted connections may wait: [`WAITING_PER_SLOT`] a slot, within the open
/// files the process may have (its soft limit) less the served ones and [`FD_RESERVE`].
fn most_waiting(max: usize) -> usize {
    let files = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    waiting_within(max, files)
}

/// [`most_waiting`] for a limit of `files` open files (`None`: unlimited); at least one,
/// because the loop accepts only while the queue has room (a limit of 1,024 files with 512
/// slots leaves none, and nothing would be accepted at all).
fn waiting_within(max: usize, files: Option<u64>) -> usize {
    let by_slots = max.saturating_mul(WAITING_PER_SLOT);
    let by_files = match files {
        Some(files) => usize::try_from(files)
            .unwrap_or(usize::MAX)
            .saturating_sub(max.saturating_add(FD_RESERVE)),
        None => by_slots,
    };
    by_slots.min(by_files).max(1)
}

struct Server {
    router: Router,
    builder: auto::Builder<TokioExecutor>,
    graceful: GracefulShutdown,
    counts: Arc<Counts>,
}

impl Server {
    /// Serves one connection in a task of its own, holding `slot` until it closes.
    fn serve(&self, slot: OwnedSemaphorePermit, stream: TcpStream, peer: SocketAddr) {
        let counts = Arc::clone(&self.counts);
        let service = self
            .router
            .clone()
            .map_request(move |req: Request<hyper::body::Incoming>| {
                let mut req = req.map(Body::new);
                // The peer address: the app's sessions page and sign-in limit read it.
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            })
            .map_response(move |mut res: axum::response::Response| {
                if counts.waiting.load(Ordering::Relaxed) > 0 {
                    res.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                res
            });
        let conn = self
            .builder
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
            .into_owned();
        let conn = self.graceful.watch(conn);
        let counts = Arc::clone(&self.counts);
        counts.served.fetch_add(1, Ordering::Relaxed);
        counts.publish();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::trace!(%peer, error = %e, "connection ended with an error");
            }
            counts.served.fetch_sub(1, Ordering::Relaxed);
            counts.publish();
            drop(slot);
        });
    }
}

/// As `axum::serve`: a failed accept that concerns one connection is skipped; any other
/// (too many open files, out of memory) is logged and retried after a second.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waiting_queue_fits_the_open_file_limit_and_never_closes() {
        assert_eq!(waiting_within(512, None), 4096);
        assert_eq!(waiting_within(512, Some(20_000)), 4096);
        // 2,048 files: 512 served and 512 kept for the rest leave 1,024 to wait.
        assert_eq!(waiting_within(512, Some(2048)), 1024);
        // A common default of 1,024 leaves none; one may still wait, so accepting goes on.
        assert_eq!(waiting_within(512, Some(1024)), 1);
        assert_eq!(waiting_within(512, Some(64)), 1);
    }
}
