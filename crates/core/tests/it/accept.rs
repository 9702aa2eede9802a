//! `messages::send::accept`, one rule per case: each case starts from a fresh organisation
//! (a connected number, an approved utility template `hello`, a customer who wrote a minute
//! ago) changed as the case says, sends one body and expects one answer. The order of the
//! checks (DESIGN.md: number → recipient → consent → window and template → billing → media)
//! is pinned by cases that break two rules at once.

use serde_json::{Value, json};
use tern_core::messages::send::{self, Send, Sent};
use tern_core::testkit::Seed;
use tern_core::{Core, Principal, contacts};
use tern_domain::contact::Consent;
use tern_domain::plan::SubscriptionStatus;
use tern_domain::time::now_ms;
use tern_domain::{ErrorCode, Problem};
use tern_store::{ContactRef, Db, Org};
use uuid::Uuid;

use crate::fixtures::{self, WABA};

fn rand_digits() -> u64 {
    (Uuid::now_v7().as_u128() % 100_000_000_000) as u64
}

/// The customer who wrote in.
const CUSTOMER: &str = "447700900001";
const HOUR: i64 = 3_600_000;

struct World {
    db: Db,
    core: Core,
    org: Org,
    p: Principal,
}

/// A change to the starting organisation.
#[derive(Clone, Copy)]
enum Setup {
    Plain,
    /// The customer last wrote this long ago.
    WroteAgo(i64),
    NoNumber,
    OptedOut,
    Restricted,
    AllowanceUsedUp,
    /// Templates cost 100 and the wallet holds 50.
    WalletLow,
}

async fn world(db: &Db, setup: Setup) -> World {
    // Phone number ids are unique across organisations: one per world.
    let pnid = format!("1065{:011}", rand_digits());
    let mut seed = Seed::org("Acme");
    if !matches!(setup, Setup::NoNumber) {
        seed = seed.number(&pnid);
    }
    seed = seed.approved_template("hello", json!([{"type": "BODY", "text": "Hello {{1}}"}]));
    seed = match setup {
        Setup::Restricted => seed.subscription(SubscriptionStatus::Restricted),
        Setup::AllowanceUsedUp => seed.overrides(&json!({"allowances": {"messages_sent": 0}})),
        Setup::WalletLow => seed
            .overrides(&json!({"prices_minor": {"utility": 100}}))
            .wallet(50),
        _ => seed,
    };
    let org = seed.create(db, &fixtures::key()).await.org;
    let now = now_ms();
    let ago = match setup {
        Setup::WroteAgo(ms) => ms,
        _ => 60_000,
    };
    if !matches!(setup, Setup::NoNumber) {
        wrote_in(db, &pnid, now - ago).await;
    }
    let core = fixtures::core(db);
    let p = fixtures::principal(&org);
    if matches!(setup, Setup::OptedOut) {
        let customer = db
            .get_contact_by_wa_id(org.id, CUSTOMER)
            .await
            .unwrap()
            .unwrap()
            .id;
        contacts::record_consent(&core, &p, customer, Consent::OptedOut, Some("test"), now)
            .await
            .unwrap();
    }
    World {
        db: db.clone(),
        core,
        org,
        p,
    }
}

/// The customer writes to the number at `at` (through the inbox, as the network would).
async fn wrote_in(db: &Db, pnid: &str, at: i64) {
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": WABA, "changes": [{
        "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550000000", "phone_number_id": pnid},
            "contacts": [{"profile": {"name": "Ann"}, "wa_id": CUSTOMER}],
            "messages": [{"from": CUSTOMER, "id": format!("wamid.{}", Uuid::now_v7().simple()),
                "timestamp": (at / 1000).to_string(), "type": "text", "text": {"body": "hi"}}]}}]}]});
    let report = tern_core::inbox::apply(db, body.to_string().as_bytes())
        .await
        .unwrap();
    assert_eq!(report.inbound_stored, 1, "{report:?}");
}

impl World {
    async fn send(&self, body: &Value, key: &str) -> Result<Sent, Problem> {
        let request = tern_domain::send::parse_send(body)?;
        let contact = match &request.recipient {
            tern_domain::send::Recipient::ContactId(id) => ContactRef::Id(*id),
            tern_domain::send::Recipient::WaId(p) | tern_domain::send::Recipient::Phone(p) => {
                ContactRef::WaId(p.wa_id())
            }
            tern_domain::send::Recipient::UserId(u) => ContactRef::UserId(u),
        };
        let options = self.db.send_options(self.org.id, contact).await.unwrap();
        let s = Send {
            request,
            options: &options,
            idempotency_key: key,
            fingerprint: &tern_domain::send::fingerprint(body),
            now: now_ms(),
            request_id: None,
        };
        send::accept(&self.core, &self.p, s).await
    }
}

fn text(to: &str) -> Value {
    json!({"to": to, "type": "text", "text": {"body": "Hello"}})
}

fn template(to: &str, name: &str) -> Value {
    json!({"to": to, "type": "template",
           "template": {"name": name, "language": "en_US", "variables": ["Ann"]}})
}

