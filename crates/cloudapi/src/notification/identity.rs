//! Who a notification is about: the sender of a message and the recipient of a status,
//! from the message's own fields completed by `value.contacts[]` (BSUIDs, usernames; 2026),
//! and the network's BSUID replacements (`user_id_update`).

use serde::Serialize;
use serde_json::Value;

use super::{
    Contact, InboundMessage, MessagesValue, Metadata, StatusUpdate, ident, int, parse_metadata,
    string,
};

impl MessagesValue {
    /// Profile name of a sender, from `contacts[]`.
    pub fn profile_name(&self, wa_id: &str) -> Option<&str> {
        self.contacts
            .iter()
            .find(|c| c.wa_id.as_deref() == Some(wa_id))
            .and_then(|c| c.profile_name.as_deref())
    }

    /// Everything known about the sender of `m`: the message's own `from` /
    /// `from_user_id` / `from_parent_user_id`, completed from the matching `contacts[]` entry
    /// (matched by user id first, then by wa_id; when the message names neither and the value
    /// has exactly one contact, that one).
    pub fn sender(&self, m: &InboundMessage) -> Sender {
        let contact = self.matching_contact(m.from_user_id.as_deref(), m.from.as_deref(), true);
        Sender::merge(
            m.from.as_deref(),
            m.from_user_id.as_deref(),
            m.from_parent_user_id.as_deref(),
            contact,
        )
    }

    /// Everything known about the recipient of the message a status is about: the status's
    /// `recipient_id` (a phone wa_id; not for group statuses, where it is the group id),
    /// `recipient_user_id` and `recipient_parent_user_id`, completed from `contacts[]` like
    /// [`Self::sender`] (the network adds `contacts[]` beside statuses since 2026, with
    /// `profile.username` on delivered/read). A group status never borrows the only contact.
    pub fn recipient(&self, s: &StatusUpdate) -> Sender {
        let group = s.recipient_type.as_deref() == Some("group");
        let phone = s.recipient_id.as_deref().filter(|_| !group);
        let contact = self.matching_contact(s.recipient_user_id.as_deref(), phone, !group);
        Sender::merge(
            phone,
            s.recipient_user_id.as_deref(),
            s.recipient_parent_user_id.as_deref(),
            contact,
        )
    }

    /// The contact with this user id, else with this wa_id, else (when `single` and neither
    /// is known) the value's only contact.
    fn matching_contact(
        &self,
        user_id: Option<&str>,
        wa_id: Option<&str>,
        single: bool,
    ) -> Option<&Contact> {
        if let Some(u) = user_id
            && let Some(c) = self
                .contacts
                .iter()
                .find(|c| c.user_id.as_deref() == Some(u))
        {
            return Some(c);
        }
        if let Some(w) = wa_id
            && let Some(c) = self.contacts.iter().find(|c| c.wa_id.as_deref() == Some(w))
        {
            return Some(c);
        }
        match (user_id, wa_id, self.contacts.as_slice()) {
            (None, None, [only]) if single => Some(only),
            _ => None,
        }
    }
}

/// All identifiers known for the user a message came from or a status is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Sender {
    /// Phone digits (no `+`).
    pub wa_id: Option<String>,
    /// Business-scoped user id.
    pub user_id: Option<String>,
    pub parent_user_id: Option<String>,
    pub username: Option<String>,
    pub profile_name: Option<String>,
}

impl Sender {
    fn merge(
        wa_id: Option<&str>,
        user_id: Option<&str>,
        parent_user_id: Option<&str>,
        contact: Option<&Contact>,
    ) -> Self {
        let pick = |own: Option<&str>, from_contact: Option<&Option<String>>| {
            own.map(str::to_owned)
                .or_else(|| from_contact.cloned().flatten())
        };
        Self {
            wa_id: pick(wa_id, contact.map(|c| &c.wa_id)),
            user_id: pick(user_id, contact.map(|c| &c.user_id)),
            parent_user_id: pick(parent_user_id, contact.map(|c| &c.parent_user_id)),
            username: contact.and_then(|c| c.username.clone()),
            profile_name: contact.and_then(|c| c.profile_name.clone()),
        }
    }
}

/// `value` of a `user_id_update` change (shape: see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct UserIdUpdates {
    pub messaging_product: Option<String>,
    pub metadata: Metadata,
    pub changes: Vec<UserIdChange>,
    /// Items without a new `user_id`, kept raw.
    pub malformed: Vec<Value>,
}

/// One user whose business-scoped user id changed (e.g. after changing phone number).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UserIdChange {
    /// Phone digits, when known.
    pub wa_id: Option<String>,
    /// The old BSUID.
    pub previous_user_id: Option<String>,
    /// The new BSUID.
    pub user_id: String,
    pub parent_user_id: Option<String>,
    /// Seconds since epoch.
    pub timestamp: Option<i64>,
    pub raw: Value,
}

pub(super) fn parse_user_id_updates(v: &Value) -> UserIdUpdates {
    let mut out = UserIdUpdates {
        messaging_product: string(v, "messaging_product"),
        metadata: parse_metadata(v),
        ..Default::default()
    };
    let items: &[Value] = match v.get("user_id_update") {
        Some(Value::Array(a)) => a,
        Some(one @ Value::Object(_)) => std::slice::from_ref(one),
        Some(_) => &[],
        // The value itself may be the single item.
        None if v.get("user_id").is_some() || v.get("previous_user_id").is_some() => {
            std::slice::from_ref(v)
        }
        None => &[],
    };
    for item in items {
        match parse_user_id_change(item) {
            Some(c) => out.changes.push(c),
            None => out.malformed.push(item.clone()),
        }
    }
    out
}

fn parse_user_id_change(item: &Value) -> Option<UserIdChange> {
    // `"user_id": "<new>"` or `"user_id": {"previous": "<old>", "current": "<new>"}`.
    let pair = |key: &str| -> (Option<String>, Option<String>) {
        match item.get(key) {
            Some(o @ Value::Object(_)) => (ident(o, "previous"), ident(o, "current")),
            _ => (None, ident(item, key)),
        }
    };
    let (old_user, new_user) = pair("user_id");
    let (_, parent) = pair("parent_user_id");
    Some(UserIdChange {
        wa_id: ident(item, "wa_id"),
        previous_user_id: ident(item, "previous_user_id").or(old_user),
        user_id: new_user?,
        parent_user_id: parent,
        timestamp: int(item, "timestamp"),
        raw: item.clone(),
    })
}
