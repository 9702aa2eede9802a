//! Test mode (APP.md §5): each organisation may have a test space, an organisation row of
//! its own that names its live organisation (`live_org_id`). Test keys reach it; live keys
//! reach the live organisation. Everything scoped by organisation (contacts, conversations,
//! messages, media, templates, campaigns, subscriptions, events, idempotency keys, usage)
//! is therefore apart in the two modes with no mode in every query: another mode's object
//! is another organisation's object, a `404`. Plans are shared (written to both rows at once,
//! `Db::update_org`); roles and permissions are the key's creator's, as for live keys.
//!
//! The test space has one business number (`mode = 'test'`), answered by the built-in
//! network simulator ([`TestNetwork`]) that `tern serve` runs on loopback: the send path,
//! the dispatcher, the network's status webhooks and the inbox are the real ones, and a test
//! number never reaches the configured network.

use rand::Rng as _;
use serde_json::Value;
use tern_cloudapi::CloudApiClient;
use tern_domain::auth::Mode;
use tern_domain::crypto::MasterKey;
use tern_domain::number::NumberStatus;
use tern_domain::{Problem, new_id, time::now_ms};
use tern_store::{Db, Org, PhoneNumber, StoreError};
use uuid::Uuid;

use crate::{Core, Result, numbers};

/// The network of test spaces, as the server runs it (the simulator, in-process).
pub trait TestNetwork: Send + Sync {
    /// A client of the Cloud API whose base URL is this network's.
    fn client(&self) -> &CloudApiClient;
    /// Makes `number` known to the network. Idempotent: every process's network learns the
    /// test numbers it sends from, whichever process made them.
    fn register_number(&self, number: &TestNumber<'_>) -> std::result::Result<(), String>;
    /// A customer writes in to `phone_number_id` (`POST /test/inbound`'s body); the
    /// network's signed webhook follows. Returns the message's wamid, or what is wrong with
    /// the body.
    fn inject_inbound(
        &self,
        phone_number_id: &str,
        body: &Value,
    ) -> std::result::Result<String, String>;
}

/// What the network needs to know of a test number.
#[derive(Debug, Clone, Copy)]
pub struct TestNumber<'a> {
    pub phone_number_id: &'a str,
    pub display_phone_number: &'a str,
    pub waba_id: &'a str,
    pub access_token: &'a str,
}

/// Messages a second a test number may send (the network's standard tier).
const TEST_THROUGHPUT_MPS: i64 = 80;

