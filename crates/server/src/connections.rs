//! Serving HTTP connections: axum's router over hyper, with the connections bounded.
//!
//! Each open connection costs memory whether or not it carries a request (hyper's read and
//! write buffers, its task; about 27 KB kept alive, 34 KB with a webhook POST in flight,
//! measured in docs/performance.md), and the network opens one per POST in flight: a burst
//! of status webhooks at the top tier left 1,300–2,500 connections open for the rest of a
//! campaign. So the number served at once is bounded, as nginx's `worker_connections` is:
//! - at most `max` connections are served; the next ones wait in the kernel's accept queue
//!   (their requests are not read, so they cost Tern nothing) until one closes;
//! - from three quarters of `max` on, every HTTP/1 response says `Connection: close`, so
//!   connections turn over and those waiting get their turn instead of waiting for a
//!   kept-alive one to go idle;
//! - a connection that sends no request for [`IDLE`] is closed (hyper's header-read timeout,
//!   which also covers a slow first request).
//!
//! Shutdown is graceful, as with `axum::serve`: no new connections, each open one finishes
//! its request in flight, then the server returns.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt as _;

/// Connections served at once unless configured (`TERN_MAX_CONNECTIONS`).
pub const DEFAULT_MAX: usize = 512;
/// A connection without a request for this long is closed (hyper's default header-read
/// timeout, which applies to the wait between requests too).
pub const IDLE: Duration = Duration::from_secs(30);

/// Serves `router` on `listener` until `shutdown` completes, then drains the open
/// connections.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    max: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let max = max.max(1);
    let slots = Arc::new(Semaphore::new(max));
    // At or above this many open connections, responses close theirs.
    let shed_at = max - max / 4;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(IDLE);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Responses go out as soon as they are written; Nagle's algorithm would hold the
        // tail of a streamed response for the peer's delayed ACK.
        let _ = stream.set_nodelay(true);
        let open = Arc::clone(&slots);
        let service = router
            .clone()
            .map_request(move |req: Request<hyper::body::Incoming>| {
                let mut req = req.map(Body::new);
                // The peer address: the app's sessions page and sign-in limit read it.
                req.extensions_mut().insert(ConnectInfo(peer));
                req
            })
            .map_response(move |mut res: axum::response::Response| {
                if max - open.available_permits() >= shed_at {
                    res.headers_mut()
                        .insert(header::CONNECTION, HeaderValue::from_static("close"));
                }
                res
            });
        let conn = builder
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::trace!(%peer, error = %e, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
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
