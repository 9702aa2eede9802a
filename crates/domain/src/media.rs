//! Media rules, without I/O: which file types the network carries, whether bytes are what
//! their declared type says (magic numbers, via `infer`), the upload ceiling, the per-type
//! limits of a media message, and the signed download link.
//!
//! Sizes follow the network's table (cloud-api.md §4), read as binary units like the
//! simulator does: "5 MB" is 5 × 1024 × 1024 bytes.

use std::fmt;

use crate::send::Kind;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// Largest file `POST /media` takes (uploads and imports alike): 16 MiB exactly passes.
pub const MAX_UPLOAD_BYTES: u64 = 16 * MIB;
/// How long media are kept after creation.
pub const MEDIA_TTL_MS: i64 = 30 * 24 * 60 * 60 * 1000;
/// How long a signed download link is valid.
pub const LINK_TTL_MS: i64 = 5 * 60 * 1000;
/// How many bytes of a file's start are kept for sniffing; enough for every signature
/// here (OOXML names its parts within the first local file headers).
pub const SNIFF_BYTES: usize = 8 * 1024;

/// One file type the network carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaType {
    pub mime: &'static str,
    /// The message type that carries it.
    pub kind: Kind,
    /// Largest file of this type in a message of `kind`.
    pub max_bytes: u64,
    family: Family,
}

/// What the bytes of a type look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Jpeg,
    Png,
    Webp,
    /// ISO base media (`ftyp` box): MP4, 3GPP, M4A.
    IsoMedia,
    Ogg,
    Mp3,
    Aac,
    Amr,
    Pdf,
    /// Office Open XML: a ZIP whose parts say which application.
    Ooxml(&'static str),
    /// Office 97–2003: an OLE compound file.
    Ole(&'static str),
    /// No signature: passes when the bytes are not recognisably something else.
    Text,
}

const DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
const XLSX: &str = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet";
const PPTX: &str = "application/vnd.openxmlformats-officedocument.presentationml.presentation";

/// Every type the network supports (cloud-api.md §4).
pub const TYPES: [MediaType; 18] = [
    t("image/jpeg", Kind::Image, 5 * MIB, Family::Jpeg),
    t("image/png", Kind::Image, 5 * MIB, Family::Png),
    t("image/webp", Kind::Sticker, 500 * KIB, Family::Webp),
    t("video/mp4", Kind::Video, 16 * MIB, Family::IsoMedia),
    t("video/3gpp", Kind::Video, 16 * MIB, Family::IsoMedia),
    t("audio/aac", Kind::Audio, 16 * MIB, Family::Aac),
    t("audio/amr", Kind::Audio, 16 * MIB, Family::Amr),
    t("audio/mpeg", Kind::Audio, 16 * MIB, Family::Mp3),
    t("audio/mp4", Kind::Audio, 16 * MIB, Family::IsoMedia),
    t("audio/ogg", Kind::Audio, 16 * MIB, Family::Ogg),
    t("text/plain", Kind::Document, 100 * MIB, Family::Text),
    t("application/pdf", Kind::Document, 100 * MIB, Family::Pdf),
    t(
        "application/msword",
        Kind::Document,
        100 * MIB,
        Family::Ole("application/msword"),
    ),
    t(
        "application/vnd.ms-excel",
        Kind::Document,
        100 * MIB,
        Family::Ole("application/vnd.ms-excel"),
    ),
    t(
        "application/vnd.ms-powerpoint",
        Kind::Document,
        100 * MIB,
        Family::Ole("application/vnd.ms-powerpoint"),
    ),
    t(DOCX, Kind::Document, 100 * MIB, Family::Ooxml(DOCX)),
    t(XLSX, Kind::Document, 100 * MIB, Family::Ooxml(XLSX)),
    t(PPTX, Kind::Document, 100 * MIB, Family::Ooxml(PPTX)),
];

const fn t(mime: &'static str, kind: Kind, max_bytes: u64, family: Family) -> MediaType {
    MediaType {
        mime,
        kind,
        max_bytes,
        family,
    }
}

/// A static WebP sticker is at most 100 KB (an animated one 500 KB).
pub const STATIC_STICKER_MAX_BYTES: u64 = 100 * KIB;

/// `image/JPEG; charset=x` → `image/jpeg`.
pub fn normalize_mime(raw: &str) -> String {
    raw.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The supported type named `mime` (already normalised).
pub fn lookup(mime: &str) -> Option<&'static MediaType> {
    TYPES.iter().find(|t| t.mime == mime)
}

/// The supported types, for messages ("supported: image/jpeg, …").
pub fn supported_list() -> String {
    let mut seen: Vec<&str> = Vec::new();
    for t in &TYPES {
        if !seen.contains(&t.mime) {
            seen.push(t.mime);
        }
    }
    seen.join(", ")
}

/// Why a file's type is refused (rendered as the message of the `file` / `url` field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TypeRefusal {
    /// The declared type is not one the network carries.
    Unsupported { declared: String },
    /// No type was declared and the bytes are not of a supported type.
    Unknown { detected: Option<String> },
    /// The bytes are something else than the declared type.
    Mismatch {
        declared: String,
        detected: Option<String>,
    },
}