/// What a case expects.
#[derive(Debug, PartialEq)]
enum Want {
    Accepted,
    Refused(ErrorCode, Option<&'static str>),
}

async fn answer(w: &World, body: &Value) -> Want {
    match w.send(body, &Uuid::now_v7().to_string()).await {
        Ok(Sent::Accepted(m)) => {
            assert_eq!(m.status.as_str(), "accepted");
            Want::Accepted
        }
        Ok(Sent::Replayed(_)) => panic!("a fresh key replayed"),
        Err(p) => {
            let reason = p.details.get("reason").and_then(Value::as_str);
            let reason = reason.map(|r| &*Box::leak(r.to_string().into_boxed_str()));
            Want::Refused(p.code, reason)
        }
    }
}

const PHONE: &str = "+447700900001";
const STRANGER: &str = "+447700900999";

async fn each_rule_of_a_send(db: Db) {
    use ErrorCode::*;
    use Setup::*;
    let refused = |c| Want::Refused(c, None);
    let cases: Vec<(&str, Setup, Value, Want)> = vec![
        (
            "a reply inside the window is accepted",
            Plain,
            text(PHONE),
            Want::Accepted,
        ),
        (
            "an approved template is accepted",
            Plain,
            template(PHONE, "hello"),
            Want::Accepted,
        ),
        (
            "a template starts a conversation",
            Plain,
            template(STRANGER, "hello"),
            Want::Accepted,
        ),
        (
            "free-form to a customer who never wrote",
            Plain,
            text(STRANGER),
            refused(TemplateRequired),
        ),
        (
            "free-form after 24 hours",
            WroteAgo(25 * HOUR),
            text(PHONE),
            refused(WindowExpired),
        ),
        (
            "free-form just inside 24 hours",
            WroteAgo(23 * HOUR),
            text(PHONE),
            Want::Accepted,
        ),
        (
            "an unknown contact id",
            Plain,
            json!({"to": {"contact_id": Uuid::now_v7().to_string()}, "type": "text", "text": {"body": "x"}}),
            refused(NotFound),
        ),
        (
            "an unknown template",
            Plain,
            template(PHONE, "nope"),
            refused(TemplateNotApproved),
        ),
        (
            "no connected number",
            NoNumber,
            template(PHONE, "hello"),
            Want::Refused(Conflict, Some("no_connected_phone_number")),
        ),
        (
            "opted out: a template is refused",
            OptedOut,
            template(PHONE, "hello"),
            refused(ContactOptedOut),
        ),
        (
            "opted out: a reply inside the window still goes",
            OptedOut,
            text(PHONE),
            Want::Accepted,
        ),
        (
            "opted out wins over an unknown template (consent first)",
            OptedOut,
            template(PHONE, "nope"),
            refused(ContactOptedOut),
        ),
        (
            "restricted: a template is refused",
            Restricted,
            template(PHONE, "hello"),
            refused(SubscriptionRestricted),
        ),
        (
            "restricted: a reply inside the window still goes",
            Restricted,
            text(PHONE),
            Want::Accepted,
        ),
        (
            "the template rule wins over billing",
            Restricted,
            template(PHONE, "nope"),
            refused(TemplateNotApproved),
        ),
        (
            "messages_sent used up",
            AllowanceUsedUp,
            text(PHONE),
            refused(UsageLimitReached),
        ),
        (
            "billing wins over an unknown media id (media last)",
            AllowanceUsedUp,
            json!({"to": PHONE, "type": "image", "image": {"media_id": Uuid::now_v7().to_string()}}),
            refused(UsageLimitReached),
        ),
        (
            "an unknown media id",
            Plain,
            json!({"to": PHONE, "type": "image", "image": {"media_id": Uuid::now_v7().to_string()}}),
            refused(MediaUnavailable),
        ),
        (
            "the wallet cannot pay a template",
            WalletLow,
            template(PHONE, "hello"),
            refused(WalletBalanceLow),
        ),
        (
            "a reply costs nothing",
            WalletLow,
            text(PHONE),
            Want::Accepted,
        ),
    ];
    for (name, setup, body, want) in &cases {
        let w = world(&db, *setup).await;
        let got = answer(&w, body).await;
        // A reason is compared only where the case names one.
        let got = match (&got, want) {
            (Want::Refused(c, _), Want::Refused(_, None)) => Want::Refused(*c, None),
            _ => got,
        };
        assert_eq!(&got, want, "{name}");
    }
}

async fn a_key_binds_one_body(db: Db) {
    let w = world(&db, Setup::Plain).await;
    let first = match w.send(&text(PHONE), "k-1").await.unwrap() {
        Sent::Accepted(m) => m,
        other => panic!("{other:?}"),
    };
    match w.send(&text(PHONE), "k-1").await.unwrap() {
        Sent::Replayed(m) => assert_eq!(m.id, first.id),
        other => panic!("{other:?}"),
    }
    let other = w.send(&template(PHONE, "hello"), "k-1").await.unwrap_err();
    assert_eq!(other.code, ErrorCode::DuplicateRequest);
    // A refused request binds nothing: the key is free for the corrected body.
    let refused = w.send(&template(PHONE, "nope"), "k-2").await.unwrap_err();
    assert_eq!(refused.code, ErrorCode::TemplateNotApproved);
    assert!(matches!(
        w.send(&template(PHONE, "hello"), "k-2").await.unwrap(),
        Sent::Accepted(_)
    ));
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    each_rule_of_a_send,
    a_key_binds_one_body,
}
