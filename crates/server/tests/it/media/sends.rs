//! Media messages through the simulator: each type by media id and by link, the per-type
//! checks at acceptance, one network upload per (media, number), and a network id that
//! expired uploaded again.

use super::fixture::{FileServer, jpeg, mp4, ogg, pdf, webp};
use super::*;
use crate::common::{APP_SECRET, assert_error};
use serde_json::json;
use std::time::Duration;
use tern_domain::auth::Preset;

pub(super) const PNID: &str = "555000111";
pub(super) const CUSTOMER: &str = "447700900001";

pub(super) struct Env {
    pub app: TestApp,
    pub sim: tern_simulator::SimHandle,
    pub key: String,
    pub files: FileServer,
}

pub(super) async fn env(backend: Backend) -> Env {
    let sim = tern_simulator::start(tern_simulator::SimArgs::local(APP_SECRET))
        .await
        .unwrap();
    let files = FileServer::start().await;
    let ca = files.ca_file.path().to_path_buf();
    let app = TestApp::builder(backend)
        .graph(&sim.base_url())
        .workers()
        .configure(move |c| {
            c.extra_ca_file = Some(ca);
            c.allow_networks = vec!["127.0.0.1/32".parse().unwrap()];
        })
        .start()
        .await;
    sim.set_callback_url(Some(app.url("/webhooks/whatsapp")));
    sim.register_number(tern_simulator::NumberSpec {
        id: PNID.into(),
        display_phone_number: "+14155550111".into(),
        waba_id: "waba1".into(),
        access_token: "token".into(),
        throughput_mps: None,
        verified_name: None,
    })
    .unwrap();
    app.add_number(&app.org_id, PNID, "+14155550111").await;
    // the customer writes first: the window is open on both sides
    sim.inject_inbound(
        json!({"phone_number_id": PNID, "from": CUSTOMER, "type": "text",
        "text": {"body": "hi"}}),
    )
    .unwrap();
    let (_, key) = app.owner_key("full_access").await;
    // The conversation's window (what a send checks) opens after the contact is written.
    crate::common::eventually_within(Duration::from_secs(20), "the open window", || async {
        let (_, _, b) = app.get("/api/public/v1/conversations", Some(&key)).await;
        (b["data"][0]["window_state"] == "open").then_some(())
    })
    .await;
    Env {
        app,
        sim,
        key,
        files,
    }
}

async fn send_message(
    e: &Env,
    idem: &str,
    body: serde_json::Value,
) -> (u16, reqwest::header::HeaderMap, serde_json::Value) {
    let mut body = body;
    body["to"] = json!(format!("+{CUSTOMER}"));
    send(
        e.app
            .http
            .post(e.app.url("/api/public/v1/messages"))
            .bearer_auth(&e.key)
            .header("Idempotency-Key", idem)
            .json(&body),
    )
    .await
}

