//! API keys, permissions, roles and presets.
//!
//! A key's effective permissions are the permissions it was created with, intersected with
//! what its creator's role allows *now*: a demoted member's keys lose power at once.

use crate::names::name_enum;
use rand::Rng;
use sha2::{Digest, Sha256};

/// The permissions, named once: the enum, its names, and a marker type per permission
/// (`perm::MessagesSend`) so an HTTP handler states the permission it needs in its type.
macro_rules! permissions {
    ($($variant:ident = $s:literal),+ $(,)?) => {
        name_enum!(
            /// What an API key may do.
            Permission { $($variant = $s),+ }
        );

        /// Marker types, one per [`Permission`].
        pub mod perm {
            use super::{Permission, Required};
            $(
                #[derive(Debug)]
                pub struct $variant;
                impl Required for $variant {
                    const PERMISSION: Permission = Permission::$variant;
                }
            )+
        }
    };
}

/// A permission named at type level (see [`perm`]).
pub trait Required {
    const PERMISSION: Permission;
}

permissions!(
    MessagesSend = "messages.send",
    MessagesRead = "messages.read",
    ContactsCreate = "contacts.create",
    ContactsRead = "contacts.read",
    ContactsUpdate = "contacts.update",
    TemplatesRead = "templates.read",
    TemplatesCreate = "templates.create",
    TemplatesSubmit = "templates.submit",
    CampaignsRead = "campaigns.read",
    CampaignsCreate = "campaigns.create",
    CampaignsUpdate = "campaigns.update",
    CampaignsSend = "campaigns.send",
    DeveloperWebhooksManage = "developer.webhooks.manage",
    NumbersRead = "numbers.read",
);

impl Permission {
    fn is_read(self) -> bool {
        self.as_str().ends_with(".read")
    }
}

name_enum!(
    /// A member's role in an organisation.
    Role { Owner = "owner", Admin = "admin", Developer = "developer" }
);

impl Role {
    /// Owners and admins hold everything; developers cannot send (messages or campaigns).
    pub fn allows(self, p: Permission) -> bool {
        match self {
            Role::Owner | Role::Admin => true,
            Role::Developer => !matches!(p, Permission::MessagesSend | Permission::CampaignsSend),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    SendMessages,
    ReadOnly,
    FullAccess,
}

impl Preset {
    pub fn parse(s: &str) -> Option<Preset> {
        match s {
            "send_messages" => Some(Preset::SendMessages),
            "read_only" => Some(Preset::ReadOnly),
            "full_access" => Some(Preset::FullAccess),
            _ => None,
        }
    }

    /// The permissions the preset asks for. `full_access` means "everything the creator
    /// has", so it is resolved against the role.
    pub fn permissions(self, role: Role) -> Vec<Permission> {
        match self {
            Preset::SendMessages => vec![
                Permission::MessagesSend,
                Permission::MessagesRead,
                Permission::ContactsCreate,
                Permission::NumbersRead,
                Permission::TemplatesRead,
            ],
            Preset::ReadOnly => Permission::ALL
                .iter()
                .copied()
                .filter(|p| p.is_read())
                .collect(),
            Preset::FullAccess => Permission::ALL
                .iter()
                .copied()
                .filter(|p| role.allows(*p))
                .collect(),
        }
    }
}

/// Why a key cannot be created with the requested permissions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyGrantError {
    #[error("unknown permission {0:?}")]
    UnknownPermission(String),
    #[error("the {role} role cannot grant {permission}")]
    ExceedsRole {
        role: &'static str,
        permission: &'static str,
    },
    #[error("a key needs at least one permission")]
    Empty,
}

/// What a key may request, from a preset or an explicit list; checked against the role.
pub fn resolve_grant(
    role: Role,
    preset: Option<Preset>,
    explicit: &[String],
) -> Result<Vec<Permission>, KeyGrantError> {
    let mut perms = match preset {
        Some(p) => p.permissions(role),
        None => explicit
            .iter()
            .map(|s| {
                Permission::parse(s.trim())
                    .ok_or_else(|| KeyGrantError::UnknownPermission(s.clone()))
            })
            .collect::<Result<Vec<_>, _>>()?,
    };
    perms.sort();
    perms.dedup();
    if perms.is_empty() {
        return Err(KeyGrantError::Empty);
    }
    if let Some(p) = perms.iter().find(|p| !role.allows(**p)) {
        return Err(KeyGrantError::ExceedsRole {
            role: role.as_str(),
            permission: p.as_str(),
        });
    }
    Ok(perms)
}

/// The key's stored permissions, limited to what the creator's current role allows.
pub fn effective_permissions(role: Role, stored: &[String]) -> Vec<Permission> {
    stored
        .iter()
        .filter_map(|s| Permission::parse(s))
        .filter(|p| role.allows(*p))
        .collect()
}

/// Which data a key reaches: the organisation's live data, or its test space (objects made
/// with test keys, a number answered by the built-in simulator; APP.md §5).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Live,
    Test,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Test => "test",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "live" => Some(Mode::Live),
            "test" => Some(Mode::Test),
            _ => None,
        }
    }

    /// What keys of this mode start with.
    pub fn key_prefix(self) -> &'static str {
        match self {
            Mode::Live => KEY_PREFIX,
            Mode::Test => TEST_KEY_PREFIX,
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TryFrom<String> for Mode {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Mode::parse(&s).ok_or_else(|| format!("unknown mode {s:?}"))
    }
}

