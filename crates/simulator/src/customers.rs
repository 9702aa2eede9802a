//! Customers (WhatsApp users) as the simulated network knows them: the phone number when the
//! network shows it, a business-scoped user id (BSUID), an optional parent BSUID and username.
//!
//! BSUIDs are derived from the seed and the phone number (or username), so two runs with the
//! same seed see the same ids. The simulator plays one business portfolio: a customer has one
//! BSUID for every number and WABA.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::model::{Behaviour, Number, RecipientSpec, digits};
use crate::state::{CtlError, Inner, OutKind, Sim};
use crate::validate::ValidSend;

/// A simulated WhatsApp user.
#[derive(Clone, Debug, Serialize)]
pub struct Customer {
    /// Phone digits; `None` when the network withholds the number (username users).
    pub wa_id: Option<String>,
    /// BSUID, `CC.<digits>`.
    pub user_id: String,
    pub parent_user_id: Option<String>,
    pub username: Option<String>,
    pub profile_name: Option<String>,
    pub behaviour: Behaviour,
    pub fail_code: Option<i64>,
    /// Stable internal key (the phone digits, else `user:<first BSUID>`), so windows and pair
    /// limits survive a BSUID change.
    #[serde(skip)]
    pub(crate) key: String,
}

impl Customer {
    /// The `contacts[]` entry of an inbound webhook.
    pub fn inbound_contact(&self, name: &str) -> Value {
        let mut profile = json!({"name": name});
        if let Some(u) = &self.username {
            profile["username"] = json!(u);
        }
        let mut c = json!({"profile": profile, "user_id": self.user_id});
        if let Some(p) = &self.wa_id {
            c["wa_id"] = json!(p);
        }
        if let Some(p) = &self.parent_user_id {
            c["parent_user_id"] = json!(p);
        }
        c
    }
}

/// `POST /_sim/customers` body. At least one of `wa_id` and `username`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomerSpec {
    /// Phone number (separators allowed). Absent: the network withholds it.
    pub wa_id: Option<String>,
    pub username: Option<String>,
    /// BSUID to use instead of the derived one.
    pub user_id: Option<String>,
    pub parent_user_id: Option<String>,
    /// Two-letter country code of a derived BSUID (default: from the phone number, else `US`).
    pub country: Option<String>,
    pub profile_name: Option<String>,
    #[serde(default, alias = "behavior")]
    pub behaviour: Behaviour,
    pub fail_code: Option<i64>,
}

/// Names one customer in control requests: by phone, BSUID (or parent BSUID) or username.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CustomerRef {
    pub wa_id: Option<String>,
    pub user_id: Option<String>,
    pub username: Option<String>,
}

/// `POST /_sim/identity_change` body: a customer gets a new BSUID, or a new phone number
/// (and with it, as on the network, a new BSUID).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityChangeRequest {
    pub wa_id: Option<String>,
    pub user_id: Option<String>,
    pub username: Option<String>,
    /// The new phone number (separators allowed); only for a customer whose phone is shown.
    pub new_wa_id: Option<String>,
    /// The new BSUID (default: derived from the old one).
    pub new_user_id: Option<String>,
    /// Number whose webhook metadata is used (default: one webhook per registered number).
    pub phone_number_id: Option<String>,
}

/// Who a send goes to, resolved against the known customers.
#[derive(Clone, Debug)]
pub struct Target {
    pub key: String,
    /// Phone digits when the network shows them.
    pub wa_id: Option<String>,
    pub user_id: String,
    pub parent_user_id: Option<String>,
    pub username: Option<String>,
    /// Sent with `recipient` (a BSUID), not `to`.
    pub to_bsuid: bool,
    pub behaviour: Behaviour,
    pub fail_code: Option<i64>,
}

/// `CC.` + up to 128 alphanumerics.
pub fn is_bsuid(s: &str) -> bool {
    s.split_once('.')
        .is_some_and(|(cc, rest)| country_ok(cc) && alnum_id(rest))
}

/// `CC.ENT.` + up to 128 alphanumerics.
pub fn is_parent_bsuid(s: &str) -> bool {
    s.split_once(".ENT.")
        .is_some_and(|(cc, rest)| country_ok(cc) && alnum_id(rest))
}

fn country_ok(cc: &str) -> bool {
    cc.len() == 2 && cc.bytes().all(|b| b.is_ascii_uppercase())
}