impl fmt::Display for TypeRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unsupported { declared } => write!(
                f,
                "has type {declared}, which the network does not carry; supported: {}",
                supported_list()
            ),
            Self::Unknown { detected: Some(d) } => write!(
                f,
                "looks like {d}, which the network does not carry; supported: {}",
                supported_list()
            ),
            Self::Unknown { detected: None } => write!(
                f,
                "has no declared type and its bytes are not of a supported type; declare the \
                 part's Content-Type (supported: {})",
                supported_list()
            ),
            Self::Mismatch {
                declared,
                detected: Some(d),
            } => write!(f, "is declared as {declared} but its bytes are {d}"),
            Self::Mismatch {
                declared,
                detected: None,
            } => write!(
                f,
                "is declared as {declared} but its bytes are not {declared}"
            ),
        }
    }
}

/// The type a file's first bytes show, by magic number (`None`: no known signature).
pub fn sniff(head: &[u8]) -> Option<String> {
    if is_iso_media(head) {
        // infer names only some `ftyp` brands; 3GPP and QuickTime-branded files are the same
        // container to the network.
        return Some(match infer::get(head).map(|k| k.mime_type()) {
            Some("audio/m4a") => "audio/mp4".into(),
            _ if head.get(8..11) == Some(b"3gp") => "video/3gpp".into(),
            _ => "video/mp4".into(),
        });
    }
    infer::get(head).map(|k| match k.mime_type() {
        "audio/opus" => "audio/ogg".to_string(),
        other => other.to_string(),
    })
}

fn is_iso_media(head: &[u8]) -> bool {
    head.get(4..8) == Some(b"ftyp")
}

/// Decides a file's type from what was declared (a part's Content-Type, an import's answer
/// Content-Type; `None` or `application/octet-stream` when nothing useful was said) and its
/// first bytes ([`SNIFF_BYTES`] or the whole file when shorter).
pub fn decide_type(declared: Option<&str>, head: &[u8]) -> Result<&'static MediaType, TypeRefusal> {
    let detected = sniff(head);
    let declared = declared
        .map(normalize_mime)
        .filter(|d| !d.is_empty() && d != "application/octet-stream");
    let Some(declared) = declared else {
        return match detected.as_deref().and_then(lookup) {
            Some(t) => Ok(t),
            None => Err(TypeRefusal::Unknown { detected }),
        };
    };
    let Some(ty) = lookup(&declared) else {
        return Err(TypeRefusal::Unsupported { declared });
    };
    if matches_family(ty.family, detected.as_deref(), head) {
        Ok(ty)
    } else {
        Err(TypeRefusal::Mismatch { declared, detected })
    }
}

fn matches_family(family: Family, detected: Option<&str>, head: &[u8]) -> bool {
    let d = detected.unwrap_or("");
    match family {
        Family::Jpeg => d == "image/jpeg",
        Family::Png => d == "image/png",
        Family::Webp => d == "image/webp",
        Family::IsoMedia => is_iso_media(head),
        Family::Ogg => d == "audio/ogg",
        Family::Mp3 => d == "audio/mpeg",
        Family::Aac => d == "audio/aac",
        Family::Amr => d == "audio/amr",
        Family::Pdf => d == "application/pdf",
        // A ZIP whose first parts do not name the application passes; another Office
        // application's file does not.
        Family::Ooxml(m) => d == m || d == "application/zip",
        Family::Ole(m) => d == m || d == "application/x-ole-storage",
        Family::Text => detected.is_none(),
    }
}

