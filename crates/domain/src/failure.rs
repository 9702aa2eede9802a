//! Why a message failed: the `failure` object of a Message, built in one place for every
//! path that fails one (the network's status webhooks, the dispatcher, the unknown-outcome
//! sweep).

use serde::{Deserialize, Serialize};

/// `{code, message, provider_code, provider_message[, provider_href]}`: Tern's code and a
/// plain explanation, the network's code and wording (null when the network gave none), and
/// the network's link only when it offered one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub code: String,
    pub message: String,
    #[serde(default, deserialize_with = "code_string")]
    pub provider_code: Option<String>,
    #[serde(default)]
    pub provider_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_href: Option<String>,
}

/// Older rows may hold the network's code as a number.
fn code_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<serde_json::Value>::deserialize(d)? {
        Some(serde_json::Value::String(s)) => Some(s),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    })
}

impl Failure {
    /// A failure Tern decided itself (no network code).
    pub fn tern(code: &str, explanation: impl Into<String>) -> Failure {
        Failure {
            code: code.to_string(),
            message: explanation.into(),
            provider_code: None,
            provider_message: None,
            provider_href: None,
        }
    }

    /// With the network's code, wording and link.
    pub fn with_provider(
        mut self,
        code: Option<String>,
        message: Option<String>,
        href: Option<&str>,
    ) -> Failure {
        self.provider_code = code;
        self.provider_message = message;
        self.provider_href = href.map(str::to_string);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn href_only_when_given_and_numeric_codes_read() {
        let v = serde_json::to_value(Failure::tern("c", "m").with_provider(
            Some("131026".into()),
            None,
            None,
        ))
        .unwrap();
        assert!(v.get("provider_href").is_none());
        assert!(v["provider_message"].is_null());
        assert_eq!(v["provider_code"], "131026");
        let f: Failure = serde_json::from_value(json!({"code": "x", "message": "m",
            "provider_code": 131026, "provider_href": "https://x.test"}))
        .unwrap();
        assert_eq!(f.provider_code.as_deref(), Some("131026"));
        assert_eq!(f.provider_href.as_deref(), Some("https://x.test"));
    }
}
