//! What the layout of a signed-in page shows around its content: the person, their
//! organisations (for the switcher), the current one, the active navigation item, flash
//! messages and the CSRF token of the layout's forms (switcher, sign out). The session
//! layer fills it; pages only pass it to their template.

/// A navigation item: (item, label, address).
pub type NavItem = (Nav, &'static str, &'static str);

/// The main navigation's items.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nav {
    Overview,
    Messages,
    Conversations,
    Contacts,
    Templates,
    Campaigns,
    /// The request log.
    Requests,
    Keys,
    Webhooks,
    Members,
    Audit,
    /// The organisation's settings.
    Settings,
    /// Usage and plan.
    Usage,
    /// A page outside the navigation (profile, sessions, the home page).
    None,
}

impl Nav {
    /// The items in order: (item, label, address).
    pub const ITEMS: [(Nav, &'static str, &'static str); 13] = [
        (Nav::Overview, "Overview", "/app/overview"),
        (Nav::Messages, "Messages", "/app/messages"),
        (Nav::Conversations, "Conversations", "/app/conversations"),
        (Nav::Contacts, "Contacts", "/app/contacts"),
        (Nav::Templates, "Templates", "/app/templates"),
        (Nav::Campaigns, "Campaigns", "/app/campaigns"),
        (Nav::Requests, "Request log", "/app/requests"),
        (Nav::Keys, "Keys", "/app/keys"),
        (Nav::Webhooks, "Webhooks", "/app/webhooks"),
        (Nav::Members, "Members", "/app/members"),
        (Nav::Audit, "Audit log", "/app/audit"),
        (Nav::Settings, "Settings", "/app/settings"),
        (Nav::Usage, "Usage and plan", "/app/usage"),
    ];

    /// The items in two labelled groups: the organisation's messaging, then what builds
    /// and manages the integration.
    pub const GROUPS: [(&'static str, &'static [NavItem]); 2] = {
        let (work, manage) = Nav::ITEMS.split_at(6);
        [("Messaging", work), ("Build and manage", manage)]
    };

    /// The item's label (`None` for a page outside the navigation).
    pub fn label(self) -> Option<&'static str> {
        Nav::ITEMS
            .iter()
            .find(|(item, _, _)| *item == self)
            .map(|(_, label, _)| *label)
    }
}

/// The signed-in person.
#[derive(Clone, Debug)]
pub struct Person {
    pub name: String,
    pub email: String,
}

/// One organisation the person belongs to.
#[derive(Clone, Debug)]
pub struct OrgChoice {
    pub id: String,
    pub name: String,
    /// `owner`, `admin` or `developer`.
    pub role: String,
}

/// The kind of a flash message (its look, and whether screen readers are interrupted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashKind {
    Success,
    Error,
    Info,
}

impl FlashKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FlashKind::Success => "success",
            FlashKind::Error => "error",
            FlashKind::Info => "info",
        }
    }
}

/// A one-time message shown above the page's content ("Key revoked").
#[derive(Clone, Debug)]
pub struct Flash {
    pub kind: FlashKind,
    pub text: String,
}

/// The frame of a signed-in page.
#[derive(Clone)]
pub struct Frame {
    pub person: Person,
    pub orgs: Vec<OrgChoice>,
    /// The id of the organisation shown.
    pub current_org: String,
    /// The session's CSRF token, for the layout's forms and the page's own.
    pub csrf_token: String,
    pub nav: Nav,
    pub flash: Vec<Flash>,
}

impl Frame {
    /// Whether `item` is the page's navigation item (for `aria-current`).
    pub fn is_current(&self, item: &Nav) -> bool {
        self.nav == *item
    }

    /// Whether `org` is the organisation shown (selected in the switcher).
    pub fn is_current_org(&self, org: &OrgChoice) -> bool {
        self.current_org == org.id
    }

    /// The organisation shown, when the person still belongs to it.
    pub fn current(&self) -> Option<&OrgChoice> {
        self.orgs.iter().find(|o| o.id == self.current_org)
    }
}

#[cfg(test)]
impl Frame {
    /// The frame of the pages' template tests: Ada, `role` in Acme (`o1`), on `nav`.
    pub fn sample(email: &str, role: &str, nav: Nav) -> Frame {
        Frame {
            person: Person {
                name: "Ada".into(),
                email: email.into(),
            },
            orgs: vec![OrgChoice {
                id: "o1".into(),
                name: "Acme".into(),
                role: role.into(),
            }],
            current_org: "o1".into(),
            csrf_token: "tok".into(),
            nav,
            flash: vec![],
        }
    }
}

/// The token is a secret of the session: never in a log line.
impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame")
            .field("person", &self.person)
            .field("orgs", &self.orgs)
            .field("current_org", &self.current_org)
            .field("csrf_token", &"<redacted>")
            .field("nav", &self.nav)
            .field("flash", &self.flash)
            .finish()
    }
}
