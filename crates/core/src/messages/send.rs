//! Accepting a message: the checks of a send after the caller's key and permission, in the
//! order DESIGN.md fixes (first failure wins) — sending number → recipient → consent →
//! window and template → billing → media — then the acceptance itself, which binds the
//! Idempotency-Key, applies the charges, creates a new recipient's contact and
//! conversation, and stores the message queued for dispatch, all in one transaction
//! (shared by concurrent acceptances: `tern_store::AcceptQueue`). The dispatcher is woken
//! at once. Called by POST /messages; campaign fan-out (`crate::campaigns::fanout`) runs
//! the same checks (number, template, billing), the same addressing rule
//! (`tern_domain::send::address`), the same builder of the message ([`outbound_message`])
//! and the same store acceptance.
//!
//! A refusal of a request whose key is already bound answers as the key does (replay of
//! the message, or `duplicate_request`), so a retried request never sees a later check.

use serde_json::Value;
use tern_cloudapi::send as network;
use tern_domain::auth::Permission;
use tern_domain::error::ConflictReason;
use tern_domain::message::{Direction, Status};
use tern_domain::plan::{
    self, Category, Entitlement, Feature, Meter, SubscriptionStatus, billing_period,
};
use tern_domain::send::{self, Addressee, Recipient, SendRequest, Sender, To, WindowState};
use tern_domain::time::format_ms;
use tern_domain::timeline::Detail;
use tern_domain::{ErrorCode, FieldError, Problem, new_id, phone, template};
use tern_store::{
    Accept, Acceptance, Charges, IdempotencyRecord, Message, NewContact, PhoneNumber, ReplyTo,
    SendOption, Template,
};
use uuid::Uuid;

use crate::{Core, Principal, Result, media, numbers};

/// How long an Idempotency-Key is remembered (DESIGN.md).
pub const IDEMPOTENCY_TTL_MS: i64 = 24 * 60 * 60 * 1000;

/// A send to accept.
pub struct Send<'a> {
    /// The parsed body (`tern_domain::send::parse_send`).
    pub request: SendRequest,
    /// The organisation's numbers with the recipient's contact and conversation on each
    /// (`Db::send_options`, read with the caller's key by `Core::lookups`).
    pub options: &'a [SendOption],
    pub idempotency_key: &'a str,
    /// SHA-256 of the canonical body (`send::fingerprint`).
    pub fingerprint: &'a [u8],
    pub now: i64,
    /// The request's id (`X-Request-Id`), kept with the message for its timeline.
    pub request_id: Option<&'a str>,
}

/// What a send did.
#[derive(Debug)]
pub enum Sent {
    /// A new message, queued for dispatch.
    Accepted(Message),
    /// The key was bound to the same request before: its message now; nothing sent again.
    Replayed(Message),
}

/// Accepts a send, or answers as its bound key does.
pub async fn accept(core: &Core, principal: &Principal, s: Send<'_>) -> Result<Sent> {
    match checked_accept(core, principal, &s).await {
        Ok(sent) => Ok(sent),
        Err(e) => {
            let key = (s.idempotency_key, s.fingerprint);
            refused(core, principal, key, s.request_id, s.now, e).await
        }
    }
}

/// The answer to a refused request (`problem`; a body that does not parse included): as
/// its key, when the key is bound already (replay or `duplicate_request`), else `problem`.
/// The happy path does not read the key: binding it is part of the acceptance, which
/// reports a bound key itself. Only a refusal needs to know.
/// `key` is the Idempotency-Key and the body's fingerprint; `request_id` the request's.
pub async fn refused(
    core: &Core,
    principal: &Principal,
    (idempotency_key, fingerprint): (&str, &[u8]),
    request_id: Option<&str>,
    now: i64,
    problem: Problem,
) -> Result<Sent> {
    match core
        .db
        .get_idempotency_key(principal.org_id, idempotency_key, now)
        .await
    {
        Ok(Some(rec)) => replay(core, principal, rec, fingerprint, request_id).await,
        _ => Err(problem),
    }
}

