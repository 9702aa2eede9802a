//! One addressing rule, reached three ways: `messages::send::accept` (POST /messages), a
//! campaign's resolve and its fan-out decide alike for the same contact: sent to its phone or
//! BSUID, or refused / skipped for the same reason (no address, opted out, a template that
//! needs a phone number).
//!
//! Fan-out is made to decide by itself: its campaign is resolved while nobody has opted out
//! and before the template is approved (so no recipient is skipped at resolve), and the
//! opt-outs and the approval come after.

use serde_json::{Value, json};
use tern_core::campaigns::{self, fanout};
use tern_core::contacts::{self, Upsert};
use tern_core::messages::send::{self, Send, Sent};
use tern_core::{Core, Principal};
use tern_domain::campaign::{Action, Bucket};
use tern_domain::contact::Consent;
use tern_domain::time::now_ms;
use tern_domain::{ErrorCode, Problem};
use tern_store::{ContactKey, ContactRef, Db, Org};
use uuid::Uuid;

use crate::fixtures::{self, PNID, WABA};

/// A contact: its phone, its BSUID, whether it opts out.
struct Who {
    name: &'static str,
    wa_id: Option<&'static str>,
    user_id: Option<&'static str>,
    opted_out: bool,
}

const CONTACTS: [Who; 5] = [
    Who {
        name: "phone only",
        wa_id: Some("447700900101"),
        user_id: None,
        opted_out: false,
    },
    Who {
        name: "BSUID only",
        wa_id: None,
        user_id: Some("GB.1000000000000000002"),
        opted_out: false,
    },
    Who {
        name: "phone and BSUID",
        wa_id: Some("447700900103"),
        user_id: Some("GB.1000000000000000003"),
        opted_out: false,
    },
    Who {
        name: "opted out, phone",
        wa_id: Some("447700900104"),
        user_id: None,
        opted_out: true,
    },
    Who {
        name: "opted out, BSUID",
        wa_id: None,
        user_id: Some("GB.1000000000000000005"),
        opted_out: true,
    },
];

/// What happened to a contact: a message (or, at resolve, a pending recipient), or the
/// reason it was refused or skipped.
#[derive(Debug, Clone, PartialEq)]
enum Decision {
    Sent,
    Not(String),
}

fn not(reason: &str) -> Decision {
    Decision::Not(reason.to_string())
}

/// The template a case sends: its name, category, components and the one variable.
struct Tpl {
    name: &'static str,
    category: &'static str,
    components: fn() -> Value,
    variable: &'static str,
}

const GREETING: Tpl = Tpl {
    name: "greeting",
    category: "utility",
    components: || json!([{"type": "BODY", "text": "Hello {{1}}"}]),
    variable: "Ann",
};

/// An authentication template with a copy-code button: the network sends it only to a phone.
const LOGIN_CODE: Tpl = Tpl {
    name: "login_code",
    category: "authentication",
    components: || {
        json!([{"type": "BODY", "text": "{{1}} is your verification code."},
               {"type": "BUTTONS", "buttons": [{"type": "OTP", "otp_type": "COPY_CODE", "text": "Copy code"}]}])
    },
    variable: "123456",
};

async fn approve(db: &Db, org: &Org, t: &Tpl) {
    let now = now_ms();
    db.insert_template(&tern_store::Template {
        id: tern_domain::new_id(),
        org_id: org.id,
        waba_id: WABA.into(),
        name: t.name.into(),
        language: "en_US".into(),
        category: t.category.parse().unwrap(),
        status: "approved".parse().unwrap(),
        components: (t.components)(),
        rejection_reason: None,
        network_id: Some("1".into()),
        created_at: now,
        updated_at: now,
    })
    .await
    .unwrap();
}

/// The contact, created as the network or the API would.
async fn contact(db: &Db, core: &Core, p: &Principal, org: &Org, w: &Who) -> Uuid {
    let (Some(wa_id), Some(user_id)) = (w.wa_id, w.user_id) else {
        let key = match (w.wa_id, w.user_id) {
            (Some(wa), _) => ContactKey::WaId(wa),
            (_, Some(u)) => ContactKey::UserId(u),
            _ => unreachable!("every case has an address"),
        };
        let u = Upsert {
            key,
            name: None,
            custom_fields: None,
            tags: &[],
        };
        return contacts::upsert(core, p, u).await.unwrap().0.id;
    };
    // Known by both: the customer writes with their phone and BSUID.
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": WABA, "changes": [{
        "field": "messages", "value": {
            "messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550000000", "phone_number_id": PNID},
            "contacts": [{"profile": {"name": "Kim"}, "wa_id": wa_id, "user_id": user_id}],
            "messages": [{"from": wa_id, "from_user_id": user_id,
                "id": format!("wamid.{}", Uuid::now_v7().simple()),
                "timestamp": (now_ms() / 1000).to_string(), "type": "text", "text": {"body": "hi"}}]}}]}]});
    tern_core::inbox::apply(db, body.to_string().as_bytes())
        .await
        .unwrap();
    let c = db
        .get_contact_by_wa_id(org.id, wa_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.user_id.as_deref(), Some(user_id));
    c.id
}

fn campaign_body(t: &Tpl, ids: &[Uuid]) -> Value {
    json!({"name": "Same rule", "template": {"name": t.name, "language": "en_US", "variables": [t.variable]},
           "audience": {"contact_ids": ids}})
}

