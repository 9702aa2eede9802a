//! `tern demo`: the whole product on one machine with nothing to set up, in test mode. A
//! fresh SQLite database; a demo organisation with an owner and a **test key**, whose test
//! space has a number answered by Tern's built-in test network (the simulator, in-process,
//! with its magic recipients); a template submitted to that network (approved about 2 s
//! later); the background workers; and a customer who writes in through `POST
//! /test/inbound`'s path, so a reply can be sent at once. Nothing reaches WhatsApp and
//! nothing is charged. Runs until Ctrl-C.

use crate::test_network::SimNetwork;
use crate::{admin, app, config::Config, telemetry};
use anyhow::{Context, Result, anyhow};
use clap::Args;
use serde_json::{Value, json};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the API listens.
    #[arg(long, env = "TERN_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// Database to use; by default a fresh SQLite file in a temporary directory.
    #[arg(long)]
    pub database_url: Option<String>,
}

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

    let db = app::open_db(&config).await?;
    let key = app::master_key(&db, &config).await?;
    let listener = app::bind(args.listen).await?;
    // The test network: the simulator, in-process, calling back to this server.
    let network = SimNetwork::start(&key, &config.graph_version).await?;
    network.call_back(args.listen);

    let run = |cmd: admin::AdminCmd| {
        let db = db.clone();
        let key = key.clone();
        async move { admin::run(&db, &key, cmd).await }
    };
    let org = run(admin::parse(&["org", "create", "--name", "Demo Org"])?).await?;
    let org_id = str_field(&org, "id")?;
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
        "--mode",
        "test",
    ])?)
    .await?;
    let api_key = str_field(&created, "key")?;

    let state = app::try_state_with(db.clone(), key.clone(), &config, Some(network.clone()))?;
    let principal = tern_core::principal::from_record(
        &db,
        db.find_auth_by_hash(&tern_domain::auth::hash_key(&api_key))
            .await?,
    )
    .map_err(|p| anyhow!("demo key: {p}"))?;
    let number = tern_core::test_space::number(&db, principal.org_id)
        .await
        .map_err(|p| anyhow!("demo number: {p}"))?
        .ok_or_else(|| anyhow!("the demo's test space has no number"))?;

    let workers = app::Workers::start(&db, &state);
    let meter_done = state.core.requests.finished();
    let core = state.core.clone();
    let server = tokio::spawn(app::serve_on(listener, state, app::shutdown_signal()));
    // A template, submitted to the test network, which approves it about 2 s later.
    let template = tern_core::templates::create(
        &core,
        &principal,
        tern_core::templates::NewTemplate {
            waba_id: number.waba_id.clone(),
            name: DEMO_TEMPLATE.into(),
            language: "en_US".into(),
            category: tern_domain::template::Category::Utility,
            components: json!([{
                "type": "BODY",
                "text": "Hi {{1}}, your order {{2}} has shipped.",
                "example": {"body_text": [["Ada", "A-1001"]]}
            }]),
        },
    )
    .await
    .map_err(|p| anyhow!("demo template: {p}"))?;
    tern_core::templates::submit(&core, &principal, template.id)
        .await
        .map_err(|p| anyhow!("demo template: {p}"))?;
    // A customer writes in through the test network, which opens the 24-hour window. (The
    // port is bound, so the network's webhook waits in the backlog until the server
    // accepts.)
    let base = format!("http://{}", args.listen);
    tern_core::test_space::inbound(
        &core,
        &principal,
        &json!({"from": DEMO_CUSTOMER, "profile_name": "Ada Lovelace", "type": "text",
            "text": {"body": "Hi! Where is my order?"}}),
    )
    .await
    .map_err(|p| anyhow!("demo customer: {p}"))?;

    let auth = format!("-H 'Authorization: Bearer {api_key}'");
    println!("Tern demo is running at {base}");
    println!("Database: {}", config.database_url);
    println!();
    println!(
        "This demo runs in TEST MODE: the key below is a test key (tern_test_…). Its number, {}, \
         is answered by Tern's built-in test network: nothing reaches WhatsApp and nothing is \
         charged. Recipients such as +1 555 013 1026 (undeliverable) or +1 555 000 0002 (never \
         read) produce each outcome on purpose: see docs/test-mode.md.",
        number.display_phone_number
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
    println!(
        "A template reaches anyone, window or not (the test network approves it about 2 s after the demo starts):"
    );
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
    println!("Make Ada write again (the test network plays her phone):");
    println!();
    println!(
        "  curl -s {base}/api/public/v1/test/inbound {auth} -H 'Idempotency-Key: demo-inbound-1' \\\n    -H 'Content-Type: application/json' -d '{{\"from\": \"{DEMO_CUSTOMER}\", \"type\": \"text\", \"text\": {{\"body\": \"Thanks!\"}}}}'"
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
