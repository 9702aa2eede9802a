//! Media: lifetimes on the simulator clock, download URLs, upload checks, and the client's
//! streamed upload/download and `is_unknown_media` against them.

use futures::{StreamExt, TryStreamExt, stream};
use sha2::{Digest, Sha256};
use tern_cloudapi::{CaptionedMedia, MediaSource};
use tern_simulator::{MediaOrigin, sample_media};

use crate::common::*;

const DAY: i64 = 24 * 3600;

async fn upload(e: &Env, mime: &str, filename: &str) -> String {
    e.client
        .upload_media(
            PNID,
            TOKEN,
            sample_media(mime, filename).unwrap(),
            mime,
            filename,
        )
        .await
        .unwrap()
}

fn image_by_id(id: &str) -> SendPayload {
    SendPayload::new(
        CUSTOMER,
        MessageContent::Image {
            image: CaptionedMedia {
                source: MediaSource::Id(id.into()),
                caption: None,
            },
        },
    )
}

/// Send an image by id: accepted (200), then returns the statuses' first error.
async fn send_image_fails_async(e: &Env, id: &str) -> tern_cloudapi::WebhookError {
    let ok = e
        .client
        .send_message(PNID, TOKEN, &image_by_id(id))
        .await
        .unwrap();
    let statuses = e.rx.wait_statuses(&ok.wamid, 1).await;
    assert_eq!(statuses[0].status, DeliveryStatus::Failed, "{statuses:?}");
    statuses[0].errors[0].clone()
}

fn expect_graph(r: Result<impl std::fmt::Debug, SendError>) -> tern_cloudapi::GraphError {
    match r {
        Err(SendError::Graph(g)) => *g,
        other => panic!("expected a Graph error, got {other:?}"),
    }
}