/// An animated WebP (a `VP8X` header with the animation flag): stickers of 500 KB instead
/// of 100 KB.
pub fn is_animated_webp(head: &[u8]) -> bool {
    head.get(0..4) == Some(b"RIFF")
        && head.get(8..12) == Some(b"WEBP")
        && head.get(12..16) == Some(b"VP8X")
        && head.get(20).is_some_and(|flags| flags & 0x02 != 0)
}

/// Why stored media cannot be sent as a message of a type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageRefusal {
    /// The file's type is not carried by this message type ("a PDF is not an image").
    WrongType {
        mime: String,
        allowed: Vec<&'static str>,
    },
    /// Over the message type's limit for this file type.
    TooLarge { size: u64, limit: u64 },
}

impl fmt::Display for MessageRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::WrongType { mime, allowed } => write!(
                f,
                "is a {mime} file, which this message type does not carry; allowed: {}",
                allowed.join(", ")
            ),
            Self::TooLarge { size, limit } => write!(
                f,
                "is {size} bytes; this message type takes at most {limit} bytes for the file's type"
            ),
        }
    }
}

/// The network's per-type rules for sending stored media (`mime`, `size` bytes) as a
/// message of `kind`.
pub fn check_for_message(
    kind: Kind,
    mime: &str,
    size: u64,
    animated: bool,
) -> Result<(), MessageRefusal> {
    let Some(ty) = TYPES.iter().find(|t| t.kind == kind && t.mime == mime) else {
        let mut allowed: Vec<&'static str> = Vec::new();
        for t in TYPES.iter().filter(|t| t.kind == kind) {
            if !allowed.contains(&t.mime) {
                allowed.push(t.mime);
            }
        }
        return Err(MessageRefusal::WrongType {
            mime: mime.to_string(),
            allowed,
        });
    };
    let limit = if kind == Kind::Sticker && !animated {
        STATIC_STICKER_MAX_BYTES
    } else {
        ty.max_bytes
    };
    if size > limit {
        return Err(MessageRefusal::TooLarge { size, limit });
    }
    Ok(())
}

/// The signed part of a download link: `media_id` and expiry (unix ms) bound together.
pub fn link_payload(media_id: &str, expires_at_ms: i64) -> Vec<u8> {
    format!("media-download:{media_id}:{expires_at_ms}").into_bytes()
}

