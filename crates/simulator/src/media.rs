//! Media rules of the network (reference §4): the MIME/size table, lifetimes, and the
//! content checks of an upload (the bytes must be what the declared MIME type says).

use bytes::Bytes;

/// Uploaded media ids live 30 days.
pub const UPLOAD_TTL_SECS: i64 = 30 * 24 * 3600;
/// Media ids created for inbound messages live 7 days.
pub const INBOUND_TTL_SECS: i64 = 7 * 24 * 3600;
/// Download URLs from `GET /{media-id}` live 5 minutes.
pub const URL_TTL_SECS: i64 = 5 * 60;

const MB: usize = 1024 * 1024;

const OOXML_DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
const OOXML_XLSX: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
const OOXML_PPTX: &str =
    "application/vnd.openxmlformats-officedocument.presentationml.presentation";
const OLE_MAGIC: [u8; 8] = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];

/// Every allowed type but `text/plain`.
const BINARY_TYPES: [&str; 17] = [
    "audio/aac",
    "audio/amr",
    "audio/mpeg",
    "audio/mp4",
    "audio/ogg",
    "video/mp4",
    "video/3gpp",
    "image/jpeg",
    "image/png",
    "image/webp",
    "application/pdf",
    "application/msword",
    "application/vnd.ms-excel",
    "application/vnd.ms-powerpoint",
    OOXML_DOCX,
    OOXML_XLSX,
    OOXML_PPTX,
];

/// Largest file for a MIME type of the §4 table; `None` when the type is not allowed.
pub fn size_limit(mime: &str) -> Option<usize> {
    Some(match mime {
        "audio/aac" | "audio/amr" | "audio/mpeg" | "audio/mp4" | "audio/ogg" => 16 * MB,
        "video/mp4" | "video/3gpp" => 16 * MB,
        "image/jpeg" | "image/png" => 5 * MB,
        // stickers: static 100 KB, animated 500 KB (an upload is not told which)
        "image/webp" => 500 * 1024,
        "text/plain"
        | "application/pdf"
        | "application/msword"
        | "application/vnd.ms-excel"
        | "application/vnd.ms-powerpoint"
        | OOXML_DOCX
        | OOXML_XLSX
        | OOXML_PPTX => 100 * MB,
        _ => return None,
    })
}

/// ISO base media file (MP4 family): a `ftyp` box first; returns its major brand.
fn iso_brand(b: &[u8]) -> Option<&[u8]> {
    (b.len() >= 12 && &b[4..8] == b"ftyp").then(|| &b[8..12])
}

/// ADTS (MPEG-2/4 AAC) frame sync, or an ADIF header.
fn is_aac(b: &[u8]) -> bool {
    infer::audio::is_aac(b)
        || (b.len() > 1 && b[0] == 0xFF && b[1] & 0xF6 == 0xF0)
        || b.starts_with(b"ADIF")
}

/// Whether `data` is recognisably a file of the (allowed) MIME type `mime`.
/// `text/plain` accepts anything that is not recognisably another type.
pub fn content_matches(mime: &str, data: &[u8]) -> bool {
    match mime {
        "image/jpeg" => infer::image::is_jpeg(data),
        "image/png" => infer::image::is_png(data),
        "image/webp" => data.starts_with(b"RIFF") && infer::image::is_webp(data),
        "video/mp4" | "audio/mp4" => iso_brand(data).is_some(),
        "video/3gpp" => iso_brand(data).is_some_and(|b| b.starts_with(b"3g")),
        "audio/ogg" => infer::audio::is_ogg(data),
        "audio/mpeg" => infer::audio::is_mp3(data),
        "audio/aac" => is_aac(data),
        "audio/amr" => data.starts_with(b"#!AMR"),
        "application/pdf" => infer::archive::is_pdf(data),
        OOXML_DOCX | OOXML_XLSX | OOXML_PPTX => data.starts_with(b"PK\x03\x04"),
        "application/msword" | "application/vnd.ms-excel" | "application/vnd.ms-powerpoint" => {
            data.starts_with(&OLE_MAGIC)
        }
        "text/plain" => {
            !BINARY_TYPES.iter().any(|m| content_matches(m, data))
                && infer::get(data).is_none_or(|t| t.matcher_type() == infer::MatcherType::Text)
        }
        _ => false,
    }
}

/// What the bytes look like, for the mismatch message.
pub fn detected(data: &[u8]) -> String {
    if data.starts_with(&OLE_MAGIC) {
        return "an OLE compound document".into();
    }
    if let Some(b) = iso_brand(data) {
        return format!("an ISO media file (brand {})", String::from_utf8_lossy(b));
    }
    match infer::get(data) {
        Some(t) => t.mime_type().to_owned(),
        None => "not a recognised media type".into(),
    }
}

