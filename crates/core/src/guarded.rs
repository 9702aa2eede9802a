//! HTTP clients for customer-given URLs (media imports, event-webhook targets) that cannot
//! reach the machine's own networks: a resolver wrapper applies the address guard to every
//! address a name resolves to, and the client connects only to those, so a second DNS answer
//! cannot rebind the name. Literal addresses and redirect targets are the caller's to check
//! with [`Guard::check_url`]; redirects are never followed here and environment proxies are
//! ignored (a proxy would connect on our behalf, unchecked).

use std::error::Error as StdError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use tern_domain::net_guard::{Guard, Refusal};

/// A guarded client. `extra_roots_pem`: more trusted CAs (PEM bundle, `TERN_EXTRA_CA_FILE`).
pub(crate) fn client(
    guard: Arc<Guard>,
    extra_roots_pem: Option<&[u8]>,
    user_agent: &str,
) -> Result<reqwest::Client, String> {
    let mut b = reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver { guard }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(user_agent);
    if let Some(pem) = extra_roots_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| format!("cannot read the extra CA certificates: {e}"))?;
        b = b.tls_certs_merge(certs);
    }
    b.build()
        .map_err(|e| format!("cannot build a guarded HTTP client: {e}"))
}

/// The guard's refusal carried inside a client error, if that is why it failed.
pub(crate) fn refusal_in(e: &reqwest::Error) -> Option<Refusal> {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refused>() {
            return Some(r.0.clone());
        }
        cur = err.source();
    }
    None
}

/// The innermost cause, which names what failed (e.g. "connection refused").
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let mut last = e.to_string();
    let mut cur = e.source();
    while let Some(err) = cur {
        last = err.to_string();
        cur = err.source();
    }
    last
}

#[derive(Debug)]
struct Refused(Refusal);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl StdError for Refused {}

/// Resolves with the system resolver, then applies the guard to every address.
struct GuardedResolver {
    guard: Arc<Guard>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let guard = Arc::clone(&self.guard);
        Box::pin(async move {
            let host = name.as_str().to_string();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            // A name with any forbidden address is refused whole: it names the inside.
            for a in &addrs {
                guard
                    .check_ip(a.ip())
                    .map_err(|r| Box::new(Refused(r)) as Box<dyn StdError + Send + Sync>)?;
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}
