//! The addressing rule of every send (`address`, `address_template`): one table, read the
//! same by POST /messages (the `Problem`) and by a campaign's resolve and fan-out (the skip
//! reason).

use super::*;
use crate::campaign::SkipReason;
use crate::contact::Consent;

const PHONE: &str = "14155550123";
const BSUID: &str = "US.13491208655302741918";

fn who(
    wa_id: Option<&'static str>,
    user_id: Option<&'static str>,
    consent: Consent,
) -> Addressee<'static> {
    Addressee {
        wa_id,
        user_id,
        consent,
        blocked: false,
    }
}

/// What the rule decides: sent to the phone or the BSUID, or refused with a skip reason.
#[derive(Debug, PartialEq)]
enum Want {
    Phone,
    UserId,
    Skip(SkipReason),
}

fn decided(r: Result<To<'_>, Refusal>) -> Want {
    match r {
        Ok(To::Phone(p)) => {
            assert_eq!(p, PHONE);
            Want::Phone
        }
        Ok(To::UserId(u)) => {
            assert_eq!(u, BSUID);
            Want::UserId
        }
        Err(r) => Want::Skip(r.skip_reason()),
    }
}

#[test]
fn a_template_send_is_addressed_by_one_rule() {
    use Consent::*;
    use SkipReason as S;
    use Want::*;
    // (case, phone, BSUID, consent, the template needs a phone, decision)
    let cases = [
        ("phone only", Some(PHONE), None, Unknown, false, Phone),
        ("BSUID only", None, Some(BSUID), Unknown, false, UserId),
        (
            "both: the phone wins",
            Some(PHONE),
            Some(BSUID),
            OptedIn,
            false,
            Phone,
        ),
        ("neither", None, None, Unknown, false, Skip(S::NoAddress)),
        (
            "neither, opted out: no address first",
            None,
            None,
            OptedOut,
            true,
            Skip(S::NoAddress),
        ),
        (
            "opted out, phone",
            Some(PHONE),
            None,
            OptedOut,
            false,
            Skip(S::OptedOut),
        ),
        (
            "opted out, BSUID",
            None,
            Some(BSUID),
            OptedOut,
            false,
            Skip(S::OptedOut),
        ),
        (
            "opted out wins over the phone a template needs",
            None,
            Some(BSUID),
            OptedOut,
            true,
            Skip(S::OptedOut),
        ),
        (
            "a phone-only template, BSUID only",
            None,
            Some(BSUID),
            Unknown,
            true,
            Skip(S::PhoneNumberRequired),
        ),
        (
            "a phone-only template, phone",
            Some(PHONE),
            None,
            OptedIn,
            true,
            Phone,
        ),
        (
            "a phone-only template, both",
            Some(PHONE),
            Some(BSUID),
            Unknown,
            true,
            Phone,
        ),
    ];
    for (case, wa_id, user_id, consent, needs_phone, want) in cases {
        let a = who(wa_id, user_id, consent);
        assert_eq!(
            decided(address_template(&a, "otp", needs_phone)),
            want,
            "{case}"
        );
        // POST /messages reaches the same decision in its two steps.
        let steps = address(&a, Kind::Template, WindowState::Open)
            .and_then(|to| to.for_template("otp", needs_phone));
        assert_eq!(decided(steps), want, "{case} (accept)");
    }
}

#[test]
fn an_opt_out_refuses_business_initiated_messages_only() {
    use WindowState::*;
    let out = who(Some(PHONE), None, Consent::OptedOut);
    for w in [NeverWritten, Open, Closed] {
        assert_eq!(
            address(&out, Kind::Template, w),
            Err(Refusal::OptedOut { template: true })
        );
    }
    for kind in Kind::ALL.into_iter().filter(|k| !k.is_template()) {
        // A reply inside the window the customer opened still goes.
        assert_eq!(address(&out, kind, Open), Ok(To::Phone(PHONE)));
        for w in [NeverWritten, Closed] {
            assert_eq!(
                address(&out, kind, w),
                Err(Refusal::OptedOut { template: false }),
                "{kind:?} {w:?}"
            );
        }
        // Without an opt-out the addressing rule lets every window through (the window
        // rule answers next).
        let in_ = who(None, Some(BSUID), Consent::Unknown);
        assert_eq!(address(&in_, kind, Closed), Ok(To::UserId(BSUID)));
    }
}

#[test]
fn each_refusal_is_a_problem_and_a_skip_reason() {
    let cases = [
        (
            Refusal::NoAddress,
            ErrorCode::NotFound,
            None,
            SkipReason::NoAddress,
        ),
        (
            Refusal::OptedOut { template: true },
            ErrorCode::ContactOptedOut,
            None,
            SkipReason::OptedOut,
        ),
        (
            Refusal::OptedOut { template: false },
            ErrorCode::ContactOptedOut,
            None,
            SkipReason::OptedOut,
        ),
        (
            Refusal::PhoneNumberRequired {
                template: "otp".into(),
            },
            ErrorCode::Conflict,
            Some("phone_number_required"),
            SkipReason::PhoneNumberRequired,
        ),
    ];
    for (r, code, reason, skip) in cases {
        let p = r.problem();
        assert_eq!(p.code, code, "{r:?}");
        assert_eq!(
            p.details.get("reason").and_then(Value::as_str),
            reason,
            "{r:?}"
        );
        assert_eq!(r.skip_reason(), skip);
        // The skip reason is the conflict reason where both exist (one vocabulary).
        if let Some(reason) = reason {
            assert_eq!(skip.as_str(), reason);
        }
    }
    let p = Refusal::PhoneNumberRequired {
        template: "otp".into(),
    }
    .problem();
    assert_eq!(p.details["template_name"], "otp");
    assert!(
        Refusal::OptedOut { template: true }
            .problem()
            .message
            .contains("templates")
    );
}

#[test]
fn a_blocked_customer_gets_nothing_and_is_skipped_as_blocked() {
    let mut a = who(Some(PHONE), Some(BSUID), Consent::OptedIn);
    a.blocked = true;
    // Every kind in every window, a template whatever it needs: the block wins over the
    // window and the consent, after the address.
    for kind in Kind::ALL {
        for w in [
            WindowState::NeverWritten,
            WindowState::Open,
            WindowState::Closed,
        ] {
            assert_eq!(
                address(&a, kind, w),
                Err(Refusal::Blocked),
                "{kind:?} {w:?}"
            );
        }
    }
    assert_eq!(address_template(&a, "promo", false), Err(Refusal::Blocked));
    let opted_out = Addressee {
        consent: Consent::OptedOut,
        ..a
    };
    assert_eq!(
        address_template(&opted_out, "promo", false),
        Err(Refusal::Blocked)
    );
    let nowhere = Addressee {
        wa_id: None,
        user_id: None,
        ..a
    };
    assert_eq!(
        address_template(&nowhere, "promo", false),
        Err(Refusal::NoAddress)
    );
    let p = Refusal::Blocked.problem();
    assert_eq!(p.code, ErrorCode::Conflict);
    assert_eq!(p.details["reason"], "contact_blocked");
    assert_eq!(Refusal::Blocked.skip_reason(), SkipReason::Blocked);
    assert_eq!(SkipReason::Blocked.as_str(), "blocked");
}
