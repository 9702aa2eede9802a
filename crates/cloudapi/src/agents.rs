//! The network's words for conversations with agents: read marks with a typing indicator,
//! and the block list (`/{pnid}/block_users`).
//!
//! * Read: `POST /{pnid}/messages` `{"messaging_product": "whatsapp", "status": "read",
//!   "message_id": "<wamid>", "typing_indicator"?: {"type": "text"}}` → `{"success": true}`;
//!   an unknown (or too old) message id is error 131009.
//! * Block / unblock: `POST` / `DELETE /{pnid}/block_users` `{"messaging_product":
//!   "whatsapp", "block_users": [{"user": "<wa_id or BSUID>"}]}` (at most 1,000 users) →
//!   `{"messaging_product": "whatsapp", "block_users": {"added_users" | "removed_users":
//!   [{"input", "wa_id"}], "failed_users": [{"input", "errors": [{"code", "message"}]}]}}`:
//!   the request succeeds as a whole and each user has their own outcome.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::value_as_string;
use crate::send::MESSAGING_PRODUCT;

/// Mark an inbound message as read, optionally showing a typing indicator (the network ends
/// it when the business's reply is sent, or after 25 seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkReadPayload {
    pub messaging_product: String,
    pub status: String,
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typing_indicator: Option<TypingIndicator>,
}

/// `{"type": "text"}`: the only kind of typing indicator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypingIndicator {
    #[serde(rename = "type")]
    pub kind: String,
}

impl MarkReadPayload {
    pub fn new(wamid: impl Into<String>, typing: bool) -> Self {
        Self {
            messaging_product: MESSAGING_PRODUCT.to_owned(),
            status: "read".to_owned(),
            message_id: wamid.into(),
            typing_indicator: typing.then(|| TypingIndicator {
                kind: "text".to_owned(),
            }),
        }
    }
}

/// The body of a block or unblock request: the users by wa_id (phone digits) or BSUID.
pub fn block_users_body(users: &[&str]) -> Value {
    serde_json::json!({
        "messaging_product": MESSAGING_PRODUCT,
        "block_users": users.iter().map(|u| serde_json::json!({"user": u})).collect::<Vec<_>>(),
    })
}

/// One user's outcome of a block or unblock request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserOutcome {
    /// Blocked (or unblocked): the network's ids of the user.
    Done {
        input: String,
        wa_id: Option<String>,
        user_id: Option<String>,
    },
    /// The network refused this user.
    Failed {
        input: String,
        /// The first of the user's errors (`code`, `message`); `None` when it gave none.
        code: Option<i64>,
        message: String,
    },
}

impl UserOutcome {
    /// The user as the request named them.
    pub fn input(&self) -> &str {
        match self {
            UserOutcome::Done { input, .. } | UserOutcome::Failed { input, .. } => input,
        }
    }
}

/// Parses the answer of a block (`added_users`) or unblock (`removed_users`) request: every
/// user's outcome, in the answer's order. `None` when the body is not such an answer.
pub fn parse_block_answer(body: &[u8]) -> Option<Vec<UserOutcome>> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let b = v.get("block_users")?.as_object()?;
    let s = |u: &Value, k: &str| u.get(k).and_then(value_as_string).filter(|s| !s.is_empty());
    let mut out = Vec::new();
    for key in ["added_users", "removed_users"] {
        for u in b.get(key).and_then(Value::as_array).into_iter().flatten() {
            out.push(UserOutcome::Done {
                input: s(u, "input").unwrap_or_default(),
                wa_id: s(u, "wa_id"),
                user_id: s(u, "user_id"),
            });
        }
    }
    for u in b
        .get("failed_users")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let first = u
            .get("errors")
            .and_then(Value::as_array)
            .and_then(|e| e.first());
        out.push(UserOutcome::Failed {
            input: s(u, "input").unwrap_or_default(),
            code: first.and_then(|e| e.get("code")).and_then(Value::as_i64),
            message: first
                .and_then(|e| s(e, "message"))
                .unwrap_or_else(|| "The network refused this user.".to_owned()),
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_read_mark_with_and_without_typing() {
        assert_eq!(
            serde_json::to_value(MarkReadPayload::new("wamid.A", false)).unwrap(),
            json!({"messaging_product": "whatsapp", "status": "read", "message_id": "wamid.A"})
        );
        assert_eq!(
            serde_json::to_value(MarkReadPayload::new("wamid.A", true)).unwrap(),
            json!({"messaging_product": "whatsapp", "status": "read", "message_id": "wamid.A",
                   "typing_indicator": {"type": "text"}})
        );
    }

    #[test]
    fn a_block_request_and_its_answer() {
        assert_eq!(
            block_users_body(&["14155550123", "US.1"]),
            json!({"messaging_product": "whatsapp",
                   "block_users": [{"user": "14155550123"}, {"user": "US.1"}]})
        );
        let answer = json!({"messaging_product": "whatsapp", "block_users": {
            "added_users": [{"input": "14155550123", "wa_id": "14155550123"}],
            "failed_users": [{"input": "US.1", "errors": [
                {"code": 139100, "message": "Failed to block user", "error_data": {"details": "x"}}]}]}});
        let got = parse_block_answer(&serde_json::to_vec(&answer).unwrap()).unwrap();
        assert_eq!(
            got,
            vec![
                UserOutcome::Done {
                    input: "14155550123".into(),
                    wa_id: Some("14155550123".into()),
                    user_id: None
                },
                UserOutcome::Failed {
                    input: "US.1".into(),
                    code: Some(139100),
                    message: "Failed to block user".into()
                },
            ]
        );
        let removed = json!({"block_users": {"removed_users": [{"input": "1", "wa_id": "1"}]}});
        let got = parse_block_answer(&serde_json::to_vec(&removed).unwrap()).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].input(), "1");
        assert_eq!(parse_block_answer(b"{\"success\": true}"), None);
        assert_eq!(parse_block_answer(b"<html>"), None);
    }
}
