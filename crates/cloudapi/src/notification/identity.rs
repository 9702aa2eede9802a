//! Who a notification is about: the sender of a message and the recipient of a status,
//! from the message's own fields completed by `value.contacts[]` (BSUIDs, usernames; 2026),
//! and what an identity-change system message (`user_changed_user_id`,
//! `user_changed_number`) says changed.

use serde::Serialize;

use super::{Contact, InboundContent, InboundMessage, MessagesValue, StatusUpdate};

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
    /// has exactly one contact, that one — except for a `system` message, which the network
    /// sends without `contacts`, so a lone contact is another message's sender).
    pub fn sender(&self, m: &InboundMessage) -> Sender {
        let single = !matches!(m.content, InboundContent::System { .. });
        let contact = self.matching_contact(m.from_user_id.as_deref(), m.from.as_deref(), single);
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

/// Identifiers of one customer (any may be missing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Ids {
    /// Phone digits (no `+`).
    pub wa_id: Option<String>,
    /// Business-scoped user id.
    pub user_id: Option<String>,
    pub parent_user_id: Option<String>,
}

/// A customer's identifiers changed: what they were known by, and what replaces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdentityChange {
    /// The identifiers the customer had (to find them by); may be empty when the network
    /// did not say.
    pub previous: Ids,
    /// The identifiers that replace them; a missing one is unchanged.
    pub current: Ids,
}

impl InboundMessage {
    /// What this message says changed about its sender, if it is one of the network's
    /// identity-change `system` messages (reference §11):
    /// * `user_changed_user_id`: a new BSUID `system.user_id` replaces
    ///   `system.previous_user_id` (parent BSUIDs likewise);
    /// * `user_changed_number` (formerly `customer_changed_number`): a new phone
    ///   `system.wa_id` (formerly `new_wa_id`) replaces the phone in `from`, with the new
    ///   BSUID in `system.user_id` when given.
    ///
    /// Either may carry what the other does. The old identifiers fall back to the message's
    /// own `from_user_id` / `from_parent_user_id`, and a `from` phone always names the old
    /// one (unchanged when no new phone is given). `None` for every other message, and when
    /// no new identifier is given.
    pub fn identity_change(&self) -> Option<IdentityChange> {
        let InboundContent::System {
            system_type: Some(kind),
            new_wa_id,
            user_id,
            parent_user_id,
            previous_user_id,
            previous_parent_user_id,
            ..
        } = &self.content
        else {
            return None;
        };
        let known = matches!(
            kind.as_str(),
            "user_changed_user_id" | "user_changed_number" | "customer_changed_number"
        );
        if !known || (new_wa_id.is_none() && user_id.is_none()) {
            return None;
        }
        Some(IdentityChange {
            previous: Ids {
                wa_id: self.from.clone(),
                user_id: previous_user_id
                    .clone()
                    .or_else(|| self.from_user_id.clone()),
                parent_user_id: previous_parent_user_id
                    .clone()
                    .or_else(|| self.from_parent_user_id.clone()),
            },
            current: Ids {
                wa_id: new_wa_id.clone(),
                user_id: user_id.clone(),
                parent_user_id: parent_user_id.clone(),
            },
        })
    }
}

impl Sender {
    /// The sender as they are after `change`: each identifier it gives replaces the old one.
    pub fn after(mut self, change: &IdentityChange) -> Self {
        let c = &change.current;
        for (slot, new) in [
            (&mut self.wa_id, &c.wa_id),
            (&mut self.user_id, &c.user_id),
            (&mut self.parent_user_id, &c.parent_user_id),
        ] {
            if new.is_some() {
                slot.clone_from(new);
            }
        }
        self
    }
}
