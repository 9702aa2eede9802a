//! Configuration: `TERN_*` environment variables, optionally on top of a TOML file given
//! with `--config` whose keys are the same names in lower case without the prefix
//! (`database_url = "postgres://…"`). Everything is validated at start-up; a bad value
//! stops the process with a message naming the variable.

use anyhow::{Context, Result, anyhow, bail};
use figment::Figment;
use figment::providers::{Env, Format, Toml};
use ipnet::IpNet;
use serde::Deserialize;
use std::fmt::Display;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

#[derive(Debug, Default, Deserialize)]
struct Raw {
    database_url: Option<String>,
    listen: Option<String>,
    public_url: Option<String>,
    secret_key: Option<String>,
    graph_url: Option<String>,
    graph_version: Option<String>,
    app_secret: Option<String>,
    verify_token: Option<String>,
    redis_url: Option<String>,
    media_store: Option<String>,
    allow_networks: Option<String>,
    extra_ca_file: Option<String>,
    log: Option<String>,
    log_format: Option<String>,
    dispatch_unknown_grace_secs: Option<NumberOrText>,
    media_import_timeout_secs: Option<NumberOrText>,
    webhook_retry_schedule: Option<NumberOrText>,
    webhook_lease_secs: Option<NumberOrText>,
    webhook_send_nice: Option<NumberOrText>,
    webhook_busy_rest: Option<NumberOrText>,
    rate_limits: Option<String>,
    app_session_idle_secs: Option<NumberOrText>,
    app_session_max_secs: Option<NumberOrText>,
    app_invite_secs: Option<NumberOrText>,
    app_confirm_secs: Option<NumberOrText>,
    app_lockout_secs: Option<NumberOrText>,
    request_log_days: Option<NumberOrText>,
    max_connections: Option<NumberOrText>,
}

/// A numeric setting: figment reads `TERN_X=5` as a number and `x = "5"` as text.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(i64),
    Text(String),
}

