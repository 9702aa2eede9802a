//! Several `tern serve` processes share one PostgreSQL: start-up (migrations, the generated
//! master secret) is race-free and any instance accepts what another issued.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tern::config::Config;
use tern_store::Db;
use tokio::net::TcpListener;

async fn start(db: Db) -> (String, tokio::sync::oneshot::Sender<()>) {
    let config = Config::load(None).unwrap();
    db.migrate().await.unwrap();
    let key = tern::app::master_key(&db, &config).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = tern::app::state(db, key, &config);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(tern::app::serve_on(listener, state, async move {
        let _ = rx.await;
    }));
    (base, tx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_secret_and_cursors() {
    let db = tern_store::testkit::fresh_postgres().await;
    // Both instances start at once against the same schema.
    let ((a, stop_a), (b, stop_b)) = tokio::join!(start(db.clone()), start(db.clone()));
    let config = Config::load(None).unwrap();
    let key = tern::app::master_key(&db, &config).await.unwrap();
    let run = |args: &[&str]| {
        let cmd = tern::admin::parse(args).unwrap();
        let (db, key) = (db.clone(), key.clone());
        async move { tern::admin::run(&db, &key, cmd).await.unwrap() }
    };
    let org = run(&["org", "create", "--name", "Shared"]).await["id"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 0..3 {
        run(&[
            "number",
            "add",
            "--org",
            &org,
            "--phone-number-id",
            &format!("7{i}"),
            "--display-phone-number",
            &format!("+1415555020{i}"),
            "--waba-id",
            "w",
            "--access-token",
            "t",
        ])
        .await;
    }
    let m = run(&[
        "member", "add", "--org", &org, "--email", "a@b.co", "--role", "owner",
    ])
    .await["id"]
        .as_str()
        .unwrap()
        .to_string();
    let created = run(&[
        "key",
        "create",
        "--org",
        &org,
        "--member",
        &m,
        "--name",
        "k",
        "--preset",
        "read_only",
    ])
    .await;
    let api_key = created["key"].as_str().unwrap().to_string();
    let key_id = created["id"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let page1: serde_json::Value = http
        .get(format!("{a}/api/public/v1/phone-numbers?limit=2"))
        .bearer_auth(&api_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cursor = page1["next_cursor"].as_str().unwrap();
    // The cursor minted by instance A continues the list on instance B.
    let res = http
        .get(format!(
            "{b}/api/public/v1/phone-numbers?limit=2&cursor={cursor}"
        ))
        .bearer_auth(&api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let page2: serde_json::Value = res.json().await.unwrap();
    assert_eq!(page2["data"][0]["id"], "72");
    assert!(page2["next_cursor"].is_null());
    // A revoked key is refused by every instance at once (no per-instance key cache).
    run(&["key", "revoke", "--key-id", &key_id]).await;
    for base in [&a, &b] {
        let res = http
            .get(format!("{base}/api/public/v1/phone-numbers"))
            .bearer_auth(&api_key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401);
    }
    let _ = stop_a.send(());
    let _ = stop_b.send(());
    db.drop_test_schema().await.unwrap();
}
