use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use tern::{admin, app, config::Config, demo, listen, telemetry, trigger};

// mimalloc instead of glibc malloc: glibc's per-thread arenas (Tokio workers plus one thread
// per SQLite connection) kept peak RSS far above the live heap under load, and mimalloc is
// also faster on the request path's many small allocations. The `heap-profile` feature
// keeps the system allocator, whose calls a heap profiler (heaptrack) can see.
#[cfg(not(feature = "heap-profile"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Tern: a self-hosted business-messaging service for the WhatsApp Cloud API.
#[derive(Debug, Parser)]
#[command(name = "tern", version)]
struct Cli {
    /// Optional TOML file with the same settings as the TERN_* variables (lower case,
    /// without the prefix). Environment variables win.
    #[arg(long, global = true, env = "TERN_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run the API server and its background workers.
    Serve {
        /// Where the API listens (overrides TERN_LISTEN).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
    },
    /// Apply database migrations and exit.
    Migrate,
    /// Run everything on one machine: SQLite, the network simulator, a demo organisation.
    Demo(demo::DemoArgs),
    /// Operator provisioning; prints one JSON object.
    #[command(subcommand)]
    Admin(admin::AdminCmd),
    /// Print the public API's OpenAPI document.
    Openapi,
    /// Run the stand-alone Cloud-API-compatible network simulator (see docs/simulator.md).
    Simulator(tern_simulator::SimArgs),
    /// Print a server's events as they happen and forward them to a local URL, signed as
    /// Standard Webhooks (no public URL needed).
    Listen(listen::ListenArgs),
    /// Send a sample event of TYPE to the key's subscriptions and streams.
    Trigger(trigger::TriggerArgs),
}

fn main() -> ExitCode {
    tern::alloc::configure();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    if let Cmd::Openapi = cli.cmd {
        let doc = tern_api::openapi::finish(tern_api::routes::public_api().into_openapi());
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    if let Cmd::Simulator(args) = cli.cmd {
        tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_env_filter("info")
            .try_init()
            .ok();
        return tern_simulator::run(args, app::shutdown_signal())
            .await
            .map_err(Into::into);
    }
    // Clients of a server over HTTP: no configuration of their own.
    match cli.cmd {
        Cmd::Listen(args) => return listen::run(args).await,
        Cmd::Trigger(args) => return trigger::run(args).await,
        _ => {}
    }
    let mut config = Config::load(cli.config.as_deref())?;
    match cli.cmd {
        Cmd::Serve { listen } => {
            if let Some(listen) = listen {
                // The public URL follows the address unless it was set on its own.
                if config.public_url == format!("http://{}", config.listen) {
                    config.public_url = format!("http://{listen}");
                }
                config.listen = listen;
            }
            telemetry::init_logging(&config, &config.log);
            app::serve(config).await
        }
        Cmd::Migrate => {
            telemetry::init_logging(&config, "warn");
            let db = app::open_db(&config).await?;
            println!(
                "{}",
                serde_json::json!({"migrated": true, "backend": format!("{:?}", db.backend()).to_lowercase()})
            );
            Ok(())
        }
        Cmd::Demo(args) => demo::run(config, args).await,
        Cmd::Admin(cmd) => {
            telemetry::init_logging(&config, "warn");
            let db = app::open_db(&config).await?;
            let key = app::master_key(&db, &config).await?;
            let cloud = app::cloud_client(&config)?;
            let out = admin::run_configured(&db, &key, Some(&cloud), &config, cmd).await?;
            println!("{}", serde_json::to_string(&out)?);
            Ok(())
        }
        Cmd::Openapi | Cmd::Simulator(_) | Cmd::Listen(_) | Cmd::Trigger(_) => Ok(()),
    }
}