/// A file name fit for a Content-Disposition header and the network's upload: the last path
/// segment, without control characters or quotes, at most 200 characters.
pub fn clean_filename(raw: &str) -> Option<String> {
    let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let cleaned: String = last
        .chars()
        .filter(|c| !c.is_control() && *c != '"')
        .take(200)
        .collect();
    let cleaned = cleaned.trim().to_string();
    (!cleaned.is_empty() && cleaned != "." && cleaned != "..").then_some(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JPEG: &[u8] = &[0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, b'J', b'F', b'I', b'F', 0];
    const PNG: &[u8] = &[
        0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D,
    ];
    const PDF: &[u8] = b"%PDF-1.7\n%\xE2\xE3\xCF\xD3\n";

    fn ftyp(brand: &[u8; 4]) -> Vec<u8> {
        let mut v = vec![0, 0, 0, 0x18];
        v.extend_from_slice(b"ftyp");
        v.extend_from_slice(brand);
        v.extend_from_slice(&[0; 12]);
        v
    }

    fn webp(animated: bool) -> Vec<u8> {
        let mut v = b"RIFF\x00\x01\x00\x00WEBPVP8X".to_vec();
        v.extend_from_slice(&[10, 0, 0, 0, if animated { 0x02 } else { 0 }, 0, 0, 0]);
        v.extend_from_slice(&[0; 16]);
        v
    }

    #[test]
    fn declared_types_must_match_their_bytes() {
        assert_eq!(
            decide_type(Some("image/jpeg"), JPEG).unwrap().mime,
            "image/jpeg"
        );
        assert_eq!(
            decide_type(Some("IMAGE/PNG; x=y"), PNG).unwrap().mime,
            "image/png"
        );
        assert_eq!(
            decide_type(Some("image/png"), JPEG),
            Err(TypeRefusal::Mismatch {
                declared: "image/png".into(),
                detected: Some("image/jpeg".into())
            })
        );
        assert_eq!(
            decide_type(Some("application/pdf"), b"hello"),
            Err(TypeRefusal::Mismatch {
                declared: "application/pdf".into(),
                detected: None
            })
        );
        assert!(matches!(
            decide_type(Some("image/gif"), b"GIF89a...."),
            Err(TypeRefusal::Unsupported { .. })
        ));
    }

    #[test]
    fn iso_media_brands_are_one_container() {
        for (declared, brand) in [
            ("video/mp4", b"isom"),
            ("video/mp4", b"mp42"),
            ("video/3gpp", b"3gp4"),
            ("audio/mp4", b"M4A "),
            ("video/mp4", b"qt  "),
        ] {
            assert!(
                decide_type(Some(declared), &ftyp(brand)).is_ok(),
                "{declared} {brand:?}"
            );
        }
        assert_eq!(sniff(&ftyp(b"3gp5")).as_deref(), Some("video/3gpp"));
        assert!(decide_type(Some("image/jpeg"), &ftyp(b"isom")).is_err());
    }

    #[test]
    fn text_passes_unless_recognisably_something_else() {
        assert!(decide_type(Some("text/plain"), b"just words\n").is_ok());
        assert!(decide_type(Some("text/plain"), PDF).is_err());
        assert!(decide_type(Some("text/plain"), JPEG).is_err());
    }

    #[test]
    fn undeclared_types_are_sniffed() {
        assert_eq!(decide_type(None, JPEG).unwrap().mime, "image/jpeg");
        assert_eq!(
            decide_type(Some("application/octet-stream"), PDF)
                .unwrap()
                .mime,
            "application/pdf"
        );
        assert_eq!(
            decide_type(None, b"plain words"),
            Err(TypeRefusal::Unknown { detected: None })
        );
        assert!(matches!(
            decide_type(None, b"GIF89a\x01\x00\x01\x00"),
            Err(TypeRefusal::Unknown { detected: Some(_) })
        ));
    }

    #[test]
    fn office_files() {
        let ole = [0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
        let mut buf = ole.to_vec();
        buf.resize(600, 0);
        assert!(decide_type(Some("application/msword"), &buf).is_ok());
        let zip = b"PK\x03\x04\x14\x00\x00\x00\x08\x00";
        assert!(decide_type(Some(DOCX), zip).is_ok());
        assert!(decide_type(Some("application/pdf"), zip).is_err());
    }

    #[test]
    fn webp_animation_flag() {
        assert!(is_animated_webp(&webp(true)));
        assert!(!is_animated_webp(&webp(false)));
        assert_eq!(
            decide_type(Some("image/webp"), &webp(true)).unwrap().kind,
            Kind::Sticker
        );
    }

    #[test]
    fn per_type_limits_of_messages() {
        assert!(check_for_message(Kind::Image, "image/jpeg", 5 * MIB, false).is_ok());
        assert_eq!(
            check_for_message(Kind::Image, "image/jpeg", 5 * MIB + 1, false),
            Err(MessageRefusal::TooLarge {
                size: 5 * MIB + 1,
                limit: 5 * MIB
            })
        );
        assert!(matches!(
            check_for_message(Kind::Image, "application/pdf", 10, false),
            Err(MessageRefusal::WrongType { .. })
        ));
        assert!(check_for_message(Kind::Sticker, "image/webp", 100 * KIB, false).is_ok());
        assert!(check_for_message(Kind::Sticker, "image/webp", 100 * KIB + 1, false).is_err());
        assert!(check_for_message(Kind::Sticker, "image/webp", 500 * KIB, true).is_ok());
        assert!(check_for_message(Kind::Sticker, "image/webp", 500 * KIB + 1, true).is_err());
        assert!(check_for_message(Kind::Video, "video/mp4", 16 * MIB, false).is_ok());
        assert!(check_for_message(Kind::Audio, "audio/ogg", 16 * MIB + 1, false).is_err());
        assert!(check_for_message(Kind::Document, "image/jpeg", 10, false).is_err());
        assert!(check_for_message(Kind::Document, "text/plain", 16 * MIB, false).is_ok());
    }

    #[test]
    fn filenames_are_cleaned() {
        assert_eq!(clean_filename("a/b/c.pdf").as_deref(), Some("c.pdf"));
        assert_eq!(clean_filename("x\"y\n.txt").as_deref(), Some("xy.txt"));
        assert_eq!(clean_filename("dir/"), None);
        assert_eq!(clean_filename(".."), None);
    }
}
