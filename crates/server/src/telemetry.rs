//! Logs and metrics set-up.

use crate::config::{Config, LogFormat};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;
use tracing_subscriber::EnvFilter;

/// Structured logs on stderr (stdout is reserved for command output such as admin JSON).
pub fn init_logging(config: &Config, default_filter: &str) {
    let filter = std::env::var("TERN_LOG")
        .ok()
        .map(|_| config.log.clone())
        .unwrap_or_else(|| default_filter.to_string());
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never in files or pipes.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // A second initialisation (tests start several servers) is harmless and ignored.
    let _ = match config.log_format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}

/// How often histogram samples are folded into their summaries.
const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The process-wide Prometheus recorder; installed once, shared by every server started
/// in this process.
pub fn metrics_handle() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            let installed = metrics::set_global_recorder(recorder).ok().map(|_| handle);
            if let Some(h) = &installed {
                spawn_upkeep(h.clone());
            }
            installed
        })
        .clone()
}

/// A recorder built this way keeps every histogram sample until something drains it: only a
/// scrape of `/metrics` did, so a server nobody scraped grew by 8 bytes per sample (several
/// per message sent, gigabytes a day at the 1,000 mps tier). A thread of its own, as the
/// recorder may be built before or outside any runtime.
fn spawn_upkeep(handle: PrometheusHandle) {
    let spawned = std::thread::Builder::new()
        .name("tern-metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_INTERVAL);
                handle.run_upkeep();
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "metrics upkeep thread not started; histograms drain only when scraped");
    }
}
