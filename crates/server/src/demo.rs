//! `tern demo`: the whole product on one machine with nothing to set up. A fresh SQLite
//! database, a demo organisation with a connected number, and an API key are created, then
//! the server runs until Ctrl-C.

use crate::{admin, app, config::Config, telemetry};
use anyhow::{Context, Result, anyhow};
use clap::Args;
use serde_json::Value;
use tokio::net::TcpListener;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the API listens.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// Database to use; by default a fresh SQLite file in a temporary directory.
    #[arg(long)]
    pub database_url: Option<String>,
}

const DEMO_PNID: &str = "100000000000001";
const DEMO_DISPLAY: &str = "+14155550100";
const DEMO_WABA: &str = "200000000000001";
const DEMO_TOKEN: &str = "demo-access-token";

pub async fn run(mut config: Config, args: DemoArgs) -> Result<()> {
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    config.database_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", tmp.path().join("tern-demo.db").display()));
    config.listen = args.listen;
    config.public_url = format!("http://{}", args.listen);
    config.log_format = crate::config::LogFormat::Pretty;
    telemetry::init_logging(&config, "warn,tern=info");

    // The network is the simulator, in-process, calling back to this server.
    let app_secret = format!("demo-app-secret-{}", tern_domain::new_id().simple());
    let mut sim_args = tern_simulator::SimArgs::local(app_secret.clone());
    sim_args.callback_url = Some(format!("http://{}/webhooks/whatsapp", args.listen));
    let sim = tern_simulator::start(sim_args)
        .await
        .map_err(|e| anyhow!("cannot start the simulator: {e}"))?;
    sim.register_number(tern_simulator::NumberSpec {
        id: DEMO_PNID.into(),
        display_phone_number: DEMO_DISPLAY.into(),
        waba_id: DEMO_WABA.into(),
        access_token: DEMO_TOKEN.into(),
        throughput_mps: None,
        verified_name: Some("Demo Org".into()),
    })
    .map_err(|e| anyhow!("simulator: {e}"))?;
    config.graph_url = sim.base_url();
    config.app_secret = Some(app_secret);

    let db = app::open_db(&config).await?;
    let key = app::master_key(&db, &config).await?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;

    let run = |cmd: admin::AdminCmd| {
        let db = db.clone();
        let key = key.clone();
        async move { admin::run(&db, &key, cmd).await }
    };
    let org = run(admin::parse(&["org", "create", "--name", "Demo Org"])?).await?;
    let org_id = str_field(&org, "id")?;
    run(admin::parse(&[
        "number",
        "add",
        "--org",
        &org_id,
        "--phone-number-id",
        "100000000000001",
        "--display-phone-number",
        "+14155550100",
        "--waba-id",
        "200000000000001",
        "--access-token",
        "demo-access-token",
    ])?)
    .await?;
    let member = run(admin::parse(&[
        "member",
        "add",
        "--org",
        &org_id,
        "--email",
        "owner@demo.example",
        "--role",
        "owner",
    ])?)
    .await?;
    let member_id = str_field(&member, "id")?;
    let created = run(admin::parse(&[
        "key",
        "create",
        "--org",
        &org_id,
        "--member",
        &member_id,
        "--name",
        "demo",
        "--preset",
        "full_access",
    ])?)
    .await?;
    let api_key = str_field(&created, "key")?;
    let base = format!("http://{}", args.listen);
    println!("Tern demo is running at {base}");
    println!("Database: {}", config.database_url);
    println!();
    println!("API key (shown once): {api_key}");
    println!();
    println!("Try:");
    println!("  curl -s {base}/api/public/v1/phone-numbers -H 'Authorization: Bearer {api_key}'");
    println!();
    println!("API reference: {base}/docs/api   Errors: {base}/docs/errors");
    println!("Press Ctrl-C to stop.");
    app::serve_on(
        listener,
        app::state(db.clone(), key, &config),
        app::shutdown_signal(),
    )
    .await?;
    db.close().await;
    drop(tmp);
    Ok(())
}

fn str_field(v: &Value, name: &str) -> Result<String> {
    v[name]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("missing {name} in {v}"))
}
