//! Who a message goes to (`to`) and from (`phone_number_id` / `from`), and what it replies to
//! (`context`); and the addressing rule of every send ([`address`]): how a recipient is
//! reached on the network, when an opt-out refuses the send, and when a template needs the
//! customer's phone number.

use super::*;

use crate::campaign::SkipReason;
use crate::contact::Consent;
use crate::error::ConflictReason;
use crate::phone::{PhoneError, parse_international, parse_wa_id};
use crate::{ErrorCode, FieldError, Problem};
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
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            errors.push(FieldError::new(key, "must be a string"));
            None
        }
    };
    let id = read("phone_number_id");
    let from = read("from");
    sender_from(id, from, errors)
}

/// The sending-number selector of a body (a message's, a campaign's) from its
/// `phone_number_id` and `from` strings, as read: neither empty, and the same number when both
/// are given.
pub fn sender_from(
    phone_number_id: Option<String>,
    from: Option<String>,
    errors: &mut Vec<FieldError>,
) -> Option<Sender> {
    let mut check = |key: &str, v: Option<String>| match v {
        Some(s) if s.trim().is_empty() => {
            errors.push(FieldError::new(
                key,
                "must not be empty; leave it out to use the organisation's only number",
            ));
            None
        }
        v => v,
    };
    let id = check("phone_number_id", phone_number_id);
    let from = check("from", from);
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

// ---- the addressing rule -----------------------------------------------------------------------

/// A recipient as Tern holds them: the contact (or the contact a send creates), whichever
/// send reaches them (POST /messages, a campaign's resolve and fan-out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addressee<'a> {
    /// The phone number: digits with the country code, no `+`.
    pub wa_id: Option<&'a str>,
    /// The business-scoped user id (BSUID): a customer known by username.
    pub user_id: Option<&'a str>,
    pub consent: Consent,
    /// The organisation blocked the customer (the contact's `blocked_at` is set).
    pub blocked: bool,
}

/// Where a message goes on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum To<'a> {
    /// The phone number (`to`), digits.
    Phone(&'a str),
    /// The BSUID (`recipient`).
    UserId(&'a str),
}

/// Why a recipient cannot be sent to: refused for a send ([`Refusal::problem`]), skipped
/// for a campaign ([`Refusal::skip_reason`]). One type for both, so neither reads the
/// other's answer back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Neither a phone number nor a BSUID.
    NoAddress,
    /// The organisation blocked the customer: nothing goes to them until unblocked.
    Blocked,
    /// Opted out, and the message is business-initiated (`template`: it is a template).
    OptedOut { template: bool },
    /// The template (named) needs the customer's phone number (an authentication template
    /// with a one-tap, zero-tap or copy-code button), and the customer is known only by BSUID.
    PhoneNumberRequired { template: String },
}

impl Refusal {
    /// The answer to a send: `404 not_found`, `409 contact_opted_out`, or `409 conflict`
    /// `phone_number_required` (`details.template_name`).
    pub fn problem(&self) -> Problem {
        match self {
            Refusal::NoAddress => Problem::not_found()
                .with_message("The contact has neither a phone number nor a user_id to send to."),
            Refusal::Blocked => Problem::conflict(ConflictReason::ContactBlocked).with_message(
                "The organisation blocked this customer; unblock them (DELETE /contacts/{contact_id}/block) to message them again.",
            ),
            Refusal::OptedOut { template: true } => Problem::new(ErrorCode::ContactOptedOut).with_message(
                "The customer has opted out of business-initiated messages, so templates cannot be sent to them. Only replies inside a 24-hour window they open are allowed.",
            ),
            Refusal::OptedOut { template: false } => Problem::new(ErrorCode::ContactOptedOut).with_message(
                "The customer has opted out, and free-form messages outside a window they opened are business-initiated. You can reply within 24 hours after they write to you.",
            ),
            Refusal::PhoneNumberRequired { template } => {
                Problem::conflict(ConflictReason::PhoneNumberRequired)
                    .with_message(format!(
                        "Template {template:?} has a one-tap, zero-tap or copy-code button, which needs the customer's phone number; this customer is known only by their user_id."
                    ))
                    .with_detail("template_name", template.as_str())
            }
        }
    }

    /// The reason a campaign's recipient is skipped for.
    pub fn skip_reason(&self) -> SkipReason {
        match self {
            Refusal::NoAddress => SkipReason::NoAddress,
            Refusal::Blocked => SkipReason::Blocked,
            Refusal::OptedOut { .. } => SkipReason::OptedOut,
            Refusal::PhoneNumberRequired { .. } => SkipReason::PhoneNumberRequired,
        }
    }
}

/// The addressing rule of a send of `kind` in `window`, first refusal wins: the recipient
/// needs an address, a phone number winning over a BSUID (as on the network, where `to`
/// wins when both are given); then a block refuses every message (the network would
/// refuse it: a blocked customer receives nothing); then an opt-out refuses a business-initiated message
/// ([`business_initiated`]: a free-form reply inside the customer's window still goes).
/// A template's own need of a phone number is [`To::for_template`], checked once the
/// template is known (after the window and the template's approval).
pub fn address<'a>(a: &Addressee<'a>, kind: Kind, window: WindowState) -> Result<To<'a>, Refusal> {
    let to = match (a.wa_id, a.user_id) {
        (Some(w), _) => To::Phone(w),
        (None, Some(u)) => To::UserId(u),
        (None, None) => return Err(Refusal::NoAddress),
    };
    if a.blocked {
        return Err(Refusal::Blocked);
    }
    if a.consent == Consent::OptedOut && business_initiated(kind, window) {
        return Err(Refusal::OptedOut {
            template: kind.is_template(),
        });
    }
    Ok(to)
}

impl<'a> To<'a> {
    /// A template that needs the customer's phone number (`needs_phone`:
    /// [`crate::template::needs_phone_number`] of the approved template) cannot go to a BSUID.
    pub fn for_template(self, name: &str, needs_phone: bool) -> Result<To<'a>, Refusal> {
        match self {
            To::UserId(_) if needs_phone => Err(Refusal::PhoneNumberRequired {
                template: name.to_string(),
            }),
            to => Ok(to),
        }
    }
}

/// The whole rule for a template send whose template is known (a campaign's recipient, at
/// resolve and at fan-out): [`address`] then [`To::for_template`]. A template goes in
/// every window state, so the window does not matter.
pub fn address_template<'a>(
    a: &Addressee<'a>,
    name: &str,
    needs_phone: bool,
) -> Result<To<'a>, Refusal> {
    address(a, Kind::Template, WindowState::NeverWritten)?.for_template(name, needs_phone)
}