/// Waits (bounded) until the message has left Tern; returns it.
pub(super) async fn until_sent(e: &Env, id: &str) -> serde_json::Value {
    let mut m = serde_json::Value::Null;
    for _ in 0..400 {
        let (_, _, got) = e
            .app
            .get(&format!("/api/public/v1/messages/{id}"), Some(&e.key))
            .await;
        m = got;
        if !matches!(m["status"].as_str(), Some("accepted" | "sending")) {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("not sent: {m}");
}

fn uploads(e: &Env) -> usize {
    e.sim
        .requests()
        .iter()
        .filter(|r| {
            r.method == "POST" && r.path.ends_with("/media") && r.response_status == Some(200)
        })
        .count()
}

pub(super) async fn stop(e: Env) {
    e.sim.shutdown().await;
    e.app.stop().await;
    e.files.stop();
}

tern_store::both_backends! { Backend;
    every_media_type_reaches_the_network_once_per_file_http => async |backend| {
        let e = env(backend).await;
        let cases = [
            ("image", jpeg(20_000), "image/jpeg", json!({})),
            ("video", mp4(30_000), "video/mp4", json!({"caption": "clip"})),
            ("audio", ogg(10_000), "audio/ogg", json!({})),
            ("document", pdf(40_000), "application/pdf", json!({"caption": "menu", "filename": "menu.pdf"})),
            ("sticker", webp(50_000), "image/webp", json!({})),
        ];
        for (i, (kind, bytes, mime, extra)) in cases.into_iter().enumerate() {
            let (s, _, up) = upload(&e.app, &e.key, bytes, Some(mime), "f").await;
            assert_eq!(s, 201, "{up}");
            let media_id = up["media_id"].as_str().unwrap().to_string();
            let mut obj = extra.clone();
            obj["media_id"] = json!(media_id);
            let (s, _, m) = send_message(&e, &format!("media-key-media-type-{i}"), json!({"type": kind, kind: obj})).await;
            assert_eq!(s, 202, "{kind}: {m}");
            assert_eq!(m["media_id"], media_id.as_str());
            let sent = until_sent(&e, m["id"].as_str().unwrap()).await;
            assert_ne!(sent["status"], "failed", "{kind}: {sent}");
            assert_eq!(uploads(&e), i + 1, "{kind}");
            // the network got its own media id, not Tern's
            let wamid = sent["wamid"].as_str().unwrap();
            let rec = e.sim.messages().into_iter().find(|r| r.wamid == wamid).unwrap();
            let net_id = rec.payload[kind]["id"].as_str().unwrap().to_string();
            assert!(rec.payload[kind].get("media_id").is_none(), "{}", rec.payload);
            assert!(e.sim.media().iter().any(|m| m.id == net_id && m.mime_type == mime));
        }
        // the same image again: no second upload
        let (_, _, up) = upload(&e.app, &e.key, jpeg(1000), Some("image/jpeg"), "g.jpg").await;
        let media_id = up["media_id"].as_str().unwrap();
        for n in 0..2 {
            let (s, _, m) = send_message(&e, &format!("media-key-again-{n}"), json!({"type": "image", "image": {"media_id": media_id}})).await;
            assert_eq!(s, 202, "{m}");
            until_sent(&e, m["id"].as_str().unwrap()).await;
        }
        assert_eq!(uploads(&e), 6);
        stop(e).await;
    },

    a_link_is_imported_at_acceptance_http => async |backend| {
        let e = env(backend).await;
        let url = e.files.url("/file/4096");
        let (s, _, m) = send_message(&e, "media-key-link-1", json!({"type": "image", "image": {"link": url, "caption": "look"}})).await;
        assert_eq!(s, 202, "{m}");
        let media_id = m["media_id"].as_str().unwrap().to_string();
        let (s, _, media) = e.app.get(&format!("/api/public/v1/media/{media_id}"), Some(&e.key)).await;
        assert_eq!((s, media["size_bytes"].as_i64()), (200, Some(4096)));
        let sent = until_sent(&e, m["id"].as_str().unwrap()).await;
        assert_ne!(sent["status"], "failed", "{sent}");
        let rec = e.sim.messages().into_iter().find(|r| Some(r.wamid.as_str()) == sent["wamid"].as_str()).unwrap();
        assert!(rec.payload["image"].get("link").is_none(), "the customer's URL never reaches the network");
        assert_eq!(rec.payload["image"]["caption"], "look");
        // a link that cannot be fetched refuses the message, naming the field
        let (s, h, b) = send_message(&e, "media-key-link-2", json!({"type": "image", "image": {"link": e.files.url("/status/404")}})).await;
        assert_error(s, &h, &b, 409, "media_unavailable");
        assert_eq!(b["details"]["reason"], "http_status");
        let (s, _, b) = send_message(&e, "media-key-link-3", json!({"type": "image", "image": {"link": "https://10.0.0.1/a.jpg"}})).await;
        assert_eq!(s, 400, "{b}");
        assert_eq!(field_of(&b), "image.link");
        stop(e).await;
    },

    per_type_checks_at_acceptance_http => async |backend| {
        let e = env(backend).await;
        let up = |bytes: Vec<u8>, mime: &'static str| {
            let (app, key) = (&e.app, e.key.clone());
            async move {
                let (s, _, b) = upload(app, &key, bytes, Some(mime), "f").await;
                assert_eq!(s, 201, "{b}");
                b["media_id"].as_str().unwrap().to_string()
            }
        };
        let pdf_id = up(pdf(1000), "application/pdf").await;
        let (s, _, b) = send_message(&e, "media-key-chk-1", json!({"type": "image", "image": {"media_id": pdf_id}})).await;
        assert_eq!(s, 400, "{b}");
        assert_eq!(field_of(&b), "image.media_id");
        let big = up(jpeg(5 * 1024 * 1024 + 1), "image/jpeg").await;
        let (s, h, b) = send_message(&e, "media-key-chk-2", json!({"type": "image", "image": {"media_id": big}})).await;
        assert_error(s, &h, &b, 400, "media_too_large");
        assert_eq!(b["details"]["field"], "image.media_id");
        let exact = up(jpeg(5 * 1024 * 1024), "image/jpeg").await;
        let (s, _, b) = send_message(&e, "media-key-chk-3", json!({"type": "image", "image": {"media_id": exact}})).await;
        assert_eq!(s, 202, "{b}");
        let sticker = up(webp(100 * 1024 + 1), "image/webp").await;
        let (s, _, b) = send_message(&e, "media-key-chk-4", json!({"type": "sticker", "sticker": {"media_id": sticker}})).await;
        assert_eq!((s, b["code"].as_str()), (400, Some("media_too_large")), "{b}");
        let (s, h, b) = send_message(&e, "media-key-chk-5", json!({"type": "image", "image": {"media_id": uuid::Uuid::now_v7().to_string()}})).await;
        assert_error(s, &h, &b, 409, "media_unavailable");
        assert_eq!(b["details"]["reason"], "unknown_media");
        // another organisation's media is unknown here
        let (_, other_key) = e.app.other_org("Other", Preset::FullAccess).await;
        let (_, _, theirs) = upload(&e.app, &other_key, jpeg(100), Some("image/jpeg"), "t.jpg").await;
        let (s, _, b) = send_message(&e, "media-key-chk-6", json!({"type": "image", "image": {"media_id": theirs["media_id"]}})).await;
        assert_eq!((s, b["details"]["reason"].as_str()), (409, Some("unknown_media")), "{b}");
        stop(e).await;
    },

    an_expired_network_media_id_is_uploaded_again_http => async |backend| {
        let e = env(backend).await;
        let (_, _, up) = upload(&e.app, &e.key, jpeg(2000), Some("image/jpeg"), "a.jpg").await;
        let media_id = up["media_id"].as_str().unwrap().to_string();
        let (_, _, m) = send_message(&e, "media-key-exp-1", json!({"type": "image", "image": {"media_id": media_id}})).await;
        let first = until_sent(&e, m["id"].as_str().unwrap()).await;
        assert_ne!(first["status"], "failed");
        assert_eq!(uploads(&e), 1);
        // the network forgets the id (30 days later); Tern's record of it has run out too
        let net_id = e.sim.media().into_iter().find(|m| matches!(m.origin, tern_simulator::MediaOrigin::Upload)).unwrap().id;
        e.sim.expire_media(&net_id).unwrap();
        let tern_id: uuid::Uuid = media_id.parse().unwrap();
        e.app.db.save_network_media_id(tern_id, PNID, &net_id, 0).await.unwrap();
        let (_, _, m) = send_message(&e, "media-key-exp-2", json!({"type": "image", "image": {"media_id": media_id}})).await;
        let second = until_sent(&e, m["id"].as_str().unwrap()).await;
        assert_ne!(second["status"], "failed", "{second}");
        assert_eq!(uploads(&e), 2);
        stop(e).await;
    },
}
