//! Command-line / embedding configuration.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// Review delay without magic recipients, in ms.
const DEFAULT_REVIEW_DELAY_MS: u64 = 200;

/// Options of `tern simulator` (also used by `tern demo` and tests, see [`SimArgs::local`]).
#[derive(clap::Args, Clone, Debug)]
pub struct SimArgs {
    /// Address to listen on (`127.0.0.1:0` picks a free port).
    #[arg(long, env = "TERN_SIM_LISTEN", default_value = "127.0.0.1:4010")]
    pub listen: SocketAddr,

    /// Where signed webhooks are POSTed (Tern's `/webhooks/whatsapp`). Can be set later
    /// through `PUT /_sim/callback`.
    #[arg(long, env = "TERN_SIM_CALLBACK_URL")]
    pub callback_url: Option<String>,

    /// App secret used for `X-Hub-Signature-256`.
    #[arg(long, env = "TERN_SIM_APP_SECRET")]
    pub app_secret: String,

    /// Verify token sent in the `hub.verify_token` handshake (`PUT /_sim/callback` with `verify`).
    #[arg(long, env = "TERN_SIM_VERIFY_TOKEN")]
    pub verify_token: Option<String>,

    /// Seed for ids and chaos choices (random when absent).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Base URL the simulator advertises in media URLs (default `http://<bound address>`).
    #[arg(long)]
    pub public_url: Option<String>,

    /// Pre-register a business number: `PNID:DISPLAY:WABA:TOKEN[:MPS]` (repeatable).
    #[arg(long = "number", value_name = "PNID:DISPLAY:WABA:TOKEN[:MPS]")]
    pub numbers: Vec<String>,

    /// Delay from acceptance to the `sent` status, in ms.
    #[arg(long, default_value_t = 50)]
    pub sent_delay_ms: u64,
    /// Delay from `sent` to `delivered`, in ms.
    #[arg(long, default_value_t = 100)]
    pub delivered_delay_ms: u64,
    /// Delay from `delivered` to `read`, in ms.
    #[arg(long, default_value_t = 200)]
    pub read_delay_ms: u64,

    /// Default throughput of a number, messages per second (network default 80).
    #[arg(long, default_value_t = 80)]
    pub default_mps: u32,
    /// Pair rate limit: messages to one recipient allowed in a burst.
    #[arg(long, default_value_t = 45)]
    pub pair_burst: u32,
    /// Pair rate limit: one message per this many ms to the same recipient (network: 6000).
    #[arg(long, default_value_t = 6000)]
    pub pair_period_ms: u64,

    /// Do not enforce the 24 h customer service window (131047).
    #[arg(long)]
    pub no_window: bool,

    /// What happens to newly created templates.
    #[arg(long, value_enum, default_value_t = ReviewMode::Approve)]
    pub template_review: ReviewMode,
    /// Delay before the automatic review result, in ms (default 200; 2000 with
    /// `--magic-recipients`).
    #[arg(long)]
    pub template_review_delay_ms: Option<u64>,

    /// The test network of Tern's test spaces: magic recipient numbers decide each send's
    /// outcome, the customer `@tern_test` exists, and created templates are reviewed by name
    /// (`reject_…` rejected, others approved). See `docs/simulator.md`.
    #[arg(long)]
    pub magic_recipients: bool,

    /// Probability (0..1) that a message's statuses are delivered in a shuffled order.
    #[arg(long, default_value_t = 0.0)]
    pub out_of_order: f64,
    /// Probability (0..1) that a webhook POST is delivered twice.
    #[arg(long, default_value_t = 0.0)]
    pub duplicate: f64,
    /// Collect events for this many ms and send them in one POST (0 = one event per POST).
    #[arg(long, default_value_t = 0)]
    pub batch_window_ms: u64,
    /// Maximum events per batched POST.
    #[arg(long, default_value_t = 100)]
    pub batch_max: usize,

    /// Attempts per webhook POST when the callback does not answer 200.
    #[arg(long, default_value_t = 6)]
    pub webhook_max_attempts: u32,
    /// First retry delay in ms (doubles each attempt, capped at 30 s).
    #[arg(long, default_value_t = 250)]
    pub webhook_retry_base_ms: u64,
    /// Timeout of one webhook POST, in ms.
    #[arg(long, default_value_t = 5000)]
    pub webhook_timeout_ms: u64,
}

