//! Enums with a fixed set of snake_case names: the states and kinds Tern stores and shows.
//! One macro so every such enum parses, prints, serialises and converts from a stored
//! string the same way (`try_from = "String"` in the store's rows).

/// A stored or received name that is not one of the enum's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a known {kind}")]
pub struct UnknownName {
    pub kind: &'static str,
    pub value: String,
}

macro_rules! name_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }

            pub fn parse(s: &str) -> Option<$name> {
                match s { $($s => Some($name::$variant),)+ _ => None }
            }

            /// The accepted names, for error messages.
            pub fn names() -> String {
                Self::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::names::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $name::parse(s).ok_or_else(|| $crate::names::UnknownName {
                    kind: stringify!($name),
                    value: s.to_string(),
                })
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::names::UnknownName;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&s).ok_or_else(|| {
                    serde::de::Error::custom(format!("expected one of: {}", $name::names()))
                })
            }
        }
    };
}
pub(crate) use name_enum;
