//! POST /media `{"url"}`: the guard, redirects, failures, the deadline and the per-
//! organisation capacity across two server processes. Only loopback is ever connected to.

use super::fixture::FileServer;
use super::*;
use crate::common::assert_error;
use std::sync::atomic::Ordering;
use tokio::net::TcpListener;

const MIB: usize = 1024 * 1024;

tern_store::both_backends! { Backend;
    imports_through_the_guard_http => async |backend| {
        let files = FileServer::start().await;
        let app = app_for(backend, &files, "127.0.0.1/32", 30).await;
        let (_, key) = app.owner_key("full_access").await;
        let (s, _, b) = import(&app, &key, &files.url("/file/2048")).await;
        assert_eq!(s, 201, "{b}");
        assert_eq!(b["mime_type"], "image/jpeg");
        assert_eq!(b["size_bytes"], 2048);
        assert_eq!(b["filename"], "2048");
        // the answer's file name; a type sniffed when none is given
        let (s, _, b) = import(&app, &key, &files.url("/pdf/4096")).await;
        assert_eq!(s, 201, "{b}");
        assert_eq!((b["mime_type"].as_str(), b["filename"].as_str()), (Some("application/pdf"), Some("menu.pdf")));
        let (s, _, b) = import(&app, &key, &files.url("/untyped/100")).await;
        assert_eq!(s, 201, "{b}");
        assert_eq!(b["mime_type"], "image/jpeg");
        // the bytes must be what the answer says
        let (s, _, b) = import(&app, &key, &files.url("/lying")).await;
        assert_eq!(s, 400, "{b}");
        assert_eq!(field_of(&b), "url");
        // 16 MiB exactly passes, one byte more is too large
        let (s, _, b) = import(&app, &key, &files.url(&format!("/file/{}", 16 * MIB))).await;
        assert_eq!(s, 201, "{b}");
        let (s, h, b) = import(&app, &key, &files.url(&format!("/file/{}", 16 * MIB + 1))).await;
        assert_error(s, &h, &b, 400, "media_too_large");
        // 3 redirects pass, a 4th does not
        let (s, _, b) = import(&app, &key, &files.url("/redirect/3")).await;
        assert_eq!(s, 201, "{b}");
        let (s, h, b) = import(&app, &key, &files.url("/redirect/4")).await;
        assert_error(s, &h, &b, 409, "media_unavailable");
        assert_eq!(b["details"]["reason"], "too_many_redirects");
        // a redirect to an address that is not allowed (127.0.0.2 is loopback too, and only
        // 127.0.0.1 is allowed): refused before connecting
        let (s, _, b) = import(&app, &key, &files.url("/redirect-to/127.0.0.2")).await;
        assert_eq!(s, 400, "{b}");
        assert_eq!(field_of(&b), "url");
        assert!(b["details"]["fields"][0]["message"].as_str().unwrap().contains("127.0.0.2"), "{b}");
        // non-2xx
        let (s, h, b) = import(&app, &key, &files.url("/status/404")).await;
        assert_error(s, &h, &b, 409, "media_unavailable");
        assert_eq!(b["details"]["reason"], "http_status");
        assert_eq!(b["details"]["status"], 404);
        let (_, _, b) = import(&app, &key, &files.url("/status/503")).await;
        assert_eq!(b["details"]["status"], 503);
        // nothing listening
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let (s, h, b) = import(&app, &key, &format!("https://127.0.0.1:{port}/x.jpg")).await;
        assert_error(s, &h, &b, 409, "media_unavailable");
        assert_eq!(b["details"]["reason"], "fetch_failed");
        app.stop().await;
        files.stop();
    },

    the_guard_refuses_before_connecting_http => async |backend| {
        let files = FileServer::start().await;
        // TERN_ALLOW_NETWORKS unset: loopback is refused in every spelling
        let app = app_for(backend, &files, "", 30).await;
        let (_, key) = app.owner_key("full_access").await;
        let port = files.addr.port();
        for url in [
            format!("https://127.0.0.1:{port}/file/10"),
            format!("https://localhost:{port}/file/10"),
            format!("https://2130706433:{port}/file/10"),
            format!("https://0x7f.1:{port}/file/10"),
            format!("https://[::1]:{port}/file/10"),
            format!("https://[::ffff:127.0.0.1]:{port}/file/10"),
            format!("http://127.0.0.1:{port}/file/10"),
            format!("https://user:pw@127.0.0.1:{port}/file/10"),
            "https://169.254.169.254/latest/meta-data".to_string(),
            "not a url".to_string(),
        ] {
            let (s, h, b) = import(&app, &key, &url).await;
            assert_error(s, &h, &b, 400, "validation_failed");
            assert_eq!(field_of(&b), "url", "{url}: {b}");
        }
        assert_eq!(files.held.load(Ordering::SeqCst), 0);
        app.stop().await;
        files.stop();
    },

    a_slow_server_times_out_http => async |backend| {
        let files = FileServer::start().await;
        let app = app_for(backend, &files, "127.0.0.1/32", 1).await;
        let (_, key) = app.owner_key("full_access").await;
        let (s, h, b) = import(&app, &key, &files.url("/slow")).await;
        assert_error(s, &h, &b, 409, "media_unavailable");
        assert_eq!(b["details"]["reason"], "timeout");
        app.stop().await;
        files.stop();
    },

    two_imports_at_once_per_organisation_across_processes_http => async |backend| {
        let files = FileServer::start().await;
        let app = app_for(backend, &files, "127.0.0.1/32", 30).await;
        let (_, key) = app.owner_key("full_access").await;
        // a second server process on the same database
        let mut config = crate::common::test_config();
        config.extra_ca_file = Some(files.ca_file.path().to_path_buf());
        config.allow_networks = vec!["127.0.0.1/32".parse().unwrap()];
        config.media_store = tern_core::media::Location::File(app.media_dir.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let second = format!("http://{}", listener.local_addr().unwrap());
        let state = tern::app::state(app.db.clone(), app.key.clone(), &config);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(tern::app::serve_on(listener, state, async move { let _ = rx.await; }));

        let url = files.url("/hold");
        let first = {
            let (app_http, base, key, url) = (app.http.clone(), app.base.clone(), key.clone(), url.clone());
            tokio::spawn(async move {
                send(app_http.post(format!("{base}/api/public/v1/media")).bearer_auth(&key)
                    .json(&serde_json::json!({"url": url}))).await
            })
        };
        let other = {
            let (app_http, key, url) = (app.http.clone(), key.clone(), url.clone());
            tokio::spawn(async move {
                send(app_http.post(format!("{second}/api/public/v1/media")).bearer_auth(&key)
                    .json(&serde_json::json!({"url": url}))).await
            })
        };
        while files.held.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // both slots are taken: a third, on either process, is refused at once
        let (s, h, b) = import(&app, &key, &files.url("/file/10")).await;
        assert_error(s, &h, &b, 429, "rate_limited");
        assert_eq!(b["details"]["reason"], "media_import_capacity");
        assert_eq!(h["retry-after"], "1");
        files.hold.add_permits(2);
        let (s1, _, b1) = first.await.unwrap();
        let (s2, _, b2) = other.await.unwrap();
        assert_eq!((s1, s2), (201, 201), "{b1} {b2}");
        // slots are free again
        let (s, _, b) = import(&app, &key, &files.url("/file/10")).await;
        assert_eq!(s, 201, "{b}");
        let _ = tx.send(());
        app.stop().await;
        files.stop();
    },
}