impl NumberOrText {
    fn text(&self) -> String {
        match self {
            NumberOrText::Number(n) => n.to_string(),
            NumberOrText::Text(t) => t.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Pretty,
}

/// Validated configuration.
#[derive(Clone)]
pub struct Config {
    pub database_url: String,
    pub listen: SocketAddr,
    pub public_url: String,
    pub secret_key: Option<String>,
    pub graph_url: String,
    pub graph_version: String,
    pub app_secret: Option<String>,
    pub verify_token: Option<String>,
    pub redis_url: Option<String>,
    /// `TERN_RATE_LIMITS=off`: no request quotas, burst limiter or RateLimit headers (the
    /// plan allowances still hold). On by default.
    pub rate_limits: bool,
    /// `TERN_MEDIA_STORE`: `file://DIR` (default `file://./tern-media`) or
    /// `s3://BUCKET?endpoint=URL&region=R`.
    pub media_store: tern_core::media::Location,
    /// Deadline of one media URL import (`TERN_MEDIA_IMPORT_TIMEOUT_SECS`, default 30).
    pub media_import_timeout: std::time::Duration,
    pub allow_networks: Vec<IpNet>,
    pub extra_ca_file: Option<PathBuf>,
    pub log: String,
    pub log_format: LogFormat,
    /// How long a send whose outcome is unknown waits for the network's status webhook
    /// before the message fails (`TERN_DISPATCH_UNKNOWN_GRACE_SECS`, default 900).
    pub dispatch_unknown_grace: std::time::Duration,
    /// When failed event-webhook deliveries are tried again
    /// (`TERN_WEBHOOK_RETRY_SCHEDULE`, comma-separated seconds; default 5 s … 10 h).
    pub webhook_retry_schedule: tern_domain::events::RetrySchedule,
    /// How long a delivery claimed by a process is held before another may attempt it
    /// (`TERN_WEBHOOK_LEASE_SECS`, default 60; keep it above the 15 s delivery timeout, or
    /// a slow receiver may get an attempt twice).
    pub webhook_lease: std::time::Duration,
    /// The nice value of the threads that send event webhooks (`TERN_WEBHOOK_SEND_NICE`,
    /// 0–19, default 10): higher leaves more CPU to the API while deliveries run.
    pub webhook_send_nice: i32,
    /// While the API is busy, each database step of the delivery workers is followed by a
    /// rest of this many times its length (`TERN_WEBHOOK_BUSY_REST`, 0–1000, 0 = never):
    /// higher leaves more of the database to the API while deliveries run.
    pub webhook_busy_rest: u32,
    /// The app's durations (`TERN_APP_SESSION_IDLE_SECS`, `TERN_APP_SESSION_MAX_SECS`,
    /// `TERN_APP_INVITE_SECS`, `TERN_APP_CONFIRM_SECS`, `TERN_APP_LOCKOUT_SECS`; APP.md §7).
    pub people: tern_core::people::PeopleSettings,
    /// Days the request log keeps an entry (`TERN_REQUEST_LOG_DAYS`, 0–365, default 7;
    /// 0 = off: nothing recorded).
    pub request_log_days: u16,
    /// HTTP connections served at once (`TERN_MAX_CONNECTIONS`, 16–65536, default 512); more
    /// wait in the kernel's accept queue (`crate::connections`).
    pub max_connections: usize,
}

impl std::fmt::Debug for Config {
    // Secrets never reach logs, even at debug level.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact_url(&self.database_url))
            .field("listen", &self.listen)
            .field("public_url", &self.public_url)
            .field("graph_url", &self.graph_url)
            .field("graph_version", &self.graph_version)
            .field("redis_url", &self.redis_url.as_deref().map(redact_url))
            .field("rate_limits", &self.rate_limits)
            .field("media_store", &self.media_store)
            .field("allow_networks", &self.allow_networks)
            .field("people", &self.people)
            .field("request_log_days", &self.request_log_days)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// Hides a password in a connection URL.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://***@{}", &url[..s], &url[at + 1..]),
        _ => url.to_string(),
    }
}

impl Config {
    pub fn load(file: Option<&Path>) -> Result<Config> {
        let mut fig = Figment::new();
        if let Some(path) = file {
            if !path.exists() {
                bail!("config file {} does not exist", path.display());
            }
            fig = fig.merge(Toml::file(path));
        }
        fig = fig.merge(Env::prefixed("TERN_").filter(|k| !k.as_str().starts_with("test_")));
        let raw: Raw = fig
            .extract()
            .map_err(|e| anyhow!("invalid configuration: {e}"))?;
        Self::validate(raw)
    }