async fn checked_accept(core: &Core, principal: &Principal, s: &Send<'_>) -> Result<Sent> {
    let req = &s.request;
    let option = sending_number(s.options, req.sender.as_ref())?;
    let number = &option.number;
    let new_contact = recipient(core, principal, &req.recipient, option).await?;
    let (new_wa_id, new_user_id) = match &new_contact {
        Some(NewContact::WaId(w)) => (Some(w.as_str()), None),
        Some(NewContact::UserId(u)) => (None, Some(u.as_str())),
        None => (None, None),
    };
    let addressee = Addressee {
        wa_id: option.contact_wa_id.as_deref().or(new_wa_id),
        user_id: option.contact_user_id.as_deref().or(new_user_id),
        consent: option.consent_status,
        blocked: option.contact_blocked_at.is_some(),
    };
    let window = WindowState::at(option.last_inbound_at, s.now);
    // The addressing rule (consent included), then the window; a template's need of a
    // phone number once the template is known.
    let to = send::address(&addressee, req.kind, window).map_err(|r| r.problem())?;
    send::check_window(req.kind, window)?;
    let (content, category) = match &req.template {
        Some(t) => {
            let tpl = core
                .db
                .find_approved_template(principal.org_id, &number.waba_id, &t.name, &t.language)
                .await?
                .ok_or_else(|| template_not_approved(&t.name, &t.language))?;
            template::check_send(
                &tpl.components,
                t.variables.as_deref(),
                t.components.as_ref(),
                t.coupon_code.as_deref(),
            )
            .map_err(|r| r.into_problem())?;
            to.for_template(
                &t.name,
                template::needs_phone_number(tpl.category, &tpl.components),
            )
            .map_err(|r| r.problem())?;
            (
                template_content(
                    (&t.name, &t.language),
                    &tpl,
                    t.components.as_ref(),
                    t.variables.as_deref().unwrap_or_default(),
                    t.coupon_code.as_deref(),
                ),
                Some(tpl.category),
            )
        }
        None => (req.content.clone(), None),
    };
    let charges = billing(principal, req.kind, category, s.now)?;
    // Last: a link is imported here, so every cheaper check has passed first.
    let media_id = match &req.media {
        Some(m) => Some({
            allowance_left(core, principal, &charges, s.now).await?;
            media::for_message(core, principal.org_id, req.kind, m, s.now)
                .await?
                .id
        }),
        None => None,
    };

    let reply_to = match req.context.as_deref() {
        Some(wamid) => Some(ReplyTo {
            message_id: core.db.message_id_by_wamid(principal.org_id, wamid).await?,
            wamid: wamid.to_string(),
        }),
        None => None,
    };
    let message = outbound_message(Outbound {
        org_id: principal.org_id,
        number_id: &number.id,
        contact_id: option.contact_id.unwrap_or_else(new_id),
        // New ids for a contact or conversation that the acceptance creates.
        conversation_id: option.conversation_id.unwrap_or_else(new_id),
        to,
        kind: req.kind,
        content,
        template: req
            .template
            .as_ref()
            .map(|t| (t.name.as_str(), t.language.as_str())),
        text: req.text.clone(),
        media_id,
        context: req.context.as_deref(),
        reply_to,
        campaign_id: None,
        now: s.now,
    });
    let contact_limit = new_contact.as_ref().and_then(|_| {
        principal
            .effective()
            .limit(Entitlement::Contacts)
            .map(|l| i64::try_from(l).unwrap_or(i64::MAX))
    });
    let item = Accept {
        message,
        key: s.idempotency_key.to_string(),
        fingerprint: s.fingerprint.to_vec(),
        key_expires_at: s.now + IDEMPOTENCY_TTL_MS,
        charges,
        new_contact,
        contact_limit,
        new_conversation: option.conversation_id.is_none(),
        api_key_id: Some(principal.key_id),
        request_id: s.request_id.map(str::to_string),
    };
    let (item, outcome) = core.acceptor.accept(item).await?;
    match outcome {
        // The store woke the dispatcher at the commit.
        Acceptance::Accepted => {
            metrics::counter!("tern_messages_accepted_total", "type" => req.kind.as_str())
                .increment(1);
            Ok(Sent::Accepted(item.message))
        }
        Acceptance::KeyTaken(rec) => {
            replay(core, principal, rec, s.fingerprint, s.request_id).await
        }
        Acceptance::WalletLow { balance_minor } => Err(wallet_low(
            balance_minor,
            item.charges.debit_minor.unwrap_or_default(),
            category,
        )),
        Acceptance::AllowanceUsed { used } => {
            let (_, end) = billing_period(principal.org.billing_period_start, s.now);
            Err(plan::usage_limit_reached(
                Meter::MessagesSent,
                used,
                used,
                end,
            ))
        }
        Acceptance::ContactLimit { used } => {
            Err(
                match principal
                    .effective()
                    .check_count(Entitlement::Contacts, used)
                {
                    Err(p) => p,
                    // The limit was raised meanwhile; the request may be retried.
                    Ok(()) => Problem::unavailable(),
                },
            )
        }
    }
}

