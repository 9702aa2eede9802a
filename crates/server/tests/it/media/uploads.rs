//! POST /media uploads, GET /media/{id}, the signed link (Range, tampering, expiry),
//! deduplication and expiry.

use super::fixture::{gif, jpeg, png};
use super::*;
use crate::common::assert_error;
use sha2::{Digest, Sha256};
use tern_domain::auth::Preset;
use tern_domain::crypto::Purpose;

const MIB: usize = 1024 * 1024;

async fn fetch(app: &TestApp, url: &str, range: Option<&str>) -> reqwest::Response {
    let mut req = app.http.get(url);
    if let Some(r) = range {
        req = req.header("Range", r);
    }
    req.send().await.unwrap()
}

/// A link Tern would sign, with any expiry.
fn signed_link(app: &TestApp, id: &str, expires: i64) -> String {
    use base64::Engine as _;
    let tag = app.key.tag(
        Purpose::SignedLinks,
        &tern_domain::media::link_payload(id, expires),
    );
    let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tag);
    app.url(&format!(
        "/api/public/v1/media/{id}/download?expires={expires}&signature={sig}"
    ))
}

tern_store::both_backends! { TestApp;
    upload_then_download_by_signed_link_http => async |app: &TestApp| {
        let (_, key) = app.owner_key("full_access").await;
        let bytes = jpeg(300_000);
        let (s, _, b) = upload(app, &key, bytes.clone(), Some("image/jpeg"), "shop/photo.jpg").await;
        assert_eq!(s, 201, "{b}");
        assert_eq!(b["mime_type"], "image/jpeg");
        assert_eq!(b["size_bytes"], 300_000);
        assert_eq!(b["sha256"], hex::encode(Sha256::digest(&bytes)));
        assert_eq!(b["filename"], "photo.jpg");
        assert!(b.get("download_url").is_none());
        let created = tern_domain::time::parse_rfc3339_ms(b["created_at"].as_str().unwrap()).unwrap();
        let expires = tern_domain::time::parse_rfc3339_ms(b["expires_at"].as_str().unwrap()).unwrap();
        assert_eq!(expires - created, 30 * 24 * 3600 * 1000);
        let id = b["media_id"].as_str().unwrap().to_string();

        let (s, _, m) = app.get(&format!("/api/public/v1/media/{id}"), Some(&key)).await;
        assert_eq!(s, 200, "{m}");
        let url = m["download_url"].as_str().unwrap().to_string();
        assert!(url.starts_with(&app.base), "{url}");
        let until = tern_domain::time::parse_rfc3339_ms(m["download_url_expires_at"].as_str().unwrap()).unwrap();
        let left = until - tern_domain::time::now_ms();
        assert!(left > 0 && left <= 5 * 60 * 1000, "{left}");

        // the whole file, no API key
        let r = fetch(app, &url, None).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "image/jpeg");
        assert_eq!(r.headers()["content-length"], "300000");
        assert_eq!(r.headers()["accept-ranges"], "bytes");
        assert_eq!(r.bytes().await.unwrap().as_ref(), bytes.as_slice());
        // ranges
        let r = fetch(app, &url, Some("bytes=10-19")).await;
        assert_eq!(r.status(), 206);
        assert_eq!(r.headers()["content-range"], "bytes 10-19/300000");
        assert_eq!(r.headers()["content-length"], "10");
        assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[10..20]);
        let r = fetch(app, &url, Some("bytes=-4")).await;
        assert_eq!(r.status(), 206);
        assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[299_996..]);
        let r = fetch(app, &url, Some("bytes=300000-")).await;
        assert_eq!(r.status(), 416);
        assert_eq!(r.headers()["content-range"], "bytes */300000");

        // tampered: another signature, another expiry, another id
        let tampered = url.replace("signature=", "signature=A");
        assert_eq!(fetch(app, &tampered, None).await.status(), 404);
        let later = url.replace(&format!("expires={until}"), &format!("expires={}", until + 1000));
        assert_eq!(fetch(app, &later, None).await.status(), 404);
        let other = signed_link(app, &uuid::Uuid::now_v7().to_string(), until);
        assert_eq!(fetch(app, &other, None).await.status(), 404);
        // correctly signed but expired
        let expired = signed_link(app, &id, tern_domain::time::now_ms() - 1);
        assert_eq!(fetch(app, &expired, None).await.status(), 404);
        assert_eq!(fetch(app, &signed_link(app, &id, until), None).await.status(), 200);

        // another organisation's key sees nothing
        let (_, other_key) = app.other_org("Other", Preset::FullAccess).await;
        let (s, h, e) = app.get(&format!("/api/public/v1/media/{id}"), Some(&other_key)).await;
        assert_error(s, &h, &e, 404, "not_found");
    },

    upload_refusals_name_the_file_http => async |app: &TestApp| {
        let (_, key) = app.owner_key("full_access").await;
        // a type the network does not carry
        let (s, h, b) = upload(app, &key, gif(100), Some("image/gif"), "a.gif").await;
        assert_error(s, &h, &b, 400, "validation_failed");
        assert_eq!(field_of(&b), "file");
        assert!(b["details"]["fields"][0]["message"].as_str().unwrap().contains("image/gif"));
        // declared one type, bytes of another
        let (s, _, b) = upload(app, &key, jpeg(100), Some("image/png"), "a.png").await;
        assert_eq!(s, 400);
        assert_eq!(field_of(&b), "file");
        assert!(b["details"]["fields"][0]["message"].as_str().unwrap().contains("image/jpeg"), "{b}");
        // text passes unless it is recognisably something else
        let (s, _, b) = upload(app, &key, b"hello\n".to_vec(), Some("text/plain"), "a.txt").await;
        assert_eq!(s, 201, "{b}");
        let (s, _, _) = upload(app, &key, png(100), Some("text/plain"), "a.txt").await;
        assert_eq!(s, 400);
        // no declared type: the bytes decide
        let (s, _, b) = upload(app, &key, png(100), None, "a").await;
        assert_eq!(s, 201, "{b}");
        assert_eq!(b["mime_type"], "image/png");
        // empty
        let (s, _, b) = upload(app, &key, Vec::new(), Some("image/jpeg"), "a.jpg").await;
        assert_eq!(s, 400);
        assert_eq!(field_of(&b), "file");
        // no part named file
        let form = reqwest::multipart::Form::new().text("other", "x");
        let (s, _, b) = send(app.http.post(app.url("/api/public/v1/media")).bearer_auth(&key).multipart(form)).await;
        assert_eq!(s, 400);
        assert_eq!(field_of(&b), "file");
        // neither multipart nor JSON
        let (s, _, b) = send(app.http.post(app.url("/api/public/v1/media")).bearer_auth(&key)
            .header("Content-Type", "image/jpeg").body(jpeg(100))).await;
        assert_eq!(s, 400);
        assert_eq!(field_of(&b), "Content-Type");
        // 16 MiB exactly passes, one byte more does not
        let (s, _, b) = upload(app, &key, jpeg(16 * MIB), Some("image/jpeg"), "big.jpg").await;
        assert_eq!(s, 201, "{b}");
        assert_eq!(b["size_bytes"], 16 * MIB);
        let (s, h, b) = upload(app, &key, jpeg(16 * MIB + 1), Some("image/jpeg"), "big.jpg").await;
        assert_error(s, &h, &b, 400, "media_too_large");
        assert_eq!(b["details"]["limit_bytes"], 16 * MIB);
        // reading needs messages.read, uploading messages.send
        let (_, read_only) = app.key_for(&app.org_id, &app.developer_id, &["--permissions", "messages.read"]).await;
        let (s, h, b) = upload(app, &read_only, jpeg(100), Some("image/jpeg"), "a.jpg").await;
        assert_error(s, &h, &b, 403, "permission_denied");
    },

    same_bytes_are_stored_once_and_expire_after_30_days_http => async |app: &TestApp| {
        let (_, key) = app.owner_key("full_access").await;
        let bytes = jpeg(5000);
        let (_, _, a) = upload(app, &key, bytes.clone(), Some("image/jpeg"), "a.jpg").await;
        let (_, _, b) = upload(app, &key, bytes.clone(), Some("image/jpeg"), "b.jpg").await;
        assert_ne!(a["media_id"], b["media_id"]);
        assert_eq!(a["sha256"], b["sha256"]);
        let dir = app.media_dir.join("media").join(&app.org_id);
        let files = || std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
        assert_eq!(files(), 1);
        // no temporary file is left behind
        assert_eq!(std::fs::read_dir(app.media_dir.join("tmp")).map(|d| d.count()).unwrap_or(0), 0);
        let (_, _, c) = upload(app, &key, jpeg(6000), Some("image/jpeg"), "c.jpg").await;
        assert_eq!(files(), 2);

        // the cleanup, run as if 30 days and a minute had passed
        let svc = tern_core::media::MediaService::new(tern_core::media::MediaConfig {
            location: tern_core::media::Location::File(app.media_dir.clone()),
            ..tern_core::media::MediaConfig::in_memory()
        })
        .unwrap();
        let later = tern_domain::time::now_ms() + 30 * 24 * 3600 * 1000 + 60_000;
        assert_eq!(tern_core::media::cleanup(&app.db, &svc, later).await.unwrap(), 2);
        assert_eq!(files(), 0);
        for m in [&a, &b, &c] {
            let (s, _, _) = app.get(&format!("/api/public/v1/media/{}", m["media_id"].as_str().unwrap()), Some(&key)).await;
            assert_eq!(s, 404);
        }
    },
}
