//! The accept path's yardstick (bench/send.sh with `BENCH_INSERT_PROBE=1`): the least an HTTP
//! service can do to accept a message durably — read the JSON body, one `INSERT` in the same
//! database engine with Tern's pool settings, answer `202` with the row's id. `POST
//! /messages` is compared against it on the same machine, backend and load, so the ratio
//! says what Tern's own work (authentication, quotas, meters, validation, idempotency, the
//! conversation, the event) costs on top of the database's floor.
//!
//! ```text
//! insert_probe --listen 127.0.0.1:PORT --database-url sqlite:///tmp/p.db|postgres://…
//! ```
//!
//! Same runtime (Tokio, one worker per core), the same pool sizes as `tern serve` (SQLite: 4
//! connections, WAL, `synchronous = NORMAL`; PostgreSQL: 6) and a row of the same order of
//! size as a message (id, key, recipient, body, the request, timestamps). Any other path
//! answers 404; a body that is not a JSON object answers 400.

use std::net::SocketAddr;
use std::str::FromStr as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Json};
use axum::routing::post;
use serde_json::{Value, json};
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{PgPool, SqlitePool};

#[derive(Clone)]
enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

const TABLE: &str = "CREATE TABLE IF NOT EXISTS probe_messages (id TEXT PRIMARY KEY, \
    idempotency_key TEXT, recipient TEXT NOT NULL, body TEXT, request TEXT NOT NULL, \
    status TEXT NOT NULL, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL)";

async fn accept(State(pool): State<Pool>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "not a JSON object"})),
        );
    };
    let id = uuid::Uuid::now_v7().to_string();
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let to = req.get("to").and_then(Value::as_str).unwrap_or_default();
    let text = req
        .get("text")
        .and_then(|t| t.get("body"))
        .and_then(Value::as_str);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let request = Value::Object(req.clone()).to_string();
    let insert = "INSERT INTO probe_messages (id, idempotency_key, recipient, body, request, \
        status, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 'accepted', $6, $6)";
    let done = match &pool {
        Pool::Sqlite(p) => sqlx::query(insert)
            .bind(&id)
            .bind(&key)
            .bind(to)
            .bind(text)
            .bind(&request)
            .bind(now)
            .execute(p)
            .await
            .map(|_| ()),
        Pool::Postgres(p) => sqlx::query(insert)
            .bind(&id)
            .bind(&key)
            .bind(to)
            .bind(text)
            .bind(&request)
            .bind(now)
            .execute(p)
            .await
            .map(|_| ()),
    };
    match done {
        Ok(()) => (
            StatusCode::ACCEPTED,
            Json(json!({"id": id, "status": "accepted"})),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": e.to_string()})),
        ),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usage = "usage: insert_probe --listen 127.0.0.1:PORT --database-url URL";
    let (mut listen, mut url) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => listen = args.next(),
            "--database-url" => url = args.next(),
            _ => return Err(usage.into()),
        }
    }
    let listen: SocketAddr = listen.ok_or(usage)?.parse()?;
    if !listen.ip().is_loopback() {
        return Err("loopback addresses only".into());
    }
    let url = url.ok_or(usage)?;
    let pool = if url.starts_with("sqlite:") {
        let options = SqliteConnectOptions::from_str(&url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5));
        Pool::Sqlite(
            SqlitePoolOptions::new()
                .max_connections(4)
                .test_before_acquire(false)
                .connect_with(options)
                .await?,
        )
    } else {
        Pool::Postgres(
            PgPoolOptions::new()
                .max_connections(6)
                .test_before_acquire(false)
                .connect(&url)
                .await?,
        )
    };
    match &pool {
        Pool::Sqlite(p) => sqlx::query(TABLE).execute(p).await.map(|_| ())?,
        Pool::Postgres(p) => sqlx::query(TABLE).execute(p).await.map(|_| ())?,
    }
    let app = Router::new()
        .route("/api/public/v1/messages", post(accept))
        .with_state(pool);
    let listener = tokio::net::TcpListener::bind(listen).await?;
    axum::serve(listener, app).await?;
    Ok(())
}