#[tokio::test]
async fn uploaded_ids_expire_after_30_days_then_sends_fail_131053() {
    let e = env().await;
    let id = upload(&e, "image/png", "a.png").await;
    let m = e.sim.media();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].id, id);
    assert_eq!(m[0].phone_number_id.as_deref(), Some(PNID));
    assert_eq!(m[0].mime_type, "image/png");
    assert_eq!(m[0].origin, MediaOrigin::Upload);
    assert_eq!(m[0].expires_at - m[0].uploaded_at, 30 * DAY);
    assert!(!m[0].expired);
    let bytes = sample_media("image/png", "a.png").unwrap();
    assert_eq!(m[0].size, bytes.len() as u64);
    assert_eq!(m[0].sha256, hex::encode(Sha256::digest(&bytes)));

    // a day before the end it still works, for GET and for sends
    e.sim.advance_clock(29 * DAY);
    let info = e.client.get_media(&id, TOKEN).await.unwrap();
    assert_eq!(info.sha256.as_deref(), Some(m[0].sha256.as_str()));
    open_window(&e);
    let ok = e
        .client
        .send_message(PNID, TOKEN, &image_by_id(&id))
        .await
        .unwrap();
    let st = e.rx.wait_statuses(&ok.wamid, 3).await;
    assert!(st.iter().all(|s| s.errors.is_empty()), "{st:?}");

    // past 30 days: unknown object, like an id that never existed
    e.sim.advance_clock(DAY);
    assert!(e.sim.media()[0].expired);
    let err = e.client.get_media(&id, TOKEN).await.unwrap_err();
    let g = err.graph().unwrap();
    assert_eq!(
        (g.http_status, g.code, g.subcode),
        (400, Some(100), Some(33))
    );
    assert_eq!(g.error_type.as_deref(), Some("GraphMethodException"));
    assert!(err.is_unknown_media());
    // the URL fetched before is dead too
    let err = e.client.download_media(&info.url, TOKEN).await.unwrap_err();
    assert_eq!(err.http_status(), Some(404));
    // a send is accepted, then fails with 131053 naming the media id
    open_window(&e);
    let w = send_image_fails_async(&e, &id).await;
    assert_eq!(w.code, Some(131053));
    assert!(w.is_unknown_media(), "{w:?}");
    // as for an id that never existed
    let w = send_image_fails_async(&e, "4242424242").await;
    assert_eq!(w.code, Some(131053));
    assert!(w.is_unknown_media(), "{w:?}");
    // an expired id cannot be deleted either
    let r = reqwest::Client::new()
        .delete(format!("{}/v25.0/{id}", e.sim.base_url()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["error_subcode"], 33);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn inbound_media_ids_expire_after_7_days() {
    let e = env().await;
    e.sim
        .inject_inbound(json!({"phone_number_id": PNID, "from": CUSTOMER,
            "type": "document", "document": {"filename": "x.pdf"}}))
        .unwrap();
    let m = e.sim.media();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].origin, MediaOrigin::Inbound);
    assert_eq!(m[0].phone_number_id.as_deref(), Some(PNID));
    assert_eq!(m[0].expires_at - m[0].uploaded_at, 7 * DAY);
    let id = m[0].id.clone();
    // without media_base64 the file is still a real PDF (magic number first)
    let info = e
        .client
        .get_media_for(&id, TOKEN, Some(PNID))
        .await
        .unwrap();
    let bytes = e.client.download_media(&info.url, TOKEN).await.unwrap();
    assert!(bytes.starts_with(b"%PDF-"));

    e.sim.advance_clock(7 * DAY - 60);
    assert!(e.client.get_media(&id, TOKEN).await.is_ok());
    e.sim.advance_clock(61);
    let err = e.client.get_media(&id, TOKEN).await.unwrap_err();
    assert!(err.is_unknown_media(), "{err:?}");
    // the webhook's token-less URL dies with the id
    let r = reqwest::Client::new()
        .get(format!("{}/_media/{id}", e.sim.base_url()))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn expire_media_forces_one_id_to_expire() {
    let e = env().await;
    open_window(&e);
    let a = upload(&e, "image/jpeg", "a.jpg").await;
    let b = upload(&e, "image/jpeg", "b.jpg").await;
    let s = e.sim.expire_media(&a).unwrap();
    assert!(s.expired);
    assert!(e.sim.expire_media("nope").is_err());
    assert!(
        e.client
            .get_media(&a, TOKEN)
            .await
            .unwrap_err()
            .is_unknown_media()
    );
    assert!(e.client.get_media(&b, TOKEN).await.is_ok());
    let w = send_image_fails_async(&e, &a).await;
    assert_eq!(w.code, Some(131053));
    let rec = e
        .sim
        .messages()
        .into_iter()
        .find(|m| m.outcome.starts_with("failed"))
        .unwrap();
    assert_eq!(rec.outcome, "failed:131053");

    // the same over the control API
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/_sim/media/{b}/expire", e.sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["expired"], true);
    let v: Value = http
        .get(format!("{}/_sim/media", e.sim.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    assert!(
        data.iter()
            .all(|m| m["expired"] == true && m["origin"] == "upload")
    );
    let r = http
        .post(format!("{}/_sim/media/nope/expire", e.sim.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn download_urls_live_5_minutes_on_the_simulator_clock() {
    let e = env().await;
    let id = upload(&e, "application/pdf", "a.pdf").await;
    let info = e.client.get_media(&id, TOKEN).await.unwrap();
    e.sim.advance_clock(240);
    let dl = e
        .client
        .download_media_stream(&info.url, TOKEN)
        .await
        .unwrap();
    assert_eq!(dl.content_type.as_deref(), Some("application/pdf"));
    let body: Vec<bytes::Bytes> = dl.body.try_collect().await.unwrap();
    assert!(body.concat().starts_with(b"%PDF-"));

    e.sim.advance_clock(61);
    let err = e
        .client
        .download_media_stream(&info.url, TOKEN)
        .await
        .unwrap_err();
    assert_eq!(err.http_status(), Some(404), "{err:?}");
    assert!(
        !err.is_unknown_media(),
        "the id is fine, only the URL expired"
    );
    // a new URL works; the old one stays dead
    let fresh = e.client.get_media(&id, TOKEN).await.unwrap();
    assert_ne!(fresh.url, info.url);
    assert!(e.client.download_media(&fresh.url, TOKEN).await.is_ok());
    assert_eq!(
        e.client
            .download_media(&info.url, TOKEN)
            .await
            .unwrap_err()
            .http_status(),
        Some(404)
    );
    // a token of another URL does not open this one
    let forged = format!("{}/_media/{id}?token=0123456789abcdef", e.sim.base_url());
    let err = e.client.download_media(&forged, TOKEN).await.unwrap_err();
    assert_eq!(err.http_status(), Some(404));
    e.sim.shutdown().await;
}

#[tokio::test]
async fn download_urls_need_a_valid_bearer_token() {
    let e = env().await;
    let id = upload(&e, "image/png", "a.png").await;
    let info = e.client.get_media(&id, TOKEN).await.unwrap();
    // no token: 401
    let r = reqwest::get(&info.url).await.unwrap();
    assert_eq!(r.status(), 401);
    // unknown token: 401, code 190
    let err = e
        .client
        .download_media_stream(&info.url, "not-a-token")
        .await
        .unwrap_err();
    let g = err.graph().unwrap();
    assert_eq!((g.http_status, g.code), (401, Some(190)));
    assert_eq!(err.http_status(), Some(401));
    // the right token: the file
    let bytes = e.client.download_media(&info.url, TOKEN).await.unwrap();
    assert_eq!(bytes, sample_media("image/png", "a.png").unwrap());
    e.sim.shutdown().await;
}

#[tokio::test]
async fn uploads_are_checked_like_the_network() {
    let e = env().await;
    let up = |bytes: bytes::Bytes, mime: &'static str, name: &'static str| {
        let c = e.client.clone();
        async move { c.upload_media(PNID, TOKEN, bytes, mime, name).await }
    };
    // every type of the §4 table, with real magic numbers, is accepted
    let all = [
        ("audio/aac", "a.aac"),
        ("audio/amr", "a.amr"),
        ("audio/mpeg", "a.mp3"),
        ("audio/mp4", "a.m4a"),
        ("audio/ogg", "a.ogg"),
        ("video/mp4", "v.mp4"),
        ("video/3gpp", "v.3gp"),
        ("image/jpeg", "i.jpg"),
        ("image/png", "i.png"),
        ("image/webp", "s.webp"),
        ("text/plain", "t.txt"),
        ("application/pdf", "d.pdf"),
        ("application/msword", "d.doc"),
        ("application/vnd.ms-excel", "d.xls"),
        ("application/vnd.ms-powerpoint", "d.ppt"),
        (
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "d.docx",
        ),
        (
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            "d.xlsx",
        ),
        (
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            "d.pptx",
        ),
    ];
    for (mime, name) in all {
        up(sample_media(mime, name).unwrap(), mime, name)
            .await
            .unwrap_or_else(|err| panic!("{mime}: {err}"));
    }
    assert_eq!(e.sim.media().len(), all.len());

    let rejected = |r: Result<String, SendError>| {
        let g = expect_graph(r);
        assert_eq!((g.http_status, g.code), (400, Some(131053)), "{g:?}");
        assert!(!g.is_unknown_media());
        g.details.unwrap_or_default()
    };
    let jpeg = sample_media("image/jpeg", "x").unwrap();
    // content that is not the declared type
    let d = rejected(up(jpeg.clone(), "image/png", "x.png").await);
    assert!(d.starts_with("MIME type mismatch"), "{d}");
    assert!(d.contains("image/jpeg"), "{d}");
    let d = rejected(up(bytes::Bytes::from_static(b"just text"), "image/png", "x").await);
    assert!(d.starts_with("MIME type mismatch"), "{d}");
    let pdf = sample_media("application/pdf", "x").unwrap();
    let d = rejected(up(pdf.clone(), "text/plain", "x.txt").await);
    assert!(d.starts_with("MIME type mismatch"), "{d}");
    let d = rejected(up(pdf, "application/msword", "x.doc").await);
    assert!(d.starts_with("MIME type mismatch"), "{d}");
    // a file name whose extension says another type
    let d = rejected(up(jpeg.clone(), "image/jpeg", "x.pdf").await);
    assert!(d.starts_with("MIME type mismatch"), "{d}");
    // a type outside the table, an empty file, a sticker over 500 KB
    let d = rejected(up(jpeg, "image/gif", "x.gif").await);
    assert!(d.contains("Unsupported MIME type"), "{d}");
    rejected(up(bytes::Bytes::new(), "text/plain", "x.txt").await);
    let mut webp = sample_media("image/webp", "big").unwrap().to_vec();
    webp.resize(500 * 1024 + 1, 0);
    let d = rejected(up(webp.into(), "image/webp", "big.webp").await);
    assert!(d.contains("File size"), "{d}");
    // nothing rejected was stored
    assert_eq!(e.sim.media().len(), all.len());

    // every upload is in the request log; accepted ones name their media id
    let uploads: Vec<_> = e
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/media"))
        .collect();
    assert_eq!(uploads.len(), all.len() + 8);
    let ok: Vec<_> = uploads
        .iter()
        .filter(|r| r.response_status == Some(200))
        .collect();
    assert_eq!(ok.len(), all.len());
    let mut logged: Vec<_> = ok.iter().map(|r| r.media_id.clone().unwrap()).collect();
    let mut stored: Vec<_> = e.sim.media().into_iter().map(|m| m.id).collect();
    logged.sort();
    stored.sort();
    assert_eq!(logged, stored);
    assert!(
        uploads
            .iter()
            .all(|r| r.body["_multipart_bytes"].as_u64().is_some())
    );
    e.sim.shutdown().await;
}

#[tokio::test]
async fn get_media_checks_the_phone_number_id() {
    let e = env().await;
    let id = upload(&e, "image/png", "a.png").await;
    let info = e
        .client
        .get_media_for(&id, TOKEN, Some(PNID))
        .await
        .unwrap();
    assert_eq!(info.id, id);
    let err = e
        .client
        .get_media_for(&id, TOKEN, Some("999999"))
        .await
        .unwrap_err();
    let g = err.graph().unwrap();
    assert_eq!(g.code, Some(100));
    assert!(!err.is_unknown_media());
    let queries: Vec<_> = e
        .sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET")
        .map(|r| r.query)
        .collect();
    assert_eq!(
        queries,
        vec![
            Some(format!("phone_number_id={PNID}")),
            Some("phone_number_id=999999".to_owned())
        ]
    );
    e.sim.shutdown().await;
}

/// 16 MiB of MP4 in 256 KiB chunks, made as they are sent.
fn big_video() -> (
    impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
    u64,
    String,
) {
    const CHUNK: usize = 256 * 1024;
    const CHUNKS: usize = 64;
    let head = sample_media("video/mp4", "big").unwrap();
    let chunk = move |i: usize| {
        let mut c = vec![u8::try_from(i % 251).unwrap(); CHUNK];
        if i == 0 {
            c[..head.len()].copy_from_slice(&head);
        }
        bytes::Bytes::from(c)
    };
    let mut sha = Sha256::new();
    for i in 0..CHUNKS {
        sha.update(chunk(i));
    }
    let body = stream::iter(0..CHUNKS).map(move |i| Ok(chunk(i)));
    (body, (CHUNK * CHUNKS) as u64, hex::encode(sha.finalize()))
}

#[tokio::test]
async fn streamed_upload_and_download_of_16_mib() {
    let e = env().await;
    let client = client_for(&e.sim, 30_000);
    let (body, len, sha) = big_video();
    let id = client
        .upload_media_stream(PNID, TOKEN, body, len, "video/mp4", "big.mp4")
        .await
        .unwrap();
    let m = e.sim.media();
    assert_eq!((m[0].size, m[0].sha256.as_str()), (len, sha.as_str()));

    let info = client.get_media_for(&id, TOKEN, Some(PNID)).await.unwrap();
    assert_eq!(info.file_size, Some(len));
    let dl = client
        .download_media_stream(&info.url, TOKEN)
        .await
        .unwrap();
    assert_eq!(dl.content_type.as_deref(), Some("video/mp4"));
    assert_eq!(dl.content_length, Some(len));
    let mut hasher = Sha256::new();
    let mut total = 0u64;
    let mut chunks = 0;
    let mut body = dl.body;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        total += chunk.len() as u64;
        chunks += 1;
        hasher.update(&chunk);
    }
    assert_eq!(total, len);
    assert!(chunks > 1, "the body arrived in pieces");
    assert_eq!(hex::encode(hasher.finalize()), sha);
    e.sim.shutdown().await;
}

#[tokio::test]
async fn a_failing_or_mis_sized_upload_source_is_not_sent() {
    let e = env().await;
    let head = sample_media("image/png", "x").unwrap();
    let n = head.len() as u64;
    let chunks = move |v: Vec<Result<bytes::Bytes, std::io::Error>>| stream::iter(v);

    // fewer bytes than announced
    let err = e
        .client
        .upload_media_stream(
            PNID,
            TOKEN,
            chunks(vec![Ok(head.clone())]),
            n + 10,
            "image/png",
            "a.png",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::NotSent { .. }), "{err:?}");
    assert!(err.to_string().contains("fewer bytes"), "{err}");
    // more bytes than announced
    let err = e
        .client
        .upload_media_stream(
            PNID,
            TOKEN,
            chunks(vec![Ok(head.clone()), Ok(head.clone())]),
            n,
            "image/png",
            "a.png",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::NotSent { .. }), "{err:?}");
    assert!(err.to_string().contains("more bytes"), "{err}");
    // the source fails half-way
    let err = e
        .client
        .upload_media_stream(
            PNID,
            TOKEN,
            chunks(vec![
                Ok(head.clone()),
                Err(std::io::Error::other("disk on fire")),
            ]),
            2 * n,
            "image/png",
            "a.png",
        )
        .await
        .unwrap_err();
    assert!(matches!(err, SendError::NotSent { .. }), "{err:?}");
    assert!(err.to_string().contains("disk on fire"), "{err}");
    assert!(e.sim.media().is_empty(), "no partial file was stored");

    // and the same stream, right-sized, works
    let id = e
        .client
        .upload_media_stream(
            PNID,
            TOKEN,
            chunks(vec![Ok(head.slice(..4)), Ok(head.slice(4..))]),
            n,
            "image/png",
            "a.png",
        )
        .await
        .unwrap();
    assert_eq!(e.sim.media()[0].id, id);
    e.sim.shutdown().await;
}