/// MIME types a file name's extension stands for; `None` for unknown or no extension
/// (then only the content is checked).
pub fn extension_mimes(filename: &str) -> Option<&'static [&'static str]> {
    let ext = filename.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "jpg" | "jpeg" | "jpe" => &["image/jpeg"],
        "png" => &["image/png"],
        "webp" => &["image/webp"],
        "mp4" | "m4v" => &["video/mp4", "audio/mp4"],
        "m4a" => &["audio/mp4"],
        "3gp" | "3gpp" => &["video/3gpp"],
        "ogg" | "oga" | "opus" => &["audio/ogg"],
        "mp3" => &["audio/mpeg"],
        "aac" => &["audio/aac"],
        "amr" => &["audio/amr"],
        "pdf" => &["application/pdf"],
        "txt" => &["text/plain"],
        "doc" => &["application/msword"],
        "xls" => &["application/vnd.ms-excel"],
        "ppt" => &["application/vnd.ms-powerpoint"],
        "docx" => &[OOXML_DOCX],
        "xlsx" => &[OOXML_XLSX],
        "pptx" => &[OOXML_PPTX],
        _ => return None,
    })
}

/// A small file that passes the upload checks for `mime` (magic number + `label`), or
/// `None` when the network does not accept the type. Used for inbound media without
/// `media_base64`, and handy in tests.
pub fn sample_media(mime: &str, label: &str) -> Option<Bytes> {
    size_limit(mime)?;
    let mut b: Vec<u8> = match mime {
        "image/jpeg" => {
            b"\xFF\xD8\xFF\xE0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00".to_vec()
        }
        "image/png" => b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec(),
        "image/webp" => b"RIFF\x24\x00\x00\x00WEBPVP8 ".to_vec(),
        "video/mp4" => b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2".to_vec(),
        "audio/mp4" => b"\x00\x00\x00\x18ftypM4A \x00\x00\x02\x00M4A isom".to_vec(),
        "video/3gpp" => b"\x00\x00\x00\x14ftyp3gp4\x00\x00\x00\x003gp4".to_vec(),
        "audio/ogg" => b"OggS\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00".to_vec(),
        "audio/mpeg" => b"ID3\x04\x00\x00\x00\x00\x00\x00".to_vec(),
        "audio/aac" => b"\xFF\xF1\x50\x80\x02\x1F\xFC".to_vec(),
        "audio/amr" => b"#!AMR\n".to_vec(),
        "application/pdf" => b"%PDF-1.4\n".to_vec(),
        OOXML_DOCX | OOXML_XLSX | OOXML_PPTX => b"PK\x03\x04\x14\x00\x00\x00".to_vec(),
        "application/msword" | "application/vnd.ms-excel" | "application/vnd.ms-powerpoint" => {
            OLE_MAGIC.to_vec()
        }
        _ => Vec::new(), // text/plain
    };
    b.extend_from_slice(format!("simulated media {label}\n").as_bytes());
    Some(Bytes::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [&str; 18] = [
        "audio/aac",
        "audio/amr",
        "audio/mpeg",
        "audio/mp4",
        "audio/ogg",
        "video/mp4",
        "video/3gpp",
        "image/jpeg",
        "image/png",
        "image/webp",
        "text/plain",
        "application/pdf",
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",
        OOXML_DOCX,
        OOXML_XLSX,
        OOXML_PPTX,
    ];

    #[test]
    fn samples_match_their_type_only() {
        for mime in ALL {
            let s = sample_media(mime, "x").expect(mime);
            assert!(content_matches(mime, &s), "{mime}");
            for other in ALL {
                let same_family = [
                    ["video/mp4", "audio/mp4"],
                    ["application/msword", "application/vnd.ms-excel"],
                    ["application/msword", "application/vnd.ms-powerpoint"],
                    ["application/vnd.ms-excel", "application/vnd.ms-powerpoint"],
                    [OOXML_DOCX, OOXML_XLSX],
                    [OOXML_DOCX, OOXML_PPTX],
                    [OOXML_XLSX, OOXML_PPTX],
                    ["video/3gpp", "video/mp4"],
                    ["video/3gpp", "audio/mp4"],
                ]
                .iter()
                .any(|p| p.contains(&mime) && p.contains(&other));
                if other != mime && !same_family {
                    assert!(!content_matches(other, &s), "{mime} bytes pass as {other}");
                }
            }
        }
        assert!(sample_media("application/x-msdownload", "x").is_none());
    }

    #[test]
    fn text_is_anything_unrecognised() {
        assert!(content_matches("text/plain", b"hello, world\n"));
        assert!(content_matches("text/plain", "grüße".as_bytes()));
        assert!(!content_matches("text/plain", b"%PDF-1.7 ..."));
        assert!(!content_matches("text/plain", b"\x89PNG\r\n\x1a\n"));
        assert!(!content_matches("image/png", b"hello"));
        assert!(!content_matches("image/jpeg", b""));
    }

    #[test]
    fn extensions() {
        assert_eq!(extension_mimes("a.JPG"), Some(&["image/jpeg"][..]));
        assert_eq!(extension_mimes("report"), None);
        assert_eq!(extension_mimes("x.bin"), None);
        assert!(extension_mimes("v.mp4").unwrap().contains(&"audio/mp4"));
    }
}