fn alnum_id(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Usernames: 1–64 characters, no whitespace (the network's exact rules are not published).
fn username_ok(u: &str) -> bool {
    (1..=64).contains(&u.chars().count()) && !u.chars().any(char::is_whitespace)
}

/// Digits only: a client library (pywa 4.5) tells BSUIDs from group ids by `CC.<digits>`.
pub fn derive_bsuid(seed: Option<u64>, country: &str, identity: &str) -> String {
    let h = Sha256::digest(format!("tern-sim-bsuid|{}|{identity}", seed.unwrap_or(0)));
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    let n = u128::from_be_bytes(b) % 100_000_000_000_000_000_000;
    format!("{country}.{n:020}")
}

/// ISO country of a phone number's calling code (common codes; `US` otherwise).
pub fn country_for_phone(phone: &str) -> &'static str {
    const CODES: [(&str, &str); 34] = [
        ("234", "NG"),
        ("254", "KE"),
        ("351", "PT"),
        ("353", "IE"),
        ("966", "SA"),
        ("971", "AE"),
        ("972", "IL"),
        ("20", "EG"),
        ("27", "ZA"),
        ("30", "GR"),
        ("31", "NL"),
        ("32", "BE"),
        ("33", "FR"),
        ("34", "ES"),
        ("39", "IT"),
        ("41", "CH"),
        ("44", "GB"),
        ("49", "DE"),
        ("52", "MX"),
        ("54", "AR"),
        ("55", "BR"),
        ("57", "CO"),
        ("61", "AU"),
        ("62", "ID"),
        ("63", "PH"),
        ("65", "SG"),
        ("81", "JP"),
        ("82", "KR"),
        ("86", "CN"),
        ("90", "TR"),
        ("91", "IN"),
        ("92", "PK"),
        ("1", "US"),
        ("7", "RU"),
    ];
    CODES
        .iter()
        .find(|(p, _)| phone.starts_with(p))
        .map_or("US", |(_, c)| c)
}

impl Inner {
    pub fn customer_by_user_id(&self, id: &str) -> Option<&Customer> {
        self.customers
            .values()
            .find(|c| c.user_id == id || c.parent_user_id.as_deref() == Some(id))
    }

    fn customer_by_username(&self, u: &str) -> Option<&Customer> {
        self.customers
            .values()
            .find(|c| c.username.as_deref() == Some(u))
    }

    pub fn find_customer(&self, r: &CustomerRef) -> Option<&Customer> {
        if let Some(w) = &r.wa_id {
            return self.customers.get(&digits(w));
        }
        if let Some(u) = &r.user_id {
            return self.customer_by_user_id(u);
        }
        r.username
            .as_deref()
            .and_then(|u| self.customer_by_username(u))
    }

    /// The customer with this phone, created (normal behaviour) when unknown.
    pub fn phone_customer(&mut self, seed: Option<u64>, phone: &str) -> Customer {
        self.customers
            .entry(phone.to_owned())
            .or_insert_with(|| Customer {
                wa_id: Some(phone.to_owned()),
                user_id: derive_bsuid(seed, country_for_phone(phone), phone),
                parent_user_id: None,
                username: None,
                profile_name: None,
                behaviour: Behaviour::Normal,
                fail_code: None,
                key: phone.to_owned(),
            })
            .clone()
    }

    /// Create or update a customer. Omitted identity fields of an existing customer are kept.
    pub fn upsert_customer(
        &mut self,
        seed: Option<u64>,
        spec: CustomerSpec,
    ) -> Result<Customer, CtlError> {
        let phone = spec.wa_id.as_deref().map(digits);
        if phone.as_deref() == Some("") {
            return Err(CtlError::bad_request("wa_id must contain digits"));
        }
        if phone.is_none() && spec.username.is_none() {
            return Err(CtlError::bad_request("wa_id or username is required"));
        }
        if let Some(u) = &spec.username
            && !username_ok(u)
        {
            return Err(CtlError::bad_request(format!("invalid username {u:?}")));
        }
        if let Some(id) = &spec.user_id
            && !is_bsuid(id)
        {
            return Err(CtlError::bad_request(format!(
                "user_id {id:?} is not a BSUID (CC.<alphanumerics>)"
            )));
        }
        if let Some(id) = &spec.parent_user_id
            && !is_parent_bsuid(id)
        {
            return Err(CtlError::bad_request(format!(
                "parent_user_id {id:?} is not a parent BSUID (CC.ENT.<alphanumerics>)"
            )));
        }
        if let Some(cc) = &spec.country
            && !country_ok(cc)
        {
            return Err(CtlError::bad_request(
                "country must be two upper-case letters",
            ));
        }
        let existing = match &phone {
            Some(p) => self.customers.get(p),
            None => spec
                .username
                .as_deref()
                .and_then(|u| self.customer_by_username(u))
                .or_else(|| {
                    spec.user_id
                        .as_deref()
                        .and_then(|id| self.customer_by_user_id(id))
                }),
        }
        .cloned();
        let key = existing
            .as_ref()
            .map(|c| c.key.clone())
            .or_else(|| phone.clone());
        let country = spec
            .country
            .clone()
            .unwrap_or_else(|| phone.as_deref().map_or("US", country_for_phone).to_owned());
        let identity = phone
            .clone()
            .or_else(|| spec.username.as_ref().map(|u| format!("@{u}")))
            .unwrap_or_default();
        let user_id = spec
            .user_id
            .or_else(|| existing.as_ref().map(|c| c.user_id.clone()))
            .unwrap_or_else(|| derive_bsuid(seed, &country, &identity));
        let key = key.unwrap_or_else(|| format!("user:{user_id}"));
        let taken = |c: &Customer| c.key != key;
        if self
            .customers
            .values()
            .any(|c| taken(c) && c.user_id == user_id)
        {
            return Err(CtlError::bad_request(format!(
                "user_id {user_id} belongs to another customer"
            )));
        }
        if let Some(u) = &spec.username
            && self
                .customers
                .values()
                .any(|c| taken(c) && c.username.as_deref() == Some(u))
        {
            return Err(CtlError::bad_request(format!(
                "username {u} belongs to another customer"
            )));
        }
        let keep = |new: Option<String>, old: Option<String>| new.or(old);
        let c = Customer {
            wa_id: phone,
            user_id,
            parent_user_id: keep(
                spec.parent_user_id,
                existing.as_ref().and_then(|c| c.parent_user_id.clone()),
            ),
            username: keep(
                spec.username,
                existing.as_ref().and_then(|c| c.username.clone()),
            ),
            profile_name: keep(
                spec.profile_name,
                existing.as_ref().and_then(|c| c.profile_name.clone()),
            ),
            behaviour: spec.behaviour,
            fail_code: spec.fail_code,
            key: key.clone(),
        };
        self.customers.insert(key, c.clone());
        Ok(c)
    }

    /// The sender of an injected inbound message, created when unknown.
    pub fn inbound_customer(
        &mut self,
        seed: Option<u64>,
        from: Option<&str>,
        from_user_id: Option<&str>,
        username: Option<&str>,
    ) -> Result<Customer, CtlError> {
        let found = match (from, from_user_id, username) {
            (Some(p), _, _) => Some(self.phone_customer(seed, p)),
            (None, Some(id), _) => self.customer_by_user_id(id).cloned(),
            (None, None, Some(u)) => self.customer_by_username(u).cloned(),
            (None, None, None) => {
                return Err(CtlError::bad_request(
                    "from, from_user_id or username is required",
                ));
            }
        };
        match found {
            // a username given with a known sender is adopted when the sender has none
            Some(c) if c.username.is_none() && username.is_some() => self.upsert_customer(
                seed,
                CustomerSpec {
                    wa_id: c.wa_id.clone(),
                    username: username.map(str::to_owned),
                    user_id: Some(c.user_id.clone()),
                    behaviour: c.behaviour,
                    fail_code: c.fail_code,
                    ..CustomerSpec::default()
                },
            ),
            Some(c) => Ok(c),
            None => {
                if let Some(id) = from_user_id
                    && !is_bsuid(id)
                {
                    return Err(CtlError::bad_request(format!(
                        "from_user_id {id:?} is not a BSUID"
                    )));
                }
                let user_id = from_user_id.map(str::to_owned).unwrap_or_else(|| {
                    derive_bsuid(seed, "US", &format!("@{}", username.unwrap_or("")))
                });
                if let Some(u) = username
                    && !username_ok(u)
                {
                    return Err(CtlError::bad_request(format!("invalid username {u:?}")));
                }
                let c = Customer {
                    wa_id: None,
                    key: format!("user:{user_id}"),
                    user_id,
                    parent_user_id: None,
                    username: username.map(str::to_owned),
                    profile_name: None,
                    behaviour: Behaviour::Normal,
                    fail_code: None,
                };
                self.customers.insert(c.key.clone(), c.clone());
                Ok(c)
            }
        }
    }

    /// Resolve the recipient of an accepted send. Phone recipients become known customers;
    /// an unknown BSUID behaves like an unknown phone (a normal user).
    pub fn resolve_target(&mut self, seed: Option<u64>, send: &ValidSend) -> Target {
        let to_bsuid = send.recipient.is_some();
        let c = match &send.recipient {
            None => Some(self.phone_customer(seed, &send.wa_id)),
            Some(r) => self.customer_by_user_id(r).cloned(),
        };
        match c {
            Some(c) => Target {
                key: c.key,
                wa_id: c.wa_id,
                user_id: c.user_id,
                parent_user_id: c.parent_user_id,
                username: c.username,
                to_bsuid,
                behaviour: c.behaviour,
                fail_code: c.fail_code,
            },
            None => {
                let r = send.recipient.clone().unwrap_or_default();
                Target {
                    key: format!("bsuid:{r}"),
                    wa_id: None,
                    user_id: r,
                    parent_user_id: None,
                    username: None,
                    to_bsuid,
                    behaviour: Behaviour::Normal,
                    fail_code: None,
                }
            }
        }
    }

    /// Key of the window / pair bucket of a BSUID (known customer or not).
    pub fn key_for_user_id(&self, id: &str) -> String {
        self.customer_by_user_id(id)
            .map_or_else(|| format!("bsuid:{id}"), |c| c.key.clone())
    }
}

impl Sim {
    pub fn register_customer(&self, spec: CustomerSpec) -> Result<Customer, CtlError> {
        self.lock().upsert_customer(self.args.seed, spec)
    }

    /// The phone-only registration of `POST /_sim/recipients`.
    pub fn register_recipient(&self, spec: RecipientSpec) -> Result<RecipientSpec, CtlError> {
        let wa_id = digits(&spec.wa_id);
        if wa_id.is_empty() {
            return Err(CtlError::bad_request("wa_id is required"));
        }
        self.register_customer(CustomerSpec {
            wa_id: Some(wa_id.clone()),
            profile_name: spec.profile_name.clone(),
            behaviour: spec.behaviour,
            fail_code: spec.fail_code,
            ..CustomerSpec::default()
        })?;
        Ok(RecipientSpec { wa_id, ..spec })
    }

    pub fn customers(&self) -> Vec<Customer> {
        self.lock().customers.values().cloned().collect()
    }

    /// Give a customer a new BSUID, or a new phone number and with it a new BSUID, and tell
    /// the business as the network does, with a `system` message on the `messages` field (one
    /// webhook per number, or for `phone_number_id` only) and no `contacts`:
    /// `user_changed_number` (old phone in `from`, new one in `system.wa_id`, new BSUID in
    /// `system.user_id`) or `user_changed_user_id` (new BSUID in `system.user_id`, old one in
    /// `system.previous_user_id`, no `from`). Returns the customer's identifiers before and
    /// after, and the wamids.
    pub fn change_identity(&self, req: IdentityChangeRequest) -> Result<Value, CtlError> {
        let who = CustomerRef {
            wa_id: req.wa_id,
            user_id: req.user_id,
            username: req.username,
        };
        if who.wa_id.is_none() && who.user_id.is_none() && who.username.is_none() {
            return Err(CtlError::bad_request(
                "wa_id, user_id or username is required",
            ));
        }
        let mut st = self.lock();
        let c = st
            .find_customer(&who)
            .cloned()
            .ok_or_else(|| CtlError::not_found("unknown customer"))?;
        let new_phone = match req.new_wa_id.as_deref().map(digits) {
            None => None,
            Some(p) if p.is_empty() => {
                return Err(CtlError::bad_request("new_wa_id must contain digits"));
            }
            Some(_) if c.wa_id.is_none() => {
                return Err(CtlError::bad_request(
                    "the network does not show this customer's phone number",
                ));
            }
            Some(p) if c.wa_id.as_deref() == Some(p.as_str()) || st.customers.contains_key(&p) => {
                return Err(CtlError::bad_request(format!(
                    "wa_id {p} is already in use"
                )));
            }
            Some(p) => Some(p),
        };
        let new_id = match req.new_user_id {
            Some(id) if !is_bsuid(&id) => {
                return Err(CtlError::bad_request(format!(
                    "new_user_id {id:?} is not a BSUID"
                )));
            }
            Some(id) => id,
            None => {
                let cc = c.user_id.split('.').next().unwrap_or("US").to_owned();
                derive_bsuid(self.args.seed, &cc, &format!("update|{}", c.user_id))
            }
        };
        if new_id == c.user_id || st.customer_by_user_id(&new_id).is_some() {
            return Err(CtlError::bad_request(format!(
                "user_id {new_id} is already in use"
            )));
        }
        let numbers: Vec<Number> = match &req.phone_number_id {
            Some(p) => vec![
                st.numbers
                    .get(p)
                    .cloned()
                    .ok_or_else(|| CtlError::not_found(format!("unknown number {p}")))?,
            ],
            None => {
                let mut all: Vec<Number> = st.numbers.values().cloned().collect();
                all.sort_by(|a, b| a.id.cmp(&b.id));
                all
            }
        };
        let mut changed = c.clone();
        changed.user_id.clone_from(&new_id);
        if let Some(p) = &new_phone {
            // The phone is the customer's key: windows follow it.
            changed.wa_id = Some(p.clone());
            changed.key.clone_from(p);
            st.customers.remove(&c.key);
            let windows: Vec<_> = st
                .windows
                .keys()
                .filter(|(_, k)| *k == c.key)
                .cloned()
                .collect();
            for (pnid, old_key) in windows {
                if let Some(t) = st.windows.remove(&(pnid.clone(), old_key)) {
                    st.windows.insert((pnid, p.clone()), t);
                }
            }
        }
        st.customers.insert(changed.key.clone(), changed.clone());
        let now = st.now_secs();
        let name = c.profile_name.clone().unwrap_or_else(|| "User".to_owned());
        let mut messages = Vec::new();
        let mut wamids = Vec::new();
        for n in &numbers {
            let wamid = st.wamid(changed.wa_id.as_deref().unwrap_or(&new_id), false);
            wamids.push(wamid.clone());
            let message = match (&c.wa_id, &new_phone) {
                (Some(old), Some(new)) => json!({
                    "from": old, "id": wamid, "timestamp": now.to_string(), "type": "system",
                    "system": {"body": format!("{name} changed from {old} to {new}"),
                               "wa_id": new, "user_id": new_id, "type": "user_changed_number"}}),
                _ => json!({
                    "id": wamid, "timestamp": now.to_string(), "type": "system",
                    "system": {"body": format!("User changed from {} to {new_id}", c.user_id),
                               "user_id": new_id, "previous_user_id": c.user_id,
                               "type": "user_changed_user_id"}}),
            };
            messages.push((n.clone(), message));
        }
        drop(st);
        for (n, message) in messages {
            self.queue(
                &n,
                OutKind::Inbound {
                    contact: None,
                    message,
                },
            );
        }
        Ok(json!({
            "previous_wa_id": c.wa_id,
            "wa_id": changed.wa_id,
            "previous_user_id": c.user_id,
            "user_id": new_id,
            "wamids": wamids,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bsuid_formats() {
        assert!(is_bsuid("US.13491208655302741918"));
        assert!(is_bsuid("BR.abc123"));
        assert!(!is_bsuid("US.ENT.1"), "a parent BSUID is not a BSUID");
        assert!(!is_bsuid("us.1") && !is_bsuid("USA.1") && !is_bsuid("US.") && !is_bsuid("US.1-2"));
        assert!(!is_bsuid(&format!("US.{}", "1".repeat(129))));
        assert!(is_parent_bsuid("US.ENT.11815799212886844830"));
        assert!(!is_parent_bsuid("US.11815799212886844830"));
    }

    #[test]
    fn derived_bsuids_are_stable_per_seed_and_identity() {
        let a = derive_bsuid(Some(1), "US", "16505551234");
        assert_eq!(a, derive_bsuid(Some(1), "US", "16505551234"));
        assert_ne!(a, derive_bsuid(Some(2), "US", "16505551234"));
        assert_ne!(a, derive_bsuid(Some(1), "US", "16505551235"));
        assert!(is_bsuid(&a) && a.len() == 23, "{a}");
        assert_eq!(country_for_phone("447700900123"), "GB");
        assert_eq!(country_for_phone("972501234567"), "IL");
        assert_eq!(country_for_phone("16505551234"), "US");
    }
}