/// Live keys: `tern_` followed by 40 base62 characters (about 238 bits of entropy).
pub const KEY_PREFIX: &str = "tern_";
/// Test keys: `tern_test_` and 40 base62 characters (a live key's body has no `_`, so the
/// two never overlap).
pub const TEST_KEY_PREFIX: &str = "tern_test_";
const KEY_BODY_LEN: usize = 40;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A freshly generated key: the plaintext is shown once, only the hash is stored.
pub struct NewKey {
    pub plaintext: String,
    pub hash: [u8; 32],
    /// Short, non-secret part kept for display (`tern_AbC1234`, `tern_test_AbC1234`).
    pub display_prefix: String,
}

/// A new live key.
pub fn generate_key() -> NewKey {
    generate_key_for(Mode::Live)
}

/// A new key of `mode`.
pub fn generate_key_for(mode: Mode) -> NewKey {
    let mut rng = rand::rng();
    let body: String = (0..KEY_BODY_LEN)
        .map(|_| BASE62[rng.random_range(0..BASE62.len())] as char)
        .collect();
    let prefix = mode.key_prefix();
    let plaintext = format!("{prefix}{body}");
    let hash = hash_key(&plaintext);
    let display_prefix = plaintext[..prefix.len() + 7].to_string();
    NewKey {
        plaintext,
        hash,
        display_prefix,
    }
}

/// SHA-256 is right for high-entropy machine secrets: a slow password hash would only add
/// latency to every request without adding security.
pub fn hash_key(plaintext: &str) -> [u8; 32] {
    Sha256::digest(plaintext.as_bytes()).into()
}

/// Whether a string has the shape of a Tern key (live or test), so garbage never reaches
/// the database.
pub fn looks_like_key(s: &str) -> bool {
    key_mode(s).is_some()
}

/// The mode a key's shape says it has (`None`: not a key).
pub fn key_mode(s: &str) -> Option<Mode> {
    let body_ok = |prefix: &str| {
        s.len() == prefix.len() + KEY_BODY_LEN
            && s.starts_with(prefix)
            && s[prefix.len()..].bytes().all(|b| b.is_ascii_alphanumeric())
    };
    if body_ok(TEST_KEY_PREFIX) {
        Some(Mode::Test)
    } else if body_ok(KEY_PREFIX) {
        Some(Mode::Live)
    } else {
        None
    }
}

