//! The signed download link as an attacker would use it: `Range` edge cases never give a
//! 5xx, and customers' bytes are served so that no browser runs them as a page of the API's
//! origin (DESIGN "Hardening").

use super::fixture::jpeg;
use super::*;

/// (link, bytes) of a file uploaded with `mime` and `name`.
async fn uploaded(app: &TestApp, key: &str, bytes: &[u8], mime: &str, name: &str) -> String {
    let (s, _, b) = upload(app, key, bytes.to_vec(), Some(mime), name).await;
    assert_eq!(s, 201, "{b}");
    let id = b["media_id"].as_str().unwrap();
    let (s, _, m) = app
        .get(&format!("/api/public/v1/media/{id}"), Some(key))
        .await;
    assert_eq!(s, 200, "{m}");
    m["download_url"].as_str().unwrap().to_string()
}

async fn fetch(app: &TestApp, url: &str, range: &str) -> reqwest::Response {
    app.http
        .get(url)
        .header("Range", range)
        .send()
        .await
        .unwrap()
}

/// (Range, status, Content-Range, the bytes served)
type Case = (
    &'static str,
    u16,
    Option<&'static str>,
    Option<std::ops::Range<usize>>,
);

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing: {:?}", r.headers()))
        .to_str()
        .unwrap()
}

tern_store::both_backends! { TestApp;
    range_ends_past_the_file_mean_to_the_end_http => async |app: &TestApp| {
        let (_, key) = app.owner_key("full_access").await;
        let bytes = jpeg(1000);
        let url = uploaded(app, &key, &bytes, "image/jpeg", "a.jpg").await;

        let cases: &[Case] = &[
            ("bytes=0-18446744073709551615", 206, Some("bytes 0-999/1000"), Some(0..1000)),
            ("bytes=10-18446744073709551614", 206, Some("bytes 10-999/1000"), Some(10..1000)),
            ("bytes=990-99999999999999999999999999", 206, Some("bytes 990-999/1000"), Some(990..1000)),
            ("bytes=999-", 206, Some("bytes 999-999/1000"), Some(999..1000)),
            ("bytes=-18446744073709551615", 206, Some("bytes 0-999/1000"), Some(0..1000)),
            ("bytes=-1", 206, Some("bytes 999-999/1000"), Some(999..1000)),
            // starts past the end, however large: not satisfiable
            ("bytes=1000-", 416, Some("bytes */1000"), None),
            ("bytes=18446744073709551615-18446744073709551615", 416, Some("bytes */1000"), None),
            ("bytes=99999999999999999999999999-", 416, Some("bytes */1000"), None),
            ("bytes=-0", 416, Some("bytes */1000"), None),
            // malformed or several ranges: ignored, the whole file
            ("bytes=5-1", 200, None, Some(0..1000)),
            ("bytes=+1-2", 200, None, Some(0..1000)),
            ("bytes=a-b", 200, None, Some(0..1000)),
            ("bytes=-", 200, None, Some(0..1000)),
            ("bytes=", 200, None, Some(0..1000)),
            ("lines=0-1", 200, None, Some(0..1000)),
            ("bytes=0-1,5-6", 200, None, Some(0..1000)),
        ];
        for (range, status, content_range, served) in cases {
            let r = fetch(app, &url, range).await;
            assert_eq!(r.status().as_u16(), *status, "{range}");
            assert_eq!(
                r.headers().get("content-range").map(|v| v.to_str().unwrap()),
                *content_range,
                "{range}"
            );
            assert_eq!(header(&r, "x-content-type-options"), "nosniff", "{range}");
            let body = r.bytes().await.unwrap();
            if let Some(s) = served {
                assert_eq!(body.as_ref(), &bytes[s.clone()], "{range}");
            }
        }
    },

    downloads_are_not_pages_of_the_api_origin_http => async |app: &TestApp| {
        let (_, key) = app.owner_key("full_access").await;
        // Markup uploaded as text: it passes the type check (its bytes match no signature).
        let markup = b"hi <svg onload=alert(document.domain)><script>alert(1)</script>\n";
        let text = uploaded(app, &key, markup, "text/plain", "note.txt").await;
        let r = app.http.get(&text).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "content-type"), "text/plain");
        assert_eq!(header(&r, "x-content-type-options"), "nosniff");
        assert_eq!(header(&r, "content-security-policy"), "sandbox");
        assert_eq!(header(&r, "content-disposition"), "attachment; filename=\"note.txt\"");
        // a range of it too
        let r = fetch(app, &text, "bytes=0-3").await;
        assert_eq!(r.status(), 206);
        assert_eq!(header(&r, "content-disposition"), "attachment; filename=\"note.txt\"");
        assert_eq!(header(&r, "content-security-policy"), "sandbox");
        let r = fetch(app, &text, "bytes=9999-").await;
        assert_eq!(r.status(), 416);
        assert_eq!(header(&r, "x-content-type-options"), "nosniff");
        assert_eq!(header(&r, "content-security-policy"), "sandbox");

        // An image is shown inline, still without sniffing or scripts.
        let image = uploaded(app, &key, &jpeg(500), "image/jpeg", "photo.jpg").await;
        let r = app.http.get(&image).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(header(&r, "x-content-type-options"), "nosniff");
        assert_eq!(header(&r, "content-security-policy"), "sandbox");
        assert_eq!(header(&r, "content-disposition"), "inline; filename=\"photo.jpg\"");

        // A file without a name is still a download.
        let form = reqwest::multipart::Form::new().part(
            "file",
            reqwest::multipart::Part::bytes(b"plain words\n".to_vec()).mime_str("text/plain").unwrap(),
        );
        let (s, _, b) = send(app.http.post(app.url("/api/public/v1/media")).bearer_auth(&key).multipart(form)).await;
        assert_eq!(s, 201, "{b}");
        assert!(b["filename"].is_null(), "{b}");
        let id = b["media_id"].as_str().unwrap();
        let (_, _, m) = app.get(&format!("/api/public/v1/media/{id}"), Some(&key)).await;
        let r = app.http.get(m["download_url"].as_str().unwrap()).send().await.unwrap();
        assert_eq!(header(&r, "content-disposition"), "attachment");
    },
}