impl SimArgs {
    /// Defaults for embedding: loopback, free port, fast statuses, no callback yet.
    pub fn local(app_secret: impl Into<String>) -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            callback_url: None,
            app_secret: app_secret.into(),
            verify_token: None,
            seed: None,
            public_url: None,
            numbers: Vec::new(),
            sent_delay_ms: 50,
            delivered_delay_ms: 100,
            read_delay_ms: 200,
            default_mps: 80,
            pair_burst: 45,
            pair_period_ms: 6000,
            no_window: false,
            template_review: ReviewMode::Approve,
            template_review_delay_ms: None,
            magic_recipients: false,
            out_of_order: 0.0,
            duplicate: 0.0,
            batch_window_ms: 0,
            batch_max: 100,
            webhook_max_attempts: 6,
            webhook_retry_base_ms: 250,
            webhook_timeout_ms: 5000,
        }
    }

    /// [`SimArgs::local`] with magic recipients on: the network of a Tern test space.
    pub fn test_space(app_secret: impl Into<String>) -> Self {
        Self {
            magic_recipients: true,
            ..Self::local(app_secret)
        }
    }

    /// The template review delay in effect.
    pub fn review_delay_ms(&self) -> u64 {
        self.template_review_delay_ms
            .unwrap_or(if self.magic_recipients {
                crate::magic::REVIEW_DELAY_MS
            } else {
                DEFAULT_REVIEW_DELAY_MS
            })
    }

    /// Check values clap cannot (probabilities, number specs).
    pub fn validate(&self) -> Result<Vec<NumberSpec>, String> {
        for (name, p) in [
            ("out-of-order", self.out_of_order),
            ("duplicate", self.duplicate),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("--{name} must be between 0 and 1"));
            }
        }
        if self.batch_max == 0 {
            return Err("--batch-max must be at least 1".into());
        }
        self.numbers
            .iter()
            .map(|s| NumberSpec::parse_cli(s, self.default_mps))
            .collect()
    }
}

/// Automatic template review.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewMode {
    /// PENDING → APPROVED after the review delay.
    Approve,
    /// PENDING → REJECTED (`INVALID_FORMAT`) after the review delay.
    Reject,
    /// Stays PENDING until `POST /_sim/templates/{id}/status`.
    Manual,
}

/// A business number registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumberSpec {
    /// phone_number_id (Graph node id).
    pub id: String,
    /// Human number, e.g. `+15550783881`.
    pub display_phone_number: String,
    pub waba_id: String,
    pub access_token: String,
    #[serde(default)]
    pub throughput_mps: Option<u32>,
    #[serde(default)]
    pub verified_name: Option<String>,
}

impl NumberSpec {
    fn parse_cli(s: &str, default_mps: u32) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let bad = || format!("--number {s:?}: expected PNID:DISPLAY:WABA:TOKEN[:MPS]");
        if !(4..=5).contains(&parts.len()) || parts[..4].iter().any(|p| p.is_empty()) {
            return Err(bad());
        }
        let mps = match parts.get(4) {
            Some(m) => m.parse().map_err(|_| bad())?,
            None => default_mps,
        };
        Ok(Self {
            id: parts[0].to_owned(),
            display_phone_number: parts[1].to_owned(),
            waba_id: parts[2].to_owned(),
            access_token: parts[3].to_owned(),
            throughput_mps: Some(mps),
            verified_name: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_spec_parses() {
        let mut a = SimArgs::local("s");
        a.numbers = vec!["1:+1555:9:tok".into(), "2:+1556:9:tok2:5".into()];
        let n = a.validate().unwrap();
        assert_eq!(n[0].throughput_mps, Some(80));
        assert_eq!(n[1].throughput_mps, Some(5));
        a.numbers = vec!["1:2".into()];
        assert!(a.validate().is_err());
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    #[test]
    fn magic_recipients_flag() {
        use clap::Parser as _;
        let c = Cli::try_parse_from(["sim", "--app-secret", "s"]).unwrap();
        assert!(!c.sim.magic_recipients);
        assert_eq!(c.sim.review_delay_ms(), 200);
        let c = Cli::try_parse_from(["sim", "--app-secret", "s", "--magic-recipients"]).unwrap();
        assert!(c.sim.magic_recipients);
        assert_eq!(c.sim.review_delay_ms(), 2000);
        let c = Cli::try_parse_from([
            "sim",
            "--app-secret",
            "s",
            "--magic-recipients",
            "--template-review-delay-ms",
            "5",
        ])
        .unwrap();
        assert_eq!(c.sim.review_delay_ms(), 5);
    }

    #[test]
    fn review_delay_depends_on_the_mode() {
        assert_eq!(SimArgs::local("s").review_delay_ms(), 200);
        let mut t = SimArgs::test_space("s");
        assert_eq!(t.review_delay_ms(), 2000);
        t.template_review_delay_ms = Some(10);
        assert_eq!(t.review_delay_ms(), 10);
    }
}