/// Each recipient's decision, in `ids` order.
async fn recipients(db: &Db, campaign: Uuid, ids: &[Uuid]) -> Vec<Decision> {
    let rows = db
        .list_campaign_recipients(campaign, None, None, 100)
        .await
        .unwrap();
    ids.iter()
        .map(|id| {
            let r = rows
                .iter()
                .find(|r| r.contact_id == *id)
                .expect("a recipient per contact");
            match r.status {
                Bucket::Skipped => Decision::Not(r.reason.clone().unwrap_or_default()),
                Bucket::Pending | Bucket::Queued => Decision::Sent,
                other => panic!("recipient {other:?}"),
            }
        })
        .collect()
}

/// POST /messages to the contact by `contact_id`, as a decision: a refusal by its reason
/// (the campaign's skip reason where one exists).
async fn accepted(core: &Core, p: &Principal, db: &Db, t: &Tpl, id: Uuid) -> Decision {
    let body = json!({"to": {"contact_id": id}, "type": "template",
                      "template": {"name": t.name, "language": "en_US", "variables": [t.variable]}});
    let options = db.send_options(p.org_id, ContactRef::Id(id)).await.unwrap();
    let s = Send {
        request: tern_domain::send::parse_send(&body).unwrap(),
        options: &options,
        idempotency_key: &Uuid::now_v7().to_string(),
        fingerprint: &tern_domain::send::fingerprint(&body),
        now: now_ms(),
        request_id: None,
    };
    match send::accept(core, p, s).await {
        Ok(Sent::Accepted(_)) => Decision::Sent,
        Ok(Sent::Replayed(_)) => panic!("a fresh key replayed"),
        Err(Problem {
            code: ErrorCode::ContactOptedOut,
            ..
        }) => not("opted_out"),
        Err(Problem {
            code: ErrorCode::NotFound,
            ..
        }) => not("no_address"),
        Err(p) => Decision::Not(
            p.details
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or(p.code.as_str())
                .to_string(),
        ),
    }
}

/// Every contact sent `t` by the three paths; the decisions per contact.
async fn decisions(db: Db, t: &Tpl) -> Vec<(&'static str, [Decision; 3])> {
    let org = fixtures::org(&db, json!({})).await;
    fixtures::number(&db, &org, PNID).await;
    let core = fixtures::core(&db);
    let p = fixtures::principal(&org);
    let now = now_ms();
    let mut ids = Vec::new();
    for w in &CONTACTS {
        ids.push(contact(&db, &core, &p, &org, w).await);
    }
    // Resolved before any opt-out and before the template is approved: nobody is skipped.
    let early = campaigns::create(&core, &p, &campaign_body(t, &ids), now)
        .await
        .unwrap();
    campaigns::act(&core, &p, early.id, Action::Resolve, &Value::Null, now)
        .await
        .unwrap();
    assert!(
        recipients(&db, early.id, &ids)
            .await
            .iter()
            .all(|d| *d == Decision::Sent)
    );
    approve(&db, &org, t).await;
    for (w, id) in CONTACTS.iter().zip(&ids) {
        if w.opted_out {
            contacts::record_consent(&core, &p, *id, Consent::OptedOut, Some("test"), now)
                .await
                .unwrap();
        }
    }
    campaigns::act(&core, &p, early.id, Action::Launch, &Value::Null, now)
        .await
        .unwrap();
    let step = fanout::step(&core, org.id, early.id, now).await.unwrap();
    assert_eq!(step.accepted + step.skipped, ids.len(), "{step:?}");
    let fanned = recipients(&db, early.id, &ids).await;
    // Resolved now: resolve decides.
    let late = campaigns::create(&core, &p, &campaign_body(t, &ids), now)
        .await
        .unwrap();
    campaigns::act(&core, &p, late.id, Action::Resolve, &Value::Null, now)
        .await
        .unwrap();
    let resolved = recipients(&db, late.id, &ids).await;
    let mut out = Vec::new();
    for (i, w) in CONTACTS.iter().enumerate() {
        let sent = accepted(&core, &p, &db, t, ids[i]).await;
        out.push((w.name, [sent, resolved[i].clone(), fanned[i].clone()]));
    }
    out
}

/// Runs `t` and compares each contact's three decisions with `want`.
async fn same_decision(db: Db, t: &Tpl, want: [Decision; 5]) {
    let got = decisions(db, t).await;
    for ((name, [sent, resolved, fanned]), want) in got.into_iter().zip(want) {
        assert_eq!(sent, want, "{name}: accept");
        assert_eq!(resolved, want, "{name}: resolve");
        assert_eq!(fanned, want, "{name}: fan-out");
    }
}

async fn a_template_for_anyone(db: Db) {
    use Decision::Sent;
    let want = [Sent, Sent, Sent, not("opted_out"), not("opted_out")];
    same_decision(db, &GREETING, want).await;
}

async fn a_template_that_needs_a_phone(db: Db) {
    use Decision::Sent;
    let want = [
        Sent,
        not("phone_number_required"),
        Sent,
        not("opted_out"),
        not("opted_out"),
    ];
    same_decision(db, &LOGIN_CODE, want).await;
}

tern_store::both_backends! { tern_store::testkit::TestDb;
    accept_resolve_and_fan_out_address_alike => a_template_for_anyone,
    accept_resolve_and_fan_out_refuse_a_bsuid_alike => a_template_that_needs_a_phone,
}