/// The answer to a request whose key is already bound: its message for the same body (a
/// `replayed` entry of its timeline), `duplicate_request` (409) for another.
async fn replay(
    core: &Core,
    principal: &Principal,
    rec: IdempotencyRecord,
    fingerprint: &[u8],
    request_id: Option<&str>,
) -> Result<Sent> {
    if rec.fingerprint != fingerprint {
        return Err(Problem::new(ErrorCode::DuplicateRequest)
            .with_detail("idempotency_key", rec.key)
            .with_detail("first_used_at", format_ms(rec.created_at)));
    }
    let message = match rec.message_id {
        Some(id) => core.db.get_message(principal.org_id, id).await?,
        None => None,
    };
    // The key's message is gone (cannot happen while both live 24 h); do not guess.
    let message = message.ok_or_else(Problem::unavailable)?;
    let entry = Detail::Replayed {
        request_id: request_id.map(str::to_string),
    };
    core.db
        .add_timeline(message.id, tern_domain::time::now_ms(), &entry)
        .await?;
    Ok(Sent::Replayed(message))
}

fn numbers_detail(numbers: &[&PhoneNumber]) -> Value {
    Value::Array(
        numbers
            .iter()
            .map(|n| {
                serde_json::json!({"id": n.id, "display_phone_number": n.display_phone_number, "status": n.status.as_str()})
            })
            .collect(),
    )
}

/// The number to send from: the selected one, or the organisation's only one.
fn sending_number<'a>(
    options: &'a [SendOption],
    sender: Option<&Sender>,
) -> Result<&'a SendOption> {
    let numbers: Vec<&PhoneNumber> = options.iter().map(|o| &o.number).collect();
    let i = choose_number(&numbers, sender)?;
    options.get(i).ok_or_else(Problem::unavailable)
}

/// The index in `numbers` of the number to send from (a message's or a campaign's): the
/// selected one (`phone_number_id` or `from`), or the organisation's only one; it must be
/// able to send.
pub(crate) fn choose_number(numbers: &[&PhoneNumber], sender: Option<&Sender>) -> Result<usize> {
    let chosen = match sender {
        Some(s) => {
            let (field, value) = match s {
                Sender::PhoneNumberId(v) => ("phone_number_id", v),
                Sender::From(v) => ("from", v),
            };
            let e164 = phone::parse_international(value).ok().map(|p| p.e164);
            let found = numbers.iter().position(|n| {
                n.id == *value
                    || (field == "from" && e164.as_deref() == Some(&n.display_phone_number))
            });
            match found {
                Some(i) => i,
                None => {
                    return Err(Problem::validation(vec![FieldError::new(
                        field,
                        "is not one of the organisation's numbers; see details.numbers",
                    )])
                    .with_detail("numbers", numbers_detail(numbers)));
                }
            }
        }
        None => {
            if !numbers.iter().any(|n| numbers::can_send(n)) {
                return Err(Problem::conflict(ConflictReason::NoConnectedPhoneNumber)
                    .with_message("No business number can send yet; connect one first."));
            }
            if numbers.len() > 1 {
                return Err(Problem::validation(vec![FieldError::new(
                    "phone_number_id",
                    "is required: the organisation has several numbers (see details.numbers)",
                )])
                .with_detail("reason", "from_required")
                .with_detail("numbers", numbers_detail(numbers)));
            }
            0
        }
    };
    match numbers.get(chosen) {
        Some(n) if numbers::can_send(n) => Ok(chosen),
        Some(n) => Err(not_connected(&n.id)),
        None => Err(Problem::conflict(ConflictReason::NoConnectedPhoneNumber)),
    }
}

/// The chosen number cannot send now.
pub(crate) fn not_connected(id: &str) -> Problem {
    Problem::conflict(ConflictReason::PhoneNumberNotConnected)
        .with_message("The selected number cannot send now.")
        .with_detail("phone_number_id", id)
}

