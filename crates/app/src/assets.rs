//! The app's CSS, JavaScript and icon, embedded in the binary and served from
//! `/app/assets/<name>.<hash>.<ext>`. The hash (of the content) changes with every change
//! of a file, so the answers can be cached for a year and a new binary is never served a
//! stale stylesheet.

use crate::errors::AppError;
use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use std::sync::LazyLock;

/// One embedded file.
pub struct Asset {
    /// The name in the URL, with the content hash (`app.3f9a0c1d2e4b.css`).
    pub file: String,
    /// The full path to put in a page.
    pub href: String,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

impl Asset {
    fn new(stem: &str, ext: &str, content_type: &'static str, body: &'static [u8]) -> Asset {
        let digest = Sha256::digest(body);
        let hash: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
        let file = format!("{stem}.{hash}.{ext}");
        Asset {
            href: format!("{}/assets/{file}", crate::PREFIX),
            file,
            content_type,
            body,
        }
    }
}

pub static CSS: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "app",
        "css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/app.css"),
    )
});

pub static JS: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "app",
        "js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/app.js"),
    )
});

pub static ICON: LazyLock<Asset> = LazyLock::new(|| {
    Asset::new(
        "icon",
        "svg",
        "image/svg+xml",
        include_bytes!("../assets/icon.svg"),
    )
});

/// The stylesheet's address (for templates).
pub fn css_href() -> &'static str {
    &CSS.href
}

/// The script's address (for templates).
pub fn js_href() -> &'static str {
    &JS.href
}

/// The icon's address (for templates).
pub fn icon_href() -> &'static str {
    &ICON.href
}

/// Long enough to never ask again: the name changes when the content does.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// `GET /app/assets/{file}`: only the current names; an old hash is a 404 (it would be the
/// wrong content under a name promised never to change).
pub async fn serve(Path(file): Path<String>) -> Response {
    let Some(asset) = [&*CSS, &*JS, &*ICON].into_iter().find(|a| a.file == file) else {
        return AppError::NotFound.into_response();
    };
    let mut res = asset.body.into_response();
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(IMMUTABLE));
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_content_hash() {
        assert!(CSS.file.starts_with("app.") && CSS.file.ends_with(".css"));
        assert_eq!(CSS.file.len(), "app.".len() + 12 + ".css".len());
        assert_eq!(JS.href, format!("/app/assets/{}", JS.file));
        assert_ne!(CSS.file, JS.file);
    }
}
