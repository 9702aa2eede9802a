//! Customers' files: downloaded from the network by the media worker, kept as Tern media,
//! named by the inbound Message's `media_id`; a failing download is retried with backoff
//! while the rest of its webhook batch is applied at once.

use super::fixture::jpeg;
use super::sends::{CUSTOMER, PNID, env, stop};
use super::*;
use base64::Engine as _;
use serde_json::json;
use std::time::Duration;

tern_store::both_backends! { Backend;
    inbound_media_is_downloaded_and_served_http => async |backend| {
        let e = env(backend).await;
        let bytes = jpeg(70_000);
        let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
        let got = e.sim.inject_inbound(json!({"phone_number_id": PNID, "from": CUSTOMER, "type": "image",
            "image": {"caption": "my receipt", "mime_type": "image/jpeg"}, "media_base64": b64})).unwrap();
        let wamid = got["wamid"].as_str().unwrap().to_string();
        let org = e.app.org_uuid();
        let mut message = None;
        for _ in 0..400 {
            if let Some(id) = e.app.db.message_id_by_wamid(org, &wamid).await.unwrap()
                && let Some(m) = e.app.db.get_message(org, id).await.unwrap()
                && m.media_id.is_some()
            {
                message = Some(m);
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let m = message.expect("the inbound image got its media_id");
        let (_, _, api) = e.app.get(&format!("/api/public/v1/messages/{}", m.id), Some(&e.key)).await;
        let media_id = api["media_id"].as_str().unwrap().to_string();
        assert_eq!(api["text"], "my receipt");
        assert!(api["content"].get("id").is_none() && api["content"].get("url").is_none(), "{api}");
        let (s, _, media) = e.app.get(&format!("/api/public/v1/media/{media_id}"), Some(&e.key)).await;
        assert_eq!(s, 200, "{media}");
        assert_eq!(media["mime_type"], "image/jpeg");
        assert_eq!(media["size_bytes"], 70_000);
        let r = e.app.http.get(media["download_url"].as_str().unwrap()).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.bytes().await.unwrap().as_ref(), bytes.as_slice());
        let job = e.app.db.get_inbound_media(org, &wamid).await.unwrap().unwrap();
        assert!(job.done_at.is_some());
        assert_eq!(job.media_id.map(|i| i.to_string()), Some(media_id));
        stop(e).await;
    },

    a_failing_download_is_retried_and_holds_nothing_up_http => async |backend| {
        // the network is unreachable: nothing listens where the app looks for it
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let graph = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let app = TestApp::builder(backend).graph(&graph).workers().start().await;
        app.add_number(&app.org_id, "1001", "+14155550100").await;
        let ts = tern_domain::time::now_ms() / 1000;
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "w", "changes": [
            {"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "14155550100", "phone_number_id": "1001"},
                "contacts": [{"profile": {"name": "Ada"}, "wa_id": "447700900002"}],
                "messages": [
                    {"from": "447700900002", "id": "wamid.img1", "timestamp": ts.to_string(), "type": "image",
                     "image": {"id": "net-media-1", "mime_type": "image/jpeg", "sha256": "abc"}},
                    {"from": "447700900002", "id": "wamid.txt1", "timestamp": ts.to_string(), "type": "text",
                     "text": {"body": "did you get it?"}}
                ]}}]}]});
        let (s, _) = app.post_network(&serde_json::to_vec(&body).unwrap()).await;
        assert_eq!(s, 200);
        let org = app.org_uuid();
        let mut state = None;
        for _ in 0..400 {
            let text = app.db.message_id_by_wamid(org, "wamid.txt1").await.unwrap();
            let job = app.db.get_inbound_media(org, "wamid.img1").await.unwrap();
            if text.is_some() && job.as_ref().is_some_and(|j| j.attempts >= 2) {
                state = job;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        let job = state.expect("the text was stored and the download tried again");
        assert!(job.last_error.as_deref().is_some_and(|e| !e.is_empty()), "{job:?}");
        assert!(job.done_at.is_none() && job.media_id.is_none());
        let img = app.db.message_id_by_wamid(org, "wamid.img1").await.unwrap().unwrap();
        assert_eq!(app.db.get_message(org, img).await.unwrap().unwrap().media_id, None);
        app.stop().await;
    },
}
