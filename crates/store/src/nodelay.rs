//! TCP_NODELAY on the PostgreSQL connections. sqlx 0.9.0 opens its sockets without it (a
//! regression: transact-rs/sqlx#4335, fixed by #4336, not released as of 2026-11-27), so a
//! statement whose message outgrows the socket's first send buffer (about 16 KiB: a batch
//! of timeline entries, a group of accepted messages) goes out in two writes, and Nagle's
//! algorithm holds the second until the server's delayed ACK: 40 ms a statement, measured
//! as 42 ms per 100-row timeline insert in `bench/statuses.sh`. sqlx gives no access to its
//! socket, so after each new connection the process's sockets connected to a database port
//! get the option, through a duplicate of each descriptor (`pidfd_getfd`, safe code). The
//! option is the socket's, so the duplicate sets it for sqlx's descriptor too. Remove once
//! a sqlx release sets it again. Elsewhere than Linux this does nothing.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The database ports this process connects to over TCP.
static PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// Remembers a database port whose connections get TCP_NODELAY.
pub(crate) fn watch_port(port: u16) {
    PORTS.lock().unwrap_or_else(|e| e.into_inner()).insert(port);
}

/// Sets TCP_NODELAY on every socket of this process connected to a watched port that lacks
/// it; returns how many it set. Errors are skipped: a descriptor closed meanwhile, or one
/// that is not a TCP socket, is not ours to care about.
#[cfg(target_os = "linux")]
pub(crate) fn apply() -> usize {
    use rustix::net::sockopt::{set_tcp_nodelay, tcp_nodelay};

    let ports = PORTS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if ports.is_empty() {
        return 0;
    }
    sockets_to(|port| ports.contains(&port))
        .iter()
        .filter(|s| tcp_nodelay(s).is_ok_and(|on| !on) && set_tcp_nodelay(s, true).is_ok())
        .count()
}

/// Duplicates of this process's sockets whose peer's port `wanted` accepts (`pidfd_getfd`:
/// a descriptor number cannot be borrowed without unsafe code).
#[cfg(target_os = "linux")]
fn sockets_to(wanted: impl Fn(u16) -> bool) -> Vec<rustix::fd::OwnedFd> {
    use rustix::process::{PidfdFlags, PidfdGetfdFlags, getpid, pidfd_getfd, pidfd_open};

    let (Ok(pidfd), Ok(dir)) = (
        pidfd_open(getpid(), PidfdFlags::empty()),
        std::fs::read_dir("/proc/self/fd"),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        let Ok(dup) = pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()) else {
            continue;
        };
        let peer = rustix::net::getpeername(&dup)
            .ok()
            .flatten()
            .and_then(|addr| std::net::SocketAddr::try_from(addr).ok());
        if peer.is_some_and(|p| wanted(p.port())) {
            out.push(dup);
        }
    }
    out
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn apply() -> usize {
    0
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// This process's TCP sockets connected to `port`: whether each has TCP_NODELAY.
    fn sockets_to(port: u16) -> Vec<bool> {
        super::sockets_to(|p| p == port)
            .iter()
            .map(|s| rustix::net::sockopt::tcp_nodelay(s).expect("a TCP socket"))
            .collect()
    }

    #[tokio::test]
    async fn postgres_connections_have_tcp_nodelay() {
        let url =
            std::env::var("TERN_TEST_PG_URL").expect("TERN_TEST_PG_URL (scripts/test.sh sets it)");
        let db = crate::Db::connect_with(&url, Some(3))
            .await
            .expect("connect");
        let port = url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next()?.parse().ok())
            .unwrap_or(5432);
        // Three connections at once, so the pool opens more than its first.
        let (a, b, c) = tokio::join!(
            db.execute_test_sql("SELECT pg_sleep(0.05)"),
            db.execute_test_sql("SELECT pg_sleep(0.05)"),
            db.execute_test_sql("SELECT pg_sleep(0.05)"),
        );
        a.and(b).and(c).expect("queries");
        let sockets = sockets_to(port);
        assert!(sockets.len() >= 3, "{sockets:?}");
        assert!(sockets.iter().all(|on| *on), "{sockets:?}");
    }
}
