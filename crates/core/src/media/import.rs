//! The guarded importer: fetches a customer-given https URL without letting it reach the
//! machine's own networks.
//!
//! - The URL (and every redirect target) passes [`Guard::check_url`]: https, no
//!   credentials, no forbidden address literal in any spelling.
//! - A host name is resolved through [`crate::guarded`], which refuses the name when any of its
//!   addresses is forbidden; the client connects only to the addresses it returned, so a
//!   second DNS answer cannot rebind the name to a private address.
//! - Redirects are followed by hand, at most [`MAX_REDIRECTS`]; proxies from the
//!   environment are ignored (a proxy would connect on our behalf, unchecked).
//! - The whole fetch, body included, has one deadline (30 s by default).

use std::sync::Arc;

use reqwest::{StatusCode, Url};
use tern_domain::net_guard::{Guard, Refusal};

use crate::guarded;

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
    guarded::client(
        guard,
        extra_roots_pem,
        concat!("Tern/", env!("CARGO_PKG_VERSION"), " media import"),
    )
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
        let resp =
            client
                .get(url.clone())
                .send()
                .await
                .map_err(|e| match guarded::refusal_in(&e) {
                    Some(why) => FetchError::Refused {
                        url: url.to_string(),
                        why,
                    },
                    None => FetchError::Failed(guarded::describe(&e)),
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
