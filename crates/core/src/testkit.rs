//! The seed of a test (`testkit` feature): an organisation with its plan and overrides,
//! members, numbers, API keys, contacts and approved templates, written as an operator and
//! the network would write them.
//!
//! ```text
//! let acme = Seed::org("Acme")
//!     .limit(Entitlement::Contacts, 3)
//!     .number(PNID)
//!     .key("owner@acme.test", Preset::FullAccess)
//!     .approved_template("hello", json!([{"type": "BODY", "text": "Hi"}]))
//!     .create(&db, &key())
//!     .await;
//! ```
//!
//! Organisations, members, numbers and keys go through [`crate::admin`], the operator's
//! real provisioning path (so a seed keeps the plan's limits, seals tokens and hashes keys as
//! `tern admin` does). Contacts and approved templates have no operator write (a contact is
//! created by a send, an inbound message or the API; an approved template comes from the
//! network's review), so they are stored rows. This lives in core, not in the store's test
//! kit: the store cannot depend on core, and a dev-dependency cycle store → core would give
//! the store's tests a second copy of its types; the store's conformance suite seeds its rows
//! through `Db` methods.

use serde_json::Value;
use tern_domain::auth::{Permission, Preset, Role};
use tern_domain::crypto::MasterKey;
use tern_domain::plan::{Entitlement, Overrides, SubscriptionStatus};
use tern_domain::{new_id, time::now_ms};
use tern_store::{Contact, Db, Member, Org, PhoneNumber, Template};
use uuid::Uuid;

use crate::Principal;
use crate::admin::{self, NewNumber};
use crate::keys::CreatedKey;

/// The WABA of seeded numbers and templates unless told otherwise.
pub const WABA: &str = "102290129340398";

/// An organisation to create, with what it holds; see the module docs.
#[must_use]
pub struct Seed {
    name: String,
    plan: String,
    subscription: SubscriptionStatus,
    overrides: Overrides,
    wallet_minor: Option<i64>,
    members: Vec<(String, Role)>,
    numbers: Vec<NumberSeed>,
    keys: Vec<KeySeed>,
    contacts: Vec<String>,
    templates: Vec<(String, String, Value)>,
}

/// A number of a [`Seed`]: connected, 80 messages per second.
#[derive(Clone, Debug)]
pub struct NumberSeed {
    pub phone_number_id: String,
    /// `+1555` and the id's last seven digits unless set.
    pub display_phone_number: String,
    pub waba_id: String,
    pub access_token: String,
    pub throughput_mps: i64,
}

impl NumberSeed {
    pub fn new(phone_number_id: &str) -> Self {
        let tail = &phone_number_id[phone_number_id.len().saturating_sub(7)..];
        NumberSeed {
            phone_number_id: phone_number_id.to_owned(),
            display_phone_number: format!("+1555{tail}"),
            waba_id: WABA.to_owned(),
            access_token: "token".to_owned(),
            throughput_mps: 80,
        }
    }
}

struct KeySeed {
    member: String,
    preset: Option<Preset>,
    permissions: Vec<String>,
    mode: tern_domain::auth::Mode,
}

impl Seed {
    /// An active organisation on the `growth` plan, without overrides, members or anything.
    pub fn org(name: &str) -> Self {
        Seed {
            name: name.to_owned(),
            plan: "growth".to_owned(),
            subscription: SubscriptionStatus::Active,
            overrides: Overrides::default(),
            wallet_minor: None,
            members: Vec::new(),
            numbers: Vec::new(),
            keys: Vec::new(),
            contacts: Vec::new(),
            templates: Vec::new(),
        }
    }

    pub fn plan(mut self, plan: &str) -> Self {
        self.plan = plan.to_owned();
        self
    }

    pub fn subscription(mut self, status: SubscriptionStatus) -> Self {
        self.subscription = status;
        self
    }

    /// The organisation's overrides (the `overrides` JSON of `tern admin org update`).
    pub fn overrides(mut self, overrides: &Value) -> Self {
        self.overrides = Overrides::from_json(overrides);
        self
    }

