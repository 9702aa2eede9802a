//! The guarded importer: fetches a customer-given https URL without letting it reach the
//! machine's own networks.
//!
//! - The URL (and every redirect target) passes [`Guard::check_url`]: https, no
//!   credentials, no forbidden address literal in any spelling.
//! - A host name is resolved by [`GuardedResolver`], which refuses the name when any of its
//!   addresses is forbidden; the client connects only to the addresses it returned, so a
//!   second DNS answer cannot rebind the name to a private address.
//! - Redirects are followed by hand, at most [`MAX_REDIRECTS`]; proxies from the
//!   environment are ignored (a proxy would connect on our behalf, unchecked).
//! - The whole fetch, body included, has one deadline (30 s by default).

use std::error::Error as StdError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::{StatusCode, Url};
use tern_domain::net_guard::{Guard, Refusal};

/// Redirects followed; one more is `too_many_redirects`.
pub const MAX_REDIRECTS: usize = 3;

/// Why a fetch did not produce a 2xx answer.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// The URL, a redirect target or a resolved address is not allowed.
    Refused {
        url: String,
        why: Refusal,
    },
    /// Connection, TLS or protocol failure.
    Failed(String),
    Status(u16),
    TooManyRedirects,
}

/// Builds the importer's HTTP client. `extra_roots_pem`: more trusted CAs (PEM bundle).
pub(crate) fn client(
    guard: Arc<Guard>,
    extra_roots_pem: Option<&[u8]>,
) -> Result<reqwest::Client, String> {
    let mut b = reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver { guard }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("Tern/", env!("CARGO_PKG_VERSION"), " media import"));
    if let Some(pem) = extra_roots_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| format!("cannot read the extra CA certificates: {e}"))?;
        b = b.tls_certs_merge(certs);
    }
    b.build()
        .map_err(|e| format!("cannot build the import client: {e}"))
}

/// GETs `url`, following up to [`MAX_REDIRECTS`] redirects, each target checked again.
pub(crate) async fn fetch(
    client: &reqwest::Client,
    guard: &Guard,
    url: Url,
) -> Result<reqwest::Response, FetchError> {
    let mut url = url;
    let mut hops = 0;
    loop {
        let resp = client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| match refusal_in(&e) {
                Some(why) => FetchError::Refused {
                    url: url.to_string(),
                    why,
                },
                None => FetchError::Failed(describe(&e)),
            })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        if !status.is_redirection() || status == StatusCode::NOT_MODIFIED {
            return Err(FetchError::Status(status.as_u16()));
        }
        let Some(next) = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|l| url.join(l).ok())
        else {
            return Err(FetchError::Status(status.as_u16()));
        };
        if hops == MAX_REDIRECTS {
            return Err(FetchError::TooManyRedirects);
        }
        hops += 1;
        url = guard
            .check_url(next.as_str())
            .map_err(|why| FetchError::Refused {
                url: next.to_string(),
                why,
            })?;
    }
}

/// The guard's refusal carried inside a client error, if that is why it failed.
fn refusal_in(e: &reqwest::Error) -> Option<Refusal> {
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
fn describe(e: &reqwest::Error) -> String {
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