/// The test space of `live`, made with its number on first use (safe when several
/// requests or processes make it at once: one wins, the others read it).
pub async fn ensure(db: &Db, key: &MasterKey, live: &Org) -> Result<Org> {
    if live.is_test_space() {
        return Err(Problem::not_found().with_message("a test space has no test space"));
    }
    if let Some(space) = db.get_test_space(live.id).await? {
        return Ok(space);
    }
    let now = now_ms();
    let space = Org {
        id: new_id(),
        name: live.name.clone(),
        plan: live.plan.clone(),
        subscription_status: live.subscription_status,
        wallet_balance_minor: 0,
        wallet_currency: live.wallet_currency.clone(),
        overrides: live.overrides.clone(),
        billing_period_start: live.billing_period_start,
        created_at: now,
        updated_at: now,
        two_factor_required: false,
        live_org_id: Some(live.id),
    };
    let mut attempts = 0;
    loop {
        attempts += 1;
        let number = new_number(key, space.id, now);
        let mut tx = db.begin().await?;
        let inserted = match tx.insert_org(&space).await {
            Ok(()) => tx.insert_phone_number(&number).await,
            Err(e) => Err(e),
        };
        match inserted {
            Ok(()) => {
                tx.commit().await?;
                return Ok(space);
            }
            // Another request made the space meanwhile, or (rarely) the random number id
            // is taken: read the space, or try another id.
            Err(StoreError::Conflict { .. }) if attempts < 5 => {
                drop(tx);
                if let Some(space) = db.get_test_space(live.id).await? {
                    return Ok(space);
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The test space's number (its only one), or `None` for an organisation without one.
pub async fn number(db: &Db, space_id: Uuid) -> Result<Option<PhoneNumber>> {
    let numbers = db.list_phone_numbers(space_id, None, 10).await?;
    Ok(numbers.into_iter().find(|n| n.mode == Mode::Test))
}

/// Makes a test number known to this process's test network (before sending from it).
/// Without a test network (tools, the operator CLI) there is nothing to tell.
pub fn learn(core: &Core, number: &PhoneNumber) {
    let Some(network) = core.test_network.as_deref() else {
        return;
    };
    let Some(token) = numbers::access_token(&core.key, number) else {
        tracing::warn!(phone_number_id = %number.id, "test number's token cannot be read");
        return;
    };
    let spec = TestNumber {
        phone_number_id: &number.id,
        display_phone_number: &number.display_phone_number,
        waba_id: &number.waba_id,
        access_token: &token,
    };
    if let Err(e) = network.register_number(&spec) {
        tracing::warn!(phone_number_id = %number.id, error = %e, "test network refused a number");
    }
}

/// A fresh test number: random ids in ranges of their own (`99…` for the number, `98…` for
/// its business account), a fictional display number (`+1 555 010 xxxx`), a random token.
fn new_number(key: &MasterKey, space_id: Uuid, now: i64) -> PhoneNumber {
    let mut rng = rand::rng();
    let digits = |rng: &mut rand::rngs::ThreadRng, n: usize| -> String {
        (0..n)
            .map(|_| char::from(b'0' + rng.random_range(0..10u8)))
            .collect()
    };
    let token: String = (0..32)
        .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
        .collect();
    PhoneNumber {
        id: format!("99{}", digits(&mut rng, 13)),
        org_id: space_id,
        display_phone_number: format!("+1555010{}", digits(&mut rng, 4)),
        waba_id: format!("98{}", digits(&mut rng, 13)),
        access_token_enc: numbers::seal_token(key, &token),
        status: NumberStatus::Connected,
        throughput_mps: TEST_THROUGHPUT_MPS,
        created_at: now,
        updated_at: now,
        mode: Mode::Test,
    }
}

/// Whether a notification from the test network speaks only for test numbers (and their
/// business accounts): its secret must never change live data. One it cannot read is let
/// through (the inbox drops it, as any unreadable notification).
pub async fn only_test_numbers(db: &Db, body: &[u8]) -> Result<bool> {
    let Ok(n) = tern_cloudapi::parse_notification(body) else {
        return Ok(true);
    };
    for (_, value) in n.messages_values() {
        let Some(pnid) = value.metadata.phone_number_id.as_deref() else {
            continue;
        };
        if db
            .get_phone_number(pnid)
            .await?
            .is_some_and(|number| number.mode == Mode::Live)
        {
            return Ok(false);
        }
    }
    let wabas = n
        .template_updates()
        .map(|(waba, _)| waba)
        .chain(n.template_category_updates().map(|(waba, _)| waba));
    for waba in wabas {
        if db.waba_has_live_number(waba).await? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Longest `profile_name` taken (the network's display names are far shorter).
const MAX_PROFILE_NAME: usize = 256;

/// `POST /test/inbound` (test keys only): a customer writes in to the test space's number,
/// through the test network's signed webhook like a real customer, opening the window.
/// The body: `from` (digits, no `+`) or `user_id`, `type`, the type's object, optional
/// `profile_name`. Returns the message's wamid. A live key: `404`.
pub async fn inbound(core: &Core, p: &crate::Principal, body: &Value) -> Result<String> {
    if p.mode != Mode::Test {
        return Err(Problem::not_found()
            .with_message("POST /test/inbound exists for test keys only (tern_test_…)."));
    }
    check_inbound(body)?;
    let number = number(&core.db, p.org_id)
        .await?
        .ok_or_else(|| Problem::not_found().with_message("The test space has no number."))?;
    let network = core.test_network.as_deref().ok_or_else(|| {
        Problem::unavailable().with_message("This server runs no test network; retry later.")
    })?;
    learn(core, &number);
    network
        .inject_inbound(&number.id, body)
        .map_err(|e| Problem::field("body", e))
}

/// Every problem of a `POST /test/inbound` body, by field.
fn check_inbound(body: &Value) -> Result<()> {
    use tern_domain::FieldError;
    let Some(obj) = body.as_object() else {
        return Err(Problem::field("body", "must be a JSON object"));
    };
    let mut errors = Vec::new();
    let from = obj.get("from");
    let user_id = obj.get("user_id");
    match (from, user_id) {
        (None, None) => errors.push(FieldError::new(
            "from",
            "is required (the customer's phone number, digits only), unless user_id is given",
        )),
        (Some(_), Some(_)) => errors.push(FieldError::new(
            "user_id",
            "give either from or user_id, not both",
        )),
        _ => {}
    }
    if let Some(f) = from {
        let ok = f
            .as_str()
            .is_some_and(|s| (7..=15).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()));
        if !ok {
            errors.push(FieldError::new(
                "from",
                "must be a phone number in digits, 7 to 15 of them, without +",
            ));
        }
    }
    if let Some(u) = user_id
        && u.as_str().is_none_or(|s| s.trim().is_empty())
    {
        errors.push(FieldError::new(
            "user_id",
            "must be a business-scoped user id",
        ));
    }
    match obj.get("type").map(|t| t.as_str()) {
        None => errors.push(FieldError::new("type", "is required, e.g. \"text\"")),
        Some(None) => errors.push(FieldError::new("type", "must be a string")),
        Some(Some("")) => errors.push(FieldError::new("type", "must not be empty")),
        Some(Some(t)) => {
            if !obj.get(t).is_some_and(Value::is_object) {
                errors.push(FieldError::new(
                    t.to_string(),
                    format!("must be the {t} object, e.g. \"text\": {{\"body\": \"Hello\"}}"),
                ));
            }
        }
    }
    if let Some(name) = obj.get("profile_name")
        && name
            .as_str()
            .is_none_or(|s| s.chars().count() > MAX_PROFILE_NAME)
    {
        errors.push(FieldError::new(
            "profile_name",
            format!("must be a string of at most {MAX_PROFILE_NAME} characters"),
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Problem::validation(errors))
    }
}
