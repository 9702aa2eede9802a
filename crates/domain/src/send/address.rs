//! Who a message goes to (`to`) and from (`phone_number_id` / `from`), and what it replies to (`context`).

use super::*;

use crate::FieldError;
use crate::phone::{PhoneError, parse_international, parse_wa_id};
use serde_json::{Map, Value};

/// `to`: reports problems and, for the string / wa_id forms, the contract's `details.reason`.
pub(super) fn parse_to(
    v: Option<&Value>,
    errors: &mut Vec<FieldError>,
    reason: &mut Option<&'static str>,
) -> Option<Recipient> {
    let phone_error = |e: PhoneError, field: &str, errors: &mut Vec<FieldError>| {
        let message = match e {
            PhoneError::NeedsCountryCode => {
                "must start with + and the country code, such as \"+14155550123\"".to_string()
            }
            PhoneError::Placeholder => {
                "is a placeholder; put the recipient's phone number here, such as \"+14155550123\""
                    .to_string()
            }
            PhoneError::Invalid => e.to_string(),
        };
        errors.push(FieldError::new(field, message));
    };
    match v {
        None => {
            errors.push(FieldError::new("to", format!("is required: {TO_HELP}")));
            None
        }
        Some(Value::String(s)) => match parse_international(s) {
            Ok(p) => Some(Recipient::Phone(p)),
            Err(e) => {
                *reason = e.reason();
                phone_error(e, "to", errors);
                None
            }
        },
        Some(Value::Object(o)) => {
            unknown_keys(o, "to", &["contact_id", "wa_id", "user_id"], errors);
            let given: Vec<&str> = ["contact_id", "wa_id", "user_id"]
                .into_iter()
                .filter(|k| get(o, k).is_some())
                .collect();
            if given.len() != 1 {
                errors.push(FieldError::new(
                    "to",
                    if given.is_empty() {
                        "must hold exactly one of contact_id (an existing contact's id), wa_id (digits with the country code, no +) or user_id (a business-scoped user id)"
                    } else {
                        "give exactly one of contact_id, wa_id or user_id"
                    },
                ));
                return None;
            }
            if let Some(u) = get(o, "user_id") {
                return match u.as_str().filter(|s| crate::contact::is_user_id(s)) {
                    Some(s) => Some(Recipient::UserId(s.to_string())),
                    None => {
                        errors.push(FieldError::new("to.user_id", crate::contact::USER_ID_HELP));
                        None
                    }
                };
            }
            let contact = get(o, "contact_id");
            let wa = get(o, "wa_id");
            match (contact, wa) {
                (Some(c), _) => {
                    let id = c
                        .as_str()
                        .and_then(|s| uuid::Uuid::parse_str(s).ok().filter(|_| s.len() == 36));
                    if id.is_none() {
                        errors.push(FieldError::new(
                            "to.contact_id",
                            "must be a contact id (a UUID such as 0190f5a2-7c3e-7b1a-9f00-2b6c1d4e5f60)",
                        ));
                    }
                    id.map(Recipient::ContactId)
                }
                // Exactly one key was checked above.
                (None, None) => None,
                (_, Some(w)) => {
                    let Some(s) = w.as_str() else {
                        errors.push(FieldError::new(
                            "to.wa_id",
                            "must be a string of digits with the country code, such as \"14155550123\"",
                        ));
                        return None;
                    };
                    if s.chars()
                        .any(|c| c.is_alphabetic() || matches!(c, '<' | '>' | '{' | '}'))
                    {
                        *reason = PhoneError::Placeholder.reason();
                        phone_error(PhoneError::Placeholder, "to.wa_id", errors);
                        return None;
                    }
                    match parse_wa_id(s) {
                        Ok(p) => Some(Recipient::WaId(p)),
                        Err(_) => {
                            errors.push(FieldError::new(
                                "to.wa_id",
                                "must be a valid phone number written as digits only, with the country code and without +, such as \"14155550123\"",
                            ));
                            None
                        }
                    }
                }
            }
        }
        Some(_) => {
            errors.push(FieldError::new("to", format!("must be {TO_HELP}")));
            None
        }
    }
}

pub fn parse_sender(obj: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<Sender> {
    let mut read = |key: &str| match get(obj, key) {
        None => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(Value::String(_)) => {
            errors.push(FieldError::new(
                key,
                "must not be empty; leave it out to use the organisation's only number",
            ));
            None
        }
        Some(_) => {
            errors.push(FieldError::new(key, "must be a string"));
            None
        }
    };
    let id = read("phone_number_id");
    let from = read("from");
    match (id, from) {
        (Some(id), Some(from)) if id != from => {
            errors.push(FieldError::new(
                "from",
                "names a different number than phone_number_id; give only one of them",
            ));
            None
        }
        (Some(id), _) => Some(Sender::PhoneNumberId(id)),
        (None, Some(from)) => Some(Sender::From(from)),
        (None, None) => None,
    }
}

pub(super) fn parse_context(v: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    let v = v?;
    let Some(o) = v.as_object() else {
        errors.push(FieldError::new(
            "context",
            "must be an object such as {\"message_id\": \"wamid.…\"}",
        ));
        return None;
    };
    unknown_keys(o, "context", &["message_id"], errors);
    let id = req_str(
        o,
        "context",
        "message_id",
        "the id (wamid.…) of the message this one replies to",
        errors,
    )?;
    check_message_id(id, "context.message_id", errors).then(|| id.to_string())
}
