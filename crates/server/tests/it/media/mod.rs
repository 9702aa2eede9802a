//! Media end to end: uploads, imports through the guard, signed links, media messages
//! through the simulator, inbound media, S3. Every connection is to loopback.

mod downloads;
pub(crate) mod fixture;
mod imports;
mod inbound;
mod s3;
mod sends;
mod uploads;

use crate::common::{Backend, TestApp, send};
use fixture::FileServer;
use serde_json::Value;

/// An app that trusts the file server's CA; `allow` is `TERN_ALLOW_NETWORKS` (e.g.
/// `127.0.0.1/32`), empty for none.
pub async fn app_for(
    backend: Backend,
    files: &FileServer,
    allow: &str,
    timeout_secs: u64,
) -> TestApp {
    let ca = files.ca_file.path().to_path_buf();
    let allow: Vec<ipnet::IpNet> = allow
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    TestApp::builder(backend)
        .configure(move |c| {
            c.extra_ca_file = Some(ca);
            c.allow_networks = allow;
            c.media_import_timeout = std::time::Duration::from_secs(timeout_secs);
        })
        .start()
        .await
}

/// `POST /media` multipart with one part `file`.
pub async fn upload(
    app: &TestApp,
    key: &str,
    bytes: Vec<u8>,
    mime: Option<&str>,
    filename: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut part = reqwest::multipart::Part::bytes(bytes).file_name(filename.to_string());
    if let Some(m) = mime {
        part = part.mime_str(m).unwrap();
    }
    let form = reqwest::multipart::Form::new().part("file", part);
    send(
        app.http
            .post(app.url("/api/public/v1/media"))
            .bearer_auth(key)
            .multipart(form),
    )
    .await
}

/// `POST /media` `{"url"}`.
pub async fn import(
    app: &TestApp,
    key: &str,
    url: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    send(
        app.http
            .post(app.url("/api/public/v1/media"))
            .bearer_auth(key)
            .json(&serde_json::json!({"url": url})),
    )
    .await
}

/// The single field error's path of a 400 answer.
pub fn field_of(body: &Value) -> String {
    assert_eq!(body["code"], "validation_failed", "{body}");
    body["details"]["fields"][0]["field"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}
