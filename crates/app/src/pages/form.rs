//! Small pieces the pages share: a form body with repeated fields (a group of checkboxes),
//! a core refusal's field problems, times for `<time>`, and the identity confirmation step.

use crate::AppState;
use crate::errors::AppError;
use crate::session::{OrgMember, confirm_label};
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use tern_domain::Problem;

/// A submitted form's fields in order, repeated names kept (`serde_urlencoded`, behind
/// axum's `Form`, keeps only one value of a checkbox group).
#[derive(Default)]
pub struct FormFields(Vec<(String, String)>);

// By hand: a form may carry a password or a code (`confirm`).
impl std::fmt::Debug for FormFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_tuple("FormFields").field(&names).finish()
    }
}

impl FormFields {
    pub fn parse(body: &[u8]) -> FormFields {
        FormFields(
            url::form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The first value of `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first value of `name`, trimmed; empty when absent.
    pub fn text(&self, name: &str) -> String {
        self.get(name).unwrap_or_default().trim().to_string()
    }

    /// Every value of `name` (the checked boxes of a group), in order.
    pub fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

impl<S: Send + Sync> FromRequest<S> for FormFields {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        let body = Bytes::from_request(req, state).await.map_err(|r| {
            if r.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                AppError::PayloadTooLarge
            } else {
                AppError::BadRequest(
                    "The form could not be read. Go back, reload the page and try again.".into(),
                )
            }
        })?;
        Ok(FormFields::parse(&body))
    }
}

/// The field problems of a `validation_failed` refusal: (field, words). The field is the
/// API's name (`url`, `events[1]`); [`FieldProblems::of`] groups them by form field.
#[derive(Debug, Default, Clone)]
pub struct FieldProblems(Vec<(String, String)>);

impl FieldProblems {
    pub fn from_problem(p: &Problem) -> FieldProblems {
        FieldProblems(crate::forms::field_problems(p))
    }

    pub fn push(&mut self, field: &str, words: impl Into<String>) {
        self.0.push((field.to_string(), words.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The words for form field `name` (its own problems and those of its items, `name[i]`),
    /// joined; `None` when it has none.
    pub fn of(&self, name: &str) -> Option<String> {
        let words: Vec<&str> = self
            .0
            .iter()
            .filter(|(f, _)| f == name || f.strip_prefix(name).is_some_and(|r| r.starts_with('[')))
            .map(|(_, w)| w.as_str())
            .collect();
        (!words.is_empty()).then(|| words.join("; "))
    }

    /// Problems of fields the form does not have (shown in the summary).
    pub fn others(&self, known: &[&str]) -> Vec<String> {
        self.0
            .iter()
            .filter(|(f, _)| {
                !known
                    .iter()
                    .any(|k| f == k || f.strip_prefix(k).is_some_and(|r| r.starts_with('[')))
            })
            .map(|(f, w)| format!("{f}: {w}"))
            .collect()
    }
}

/// A time for `<time datetime="{{ iso }}">{{ text }}</time>` (the app's script shows it in the
/// browser's time zone, the UTC value on hover).
#[derive(Debug, Clone)]
pub struct Stamp {
    pub iso: String,
    /// What shows without the script: `2026-01-31 12:00 UTC`.
    pub text: String,
}

impl Stamp {
    pub fn at(ms: i64) -> Stamp {
        Stamp::cut(ms, 16)
    }

    /// With the seconds (the audit log): `2026-01-31 12:00:05 UTC`.
    pub fn at_seconds(ms: i64) -> Stamp {
        Stamp::cut(ms, 19)
    }

    /// The text cut after `len` characters of the ISO time (minutes or seconds).
    fn cut(ms: i64, len: usize) -> Stamp {
        let iso = tern_domain::time::format_ms(ms);
        let text = format!("{} UTC", iso.get(..len).unwrap_or(&iso).replace('T', " "));
        Stamp { iso, text }
    }

    pub fn opt(ms: Option<i64>) -> Option<Stamp> {
        ms.map(Stamp::at)
    }
}

/// A `datetime-local` value (`2026-01-31T12:00` or with seconds), read as UTC, as epoch ms.
pub fn parse_local_utc(value: &str) -> Option<i64> {
    let v = value.trim();
    let full = match v.len() {
        16 => format!("{v}:00Z"),
        19 => format!("{v}Z"),
        _ => return None,
    };
    tern_domain::time::parse_rfc3339_ms(&full)
}

/// The identity confirmation of a member or settings change (`confirm_step.html`).
#[derive(Debug, Clone)]
pub struct ConfirmStep {
    /// Whether the form asks for it (no recent confirmation).
    pub ask: bool,
    pub label: &'static str,
    /// A two-factor code rather than the password.
    pub is_code: bool,
    pub error: Option<String>,
}

impl ConfirmStep {
    /// What `me` is asked for now.
    pub fn of(state: &AppState, me: &OrgMember) -> ConfirmStep {
        ConfirmStep {
            ask: !me.confirmed(state),
            label: confirm_label(&me.signed),
            is_code: me.signed.person().has_two_factor(),
            error: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_fields_are_kept() {
        let f = FormFields::parse(b"name=a+b&p=x&p=y&confirm=secret%21");
        assert_eq!(f.text("name"), "a b");
        assert_eq!(f.all("p"), ["x", "y"]);
        assert_eq!(f.get("confirm"), Some("secret!"));
        assert!(!format!("{f:?}").contains("secret"));
    }

    #[test]
    fn field_problems_group_items() {
        let p = Problem::validation(vec![
            tern_domain::error::FieldError::new("url", "must be https"),
            tern_domain::error::FieldError::new("events[1]", "unknown"),
            tern_domain::error::FieldError::new("extra", "unknown field"),
        ]);
        let f = FieldProblems::from_problem(&p);
        assert_eq!(f.of("url").as_deref(), Some("must be https"));
        assert_eq!(f.of("events").as_deref(), Some("unknown"));
        assert_eq!(f.others(&["url", "events"]), ["extra: unknown field"]);
    }

    #[test]
    fn local_times_are_utc() {
        assert_eq!(parse_local_utc("1970-01-01T00:01"), Some(60_000));
        assert_eq!(parse_local_utc("1970-01-01T00:00:02"), Some(2_000));
        assert_eq!(parse_local_utc("yesterday"), None);
    }
}
