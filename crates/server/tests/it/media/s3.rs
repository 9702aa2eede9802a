//! `TERN_MEDIA_STORE=s3://…` against a real S3-compatible server on loopback (moto, started
//! by scripts/test.sh at `TERN_TEST_S3_URL`): upload, signed download with Range, dedupe
//! and expiry go through the bucket.

use super::fixture::jpeg;
use super::*;

fn s3_url() -> String {
    std::env::var("TERN_TEST_S3_URL").unwrap_or_else(|_| "http://127.0.0.1:5123".into())
}

async fn bucket(name: &str) {
    // moto takes unsigned requests; a real server would need credentials here.
    let r = reqwest::Client::new()
        .put(format!("{}/{name}", s3_url()))
        .send()
        .await
        .unwrap_or_else(|e| {
            panic!(
                "no S3 server at {} ({e}); scripts/test.sh starts one",
                s3_url()
            )
        });
    assert!(r.status().is_success(), "create bucket: {}", r.status());
}

tern_store::both_backends! { Backend;
    media_live_in_an_s3_bucket_http => async |backend| {
        let name = format!("tern-test-{}", uuid::Uuid::new_v4().simple());
        bucket(&name).await;
        let location = tern_core::media::Location::S3 {
            bucket: name.clone(),
            endpoint: Some(s3_url()),
            region: Some("us-east-1".into()),
            credentials: Some(("test".into(), "test".into())),
        };
        let loc = location.clone();
        let app = TestApp::builder(backend).configure(move |c| c.media_store = loc).start().await;
        let (_, key) = app.owner_key("full_access").await;
        // larger than one S3 part (5 MiB): a multipart upload
        let bytes = jpeg(7 * 1024 * 1024 + 3);
        let (s, _, a) = upload(&app, &key, bytes.clone(), Some("image/jpeg"), "big.jpg").await;
        assert_eq!(s, 201, "{a}");
        let (s, _, b) = upload(&app, &key, bytes.clone(), Some("image/jpeg"), "again.jpg").await;
        assert_eq!(s, 201, "{b}");
        let blobs = tern_core::media::Blobs::open(&location).unwrap();
        assert_eq!(blobs.count(&format!("media/{}", app.org_id)).await.unwrap(), 1, "stored once");
        assert_eq!(blobs.count("tmp").await.unwrap(), 0);
        let (_, _, m) = app.get(&format!("/api/public/v1/media/{}", a["media_id"].as_str().unwrap()), Some(&key)).await;
        let url = m["download_url"].as_str().unwrap();
        let r = app.http.get(url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.bytes().await.unwrap().as_ref(), bytes.as_slice());
        let r = app.http.get(url).header("Range", "bytes=5242878-5242881").send().await.unwrap();
        assert_eq!(r.status(), 206);
        assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[5_242_878..5_242_882]);
        // an end up to the largest 64-bit number means "to the end"
        let r = app.http.get(url).header("Range", "bytes=7340030-18446744073709551615").send().await.unwrap();
        assert_eq!(r.status(), 206);
        assert_eq!(r.headers()["content-range"], "bytes 7340030-7340034/7340035");
        assert_eq!(r.bytes().await.unwrap().as_ref(), &bytes[7_340_030..]);
        // expiry deletes the object from the bucket
        let svc = tern_core::media::MediaService::new(tern_core::media::MediaConfig {
            location: location.clone(),
            ..tern_core::media::MediaConfig::in_memory()
        })
        .unwrap();
        let later = tern_domain::time::now_ms() + 31 * 24 * 3600 * 1000;
        assert_eq!(tern_core::media::cleanup(&app.db, &svc, later).await.unwrap(), 1);
        assert_eq!(blobs.count(&format!("media/{}", app.org_id)).await.unwrap(), 0);
        app.stop().await;
    },
}