    /// One count limit overridden.
    pub fn limit(mut self, entitlement: Entitlement, n: u64) -> Self {
        self.overrides
            .limits
            .insert(entitlement.as_str().to_owned(), n);
        self
    }

    /// The wallet's balance, in minor units (through the ledger, as an adjustment).
    pub fn wallet(mut self, minor: i64) -> Self {
        self.wallet_minor = Some(minor);
        self
    }

    pub fn member(mut self, email: &str, role: Role) -> Self {
        self.members.push((email.to_owned(), role));
        self
    }

    /// A connected number `phone_number_id` of [`WABA`] (see [`NumberSeed::new`]).
    pub fn number(self, phone_number_id: &str) -> Self {
        self.number_seed(NumberSeed::new(phone_number_id))
    }

    pub fn number_seed(mut self, number: NumberSeed) -> Self {
        self.numbers.push(number);
        self
    }

    /// A key of the member `email` (added as an owner if not seeded) with a preset.
    pub fn key(mut self, email: &str, preset: Preset) -> Self {
        self.keys.push(KeySeed {
            member: email.to_owned(),
            preset: Some(preset),
            permissions: Vec::new(),
            mode: tern_domain::auth::Mode::Live,
        });
        self
    }

    /// A test key (its organisation's test space) of the member `email` with `preset`.
    pub fn test_key(mut self, email: &str, preset: Preset) -> Self {
        self.keys.push(KeySeed {
            member: email.to_owned(),
            preset: Some(preset),
            permissions: Vec::new(),
            mode: tern_domain::auth::Mode::Test,
        });
        self
    }

    /// A key of the member `email` (added as an owner if not seeded) with these permissions.
    pub fn key_with(mut self, email: &str, permissions: &[Permission]) -> Self {
        self.keys.push(KeySeed {
            member: email.to_owned(),
            preset: None,
            permissions: permissions.iter().map(|p| p.as_str().to_owned()).collect(),
            mode: tern_domain::auth::Mode::Live,
        });
        self
    }

    /// A contact with this phone number (no name, no fields).
    pub fn contact(mut self, wa_id: &str) -> Self {
        self.contacts.push(wa_id.to_owned());
        self
    }

    /// An approved utility template `name` (en_US) of the first number's WABA ([`WABA`]
    /// without numbers); the network's ids of a seed's templates are 1, 2, … in this order.
    pub fn approved_template(mut self, name: &str, components: Value) -> Self {
        self.templates
            .push((name.to_owned(), "en_US".to_owned(), components));
        self
    }

    /// Writes the seed.
    ///
    /// # Panics
    /// When a write is refused (a seed breaking its own plan's limits, say): a test's setup
    /// is wrong, not the code under test.
    pub async fn create(self, db: &Db, key: &MasterKey) -> Seeded {
        let org = admin::create_org(db, &self.name, &self.plan)
            .await
            .expect("seed: create the organisation");
        let mut org_row = org;
        org_row.overrides = self.overrides.to_json();
        org_row.subscription_status = self.subscription;
        let org = admin::update_org(db, org_row, self.wallet_minor)
            .await
            .expect("seed: set the overrides and wallet");
        let mut members = Vec::new();
        let key_members = self.keys.iter().map(|k| (k.member.clone(), Role::Owner));
        for (email, role) in self.members.into_iter().chain(key_members) {
            if members.iter().any(|m: &Member| m.email == email) {
                continue;
            }
            let m = admin::add_member(db, org.id, &email, role)
                .await
                .expect("seed: add a member");
            members.push(m);
        }
        let mut numbers = Vec::new();
        for n in &self.numbers {
            numbers.push(add_number(db, key, org.id, n).await);
        }
        let mut keys = Vec::new();
        for k in &self.keys {
            let member = members
                .iter()
                .find(|m| m.email == k.member)
                .expect("seeded above");
            let new = crate::keys::NewKey {
                member_id: member.id,
                name: "test",
                preset: k.preset,
                permissions: &k.permissions,
                mode: k.mode,
            };
            let created =
                crate::keys::create(db, key, &crate::audit::Context::operator(), org.id, new)
                    .await
                    .expect("seed: create a key");
            keys.push(created);
        }
        let now = now_ms();
        let mut contacts = Vec::new();
        for wa_id in &self.contacts {
            let (contact, _) = db
                .upsert_contact_by_wa_id(org.id, wa_id, None, None, new_id(), now)
                .await
                .expect("seed: store a contact");
            contacts.push(contact);
        }
        let waba = numbers.first().map_or(WABA, |n| n.waba_id.as_str());
        let mut templates = Vec::new();
        for (i, (name, language, components)) in self.templates.into_iter().enumerate() {
            let network_id = (i + 1).to_string();
            let t = approved_template(db, org.id, waba, &name, &language, &network_id, components);
            templates.push(t.await);
        }
        Seeded {
            org,
            members,
            numbers,
            keys,
            contacts,
            templates,
        }
    }
}

