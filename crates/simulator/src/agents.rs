//! Conversations with agents, the network's side: read marks with a typing indicator, and
//! the block list of each number.
//!
//! * A read mark (`POST /{pnid}/messages` with `"status": "read"`) names a customer's
//!   message received by this number in the last 30 days (else 131009); it marks that
//!   message and the customer's earlier ones to the number read. `typing_indicator` must be
//!   `{"type": "text"}`.
//! * `POST` / `DELETE` / `GET /{pnid}/block_users`: block (only customers who wrote to the
//!   number in the last 24 hours), unblock, list. At most 1,000 users a request; each user
//!   has their own outcome (`added_users` / `removed_users`, `failed_users` with `errors`),
//!   and the request as a whole succeeds (HTTP 200). A blocked customer receives nothing
//!   (a send is refused with 130403) and cannot write to the number.

use std::sync::Arc;

use axum::{
    Json,
    body::Bytes,
    extract::{Path, State},
    http::HeaderMap,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cloud::{authorize_number, check_version, graph};
use crate::graph::GraphErr;
use crate::model::{Number, digits};
use crate::state::{Inner, Sim};

/// How long after its receipt a message can be marked read.
const READ_MAX_AGE_SECS: i64 = 30 * 24 * 3600;
/// Most users one block list request names.
pub const MAX_BLOCK_USERS: usize = 1_000;
/// The per-user error of a block the network refuses.
pub const BLOCK_FAILED: i64 = 139100;

/// A customer's message as the network holds it for read marks.
#[derive(Clone, Debug, Serialize)]
pub struct InboundRecord {
    pub wamid: String,
    pub phone_number_id: String,
    /// The customer's internal key (phone digits, else `user:<BSUID>`).
    #[serde(skip)]
    pub(crate) key: String,
    /// Simulator time (unix seconds) of the message.
    pub timestamp: i64,
    /// Simulator time the business marked it read (directly or by a later message's mark).
    pub read_at: Option<i64>,
    /// Simulator time of the last typing indicator shown with a read mark of this message.
    pub typing_at: Option<i64>,
}

impl Inner {
    /// `POST /{pnid}/messages` with `"status": "read"`: the answer, or the network's refusal.
    pub(crate) fn mark_read(
        &mut self,
        number: &Number,
        payload: &Value,
    ) -> Result<Value, GraphErr> {
        let wamid = payload
            .get("message_id")
            .and_then(Value::as_str)
            .ok_or_else(|| GraphErr::missing("message_id"))?;
        let typing = match payload.get("typing_indicator") {
            None => false,
            Some(t) if t.get("type").and_then(Value::as_str) == Some("text") => true,
            Some(_) => {
                return Err(GraphErr::invalid_param(
                    "typing_indicator must be {\"type\": \"text\"}",
                ));
            }
        };
        let now = self.now_secs();
        let Some(at) = self
            .inbound
            .iter()
            .position(|m| m.wamid == wamid && m.phone_number_id == number.id)
        else {
            return Err(GraphErr::bad_value(
                "message_id does not refer to a message this number received.",
            ));
        };
        let target = self.inbound[at].clone();
        if now - target.timestamp > READ_MAX_AGE_SECS {
            return Err(GraphErr::bad_value(
                "message_id refers to a message received more than 30 days ago.",
            ));
        }
        // Earlier = received before it (the list is in arrival order).
        for m in self.inbound[..=at]
            .iter_mut()
            .filter(|m| m.phone_number_id == number.id && m.key == target.key)
        {
            m.read_at.get_or_insert(now);
        }
        if typing {
            self.inbound[at].typing_at = Some(now);
        }
        Ok(json!({"success": true}))
    }

    /// Whether the business number `pnid` blocked the customer `key`.
    pub(crate) fn is_blocked(&self, pnid: &str, key: &str) -> bool {
        self.blocked.contains(&(pnid.to_owned(), key.to_owned()))
    }

    /// The customer a block list request names (`user`: phone digits or a BSUID): their
    /// key, phone and BSUID, as far as the network knows them.
    fn block_user(&self, user: &str) -> (String, Option<String>, Option<String>) {
        if crate::customers::is_bsuid(user) || crate::customers::is_parent_bsuid(user) {
            let c = self.customer_by_user_id(user);
            let key = self.key_for_user_id(user);
            (key, c.and_then(|c| c.wa_id.clone()), Some(user.to_owned()))
        } else {
            let d = digits(user);
            let c = self.customers.get(&d);
            (
                d.clone(),
                Some(c.and_then(|c| c.wa_id.clone()).unwrap_or(d)),
                c.map(|c| c.user_id.clone()),
            )
        }
    }
}

/// The users of a block list request body, or the network's refusal of the whole request.
fn users(body: &[u8]) -> Result<Vec<String>, GraphErr> {
    let v: Value = serde_json::from_slice(body).map_err(|_| {
        GraphErr::invalid_param("Invalid parameter").details("The request body is not valid JSON.")
    })?;
    if v.get("messaging_product").and_then(Value::as_str) != Some("whatsapp") {
        return Err(GraphErr::invalid_param(
            "The parameter messaging_product is required and must be whatsapp.",
        ));
    }
    let list = v
        .get("block_users")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .ok_or_else(|| GraphErr::missing("block_users"))?;
    if list.len() > MAX_BLOCK_USERS {
        return Err(GraphErr::invalid_param(format!(
            "block_users holds {} users; at most {MAX_BLOCK_USERS} per request.",
            list.len()
        )));
    }
    list.iter()
        .map(|u| {
            u.get("user")
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(str::to_owned)
                .ok_or_else(|| GraphErr::missing("block_users[].user"))
        })
        .collect()
}

fn user_entry(input: &str, wa_id: Option<String>, user_id: Option<String>) -> Value {
    let mut e = json!({"input": input});
    if let Some(w) = wa_id {
        e["wa_id"] = json!(w);
    } else if let Some(u) = user_id {
        e["user_id"] = json!(u);
    }
    e
}

/// `POST /{version}/{pnid}/block_users`.
pub(crate) async fn block_users(
    State(sim): State<Arc<Sim>>,
    Path((version, pnid)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    change(&sim, &version, &pnid, &headers, &body, true)
}

/// `DELETE /{version}/{pnid}/block_users`.
pub(crate) async fn unblock_users(
    State(sim): State<Arc<Sim>>,
    Path((version, pnid)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    change(&sim, &version, &pnid, &headers, &body, false)
}

fn change(
    sim: &Sim,
    version: &str,
    pnid: &str,
    headers: &HeaderMap,
    body: &[u8],
    block: bool,
) -> Response {
    let method = if block { "post" } else { "delete" };
    let number =
        match check_version(version).and_then(|()| authorize_number(sim, headers, pnid, method)) {
            Ok(n) => n,
            Err(e) => return graph(sim, e),
        };
    let users = match users(body) {
        Ok(u) => u,
        Err(e) => return graph(sim, e),
    };
    let mut st = sim.lock();
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for input in &users {
        let (key, wa_id, user_id) = st.block_user(input);
        if block && !st.window_open(&number.id, &key) {
            failed.push(json!({"input": input, "errors": [{
                "code": BLOCK_FAILED,
                "message": "Failed to block user",
                "error_data": {"details": "The user has not messaged this business number in the last 24 hours."},
            }]}));
            continue;
        }
        let entry = (number.id.clone(), key);
        if block {
            st.blocked.insert(entry);
        } else {
            st.blocked.remove(&entry);
        }
        done.push(user_entry(input, wa_id, user_id));
    }
    drop(st);
    let mut result = serde_json::Map::new();
    let key = if block {
        "added_users"
    } else {
        "removed_users"
    };
    result.insert(key.to_owned(), json!(done));
    if !failed.is_empty() {
        result.insert("failed_users".to_owned(), json!(failed));
    }
    Json(json!({"messaging_product": "whatsapp", "block_users": result})).into_response()
}

/// `GET /{version}/{pnid}/block_users`: the number's blocked customers.
pub(crate) async fn list_blocked(
    State(sim): State<Arc<Sim>>,
    Path((version, pnid)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let number = match check_version(&version)
        .and_then(|()| authorize_number(&sim, &headers, &pnid, "get"))
    {
        Ok(n) => n,
        Err(e) => return graph(&sim, e),
    };
    let st = sim.lock();
    let mut data: Vec<Value> = st
        .blocked
        .iter()
        .filter(|(p, _)| *p == number.id)
        .map(|(_, key)| match st.customers.get(key) {
            Some(c) => {
                let mut e = json!({"messaging_product": "whatsapp", "user_id": c.user_id});
                if let Some(w) = &c.wa_id {
                    e["wa_id"] = json!(w);
                }
                e
            }
            None => json!({"messaging_product": "whatsapp", "wa_id": key}),
        })
        .collect();
    data.sort_by_key(Value::to_string);
    Json(json!({"data": data})).into_response()
}