/// Extracts the token of an `Authorization: Bearer <token>` header value.
/// The scheme is case-insensitive (RFC 9110); exactly one space-separated token.
pub fn parse_bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    (!token.is_empty() && !token.contains(' ')).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_keys_have_their_own_shape() {
        let live = generate_key();
        let test = generate_key_for(Mode::Test);
        assert!(live.plaintext.starts_with("tern_") && !live.plaintext.starts_with("tern_test_"));
        assert!(test.plaintext.starts_with("tern_test_"));
        assert_eq!(test.plaintext.len(), 50);
        assert_eq!(test.display_prefix.len(), "tern_test_".len() + 7);
        assert_eq!(key_mode(&live.plaintext), Some(Mode::Live));
        assert_eq!(key_mode(&test.plaintext), Some(Mode::Test));
        // A test prefix with a live-length body, or an underscore in the body, is no key.
        assert_eq!(key_mode(&format!("tern_test_{}", "a".repeat(35))), None);
        assert_eq!(
            key_mode(&format!("tern_{}_{}", "a".repeat(20), "b".repeat(19))),
            None
        );
        assert_ne!(hash_key(&live.plaintext), hash_key(&test.plaintext));
    }

    #[test]
    fn developer_cannot_send() {
        let err = resolve_grant(Role::Developer, Some(Preset::SendMessages), &[]).unwrap_err();
        assert_eq!(
            err,
            KeyGrantError::ExceedsRole {
                role: "developer",
                permission: "messages.send"
            }
        );
        let err =
            resolve_grant(Role::Developer, None, &["campaigns.send".to_string()]).unwrap_err();
        assert!(matches!(err, KeyGrantError::ExceedsRole { .. }));
    }

    #[test]
    fn admin_send_preset_matches_design() {
        let perms = resolve_grant(Role::Admin, Some(Preset::SendMessages), &[]).unwrap();
        let names: Vec<_> = perms.iter().map(|p| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "messages.send",
                "messages.read",
                "contacts.create",
                "templates.read",
                "numbers.read"
            ]
        );
    }

    #[test]
    fn full_access_for_developer_excludes_sending() {
        let perms = resolve_grant(Role::Developer, Some(Preset::FullAccess), &[]).unwrap();
        assert!(!perms.contains(&Permission::MessagesSend));
        assert!(!perms.contains(&Permission::CampaignsSend));
        assert!(perms.contains(&Permission::DeveloperWebhooksManage));
        assert_eq!(perms.len(), Permission::ALL.len() - 2);
    }

    #[test]
    fn read_only_is_every_read() {
        let perms = Preset::ReadOnly.permissions(Role::Owner);
        assert!(perms.iter().all(|p| p.as_str().ends_with(".read")));
        assert_eq!(perms.len(), 5);
    }

    #[test]
    fn explicit_list_is_checked() {
        assert_eq!(
            resolve_grant(Role::Owner, None, &["messages.sned".into()]).unwrap_err(),
            KeyGrantError::UnknownPermission("messages.sned".into())
        );
        assert_eq!(
            resolve_grant(Role::Owner, None, &[]).unwrap_err(),
            KeyGrantError::Empty
        );
    }

    #[test]
    fn effective_permissions_follow_current_role() {
        let stored = vec![
            "messages.send".to_string(),
            "messages.read".to_string(),
            "bogus".into(),
        ];
        assert_eq!(
            effective_permissions(Role::Developer, &stored),
            vec![Permission::MessagesRead]
        );
        assert_eq!(effective_permissions(Role::Admin, &stored).len(), 2);
    }

    #[test]
    fn generated_keys_have_the_documented_shape() {
        let k = generate_key();
        assert!(looks_like_key(&k.plaintext));
        assert_eq!(k.hash, hash_key(&k.plaintext));
        assert!(k.plaintext.starts_with(&k.display_prefix));
        assert_ne!(generate_key().plaintext, k.plaintext);
        assert!(!looks_like_key("tern_short"));
        assert!(!looks_like_key(&format!("tern_{}", "é".repeat(20))));
    }

    #[test]
    fn bearer_parsing() {
        assert_eq!(parse_bearer("Bearer abc"), Some("abc"));
        assert_eq!(parse_bearer("bearer abc"), Some("abc"));
        assert_eq!(parse_bearer("Basic abc"), None);
        assert_eq!(parse_bearer("Bearer"), None);
        assert_eq!(parse_bearer("Bearer "), None);
        assert_eq!(parse_bearer("Bearer a b"), None);
    }
}