/// Adds `number` to the organisation `org_id` as `tern admin number add` does.
///
/// # Panics
/// If it is refused.
pub async fn add_number(
    db: &Db,
    key: &MasterKey,
    org_id: Uuid,
    number: &NumberSeed,
) -> PhoneNumber {
    admin::add_number(
        db,
        key,
        NewNumber {
            org_id,
            phone_number_id: &number.phone_number_id,
            display_phone_number: number.display_phone_number.clone(),
            waba_id: &number.waba_id,
            access_token: &number.access_token,
            throughput_mps: number.throughput_mps,
        },
    )
    .await
    .expect("seed: add a number")
}

/// Stores a utility template approved by the network, which knows it as `network_id` (the
/// `message_template_id` of its status notifications).
///
/// # Panics
/// If it cannot be stored.
pub async fn approved_template(
    db: &Db,
    org_id: Uuid,
    waba_id: &str,
    name: &str,
    language: &str,
    network_id: &str,
    components: Value,
) -> Template {
    let now = now_ms();
    let t = Template {
        id: new_id(),
        org_id,
        waba_id: waba_id.to_owned(),
        name: name.to_owned(),
        language: language.to_owned(),
        category: tern_domain::template::Category::Utility,
        status: tern_domain::template::TemplateStatus::Approved,
        components,
        rejection_reason: None,
        network_id: Some(network_id.to_owned()),
        created_at: now,
        updated_at: now,
    };
    db.insert_template(&t)
        .await
        .expect("seed: store an approved template");
    t
}

/// What a [`Seed`] wrote, in the order it was given.
pub struct Seeded {
    pub org: Org,
    /// The members, then the members added for keys.
    pub members: Vec<Member>,
    pub numbers: Vec<PhoneNumber>,
    /// Each key with its plaintext (for a bearer header).
    pub keys: Vec<CreatedKey>,
    pub contacts: Vec<Contact>,
    pub templates: Vec<Template>,
}

impl Seeded {
    /// The seeded member `email`.
    ///
    /// # Panics
    /// If the seed has no such member.
    pub fn member(&self, email: &str) -> &Member {
        self.members
            .iter()
            .find(|m| m.email == email)
            .unwrap_or_else(|| panic!("no seeded member {email}"))
    }

    /// A caller of the organisation with every permission (an owner's key).
    pub fn principal(&self) -> Principal {
        principal(&self.org)
    }
}

/// A caller of `org` with every permission (an owner's key).
pub fn principal(org: &Org) -> Principal {
    let key_id = new_id();
    Principal {
        org_id: org.id,
        mode: if org.is_test_space() {
            tern_domain::auth::Mode::Test
        } else {
            tern_domain::auth::Mode::Live
        },
        key_id,
        actor: crate::audit::Actor::Key {
            id: key_id,
            name: "test".to_string(),
            prefix: "tern_test".to_string(),
        },
        address: None,
        role: Role::Owner,
        permissions: Permission::ALL.to_vec(),
        overrides: Overrides::from_json(&org.overrides),
        org: org.clone(),
    }
}

/// Fails when an entry (of the audit log, the request log) holds one of `secrets` (a key
/// value, a webhook secret).
pub fn assert_no_secret<T: std::fmt::Debug>(entries: &[T], secrets: &[&str]) {
    for e in entries {
        let text = format!("{e:?}");
        for s in secrets {
            assert!(!text.contains(s), "a secret in {text}");
        }
    }
}
