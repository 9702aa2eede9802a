//! `tern demo`: the whole product on one machine with nothing to set up. A fresh SQLite
//! database and the network simulator in-process; a demo organisation with a connected
//! number, wallet credit, an approved template (synced from the network) and an API key; the
//! background workers; and a customer who writes in, so a reply can be sent at once. Runs
//! until Ctrl-C.

use crate::{admin, app, config::Config, telemetry};
use anyhow::{Context, Result, anyhow};
use clap::Args;
use serde_json::Value;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the API listens.
    #[arg(long, env = "TERN_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// Database to use; by default a fresh SQLite file in a temporary directory.
    #[arg(long)]
    pub database_url: Option<String>,
}

const DEMO_PNID: &str = "100000000000001";
const DEMO_DISPLAY: &str = "+14155550100";
const DEMO_WABA: &str = "200000000000001";
const DEMO_TOKEN: &str = "demo-access-token";
const DEMO_TEMPLATE: &str = "order_shipped";
/// The customer who writes in when the demo starts.
const DEMO_CUSTOMER: &str = "14155550123";

pub async fn run(mut config: Config, args: DemoArgs) -> Result<()> {
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    config.database_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", tmp.path().join("tern-demo.db").display()));
    config.listen = args.listen;
    config.public_url = format!("http://{}", args.listen);
    config.log_format = crate::config::LogFormat::Pretty;
    config.media_store = tern_core::media::Location::File(tmp.path().join("media"));
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
    let listener = app::bind(args.listen).await?;

    let run = |cmd: admin::AdminCmd| {
        let db = db.clone();
        let key = key.clone();
        async move { admin::run(&db, &key, cmd).await }
    };
    let org = run(admin::parse(&["org", "create", "--name", "Demo Org"])?).await?;
    let org_id = str_field(&org, "id")?;
    // Credit for template messages (they debit the wallet by category).
    run(admin::parse(&[
        "org",
        "update",
        "--org",
        &org_id,
        "--wallet-balance-minor",
        "100000",
    ])?)
    .await?;
    run(admin::parse(&[
        "number",
        "add",
        "--org",
        &org_id,
        "--phone-number-id",
        DEMO_PNID,
        "--display-phone-number",
        DEMO_DISPLAY,
        "--waba-id",
        DEMO_WABA,
        "--access-token",
        DEMO_TOKEN,
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

    // An approved template on the network, brought in by the same sync `tern serve` runs.
    sim.seed_template(tern_simulator::TemplateSeed {
        waba_id: DEMO_WABA.into(),
        name: DEMO_TEMPLATE.into(),
        language: "en_US".into(),
        category: "UTILITY".into(),
        status: "APPROVED".into(),
        parameter_format: None,
        components: vec![serde_json::json!({
            "type": "BODY",
            "text": "Hi {{1}}, your order {{2}} has shipped.",
            "example": {"body_text": [["Ada", "A-1001"]]}
        })],
    });
    let state = app::try_state(db.clone(), key.clone(), &config)?;
    admin::run_with_cloud(
        &db,
        &key,
        Some(&state.core.cloud),
        admin::parse(&["template", "sync", "--org", &org_id])?,
    )
    .await?;

    let workers = app::Workers::start(&db, &state);
    let meter_done = state.core.requests.finished();
    let server = tokio::spawn(app::serve_on(listener, state, app::shutdown_signal()));
    // A customer writes in through the network, which opens the 24-hour window. (The port
    // is bound, so the simulator's webhook waits in the backlog if the server is not yet
    // accepting.)
    let base = format!("http://{}", args.listen);
    sim.inject_inbound(serde_json::json!({
        "phone_number_id": DEMO_PNID,
        "from": DEMO_CUSTOMER,
        "profile_name": "Ada Lovelace",
        "type": "text",
        "text": {"body": "Hi! Where is my order?"}
    }))
    .map_err(|e| anyhow!("simulator: {e}"))?;

    let auth = format!("-H 'Authorization: Bearer {api_key}'");
    println!("Tern demo is running at {base}");
    println!(
        "Database: {}   Network: the simulator at {}",
        config.database_url,
        sim.base_url()
    );
    println!();
    println!("API key (shown once): {api_key}");
    println!();
    let link = tern_core::people::sign_in_link_in(&db, "owner@demo.example")
        .await
        .map_err(|p| anyhow!("demo sign-in link: {p}"))?;
    println!(
        "The app: {base}/app — sign in as the demo owner (owner@demo.example) with this one-time link, valid 15 minutes:"
    );
    println!();
    println!("  {base}/app/link/{link}");
    println!();
    println!(
        "Ada (+{DEMO_CUSTOMER}) has just written in, so her 24-hour window is open. Send her a reply:"
    );
    println!();
    println!(
        "  curl -s {base}/api/public/v1/messages {auth} -H 'Idempotency-Key: demo-reply-1' \\\n    -H 'Content-Type: application/json' -d '{{\"to\": \"+{DEMO_CUSTOMER}\", \"type\": \"text\", \"text\": {{\"body\": \"Your order ships today.\"}}}}'"
    );
    println!();
    println!(
        "Then follow it from accepted to read (put the id from the answer in place of MESSAGE_ID):"
    );
    println!();
    println!("  curl -s {base}/api/public/v1/messages/MESSAGE_ID {auth}");
    println!();
    println!("A template reaches anyone, window or not:");
    println!();
    println!(
        "  curl -s {base}/api/public/v1/messages {auth} -H 'Idempotency-Key: demo-template-1' \\\n    -H 'Content-Type: application/json' -d '{{\"to\": \"+14155550124\", \"type\": \"template\", \"template\": {{\"name\": \"{DEMO_TEMPLATE}\", \"language\": \"en_US\", \"variables\": [\"Grace\", \"A-1002\"]}}}}'"
    );
    println!();
    // A picture to send: upload it, then send it by its media id.
    let photo = tmp.path().join("photo.jpg");
    let jpeg = tern_simulator::sample_media("image/jpeg", "demo")
        .ok_or_else(|| anyhow!("no sample JPEG"))?;
    std::fs::write(&photo, &jpeg).with_context(|| format!("cannot write {}", photo.display()))?;
    println!("Send her a picture: upload it, then send it by the media_id from the answer:");
    println!();
    println!(
        "  curl -s {base}/api/public/v1/media {auth} -F 'file=@{};type=image/jpeg'",
        photo.display()
    );
    println!(
        "  curl -s {base}/api/public/v1/messages {auth} -H 'Idempotency-Key: demo-image-1' \\\n    -H 'Content-Type: application/json' -d '{{\"to\": \"+{DEMO_CUSTOMER}\", \"type\": \"image\", \"image\": {{\"media_id\": \"MEDIA_ID\", \"caption\": \"Your parcel\"}}}}'"
    );
    println!();
    println!("  curl -s {base}/api/public/v1/conversations {auth}");
    println!();
    println!("Make Ada write again (the simulator plays the network and her phone):");
    println!();
    println!(
        "  curl -s {}/_sim/inbound -H 'Content-Type: application/json' \\\n    -d '{{\"phone_number_id\": \"{DEMO_PNID}\", \"from\": \"{DEMO_CUSTOMER}\", \"profile_name\": \"Ada Lovelace\", \"type\": \"text\", \"text\": {{\"body\": \"Thanks!\"}}}}'",
        sim.base_url()
    );
    println!();
    if args.database_url.is_none() {
        println!(
            "The demo's data (database and media) lives in {}, deleted when the demo stops;",
            tmp.path().display()
        );
        println!("give --database-url sqlite://PATH to keep the database.");
    } else {
        println!(
            "Media lives in {} (deleted when the demo stops); the database is yours to keep.",
            tmp.path().join("media").display()
        );
    }
    println!();
    println!("API reference: {base}/docs/api   Errors: {base}/docs/errors");
    println!("Press Ctrl-C to stop.");
    let served = server.await;
    workers.stop().await;
    app::settle_meter(meter_done).await;
    db.close().await;
    drop(tmp);
    served.map_err(|e| anyhow!("server task: {e}"))??;
    Ok(())
}

fn str_field(v: &Value, name: &str) -> Result<String> {
    v[name]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("missing {name} in {v}"))
}
