//! The Message `failure` object, built in one place for every worker that fails a message
//! (network status webhooks, the dispatcher, the unknown-outcome sweep).

use serde_json::{Value, json};

/// `{code, message, provider_code, provider_message[, provider_href]}`: Tern's code and plain
/// explanation, the network's code and wording (null when the network gave none), and the
/// network's link only when it offered one.
pub fn object(
    code: &str,
    explanation: &str,
    provider_code: Option<String>,
    provider_message: Option<String>,
    provider_href: Option<&str>,
) -> Value {
    let mut obj = json!({
        "code": code,
        "message": explanation,
        "provider_code": provider_code,
        "provider_message": provider_message,
    });
    if let Some(href) = provider_href {
        obj["provider_href"] = Value::String(href.to_string());
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn href_only_when_given() {
        let v = object("c", "m", Some("131026".into()), None, None);
        assert!(v.get("provider_href").is_none());
        assert!(v["provider_message"].is_null());
        let v = object("c", "m", None, None, Some("https://x.test"));
        assert_eq!(v["provider_href"], "https://x.test");
    }
}
