//! What `tern listen` and `tern trigger` share: the public API's base from `--api-url`, the
//! HTTP client, and the message of an error answer.

use anyhow::{Result, bail};

/// The public API under the server's base URL (`--api-url`, as `TERN_PUBLIC_URL`).
pub fn public_base(api_url: &str) -> Result<String> {
    let url = api_url.trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        bail!("--api-url must be an http:// or https:// URL, got {api_url:?}");
    }
    Ok(format!("{url}{}", tern_api::PUBLIC_PREFIX))
}

pub fn http() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .user_agent(concat!("tern-cli/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()?)
}

/// The `message` of an error body, else the body itself (shortened).
pub fn problem_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| body.chars().take(200).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_base_is_under_the_public_prefix() {
        assert_eq!(
            public_base("http://localhost:8080/").unwrap(),
            "http://localhost:8080/api/public/v1"
        );
        assert!(public_base("localhost:8080").is_err());
    }
}
