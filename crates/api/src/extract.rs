//! Request extractors that refuse bad input with the contract's error body instead of the
//! framework's plain-text rejections.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::header;
use serde::de::DeserializeOwned;
use tern_domain::{ErrorCode, FieldError, Problem, text};

/// A JSON body: `Content-Type: application/json` required, at most
/// [`crate::JSON_BODY_LIMIT`] bytes, no U+0000 in any string or key (every one named by its
/// path, before the handler: `parse_json`), and type errors reported with the field's path.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let ct_ok = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| {
                let v = v.trim();
                v.eq_ignore_ascii_case("application/json")
                    || (v.starts_with("application/") && v.to_ascii_lowercase().ends_with("+json"))
            });
        if !ct_ok {
            return Err(ApiError(Problem::field(
                "Content-Type",
                "must be application/json",
            )));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rej| {
            if rej.status().as_u16() == 413 {
                ApiError(
                    Problem::new(ErrorCode::RequestTooLarge)
                        .with_detail("limit_bytes", crate::JSON_BODY_LIMIT as u64),
                )
            } else {
                ApiError(Problem::field("body", "could not be read"))
            }
        })?;
        // Every body of the API is an object; serde would otherwise accept an array as a
        // struct's fields in order.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            if serde_json::from_slice::<serde_json::Value>(&bytes).is_ok() {
                return Err(ApiError(Problem::field("body", "must be a JSON object")));
            }
            return parse_json(&bytes).map(ApiJson);
        }
        parse_json(&bytes).map(ApiJson)
    }
}

/// Parses a JSON body. U+0000 is refused in every string and key of every body, on both
/// backends (PostgreSQL cannot store it; DESIGN.md "Hardening"): all of them at once, by
/// path. Only a body holding the escape `\u0000` is walked.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if text::json_may_hold_nul(bytes)
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes)
    {
        let errors = text::nul_fields(&v);
        if !errors.is_empty() {
            return Err(ApiError::fields(errors));
        }
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        // serde_path_to_error says "?" when the error is not inside a known field.
        let field = if path.is_empty() || path == "." || path == "?" {
            "body".to_string()
        } else {
            path
        };
        let message = if inner.is_syntax() || inner.is_eof() {
            format!("is not valid JSON ({inner})")
        } else {
            // serde's wording, without its line/column suffix which means little to callers.
            let text = inner.to_string();
            text.split(" at line ").next().unwrap_or(&text).to_string()
        };
        ApiError::fields(vec![FieldError::new(field, message)])
    })
}

/// An id from the path. A malformed id names no item of the organisation, so it gets the
/// same 404 as an unknown or foreign one.
pub fn path_id(raw: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(raw).map_err(|_| ApiError(Problem::not_found()))
}

/// Strict query-string parameters: unknown names, repeated names, empty values and
/// undecodable strings are refused rather than ignored, so a typo never silently changes
/// what a client gets; a value holding U+0000 is refused as in a JSON body.
#[derive(Debug, Default)]
pub struct QueryParams(Vec<(String, String)>);

impl QueryParams {
    pub fn parse(raw: Option<&str>, allowed: &[&str]) -> Result<Self, ApiError> {
        let raw = raw.unwrap_or_default();
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw)
            .map_err(|_| ApiError(Problem::field("query", "is not a valid query string")))?;
        let mut errors = Vec::new();
        for (i, (k, v)) in pairs.iter().enumerate() {
            if !allowed.contains(&k.as_str()) {
                errors.push(FieldError::new(k.clone(), "is not a known parameter"));
            } else if pairs[..i].iter().any(|(k2, _)| k2 == k) {
                errors.push(FieldError::new(k.clone(), "must be given at most once"));
            } else if v.is_empty() {
                errors.push(FieldError::new(k.clone(), "must not be empty"));
            } else if v.contains('\0') {
                errors.push(FieldError::new(k.clone(), text::NUL_MESSAGE));
            }
        }
        if errors.is_empty() {
            Ok(QueryParams(pairs))
        } else {
            Err(ApiError::fields(errors))
        }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params_are_strict() {
        let q = QueryParams::parse(Some("limit=5&cursor=abc"), &["limit", "cursor"]).unwrap();
        assert_eq!(q.get("limit"), Some("5"));
        assert!(QueryParams::parse(Some("limt=5"), &["limit"]).is_err());
        assert!(QueryParams::parse(Some("limit=5&limit=6"), &["limit"]).is_err());
        assert!(QueryParams::parse(Some("limit="), &["limit"]).is_err());
        assert!(QueryParams::parse(None, &["limit"]).is_ok());
        assert!(QueryParams::parse(Some(""), &["limit"]).is_ok());
        let err = QueryParams::parse(Some("q=a%00b&limit=5"), &["q", "limit"]).unwrap_err();
        assert_eq!(
            err.0.details["fields"][0],
            serde_json::json!({"field": "q", "message": text::NUL_MESSAGE})
        );
    }

    #[test]
    fn json_nul_is_refused_by_path_before_types() {
        #[derive(serde::Deserialize, Debug)]
        struct B {
            #[allow(dead_code)]
            a: String,
        }
        let err = parse_json::<B>(br#"{"a":"x\u0000","b":["\u0000"]}"#).unwrap_err();
        let fields: Vec<&str> = err.0.details["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["field"].as_str().unwrap())
            .collect();
        assert_eq!(fields, ["a", "b[0]"]);
        assert!(parse_json::<B>(br#"{"a":"\\u0000"}"#).is_ok());
    }

    #[test]
    fn json_errors_name_the_field() {
        #[derive(serde::Deserialize, Debug)]
        struct B {
            #[allow(dead_code)]
            a: Inner,
        }
        #[derive(serde::Deserialize, Debug)]
        struct Inner {
            #[allow(dead_code)]
            n: u8,
        }
        let err = parse_json::<B>(br#"{"a":{"n":"x"}}"#).unwrap_err();
        assert_eq!(err.0.details["fields"][0]["field"], "a.n");
        let err = parse_json::<B>(b"{").unwrap_err();
        assert_eq!(err.0.details["fields"][0]["field"], "body");
    }
}
