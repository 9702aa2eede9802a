//! `tern trigger TYPE`: one sample event of TYPE for every subscription of the key's
//! organisation that lists it and every stream that wants it (`POST /events/trigger`).

use anyhow::{Result, bail};
use serde_json::{Value, json};

use crate::client;

#[derive(Debug, clap::Args)]
pub struct TriggerArgs {
    /// The event type, e.g. message.status.
    pub r#type: String,
    /// The server's base URL (as TERN_PUBLIC_URL), e.g. http://localhost:8080.
    #[arg(long, env = "TERN_API_URL")]
    pub api_url: String,
    /// An API key with developer.webhooks.manage.
    #[arg(long, env = "TERN_API_KEY", hide_env_values = true)]
    pub key: String,
}

/// Prints the server's answer (`{"event_id", "recipients"}`) as one JSON line.
pub async fn run(args: TriggerArgs) -> Result<()> {
    let base = client::public_base(&args.api_url)?;
    let res = client::http()?
        .post(format!("{base}/events/trigger"))
        .bearer_auth(&args.key)
        .json(&json!({"type": args.r#type}))
        .send()
        .await?;
    let status = res.status();
    let body = res.text().await?;
    if !status.is_success() {
        bail!(
            "the server answered {status}: {}",
            client::problem_message(&body)
        );
    }
    let v: Value = serde_json::from_str(&body)?;
    println!("{v}");
    Ok(())
}
