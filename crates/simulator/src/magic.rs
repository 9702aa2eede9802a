//! Magic recipients: the network of Tern's test spaces (`--magic-recipients`).
//!
//! With the setting on, the recipient of each send decides its outcome: listed phone numbers
//! fail with a network error code, are refused twice, stop at `sent` / `delivered` or answer
//! "Thanks!" after reading; every other number is a customer who receives and reads. The
//! username customer `@tern_test` exists from the start. One table, [`RECIPIENTS`], drives the
//! behaviour and is what docs and the app show.

use serde::Serialize;

use crate::customers::{CustomerSpec, Target};
use crate::model::{Behaviour, digits};
use crate::state::{CtlError, Sim};

/// BSUID of the phone-less magic customer.
pub const USERNAME_CUSTOMER_ID: &str = "US.1000000000000000001";
/// Username of that customer (`@tern_test`).
pub const USERNAME: &str = "tern_test";
/// What the replying magic customer writes after reading.
pub const REPLY_TEXT: &str = "Thanks!";
/// Template names starting with this are rejected by the review.
pub const REJECT_PREFIX: &str = "reject_";
/// Review delay when magic recipients are on and no delay is configured.
pub const REVIEW_DELAY_MS: u64 = 2000;

/// One magic recipient, as documented.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MagicRecipient {
    /// As people write it, e.g. `+1 555 013 1026`.
    pub number: &'static str,
    /// Digits only, as sends are compared: `15550131026`.
    pub digits: &'static str,
    pub behaviour: Behaviour,
    /// The network error code: of the `failed` status, or of the two refusals.
    pub code: Option<i64>,
    /// One line for people.
    pub outcome: &'static str,
}

const fn entry(
    number: &'static str,
    digits: &'static str,
    behaviour: Behaviour,
    code: Option<i64>,
    outcome: &'static str,
) -> MagicRecipient {
    MagicRecipient {
        number,
        digits,
        behaviour,
        code,
        outcome,
    }
}

/// The magic phone numbers. Any other phone number is a customer who receives and reads.
pub const RECIPIENTS: [MagicRecipient; 8] = [
    entry(
        "+1 555 013 1026",
        "15550131026",
        Behaviour::NotOnWhatsapp,
        Some(131026),
        "accepted, then a failed status with 131026 (message undeliverable)",
    ),
    entry(
        "+1 555 013 1047",
        "15550131047",
        Behaviour::Fail,
        Some(131047),
        "accepted, then a failed status with 131047 (re-engagement: outside the 24-hour window)",
    ),
    entry(
        "+1 555 013 1049",
        "15550131049",
        Behaviour::Fail,
        Some(131049),
        "accepted, then a failed status with 131049 (per-user marketing cap)",
    ),
    entry(
        "+1 555 013 1056",
        "15550131056",
        Behaviour::RefusesTwice,
        Some(131056),
        "refused twice with 131056 (pair rate limit), accepted on the third attempt, then read",
    ),
    entry(
        "+1 555 013 0429",
        "15550130429",
        Behaviour::RefusesTwice,
        Some(130429),
        "refused twice with 130429 (throughput), accepted on the third attempt, then read",
    ),
    entry(
        "+1 555 000 0002",
        "15550000002",
        Behaviour::NeverReads,
        None,
        "sent, delivered, never read",
    ),
    entry(
        "+1 555 000 0003",
        "15550000003",
        Behaviour::NeverDelivers,
        None,
        "sent, never delivered",
    ),
    entry(
        "+1 555 000 0004",
        "15550000004",
        Behaviour::Replies,
        None,
        "sent, delivered, read, then the customer answers \"Thanks!\"",
    ),
];

/// The magic entry of a phone number (separators allowed).
pub fn recipient_for(phone: &str) -> Option<&'static MagicRecipient> {
    let d = digits(phone);
    RECIPIENTS.iter().find(|m| m.digits == d)
}

/// Give a send's target its magic behaviour. Customers registered with a behaviour of their
/// own keep it: only the default (`normal`, no code) is replaced.
pub(crate) fn apply(target: &mut Target) {
    if target.behaviour != Behaviour::Normal || target.fail_code.is_some() {
        return;
    }
    if let Some(m) = target.wa_id.as_deref().and_then(recipient_for) {
        target.behaviour = m.behaviour;
        target.fail_code = m.code;
    }
}

impl Sim {
    /// Create the magic username customer (at start and after a reset).
    pub(crate) fn seed_magic_customers(&self) -> Result<(), CtlError> {
        self.register_customer(CustomerSpec {
            username: Some(USERNAME.to_owned()),
            user_id: Some(USERNAME_CUSTOMER_ID.to_owned()),
            ..CustomerSpec::default()
        })
        .map(|_| ())
    }

    /// Whether a template of this name is rejected by a by-name review.
    pub(crate) fn rejects_by_name(&self, name: &str) -> bool {
        self.args.magic_recipients && name.starts_with(REJECT_PREFIX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_digits_match_numbers() {
        for m in RECIPIENTS {
            assert_eq!(digits(m.number), m.digits, "{}", m.number);
            assert_eq!(recipient_for(m.number).map(|r| r.digits), Some(m.digits));
        }
        assert_eq!(
            recipient_for("+1 555-013-1026").map(|m| m.code),
            Some(Some(131026))
        );
        assert!(recipient_for("15550131027").is_none());
        assert!(
            recipient_for("4415550131026").is_none(),
            "whole numbers only"
        );
    }
}