/// Checks the recipient: an existing contact, or (for a phone number or BSUID not yet
/// known) the identifier of the contact the acceptance creates. A new contact's plan limit
/// is checked here, in the order of the checks, and again atomically by the acceptance.
async fn recipient(
    core: &Core,
    principal: &Principal,
    r: &Recipient,
    option: &SendOption,
) -> Result<Option<NewContact>> {
    let new = match r {
        Recipient::ContactId(_) => {
            return match option.contact_id {
                Some(_) => Ok(None),
                None => Err(Problem::not_found()
                    .with_message("No contact with this contact_id in the organisation.")),
            };
        }
        Recipient::WaId(p) | Recipient::Phone(p) => NewContact::WaId(p.wa_id().to_string()),
        Recipient::UserId(u) => NewContact::UserId(u.clone()),
    };
    if !principal.has(Permission::ContactsCreate) {
        return Err(Problem::permission_denied(Permission::ContactsCreate.as_str()).with_message(
            "Addressing a message by phone number or user_id also needs the contacts.create permission; use to.contact_id instead.",
        ));
    }
    if option.contact_id.is_some() {
        return Ok(None);
    }
    let effective = principal.effective();
    if effective.limit(Entitlement::Contacts).is_some() {
        let used = core.db.count_contacts(principal.org_id).await?;
        effective.check_count(Entitlement::Contacts, used)?;
    }
    Ok(Some(new))
}

pub(crate) fn template_not_approved(name: &str, language: &str) -> Problem {
    Problem::new(ErrorCode::TemplateNotApproved)
        .with_message(format!(
            "No approved template {name:?} in language {language:?} for this number's business account."
        ))
        .with_detail("name", name)
        .with_detail("language", language)
}

/// Why billing refuses a send: the answer ([`Problem`], by `From`) and, for a campaign, the
/// pause it calls for, told apart by type (nothing is read back from the answer).
#[derive(Debug)]
pub(crate) enum BillingRefusal {
    /// A media message without the plan's `media` feature.
    Feature(Problem),
    /// A template while the subscription is restricted or cancelled.
    Subscription(SubscriptionStatus),
    /// A template (or a campaign's estimate, `price`) the wallet cannot pay.
    Wallet {
        balance: i64,
        price: i64,
        category: Option<Category>,
    },
}

impl From<BillingRefusal> for Problem {
    fn from(r: BillingRefusal) -> Problem {
        match r {
            BillingRefusal::Feature(p) => p,
            BillingRefusal::Subscription(status) => Problem::new(ErrorCode::SubscriptionRestricted)
                .with_detail("status", status.as_str())
                .with_detail("action", "template_sends_paused"),
            BillingRefusal::Wallet {
                balance,
                price,
                category,
            } => wallet_low(balance, price, category),
        }
    }
}

/// The billing checks and effects of a send: a media message needs the plan's `media`
/// feature, template sends pause while the subscription is
/// restricted, debit the wallet by their category's price, and every send counts against
/// the plan's `messages_sent` allowance.
pub(crate) fn billing(
    principal: &Principal,
    kind: send::Kind,
    category: Option<Category>,
    now: i64,
) -> std::result::Result<Charges, BillingRefusal> {
    if kind.is_media() {
        principal
            .require_feature(Feature::Media)
            .map_err(BillingRefusal::Feature)?;
    }
    // Test sends are free: no wallet debit, no `messages_sent` (APP.md §5).
    if principal.is_free() {
        return Ok(Charges {
            debit_minor: None,
            messages_sent: None,
        });
    }
    let org = &principal.org;
    if kind.is_template()
        && matches!(
            org.subscription_status,
            SubscriptionStatus::Restricted | SubscriptionStatus::Cancelled
        )
    {
        return Err(BillingRefusal::Subscription(org.subscription_status));
    }
    let effective = principal.effective();
    let debit_minor = category
        .map(|c| price_minor(principal, c))
        .filter(|p| *p > 0);
    if let Some(price) = debit_minor {
        wallet_covers(principal, price, category)?;
    }
    let messages_sent = effective.allowance(Meter::MessagesSent).map(|a| {
        let (start, _) = billing_period(org.billing_period_start, now);
        (start, i64::try_from(a).unwrap_or(i64::MAX))
    });
    Ok(Charges {
        debit_minor,
        messages_sent,
    })
}

/// What one template message of `category` costs the caller, in minor units of the wallet's
/// currency: the organisation's price (its plan's, or the operator's override); 0 when
/// billing is off for the category, and for test sends (APP.md §5). The one price of a
/// send, for its debit and for a campaign's estimate.
pub(crate) fn price_minor(principal: &Principal, category: Category) -> i64 {
    if principal.is_free() {
        return 0;
    }
    principal.effective().price_minor(category).max(0)
}

/// Whether the wallet holds `required` (one message's price, or a campaign's estimate);
/// refused as `402 wallet_balance_low` naming `category`. Nothing is required of a free
/// send (`required` 0).
pub(crate) fn wallet_covers(
    principal: &Principal,
    required: i64,
    category: Option<Category>,
) -> std::result::Result<(), BillingRefusal> {
    let balance = principal.org.wallet_balance_minor;
    if required > 0 && balance < required {
        return Err(BillingRefusal::Wallet {
            balance,
            price: required,
            category,
        });
    }
    Ok(())
}