    fn validate(raw: Raw) -> Result<Config> {
        let people = people_settings(&raw)?;
        let database_url = raw
            .database_url
            .unwrap_or_else(|| "sqlite://tern.db".into());
        if !(database_url.starts_with("sqlite:")
            || database_url.starts_with("postgres://")
            || database_url.starts_with("postgresql://"))
        {
            bail!(
                "TERN_DATABASE_URL must be sqlite://PATH or postgres://…, got {:?}",
                redact_url(&database_url)
            );
        }
        let listen_raw = raw.listen.unwrap_or_else(|| "127.0.0.1:8080".into());
        let listen: SocketAddr = listen_raw.parse().map_err(|_| {
            anyhow!("TERN_LISTEN must be an address like 127.0.0.1:8080, got {listen_raw:?}")
        })?;
        let public_url = match raw.public_url {
            Some(u) => {
                check_http_url(&u).context("TERN_PUBLIC_URL")?;
                u.trim_end_matches('/').to_string()
            }
            None => format!("http://{listen}"),
        };
        if let Some(s) = &raw.secret_key
            && s.chars().count() < tern_domain::crypto::MIN_SECRET_LEN
        {
            bail!(
                "TERN_SECRET_KEY must be at least {} characters",
                tern_domain::crypto::MIN_SECRET_LEN
            );
        }
        let graph_url = raw
            .graph_url
            .unwrap_or_else(|| "https://graph.facebook.com".into());
        check_http_url(&graph_url).context("TERN_GRAPH_URL")?;
        let graph_version = raw.graph_version.unwrap_or_else(|| "v25.0".into());
        if !is_graph_version(&graph_version) {
            bail!("TERN_GRAPH_VERSION must look like v25.0, got {graph_version:?}");
        }
        for (name, v) in [
            ("TERN_APP_SECRET", &raw.app_secret),
            ("TERN_VERIFY_TOKEN", &raw.verify_token),
        ] {
            if v.as_deref().is_some_and(str::is_empty) {
                bail!("{name} must not be empty when set");
            }
        }
        if let Some(u) = &raw.redis_url
            && !(u.starts_with("redis://") || u.starts_with("rediss://"))
        {
            bail!("TERN_REDIS_URL must be redis://… or rediss://…");
        }
        let media_raw = raw
            .media_store
            .unwrap_or_else(|| "file://./tern-media".into());
        let media_store = tern_core::media::Location::parse(&media_raw)
            .map_err(|e| anyhow!("TERN_MEDIA_STORE: {e}"))?;
        let media_import_timeout = Duration::from_secs(whole(
            raw.media_import_timeout_secs.as_ref(),
            "TERN_MEDIA_IMPORT_TIMEOUT_SECS",
            ("of seconds", 1..=300),
            30,
        )?);
        let allow_networks = match raw.allow_networks.as_deref() {
            None | Some("") => Vec::new(),
            Some(list) => list
                .split(',')
                .map(|s| {
                    s.trim().parse::<IpNet>().map_err(|_| {
                        anyhow!(
                            "TERN_ALLOW_NETWORKS: {:?} is not a CIDR like 127.0.0.0/8",
                            s.trim()
                        )
                    })
                })
                .collect::<Result<_>>()?,
        };
        let extra_ca_file = match raw.extra_ca_file {
            None => None,
            Some(p) => {
                let text = std::fs::read_to_string(&p)
                    .map_err(|e| anyhow!("TERN_EXTRA_CA_FILE: cannot read {p}: {e}"))?;
                if !text.contains("-----BEGIN CERTIFICATE-----") {
                    bail!("TERN_EXTRA_CA_FILE: {p} holds no PEM certificate");
                }
                Some(PathBuf::from(p))
            }
        };
        let log_format = match raw.log_format.as_deref() {
            None | Some("json") => LogFormat::Json,
            Some("pretty") => LogFormat::Pretty,
            Some(other) => bail!("TERN_LOG_FORMAT must be json or pretty, got {other:?}"),
        };
        let dispatch_unknown_grace = Duration::from_secs(whole(
            raw.dispatch_unknown_grace_secs.as_ref(),
            "TERN_DISPATCH_UNKNOWN_GRACE_SECS",
            ("of seconds", 1..=7 * 24 * 3600),
            900,
        )?);
        let webhook_retry_schedule = match raw
            .webhook_retry_schedule
            .as_ref()
            .map(NumberOrText::text)
            .as_deref()
        {
            None => tern_domain::events::RetrySchedule::default(),
            Some(v) => tern_domain::events::RetrySchedule::parse(v).map_err(|e| {
                anyhow::anyhow!(
                    "TERN_WEBHOOK_RETRY_SCHEDULE must be comma-separated whole seconds, e.g. 5,300,1800: {e}"
                )
            })?,
        };
        let webhook_lease = Duration::from_secs(whole(
            raw.webhook_lease_secs.as_ref(),
            "TERN_WEBHOOK_LEASE_SECS",
            ("of seconds", 1..=3600),
            60,
        )?);
        let webhook_send_nice = whole(
            raw.webhook_send_nice.as_ref(),
            "TERN_WEBHOOK_SEND_NICE",
            ("", 0..=19),
            10,
        )?;
        let webhook_busy_rest = whole(
            raw.webhook_busy_rest.as_ref(),
            "TERN_WEBHOOK_BUSY_REST",
            ("", 0..=1000),
            tern_engine::webhooks::WebhookWorkerConfig::default().busy_rest,
        )?;
        let request_log_days = whole(
            raw.request_log_days.as_ref(),
            "TERN_REQUEST_LOG_DAYS",
            ("of days (0: off)", 0..=tern_core::request_log::MAX_DAYS),
            tern_core::request_log::DEFAULT_DAYS,
        )?;
        let max_connections = whole(
            raw.max_connections.as_ref(),
            "TERN_MAX_CONNECTIONS",
            ("", 16..=65_536),
            crate::connections::DEFAULT_MAX,
        )?;
        let rate_limits = match raw.rate_limits.as_deref().map(str::trim) {
            None | Some("on") => true,
            Some("off") => false,
            Some(v) => bail!("TERN_RATE_LIMITS must be on or off, got {v:?}"),
        };
        Ok(Config {
            people,
            request_log_days,
            max_connections,
            rate_limits,
            dispatch_unknown_grace,
            webhook_retry_schedule,
            webhook_lease,
            webhook_send_nice,
            webhook_busy_rest,
            database_url,
            listen,
            public_url,
            secret_key: raw.secret_key,
            graph_url: graph_url.trim_end_matches('/').to_string(),
            graph_version,
            app_secret: raw.app_secret,
            verify_token: raw.verify_token,
            redis_url: raw.redis_url,
            media_store,
            media_import_timeout,
            allow_networks,
            extra_ca_file,
            log: raw.log.unwrap_or_else(|| "info".into()),
            log_format,
        })
    }
}

/// A whole-number setting: `default` when unset, else a number within `range`. A bad value
/// stops start-up with "`name` must be a whole number `unit` from A to B" (`unit`: "of
/// seconds", or empty); every numeric setting reads through here, so they all say it alike.
fn whole<T>(
    v: Option<&NumberOrText>,
    name: &str,
    (unit, range): (&str, RangeInclusive<T>),
    default: T,
) -> Result<T>
where
    T: FromStr + PartialOrd + Display,
{
    let Some(v) = v.map(NumberOrText::text) else {
        return Ok(default);
    };
    match v.trim().parse::<T>() {
        Ok(n) if range.contains(&n) => Ok(n),
        _ => {
            let unit = if unit.is_empty() {
                String::new()
            } else {
                format!(" {unit}")
            };
            bail!(
                "{name} must be a whole number{unit} from {} to {}, got {v:?}",
                range.start(),
                range.end()
            )
        }
    }
}

/// Longest accepted app duration: ten years (no overflow in milliseconds, no surprise).
const MAX_APP_SECS: i64 = 10 * 365 * 86_400;

/// An app duration in milliseconds: `default_secs` when unset, else a whole number of
/// seconds from 1 to [`MAX_APP_SECS`].
fn app_secs(v: Option<&NumberOrText>, name: &str, default_secs: i64) -> Result<i64> {
    Ok(whole(v, name, ("of seconds", 1..=MAX_APP_SECS), default_secs)? * 1000)
}

fn people_settings(raw: &Raw) -> Result<tern_core::people::PeopleSettings> {
    let d = tern_core::people::PeopleSettings::default();
    Ok(tern_core::people::PeopleSettings {
        session_idle_ms: app_secs(
            raw.app_session_idle_secs.as_ref(),
            "TERN_APP_SESSION_IDLE_SECS",
            d.session_idle_ms / 1000,
        )?,
        session_max_ms: app_secs(
            raw.app_session_max_secs.as_ref(),
            "TERN_APP_SESSION_MAX_SECS",
            d.session_max_ms / 1000,
        )?,
        invite_ms: app_secs(
            raw.app_invite_secs.as_ref(),
            "TERN_APP_INVITE_SECS",
            d.invite_ms / 1000,
        )?,
        confirm_ms: app_secs(
            raw.app_confirm_secs.as_ref(),
            "TERN_APP_CONFIRM_SECS",
            d.confirm_ms / 1000,
        )?,
        lockout_ms: app_secs(
            raw.app_lockout_secs.as_ref(),
            "TERN_APP_LOCKOUT_SECS",
            d.lockout_ms / 1000,
        )?,
    })
}

fn check_http_url(u: &str) -> Result<()> {
    let rest = u
        .strip_prefix("https://")
        .or_else(|| u.strip_prefix("http://"))
        .ok_or_else(|| anyhow!("must start with http:// or https://, got {u:?}"))?;
    if rest.is_empty() || rest.starts_with('/') || rest.contains(char::is_whitespace) {
        bail!("is not a valid URL: {u:?}");
    }
    Ok(())
}

fn is_graph_version(v: &str) -> bool {
    v.strip_prefix('v')
        .and_then(|r| r.split_once('.'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = Config::validate(Raw::default()).unwrap();
        assert_eq!(c.database_url, "sqlite://tern.db");
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.public_url, "http://127.0.0.1:8080");
        assert_eq!(c.graph_url, "https://graph.facebook.com");
        assert_eq!(c.graph_version, "v25.0");
        assert_eq!((c.webhook_send_nice, c.webhook_busy_rest), (10, 19));
        assert_eq!(c.request_log_days, 7);
        assert_eq!(c.max_connections, 512);
        for (v, days) in [
            (NumberOrText::Number(0), 0),
            (NumberOrText::Text(" 365 ".into()), 365),
        ] {
            let raw = Raw {
                request_log_days: Some(v),
                ..Default::default()
            };
            assert_eq!(Config::validate(raw).unwrap().request_log_days, days);
        }
        // The contract's URL import limit (PD10).
        assert_eq!(c.media_import_timeout, std::time::Duration::from_secs(30));
        let rest = Raw {
            webhook_busy_rest: Some(NumberOrText::Text(" 0 ".into())),
            ..Default::default()
        };
        assert_eq!(Config::validate(rest).unwrap().webhook_busy_rest, 0);
        let p = &c.people;
        assert_eq!(
            (
                p.session_idle_ms,
                p.session_max_ms,
                p.invite_ms,
                p.confirm_ms,
                p.lockout_ms
            ),
            (43_200_000, 1_209_600_000, 604_800_000, 300_000, 900_000)
        );
        let short = Raw {
            app_session_idle_secs: Some(NumberOrText::Number(5)),
            app_lockout_secs: Some(NumberOrText::Text(" 2 ".into())),
            ..Default::default()
        };
        let p = Config::validate(short).unwrap().people;
        assert_eq!(
            (p.session_idle_ms, p.lockout_ms, p.invite_ms),
            (5_000, 2_000, 604_800_000)
        );
        assert_eq!(
            c.media_store,
            tern_core::media::Location::File(PathBuf::from("./tern-media"))
        );
    }

    #[test]
    fn bad_values_name_the_variable() {
        let cases: Vec<(Raw, &str)> = vec![
            (
                Raw {
                    listen: Some("nope".into()),
                    ..Default::default()
                },
                "TERN_LISTEN",
            ),
            (
                Raw {
                    rate_limits: Some("maybe".into()),
                    ..Default::default()
                },
                "TERN_RATE_LIMITS",
            ),
            (
                Raw {
                    database_url: Some("mysql://x".into()),
                    ..Default::default()
                },
                "TERN_DATABASE_URL",
            ),
            (
                Raw {
                    secret_key: Some("short".into()),
                    ..Default::default()
                },
                "TERN_SECRET_KEY",
            ),
            (
                Raw {
                    graph_version: Some("25".into()),
                    ..Default::default()
                },
                "TERN_GRAPH_VERSION",
            ),
            (
                Raw {
                    allow_networks: Some("10.0.0.0/8,bad".into()),
                    ..Default::default()
                },
                "TERN_ALLOW_NETWORKS",
            ),
            (
                Raw {
                    redis_url: Some("http://x".into()),
                    ..Default::default()
                },
                "TERN_REDIS_URL",
            ),
            (
                Raw {
                    media_store: Some("ftp://x".into()),
                    ..Default::default()
                },
                "TERN_MEDIA_STORE",
            ),
            (
                Raw {
                    public_url: Some("ftp://x".into()),
                    ..Default::default()
                },
                "TERN_PUBLIC_URL",
            ),
            (
                Raw {
                    extra_ca_file: Some("/nonexistent.pem".into()),
                    ..Default::default()
                },
                "TERN_EXTRA_CA_FILE",
            ),
            (
                Raw {
                    app_session_idle_secs: Some(NumberOrText::Number(0)),
                    ..Default::default()
                },
                "TERN_APP_SESSION_IDLE_SECS",
            ),
            (
                Raw {
                    app_session_max_secs: Some(NumberOrText::Text("soon".into())),
                    ..Default::default()
                },
                "TERN_APP_SESSION_MAX_SECS",
            ),
            (
                Raw {
                    app_invite_secs: Some(NumberOrText::Number(-1)),
                    ..Default::default()
                },
                "TERN_APP_INVITE_SECS",
            ),
            (
                Raw {
                    app_confirm_secs: Some(NumberOrText::Text("1.5".into())),
                    ..Default::default()
                },
                "TERN_APP_CONFIRM_SECS",
            ),
            (
                Raw {
                    app_lockout_secs: Some(NumberOrText::Number(MAX_APP_SECS + 1)),
                    ..Default::default()
                },
                "TERN_APP_LOCKOUT_SECS",
            ),
            (
                Raw {
                    dispatch_unknown_grace_secs: Some(NumberOrText::Number(0)),
                    ..Default::default()
                },
                "TERN_DISPATCH_UNKNOWN_GRACE_SECS",
            ),
            (
                Raw {
                    dispatch_unknown_grace_secs: Some(NumberOrText::Text("soon".into())),
                    ..Default::default()
                },
                "TERN_DISPATCH_UNKNOWN_GRACE_SECS",
            ),
            (
                Raw {
                    max_connections: Some(NumberOrText::Number(15)),
                    ..Default::default()
                },
                "TERN_MAX_CONNECTIONS",
            ),
            (
                Raw {
                    request_log_days: Some(NumberOrText::Number(366)),
                    ..Default::default()
                },
                "TERN_REQUEST_LOG_DAYS",
            ),
            (
                Raw {
                    request_log_days: Some(NumberOrText::Text("-1".into())),
                    ..Default::default()
                },
                "TERN_REQUEST_LOG_DAYS",
            ),
            (
                Raw {
                    webhook_send_nice: Some(NumberOrText::Number(20)),
                    ..Default::default()
                },
                "TERN_WEBHOOK_SEND_NICE",
            ),
            (
                Raw {
                    webhook_busy_rest: Some(NumberOrText::Number(1001)),
                    ..Default::default()
                },
                "TERN_WEBHOOK_BUSY_REST",
            ),
            (
                Raw {
                    webhook_busy_rest: Some(NumberOrText::Text("-1".into())),
                    ..Default::default()
                },
                "TERN_WEBHOOK_BUSY_REST",
            ),
        ];
        for (raw, name) in cases {
            let err = format!("{:#}", Config::validate(raw).err().unwrap());
            assert!(err.contains(name), "{err} should name {name}");
        }
    }

    #[test]
    fn numeric_settings_say_what_they_take() {
        let said = |raw: Raw| format!("{:#}", Config::validate(raw).err().unwrap());
        assert_eq!(
            said(Raw {
                media_import_timeout_secs: Some(NumberOrText::Text(" 301 ".into())),
                ..Default::default()
            }),
            "TERN_MEDIA_IMPORT_TIMEOUT_SECS must be a whole number of seconds from 1 to 300, \
             got \" 301 \""
        );
        assert_eq!(
            said(Raw {
                webhook_send_nice: Some(NumberOrText::Number(-1)),
                ..Default::default()
            }),
            "TERN_WEBHOOK_SEND_NICE must be a whole number from 0 to 19, got \"-1\""
        );
        assert_eq!(
            said(Raw {
                request_log_days: Some(NumberOrText::Text("a week".into())),
                ..Default::default()
            }),
            "TERN_REQUEST_LOG_DAYS must be a whole number of days (0: off) from 0 to 365, \
             got \"a week\""
        );
        // Whitespace around a good value is forgiven; the bounds are inclusive.
        let c = Config::validate(Raw {
            webhook_lease_secs: Some(NumberOrText::Text(" 3600 ".into())),
            max_connections: Some(NumberOrText::Number(16)),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(c.webhook_lease, Duration::from_secs(3600));
        assert_eq!(c.max_connections, 16);
    }

    #[test]
    fn redaction() {
        assert_eq!(
            redact_url("postgres://u:secret@h/db"),
            "postgres://***@h/db"
        );
        assert_eq!(redact_url("sqlite://x.db"), "sqlite://x.db");
    }
}