/// The `messages_sent` allowance, read before a media check: billing (402) answers before
/// media (400/409), and a link must not be fetched and stored for a send that the
/// acceptance would refuse. The acceptance still counts the unit atomically; sends without
/// media leave the check to it alone (no extra read on their path).
async fn allowance_left(
    core: &Core,
    principal: &Principal,
    charges: &Charges,
    now: i64,
) -> Result<()> {
    let Some((start, allowance)) = charges.messages_sent else {
        return Ok(());
    };
    let used = core
        .db
        .messages_sent_in_period(principal.org_id, start)
        .await?;
    if used < allowance {
        return Ok(());
    }
    let (_, end) = billing_period(principal.org.billing_period_start, now);
    Err(plan::usage_limit_reached(
        Meter::MessagesSent,
        used,
        allowance,
        end,
    ))
}

pub(crate) fn wallet_low(balance: i64, required: i64, category: Option<Category>) -> Problem {
    Problem::new(ErrorCode::WalletBalanceLow)
        .with_detail("balance_minor", balance)
        .with_detail("required_minor", required)
        .with_detail("wallet_category", category.map(Category::as_str))
        .with_detail("top_up_path", "/settings/billing/wallet")
}

/// What an outbound message is made of: the one builder of the stored row of a send, for
/// POST /messages and a campaign's fan-out alike.
pub(crate) struct Outbound<'a> {
    pub org_id: Uuid,
    /// The sending number's id.
    pub number_id: &'a str,
    pub contact_id: Uuid,
    pub conversation_id: Uuid,
    /// Where it goes (`tern_domain::send::address`).
    pub to: To<'a>,
    pub kind: send::Kind,
    /// The type's object in the network's shape ([`template_content`] for a template).
    pub content: Value,
    /// A template's name and language.
    pub template: Option<(&'a str, &'a str)>,
    pub text: Option<String>,
    pub media_id: Option<Uuid>,
    /// The wamid it replies to, and that message when Tern holds it.
    pub context: Option<&'a str>,
    pub reply_to: Option<ReplyTo>,
    pub campaign_id: Option<Uuid>,
    pub now: i64,
}

/// The message of a send as accepted: status `accepted`, the network request stored (its
/// content is read back from it, `messages::content`, not stored twice).
pub(crate) fn outbound_message(o: Outbound<'_>) -> Message {
    let to = match o.to {
        To::Phone(w) => network::Address::Phone(w),
        To::UserId(u) => network::Address::UserId(u),
    };
    let request = network::message_request(to, o.kind.as_str(), o.content, o.context);
    Message {
        id: new_id(),
        org_id: o.org_id,
        conversation_id: o.conversation_id,
        contact_id: o.contact_id,
        phone_number_id: o.number_id.to_string(),
        direction: Direction::Outbound,
        r#type: o.kind.as_str().into(),
        status: Status::Accepted,
        template_name: o.template.map(|(name, _)| name.to_string()),
        template_language: o.template.map(|(_, language)| language.to_string()),
        text: o.text,
        media_id: o.media_id,
        wamid: None,
        request,
        campaign_id: o.campaign_id,
        created_at: o.now,
        sent_at: None,
        delivered_at: None,
        read_at: None,
        failed_at: None,
        failure_code: None,
        failure: None,
        updated_at: o.now,
        content: None,
        reply_to: o.reply_to,
        referral: None,
        edited_at: None,
        revoked_at: None,
        pricing: None,
    }
}

/// The network's template object of a send of `name` / `language` (as the send names them),
/// the approved `tpl`: `components` as given (typed, checked by `template::check_send`), else
/// the template's own filled with `variables` (value *k* for the *k*-th distinct number) and
/// a coupon code.
pub(crate) fn template_content(
    (name, language): (&str, &str),
    tpl: &Template,
    components: Option<&Value>,
    variables: &[String],
    coupon_code: Option<&str>,
) -> Value {
    let components = match components {
        Some(c) => c.clone(),
        None => Value::Array(template::network_components(
            &tpl.components,
            variables,
            coupon_code,
        )),
    };
    network::template_object(name, language, components)
}

#[cfg(test)]
mod tests {
    /// The contract's value (PM3); the expiry itself is tested in the store.
    #[test]
    fn an_idempotency_key_is_remembered_24_hours() {
        assert_eq!(super::IDEMPOTENCY_TTL_MS, 24 * 3_600_000);
    }
}
